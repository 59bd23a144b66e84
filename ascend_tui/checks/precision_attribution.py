"""Which operator introduces a precision error and which only inherit it: findings of the precision check.

A node over threshold is `introduced` when the error is made there: its isolated replay (the op
alone, on the golden inputs cast to the target dtype) reproduces most of the error, or, without
a replay, its output is at least `amplification` times worse than its worst input. Otherwise it
is `inherited` and points at the introduced node upstream. Pure: graph plus metrics in, findings out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from ascend_tui.checks.precision import Thresholds, TensorMetrics, classify, error_measure
from ascend_tui.evidence import ChainLink, Finding, RootCause
from ascend_tui.graph.opgraph import OpGraph

_RANK = {"error": 0, "warning": 1}


@dataclass(frozen=True, slots=True)
class NodeCompare:
    """The compared outputs (and, where dumped, inputs) of one node, with an optional isolated replay."""

    node: str
    outputs: tuple[TensorMetrics | None, ...]
    scales: tuple[float, ...]
    inputs: tuple[TensorMetrics | None, ...] | None = None
    replay: TensorMetrics | None = None
    names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ParamDiff:
    """A parameter whose target and golden values differ, and the module that owns it."""

    node: str
    module: str
    name: str
    metrics: TensorMetrics
    index: int


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome for one node over threshold."""

    node: str
    severity: str
    reason: str
    attribution: str
    evidence: str
    error: float
    input_error: float
    replay_error: float
    cause: str


def _worst(outputs: Sequence[TensorMetrics | None], scales: Sequence[float], t: Thresholds
           ) -> tuple[str | None, str, int]:
    best: tuple[str | None, str, int] = (None, "", -1)
    for slot, m in enumerate(outputs):
        if m is None:
            continue
        sev, reason = classify(m, scales[slot] if slot < len(scales) else math.nan, t)
        if sev is not None and (best[0] is None or _RANK[sev] < _RANK[best[0]]):
            best = (sev, reason, slot)
    return best


def _max(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return max(finite) if finite else math.nan


Replayer = Callable[[str], "TensorMetrics | None"]


def attribute(graph: OpGraph, nodes: Sequence[NodeCompare], t: Thresholds,
              replayer: Replayer | None = None) -> dict[str, Verdict]:
    """A verdict per node over threshold, walking nodes in execution order so causes come first.

    `replayer(node)` re-runs one op in isolation; it is asked only where the amplification rule
    says "introduced" (the case a steep activation fools), so a deep inherited chain costs no replays.
    """
    by_node = {n.node: n for n in nodes}
    verdicts: dict[str, Verdict] = {}
    order = sorted(by_node, key=lambda nid: graph.node(nid).index if nid in graph else 1 << 40)
    for nid in order:
        nc = by_node[nid]
        sev, reason, _slot = _worst(nc.outputs, nc.scales, t)
        if sev is None:
            continue
        out_e = _max([error_measure(m) for m in nc.outputs])
        in_errors, producers = _input_errors(graph, nc, by_node)
        in_e = _max(in_errors)
        introduced = math.isnan(in_e) or in_e <= 0.0 or out_e >= t.amplification * in_e
        evidence = "amplification"
        replay = nc.replay
        if replay is None and introduced and replayer is not None:
            replay = replayer(nid)
        replay_e = error_measure(replay) if replay is not None else math.nan
        if replay is not None and not math.isnan(replay_e):
            introduced = replay_e * t.amplification >= out_e or classify(replay, _max(nc.scales), t)[0] is not None
            evidence = "replay"
        cause = nid
        if not introduced:
            cause = _origin(graph, nid, by_node, verdicts, t, set())
        verdicts[nid] = Verdict(nid, sev, reason, "introduced" if introduced else "inherited", evidence,
                                out_e, in_e, replay_e, cause)
    return verdicts


def _origin(graph: OpGraph, nid: str, by_node: Mapping[str, NodeCompare], verdicts: Mapping[str, Verdict],
            t: Thresholds, seen: set[str]) -> str:
    """Where the error an inheriting node carries was made: up its worst input while outputs only carry it."""
    node = nid
    while node not in seen and len(seen) < 4096:
        seen.add(node)
        nc = by_node.get(node)
        if nc is None:
            return node
        errors, producers = _input_errors(graph, nc, by_node)
        worst = max(range(len(errors)), key=lambda i: -1.0 if math.isnan(errors[i]) else errors[i], default=None)
        src = producers[worst] if worst is not None else None
        if src is None or math.isnan(errors[worst]) or errors[worst] <= 0.0:  # type: ignore[index]
            return node
        if src in verdicts:
            v = verdicts[src]
            return v.cause
        p = by_node.get(src)
        if p is None:
            return src
        out_e = _max([error_measure(m) for m in p.outputs])
        p_in = _max(_input_errors(graph, p, by_node)[0])
        if math.isnan(p_in) or p_in <= 0.0 or out_e >= t.amplification * p_in:
            return src
        node = src
    return node


def _input_errors(graph: OpGraph, nc: NodeCompare, by_node: Mapping[str, NodeCompare]
                  ) -> tuple[list[float], list[str | None]]:
    """Error measure of each input: from the dumped input rows where there are any, else from the producers."""
    if nc.node not in graph:
        return [error_measure(m) for m in nc.inputs or ()], [None] * len(nc.inputs or ())
    errors: list[float] = []
    producers: list[str | None] = []
    edges = {e.in_slot: e for e in graph.producers(nc.node)}
    n_in = max(len(nc.inputs or ()), max(edges, default=-1) + 1)
    for slot in range(n_in):
        edge = edges.get(slot)
        m = nc.inputs[slot] if nc.inputs is not None and slot < len(nc.inputs) else None
        src = edge.src if edge is not None else None
        if m is None and edge is not None:
            src, m = _measured(graph, edge.src, edge.out_slot, by_node)
        producers.append(src)
        errors.append(error_measure(m))
    return errors, producers


def _measured(graph: OpGraph, node: str, slot: int, by_node: Mapping[str, NodeCompare], depth: int = 8
              ) -> tuple[str, TensorMetrics | None]:
    """The nearest producer with metrics, walking up first inputs through ops the reference run did not have
    (a cast that is a no-op in float32, a view): (that node, its metrics) or (`node`, None)."""
    start = node
    for _ in range(depth):
        p = by_node.get(node)
        if p is not None and slot < len(p.outputs) and p.outputs[slot] is not None:
            return node, p.outputs[slot]
        up = next((e for e in graph.producers(node) if e.in_slot == 0), None) if node in graph else None
        if up is None or graph.node(node).is_placeholder:
            break
        node, slot = up.src, up.out_slot
    return start, None


def findings(graph: OpGraph, verdicts: Mapping[str, Verdict], params: Sequence[ParamDiff] = ()) -> list[Finding]:
    """Findings of the precision check: introduced nodes at their severity, inherited ones as info."""
    out: list[Finding] = []
    for p in params:
        max_abs, cos, rel = p.metrics.value("max_abs"), p.metrics.value("cosine"), p.metrics.value("max_rel")
        how = f"max abs {max_abs:.4g}, cosine {cos:.6f}" if not math.isnan(max_abs) else \
            f"L2 norm differs by {rel:.2%}" if not math.isnan(rel) else "checksums differ"
        out.append(Finding(
            "precision", "parameter-mismatch", "error", p.node, "param", p.module, p.index,
            f"parameter {p.name} differs between target and golden ({how})", attribution="introduced",
            metrics={"parameter": p.name, "max_abs": max_abs, "cosine": cos},
            hint="the two runs did not start from the same weights: load the same checkpoint on both sides"))
    for v in verdicts.values():
        node = graph.node(v.node)
        metrics = {"error": v.error, "input_error": v.input_error, "replay_error": v.replay_error,
                   "evidence": v.evidence}
        if v.attribution == "introduced":
            how = "replaying it alone on the golden inputs reproduces the error" if v.evidence == "replay" \
                else "its output is much worse than its inputs"
            out.append(Finding("precision", "precision-loss", v.severity, v.node, node.op_type, node.module,
                               node.index, f"{v.reason}: introduced here ({how})", attribution="introduced",
                               metrics=metrics,
                               hint="run this op in float32 (or keep it out of autocast) and compare again"))
        else:
            cause = graph.get(v.cause)
            root = RootCause(v.cause, cause.module if cause else "", "the error is already in this op's inputs",
                             (ChainLink(v.node, node.module, node.op_type, v.error),
                              ChainLink(v.cause, cause.module if cause else "", cause.op_type if cause else "",
                                        verdicts[v.cause].error if v.cause in verdicts else math.nan)))
            out.append(Finding("precision", "precision-loss", "info", v.node, node.op_type, node.module,
                               node.index, f"{v.reason}: inherited from {v.cause}", attribution="inherited",
                               metrics={**metrics, "severity": v.severity}, root_cause=root))
    return out
