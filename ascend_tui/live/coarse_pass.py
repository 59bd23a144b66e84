"""The recorder of a coarse-to-fine capture's passes (`live.coarse`; `live.coarse_step` runs the step under it).

One node per module call (and per gradient reaching a module's output), each an *event*;
operator nodes only inside a window of events, recorded by a dispatch mode that is pushed when
the window opens and popped when it closes (a forward window) or that lets operators outside it
run untouched (a backward window). Module-level tensors are measured through `BatchStats`.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from functools import partial
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ascend_tui.errors import Cancelled
from ascend_tui.graph.opgraph import derive, op_node
from ascend_tui.live.batch_stats import BatchStats
from ascend_tui.live.capture import ABSENT, Recorder, SlotRef, Unshadow, tensor_meta
from ascend_tui.live.coarse_window import WindowClosed
from ascend_tui.live.tensors import tensor_leaves

if TYPE_CHECKING:
    from ascend_tui.live.device import Device

MODULE = "module"  # the value of `attrs["detail"]` on nodes that stand for a whole module call
FLAG_READS = 32  # reads of the overflow flag (a host sync each) in the pass that looks for it: one every N events
MODULE_SAMPLE = 512  # values per module-level histogram (an operator's: `HIST_SAMPLE`); binning is ~4 ns a value
_META, _PORT = attrgetter("meta"), itemgetter(0, 1)  # a `SlotRef`'s metadata; its (node, slot), an edge's source
_new_ref = tuple.__new__  # `SlotRef(...)` without the Python call of a named tuple's `__new__`


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
            names = known[1]
            pairs = [("", model), *[(names[id(m)], m) for m in known[2]]]
        else:
            pairs = list(model.named_modules())
        thread = threading.get_ident()
        shadowed: list[tuple[dict[str, Any], Any]] = []
        for name, mod in pairs:
            own = getattr(mod, "__dict__", None)
            if type(own) is not dict and not isinstance(own, dict):
                continue
            prior = own["_call_impl"] if "_call_impl" in own else ABSENT
            own["_call_impl"] = self._wrapped(mod._call_impl, name, type(mod).__name__, thread)
            shadowed.append((own, prior))
        return [Unshadow(shadowed)]

    def _wrapped(self, call: Callable[..., Any], name: str, cls: str, thread: int) -> Callable[..., Any]:
        stack, frames, frame_ops, get_ident = self.module_stack, self._frames, self._frame_ops, threading.get_ident
        ops = self.window is not None  # operators are recorded only in a window: the module pass tracks none

        def _call_impl(*args: Any, **kwargs: Any) -> Any:
            if get_ident() != thread:
                return call(*args, **kwargs)
            entered = len(self.events)
            meter = self.meter
            token = meter.enter() if meter is not None else None
            stack.append(name)
            frames.append([])
            if ops:
                frame_ops.append(None)
            try:
                out = call(*args, **kwargs)
            finally:
                stack.pop()
                children = frames.pop()
                last_op = frame_ops.pop() if ops else None
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
        outs = [out] if isinstance(out, self._tensor) else tensor_leaves([out], self._tensor)
        events = self.events
        index = len(events)
        w = self.window
        metas: tuple[Any, ...] = ()
        if w is not None and w[0] < index <= w[1]:
            node = ""
            if self.stop_after_window:
                self.window_outputs[index] = [self.source_of(t) for t in outs]
        else:
            node, metas = self._module_node(name, cls, args, kwargs, outs, children)
        events.append(Event(index, name, cls, self.phase, node, entered, *measured))
        if self.grads and self.phase == "forward" and self._grad_enabled():
            hooked = self._hooked
            for slot, t in enumerate(outs):
                if t.requires_grad and t.is_floating_point():
                    key = id(t)
                    seen = hooked.get(key)
                    if seen is None or seen() is not t:  # a parent returning its child's output: the child's event
                        hooked[key] = weakref.ref(t)
                        meta = metas[slot] if metas else tensor_meta(t)
                        self.grad_hooks.append(t.register_hook(partial(self._grad_hook, name, cls, meta)))
        if w is not None or self.flag_device is not None or self.cancel is not None or self.progress is not None:
            self._advance(index)

    def _input_refs(self) -> list[SlotRef]:
        """The placeholders of the run's own inputs: where data made before any node must have come from."""
        return [self.source_of(t) for t in self._keepalive if self._named.get(id(t), ("",))[0] == "input"]

    def _module_node(self, name: str, cls: str, args: Any, kwargs: Any, outs: list[Any],
                     children: list[SlotRef]) -> tuple[str, tuple[Any, ...]]:
        """A node for one module call, fed by its inputs, its children and what made its outputs; outputs measured.
        (node id, output metadata); the node goes on the caller's list of children."""
        tensor = self._tensor
        refs: list[SlotRef] = []
        pairs: dict[tuple[str, int], None] = {}  # dicts for sets: a store is no method call (a few a module call)
        nodes: dict[str, None] = {}
        unknown = False
        producers, named = self._producers, self._named
        leaves = [args[0]] if len(args) == 1 and isinstance(args[0], tensor) else tensor_leaves(args, tensor)
        for x in (leaves + tensor_leaves(kwargs.values(), tensor)) if kwargs else leaves:
            entry = producers.get(id(x))
            if entry is not None and entry[0]() is x:
                ref = entry[1]
            else:  # no node made it: a named input, parameter or buffer has its placeholder
                ref = self.source_of(x) if id(x) in named else None
            if ref is None:
                unknown = True
            elif ref[:2] not in pairs:
                pairs[ref[:2]] = nodes[ref.node] = None
                refs.append(ref)
        for ref in children:
            if ref.node not in nodes:
                nodes[ref.node] = None
                refs.append(ref)
        made_inside = False
        for t in outs:
            entry = producers.get(id(t))
            if entry is None or entry[0]() is not t:
                made_inside = True
            elif entry[1].node not in nodes:
                nodes[entry[1].node] = None
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
                    nodes[ref.node] = None
                    refs.append(ref)
        node_id = self.ids.mint(name, MODULE, self.phase)
        metas = tuple(map(tensor_meta, outs))
        index = self.op_count
        self.op_count += 1
        self.graph.add_fed(op_node(node_id, f"module.{cls}", name, index, "op", tuple(map(_META, refs)), metas,
                                   None, self.phase, cls, {"detail": MODULE}), map(_PORT, refs))
        measure = self.want_stats and self.module_stats
        taps = self.taps
        last = None
        for slot, t in enumerate(outs):
            ref = _new_ref(SlotRef, (node_id, slot, index, metas[slot]))
            last = last or ref
            producers[id(t)] = (weakref.ref(t), ref)
            if t.is_floating_point():
                for tap in taps:  # observers' evidence (underflow in the reference) per module output too
                    tap(node_id, slot, t)
                if measure:
                    self.take((node_id, slot), t)
        self._last = last or _new_ref(SlotRef, (node_id, 0, index, None))
        # what the parent's node is fed by: what made its first output (a repeated tensor: its last slot)
        self._frames[-1].append(producers[id(outs[0])][1] if outs else self._last)
        return node_id, metas

    def _grad_hook(self, name: str, cls: str, meta: Any, grad: Any) -> None:
        """A gradient reached an output of a `name` call (a hook, bound with `partial`): its event, and a node."""
        events = self.events
        index = len(events)
        node = ""
        w = self.window
        if w is None or not w[0] < index <= w[1]:
            node = self.ids.mint(name, "module_grad", "backward")
            i = self.op_count
            self.op_count += 1
            self.graph.add_node(op_node(node, f"module_grad.{cls}", name, i, "op", (), (meta,), None, "backward",
                                        cls, {"detail": MODULE, "gradient_of": name}))
            for tap in self.taps:
                tap(node, 0, grad)
            if self.want_stats and self.module_stats:
                self.take((node, 0), grad)
            self._last = _new_ref(SlotRef, (node, 0, i, meta))
        events.append(Event(index, name, cls, "backward", node, index))
        self.module_stack[:] = [name] if name else []  # what runs next is this module's backward
        if w is not None or self.flag_device is not None or self.cancel is not None or self.progress is not None:
            self._advance(index)

    def take(self, key: tuple[str, int], t: Any) -> None:
        """Measure a module-level tensor for `key` now (`BatchStats`), or point at the row of the same tensor."""
        i = id(t)
        seen = self._measured.get(i)
        if seen is not None and seen[0]() is t and seen[1] == t._version:
            self._batch_copies.append((key, seen[2]))
            return
        # Measured now, not kept for a batch: a caller may change a module's output in place (`out += identity`), and
        # keeping gradients for a batch measured no faster on the CPU (tight loops lose to hot caches).
        if self.batch.add(t) is not None:
            self._batch_keys.append(key)
            self._measured[i] = (weakref.ref(t), t._version, key)

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
            for key in keys if hist_of else ():  # none sampled: no check reads module-level histograms
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
        named = self._named  # the parameters `Recorder` named (every tensor it keeps alive), in `named_parameters()` order
        params = [(kind[1], t) for t in self._keepalive if (kind := named[id(t)])[0] == "param"]
        graph, measure = self.graph, self.want_stats and self.module_stats
        made = self.window is not None  # only a replay's recorder may have made `grad:` nodes: pass 1 makes none
        for name, p in params or model.named_parameters():
            grad = p.grad
            if grad is None or made and f"grad:{name}" in graph:
                continue
            node_id, meta = f"grad:{name}", tensor_meta(grad)
            graph.add_node(op_node(node_id, "grad", name.rpartition(".")[0], self.op_count, "output", (meta,), (meta,),
                                   None, "backward", "", {"forward": f"param:{name}", "detail": MODULE}))
            self.op_count += 1
            for tap in self.taps:
                tap(node_id, 0, grad)
            if measure:
                self.take((node_id, 0), grad)
