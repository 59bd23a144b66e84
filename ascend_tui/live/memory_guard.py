"""The memory check in a coarse-to-fine capture: a light dispatch mode over every pass, the sanitizer's full rules
where they can matter, and each pass-1 finding placed at its module call.

`GuardMode` runs every aten call of a pass. Calls the sanitizer has nothing to say about — no index argument, no
`empty`-family allocation, no `resize_`, and no never-written allocation alive (the common case: `empty` buffers are
written at once) — run straight through, the bytes of the storages they create counted for the meter
(`live.coarse_meter`); the others go through `SanitizeObserver` exactly as in a full capture, so a bad index
anywhere in the model is found (and clamped) in pass 1 and an uninitialised read is found wherever it happens. Each
of its findings is labelled `#<k>:<s>`: the module calls ended and started when it happened (`Meter.where`): `k`
is the window of events its operator ran in, and with `s` the innermost module call it ran inside. In pass 1 the
mode also follows every storage the calls create (`LeakTracker`, by weak reference), so a tensor that outlives the
step is reported at the module call that made it (an info with one iteration; `--iterations` > 1 runs the full
capture).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ascend_tui.checks.memory import ALLOC_OPS
from ascend_tui.live.recording import Call

if TYPE_CHECKING:
    from ascend_tui.live.coarse_pass import Event

LABEL = "#"
_RESIZE = frozenset({"resize_", "resize_as_"})


class _Stub:
    """What `SanitizeObserver` asks of a recorder, with nothing recorded."""

    module = ""

    def source_of(self, _t: Any) -> None:
        return None


def guard_mode_class() -> type:
    from torch import Tensor
    from torch.utils._python_dispatch import TorchDispatchMode

    class GuardMode(TorchDispatchMode):
        """Runs every call; only those the sanitizer's rules touch go through `observer` (see the module docstring)."""

        def __init__(self, observer: Any, where: Callable[[], str], busy: Sequence[Any] = (),
                     follow: bool = False) -> None:
            """`observer`: a `live.memory.SanitizeObserver`; `busy`: the observers of a recording mode above."""
            super().__init__()
            self.observer = observer
            self.san = observer.sanitizer
            self.where = where  # `<calls ended>:<calls started>` so far
            self.busy = tuple(busy)  # a recording observer in the middle of this call: it is checked there
            self.leaks = observer.sanitizer.leaks if follow else None  # storages followed on the fast path too
            self.created = 0  # bytes of the storages the calls created
            self.stub = _Stub()

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            for b in self.busy:
                if b._pending is not None:
                    return func(*args, **kwargs)
            san = self.san
            plan = san.plan(func)
            if plan.rule is None and not san.init.entries and plan.name not in ALLOC_OPS and plan.name not in _RESIZE:
                out = func(*args, **kwargs)
                if plan.fresh:
                    self.created += _nbytes(out)
                if self.leaks is not None:
                    outs = [out] if isinstance(out, Tensor) else [t for t in out if isinstance(t, Tensor)] \
                        if isinstance(out, (tuple, list)) else []
                    if outs:
                        self.leaks.on_outputs(outs, f"{LABEL}{self.where()}", "", f"aten.{plan.name}", plan.fresh)
                return out
            call = Call(self.stub, func, args, kwargs, args, kwargs)  # type: ignore[arg-type]
            self.observer.before(call)
            out = func(*call.run_args, **call.run_kwargs)
            self.observer.after(call, f"{LABEL}{self.where()}", out)
            if plan.fresh:
                self.created += _nbytes(out)
            return out

    return GuardMode


def _nbytes(out: Any) -> int:
    import torch

    if isinstance(out, torch.Tensor):
        return int(out.untyped_storage().nbytes())
    if isinstance(out, (tuple, list)):
        return sum(_nbytes(o) for o in out)
    return 0


def position(label: str) -> int | None:
    """The module calls ended when a guarded call ran, from its `#<k>:<s>` label; None for a recorded node's id."""
    k, _ = _parts(label)
    return k


def _parts(label: str) -> tuple[int | None, int]:
    if not label.startswith(LABEL):
        return None, -1
    k, _, s = label[1:].partition(":")
    return (int(k), int(s)) if k.isdigit() and s.isdigit() else (None, -1)


def first_found(violations: Sequence[Any], reads: Sequence[Any]) -> int | None:
    """The earliest position of a pass-1 finding (an index out of range, a read of never-written elements)."""
    found = [p for x in (*violations, *reads) if (p := position(x.node)) is not None]
    return min(found) if found else None


def bug_window(k: int, events: Sequence[Event]) -> tuple[int, int]:
    """The window holding an operator that ran after `k` module calls: between event k-1 and event k; after the
    forward (the loss, the backward), from the forward's last event to the step's last."""
    forward = [e for e in events if e.phase == "forward"]
    if k < len(forward):
        return k - 1, k
    return (forward[-1].index if forward else -1), len(events) - 1


def enclosing_node(label: str, events: Sequence[Event], ordinals: Sequence[int]) -> str:
    """The module node of the innermost call that was running where `label` says (`#<k>:<s>`: the call started
    before the `s`-th start and ended after the `k`-th end); the model's call after the forward; "" when none has a
    node. `ordinals`: `Meter.ordinals`, each forward call's place in the order calls started."""
    k, s = _parts(label)
    if k is None:
        return ""
    best, node = -1, ""
    for e in events:
        if e.phase == "forward" and e.index >= k and e.index < len(ordinals) and ordinals[e.index] < s \
                and ordinals[e.index] > best and e.node:
            best, node = ordinals[e.index], e.node
    if node:
        return node
    forward = [e for e in events if e.phase == "forward" and e.node]
    return forward[-1].node if forward else ""


def relabel(items: Sequence[Any], events: Sequence[Event], ordinals: Sequence[int], window: tuple[int, int] | None,
            fields: tuple[str, ...]) -> list[Any]:
    """Pass-1 findings (`IndexViolation`s or `UninitRead`s) outside the window, placed at their module calls' nodes
    (the window's own were found again operator by operator); labels in `fields` become module nodes."""
    out = []
    for x in items:
        k = position(x.node)
        if k is None or (window is not None and window[0] < k <= window[1]):
            continue
        changes = {f: enclosing_node(getattr(x, f), events, ordinals) for f in fields
                   if position(getattr(x, f)) is not None}
        if all(changes.values()):
            out.append(dataclasses.replace(x, **changes))
    return out


def adopt_leaks(first: Any, target: Any, events: Sequence[Event], ordinals: Sequence[int], graph: Any,
                window: tuple[int, int] | None) -> None:
    """Pass 1's surviving storages (`first`, a `LeakTracker`) into the window's (`target`), at their module calls'
    nodes; those made inside the window only when the window's replay kept none of its own alive."""
    own = any(b.node in graph and not b.ref.expired() for b in target.born.values())
    for key, born in first.born.items():
        k = position(born.node)
        if born.ref.expired() or key in target.born or k is None or \
                (own and window is not None and window[0] < k <= window[1]):
            continue
        call = _innermost(born.node, events, ordinals)
        if call is not None and not call.node:  # inside the window: its operators are nodes (same module, same op)
            born.node, born.module = "", call.module
            target.born[key] = born
            continue
        node = enclosing_node(born.node, events, ordinals)
        if node and node in graph:
            born.node, born.module = node, graph.node(node).module
            target.born[key] = born


def _innermost(label: str, events: Sequence[Event], ordinals: Sequence[int]) -> Event | None:
    k, s = _parts(label)
    if k is None:
        return None
    best: Event | None = None
    for e in events:
        if e.phase == "forward" and k <= e.index < len(ordinals) and ordinals[e.index] < s and (
                best is None or ordinals[e.index] > ordinals[best.index]):
            best = e
    return best
