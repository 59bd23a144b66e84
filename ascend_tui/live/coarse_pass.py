"""The passes of a coarse-to-fine capture (`live.coarse`): a step run under a `StepRecorder`.

One node per module call (and per gradient reaching a module's output), each an *event*;
operator nodes only inside a window of events, recorded by a dispatch mode that is pushed when
the window opens and popped when it closes (a forward window) or that lets operators outside it
run untouched (a backward window). Module-level tensors are measured through `BatchStats`.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ascend_tui.errors import Cancelled
from ascend_tui.graph.opgraph import derive, op_node
from ascend_tui.live.batch_stats import BatchStats
from ascend_tui.live.capture import ABSENT, Recorder, SlotRef, Unshadow, tensor_meta
from ascend_tui.live.tensors import call_model, tensor_leaves
from ascend_tui.live.coarse_window import WindowClosed, lazy_window_mode, window_mode
from ascend_tui.live.frames import stop_at
from ascend_tui.progress import frozen_gc

if TYPE_CHECKING:
    from ascend_tui.live.device import Device

MODULE = "module"  # the value of `attrs["detail"]` on nodes that stand for a whole module call
FLAG_READS = 32  # reads of the overflow flag (a host sync each) in the pass that looks for it: one every N events
MODULE_SAMPLE = 512  # values per module-level histogram (an operator's: `HIST_SAMPLE`); binning is ~4 ns a value


@dataclass(frozen=True, slots=True)
class Event:
    """One module-level measurement: a module call's outputs (forward) or the gradient reaching them (backward)."""

    index: int
    module: str
    module_class: str
    phase: str
    node: str  # "" for events inside the window (their operators are nodes instead)
    entered_at: int  # events finished when the call started (forward); the event's own index in backward
    seconds: float | None = None  # the call's own time, when a meter was asked (`live.coarse_meter`)
    nbytes: int | None = None  # bytes the call allocated, when a meter was asked


class StepRecorder(Recorder):
    """A recorder that makes one node per module call (and per module gradient), and operator nodes only inside its
    window of events (none when `window` is None: pass 1)."""

    def __init__(self, model: Any, inputs: Any, *, window: tuple[int, int] | None = None, grads: bool = False,
                 flag_device: Device | None = None, module_stats: bool = True, histograms: bool = True,
                 **kwargs: Any) -> None:
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
        # The gradient hooks' handles, removed when the pass ends: a hook's closure holds this recorder, which holds
        # the step's outputs, whose autograd graph holds the hook, a cycle through C++ the collector cannot see
        # (every investigation of a training step stayed in memory: ~6k objects and ~12 MB a Llama step).
        self.grad_hooks: list[Any] = []
        self._last: SlotRef | None = None
        # Module-level measurements: taken when handed over, rows together at the end (`live.batch_stats`); a
        # tensor measured already (a parent returning its child's output, one gradient reaching two outputs)
        # unchanged since takes that row. Their histograms only when a check reads them (`histograms`): the overflow
        # check's float16 prediction does; sampling and binning them was ~4 ms of a hidden-128 Llama step's ~50.
        self.batch = BatchStats(self._torch, sample=MODULE_SAMPLE, histograms=histograms)
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
        self.unmeasured = 0  # module-level tensors BatchStats gave a row but no values (`BatchStats.changed`)
        self.meter: Any = None  # times / sizes each forward module call (`live.coarse_meter.Meter`); None: neither

    # -- events ---------------------------------------------------------------------------------

    def attribute_modules(self, model: Any) -> list[Any]:
        """Shadow every module's `_call_impl` (the model's own too) to attribute ops and end each call with an event."""
        known = self._module_names  # the walk `Recorder` made naming the parameters: not another one
        if known is not None and known[0] == id(model):
            pairs = [("", model), *((known[1][id(m)], m) for m in known[2])]
        else:
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

        def _call_impl(*args: Any, **kwargs: Any) -> Any:
            if get_ident() != thread:
                return call(*args, **kwargs)
            entered = len(self.events)
            meter = self.meter
            token = meter.enter() if meter is not None else None
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
            if meter is None:
                self._exit(name, cls, args, kwargs, out, children, entered)
            else:
                self._exit(name, cls, args, kwargs, out, children, entered, meter.exit(token, args, kwargs, out))
                meter.done()
            return out

        return _call_impl

    def remove_grad_hooks(self) -> None:
        for handle in self.grad_hooks:
            handle.remove()
        self.grad_hooks.clear()

    def mode_on(self) -> None:
        """Enter the dispatch mode (a replay that records operators only while its window is open)."""
        if self.mode is not None and not self._mode_entered:
            self.mode.push()
            self._mode_entered = True

    def mode_off(self) -> None:
        if self.mode is not None and self._mode_entered:
            self._mode_entered = False
            self.mode.pop()

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
              entered: int, measured: tuple[float, int] | tuple[()] = ()) -> None:
        tensor = self._tensor
        outs = [out] if isinstance(out, tensor) else tensor_leaves([out], tensor)
        index = len(self.events)
        w = self.window
        inside = w is not None and w[0] < index <= w[1]
        node = "" if inside else self._module_node(name, cls, args, kwargs, outs, children)
        if inside and self.stop_after_window:
            self.window_outputs[index] = [self.source_of(t) for t in outs]
        self.events.append(Event(index, name, cls, self.phase, node, entered, *measured))
        if node:
            self._frames[-1].append(self._producers[id(outs[0])][1] if outs else SlotRef(node, 0, self.op_count - 1))
        if self.grads and self.phase == "forward" and self._grad_enabled():
            hooked = self._hooked
            for t in outs:
                if t.requires_grad and t.is_floating_point():
                    seen = hooked.get(id(t))
                    if seen is None or seen() is not t:  # a parent returning its child's output: the child's event
                        hooked[id(t)] = weakref.ref(t)
                        self.grad_hooks.append(t.register_hook(self._grad_hook(name, cls, tensor_meta(t))))
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
        made_inside = False
        for t in outs:
            entry = producers.get(id(t))
            if entry is None or entry[0]() is not t:
                made_inside = True
            elif entry[1].node not in nodes:
                nodes.add(entry[1].node)
                refs.append(entry[1])
        # an output no node made was computed inside this module (a leaf's own ops are not recorded in this
        # pass): from its inputs when it has any, so only an unknown input (or none at all) brings in the caller's
        # earlier values; linking every leaf to all its siblings made a 600-layer Sequential quadratic (180k edges)
        if unknown or made_inside and not refs:  # made by code no node stands for: what the caller made may feed it
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
        # Measured now, not kept for a batch: a caller may change a module's output in place (`out += identity`), and
        # keeping gradients for a batch measured no faster on the CPU (tight loops lose to hot caches).
        if self.batch.add(t) is not None:
            self._batch_keys.append(key)
            self._measured[id(t)] = (weakref.ref(t), t._version, key)

    def _module_tables(self) -> tuple[list[tuple[str, int]], np.ndarray, list[tuple[str, int]], np.ndarray]:
        """(keys, `STAT_FIELDS` rows, histogram keys, histogram rows) of the module-level measurements, made once."""
        if self._finished is None:
            from ascend_tui.live.stat_rows import finish_rows

            raw, numel, hist_rows, hists = self.batch.finish()
            keys = list(self._batch_keys)
            data = finish_rows(raw, numel)
            if self.batch.changed:  # rows without values: no statistics (counted in the notes)
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
        named = self._named  # the parameters `Recorder` named, in `named_parameters()` order
        params = [(named[id(t)][1], t) for t in self._keepalive if named.get(id(t), ("",))[0] == "param"]
        for name, p in params or model.named_parameters():
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


def step_pass(model: Any, inputs: Any, *, window: tuple[int, int] | None, backward: bool = False,
              loss: Callable[[Any], Any] | None = None, observers: Sequence[Any] = (), progress: Any = None,
              cancel: Any = None, flag_device: Device | None = None, phase_label: str = "capturing",
              module_stats: bool = True, forward_only: bool = False,
              stop_after_window: bool = False, flag_every: int = 1, meter: Any = None,
              histograms: bool = True) -> StepRecorder:
    """One run of the step (forward, and backward when asked) under a `StepRecorder`; a dispatch mode only when there
    is a window to record operators in. `forward_only`: a window in the forward, replayed without the backward (in the
    same grad mode), the dispatch mode entered when the window opens and left when it closes; `stop_after_window`: and
    stopped there (`rec.stopped`; `adopt_rest` gives it the rest of the step from the module pass); `meter`: each
    forward module call's time and bytes on its event (`live.coarse_meter`); `histograms`: sample module-level
    histograms too (the window's operators always get theirs)."""
    from ascend_tui.live.overflow import default_loss

    rec = StepRecorder(model, inputs, window=window, grads=backward and not forward_only, flag_device=flag_device, progress=progress,
                       cancel=cancel, phase_label=phase_label, source=window is not None, module_stats=module_stats,
                       histograms=histograms)
    rec.flag_every = flag_every
    rec.meter = meter

    def body(run_backward: bool) -> None:
        run_step(rec, model, inputs, loss or default_loss if backward and run_backward else None)

    if flag_device is not None:
        flag_device.clear_overflow_flag()
    try:
        _run_pass(rec, model, body, window, backward, forward_only, stop_after_window, observers)
    finally:
        rec.remove_grad_hooks()
    if flag_device is not None:  # what the last batch of events set
        rec.read_flag(len(rec.events) - 1)
    if backward and not forward_only and hasattr(model, "named_parameters"):
        rec.param_grads(model)
    return rec


def _run_pass(rec: StepRecorder, model: Any, body: Callable[[bool], None], window: tuple[int, int] | None,
              backward: bool, forward_only: bool, stop_after_window: bool, observers: Sequence[Any]) -> None:
    """`body` under what the pass needs: the module wrappers alone (pass 1), or a dispatch mode for the window."""
    import torch

    from ascend_tui.live.recording import recording

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


def run_step(rec: StepRecorder, model: Any, inputs: Any, loss: Callable[[Any], Any] | None) -> None:
    """The model's forward, then (with a `loss`) its backward: the outer end of every source stack of a recorded step,
    so that gradient ops, run from `value.backward()` here, never name the code that started the investigation."""
    rec.outputs = call_model(model, inputs)
    if loss is not None:
        value = loss(rec.outputs)
        rec.phase = "backward"
        rec.module_stack.clear()
        value.backward()
        rec.module_stack.clear()


stop_at(run_step)
