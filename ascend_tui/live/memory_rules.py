"""The sanitizer's rules for one aten call: index bounds (with clamping), reads of never-written elements, writes.

`Sanitizer` holds what one run's checks share (the written-masks, the storages born so far, what was found);
`live.memory` drives it from the capture's dispatch mode and `live.memory_guard` from the light mode of a
coarse-to-fine module pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ascend_tui.checks.memory import (
    ALLOC_OPS,
    BETA_OPS,
    INDEX_RULES,
    METADATA_OPS,
    IndexRule,
    IndexViolation,
    UninitRead,
    write_kind,
)
from ascend_tui.live.aten import write_positions
from ascend_tui.live.tensors import dtype_name, iter_tensors
from ascend_tui.live.memory_tracking import InitTracker, LeakTracker, UnwrittenRead

_MAX_REPORTS_PER_ALLOC = 3
Bound = dict[str, tuple[Any, int | str | None]]  # schema argument -> (value, position or keyword)
_ALIASING_OPS = frozenset({"_unsafe_view", "_reshape_alias", "alias", "detach", "set_"})


@dataclass(slots=True)
class Plan:
    """What the sanitizer needs to know about one aten overload, computed once."""

    name: str
    names: tuple[str, ...]
    outs: frozenset[str]
    written: frozenset[str]
    view: bool
    metadata: bool
    rule: IndexRule | None
    fresh: bool


@dataclass(slots=True)
class Bad:
    """An index argument found out of range before the op ran."""

    where: tuple[int | str, int | None]
    tensor: Any
    indexed: Any
    violation: IndexViolation


def bind_arguments(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Bound:
    """Each schema argument's value and where it sits (position, keyword, or None for a default)."""
    out: Bound = {}
    for i, arg in enumerate(func._schema.arguments):
        if i < len(args):
            out[arg.name] = (args[i], i)
        elif arg.name in kwargs:
            out[arg.name] = (kwargs[arg.name], arg.name)
        else:
            out[arg.name] = (arg.default_value if arg.has_default_value() else None, None)
    return out


def replace_argument(args: tuple[Any, ...], kwargs: dict[str, Any], where: tuple[int | str, int | None],
             new: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`args`/`kwargs` with the argument at `where` (or one element of a list argument) swapped for `new`."""
    pos, elem = where
    holder = args[pos] if isinstance(pos, int) else kwargs[pos]
    if elem is not None:
        items = list(holder)
        items[elem] = new
        new = items
    if isinstance(pos, int):
        return args[:pos] + (new,) + args[pos + 1:], kwargs
    return args, {**kwargs, pos: new}


class Sanitizer:
    """The checks and bookkeeping behind the dispatch mode, shared by every iteration of one run."""

    def __init__(self, model: Any, inputs: Any) -> None:
        import torch

        self._torch = torch
        self.run = (model, inputs)  # the model and inputs it watches
        self._plans: dict[Any, Plan] = {}
        self.reset()

    def reset(self) -> None:
        """Forget what was tracked and found (a coarse-to-fine replay starts the step again)."""
        self.init = InitTracker(self._torch)
        self.leaks = LeakTracker(*self.run)
        self.violations: list[IndexViolation] = []
        self.reads: list[UninitRead] = []
        self.iteration = 0

    def plan(self, func: Any) -> Plan:
        """What matters about `func` for the checks, cached per overload."""
        plan = self._plans.get(func)
        if plan is None:
            schema = func._schema
            name = func.overloadpacket.__name__
            plan = Plan(
                name, tuple(a.name for a in schema.arguments),
                frozenset(a.name for a in schema.arguments if a.is_out),
                frozenset(name for _, name in write_positions(func)),
                bool(func.is_view), name in METADATA_OPS, INDEX_RULES.get(name),
                fresh=name in ("lift_fresh", "lift") or not (
                    name in _ALIASING_OPS or any(r.alias_info is not None for r in schema.returns)))
            self._plans[func] = plan
        return plan

    # -- index bounds -----------------------------------------------------------------------

    def bounds(self, plan: Plan, bound: Bound) -> list[Bad]:
        """Index arguments of this call that hold values outside their valid range."""
        rule = plan.rule
        torch = self._torch
        if rule is None or rule.index not in bound or rule.indexed not in bound:
            return []
        indexed, _ = bound[rule.indexed]
        index, pos = bound[rule.index]
        if not isinstance(indexed, torch.Tensor) or pos is None:
            return []
        checks: list[tuple[Any, int | None, int, int | None, int | None]] = []
        if rule.mode == "list":
            dim = 0
            for k, idx in enumerate(index):
                if idx is None:
                    dim += 1
                elif idx.dtype in (torch.bool, torch.uint8):
                    dim += idx.dim()
                else:
                    checks.append((idx, k, indexed.shape[dim] if dim < indexed.dim() else 0, dim, None))
                    dim += 1
        elif rule.mode == "dim":
            d = bound.get("dim", (0, None))[0]
            if not isinstance(d, int):
                return []
            d = d % max(indexed.dim(), 1)
            checks.append((index, None, indexed.shape[d] if indexed.dim() else 1, d, None))
        elif rule.mode == "rows":
            checks.append((index, None, indexed.shape[0], 0, None))
        elif rule.mode == "flat":
            checks.append((index, None, indexed.numel(), None, None))
        else:
            classes = indexed.shape[0] if indexed.dim() == 1 else indexed.shape[1]
            ignore = bound.get("ignore_index", (-100, None))[0]
            checks.append((index, None, classes, 1 if indexed.dim() > 1 else 0, ignore))
        found = []
        for idx, k, n, dim, ignore in checks:
            bad = self._check(idx, n, dim, ignore, indexed, rule)
            if bad is not None:
                found.append(Bad((pos, k), idx, indexed, bad))
        return found

    def _check(self, idx: Any, n: int, dim: int | None, ignore: int | None, indexed: Any,
               rule: IndexRule) -> IndexViolation | None:
        """The violation when `idx` holds values outside [low, n) (ignoring `ignore`), else None."""
        torch = self._torch
        if not isinstance(idx, torch.Tensor) or idx.numel() == 0 or idx.is_floating_point() or idx.dtype == torch.bool:
            return None
        low = -n if rule.negative else 0
        bad = (idx < low) | (idx >= n)
        if ignore is not None:
            bad &= idx != ignore
        if not bool(bad.any()):
            return None
        values = idx[bad]
        count = int(values.numel())
        lo, hi = (int(v) for v in torch.stack([values.min(), values.max()]).tolist())
        return IndexViolation(
            node="", slot=-1, arg=rule.index, value=int(values[0]), low=low, high=n, bad_count=count,
            numel=idx.numel(), bad_min=lo, bad_max=hi,
            indexed=f"{dtype_name(indexed.dtype)}[{','.join(str(d) for d in indexed.shape)}]",
            dim=dim, mode=rule.mode, ignore_index=ignore, clamped=n > 0, iteration=self.iteration)

    def clamp(self, bad: Bad) -> Any:
        """The index with bad values clamped into range (ignored targets kept), for the op to run on."""
        v = bad.violation
        fixed = bad.tensor.clamp(v.low, v.high - 1)
        if v.ignore_index is not None:
            fixed = self._torch.where(bad.tensor == v.ignore_index, bad.tensor, fixed)
        return fixed

    # -- initialization ---------------------------------------------------------------------

    def _touched(self, plan: Plan, self_t: Any, bound: Bound) -> Any:
        """Which elements of `self_t` a partial writer touches, replayed on a boolean tensor."""
        torch = self._torch
        z = torch.zeros(self_t.shape, dtype=torch.bool, device=self_t.device)
        get = {k: v[0] for k, v in bound.items()}
        name = plan.name
        if name in ("index_put_", "_index_put_impl_"):
            torch.ops.aten.index_put_.default(z, list(get["indices"]), torch.tensor(True, device=self_t.device))
        elif name.startswith("scatter"):
            z.scatter_(get["dim"], get["index"], True)
        elif name in ("index_copy_", "index_fill_", "index_add_", "index_reduce_"):
            z.index_fill_(get["dim"], get["index"], True)
        elif name in ("masked_fill_", "masked_scatter_"):
            z |= get["mask"].to(torch.bool).expand_as(z)
        elif name == "put_":
            index = get["index"].flatten()
            z.view(-1).index_fill_(0, torch.where(index < 0, index + z.numel(), index), True)
        elif name == "fill_diagonal_":
            z.fill_diagonal_(True, get.get("wrap", False))
        return z

    def reads_before(self, plan: Plan, bound: Bound) -> list[UnwrittenRead]:
        """Never-written elements this call is about to read."""
        if not self.init.entries or plan.view or plan.metadata:
            return []
        torch = self._torch
        found: list[UnwrittenRead] = []
        flags = {k: bound[k][0] for k in ("accumulate", "include_self", "reduce", "beta") if k in bound}
        for name in plan.names:
            value = bound[name][0]
            if name in plan.outs or value is None:
                continue
            touched = None
            if name in plan.written:
                kind = write_kind(plan.name, flags)
                if kind in ("full", "partial"):
                    continue
                if kind == "accumulate":
                    touched = self._touched(plan, value, bound)
            elif name == "self" and plan.name in BETA_OPS and flags.get("beta") == 0:
                continue
            elif plan.name == "scatter" or plan.name.startswith("scatter_"):
                if name == "src" and isinstance(value, torch.Tensor):
                    index = bound["index"][0]
                    value = value[tuple(slice(0, s) for s in index.shape)]
            for t in value if isinstance(value, (list, tuple)) else (value,):
                entry = self.init.lookup(t)
                if entry is None or entry.reports >= _MAX_REPORTS_PER_ALLOC:
                    continue
                read = self.init.unread(entry, t, touched)
                if read is not None:
                    entry.reports += 1
                    found.append(read)
        return found

    def writes_after(self, plan: Plan, bound: Bound, out: Any,
                     node: str, grown: list[tuple[Any, int]]) -> None:
        """Mark what this call wrote, and start tracking what it allocated uninitialized."""
        torch = self._torch
        if plan.name in ALLOC_OPS:
            for t in iter_tensors(out):
                self.init.allocate(t, node, f"aten.{plan.name}")
            return
        for t, old_elements in grown:
            if self.init.lookup(t) is None:
                self.init.allocate(t, node, f"aten.{plan.name}", old_elements)
        if not self.init.entries or not plan.written or plan.metadata:
            return
        flags = {k: bound[k][0] for k in ("accumulate", "include_self", "reduce", "beta") if k in bound}
        for name in plan.written:
            value = bound[name][0]
            for t in value if isinstance(value, (list, tuple)) else (value,):
                if not isinstance(t, torch.Tensor) or self.init.lookup(t) is None:
                    continue
                partial = name not in plan.outs and write_kind(plan.name, flags) in ("partial", "accumulate")
                self.init.write(t, self._touched(plan, t, bound) if partial else None)
