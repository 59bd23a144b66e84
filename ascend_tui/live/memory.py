"""Live memory sanitizer: a dispatch mode that checks every aten call for memory errors while capturing.

It composes the capture `Recorder`, so one run yields the graph, the per-op statistics and the
memory evidence. Before an indexing op runs it checks the index range (and clamps bad indices
so the run goes on, on a CPU as on an NPU); it tracks `empty`-family allocations element by
element until they are written and reports reads of elements never written; over several
iterations it follows every storage an op creates and reports those that outlive their call.
Checks happen at the operator level, so they work on any torch device.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ascend_tui.checks.memory import (
    LeakRecord,
    UninitRead,
    dedupe,
    leak_findings,
    memory_event,
    out_of_bounds_finding,
    place,
    uninitialized_finding,
)
from ascend_tui.evidence import Finding, MemoryEvent, MemorySample, StatsTable
from ascend_tui.graph.opgraph import OpGraph
from ascend_tui.live.aten import storage_key
from ascend_tui.live.capture import CaptureResult, Recorder
from ascend_tui.live.tensors import call_model, iter_tensors
from ascend_tui.live.context import LiveContext, Run
from ascend_tui.live.device import Device
from ascend_tui.live.memory_rules import Bad, Bound, Plan, Sanitizer, bind_arguments, replace_argument
from ascend_tui.live.memory_tracking import MAX_VIEWS, BornStorage, UnwrittenRead, holders
from ascend_tui.live.recording import Call, Watcher, capture, recording
from ascend_tui.progress import Progress

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

_CPU_COUNTER = "bytes of surviving tensors: the cpu has no allocated-memory counter"


@dataclass(slots=True)
class SanitizedCapture(CaptureResult):
    """A capture plus what the sanitizer found: findings, memory events and the per-iteration memory trend."""

    findings: list[Finding] = field(default_factory=list)
    events: list[MemoryEvent] = field(default_factory=list)
    samples: list[MemorySample] = field(default_factory=list)
    iterations: int = 1


class SanitizeObserver(Watcher):
    """Checks each aten call before it runs (clamping bad indices), then notes what it wrote and created."""

    def __init__(self, sanitizer: Sanitizer) -> None:
        import torch

        self._torch = torch
        self.sanitizer = sanitizer
        self._pending: tuple[Plan, Bound, list[Bad], list[UnwrittenRead], list[tuple[Any, int]]] | None = None

    def before(self, call: Call) -> None:
        s = self.sanitizer
        func, args, kwargs = call.func, call.args, call.kwargs
        plan = s.plan(func)
        bound = bind_arguments(func, args, kwargs)
        bad = s.bounds(plan, bound) if plan.rule is not None else []
        for b in bad:
            if b.violation.clamped:
                call.run_args, call.run_kwargs = replace_argument(call.run_args, call.run_kwargs, b.where, s.clamp(b))
        run_bound = bind_arguments(func, call.run_args, call.run_kwargs) if bad else bound
        for name in plan.written - plan.outs:
            value = bound[name][0]
            if isinstance(value, self._torch.Tensor):
                call.recorder.source_of(value)
        reads = s.reads_before(plan, run_bound)
        grown = []
        if plan.name in ("resize_", "resize_as_"):
            t = args[0]
            grown = [(t, t.untyped_storage().nbytes() // max(t.element_size(), 1))]
        self._pending = (plan, run_bound, bad, reads, grown)

    def after(self, call: Call, node: str, out: Any) -> None:
        from torch.utils._pytree import tree_flatten

        assert self._pending is not None
        plan, run_bound, bad, reads, grown = self._pending
        self._pending = None
        s = self.sanitizer
        grown = [(t, n) for t, n in grown if t.untyped_storage().nbytes() // t.element_size() > n]
        s.writes_after(plan, run_bound, out, node, grown)
        if bad or reads:
            slots = [x for x in tree_flatten((call.args, call.kwargs))[0] if isinstance(x, self._torch.Tensor)]
            for b in bad:
                s.violations.append(dataclasses.replace(b.violation, node=node, slot=_slot(slots, b.tensor),
                                                        indexed_slot=_slot(slots, b.indexed)))
            for r in reads:
                s.reads.append(UninitRead(
                    node, _slot(slots, r.tensor), r.alloc.node, r.alloc.op, r.alloc.desc, r.unwritten,
                    r.read_numel, r.alloc_numel, r.written, r.first, r.last, s.iteration))
        outs = list(iter_tensors(out))
        if outs:
            s.leaks.on_outputs(outs, node, call.recorder.module, f"aten.{plan.name}", plan.fresh)


def _slot(tensors: list[Any], t: Any) -> int:
    """The input slot the recorder gave `t` (its position among the call's tensor arguments)."""
    for i, x in enumerate(tensors):
        if x is t:
            return i
    return 0


def _device_of(model: Any, inputs: Any) -> Device:
    """The device the model computes on, from its inputs and parameters (the CPU when nothing says otherwise)."""
    import torch

    tensors = list(iter_tensors(inputs))
    if isinstance(model, torch.nn.Module):
        tensors += list(model.parameters())
    for t in tensors:
        if t.device.type in ("cuda", "npu"):
            return Device(t.device.type, t.device.index or 0)
    return Device("cpu")


def _keys(obj: Any) -> set[int]:
    """Storage identities of every tensor in `obj`."""
    return {k for t in iter_tensors(obj) if (k := storage_key(t)) is not None}


def _on_graph(f: Finding, graph: OpGraph) -> Finding:
    """`f` moved onto `graph` when a later iteration named its op differently (data-dependent branches)."""
    if f.node in graph:
        return f
    order = graph.execution_order()
    node = place(graph, f.node, f.module, f.op_type) or (order[-1] if order else None)
    if node is None:
        return f
    n = graph.node(node)
    return dataclasses.replace(f, node=node, module=n.module, op_type=n.op_type, index=n.index,
                               message=f"{f.message} [seen at {f.node}]")


def _leak_records(san: Sanitizer, model: Any, held: set[int]) -> list[LeakRecord]:
    """Surviving storages grouped by the op that created them, with who holds them."""
    groups: dict[str, list[tuple[int, BornStorage]]] = {}
    for key, born in san.leaks.alive(held):
        groups.setdefault(born.node, []).append((key, born))
    if not groups:
        return []
    held_by = holders(model, {k for items in groups.values() for k, _ in items})
    records = []
    for node, items in groups.items():
        per_iter: dict[int, int] = {}
        via: list[str] = []
        names: list[str] = []
        for key, born in items:
            per_iter[born.iteration] = per_iter.get(born.iteration, 0) + born.nbytes
            via += [n for ref, n in born.views if ref() is not None and n not in via]
            if key in held_by and held_by[key] not in names:
                names.append(held_by[key])
        first = items[0][1]
        iters = tuple(sorted(per_iter))
        records.append(LeakRecord(node, first.module, first.op_type, first.desc, iters,
                                  tuple(per_iter[i] for i in iters), tuple(names), tuple(via[:MAX_VIEWS])))
    return records


class SanitizeSession:
    """The sanitizer over the iterations of one run: every iteration is checked, the first gives the graph.

    Iteration 0 may be any recorded run carrying `observer()` (the runner's target capture);
    `run_rest` makes the others, and `result` adds leaks over all of them and the memory trend.
    """

    def __init__(self, model: Any, inputs: Any, device: Device | None = None, iterations: int = 1) -> None:
        self.model, self.inputs = model, inputs
        self.dev = device or _device_of(model, inputs)
        self.san = Sanitizer(model, inputs)
        self.iterations = max(1, int(iterations))
        self.samples = [_sample(self.dev, self.san, set(), 0, "before the first iteration")]
        self.findings: list[Finding] = []
        self.first: CaptureResult | None = None
        self.held: set[int] = set()
        self._start(0)

    def observer(self) -> SanitizeObserver:
        """What watches one iteration's aten calls."""
        return SanitizeObserver(self.san)

    def _start(self, it: int) -> None:
        self.san.iteration = self.san.leaks.iteration = it
        self.san.violations, self.san.reads = [], []

    def collect(self, rec: Recorder, stats: StatsTable | None) -> None:
        """Turn what the observer saw in the iteration just run into findings."""
        san = self.san
        found = [out_of_bounds_finding(rec.graph, v, stats) for v in san.violations]
        found += [uninitialized_finding(rec.graph, u) for u in san.reads]
        if san.iteration > 0 and self.first is not None:
            found = [_on_graph(f, self.first.graph) for f in found]
        self.findings += found

    def sample(self) -> None:
        """Memory after the iteration just run (once the caller dropped its outputs), then start the next one."""
        it, san = self.san.iteration, self.san
        self.dev.synchronize()
        if self.dev.has_memory_counters or any(True for _ in san.leaks.alive(self.held)):
            gc.collect(1)  # cycles made during the call are young; a full collection costs ~0.2 s
        self.samples.append(_sample(self.dev, san, self.held, it + 1, f"after iteration {it + 1}"))
        san.leaks.prune()
        self._start(it + 1)

    def first_done(self, first: CaptureResult) -> None:
        """Iteration 0 was `first`: keep its graph and hold its outputs."""
        self.first = first
        self.held = _keys(first.outputs)
        assert first.recorder is not None
        self.collect(first.recorder, first.stats)
        self.sample()

    def run_rest(self, progress: Progress | None, cancel: threading.Event | None, phase_label: str,
                 observers: Sequence[Any] = ()) -> None:
        """Iterations 1 .. N-1, each checked the same way (bad indices clamped, so every one completes)."""
        assert self.first is not None
        n = self.first.op_count
        for it in range(1, self.iterations):
            label = f"{phase_label} (iteration {it + 1}/{self.iterations})"
            rec = Recorder(self.model, self.inputs, progress=progress, cancel=cancel, phase_label=label,
                           expected_ops=n)
            with recording(self.model, rec, [self.observer(), *observers]):
                out = call_model(self.model, self.inputs)
            self.collect(rec, rec.finish_stats() if self.san.violations else None)
            del out, rec
            self.sample()
            if progress is not None:
                progress(label, n, n)

    def result(self) -> SanitizedCapture:
        """The first iteration's capture with every finding, the leaks over all iterations and the memory trend."""
        first, san, held = self.first, self.san, self.held
        assert first is not None
        if any(True for _ in san.leaks.alive(held)):
            gc.collect()  # before calling anything a leak, free every cycle, old ones included
        held -= set(holders(self.model, held))  # an output the model also keeps counts as kept, though we hold it
        counter = "device.memory_allocated" if self.dev.has_memory_counters else _CPU_COUNTER
        leaks = leak_findings(first.graph, _leak_records(san, self.model, held), self.iterations, self.samples,
                              counter)
        findings = dedupe(self.findings) + leaks
        events = [memory_event(f, f.metrics.get("bytes_per_iteration") if f.kind == "leak" else None)
                  for f in findings]
        return SanitizedCapture(first.graph, first.stats, first.outputs, first.op_count, histograms=first.histograms,
                                recorder=first.recorder, findings=findings, events=events, samples=self.samples,
                                iterations=self.iterations)


def capture_sanitized(
    model: Any,
    inputs: Any,
    *,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    phase_label: str = "sanitizing",
    iterations: int = 1,
    device: Device | None = None,
    expected_ops: int | None = None,
    observers: Sequence[Any] = (),
) -> SanitizedCapture:
    """Run `model` `iterations` times under the sanitizer; the graph and statistics are the first run's.

    Bad indices are clamped into range (and reported) so the run completes on any device;
    later iterations are checked the same way and feed the leak and memory-trend evidence.
    """
    session = SanitizeSession(model, inputs, device, iterations)
    label = phase_label if session.iterations == 1 else f"{phase_label} (iteration 1/{session.iterations})"
    first = capture(model, inputs, observers=[session.observer(), *observers], progress=progress, cancel=cancel,
                    phase_label=label, expected_ops=expected_ops)
    session.first_done(first)
    session.run_rest(progress, cancel, phase_label, observers)
    return session.result()


def _sample(dev: Device, san: Sanitizer, held: set[int], time: int, label: str) -> MemorySample:
    """Allocated/reserved bytes now: the device's counters, or on the CPU the bytes of surviving tensors."""
    if dev.has_memory_counters:
        dev.synchronize()
        return MemorySample(float(time), float(dev.memory_allocated()), float(dev.memory_reserved()), f"live: {label}")
    alive = sum(b.nbytes for _, b in san.leaks.alive(held))
    return MemorySample(float(time), float(alive), 0.0, f"live: {label} ({_CPU_COUNTER})")


class MemoryCheck:
    """The `memory` live check: index bounds, reads of unwritten memory and leaks over `--iterations`.

    It watches the target run (its first iteration), makes the other iterations itself, and
    keeps every other run of the same model safe by clamping bad indices there too. In a
    coarse-to-fine capture (`live.memory_guard`) its guard mode checks every pass, pass 1
    measures each module call's bytes, and the sanitizer records operators only in the suspect:
    the first call with a finding, else the call whose bytes stand out against its peers.
    """

    name = "memory"
    needs_reference = False
    coarse = True
    measures = ("memory",)  # what pass 1 measures per module call (`live.coarse_meter`)

    def __init__(self) -> None:
        self.session: SanitizeSession | None = None
        self.meter: Any = None
        self.first: Sanitizer | None = None  # pass 1's guard sanitizer: what it found, labelled by position
        self.window_observers: dict[int, SanitizeObserver] = {}  # side -> the observer recording its window
        self.modes: list[Any] = []  # the guard modes of the passes so far
        self.why: dict[str, Any] | None = None

    def observers(self, ctx: LiveContext, run: Run) -> list[Watcher]:
        if run.role == "target":
            self.session = SanitizeSession(run.model, run.inputs, run.device, ctx.options.iterations)
            self.window_observers[0] = self.session.observer()
            return [self.window_observers[0]]
        obs = SanitizeObserver(Sanitizer(run.model, run.inputs))
        if run.role == "reference":
            self.window_observers[1] = obs
        return [obs]

    def use_meter(self, meter: Any) -> None:
        """The module pass's meter: on the CPU its bytes are those the guard mode saw created."""
        self.meter = meter
        if meter.device.backend == "cpu":
            meter.created = lambda: self.modes[0].created if self.modes else 0

    def coarse_around(self, ctx: LiveContext, side: int, stage: str) -> Any:
        """The guard mode for one pass (`live.memory_guard`): pass 1 of the target keeps what it found."""
        from ascend_tui.live.memory_guard import guard_mode_class

        busy = [self.window_observers[side]] if stage == "window" and side in self.window_observers else []
        if side == 0 and stage == "module":
            self.first = Sanitizer(ctx.model, ctx.inputs)
            meter = self.meter
            mode = guard_mode_class()(SanitizeObserver(self.first), meter.where if meter is not None else lambda: "",
                                      follow=True)
        elif side == 0 and stage == "window" and self.session is not None:
            self.session.san.reset()
            mode = guard_mode_class()(self.session.observer(), lambda: "", busy)
        else:  # the pass that looks for the overflow flag, the reference's passes: clamped the same way
            ref = self.window_observers.get(1) if side == 1 else None
            run_of = ref.sanitizer.run if ref is not None else (ctx.model, ctx.inputs)
            mode = guard_mode_class()(SanitizeObserver(Sanitizer(*run_of)), lambda: "", busy)
        self.modes.append(mode)
        return mode

    def coarse_suspect(self, ctx: LiveContext, events: Sequence[Any]) -> tuple[int, int] | None:
        """The window around the first operator pass 1's guard mode found a memory error in."""
        from ascend_tui.live.memory_guard import bug_window, enclosing_node, first_found, position

        if self.first is not None:
            k = first_found(self.first.violations, self.first.reads)
            if k is not None:
                window = bug_window(k, events)
                label = min((x.node for x in (*self.first.violations, *self.first.reads) if position(x.node) == k),
                            key=lambda n: int(n.rpartition(":")[2] or 0))
                node = enclosing_node(label, events, self.meter.ordinals if self.meter is not None else ())
                call = next((e for e in events if e.node == node), None)
                what = "an index out of range" if any(v.node == label for v in self.first.violations) else \
                    "a read of never-written memory"
                self.why = {"measure": "memory", "module": call.module if call is not None else "",
                            "text": f"the sanitizer's module pass found {what} in "
                                    f"{(call.module or '<model>') if call is not None else 'the step'}",
                            "events": list(window)}
                return window
        return None

    def coarse_outlier(self, ctx: LiveContext, events: Sequence[Any]) -> tuple[int, int] | None:
        """The forward module call whose bytes stand out against its peers' (`coarse_meter.choose`)."""
        from ascend_tui.live.coarse_meter import MEMORY, outlier

        found = outlier(events, MEMORY)
        if found is None:
            return None
        window, self.why = found
        return window

    def _coarse_evidence(self, ctx: LiveContext) -> None:
        """The window's findings as recorded, pass 1's outside the window at their module calls' nodes."""
        from ascend_tui.live.memory_guard import LABEL, adopt_leaks, enclosing_node, relabel

        assert self.session is not None and ctx.target is not None and ctx.target.recorder is not None
        san, coarse = self.session.san, ctx.coarse
        events, graph = ctx.target.recorder.events, ctx.target.graph
        ordinals = self.meter.ordinals if self.meter is not None else []
        first = self.first or Sanitizer(ctx.model, ctx.inputs)
        allocs = {(r.alloc_op, r.alloc): r.alloc_node for r in first.reads}  # pass 1 knew where each was made
        reads = []
        for r in san.reads:
            if r.node not in graph:
                continue
            if r.alloc_node not in graph:
                node = enclosing_node(allocs.get((r.alloc_op, r.alloc), ""), events, ordinals)
                r = dataclasses.replace(r, alloc_node=node or r.alloc_node.lstrip(LABEL))
            reads.append(r)
        san.violations = [v for v in san.violations if v.node in graph] + [
            dataclasses.replace(v, slot=0, indexed_slot=-1)
            for v in relabel(first.violations, events, ordinals, coarse.window, ("node",))]
        san.reads = reads + relabel(first.reads, events, ordinals, coarse.window, ("node", "alloc_node"))
        san.leaks.born = {k: b for k, b in san.leaks.born.items() if b.node in graph}
        adopt_leaks(first.leaks, san.leaks, events, ordinals, graph, coarse.window)

    def run(self, ctx: LiveContext, inv: Investigation) -> None:
        """Sanitizer findings, memory events and the per-iteration trend into `inv`."""
        if self.session is None or ctx.target is None:
            cap = capture_sanitized(ctx.model, ctx.inputs, progress=ctx.progress, cancel=ctx.cancel,
                                    iterations=ctx.options.iterations, device=ctx.device)
        else:
            if ctx.coarse is not None:
                self._coarse_evidence(ctx)
            self.session.first_done(ctx.target)
            self.session.run_rest(ctx.progress, ctx.cancel, "sanitizing",
                                  [o for o in ctx.rerun_observers() if not isinstance(o, SanitizeObserver)])
            cap = self.session.result()
        found = [_on_graph(f, inv.graph) for f in cap.findings]
        if ctx.coarse is not None:
            found = [_module_level(f, inv.graph) for f in found]
        inv.replace_findings("memory", found)
        inv.memory_events[:] = [e for e in inv.memory_events if e.tool != "live"] + list(cap.events)
        inv.memory_samples[:] = [s for s in inv.memory_samples if not s.label.startswith("live: ")] + list(cap.samples)


def _module_level(f: Finding, graph: OpGraph) -> Finding:
    """A finding on a whole module call says its operators were not recorded (coarse-to-fine, outside the window)."""
    node = graph.get(f.node)
    if node is None or not node.attrs or node.attrs.get("detail") != "module":
        return f
    return dataclasses.replace(f, message=f"{f.message} [module level: found in the module pass; this call's "
                                          "operators were not recorded]")
