"""Where a lower-precision run leaves the rounding band: introduced vs inherited error on band-relative errors.

Used when target and golden run in different dtypes (bf16 vs fp32), on statistics or tensors alike.
Each node carries the relative error of its outputs and of its inputs (see `precision_band`). An op
propagates what its inputs carried, amplified by at most `amplification` per input (a product adds
its inputs' errors, a square doubles one); beyond that it may add `OP_BAND` roundings of the run's
dtype. An op whose output error exceeds that is `introduced` (its excess in bands says by how much);
nodes downstream of one, whose outputs are beyond the rounding band, `inherit` it; everything else is
expected rounding and no finding. Parameters are judged alone: beyond their cast's band they differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

from ascend_tui.checks.precision_band import OP_BAND, times
from ascend_tui.evidence import ChainLink, Finding, RootCause
from ascend_tui.graph.opgraph import OpGraph

ERROR_TIMES = 2.0  # an op whose excess is this many times its band is an error, below it a warning
AMPLIFY_TIMES = 4.0  # downstream of a cause, an excess up to this many bands on tainted inputs is amplification
PARAM_ERROR_TIMES = 4.0  # a parameter this many times its cast's band off is an error


@dataclass(frozen=True, slots=True)
class NodeError:
    """One node's errors (relative, comparable to u): its worst output, each input, and the run's u."""

    node: str
    out_error: float
    in_errors: tuple[float, ...]
    u: float
    row_band: float  # the band one rounding of its output explains (u plus statistics slack)
    index: int | None = None  # execution position when the graph's is not it (a module output's placeholder)


@dataclass(frozen=True, slots=True)
class GrowthVerdict:
    """Outcome for one node: introduced (beyond the op band) or inherited (carries an upstream excess)."""

    node: str
    severity: str
    attribution: str
    error: float
    carried: float
    excess: float
    limit: float
    cause: str
    evidence: str = "band"

    @property
    def bands(self) -> float:
        """How many op bands the excess (introduced) or the error (inherited) is."""
        return times(self.excess if self.attribution == "introduced" else self.error, self.limit)


@dataclass(frozen=True, slots=True)
class ParamBand:
    """A parameter (or its gradient) compared with the band of its cast."""

    node: str
    module: str
    name: str
    error: float
    band: float
    index: int


def carried(in_errors: Sequence[float], amplification: float) -> float:
    """The error an op may pass on from its inputs: `amplification` times their sum (NaN inputs ignored)."""
    return amplification * sum(e for e in in_errors if not math.isnan(e))


def attribute_growth(graph: OpGraph, nodes: Sequence[NodeError], amplification: float = 2.0,
                     op_band: float = OP_BAND, seeds: Sequence[tuple[int, str]] = (),
                     confirm: Callable[[str], bool] | None = None) -> dict[str, GrowthVerdict]:
    """A verdict per node that introduces an excess or inherits one, walking in execution order.

    `seeds` are (index, node) of causes found elsewhere (a parameter beyond its band): nodes after them
    may inherit from them. Downstream of a cause, an op whose inputs are already beyond the band and whose
    excess stays under `AMPLIFY_TIMES` bands is amplifying what it got (inherited), not making a new error.
    """
    by_node = {n.node: n for n in nodes}
    pos = {n.node: n.index if n.index is not None else graph.node(n.node).index if n.node in graph else 1 << 40
           for n in nodes}
    for node in graph:
        pos.setdefault(node.id, node.index)
    order = sorted(pos, key=lambda nid: pos[nid])
    out: dict[str, GrowthVerdict] = {}
    reach: dict[str, str] = {}  # node -> the cause of the nearest upstream verdict ('' none): one pass, no search
    pending = sorted(seeds)
    last_cause = ""
    for nid in order:
        index = pos[nid]
        while pending and pending[0][0] <= index:
            last_cause = pending.pop(0)[1]
        up = next((c for e in graph.producers(nid) if (c := reach.get(e.src))), "") if nid in graph else ""
        reach[nid] = up
        n = by_node.get(nid)
        if n is None or math.isnan(n.out_error) or math.isnan(n.u):
            continue
        limit = op_band * n.u
        carry = carried(n.in_errors, amplification)
        excess = n.out_error - carry if math.isfinite(carry) else -math.inf  # NaN/Inf inputs explain anything
        # inputs beyond the band carry a divergence; with no input measured at all (an output-only dump) an op
        # after a cause cannot be told apart from one amplifying it, so it is taken to carry it too
        tainted = any(e > n.row_band for e in n.in_errors if not math.isnan(e)) or \
            (bool(last_cause) and all(math.isnan(e) for e in n.in_errors))
        cause = ""
        if n.out_error > n.row_band and (excess <= limit or tainted and excess <= AMPLIFY_TIMES * limit):
            cause = up or last_cause
        if excess > limit and not cause and confirm is not None and not confirm(nid):
            cause = up or last_cause or _worst_producer(graph, nid, by_node)
            if cause:
                v = out.get(cause)
                out[nid] = GrowthVerdict(nid, v.severity if v else "warning", "inherited", n.out_error, carry,
                                         excess, limit, v.cause if v else cause, "replay")
                reach[nid] = out[nid].cause
            elif tainted or not math.isfinite(n.out_error):
                # alone it stays in band, yet no compared op upstream owns the difference its inputs bring:
                # it was made by ops the compare could not pair; this is the first place it can be seen
                sev = "error" if not math.isfinite(n.out_error) or excess > ERROR_TIMES * limit else "warning"
                out[nid] = GrowthVerdict(nid, sev, "introduced", n.out_error, carry, excess, limit, nid, "unpaired")
                reach[nid] = last_cause = nid
            continue
        if excess > limit and not cause:
            sev = "error" if excess > ERROR_TIMES * limit else "warning"
            out[nid] = GrowthVerdict(nid, sev, "introduced", n.out_error, carry, excess, limit, nid)
            reach[nid] = last_cause = nid
            continue
        if cause and n.out_error > limit:
            v = out.get(cause)
            out[nid] = GrowthVerdict(nid, v.severity if v else "error", "inherited", n.out_error, carry, excess,
                                     limit, v.cause if v else cause)
            reach[nid] = out[nid].cause
    return out


def _worst_producer(graph: OpGraph, nid: str, by_node: Mapping[str, NodeError]) -> str:
    """Where the error this node's inputs carry was made: up the worst producer while producers only pass it on."""
    node, seen = nid, {nid}
    while node in graph and len(seen) < 256:
        srcs = [e.src for e in graph.producers(node) if e.src in by_node and not math.isnan(by_node[e.src].out_error)]
        src = max(srcs, key=lambda s: by_node[s].out_error, default="")
        if not src or src in seen:
            return node if node != nid else ""
        seen.add(src)
        p = by_node[src]
        known = [e for e in p.in_errors if not math.isnan(e)]
        if not known or max(known) < 0.5 * p.out_error:
            return src  # made here: its output carries much more than its inputs did
        node = src
    return ""


def growth_findings(graph: OpGraph, verdicts: Mapping[str, GrowthVerdict], params: Sequence[ParamBand] = (),
                    dtype: str = "", modules: Mapping[str, tuple[str, int]] | None = None) -> list[Finding]:
    """Findings: parameters beyond their cast's band, introduced ops at their severity, inherited ones as info.

    `modules` names the module of nodes that stand for a module's output (a placeholder the module fed).
    """
    modules = modules or {}
    out: list[Finding] = []
    for p in params:
        k = times(p.error, p.band)
        out.append(Finding(
            "precision", "parameter-mismatch", "error" if k > PARAM_ERROR_TIMES else "warning", p.node, "param",
            p.module, p.index, f"parameter {p.name} differs by {p.error:.3g} relative, {k:.1f}x what casting to "
            f"{dtype} "
            f"explains ({p.band:.3g})", attribution="introduced",
            metrics={"parameter": p.name, "error": p.error, "band": p.band, "times_band": k},
            hint="the two runs did not start from the same weights beyond the cast: load the same checkpoint"))
    for v in verdicts.values():
        node = graph.node(v.node)
        if v.node in modules:
            node = replace(node, module=modules[v.node][0])
        metrics = {"error": v.error, "carried": v.carried, "excess": v.excess, "band": v.limit,
                   "times_band": v.bands, "evidence": v.evidence}
        if v.attribution == "introduced":
            where = "introduced here" if v.node not in modules else \
                f"introduced in the output of module {modules[v.node][0]}, which this op reads: after the module's " \
                "last dumped op (by arithmetic no hook dumped, such as a forward hook or a custom kernel)"
            how = f"relative error {v.error:.3g} is {v.bands:.1f}x the {dtype} band beyond what its inputs carried " \
                f"({v.carried:.3g})" if math.isfinite(v.error) else \
                f"NaN/Inf where the golden run is finite, from inputs that were finite (error {v.carried:.3g})"
            if v.evidence == "unpaired":
                where = "first seen here: replayed alone on the golden inputs this op stays in its band, so the " \
                    "difference is already in its inputs, made upstream by ops the compare could not pair " \
                    "(see precision/unmatched)"
            out.append(Finding(
                "precision", "precision-loss", v.severity, v.node, node.op_type, node.module, node.index,
                f"{how}: {where}", attribution="introduced", metrics=metrics,
                hint="run this op in float32 (or keep it out of autocast) and compare again" if v.evidence != "unpaired"
                else "pair the ops upstream (--fuzzy, or the --api/--layer mappings) so the compare can name the one "
                     "that made it, or dump with level mix to see them"))
        else:
            cause = graph.get(v.cause)
            named = f"{v.cause} (reading the output of {modules[v.cause][0]})" if v.cause in modules else v.cause
            root = RootCause(v.cause, cause.module if cause else "", "the error is already in this op's inputs",
                             (ChainLink(v.node, node.module, node.op_type, v.error),
                              ChainLink(v.cause, cause.module if cause else "", cause.op_type if cause else "",
                                        verdicts[v.cause].error if v.cause in verdicts else math.nan)))
            out.append(Finding(
                "precision", "precision-loss", "info", v.node, node.op_type, node.module, node.index,
                f"relative error {v.error:.3g} ({v.bands:.1f}x the {dtype} band): inherited from {named}" +
                (" (replayed alone on the golden inputs it stays in its band: it amplifies its inputs' rounding)"
                 if v.evidence == "replay" else ""),
                attribution="inherited", metrics={**metrics, "severity": v.severity}, root_cause=root))
    return out
