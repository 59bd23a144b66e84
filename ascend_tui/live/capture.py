"""Live capture: run an eager `nn.Module` under a dispatch mode and build the graph of what executed.

One node per aten call, named `<module path>/<op>.<k>`; edges follow the tensor that each
input slot read, through views and in-place writes; placeholders stand for user inputs,
parameters, buffers and tensors from elsewhere. Statistics of every output are taken by
`live/statistics.py` (small CPU outputs in host batches, large ones in one chunked pass,
accelerator ones queued on the device) and brought together at the end of the run. What
does not change between calls (an overload's schema facts, a call stack's source location,
a shape's `TensorMeta`) is computed once.
"""

from __future__ import annotations

import threading
import weakref
from math import prod
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from ascend_tui.errors import Cancelled
from ascend_tui.evidence import HistogramTable, StatsTable, TensorMeta
from ascend_tui.graph.ids import IdMinter, api_op, node_id as node_id_of
from ascend_tui.graph.opgraph import OpGraph, OpNode, op_node
from ascend_tui.live.attribution import ABSENT, WRAPPER_CODE, Unshadow, attributed
from ascend_tui.live.aten import FACTS, SAME_VALUES, overload_facts, storage_key, written_args
from ascend_tui.live.frames import SourceStack, stop_at, user_source, wrapper_code
from ascend_tui.live.stat_rows import StatRows
from ascend_tui.live.tensors import FLOATING, Inputs, dtype_name, split_inputs, tensor_leaves
from ascend_tui.live.weights import WEIGHTS
from ascend_tui.progress import Progress

# `Inputs` stays importable from here, where user scripts written before `live/tensors.py` found it.
__all__ = ["ABSENT", "SAME_VALUES", "CaptureResult", "Inputs", "Recorder", "SlotRef", "Unshadow", "tensor_meta",
           "user_source"]


@dataclass(slots=True)
class CaptureResult:
    """What one captured run produced: the graph, per-output statistics and the model's outputs."""

    graph: OpGraph
    stats: StatsTable
    outputs: Any
    op_count: int
    phases: dict[str, int] = field(default_factory=dict)
    recorder: Recorder | None = None
    histograms: HistogramTable | None = None
    backward: bool = False  # the run was a training step: forward and backward recorded together


class SlotRef(NamedTuple):
    """The node and output slot that made (or last wrote) a tensor's values (a tuple: `record` makes one per
    output with `tuple.__new__`, a C call, where a dataclass's `__init__` was a Python call)."""

    node: str
    slot: int
    index: int
    meta: TensorMeta | None = None  # the shape and dtype it was made with, when this ref is its own tensor's


_new_ref = tuple.__new__


_METAS: dict[tuple[Any, ...], TensorMeta] = {}


def tensor_meta(t: Any) -> TensorMeta:
    """The (shared, immutable) `TensorMeta` of `t`'s shape and dtype."""
    key = (t.dtype, *t.shape)  # plain ints: hashing and comparing a torch.Size costs 3x more
    meta = _METAS.get(key)
    if meta is None:
        meta = _METAS[key] = TensorMeta(key[1:], dtype_name(t.dtype))
        if len(_METAS) > 65536:  # dynamic shapes could grow it without bound
            _METAS.clear()
    return meta


class Recorder:
    """Builds an `OpGraph` from aten calls; shared by the capture mode and the sanitizer mode."""

    def __init__(
        self,
        model: Any,
        inputs: Any,
        *,
        stats: bool = True,
        source: bool = True,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        phase_label: str = "capturing",
        expected_ops: int | None = None,
        api_ids: bool = False,
    ) -> None:
        import torch
        from torch.utils._pytree import keystr, tree_flatten_with_path

        self._torch = torch
        self._tensor = torch.Tensor
        self._strided = torch.strided
        self._float32 = torch.float32
        self.graph = OpGraph()
        self.want_stats = stats
        self.want_source = source
        self.progress = progress
        self.cancel = cancel
        self.phase_label = phase_label
        self.expected_ops = expected_ops
        self.op_count = 0
        self.phase = "forward"
        self.module_stack: list[str] = []
        self._module_class: dict[str, str] = {}
        self.ids = IdMinter()
        self._counters = self.ids._counters  # (`record` mints its ids itself)
        self.want_api = api_ids  # name each op's framework API call as msprobe does (recording's ApiMode)
        self.api_ids = IdMinter()
        self.api: str | None = None
        self.api_module = ""
        self.api_id: str | None = None
        self.taps: list[Callable[[str, int, Any], None]] = []
        # id(tensor) -> (weak reference to it, who made its values); the reference tells a live
        # tensor from a dead one whose id was reused.
        self._producers: dict[int, tuple[Any, SlotRef]] = {}
        # For a subclass that maps gradient ops to forward ops (`GradRecorder`): in the forward, `record` lists each
        # floating output here ((node id, module), its weak reference) and calls `resolve()` at the next op, when
        # autograd has set its `grad_fn`; in the backward, with `_owners` set, it calls `_own()` before each op.
        self._pending: list[tuple[tuple[str, str], Any]] | None = None
        self._owners: dict[Any, tuple[str, str]] | None = None  # autograd node -> its forward op (node id, module)
        self.current: tuple[str, str] | None = None  # (a subclass's) the forward op of the gradient op running now
        self._writers: dict[int, SlotRef] = {}
        self.stat_rows = StatRows(torch)  # every measured output's statistics, in recording order
        self._const_count = 0
        self._named: dict[int, tuple[str, str]] = {}
        self._keepalive: list[Any] = []
        self._module_names: tuple[int, dict[int, str], list[Any]] | None = None
        self.sources = SourceStack()  # source locations, with the frames above each running module call cached
        if isinstance(model, torch.nn.Module):
            self._name_tensors(model)
        elif hasattr(model, "named_parameters"):
            for name, p in model.named_parameters(remove_duplicate=True):
                self._named[id(p)] = ("param", name)
                self._keepalive.append(p)
            for name, b in model.named_buffers(remove_duplicate=True):
                self._named[id(b)] = ("buffer", name)
                self._keepalive.append(b)
            for name, mod in model.named_modules():
                self._module_class[name] = type(mod).__name__
        for part in split_inputs(inputs):
            for path, leaf in tree_flatten_with_path(part)[0]:
                if isinstance(leaf, torch.Tensor):
                    label = keystr(path).replace("][", ".").strip("[]").replace("'", "")
                    self._named.setdefault(id(leaf), ("input", label or "0"))
                    self._keepalive.append(leaf)

    def _name_tensors(self, model: Any) -> None:
        """Parameters, buffers, module classes and module names in one walk over the modules.

        The same names `named_parameters()` / `named_buffers()` give (a tensor shared by two
        modules keeps its first name), without walking the module tree three times.
        """
        params: set[int] = set()
        buffers: set[int] = set()
        names: dict[int, str] = {}
        modules: list[Any] = []
        for name, mod in model.named_modules():
            self._module_class[name] = type(mod).__name__
            if name:
                names[id(mod)] = name
                modules.append(mod)
            prefix = f"{name}." if name else ""
            for key, p in mod._parameters.items():
                if p is not None and id(p) not in params:
                    params.add(id(p))
                    self._named[id(p)] = ("param", prefix + key)
                    self._keepalive.append(p)
            for key, b in mod._buffers.items():
                if b is not None and id(b) not in buffers:
                    buffers.add(id(b))
                    self._named[id(b)] = ("buffer", prefix + key)
                    self._keepalive.append(b)
        self._module_names = (id(model), names, modules)

    # -- module attribution -----------------------------------------------------------------

    @property
    def module(self) -> str:
        return self.module_stack[-1] if self.module_stack else ""

    def attribute_modules(self, model: Any) -> list[Any]:
        """Attribute each op to its innermost module; returns handles whose `remove()` undoes it.

        Each module's `_call_impl` is shadowed, for the run, by one that pushes the module's name
        around the original (its own hooks and forward, as a forward pre/post hook pair would
        see them). Global module hooks would do the same, but any hook at all sends every module
        call through torch's slow path (about 10 us a call); this costs a push and a pop. Calls
        from other threads are not attributed.
        """
        if self._module_names is not None and self._module_names[0] == id(model):
            _, names, modules = self._module_names
        else:
            pairs = [(name, mod) for name, mod in model.named_modules() if name]
            modules = [mod for _, mod in pairs]
            names = {id(mod): name for name, mod in pairs}
        if not names:
            return []
        stack = self.module_stack
        thread = threading.get_ident()
        get_ident = threading.get_ident
        sources = self.sources
        # A code object of this recording's own: its frames are the ones whose entries are on `sources.outer`
        # (another recording's wrappers around the same modules are walked through as library frames).
        code = WRAPPER_CODE.replace()
        wrapper_code(code)
        sources.wrap, sources.thread, sources.outer = id(code), thread, []
        shadowed: list[tuple[dict[str, Any], Any]] = []
        for mod in modules:
            if not isinstance(getattr(mod, "__dict__", None), dict):
                continue
            own = mod.__dict__
            prior = own.get("_call_impl", ABSENT)
            own["_call_impl"] = attributed(mod._call_impl, names[id(mod)], stack, thread, get_ident, sources.outer,
                                            code)
            shadowed.append((own, prior))
        return [Unshadow(shadowed)]

    # -- recording ---------------------------------------------------------------------------

    def next_id(self, module: str, op: str) -> str:
        return self.ids.mint(module, op, self.phase)

    def enter_api(self, name: str) -> None:
        """A framework API call (`F.conv2d`, `Tensor.__add__`) starts; the aten ops it runs belong to it."""
        self.api, self.api_module, self.api_id = api_op(name), self.module, None

    def leave_api(self) -> None:
        self.api = self.api_id = None

    def current_api(self) -> str | None:
        """The API-level id of the call running now (`conv1/conv2d.0`, as msprobe's dumps are named), minted on
        its first aten op so calls that run none (`size`, `dim`) take no number."""
        if self.api is None:
            return None
        if self.api_id is None:
            self.api_id = self.api_ids.mint(self.api_module, self.api, self.phase)
        return self.api_id

    def _producer(self, t: Any) -> SlotRef | None:
        entry = self._producers.get(id(t))
        if entry is not None and entry[0]() is t:
            return entry[1]
        return None

    def made(self, t: Any) -> SlotRef | None:
        """The op output (or placeholder) `t` itself is, when it is one: None for tensors nothing recorded made."""
        return self._producer(t)

    def _set_producer(self, t: Any, ref: SlotRef) -> None:
        self._producers[id(t)] = (weakref.ref(t), ref)

    def source_of(self, t: Any) -> SlotRef:
        """The node and slot that last wrote the data `t` reads, creating a placeholder if none did."""
        entry = self._producers.get(id(t))
        ref = entry[1] if entry is not None and entry[0]() is t else None
        if self._writers:
            writer = self._writers.get(storage_key(t))  # type: ignore[arg-type]
            if writer is not None and (ref is None or writer.index > ref.index):
                return writer
        if ref is None:
            ref = self._placeholder(t)
        return ref

    def _placeholder(self, t: Any) -> SlotRef:
        kind, name = self._named.get(id(t), ("", ""))
        if not kind:
            kind, name = "const", str(self._const_count)
            self._const_count += 1
        node_id = f"{kind}:{name}"
        if node_id in self.graph:
            node_id = f"{node_id}#{self._const_count}"
            self._const_count += 1
        module = name.rsplit(".", 1)[0] if kind in ("param", "buffer") and "." in name else ""
        if kind == "const":
            module = self.module
        meta = tensor_meta(t)
        self.graph.add_node(op_node(node_id, kind, module, -1, kind, (), (meta,), None,  # type: ignore[arg-type]
                                    "forward", self._module_class.get(module, ""), None))
        ref = SlotRef(node_id, 0, -1, meta)
        self._set_producer(t, ref)
        if kind in ("param", "buffer") and self.want_stats and WEIGHTS.wants(t, self._float32):
            found = WEIGHTS.measure(self._torch, t)
            if found is not None:
                for tap in self.taps:
                    tap(node_id, 0, t)
                self.stat_rows.queue((node_id, 0), found[0], t.numel(), found[1])
                return ref
        self.measure(node_id, 0, t)
        return ref

    def measure(self, node_id: str, slot: int, t: Any, same_as: tuple[str, int] | None = None) -> None:
        """Take (or queue) the statistics of `t` for output `slot` of `node_id` (and show it to the observers' taps);
        `same_as`: the (node, slot) whose output `t` is, whose row it takes instead of reading `t` again."""
        for tap in self.taps:
            tap(node_id, slot, t)
        if not self.want_stats:
            return
        if same_as is not None:  # a view or copy holding exactly its input's values
            self.stat_rows.copy((node_id, slot), same_as)
            return
        self.stat_rows.take((node_id, slot), t)

    def before(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Resolve the tensors an op is about to write, so a first-seen input is measured before it changes."""
        if overload_facts(func).writes:
            for t in written_args(func, args, kwargs):
                if isinstance(t, self._tensor):
                    self.source_of(t)

    def record(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> str:
        """Add the node for one finished aten call and wire its inputs.

        The hot path of a full capture (once per aten op): `source_of`, `measure` and the node's
        edges are inlined for their common cases, and a `SlotRef` is made by `tuple.__new__`.
        """
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("capture cancelled")
        phase = self.phase
        pending = self._pending
        if self._owners is not None:
            self._own()
        elif pending and phase == "forward":
            self.resolve()
        facts = FACTS.get(id(func)) or overload_facts(func)
        stack = self.module_stack
        module = stack[-1] if stack else ""
        name = facts.name
        counters = self._counters  # `IdMinter.mint` inline (and `ids.node_id`'s forward case): one call fewer per op
        key = (phase, module, name)
        k = counters.get(key, 0)
        counters[key] = k + 1
        if phase == "forward":
            node_id = f"{module}/{name}.{k}" if module else f"{name}.{k}"
        else:
            node_id = node_id_of(module, name, k, phase)
        tensor = self._tensor
        in_tensors = tensor_leaves(args, tensor)
        if kwargs:
            in_tensors += tensor_leaves(kwargs.values(), tensor)
        producers = self._producers
        in_metas = []
        feeds = []  # (node, slot) each input reads
        if self._writers:
            for x in in_tensors:
                ref = self.source_of(x)
                feeds.append((ref[0], ref[1]))
                in_metas.append(tensor_meta(x))
        else:
            for x in in_tensors:  # source_of's common case inlined: a live tensor we made, no in-place writes yet
                entry = producers.get(id(x))
                if entry is not None and entry[0]() is x:
                    ref = entry[1]
                    in_metas.append(ref[3] or tensor_meta(x))
                else:
                    ref = self.source_of(x)
                    in_metas.append(tensor_meta(x))
                feeds.append((ref[0], ref[1]))
        if isinstance(out, tensor):  # most ops: one output, its meta usually cached (`tensor_meta` inlined)
            out_tensors = [out]
            meta = _METAS.get((out.dtype, *out.shape))
            out_metas = (meta or tensor_meta(out),)
        else:
            out_tensors = tensor_leaves(out, tensor) if isinstance(out, (list, tuple)) else []
            out_metas = tuple(map(tensor_meta, out_tensors))
        index = self.op_count
        self.op_count = index + 1
        source = None
        if self.want_source:  # (inside a module call, the walk stops at it: the frames above it are cached)
            source = self.sources.user_source(3)
        self.graph.add_fed(op_node(
            node_id, facts.op_type, module, index, "op", tuple(in_metas), out_metas, source, phase,
            self._module_class.get(module, ""),
            facts.attrs if self.api is None and self.current is None else self.node_attrs(func, facts),
        ), feeds)
        same_as = repeats = None
        if len(out_tensors) == 1 and in_tensors and (facts.same_values or name == "expand"):
            # (the metas, not the tensors, say numel and dtype: a tensor's attributes cost ~0.5 us each)
            a, b = in_metas[0], out_metas[0]
            n, m = (prod(a.shape), prod(b.shape)) if a is not b else (1, 1)
            if a.dtype != b.dtype or not n:
                pass
            elif m == n:  # a view or copy; or an expand of size-1 dims to 1: the input's values, strides and
                same_as = feeds[0]  # contiguity (so its histogram too, or its lack of one)
            elif name == "expand" and m % n == 0:  # each input value k times over
                repeats = (feeds[0], m // n)
        taps = self.taps
        stats = self.stat_rows if self.want_stats and not facts.unwritten_output else None  # allocator garbage:
        measured = stats is not None or (taps and not facts.unwritten_output)  # measured once an op writes it
        weak = weakref.ref
        new = _new_ref
        if pending is not None and phase != "forward":
            pending = None
        for slot, t in enumerate(out_tensors):
            w = weak(t)
            meta = out_metas[slot]
            producers[id(t)] = (w, new(SlotRef, (node_id, slot, index, meta)))
            if pending is not None and meta.dtype in FLOATING:  # (the meta's dtype: `is_floating_point()` ~0.7 us)
                pending.append(((node_id, module), w))
            if measured:  # `measure` inlined
                for tap in taps:
                    tap(node_id, slot, t)
                if stats is None:
                    continue
                if same_as is not None:  # a view or copy holding exactly its input's values
                    stats.copy((node_id, slot), same_as)
                elif repeats is None or not stats.repeat((node_id, slot), *repeats):
                    stats.take((node_id, slot), t)
        if facts.writes:
            for t in written_args(func, args, kwargs):
                if isinstance(t, tensor):
                    ref = self._producer(t)
                    if ref is None or ref.node != node_id:
                        self._set_producer(t, SlotRef(node_id, 0, index))
                    skey = storage_key(t)
                    if skey is not None:
                        self._writers[skey] = SlotRef(node_id, 0, index)
        if self.progress is not None and (index & 15) == 0:
            self.progress(self.phase_label, index, self.expected_ops)
        return node_id

    def resolve(self) -> None:
        """Map the autograd nodes of the outputs listed in `_pending` (a subclass's; none here)."""

    def _own(self) -> None:
        """Name the forward op of the autograd node running now (a subclass's, with `_owners` set; none here)."""

    def node_attrs(self, func: Any, facts: Any) -> dict[str, Any] | None:
        """The attributes of the node for one call of `func` (its overload, its API call's id); `record` asks only
        when there is more to say than the overload (an API call's id, or `current`'s forward op)."""
        return facts.attrs if self.api is None else self._attrs(func)

    def _attrs(self, func: Any) -> dict[str, Any] | None:
        api = self.current_api()
        attrs = {"api": api} if api is not None else {}
        if func._overloadname != "default":
            attrs["overload"] = func._overloadname
        return attrs or None

    def finish_stats(self) -> StatsTable:
        """Every output's statistics, brought to the host at once."""
        return self.stat_rows.finish_stats()

    def finish_histograms(self) -> HistogramTable:
        """Every output's histogram, brought to the host at once."""
        return self.stat_rows.finish_histograms()
