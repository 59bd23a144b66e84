"""Facts about aten overloads and tensors that capture and the sanitizer both need, computed once.

An overload's schema never changes, so which arguments it writes (and the rest of what the
recorder asks of it on every call) is read once per overload and cached here; a storage's
identity is taken one way everywhere (`storage_key`), so the recorder's write tracking and the
sanitizer's allocation tracking agree on what "the same memory" means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Ops whose single output holds exactly the values of their first input (same elements, same
# dtype): views that reorder or reshape, and plain copies. Their statistics are copied from the
# input's row instead of measured again.
SAME_VALUES = frozenset({
    "view", "_unsafe_view", "_reshape_alias", "reshape", "t", "transpose", "permute", "squeeze", "unsqueeze",
    "detach", "alias", "clone", "contiguous", "flatten", "view_as", "lift_fresh",
})
# Ops whose outputs hold whatever the allocator left there until something writes them.
UNWRITTEN_OUTPUT_OPS = frozenset({"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided",
                                  "empty_permuted"})


@dataclass(frozen=True, slots=True)
class OverloadFacts:
    """What the recorder needs to know about one aten overload on every call."""

    name: str  # the overload packet's name: `add_` for `aten.add_.Tensor`
    op_type: str  # `aten.add_`
    attrs: dict[str, str] | None  # {"overload": "Tensor"} unless it is the default overload
    writes: tuple[tuple[int, str], ...]  # (position, name) of the arguments its schema marks written
    same_values: bool
    unwritten_output: bool


# Keyed by id: `OpOverload.__hash__` is Python code. Overloads are never freed (torch.ops holds
# them), and `_KEEP` holds them too, so an id is never reused.
FACTS: dict[int, OverloadFacts] = {}
_KEEP: list[Any] = []


def overload_facts(func: Any) -> OverloadFacts:
    """The cached `OverloadFacts` of `func` (an `OpOverload`)."""
    found = FACTS.get(id(func))
    if found is None:
        _KEEP.append(func)
        name = func.overloadpacket.__name__
        overload = func._overloadname
        found = FACTS[id(func)] = OverloadFacts(
            name, f"aten.{name}", {"overload": overload} if overload != "default" else None,
            tuple((i, a.name) for i, a in enumerate(func._schema.arguments)
                  if a.alias_info is not None and a.alias_info.is_write),
            name in SAME_VALUES, name in UNWRITTEN_OUTPUT_OPS)
    return found


def write_positions(func: Any) -> tuple[tuple[int, str], ...]:
    """(position, name) of the arguments `func`'s schema marks written (`Tensor(a!)`): in-place and out= targets."""
    return overload_facts(func).writes


def written_args(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The values of this call's written arguments (the elements of a written list flattened in)."""
    written: list[Any] = []
    for i, name in overload_facts(func).writes:
        value = args[i] if i < len(args) else kwargs.get(name)
        if isinstance(value, (list, tuple)):
            written.extend(value)
        elif value is not None:
            written.append(value)
    return written


def storage_key(t: Any) -> int | None:
    """The identity of `t`'s storage (its `StorageImpl` address, which survives `resize_`), None without one."""
    try:
        return int(t.untyped_storage()._cdata)
    except Exception:  # noqa: BLE001 - sparse, meta and wrapper tensors have no plain storage
        return None
