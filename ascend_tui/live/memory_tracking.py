"""Bookkeeping behind the live sanitizer: written-masks of uninitialized allocations and storages per iteration.

`InitTracker` keeps one boolean mask per `empty`-family storage (on the tensor's device) and
answers "which never-written elements would this read see"; `LeakTracker` follows, through
weak references, every storage an op creates, so the sanitizer can tell which outlive their call.
"""

from __future__ import annotations

import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterator

from ascend_tui.live.aten import storage_key
from ascend_tui.live.tensors import dtype_name, iter_tensors

MAX_VIEWS = 4


@dataclass(slots=True)
class UnwrittenRead:
    """A read of never-written elements, waiting for the reading op's node id."""

    tensor: Any
    alloc: Allocation
    unwritten: int
    read_numel: int
    first: tuple[int, ...] | None
    last: tuple[int, ...] | None
    written: int
    alloc_numel: int


class Allocation:
    """An `empty`-family storage and a boolean mask of which of its elements were written."""

    __slots__ = ("ref", "mask", "itemsize", "node", "op", "desc", "shape", "contiguous", "reports")

    def __init__(self, ref: Any, mask: Any, t: Any, node: str, op: str) -> None:
        self.ref, self.mask, self.itemsize = ref, mask, t.element_size()
        self.node, self.op = node, op
        self.desc = f"{dtype_name(t.dtype)}[{','.join(str(d) for d in t.shape)}]"
        self.shape = tuple(t.shape)
        self.contiguous = t.is_contiguous() and t.storage_offset() == 0
        self.reports = 0


class InitTracker:
    """Written-masks of allocations born uninitialized, dropped once fully written or freed."""

    def __init__(self, torch: Any) -> None:
        from torch.multiprocessing.reductions import StorageWeakRef

        self._torch = torch
        self._weak = StorageWeakRef
        self.entries: dict[int, Allocation] = {}

    def lookup(self, t: Any) -> Allocation | None:
        if not self.entries or not isinstance(t, self._torch.Tensor):
            return None
        key = storage_key(t)
        entry = self.entries.get(key) if key is not None else None
        if entry is not None and entry.ref.expired():
            del self.entries[key]  # type: ignore[arg-type]
            return None
        return entry

    def allocate(self, t: Any, node: str, op: str, written_elements: int = 0) -> None:
        """Start tracking `t`'s storage; its first `written_elements` count as written."""
        if t.device.type == "meta" or t.layout != self._torch.strided:
            return
        n = t.untyped_storage().nbytes() // t.element_size()
        if n == 0 or written_elements >= n:
            return
        mask = self._torch.zeros(n, dtype=self._torch.bool, device=t.device)
        mask[:written_elements] = True
        key = storage_key(t)
        if key is None:
            return
        self.entries[key] = Allocation(self._weak(t.untyped_storage()), mask, t, node, op)

    def region(self, entry: Allocation, t: Any) -> Any | None:
        """The part of the mask `t` covers, shaped like `t`; None when `t` views the bytes as another dtype."""
        if t.element_size() != entry.itemsize:
            self.entries.pop(storage_key(t) or -1, None)
            return None
        need = t.untyped_storage().nbytes() // entry.itemsize
        if need > entry.mask.numel():
            grow = self._torch.zeros(need - entry.mask.numel(), dtype=self._torch.bool, device=entry.mask.device)
            entry.mask = self._torch.cat([entry.mask, grow])
        return entry.mask.as_strided(tuple(t.shape), tuple(t.stride()), t.storage_offset())

    def unread(self, entry: Allocation, t: Any, touched: Any | None = None) -> UnwrittenRead | None:
        """The never-written elements a read of `t` (or of its `touched` elements) would see, if any."""
        region = self.region(entry, t)
        if region is None or t.numel() == 0:
            return None
        if touched is None:
            if bool(region.all()):
                return None
        elif not bool((touched & ~region).any()):
            return None
        torch = self._torch
        hit = torch.zeros_like(entry.mask)
        view = hit.as_strided(tuple(t.shape), tuple(t.stride()), t.storage_offset())
        view.fill_(True) if touched is None else view.masked_fill_(touched, True)
        bad = (hit & ~entry.mask).nonzero().flatten()
        first, last = int(bad[0]), int(bad[-1])
        return UnwrittenRead(t, entry, int(bad.numel()), int(hit.sum()), self._coords(entry, first),
                             self._coords(entry, last), int(entry.mask.sum()), int(entry.mask.numel()))

    @staticmethod
    def _coords(entry: Allocation, offset: int) -> tuple[int, ...] | None:
        if not entry.contiguous or not entry.shape:
            return None
        out = []
        for size in reversed(entry.shape):
            offset, rem = divmod(offset, max(size, 1))
            out.append(rem)
        return tuple(reversed(out))

    def write(self, t: Any, touched: Any | None = None) -> None:
        """Mark `t`'s elements (or its `touched` ones) written; stop tracking a fully written storage."""
        entry = self.lookup(t)
        if entry is None:
            return
        region = self.region(entry, t)
        if region is None:
            return
        region.fill_(True) if touched is None else region.masked_fill_(touched, True)
        if bool(entry.mask.all()):
            self.entries.pop(storage_key(t) or -1, None)


class BornStorage:
    """A storage some op created during one iteration, followed by a weak reference."""

    __slots__ = ("ref", "node", "module", "op_type", "nbytes", "iteration", "desc", "views")

    def __init__(self, ref: Any, node: str, module: str, op_type: str, t: Any, iteration: int) -> None:
        self.ref, self.node, self.module, self.op_type = ref, node, module, op_type
        self.nbytes = int(t.untyped_storage().nbytes())
        self.iteration = iteration
        self.desc = f"{dtype_name(t.dtype)}[{','.join(str(d) for d in t.shape)}]"
        self.views: list[tuple[Any, str]] = []


class LeakTracker:
    """Which storages each iteration created, and which of them are still alive afterwards."""

    def __init__(self, model: Any, inputs: Any) -> None:
        import torch
        from torch.multiprocessing.reductions import StorageWeakRef

        self._weak = StorageWeakRef
        self.known: dict[int, Any] = {}
        self.born: dict[int, BornStorage] = {}
        self.iteration = 0
        tensors = list(iter_tensors(inputs))
        if isinstance(model, torch.nn.Module):
            tensors += list(model.parameters()) + list(model.buffers())
        for t in tensors:
            self._know(t)

    def _know(self, t: Any) -> None:
        key = storage_key(t)
        if key is not None and key not in self.known:
            self.known[key] = self._weak(t.untyped_storage())

    def on_outputs(self, outs: list[Any], node: str, module: str, op: str, fresh: bool) -> None:
        """Note the storages an op's outputs live in; those of a `fresh` op that no one had before were born here."""
        for t in outs:
            key = storage_key(t)
            if key is None:
                continue
            born = self.born.get(key)
            if born is not None and not born.ref.expired():
                if born.node != node and len(born.views) < MAX_VIEWS:
                    born.views.append((weakref.ref(t), node))
                continue
            known = self.known.get(key)
            if known is not None and not known.expired():
                continue
            if not fresh:
                self.known[key] = self._weak(t.untyped_storage())
                continue
            self.born[key] = BornStorage(self._weak(t.untyped_storage()), node, module, op, t, self.iteration)

    def alive(self, exclude: set[int]) -> Iterator[tuple[int, BornStorage]]:
        for key, born in self.born.items():
            if key not in exclude and not born.ref.expired():
                yield key, born

    def prune(self) -> None:
        """Forget freed storages (their weak references are what keeps their addresses from being reused)."""
        self.born = {k: b for k, b in self.born.items() if not b.ref.expired()}
        self.known = {k: r for k, r in self.known.items() if not r.expired()}


def holders(model: Any, keys: set[int]) -> dict[int, str]:
    """Which module attribute (a tensor, or a list/tuple/dict of them) holds each storage in `keys`."""
    import torch

    found: dict[int, str] = {}
    if not isinstance(model, torch.nn.Module):
        return found

    def visit(value: Any, label: str, depth: int) -> None:
        if isinstance(value, torch.Tensor):
            key = storage_key(value)
            if key in keys and key not in found:
                found[key] = label
        elif depth < 3 and isinstance(value, (list, tuple, deque)):
            for item in value:
                visit(item, label, depth + 1)
        elif depth < 3 and isinstance(value, dict):
            for item in value.values():
                visit(item, label, depth + 1)

    for path, mod in model.named_modules():
        owner = path or type(model).__name__
        for attr, value in vars(mod).items():
            if attr in ("_parameters", "_modules") or attr.endswith("hooks") or attr.startswith("_forward"):
                continue
            if attr == "_buffers":
                for name, buf in value.items():
                    visit(buf, f"{owner}.{name}", 1)
                continue
            visit(value, f"{owner}.{attr}", 0)
    return found
