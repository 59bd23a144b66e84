"""The live precision check: every output of the target run compared with the float32 reference run, by node id.

The target run keeps a CPU copy of each floating output; during the reference run each
reference output is compared with its copy as it appears (and the copy dropped), so memory
peaks at one run's outputs. Where an op's output is over threshold and much worse than its
inputs, the op is replayed in isolation on the reference inputs cast to the target dtype and
device, which tells an op that makes the error from one that only amplifies what it was fed.
Settings: `precision_thresholds` (a mapping of `checks.precision.Thresholds` fields),
`precision_replays` (most replays, default 256).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ascend_tui.checks.precision import TensorMetrics, Thresholds, classify, error_measure, tensor_metrics
from ascend_tui.checks.precision_attribution import NodeCompare, attribute, findings
from ascend_tui.errors import InputError
from ascend_tui.live.recording import Call, Watcher

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation
    from ascend_tui.live.context import LiveContext, Run

VIEW_COLUMNS = ("name", "node", "slot", "cosine", "max_abs", "max_rel", "rmse", "one_thousandth", "result",
                "attribution")


def _numpy(t: Any) -> np.ndarray:
    """A CPU numpy copy of a tensor, bfloat16 widened to float32 as msprobe does."""
    import torch

    t = t.detach()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.to("cpu").numpy().copy()


class TargetKeeper(Watcher):
    """Keeps a CPU copy of every floating output of the target run, by (node, slot)."""

    def __init__(self) -> None:
        self.kept: dict[tuple[str, int], np.ndarray] = {}

    def output(self, node: str, slot: int, tensor: Any) -> None:
        if tensor.is_floating_point() and not tensor.is_complex():
            self.kept[(node, slot)] = _numpy(tensor)


class ReferenceComparer(Watcher):
    """Compares each reference output with the kept target copy, and replays ops that look like they make the error."""

    def __init__(self, keeper: TargetKeeper, ctx: LiveContext, thresholds: Thresholds, replays: int) -> None:
        self.keeper = keeper
        self.ctx = ctx
        self.t = thresholds
        self.replays = replays
        self.metrics: dict[tuple[str, int], TensorMetrics] = {}
        self.scales: dict[tuple[str, int], float] = {}
        self.replayed: dict[str, TensorMetrics] = {}

    @property
    def graph(self) -> Any:
        """The target's graph (the target is captured before the reference runs)."""
        return self.ctx.target.graph if self.ctx.target is not None else None

    def output(self, node: str, slot: int, tensor: Any) -> None:
        target = self.keeper.kept.pop((node, slot), None)
        if target is None or not tensor.is_floating_point():
            return
        ref = _numpy(tensor)
        if target.shape != ref.shape:
            return
        self.metrics[(node, slot)] = tensor_metrics(target, ref)
        finite = ref[np.isfinite(ref)] if ref.size else ref
        self.scales[(node, slot)] = float(np.abs(finite).max()) if finite.size else math.nan

    def after(self, call: Call, node: str, out: Any) -> None:
        if self.replays <= 0 or self.graph is None or node not in self.graph:
            return
        outs = self._outputs(node)
        if not any(classify(m, self.scales.get((node, i), math.nan), self.t)[0] for i, m in enumerate(outs)
                   if m is not None):
            return
        out_e = max((error_measure(m) for m in outs if m is not None), default=math.nan)
        in_e = max((e for e in (self._input_error(node, s) for s in range(len(self.graph.node(node).inputs)))
                    if not math.isnan(e)), default=math.nan)
        if not (math.isnan(in_e) or in_e <= 0.0 or out_e >= self.t.amplification * in_e):
            return  # plainly inherited: no replay needed
        self.replays -= 1
        dtypes = [m.dtype if m is not None else "" for m in self.graph.node(node).inputs]
        metrics = replay_call(call, out, self.ctx, dtypes)
        if metrics is not None:
            self.replayed[node] = metrics

    def _outputs(self, node: str) -> list[TensorMetrics | None]:
        n = len(self.graph.node(node).outputs) if self.graph is not None else 0
        return [self.metrics.get((node, i)) for i in range(n)]

    def _input_error(self, node: str, slot: int) -> float:
        assert self.graph is not None
        src = next((e for e in self.graph.producers(node) if e.in_slot == slot), None)
        if src is None:
            return math.nan
        return error_measure(self.metrics.get((src.src, src.out_slot)))


def replay_call(call: Call, out: Any, ctx: LiveContext, dtypes: Sequence[str] = ()) -> TensorMetrics | None:
    """Run one aten call again on the target device with the reference inputs cast to the dtypes the target op
    saw (`dtypes`, one per tensor argument in call order; the run's dtype where unknown); compare with `out`."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_map

    dev = ctx.device.torch_device
    position = iter(range(1 << 30))

    def move(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            i = next(position)
            name = dtypes[i] if i < len(dtypes) else ""
            dtype = getattr(torch, name, None) if name else ctx.dtype
            y = x.detach().to(dev)
            if x.is_floating_point() and isinstance(dtype, torch.dtype) and dtype.is_floating_point:
                y = y.to(dtype)
            return y.clone() if y is x else y
        return x

    try:
        args, kwargs = tree_map(move, (tuple(call.args), dict(call.kwargs)))
        with torch.no_grad():
            got = call.func(*args, **kwargs)
    except Exception:  # noqa: BLE001 - an op that cannot run alone is simply not replayed
        return None
    got_t = [t for t in tree_flatten(got)[0] if isinstance(t, torch.Tensor)]
    want_t = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    worst: TensorMetrics | None = None
    for g, w in zip(got_t, want_t):
        if not w.is_floating_point() or g.shape != w.shape:
            continue
        m = tensor_metrics(_numpy(g), _numpy(w))
        if worst is None or error_measure(m) > error_measure(worst):
            worst = m
    return worst


class PrecisionCheck:
    """The `precision` live check: target vs float32 reference per node, with introduced/inherited attribution."""

    name = "precision"
    needs_reference = True
    coarse = True  # pass 1 compares module outputs; the first one out of band gets its operators recorded

    def coarse_suspect(self, ctx: LiveContext, events: Sequence[Any]) -> int | None:
        """The first module event (`live.coarse.Event`) whose compared output leaves the band (warning or error), after pass 1."""
        comparer = self.comparer
        if comparer is None:
            return None
        t = self.thresholds(ctx)
        for ev in events:
            if not ev.node:
                continue
            for (node, slot), m in ((k, v) for k, v in comparer.metrics.items() if k[0] == ev.node):
                if classify(m, comparer.scales.get((node, slot), math.nan), t)[0] is not None:
                    return int(ev.index)
        return None

    def __init__(self) -> None:
        self.keeper: TargetKeeper | None = None
        self.comparer: ReferenceComparer | None = None

    def thresholds(self, ctx: LiveContext) -> Thresholds:
        try:
            return Thresholds.from_mapping(ctx.options.setting("precision_thresholds"))
        except ValueError as exc:
            raise InputError("precision_thresholds", str(exc)) from None

    def observers(self, ctx: LiveContext, run: Run) -> Sequence[Watcher]:
        if run.role == "target":
            self.keeper = TargetKeeper()
            return [self.keeper]
        if run.role == "reference" and self.keeper is not None:
            self.comparer = ReferenceComparer(self.keeper, ctx, self.thresholds(ctx),
                                              int(ctx.options.setting("precision_replays", 256)))
            return [self.comparer]
        return []

    def run(self, ctx: LiveContext, inv: Investigation) -> None:
        """Add precision findings and the per-tensor table the precision view shows."""
        t = self.thresholds(ctx)
        comparer = self.comparer
        if comparer is None:
            inv.run.extra.setdefault("notes", []).append(
                "precision: no reference run to compare with (it would repeat the target run, or --reference none)")
            return
        if self.keeper is not None:
            self.keeper.kept.clear()
        graph = inv.graph
        per_node: dict[str, dict[int, TensorMetrics]] = {}
        for (node, slot), m in comparer.metrics.items():
            per_node.setdefault(node, {})[slot] = m
        nodes = []
        for node_id, slots in per_node.items():
            node = graph.get(node_id)
            if node is None or node.is_placeholder:
                continue
            n = max(slots) + 1
            nodes.append(NodeCompare(
                node_id, tuple(slots.get(i) for i in range(n)),
                tuple(comparer.scales.get((node_id, i), math.nan) for i in range(n)),
                None, comparer.replayed.get(node_id)))
        verdicts = attribute(graph, nodes, t)
        inv.add_findings(findings(graph, verdicts))
        rows = []
        for nc in sorted(nodes, key=lambda x: graph.node(x.node).index):
            v = verdicts.get(nc.node)
            for slot, m in enumerate(nc.outputs):
                if m is None:
                    continue
                sev = classify(m, nc.scales[slot], t)[0]
                rows.append([f"{nc.node}.output.{slot}", nc.node, slot, m.cosine, m.max_abs, m.max_rel, m.rmse,
                             m.one_thousandth, sev or "pass", v.attribution if v is not None and sev else ""])
        inv.run.extra["precision"] = {"columns": list(VIEW_COLUMNS), "rows": rows,
                                      "replays": len(comparer.replayed)}
