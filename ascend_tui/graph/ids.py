"""The one node-id minter: live capture and every offline reader name operators the same way.

An id is `<module path>/<op>.<k>`, where `k` counts that op within that module and phase
(`blocks.0.attn/bmm.0`); ops of the root module have no prefix (`add.0`); ops of a phase
other than forward carry it as a prefix (`backward:fc/mm.0`). So the same model gives the
same ids whichever way it came in, and a target run, a reference run and an msprobe dump
match by id.
"""

from __future__ import annotations

from itertools import repeat
from typing import Iterable

FORWARD = "forward"


class IdMinter:
    """Mints `<phase:><module>/<op>.<k>` ids, counting each (phase, module, op) from 0."""

    __slots__ = ("_counters",)

    def __init__(self) -> None:
        self._counters: dict[tuple[str, str, str], int] = {}

    def mint(self, module: str, op: str, phase: str = FORWARD) -> str:
        """The next id for `op` called inside `module` during `phase`."""
        key = (phase, module, op)
        counters = self._counters
        k = counters.get(key, 0)
        counters[key] = k + 1
        if phase == FORWARD:  # node_id's forward case inline: readers mint 100k ids at a time
            return f"{module}/{op}.{k}" if module else f"{op}.{k}"
        return node_id(module, op, k, phase)

    def mint_all(self, modules: Iterable[str], ops: Iterable[str]) -> list[str]:
        """`mint(module, op)` for each pair in order, forward phase: what a reader's 100k-op loop calls once."""
        counters = self._counters
        get = counters.get
        ids: list[str] = []
        append = ids.append
        for key in zip(repeat(FORWARD), modules, ops):
            k = get(key, 0)
            counters[key] = k + 1
            _, module, op = key
            append(f"{module}/{op}.{k}" if module else f"{op}.{k}")
        return ids

    def peek(self, module: str, op: str, phase: str = FORWARD) -> int:
        """How many ids this (phase, module, op) has minted so far."""
        return self._counters.get((phase, module, op), 0)


def node_id(module: str, op: str, k: int, phase: str = FORWARD) -> str:
    """The id of the `k`-th `op` in `module` during `phase`."""
    prefix = f"{module}/" if module else ""
    if phase != FORWARD:
        prefix = f"{phase}:{prefix}"
    return f"{prefix}{op}.{k}"


_DUNDER_OPS = frozenset({"add", "sub", "mul", "truediv", "floordiv", "div", "matmul", "mod", "pow",
                         "and", "or", "xor", "lshift", "rshift"})


def api_op(api: str) -> str:
    """The op name of a framework API as ids spell it: `mul` for `__mul__`/`__rmul__`, `add_` for `__iadd__`,
    `div` for `__truediv__`; other names unchanged. msprobe's records and live capture's API calls share it."""
    if not (api.startswith("__") and api.endswith("__")):
        return api
    core = api.strip("_")
    inplace = False
    if core not in _DUNDER_OPS and core[:1] in ("i", "r") and core[1:] in _DUNDER_OPS:
        inplace, core = core[0] == "i", core[1:]
    core = "div" if core == "truediv" else core
    return core + "_" if inplace else core
