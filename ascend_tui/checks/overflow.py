"""Overflow and NaN: where non-finite or out-of-range values first appear, and where they came from.

Pure: an `OpGraph` and `StatsTable`s in, `Finding`s out, so live captures and dumps share it:

    analyze(graph, stats, *, dtype="float16", reference=None, inf_nan_mode=True,
            overflow_flags=None, headroom_bits=1.0, phase=None, evidence=None,
            underflow_fraction=0.05) -> list[Finding]

`stats` are the checked run's, keyed (node, slot); formats without NaN/Inf counts may leave them 0,
as min/max show NaN and Inf too. `dtype` is the low-precision dtype the run computes in: a graph
with any float16/bfloat16/float8 output is the target run and each output is checked against its
own dtype; an all-float32 graph is checked as if it ran in `dtype` (predicting NPU overflow).
`reference` holds float32 statistics of the same ids: magnitudes come from it, since a float16 run
cannot show how far past its range a value went. `inf_nan_mode=False` (NPU saturation mode: overflow
clamps to ±max, NaN becomes 0) reports outputs at ±max as `saturation`; `overflow_flags` names ops
after which the NPU float-status flag was set. `headroom_bits`: warn when log2(max / abs max) is
below it. `phase` limits the report to one phase. `evidence` carries `RangeEvidence` the device
measured per output; `underflow_fraction` is the flushed share of non-zero values that warns.

Kinds: `inf`, `nan`, `saturation`, `overflow` (range risk), `underflow`. Only origins (an op whose
inputs are fine but whose output is not) are errors; later ops that carry the same values are
`inherited` info findings whose root cause points at the origin. Each origin gets an amplification
chain walked upstream along the largest-magnitude input to a graph input or parameter.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Mapping

import numpy as np

from ascend_tui.checks.overflow_explain import (
    RANGES,
    DtypeRange,
    Explainer,
    RangeEvidence,
    StatRows,
    headroom,
    label,
    num,
    op_name,
    range_of,
    rows_to_check,
    times,
)
from ascend_tui.checks.effect import OutputEffect
from ascend_tui.checks.masks import mask_nodes
from ascend_tui.fmt import plural
from ascend_tui.evidence import ChainLink, Finding, HistogramTable, RootCause, Severity, StatsTable
from ascend_tui.graph.opgraph import Edge, OpGraph, OpNode

__all__ = ["CHECK", "RANGES", "DtypeRange", "RangeEvidence", "analyze", "num", "op_name", "range_of", "times"]
CHECK = "overflow"
_EXTREMES = frozenset(r.max for r in RANGES.values())


_INTENDED = frozenset("""full fill full_like new_full masked_fill scalar_tensor where clamp clamp_min clamp_max clip
    nan_to_num lift_fresh lift_fresh_copy""".split())
_RANK = {"nan": 0, "inf": 1, "saturation": 2, "overflow": 3}

def analyze(
    graph: OpGraph,
    stats: StatsTable,
    *,
    dtype: str = "float16",
    reference: StatsTable | None = None,
    inf_nan_mode: bool = True,
    overflow_flags: Mapping[str, bool] | None = None,
    headroom_bits: float = 1.0,
    phase: str | None = None,
    evidence: Mapping[tuple[str, int], RangeEvidence] | None = None,
    underflow_fraction: float = 0.05,
    effect: OutputEffect | None = None,
    histograms: HistogramTable | None = None,
) -> list[Finding]:
    """Overflow, NaN, saturation, range-risk and underflow findings for every operator; see the module doc."""
    target = range_of(dtype)
    if target is None:
        raise ValueError(f"not a floating dtype: {dtype!r}")
    analysis = _Analysis(graph, stats, target, reference, inf_nan_mode, dict(overflow_flags or {}), headroom_bits,
                         phase, dict(evidence or {}), underflow_fraction)
    analysis.effect = effect
    analysis.histograms = histograms if histograms is not None else HistogramTable()
    return analysis.run()


class _Analysis(Explainer):
    """One pass of the overflow check over a graph; holds the per-output classification."""

    def __init__(self, graph: OpGraph, stats: StatsTable, target: DtypeRange, reference: StatsTable | None,
                 inf_nan_mode: bool, flags: dict[str, bool], headroom_bits: float, phase: str | None,
                 evidence: dict[tuple[str, int], RangeEvidence], underflow_fraction: float) -> None:
        self.g, self.target, self.inf_nan, self.flags = graph, target, inf_nan_mode, flags
        self.headroom_bits, self.phase, self.evidence, self.uf_min = headroom_bits, phase, evidence, underflow_fraction
        self.t, self.r = StatRows(stats), StatRows(reference)
        # The ranges the graph's outputs are stored in (a handful of dtypes, each looked up once) and `out_range`'s
        # for an output without metadata; then those they are checked against (`rows_to_check`).
        stored = {r for d in {m.dtype for n in graph for m in n.outputs if m is not None} if (r := range_of(d))}
        self.predict = target.low_precision and not any(r.low_precision for r in stored)
        stored.add(RANGES["float32"] if self.predict else target)
        self._checked = {target if self.predict and not r.low_precision else r for r in stored}
        self.bad: dict[tuple[str, int], str] = {}
        self.near: dict[tuple[str, int], float] = {}
        self.under: dict[tuple[str, int], tuple[float, str]] = {}
        self._weights: dict[str, bool] = {}
        self._prods: dict[str, list[Edge]] = {}
        self.effect: OutputEffect | None = None
        self.histograms = HistogramTable()
        self.bad_ids: set[str] = set()
        self.masks: dict[str, str] = {}
        self.meets: dict[str, tuple[str, str]] = {}
        self._origin_parts: dict[str, tuple[OpNode, str, ChainLink]] = {}

    # -- classification ------------------------------------------------------------------------

    def out_range(self, node: OpNode, slot: int) -> tuple[DtypeRange, DtypeRange] | tuple[None, None]:
        """(the dtype the output is stored in, the dtype it is checked against); Nones for non-floats."""
        meta = node.outputs[slot] if slot < len(node.outputs) else None
        actual = range_of(meta.dtype) if meta is not None else (RANGES["float32"] if self.predict else self.target)
        if actual is None:
            return None, None
        return actual, (self.target if self.predict and not actual.low_precision else actual)

    def classify(self) -> None:
        t = self.t
        has_nan = (t.col["nan_count"] > 0) | np.isnan(t.col["min"]) | np.isnan(t.col["max"])
        has_inf = (t.col["inf_count"] > 0) | np.isinf(t.col["min"]) | np.isinf(t.col["max"])
        rows = rows_to_check(self.t, self.r, has_nan | has_inf, checked=self._checked,
                             headroom_bits=self.headroom_bits, flags=self.flags)
        for key, i in sorted(rows, key=lambda kv: self._order(kv[0][0])):
            node = self.g.get(key[0])
            if node is None:
                continue
            actual, eff = self.out_range(node, key[1])
            if actual is None or eff is None:
                continue
            if has_nan[i] or has_inf[i]:
                self.bad[key] = "nan" if has_nan[i] else "inf"
                continue
            if self.flags.get(key[0]) or self._saturated(node, key, actual):
                self.bad[key] = "saturation"
                continue
            value = self.magnitude(key)
            if value is not None and value > 0 and value not in _EXTREMES and t.col["abs_max"][i] not in _EXTREMES:
                bits = headroom(eff.max, value)
                if bits is not None and bits < 0:
                    self.bad[key] = "overflow"
                elif bits is not None and bits < self.headroom_bits:
                    self.near[key] = bits
            if eff.low_precision:
                self._underflow(key, i, actual, eff, value)
        self.find_masks()

    def find_masks(self) -> None:
        """Mark intended masks (see `checks.masks`) and take them out of every finding list."""
        t = self.t
        if not t.rows:
            return
        # Only outputs with NaN, +-Inf or magnitudes near some dtype's max can be masks: find them in numpy first.
        near = min(r.max for r in RANGES.values()) / 2
        lo, hi, am = np.abs(t.col["min"]), np.abs(t.col["max"]), t.col["abs_max"]
        with np.errstate(invalid="ignore"):
            flag = (~np.isfinite(lo) | ~np.isfinite(hi) | ~np.isfinite(am) | (lo >= near) | (hi >= near)
                    | (am >= near) | (t.col["nan_count"] > 0))
        keys = list(t.rows)
        candidates = {keys[i][0] for i in np.flatnonzero(flag)}
        order = sorted((n for n in candidates if n in self.g), key=self._order)
        self.masks = mask_nodes(self.g, order, self._extremes, op_name)
        for table in (self.bad, self.near, self.under):
            for key in [k for k in table if k[0] in self.masks]:
                del table[key]

    def _extremes(self, nid: str) -> tuple[bool, bool, bool, bool]:
        """(some output is ±Inf or within a bit of its dtype's max in every run that measured it, some output
        holds NaN, some output is extreme in the checked run, every output lies within [-1, 1]); masks are
        extreme in float16 and float32 alike, overflows only in the narrow dtype."""
        node = self.g.get(nid)
        extreme = nan = raw = False
        unit = True
        if node is None:
            return False, False, False, False
        for slot, meta in enumerate(node.outputs or (None,)):
            key = (nid, slot)
            if key not in self.t.rows:
                continue
            stored = range_of(meta.dtype) if meta is not None else None
            if stored is None:
                continue
            lo, hi, am = self.t.get(key, "min"), self.t.get(key, "max"), self.t.get(key, "abs_max")
            if (self.t.get(key, "nan_count") or 0) > 0 or any(v is not None and math.isnan(v) for v in (lo, hi)):
                nan = True
                continue
            vals = [v for v in (lo, hi, am) if v is not None]
            big = any(math.isinf(v) or abs(v) >= stored.max / 2 for v in vals)
            raw |= big
            if big and key in self.r.rows:
                ref = [v for v in (self.r.get(key, "min"), self.r.get(key, "max"), self.r.get(key, "abs_max"))
                       if v is not None and not math.isnan(v)]
                big = any(math.isinf(v) or abs(v) >= RANGES["float32"].max / 2 for v in ref)
            if big and node.kind == "input" and (hi is None or hi > 0):
                big = False  # an input is an additive mask only when it holds 0 and large negatives
            extreme |= big
            unit &= all(abs(v) <= 1 for v in vals)
        return extreme, nan, raw, unit and not raw

    def _order(self, nid: str) -> tuple[int, int]:
        node = self.g.get(nid)
        return (node.index, self.g.position(nid)) if node is not None else (1 << 40, 0)

    def _saturated(self, node: OpNode, key: tuple[str, int], actual: DtypeRange) -> bool:
        if self.inf_nan or node.is_placeholder or op_name(node.op_type) in _INTENDED:
            return False
        if self.t.col["abs_max"][self.t.rows[key]] < actual.max * (1 - 1e-6):
            return False
        at_max = [(e.src, e.out_slot) for e in self.prods(node.id)
                  if (v := self.t.get((e.src, e.out_slot), "abs_max")) is not None and v >= actual.max * (1 - 1e-6)]
        return not at_max or any(k in self.bad for k in at_max)  # created here, or carried from a saturated op

    def _underflow(self, key: tuple[str, int], i: int, actual: DtypeRange, eff: DtypeRange,
                   value: float | None) -> None:
        ev = self.evidence.get(key)
        fraction: float | None = None
        if ev is not None and range_of(ev.dtype) == eff and ev.nonzero > 0:
            fraction, how = ev.flushed / ev.nonzero, "measured"
        elif key in self.r.rows and actual == eff and self.r.get(key, "numel") == self.t.col["numel"][i]:
            ref_zero, numel = self.r.get(key, "zero_count") or 0.0, self.t.col["numel"][i]
            if numel > ref_zero:
                fraction, how = max(0.0, (self.t.col["zero_count"][i] - ref_zero) / (numel - ref_zero)), "zeros"
        elif value is not None and 0 < value <= eff.smallest_subnormal / 2:
            fraction, how = 1.0, "abs max"  # round to nearest even: at most half the smallest subnormal is 0
        elif actual != eff and eff.name == "float16" and (h := self.histograms.get(*key)) is not None and h[1] > 0:
            fraction, how = float(h[0][0]) / h[1], "histogram"  # the (0, 2**-24) bin: an upper bound
        if fraction is not None and fraction >= self.uf_min and fraction > 0:
            self.under[key] = (fraction, how)

    # -- propagation ---------------------------------------------------------------------------

    def run(self) -> list[Finding]:
        self.classify()
        bad_nodes: dict[str, tuple[str, int]] = {}
        for (nid, slot), kind in self.bad.items():
            cur = bad_nodes.get(nid)
            if cur is None or _RANK[kind] < _RANK[cur[0]]:
                bad_nodes[nid] = (kind, slot)
        order = sorted(bad_nodes, key=self._order)
        self.bad_ids = set(bad_nodes)
        origins_of: dict[str, tuple[str, ...]] = {}
        origins: list[str] = []
        reaches_out: set[str] = set()
        for nid in order:
            prods = self.prods(nid)
            srcs: list[str] = []
            for e in prods:
                if (e.src, e.out_slot) in self.bad:
                    srcs.extend(o for o in origins_of.get(e.src, ()) if o not in srcs)
            if not prods and not self.g.node(nid).is_placeholder and origins:
                srcs = [origins[0]]  # no data flow recorded here: execution order decides
            if srcs:
                origins_of[nid] = tuple(srcs[:4])
                mask = next((e.src for e in prods if e.src in self.masks), None)
                if mask is not None:
                    for o in origins_of[nid]:
                        self.meets.setdefault(o, (nid, self.masks[mask]))
            else:
                origins_of[nid] = (nid,)
                origins.append(nid)
            if self.g.out_degree(nid) == 0:
                reaches_out.update(origins_of[nid])
        affected = Counter(o for n in order for o in origins_of[n])
        findings: list[Finding] = []
        first_error: str | None = None
        self.explained: set[str] = set()
        for nid in order:
            kind, slot = bad_nodes[nid]
            node = self.g.node(nid)
            shown = self.phase is None or node.phase == self.phase
            if origins_of[nid] == (nid,):
                f = self.origin_finding(node, slot, kind, absorbed=kind in ("nan", "inf") and nid not in reaches_out,
                                        first=first_error is None, affected=affected[nid] - 1)
                if f.severity == "error" and first_error is None:
                    first_error = nid
                if shown:
                    findings.append(f)
            elif shown:
                findings.append(self.inherited_finding(node, slot, kind, origins_of[nid][0], bad_nodes))
        findings += self.soft_findings(set(bad_nodes))
        findings += self.mask_findings()
        return findings

    def mask_findings(self) -> list[Finding]:
        """One info finding per mask that holds ±Inf or ±max, where it is made, so the app shows what was set aside."""
        out: list[Finding] = []
        for nid in sorted({m for m in self.masks.values()}, key=self._order):
            node = self.g.get(nid)
            if node is None or (self.phase is not None and node.phase != self.phase):
                continue
            key = (nid, 0)
            lo, hi = self.t.get(key, "min"), self.t.get(key, "max")
            value = lo if lo is not None and hi is not None and abs(lo) >= abs(hi) else hi
            made = "a constant the model was given" if node.is_placeholder else f"a constant set by {op_name(node.op_type)}"
            users = sum(1 for v in self.masks.values() if v == nid) - 1
            carried = f"it and the {plural(users, 'op')} that carry it are" if users else "it is"
            message = (f"`{nid}` holds {num(value) if value is not None else 'extreme values'}: an intended mask "
                       f"({made}), not an overflow; {carried} left out of origins and amplification chains")
            out.append(Finding(CHECK, "mask", "info", nid, node.op_type, node.module, node.index, message,
                               "introduced", {"slot": 0, "abs_max": self.t.get(key, "abs_max"), "mask_ops": users + 1}))
        return out

    def soft_findings(self, bad_nodes: set[str]) -> list[Finding]:
        """Near-limit and underflow warnings, only where they start (not on every op that carries them)."""
        out: list[Finding] = []
        for table, make in ((self.near, self.near_finding), (self.under, self.underflow_finding)):
            marked, done = {k[0] for k in table}, set()
            for key in table:
                node = self.g.get(key[0])
                if node is None or key[0] in bad_nodes or key[0] in done \
                        or (self.phase is not None and node.phase != self.phase) \
                        or (table is self.near and key[0] in self.explained) \
                        or any(e.src in marked or e.src in bad_nodes for e in self.prods(key[0])):
                    continue
                done.add(key[0])
                out.append(make(node, key))
        return out

    # -- explaining ----------------------------------------------------------------------------

    def where(self, node: OpNode) -> str:
        """`at `x``, or for a gradient op `in the gradient of `fwd` at `x`` (attrs["forward"], else the same id
        without its `backward:` prefix when that op exists)."""
        fwd = (node.attrs or {}).get("forward") if node.phase != "forward" else None
        if fwd is None and node.phase != "forward" and (bare := node.id.partition(":")[2]) in self.g:
            fwd = bare
        return f"in the gradient of `{fwd}` at `{node.id}`" if fwd else f"at `{node.id}`"

    def origin_finding(self, node: OpNode, slot: int, kind: str, *, absorbed: bool, first: bool,
                       affected: int) -> Finding:
        actual, eff = self.out_range(node, slot)
        assert actual is not None and eff is not None
        key = (node.id, slot)
        chain = self.chain(node.id, slot)
        self.explained.update(n for n, _ in chain)
        hints = self.hints(node, slot, kind, eff, chain[-1] if len(chain) > 1 else None)
        root, best = self.root_cause(node, kind, chain, hints)
        in_max, ref_out = self.input_max(node.id), self.r.get(key, "abs_max")
        facts = [f"inputs max {num(in_max)}"] if in_max is not None else []
        facts.append(f"{eff.name} max {num(eff.max)}")
        if ref_out is not None and kind != "overflow":
            facts.append(f"float32 result {num(ref_out)}")
        label = self.slotlabel(key, kind)
        if kind in ("nan", "inf"):
            head = (f"`{node.id}` already holds {label} before any op runs" if node.is_placeholder else
                    f"{label} {'first appears' if first else 'also appears, independently,'} {self.where(node)}")
        elif kind == "saturation":
            head = (f"the NPU overflow flag is set after `{node.id}`" if self.flags.get(node.id) else
                    f"`{node.id}` saturates at ±{num(actual.max)}: in saturation mode overflow clamps instead of "
                    f"giving Inf, and NaN becomes 0")
        else:
            head = (f"`{node.id}` reaches {num(self.magnitude(key))} in float32, beyond the {eff.name} max: "
                    f"it overflows in {eff.name}")
        message = f"{head} ({', '.join(facts)})"
        if meet := self.meets.get(node.id):
            message += f"; it then meets the mask from `{meet[1]}` at `{meet[0]}` (the mask is intended, this is not)"
        if story := self.story(chain):
            message += f"; {story}"
        severity: Severity = "error"
        if absorbed:
            severity, text = self.absorbed_effect(node, eff.name)
            if severity != "error" and kind == "inf" and (node.is_placeholder or op_name(node.op_type) in _INTENDED):
                severity = "info"
                message = f"{label} {self.where(node)} never reaches the outputs (absorbed downstream): likely a mask"
                hints = []
            else:
                message += text
        elif kind == "saturation" and self.effect is not None and not self.effect.damaged:
            severity, text = self.absorbed_effect(node, eff.name, what="the clamped values")
            message += text
        if hints:
            message += (" — fix: " if absorbed else " — ") + " or ".join(h[1] for h in hints[:2])
        mag = self.magnitude(key)
        metrics: dict[str, Any] = {
            **self.counts(key), "dtype": eff.name, "dtype_max": eff.max, "input_abs_max": in_max,
            "reference_abs_max": ref_out, "headroom_bits": headroom(eff.max, mag) if mag and math.isfinite(mag)
            else None, "max_growth": best, "chain_length": len(chain), "first": first, "ops_affected": affected}
        return Finding(CHECK, kind, severity, node.id, node.op_type, node.module, node.index, message,
                       "introduced", metrics, root, "; ".join(h[2] for h in hints) or None)

    def absorbed_effect(self, node: OpNode, dtype: str, *, what: str = "it never reaches the outputs: absorbed "
                        "downstream") -> tuple[Severity, str]:
        """Severity and the evidence for a problem the outputs do not carry: an error when the outputs differ from
        float32 beyond the dtype's precision and the ops right after it show the change, else a warning."""
        damage = self.downstream_damage(node.id, dtype, skip=frozenset(self.bad_ids))
        local = f"`{damage[0]}` has {damage[1]}" if damage else None
        if self.effect is None:
            extra = f"; but {local}" if local else ""
            return "warning", f" ({what}{extra}; its effect on the outputs was not measured: no reference outputs)"
        if self.effect.damaged and local:
            return "error", f" — {what}, but not harmlessly: {local}; {self.effect.verdict()}"
        if self.effect.damaged:
            return "warning", (f" ({what}; the outputs differ from float32 ({self.effect.describe()}) but the ops "
                               f"right after it match the reference)")
        return "warning", f" ({what}; harmless as measured: {self.effect.verdict()})"

    def counts(self, key: tuple[str, int]) -> dict[str, Any]:
        """The slot and what the run measured on it, for a finding's metrics."""
        return {"slot": key[1], "abs_max": self.t.get(key, "abs_max"),
                "nan_count": int(self.t.get(key, "nan_count") or 0),
                "inf_count": int(self.t.get(key, "inf_count") or 0), "numel": int(self.t.get(key, "numel") or 0)}

    def slotlabel(self, key: tuple[str, int], kind: str) -> str:
        lo, hi = self.t.get(key, "min") or 0.0, self.t.get(key, "max") or 0.0
        if kind == "inf" and hi < math.inf and lo == -math.inf:
            return "-Inf"
        return label(kind)

    def inherited_finding(self, node: OpNode, slot: int, kind: str, origin: str,
                          bad_nodes: dict[str, tuple[str, int]]) -> Finding:
        seen = self._origin_parts.get(origin)
        if seen is None:  # what every op inheriting from this origin says about it (hundreds share one)
            onode = self.g.node(origin)
            okind, oslot = bad_nodes[origin]
            olabel_text = {"saturation": "saturation", "overflow": "the overflow"}.get(
                okind, self.slotlabel((origin, oslot), okind))
            seen = self._origin_parts[origin] = (onode, olabel_text, ChainLink(
                origin, onode.module, onode.op_type, _or_nan(self.magnitude((origin, oslot)))))
        onode, olabel_text, olink = seen
        key = (node.id, slot)
        name = self.slotlabel(key, kind) if kind == "inf" else label(kind)  # only Inf has a sign to tell
        turn = ""
        if kind == "nan":  # fed by Inf alone: the NaN was made here
            bad = self.bad
            if {bad[(e.src, e.out_slot)] for e in self.prods(node.id) if (e.src, e.out_slot) in bad} == {"inf"}:
                turn = " (Inf turned into NaN here: Inf - Inf, 0 x Inf or Inf / Inf)"
        message = f"{name} {self.where(node)} is inherited from `{origin}`, where {olabel_text} first appears{turn}"
        metrics: dict[str, Any] = self.counts(key)
        metrics["origin"] = origin
        root = RootCause(origin, onode.module, f"{olabel_text} first appears at `{origin}`",
                         (ChainLink(node.id, node.module, node.op_type, _or_nan(metrics["abs_max"])), olink))
        return Finding(CHECK, kind, "info", node.id, node.op_type, node.module, node.index, message,
                       "inherited", metrics, root)

    def near_finding(self, node: OpNode, key: tuple[str, int]) -> Finding:
        _, eff = self.out_range(node, key[1])
        assert eff is not None
        headroom, value = self.near[key], self.magnitude(key) or 0.0
        chain = self.chain(node.id, key[1])
        hints = [h for h in self.hints(node, key[1], "overflow", eff, chain[-1] if len(chain) > 1 else None)
                 if h[0] == "unnormalized"]
        root, best = self.root_cause(node, "overflow", chain, hints)
        message = (f"`{node.id}` peaks at {num(value)}, only {headroom:.2f} bits below the {eff.name} max "
                   f"{num(eff.max)} (warning under {self.headroom_bits:g})")
        if story := self.story(chain):
            message += f"; {story}"
        metrics = {"slot": key[1], "dtype": eff.name, "dtype_max": eff.max, "abs_max": self.t.get(key, "abs_max"),
                   "reference_abs_max": self.r.get(key, "abs_max"), "headroom_bits": headroom, "max_growth": best,
                   "chain_length": len(chain)}
        return Finding(CHECK, "overflow", "warning", node.id, node.op_type, node.module, node.index, message,
                       "introduced", metrics, root, "; ".join(h[2] for h in hints) or None)

    def underflow_finding(self, node: OpNode, key: tuple[str, int]) -> Finding:
        _, eff = self.out_range(node, key[1])
        assert eff is not None
        fraction, how = self.under[key]
        pct = f"{fraction:.0%}" if fraction >= 0.01 else f"{fraction:.1%}"
        sub = num(eff.smallest_subnormal)
        where = self.where(node)
        if how == "measured":
            message = (f"{pct} of the non-zero values {where} flush to zero when cast to {eff.name} (measured on the "
                       f"float32 values; {eff.name}'s smallest subnormal is {sub})")
        elif how == "histogram":
            message = (f"up to {pct} of the non-zero values {where} lie below {eff.name}'s smallest subnormal {sub} "
                       f"(estimated from a sample histogram; about half of those flush to zero in a cast)")
        elif how == "zeros":
            message = f"{pct} of the values {where} that are non-zero in float32 became zero in {eff.name} (underflow)"
        else:
            message = (f"every value {where} is at most half {eff.name}'s smallest subnormal {sub} "
                       f"(abs max {num(self.magnitude(key) or 0.0)}): the tensor flushes to zero")
        severity: Severity = "warning"
        if node.phase == "forward":
            severity, text = self.absorbed_effect(node, eff.name, what="the values that flush")
            message += text
        hint = None
        if node.phase == "backward" and eff.name == "float16":
            hint = (f"scale the loss (torch.amp.GradScaler, or torch_npu.npu.amp.GradScaler on NPU) so small "
                    f"gradients stay above {sub}")
            message += " — scale the loss"
        metrics = {"slot": key[1], "dtype": eff.name, "fraction": fraction, "source": how,
                   "smallest_subnormal": eff.smallest_subnormal, "abs_max": self.t.get(key, "abs_max")}
        return Finding(CHECK, "underflow", severity, node.id, node.op_type, node.module, node.index, message,
                       "introduced", metrics, None, hint)


def _or_nan(x: float | None) -> float:
    return math.nan if x is None else x
