"""Coarse-to-fine capture: module-level evidence for the whole step, operators recorded only where it matters.

Pass 1 runs the step with no dispatch mode at all: each module call's outputs (and, with
backward, the gradient that reaches each of them) are measured on their own device and
queued (`StatRows`), then brought to the host together at the end of the pass; each
measurement is an *event*, numbered in the order it happened. `checks.suspects.first_bad_event`
names the first event whose values went bad (NaN, Inf, saturation, the NPU overflow flag).
Pass 2 replays the same step — same inputs, the RNG states saved before pass 1, buffers and
gradients put back, the same grad mode, autocast and train/eval mode — under a dispatch mode
that records operators only in the *window* between the event before that one and that one
(every op that ran there, whichever module owns it), and module-level nodes everywhere else
(`attrs["detail"] == "module"`). If the window's inputs are already bad (the bad value came
from code that ran before the event in front of it) the window widens to the enclosing
module's call and the step is replayed again.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ascend_tui.checks.suspects import first_bad_event, first_zeroed_event
from ascend_tui.errors import Cancelled
from ascend_tui.graph.opgraph import derive, op_node
from ascend_tui.live.batch_stats import BatchStats
from ascend_tui.live.capture import ABSENT, CaptureResult, Recorder, SlotRef, Unshadow, call_model, tensor_leaves, \
    tensor_meta
from ascend_tui.progress import frozen_gc

if TYPE_CHECKING:
    from ascend_tui.live.device import Device

MODULE = "module"  # the value of `attrs["detail"]` on nodes that stand for a whole module call
FLAG_READS = 32  # reads of the overflow flag (a host sync each) in the pass that looks for it: one every N events
MODULE_SAMPLE = 512  # values per module-level histogram (an operator's: `HIST_SAMPLE`); binning is ~4 ns a value


class WindowClosed(BaseException):
    """Raised at the end of a forward window when the replay stops there (not an `Exception`: a model's own
    `except Exception` must not swallow it)."""


@dataclass(frozen=True, slots=True)
class Event:
    """One module-level measurement: a module call's outputs (forward) or the gradient reaching them (backward)."""

    index: int
    module: str
    module_class: str
    phase: str
    node: str  # "" for events inside the window (their operators are nodes instead)
    entered_at: int  # events finished when the call started (forward); the event's own index in backward


@dataclass(slots=True)
class StepState:
    """What a step changes that a replay must undo: RNG states, buffers (BatchNorm's running stats), `.grad`s."""

    device: Any
    rng: Any
    buffers: list[tuple[Any, Any]]
    grads: list[tuple[Any, Any]]

    @classmethod
    def save(cls, model: Any, device: Device) -> StepState:
        buffers = [(b, b.detach().clone()) for b in model.buffers()] if hasattr(model, "buffers") else []
        params = [p for p in model.parameters() if p.requires_grad] if hasattr(model, "parameters") else []
        return cls(device, device.rng_state(), buffers, [(p, p.grad) for p in params])

    def restore(self, *, grads_cleared: bool = False) -> None:
        """Put the RNG and buffers back, and the `.grad`s (None when `grads_cleared`: a pass is about to run)."""
        import torch

        self.device.set_rng_state(self.rng)
        with torch.no_grad():
            for b, kept in self.buffers:
                b.copy_(kept)
        for p, g in self.grads:
            p.grad = None if grads_cleared else g


class StepRecorder(Recorder):
    """A recorder that makes one node per module call (and per module gradient), and operator nodes only inside its
    window of events (none when `window` is None: pass 1)."""

    def __init__(self, model: Any, inputs: Any, *, window: tuple[int, int] | None = None, grads: bool = False,
                 flag_device: Device | None = None, module_stats: bool = True, **kwargs: Any) -> None:
        super().__init__(model, inputs, **kwargs)
        self.module_stats = module_stats  # False on a replay: the module pass measured those already
        self.window = window  # operators between event window[0] (-1: the start) and event window[1] are recorded
        self.active = window is not None and window[0] < 0
        self.events: list[Event] = []
        self.grads = grads
        self.flag_device = flag_device  # read and clear the overflow flag every `flag_every` events (a sync each)
        self.flag_every = 1  # events between two reads of the overflow flag
        self.flag_reads: list[tuple[int, bool]] = []  # (last event before the read, flag set)
        self.outputs: Any = None
        self._frames: list[list[SlotRef]] = [[]]  # per module call: the module nodes its children made
        self._frame_ops: list[SlotRef | None] = [None]  # per module call: the last operator node recorded in it
        self._hooked: dict[int, Any] = {}
        self._last: SlotRef | None = None
        # Module-level measurements: taken when handed over, rows together at the end (`live.batch_stats`); a
        # tensor measured already (a parent returning its child's output, one gradient reaching two outputs)
        # unchanged since takes that row.
        self.batch = BatchStats(self._torch, sample=MODULE_SAMPLE)
        self._grad_enabled = self._torch.is_grad_enabled
        self.mode: Any = None  # a dispatch mode entered only while the window is open (a forward window's replay)
        self._mode_entered = False
        self.stopped = False
        self.stop_after_window = False  # raise `WindowClosed` when the window closes (the rest comes from pass 1)
        self.window_outputs: dict[int, list[SlotRef]] = {}  # event -> what made its outputs, for events in the window
        self._batch_keys: list[tuple[str, int]] = []
        self._batch_copies: list[tuple[tuple[str, int], tuple[str, int]]] = []
        self._measured: dict[int, tuple[Any, int, tuple[str, int]]] = {}
        self._finished: tuple[Any, Any, Any, Any] | None = None
        self.unmeasured = 0  # module-level tensors changed in place before their batch was measured

    # -- events ---------------------------------------------------------------------------------

    def attribute_modules(self, model: Any) -> list[Any]:
        """Shadow every module's `_call_impl` (the model's own too) to attribute ops and end each call with an event."""
        pairs = list(model.named_modules())
        thread = threading.get_ident()
        shadowed: list[tuple[dict[str, Any], Any]] = []
        for name, mod in pairs:
            own = getattr(mod, "__dict__", None)
            if not isinstance(own, dict):
                continue
            prior = own.get("_call_impl", ABSENT)
            own["_call_impl"] = self._wrapped(mod._call_impl, name, type(mod).__name__, thread)
            shadowed.append((own, prior))
        return [Unshadow(shadowed)]

    def _wrapped(self, call: Callable[..., Any], name: str, cls: str, thread: int) -> Callable[..., Any]:
        stack, frames, frame_ops, get_ident = self.module_stack, self._frames, self._frame_ops, threading.get_ident
        batch = self.batch
        pending = batch.pending_ids

        def _call_impl(*args: Any, **kwargs: Any) -> Any:
            if get_ident() != thread:
                return call(*args, **kwargs)
            entered = len(self.events)
            if pending:  # a module about to get a tensor not measured yet may change it in place (ReLU(inplace))
                for a in args:
                    if id(a) in pending:
                        batch.flush()
                        break
            stack.append(name)
            frames.append([])
            frame_ops.append(None)
            try:
                out = call(*args, **kwargs)
            finally:
                stack.pop()
                children = frames.pop()
                last_op = frame_ops.pop()
            if last_op is not None:
                children.append(last_op)
                if frame_ops[-1] is None or frame_ops[-1].index < last_op.index:
                    frame_ops[-1] = last_op
            self._exit(name, cls, args, kwargs, out, children, entered)
            return out

        return _call_impl

    def mode_on(self) -> None:
        """Enter the dispatch mode (a replay that records operators only while its window is open)."""
        if self.mode is not None and not self._mode_entered:
            self.mode.push()
            self._mode_entered = True

    def mode_off(self) -> None:
        if self.mode is not None and self._mode_entered:
            self._mode_entered = False
            self.mode.pop()

    def _in_window(self, index: int) -> bool:
        return self.window is not None and self.window[0] < index <= self.window[1]

    def _advance(self, index: int) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("capture cancelled")
        if self.progress is not None and (index & 15) == 0:
            self.progress(self.phase_label, index, None)
        if self.window is not None:
            if index == self.window[0]:
                self.active = True
                self.mode_on()
            if index == self.window[1]:
                self.active = False
                self.mode_off()
                if self.stop_after_window:
                    raise WindowClosed
        if self.flag_device is not None and index % self.flag_every == self.flag_every - 1:
            self.read_flag(index)

    def read_flag(self, index: int) -> None:
        """Read (one host sync) and clear the overflow flag: set by something since the last read, up to `index`."""
        self.flag_reads.append((index, bool(self.flag_device.read_overflow_flag())))
        self.flag_device.clear_overflow_flag()

    def _exit(self, name: str, cls: str, args: Any, kwargs: Any, out: Any, children: list[SlotRef],
              entered: int) -> None:
        tensor = self._tensor
        outs = [out] if isinstance(out, tensor) else tensor_leaves([out], tensor)
        index = len(self.events)
        w = self.window
        inside = w is not None and w[0] < index <= w[1]
        node = "" if inside else self._module_node(name, cls, args, kwargs, outs, children)
        if inside and self.stop_after_window:
            self.window_outputs[index] = [self.source_of(t) for t in outs]
        self.events.append(Event(index, name, cls, self.phase, node, entered))
        if node:
            self._frames[-1].append(self._producers[id(outs[0])][1] if outs else SlotRef(node, 0, self.op_count - 1))
        if self.grads and self.phase == "forward" and self._grad_enabled():
            hooked = self._hooked
            for t in outs:
                if t.requires_grad and t.is_floating_point():
                    seen = hooked.get(id(t))
                    if seen is None or seen() is not t:  # a parent returning its child's output: the child's event
                        hooked[id(t)] = weakref.ref(t)
                        t.register_hook(self._grad_hook(name, cls, tensor_meta(t)))
        if w is not None or self.flag_device is not None or self.cancel is not None or self.progress is not None:
            self._advance(index)

    def _known(self, x: Any) -> SlotRef | None:
        ref = self._producer(x)
        if ref is None and id(x) in self._named:
            ref = self.source_of(x)  # a named input, parameter or buffer: its placeholder
        return ref

    def _input_refs(self) -> list[SlotRef]:
        """The placeholders of the run's own inputs: where data made before any node must have come from."""
        return [self.source_of(t) for t in self._keepalive if self._named.get(id(t), ("",))[0] == "input"]

    def _module_node(self, name: str, cls: str, args: Any, kwargs: Any, outs: list[Any],
                     children: list[SlotRef]) -> str:
        """A node for one module call: fed by its inputs, its children and what made its outputs; outputs measured."""
        tensor = self._tensor
        refs: list[SlotRef] = []
        pairs: set[tuple[str, int]] = set()
        nodes: set[str] = set()
        unknown = False
        producers = self._producers
        leaves = [args[0]] if len(args) == 1 and isinstance(args[0], tensor) else tensor_leaves(args, tensor)
        for x in (leaves + tensor_leaves(kwargs.values(), tensor)) if kwargs else leaves:
            entry = producers.get(id(x))
            ref = entry[1] if entry is not None and entry[0]() is x else self._known(x)
            if ref is None:
                unknown = True
            elif (ref.node, ref.slot) not in pairs:
                pairs.add((ref.node, ref.slot))
                nodes.add(ref.node)
                refs.append(ref)
        for ref in children:
            if ref.node not in nodes:
                nodes.add(ref.node)
                refs.append(ref)
        for t in outs:
            entry = producers.get(id(t))
            if entry is None or entry[0]() is not t:
                unknown = True
            elif entry[1].node not in nodes:
                nodes.add(entry[1].node)
                refs.append(entry[1])
        if unknown:  # made by code no node stands for (the caller's own): anything the caller made so far may feed it
            made = [*self._frames[-1], *([self._frame_ops[-1]] if self._frame_ops[-1] is not None else [])]
            if not made:
                made = [self._last] if self._last is not None else self._input_refs()
            for ref in made:
                if ref.node not in nodes:
                    nodes.add(ref.node)
                    refs.append(ref)
        node_id = self.ids.mint(name, MODULE, self.phase)
        metas = tuple(map(tensor_meta, outs))
        index = self.op_count
        self.op_count += 1
        graph = self.graph
        graph.add_node(op_node(node_id, f"module.{cls}", name, index, "op", tuple(r.meta for r in refs), metas,
                               None, self.phase, cls, {"detail": MODULE}))
        for slot, ref in enumerate(refs):
            graph.add_edge(ref.node, node_id, ref.slot, slot)
        measure = self.want_stats and self.module_stats
        taps = self.taps
        for slot, t in enumerate(outs):
            producers[id(t)] = (weakref.ref(t), SlotRef(node_id, slot, index, metas[slot]))
            if t.is_floating_point():
                for tap in taps:  # observers' evidence (underflow in the reference) per module output too
                    tap(node_id, slot, t)
                if measure:
                    self.take((node_id, slot), t)
        self._last = SlotRef(node_id, 0, index, metas[0] if metas else None)
        return node_id

    def _grad_hook(self, name: str, cls: str, meta: Any) -> Callable[[Any], None]:
        events, attrs = self.events, {"detail": MODULE, "gradient_of": name}

        def hook(grad: Any) -> None:
            index = len(events)
            node = ""
            w = self.window
            if w is None or not w[0] < index <= w[1]:
                node = self.ids.mint(name, "module_grad", "backward")
                i = self.op_count
                self.op_count += 1
                self.graph.add_node(op_node(node, f"module_grad.{cls}", name, i, "op", (), (meta,), None, "backward",
                                            cls, dict(attrs)))
                for tap in self.taps:
                    tap(node, 0, grad)
                if self.want_stats and self.module_stats:
                    self.take((node, 0), grad)
                self._last = SlotRef(node, 0, i, meta)
            events.append(Event(index, name, cls, "backward", node, index))
            self.module_stack[:] = [name] if name else []  # what runs next is this module's backward
            if w is not None or self.flag_device is not None or self.cancel is not None or self.progress is not None:
                self._advance(index)
        return hook

    def take(self, key: tuple[str, int], t: Any) -> None:
        """Measure a module-level tensor for `key` now (`BatchStats`), or point at the row of the same tensor."""
        seen = self._measured.get(id(t))
        if seen is not None and seen[0]() is t and seen[1] == t._version:
            self._batch_copies.append((key, seen[2]))
            return
        # Gradients wait for the batch (nothing changes them in place: this reference keeps autograd from reusing
        # them); forward outputs are measured now, as a caller may change one in place (`out += identity`).
        if self.batch.add(t, later=self.phase == "backward") is not None:
            self._batch_keys.append(key)
            self._measured[id(t)] = (weakref.ref(t), t._version, key)

    def _module_tables(self) -> tuple[list[tuple[str, int]], np.ndarray, list[tuple[str, int]], np.ndarray]:
        """(keys, `STAT_FIELDS` rows, histogram keys, histogram rows) of the module-level measurements, made once."""
        if self._finished is None:
            from ascend_tui.live.stat_rows import finish_rows

            raw, numel, hist_rows, hists = self.batch.finish()
            keys = list(self._batch_keys)
            data = finish_rows(raw, numel)
            if self.batch.changed:  # changed in place before they were measured: no statistics (counted)
                self.unmeasured = len(self.batch.changed)
                kept = np.ones(len(keys), dtype=bool)
                kept[self.batch.changed] = False
                keys = [k for k, keep in zip(keys, kept) if keep]
                data, raw_rows = data[kept], np.flatnonzero(kept)
                hist_rows = np.asarray([int(np.searchsorted(raw_rows, r)) for r in hist_rows], dtype=np.int64)
            position = {k: i for i, k in enumerate(keys)}
            extra = []
            for key, source in self._batch_copies:  # in measuring order: a copy of a copy finds its row
                if source in position:
                    position[key] = position[source]
                    keys.append(key)
                    extra.append(position[source])
            if extra:
                data = np.concatenate([data, data[extra]])
            hist_of = {int(r): i for i, r in enumerate(hist_rows)}
            hkeys, hidx = [], []
            for key in keys:
                i = hist_of.get(position[key])
                if i is not None:
                    hkeys.append(key)
                    hidx.append(i)
            self._finished = (keys, data, hkeys, hists[hidx])
        return self._finished

    def finish_stats(self) -> Any:
        """The window's operator statistics and the module-level ones, in one table."""
        table = super().finish_stats()
        keys, data, _, _ = self._module_tables()
        if keys:
            table.add_many(keys, data)
        return table

    def finish_histograms(self) -> Any:
        """The window's operator histograms and the module-level ones, in one table."""
        from ascend_tui.evidence import HistogramTable

        ops = super().finish_histograms()
        _, _, keys, rows = self._module_tables()
        if not keys:
            return ops
        if len(ops):
            found = ops.to_json()
            keys = [*zip(found["nodes"], found["slots"]), *keys]
            rows = np.concatenate([np.asarray(found["rows"], dtype=np.int64).reshape(-1, rows.shape[1]), rows])
        return HistogramTable(keys, rows)

    # -- operators inside the window ------------------------------------------------------------

    def record(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> str:
        node_id = super().record(func, args, kwargs, out)
        self._last = self._frame_ops[-1] = SlotRef(node_id, 0, self.op_count - 1)
        return node_id

    def _placeholder(self, t: Any) -> SlotRef:
        """A placeholder; one the backward window reads from unrecorded backward code (an incoming gradient) is a
        backward tensor, and says so (the underflow check's loss-scaling hint goes by the phase)."""
        ref = super()._placeholder(t)
        if self.phase == "backward":
            node = self.graph.node(ref.node)
            if node.kind == "const":
                self.graph.replace_node(derive(node, phase="backward"))
        return ref

    def param_grads(self, model: Any) -> None:
        """One module-level node per parameter gradient (`grad:fc.weight`), with its statistics."""
        for name, p in model.named_parameters():
            if p.grad is None or f"grad:{name}" in self.graph:
                continue
            node_id, meta = f"grad:{name}", tensor_meta(p.grad)
            self.graph.add_node(op_node(node_id, "grad", name.rsplit(".", 1)[0] if "." in name else "",
                                        self.op_count, "output", (meta,), (meta,), None, "backward", "",
                                        {"forward": f"param:{name}", "detail": MODULE}))
            self.op_count += 1
            for tap in self.taps:
                tap(node_id, 0, p.grad)
            if self.want_stats and self.module_stats:
                self.take((node_id, 0), p.grad)


def _window_mode(base: type) -> type:
    class WindowMode(base):  # type: ignore[misc, valid-type]
        """`RecordingMode` that lets operators outside the recorder's window run untouched."""

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            if not self.recorder.active:
                return func(*args, **(kwargs or {}))
            return super().__torch_dispatch__(func, types, args, kwargs)

    return WindowMode


_WINDOW_MODES: dict[Any, type] = {}


def window_mode(base: type) -> type:
    if base not in _WINDOW_MODES:
        _WINDOW_MODES[base] = _window_mode(base)
    return _WINDOW_MODES[base]


def lazy_window_mode(base: type) -> type:
    """`window_mode(base)` that `recording()` enters and leaves without pushing it: `push()` / `pop()` do, when the
    window opens and closes (outside it, operators run without any Python in between)."""
    key = ("lazy", base)
    if key not in _WINDOW_MODES:
        class LazyWindowMode(window_mode(base)):  # type: ignore[misc, valid-type]
            def __enter__(self) -> Any:
                return self

            def __exit__(self, *exc: Any) -> None:
                return None

            def push(self) -> None:
                super().__enter__()

            def pop(self) -> None:
                super().__exit__(None, None, None)

        _WINDOW_MODES[key] = LazyWindowMode
    return _WINDOW_MODES[key]


def step_pass(model: Any, inputs: Any, *, window: tuple[int, int] | None, backward: bool = False,
              loss: Callable[[Any], Any] | None = None, observers: Sequence[Any] = (), progress: Any = None,
              cancel: Any = None, flag_device: Device | None = None, phase_label: str = "capturing",
              module_stats: bool = True, forward_only: bool = False,
              stop_after_window: bool = False, flag_every: int = 1) -> StepRecorder:
    """One run of the step (forward, and backward when asked) under a `StepRecorder`; a dispatch mode only when there
    is a window to record operators in. `forward_only`: a window in the forward, replayed without the backward (in the
    same grad mode), the dispatch mode entered when the window opens and left when it closes; `stop_after_window`: and
    stopped there (`rec.stopped`; `adopt_rest` gives it the rest of the step from the module pass)."""
    import torch

    from ascend_tui.live.overflow import default_loss
    from ascend_tui.live.recording import recording

    rec = StepRecorder(model, inputs, window=window, grads=backward, flag_device=flag_device, progress=progress,
                       cancel=cancel, phase_label=phase_label, source=window is not None, module_stats=module_stats)
    rec.flag_every = flag_every

    def body(run_backward: bool) -> None:
        rec.outputs = call_model(model, inputs)
        if backward and run_backward:
            value = (loss or default_loss)(rec.outputs)
            rec.phase = "backward"
            rec.module_stack.clear()
            value.backward()
            rec.module_stack.clear()

    if flag_device is not None:
        flag_device.clear_overflow_flag()
    if window is None:  # pass 1: no dispatch mode at all
        from ascend_tui.live.recording import overrides

        rec.taps = [o.output for o in observers if overrides(o, "output")]
        handles = rec.attribute_modules(model) if hasattr(model, "named_modules") else []
        try:
            with frozen_gc(), torch.set_grad_enabled(backward):
                body(True)
        finally:
            for h in handles:
                h.remove()
    elif forward_only:  # the dispatch mode pushed only while the window is open
        rec.stop_after_window = stop_after_window
        with recording(model, rec, observers, grad=backward, mode_class=lazy_window_mode) as mode:
            rec.mode = mode
            try:
                if rec.active:
                    rec.mode_on()
                body(False)
            except WindowClosed:
                rec.stopped = True
            finally:
                rec.mode_off()
    else:
        with recording(model, rec, observers, grad=backward, mode_class=window_mode):
            body(True)
    if flag_device is not None:  # what the last batch of events set
        rec.read_flag(len(rec.events) - 1)
    if backward and not forward_only and hasattr(model, "named_parameters"):
        rec.param_grads(model)
    return rec


def adopt_rest(replay: StepRecorder, first: StepRecorder) -> bool:
    """Give a replay that ran only part of the step (forward only, or stopped where its window closed) the rest from
    the module pass: its later events, their module-level nodes (an edge from a module the replay recorded operator
    by operator now comes from the operator that made that output) and the parameter gradients. False when the
    replay's events are not the module pass's first ones (the step does something else when run again)."""
    n = len(replay.events)
    fe = first.events
    if n > len(fe) or any(a.module != b.module or a.phase != b.phase for a, b in zip(replay.events, fe)):
        return False
    remap: dict[str, list[SlotRef]] = {fe[i].node: refs for i, refs in replay.window_outputs.items() if fe[i].node}
    graph, target = first.graph, replay.graph
    for ev in fe[n:]:
        replay.events.append(ev)
        if not ev.node:
            continue
        _copy_node(replay, graph.node(ev.node))
        for edge in graph.producers(ev.node):
            refs = remap.get(edge.src)
            if refs is not None:
                if edge.out_slot < len(refs):
                    target.add_edge(refs[edge.out_slot].node, ev.node, refs[edge.out_slot].slot, edge.in_slot)
                continue
            if edge.src not in target:
                source = graph.node(edge.src)
                if not source.is_placeholder:
                    continue
                _copy_node(replay, source)
            target.add_edge(edge.src, ev.node, edge.out_slot, edge.in_slot)
    for node in graph.nodes:
        if node.id.startswith("grad:") and node.id not in target:
            _copy_node(replay, node)
    if replay.stopped:
        replay.outputs = first.outputs  # the same step's outputs: the replay stopped before making them
    return True


def _copy_node(rec: StepRecorder, node: Any) -> None:
    index = -1 if node.is_placeholder else rec.op_count
    rec.graph.add_node(op_node(node.id, node.op_type, node.module, index, node.kind, node.inputs, node.outputs,
                               node.source, node.phase, node.module_class, node.attrs))
    if index >= 0:
        rec.op_count += 1


@dataclass(slots=True)
class CoarseCapture:
    """The capture a coarse-to-fine run ends with, and how it got there (for the report)."""

    result: CaptureResult
    recorder: StepRecorder
    window: tuple[int, int] | None
    passes: int
    flag_set: bool = False
    notes: list[str] = field(default_factory=list)
    reference: CaptureResult | None = None

    def describe(self) -> dict[str, Any]:
        """`run.extra["capture"]`: what was recorded operator by operator and what only per module."""
        ev = self.recorder.events
        data: dict[str, Any] = {"detail": "module", "passes": self.passes, "module_events": len(ev),
                                "operators": sum(1 for n in self.result.graph.nodes
                                                 if n.kind == "op" and not _is_module(n))}
        if self.window is not None:
            end = ev[self.window[1]]
            start = ev[self.window[0]] if self.window[0] >= 0 else None
            data["window"] = {"suspect": end.module or "<model>", "phase": end.phase,
                              "after": (start.module or "<model>") if start is not None else None,
                              "events": [self.window[0], self.window[1]]}
        if self.notes:
            data["notes"] = list(self.notes)
        return data


def _is_module(node: Any) -> bool:
    return bool(node.attrs) and node.attrs.get("detail") == MODULE


def event_rows(rec: StepRecorder, stats: Any) -> tuple[np.ndarray, ...]:
    """(event index, min, max, NaN count, Inf count) per measured output of every event with a node."""
    position = {k: i for i, k in enumerate(stats.keys())}  # a StatsTable's keys are in row order
    idx, rows = [], []
    graph = rec.graph
    for ev in rec.events:
        if not ev.node:
            continue
        for slot in range(len(graph.node(ev.node).outputs)):
            row = position.get((ev.node, slot))
            if row is not None:
                idx.append(ev.index)
                rows.append(row)
    if not rows:
        empty = np.zeros(0)
        return empty, empty, empty, empty, empty
    at = np.asarray(rows)
    return (np.asarray(idx), stats.column("min")[at], stats.column("max")[at], stats.column("nan_count")[at],
            stats.column("inf_count")[at])


def zeroed(target: tuple[StepRecorder, Any], reference: tuple[StepRecorder, Any]) -> int | None:
    """The first event whose output the target zeroed where the reference did not (`first_zeroed_event`)."""
    (rt, st), (rr, sr) = target, reference
    idx, zeros, ref_zeros, numel = [], [], [], []
    for et, er in zip(rt.events, rr.events):
        if not (et.node and er.node):
            continue
        for slot in range(len(rt.graph.node(et.node).outputs)):
            a = st.get(et.node, slot) if (et.node, slot) in st else None
            b = sr.get(er.node, slot) if (er.node, slot) in sr else None
            if a is not None and b is not None and a.numel == b.numel:
                idx.append(et.index)
                zeros.append(a.zero_count)
                ref_zeros.append(b.zero_count)
                numel.append(a.numel)
    if not idx:
        return None
    return first_zeroed_event(np.asarray(idx), np.asarray(zeros, dtype=float), np.asarray(ref_zeros, dtype=float),
                              np.asarray(numel, dtype=float))


def widened(events: list[Event], window: tuple[int, int]) -> tuple[int, int]:
    """The window started where the call enclosing the current start began (backward: the backward's start)."""
    start, end = window
    target = events[end]
    if target.phase == "backward":
        first = next((e.index for e in events if e.phase == "backward"), end)
        return (first - 1 if start >= first else -1), end
    probe = events[start] if start >= 0 else None
    while probe is not None:
        parent = next((e for e in events[probe.index + 1:] if e.phase == "forward" and e.entered_at <= probe.entered_at
                       and _encloses(e.module, probe.module)), None)
        if parent is None:
            return -1, end
        if parent.entered_at - 1 < start:
            return parent.entered_at - 1, end
        probe = parent
    return -1, end


def _encloses(outer: str, inner: str) -> bool:
    return outer == "" or inner.startswith(outer + ".") or outer == inner


def window_inputs_bad(rec: StepRecorder, stats: Any) -> bool:
    """Whether a tensor the window read from outside (a placeholder) already held NaN or Inf."""
    for node in rec.graph.nodes:
        if node.is_placeholder:
            for slot in range(max(1, len(node.outputs))):
                if (node.id, slot) in stats:
                    r = stats.get(node.id, slot)
                    if r.nan_count > 0 or r.inf_count > 0 or not (np.isfinite(r.min) and np.isfinite(r.max)):
                        return True
    return False


@dataclass(frozen=True, slots=True)
class Side:
    """One run a coarse-to-fine capture replays: the model, its inputs, its device and the observers of its window."""

    model: Any
    inputs: Any
    device: Device
    observers: Sequence[Any] = ()


def coarse_capture(model: Any, inputs: Any, device: Device, *, backward: bool = False,
                   loss: Callable[[Any], Any] | None = None, observers: Sequence[Any] = (),
                   saturation_limit: float | None = None, progress: Any = None, cancel: Any = None,
                   reference: Side | None = None, max_widen: int = 4,
                   suspects: Sequence[Callable[[list[Event]], int | None]] = (),
                   on_target: Callable[[CaptureResult], None] | None = None) -> CoarseCapture:
    """Pass 1 at module level (on the reference too, when given: a module whose float32 values leave the checked
    dtype's range is as suspect as one that went bad); if some event is, replay the step with operators recorded in
    its window (both runs, the same window). `suspects` are the checks' own verdicts on pass 1 (the precision
    check's first module out of band), each given the target's events after the reference's pass 1; `on_target`
    sees each target capture before the reference replays it (the precision check reads the target's graph)."""
    sides = [Side(model, inputs, device, observers)] + ([reference] if reference is not None else [])
    states = [StepState.save(s.model, s.device) for s in sides]
    passes = 1
    flag_set = False
    notes: list[str] = []
    first: list[tuple[StepRecorder, Any]] = []
    starts: dict[int, int] = {}  # a suspect event -> where its window starts, when not at the event before it

    def run(i: int, window: tuple[int, int] | None, **kw: Any) -> tuple[StepRecorder, Any]:
        side = sides[i]
        # A window in the forward is replayed up to where it closes (pass 1 measured the rest), recording only while
        # it is open.
        forward = window is not None and first[i][0].events[window[1]].phase == "forward"
        for lazy in ((True, False) if forward else (False,)):
            states[i].restore(grads_cleared=True)
            rec = step_pass(side.model, side.inputs, window=window, backward=backward, loss=loss,
                            observers=side.observers, progress=progress if i == 0 else None,
                            cancel=cancel, forward_only=lazy, stop_after_window=lazy, **kw)
            if not lazy or adopt_rest(rec, first[i][0]):
                break
            notes.append("the replay's forward made other module calls than the module pass's: replayed whole")
        return rec, rec.finish_stats()

    try:
        if device.read_overflow_flag() is not None:
            device.clear_overflow_flag()
        recs = [run(0, None, phase_label="module pass")]
        first[:] = recs
        if recs[0][0].unmeasured:
            notes.append(f"{recs[0][0].unmeasured} module outputs changed in place before they were measured: "
                         "no statistics for them")
        flag_set = bool(device.read_overflow_flag())
        if on_target is not None:
            on_target(_result(*recs[0]))
        if len(sides) > 1:
            recs.append(run(1, None, phase_label="module pass of the reference"))
            first.append(recs[1])
        bads = [first_bad_event(*event_rows(*recs[0]), saturation_limit=saturation_limit)]
        if len(recs) > 1 and len(recs[1][0].events) == len(recs[0][0].events):
            bads.append(first_bad_event(*event_rows(*recs[1]), saturation_limit=saturation_limit))
            bads.append(zeroed(recs[0], recs[1]))
        if all(b is None for b in bads) and flag_set:  # saturation mode: the flag says something overflowed, not where
            every = max(1, len(recs[0][0].events) // FLAG_READS)
            flagged, _ = run(0, None, flag_device=device, flag_every=every, phase_label="finding the overflow flag")
            passes += 1
            reads = flagged.flag_reads
            hit = next((k for k, (_, flag) in enumerate(reads) if flag), None)
            if hit is None or reads[hit][0] < 0:
                notes.append("the overflow flag was set outside every module call")
            else:  # the window: the events since the read before
                bads.append(reads[hit][0])
                starts[reads[hit][0]] = reads[hit - 1][0] if hit else -1
        bads += [judge(recs[0][0].events) for judge in suspects]
        bad = min((b for b in bads if b is not None), default=None)
        window = None if bad is None else (starts.get(bad, bad - 1), bad)
        for attempt in range(max_widen + 1):
            if window is None:
                break
            recs[0] = run(0, window, phase_label="recording the suspect module", module_stats=False)
            passes += 1
            if on_target is not None:
                on_target(_result(*recs[0]))
            if window[0] < 0 or not window_inputs_bad(*recs[0]) or attempt == max_widen:
                break
            window = widened(recs[0][0].events, window)
        if window is not None and len(recs) > 1:
            recs[1] = run(1, window, phase_label="recording the suspect module in the reference", module_stats=False)
        results = [_result(r, st) if r is f[0] else merged(f, (r, st)) for (r, st), f in zip(recs, first)]
        out = CoarseCapture(results[0], recs[0][0], window, passes, flag_set, notes)
        out.reference = results[1] if len(results) > 1 else None
        return out
    finally:
        for state in states:
            state.restore()


def merged(first: tuple[StepRecorder, Any], replay: tuple[StepRecorder, Any]) -> CaptureResult:
    """The replay's capture with its module nodes' statistics and histograms taken from the module pass (the same
    events of the same step: measuring them twice would double the cost of the replay)."""
    from ascend_tui.evidence import STAT_FIELDS, HistogramTable, StatsTable

    (r1, s1), (r2, s2) = first, replay
    h1, h2 = r1.finish_histograms(), r2.finish_histograms()
    same: dict[str, str] = {e2.node: e1.node for e1, e2 in zip(r1.events, r2.events) if e1.node and e2.node}
    same.update({n.id: n.id for n in r2.graph.nodes if n.id.startswith("grad:")
                 or (n.is_placeholder and n.kind in ("input", "param", "buffer"))})  # named: the same tensor
    copy_of = dict(r2.stat_rows.copies)  # views of a module's output hold its values: the module pass's row
    pos1, pos2 = _positions(s1), _positions(s2)
    keys, rows1, rows2, hkeys, hrows = [], [], [], [], []
    for node in r2.graph.nodes:
        for slot in range(max(1, len(node.outputs))):
            key, src = (node.id, slot), (same.get(node.id, ""), slot)
            hop, seen = key, 0
            while hop not in pos2 and hop in copy_of and seen < 64:  # a view of a view of a module's output
                hop, seen = copy_of[hop], seen + 1
            if hop != key and hop not in pos2 and hop[0] in same:
                src = (same[hop[0]], hop[1])
            i = pos2.get(key)
            j = pos1.get(src) if i is None else None
            if i is not None or j is not None:
                keys.append(key)
                rows2.append(-1 if i is None else i)
                rows1.append(-1 if j is None else j)
            hist = h2.get(*key) or (h1.get(*src) if src[0] else None)
            if hist is not None:
                hkeys.append(key)
                hrows.append(np.append(hist[0], hist[1]))
    stats = StatsTable()
    if keys:
        a, b = np.asarray(rows2), np.asarray(rows1)
        data = np.empty((len(keys), len(STAT_FIELDS)), dtype=np.float64)
        data[a >= 0] = _matrix(s2)[a[a >= 0]]
        data[b >= 0] = _matrix(s1)[b[b >= 0]]
        stats.add_many(keys, data)
    hists = HistogramTable(hkeys, np.array(hrows, dtype=np.int64)) if hkeys else HistogramTable()
    return CaptureResult(r2.graph, stats, r2.outputs, r2.op_count, recorder=r2, histograms=hists)


def _positions(table: Any) -> dict[tuple[str, int], int]:
    return {k: i for i, k in enumerate(table.keys())}  # a StatsTable's keys are in row order


def _matrix(table: Any) -> np.ndarray:
    from ascend_tui.evidence import STAT_FIELDS

    return np.column_stack([table.column(f) for f in STAT_FIELDS]) if len(table) else \
        np.zeros((0, len(STAT_FIELDS)))


def _result(rec: StepRecorder, stats: Any) -> CaptureResult:
    return CaptureResult(rec.graph, stats, rec.outputs, rec.op_count, recorder=rec, histograms=rec.finish_histograms())


def reference_pass(model: Any, inputs: Any, device: Device, *, window: tuple[int, int] | None, backward: bool,
                   loss: Callable[[Any], Any] | None, observers: Sequence[Any], cancel: Any = None) -> CaptureResult:
    """The reference run of a coarse-to-fine capture: the same module events, operators in the same window."""
    state = StepState.save(model, device)
    try:
        state.restore(grads_cleared=True)
        rec = step_pass(model, inputs, window=window, backward=backward, loss=loss, observers=observers,
                        cancel=cancel, phase_label="capturing reference")
        return CaptureResult(rec.graph, rec.finish_stats(), rec.outputs, rec.op_count, recorder=rec,
                             histograms=rec.finish_histograms())
    finally:
        state.restore()


def saturation_limit(dtype: Any) -> float | None:
    """The largest finite magnitude of the dtype the check judges: a module output there has saturated (a device in
    saturation mode clamps to it) or, in a wider run dtype, would overflow the checked one."""
    from ascend_tui.checks.overflow import range_of
    from ascend_tui.live.capture import dtype_name

    rng = range_of(dtype if isinstance(dtype, str) else dtype_name(dtype))
    return rng.max if rng is not None else None
