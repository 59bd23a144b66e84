"""Overflow and NaN: where non-finite or out-of-range values first appear, and where they came from.

Pure: an `OpGraph` and `StatsTable`s in, `Finding`s out, so live captures and dumps share it:

    analyze(graph, stats, *, dtype="float16", reference=None, inf_nan_mode=True,
            overflow_flags=None, headroom_bits=1.0, phase=None, evidence=None,
            underflow_fraction=0.05) -> list[Finding]

- `stats`: statistics of the run being checked, keyed (node id, output slot). Formats that
  record no NaN/Inf counts (msprobe statistics) may leave them 0: non-finiteness is also read
  from min/max, which NaN and Inf always reach.
- `dtype`: the low-precision dtype the run computes in. A graph with any float16/bfloat16/float8
  output is the target run and each output is checked against its own dtype; a graph entirely
  in wider types is checked as if it ran in `dtype` (predicting NPU overflow from a float32 run).
- `reference`: float32 statistics of the same graph (matching ids); magnitudes come from it
  when present, because a float16 run cannot show how far past its range a value went.
- `inf_nan_mode`: False for NPUs in saturation mode, where overflow clamps to ±max and NaN
  becomes 0; outputs sitting at ±max are then reported as kind `saturation`.
- `overflow_flags`: {node id: True} where the NPU float-status flag was set after that op.
- `headroom_bits`: warn when log2(dtype max / abs max) is below this (error when below 0).
- `phase`: report only nodes of this phase ("forward", "backward"); None reports all.
- `evidence`: {(node, slot): RangeEvidence} measured on the device beyond the summary stats
  (the exact fraction a dtype flushes to zero, the smallest non-zero magnitude).
- `underflow_fraction`: warn when at least this fraction of non-zero values flushes to zero.

Kinds: `inf`, `nan`, `saturation`, `overflow` (range risk), `underflow`. Only origins (an op whose
inputs are fine but whose output is not) are errors; later ops that carry the same values are
`inherited` info findings whose root cause points at the origin. Each origin gets an amplification
chain walked upstream along the largest-magnitude input to a graph input or parameter.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ascend_tui.evidence import ChainLink, Finding, RootCause, Severity, StatsTable
from ascend_tui.graph.opgraph import OpGraph, OpNode
from ascend_tui.graph.trace import greedy_upstream

CHECK = "overflow"
UNNORMALIZED_RMS = 10.0
MAX_CHAIN = 256


@dataclass(frozen=True, slots=True)
class DtypeRange:
    """The representable range of one floating dtype."""

    name: str
    max: float
    smallest_normal: float
    smallest_subnormal: float

    @property
    def low_precision(self) -> bool:
        return self.max < 1e38 or self.name == "bfloat16"

    @property
    def exp_limit(self) -> float:
        """Largest x with exp(x) finite in this dtype."""
        return math.log(self.max)


RANGES: dict[str, DtypeRange] = {r.name: r for r in (
    DtypeRange("float16", 65504.0, 2.0 ** -14, 2.0 ** -24),
    DtypeRange("bfloat16", 3.3895313892515355e38, 2.0 ** -126, 2.0 ** -133),
    DtypeRange("float32", 3.4028234663852886e38, 2.0 ** -126, 2.0 ** -149),
    DtypeRange("float64", 1.7976931348623157e308, 2.0 ** -1022, 2.0 ** -1074),
    DtypeRange("float8_e4m3fn", 448.0, 2.0 ** -6, 2.0 ** -9),
    DtypeRange("float8_e5m2", 57344.0, 2.0 ** -14, 2.0 ** -16),
)}
_ALIASES = {"half": "float16", "fp16": "float16", "float": "float32", "fp32": "float32", "bf16": "bfloat16",
            "double": "float64", "fp64": "float64", "dt_float16": "float16", "dt_float": "float32",
            "dt_bf16": "bfloat16", "dt_double": "float64"}
_EXTREMES = frozenset(r.max for r in RANGES.values())

_ACCUMULATING = frozenset("""mm addmm bmm baddbmm addbmm matmul linear addmv mv dot vdot einsum tensordot bilinear
    matmulv2 matmulv3 batchmatmul batchmatmulv2 batchmatmulv3 gemm gemmv2 convolution conv conv1d conv2d conv3d
    conv_transpose1d conv_transpose2d conv_transpose3d convolution_backward sum mean cumsum nansum var std var_mean
    std_mean norm linalg_vector_norm reducesum reducesumd reducemean scaled_dot_product_attention
    scaled_dot_product_flash_attention scaled_dot_product_efficient_attention scaled_dot_product_attention_math
    npu_fusion_attention flashattentionscore""".split())
_EXP = frozenset("exp exp2 expm1 sinh cosh".split())
_DIVISOR_SLOT = {"div": 1, "divide": 1, "true_divide": 1, "realdiv": 1, "truediv": 1, "floor_divide": 1,
                 "reciprocal": 0, "rsqrt": 0, "rtruediv": 0}
_LOG = frozenset("log log2 log10 sqrt".split())
_INTENDED = frozenset("""full fill full_like new_full masked_fill scalar_tensor where clamp clamp_min clamp_max clip
    nan_to_num lift_fresh lift_fresh_copy""".split())
_RANK = {"nan": 0, "inf": 1, "saturation": 2, "overflow": 3}


@dataclass(frozen=True, slots=True)
class RangeEvidence:
    """Numbers a live run measured on the device for one output, beyond the summary statistics."""

    dtype: str
    flushed: int
    nonzero: int
    min_abs: float


def range_of(dtype: str | None) -> DtypeRange | None:
    """The range of a floating dtype named any common way (`torch.float16`, `fp16`, `DT_FLOAT16`); None otherwise."""
    if not dtype:
        return None
    name = dtype.lower().removeprefix("torch.")
    return RANGES.get(_ALIASES.get(name, name))


def op_name(op_type: str) -> str:
    """`exp` for `aten.exp`, `Torch.exp`, `Tensor.__exp__` or `exp_`: the op whatever wrote its name."""
    parts = [p for p in op_type.lower().split(".")
             if p and not p.isdigit() and p not in ("forward", "backward", "default", "tensor", "scalar", "out")]
    return parts[-1].strip("_") if parts else ""


def num(x: float) -> str:
    """`4.57e4`, `800`, `3.9`: how a person writes a magnitude."""
    if x is None or not math.isfinite(x):
        return "NaN" if x is None or math.isnan(x) else ("Inf" if x > 0 else "-Inf")
    text = f"{x:.3g}"
    if "e" in text:
        mant, exp = text.split("e")
        text = f"{mant}e{int(exp)}"
    return text


def times(g: float) -> str:
    """`x15`, `x3.9`, `x1.2e3`: a growth factor."""
    return f"x{g:.2g}" if g < 100 else f"x{num(g)}"


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
) -> list[Finding]:
    """Overflow, NaN, saturation, range-risk and underflow findings for every operator; see the module doc."""
    target = range_of(dtype)
    if target is None:
        raise ValueError(f"not a floating dtype: {dtype!r}")
    return _Analysis(graph, stats, target, reference, inf_nan_mode, dict(overflow_flags or {}), headroom_bits,
                     phase, dict(evidence or {}), underflow_fraction).run()


class _Table:
    """Row access to a `StatsTable` through its columns."""

    def __init__(self, table: StatsTable | None) -> None:
        self.rows = {key: i for i, key in enumerate(table.keys())} if table is not None else {}
        names = ("min", "max", "abs_max", "nan_count", "inf_count", "zero_count", "numel", "l2norm")
        self.col = {n: (table.column(n) if table is not None else np.zeros(0)) for n in names}

    def get(self, key: tuple[str, int], name: str) -> float | None:
        row = self.rows.get(key)
        return None if row is None else float(self.col[name][row])


class _Analysis:
    """One pass of the overflow check over a graph; holds the per-output classification."""

    def __init__(self, graph: OpGraph, stats: StatsTable, target: DtypeRange, reference: StatsTable | None,
                 inf_nan_mode: bool, flags: dict[str, bool], headroom_bits: float, phase: str | None,
                 evidence: dict[tuple[str, int], RangeEvidence], underflow_fraction: float) -> None:
        self.g, self.target, self.inf_nan, self.flags = graph, target, inf_nan_mode, flags
        self.headroom_bits, self.phase, self.evidence, self.uf_min = headroom_bits, phase, evidence, underflow_fraction
        self.t, self.r = _Table(stats), _Table(reference)
        self.predict = target.low_precision and not any(
            (rng := range_of(m.dtype)) is not None and rng.low_precision
            for n in graph for m in n.outputs if m is not None)
        self.bad: dict[tuple[str, int], str] = {}
        self.near: dict[tuple[str, int], float] = {}
        self.under: dict[tuple[str, int], tuple[float, str]] = {}
        self._weights: dict[str, bool] = {}

    # -- classification ------------------------------------------------------------------------

    def out_range(self, node: OpNode, slot: int) -> tuple[DtypeRange | None, DtypeRange | None]:
        """(the dtype the output is stored in, the dtype it is checked against)."""
        meta = node.outputs[slot] if slot < len(node.outputs) else None
        actual = range_of(meta.dtype) if meta is not None else None
        if actual is None and meta is None:
            actual = RANGES["float32"] if self.predict else self.target
        if actual is None:
            return None, None
        return actual, (self.target if self.predict and not actual.low_precision else actual)

    def magnitude(self, key: tuple[str, int]) -> float | None:
        """Abs max of an output: from the float32 reference when it has a number, else from the run."""
        for table in (self.r, self.t):
            v = table.get(key, "abs_max")
            if v is not None and not math.isnan(v):
                return v
        return None

    def classify(self) -> None:
        t = self.t
        has_nan = (t.col["nan_count"] > 0) | np.isnan(t.col["min"]) | np.isnan(t.col["max"])
        has_inf = (t.col["inf_count"] > 0) | np.isinf(t.col["min"]) | np.isinf(t.col["max"])
        for key, i in sorted(t.rows.items(), key=lambda kv: self._order(kv[0][0])):
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
                headroom = math.log2(eff.max / value)
                if headroom < 0:
                    self.bad[key] = "overflow"
                elif headroom < self.headroom_bits:
                    self.near[key] = headroom
            if eff.low_precision:
                self._underflow(key, i, actual, eff, value)

    def _order(self, nid: str) -> tuple[int, int]:
        node = self.g.get(nid)
        return (node.index, self.g.position(nid)) if node is not None else (1 << 40, 0)

    def _saturated(self, node: OpNode, key: tuple[str, int], actual: DtypeRange) -> bool:
        if self.inf_nan or node.is_placeholder or op_name(node.op_type) in _INTENDED:
            return False
        if self.t.col["abs_max"][self.t.rows[key]] < actual.max * (1 - 1e-6):
            return False
        at_max = [(e.src, e.out_slot) for e in self.g.producers(node.id)
                  if (v := self.t.get((e.src, e.out_slot), "abs_max")) is not None and v >= actual.max * (1 - 1e-6)]
        return not at_max or any(k in self.bad for k in at_max)  # created here, or carried from a saturated op

    def _underflow(self, key: tuple[str, int], i: int, actual: DtypeRange, eff: DtypeRange, value: float | None) -> None:
        ev = self.evidence.get(key)
        fraction: float | None = None
        if ev is not None and range_of(ev.dtype) == eff and ev.nonzero > 0:
            fraction, how = ev.flushed / ev.nonzero, "measured"
        elif key in self.r.rows and actual == eff and self.r.get(key, "numel") == self.t.col["numel"][i]:
            ref_zero, numel = self.r.get(key, "zero_count") or 0.0, self.t.col["numel"][i]
            if numel > ref_zero:
                fraction, how = max(0.0, (self.t.col["zero_count"][i] - ref_zero) / (numel - ref_zero)), "zeros"
        elif value is not None and 0 < value < eff.smallest_subnormal:
            fraction, how = 1.0, "abs max"
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
        origins_of: dict[str, tuple[str, ...]] = {}
        origins: list[str] = []
        reaches_out: set[str] = set()
        for nid in order:
            prods = self.g.producers(nid)
            srcs: list[str] = []
            for e in prods:
                if (e.src, e.out_slot) in self.bad:
                    srcs.extend(o for o in origins_of.get(e.src, ()) if o not in srcs)
            if not prods and not self.g.node(nid).is_placeholder and origins:
                srcs = [origins[0]]  # no data flow recorded here: execution order decides
            if srcs:
                origins_of[nid] = tuple(srcs[:4])
            else:
                origins_of[nid] = (nid,)
                origins.append(nid)
            if self.g.nx.out_degree(nid) == 0:
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
        return findings

    def soft_findings(self, bad_nodes: set[str]) -> list[Finding]:
        """Near-limit and underflow warnings, only where they start (not on every op that carries them)."""
        out: list[Finding] = []
        for table, make in ((self.near, self.near_finding), (self.under, self.underflow_finding)):
            marked = {k[0] for k in table}
            for key in table:
                node = self.g.get(key[0])
                if node is None or key[0] in bad_nodes or (self.phase is not None and node.phase != self.phase) \
                        or (table is self.near and key[0] in self.explained):
                    continue
                if any(e.src in marked or e.src in bad_nodes for e in self.g.producers(key[0])):
                    continue
                if out and out[-1].node == key[0] and out[-1].kind == ("overflow" if table is self.near else "underflow"):
                    continue
                out.append(make(node, key))
        return out

    # -- explaining ----------------------------------------------------------------------------

    def weight_like(self, nid: str) -> bool:
        """Parameters, buffers, constants and ops computed only from them (`t` of a weight): not activations."""
        if nid not in self._weights:
            node = self.g.node(nid)
            self._weights[nid] = node.kind != "input" and (node.kind != "op" or all(
                self.weight_like(e.src) for e in self.g.producers(nid)))
        return self._weights[nid]

    def chain(self, origin: str, slot: int) -> list[tuple[str, float]]:
        """The walk upstream along the largest-magnitude floating activation (a weight only when no activation
        feeds the op): [(node, abs max)], origin first."""
        def score(src: str, out_slot: int) -> float | None:
            node = self.g.node(src)
            meta = node.outputs[out_slot] if out_slot < len(node.outputs) else None
            if meta is not None and range_of(meta.dtype) is None:
                return None
            v = self.magnitude((src, out_slot))
            if v is None or not math.isfinite(v):
                return None
            return -1.0 / (1.0 + v) if self.weight_like(src) else v

        path = greedy_upstream(self.g, origin, score, max_hops=MAX_CHAIN)
        values = [self.magnitude((origin, slot))] + [self._out_mag(n, path[i]) for i, n in enumerate(path[1:])]
        return [(n, v if v is not None else math.nan) for n, v in zip(path, values)]

    def _out_mag(self, node: str, consumer: str) -> float | None:
        slots = [e.out_slot for e in self.g.producers(consumer) if e.src == node]
        return max((self.magnitude((node, s)) or 0.0 for s in slots), default=None)

    def input_max(self, nid: str) -> float | None:
        """Largest abs max among the floating inputs the op actually read (in the run checked)."""
        vals = [self.t.get((e.src, e.out_slot), "abs_max") for e in self.g.producers(nid)]
        vals = [v for v in vals if v is not None and not math.isnan(v)]
        return max(vals) if vals else None

    def rms(self, key: tuple[str, int]) -> float | None:
        l2, n = self.r.get(key, "l2norm"), self.r.get(key, "numel")
        if l2 is None:
            l2, n = self.t.get(key, "l2norm"), self.t.get(key, "numel")
        return l2 / math.sqrt(n) if l2 is not None and n and math.isfinite(l2) else None

    def hints(self, node: OpNode, slot: int, kind: str, eff: DtypeRange, src: tuple[str, float] | None) -> list[tuple[str, str, str]]:
        """(tag, short remedy, full hint) for each fix the evidence supports, strongest first."""
        name, out = op_name(node.op_type), []
        prods = self.g.producers(node.id)
        in_max = self.input_max(node.id)
        if name in _EXP and in_max is not None and in_max > eff.exp_limit and kind != "nan":
            out.append(("exp", "subtract the max before exp",
                        f"exp of values up to {num(in_max)} overflows {eff.name} (exp(x) is finite only below "
                        f"x = {eff.exp_limit:.1f}): subtract the max first (x - x.amax(dim, keepdim=True)) or use "
                        f"torch.softmax / torch.logsumexp, which do"))
        div_slot = _DIVISOR_SLOT.get(name)
        divisor = next(((e.src, e.out_slot) for e in prods if e.in_slot == div_slot), None)
        if divisor is not None:
            zeros = self.t.get(divisor, "zero_count") or 0.0
            ev = self.evidence.get(divisor)
            dividend = self.input_max(node.id) if div_slot else 1.0
            tiny = ev is not None and ev.min_abs > 0 and dividend is not None and dividend / ev.min_abs > eff.max
            if zeros > 0 or tiny:
                what = f"{int(zeros)} zeros" if zeros > 0 else f"values as small as {num(ev.min_abs if ev else 0.0)}"
                fix = "rsqrt(var + eps)" if name == "rsqrt" else "x / (d + eps) or d.clamp_min(eps)"
                out.append(("division", "guard the divisor with an epsilon",
                            f"the divisor `{divisor[0]}` has {what}: add an epsilon ({fix})"))
        if name in _LOG and prods:
            key = (prods[0].src, prods[0].out_slot)
            zeros, lo = self.t.get(key, "zero_count") or 0.0, self.t.get(key, "min")
            if (lo is not None and lo < 0) or (zeros > 0 and name != "sqrt"):
                what = f"negative values (min {num(lo)})" if lo is not None and lo < 0 else f"{int(zeros)} zeros"
                out.append(("domain", f"clamp the input of {name}",
                            f"{name} gets {what}: clamp its input (x.clamp_min(eps)) first"))
        if name in _ACCUMULATING and eff.low_precision and not out:
            ref_out = self.r.get((node.id, slot), "abs_max") if (node.id, slot) in self.r.rows else (
                self.t.get((node.id, slot), "abs_max") if self.predict else None)
            where = f"`{node.module}`" if node.module else "this op"
            if ref_out is not None and math.isfinite(ref_out) and ref_out < eff.max:
                out.append(("accumulation", f"accumulate {where} in float32",
                            f"the float32 result peaks at {num(ref_out)}, inside {eff.name}'s range: the {eff.name} "
                            f"accumulation overflows. Accumulate in float32 (on NPU: ASCEND_OP_SELECT_IMPL_MODE="
                            f"high_precision) or exclude {where} from autocast"))
            elif ref_out is not None and math.isfinite(ref_out):
                out.append(("accumulation", f"keep {where} in float32",
                            f"the result itself (float32 peak {num(ref_out)}) does not fit {eff.name}: keep {where} in "
                            f"float32 (exclude it from autocast) or scale its inputs down"))
            else:
                out.append(("accumulation", f"keep {where} in float32",
                            f"keep {where} in float32 (exclude it from autocast); if only the partial sums overflow, "
                            f"float32 accumulation is enough (on NPU: ASCEND_OP_SELECT_IMPL_MODE=high_precision)"))
        if src is not None:
            snode = self.g.node(src[0])
            rms = self.rms((src[0], 0))
            if snode.kind == "input" and rms is not None and rms >= UNNORMALIZED_RMS:
                out.insert(0, ("unnormalized", "normalize the input",
                               f"normalize `{src[0]}` before the model: it reaches {num(src[1])} with rms {num(rms)}, "
                               f"where standardized inputs stay within a few units"))
        return out

    def root_cause(self, node: OpNode, kind: str, chain: list[tuple[str, float]],
                   hints: list[tuple[str, str, str]]) -> tuple[RootCause, float | None]:
        """The op or source the chain blames, and the largest growth factor seen along it."""
        links = tuple(ChainLink(n, self.g.node(n).module, self.g.node(n).op_type, v) for n, v in chain)
        growth = self.growths(chain)
        best = max(growth, key=lambda ng: ng[1], default=None)
        tags = {h[0]: h[2] for h in hints}
        intrinsic = next((tags[t] for t in ("exp", "division", "domain") if t in tags), None)
        src = chain[-1] if len(chain) > 1 else None
        src_rms = self.rms((src[0], 0)) if src is not None and "unnormalized" in tags else None
        if intrinsic is not None:
            return RootCause(node.id, node.module, intrinsic.split(":")[0], links), best[1] if best else None
        if node.is_placeholder:
            return RootCause(node.id, node.module, f"{_label(kind)} is already in `{node.id}` before any op runs",
                             links), None
        if src is not None and src_rms is not None and (best is None or math.log(src_rms) >= math.log(best[1])):
            snode = self.g.node(src[0])
            return RootCause(src[0], snode.module, f"un-normalized input: values up to {num(src[1])} "
                             f"(rms {num(src_rms)})", links), best[1] if best else None
        if best is not None and best[1] >= 2:
            i = [n for n, _ in chain].index(best[0])
            bnode = self.g.node(best[0])
            weights = [(e.src, v) for e in self.g.producers(best[0]) if self.weight_like(e.src)
                       and (v := self.magnitude((e.src, e.out_slot))) is not None and v >= 2]
            by = ""
            if weights:
                w, v = max(weights, key=lambda wv: wv[1])
                while self.g.node(w).kind == "op" and self.g.producers(w):
                    w = self.g.producers(w)[0].src
                by = f" through `{w}` (max {num(v)})"
            return RootCause(best[0], bnode.module, f"amplifies values {times(best[1])} "
                             f"({num(chain[i + 1][1])} -> {num(chain[i][1])}){by}", links), best[1]
        what = "out of range" if kind in ("overflow", "saturation") else "non-finite"
        return RootCause(node.id, node.module, f"the first op whose output is {what} while its inputs are not",
                         links), best[1] if best else None

    def growths(self, chain: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """(op, output / largest input) for each op along the chain where both are finite numbers."""
        out = []
        for (n, v), (_, up) in zip(chain, chain[1:]):
            if not self.g.node(n).is_placeholder and math.isfinite(v) and math.isfinite(up) and up > 0:
                out.append((n, v / up))
        return out

    def story(self, chain: list[tuple[str, float]]) -> str:
        """`the values grew x15 at `a` and x3.9 at `b` from an input with max 800`."""
        if len(chain) < 2:
            return ""
        top = sorted((g for g in self.growths(chain) if g[1] >= 1.5), key=lambda g: -g[1])[:2]
        pos = {n: i for i, (n, _) in enumerate(chain)}
        grew = " and ".join(f"{times(g)} at `{n}`" for n, g in sorted(top, key=lambda g: pos[g[0]]))
        sid, sval = chain[-1]
        snode = self.g.node(sid)
        if snode.kind == "input":
            source = f"an input with max {num(sval)}"
        elif snode.kind in ("param", "buffer"):
            source = f"{snode.kind}eter `{sid.split(':', 1)[-1]}` (max {num(sval)})".replace("buffereter", "buffer")
        else:
            source = f"`{sid}` (max {num(sval)})"
        return f"the values grew {grew} from {source}" if grew else f"the largest input path starts at {source}"

    def where(self, node: OpNode) -> str:
        fwd = (node.attrs or {}).get("forward") if node.phase != "forward" else None
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
        label = self.slot_label(key, kind)
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
        if story := self.story(chain):
            message += f"; {story}"
        if hints:
            message += " — " + " or ".join(h[1] for h in hints[:2])
        severity: Severity = "error"
        if absorbed:
            intended = node.is_placeholder or op_name(node.op_type) in _INTENDED
            severity = "info" if intended and kind == "inf" else "warning"
            message += " (it never reaches the outputs: absorbed downstream" + (", likely a mask)" if intended else ")")
        mag = self.magnitude(key)
        metrics: dict[str, Any] = {
            "slot": slot, "dtype": eff.name, "dtype_max": eff.max, "abs_max": self.t.get(key, "abs_max"),
            "nan_count": int(self.t.get(key, "nan_count") or 0), "inf_count": int(self.t.get(key, "inf_count") or 0),
            "numel": int(self.t.get(key, "numel") or 0), "input_abs_max": in_max, "reference_abs_max": ref_out,
            "headroom_bits": math.log2(eff.max / mag) if mag and math.isfinite(mag) else None,
            "max_growth": best, "chain_length": len(chain), "first": first, "ops_affected": affected,
        }
        return Finding(CHECK, kind, severity, node.id, node.op_type, node.module, node.index, message,
                       "introduced", metrics, root, "; ".join(h[2] for h in hints) or None)

    def slot_label(self, key: tuple[str, int], kind: str) -> str:
        if kind == "inf" and (self.t.get(key, "max") or 0.0) < math.inf and (self.t.get(key, "min") or 0.0) == -math.inf:
            return "-Inf"
        return _label(kind)

    def inherited_finding(self, node: OpNode, slot: int, kind: str, origin: str,
                          bad_nodes: dict[str, tuple[str, int]]) -> Finding:
        onode = self.g.node(origin)
        okind, oslot = bad_nodes[origin]
        olabel = self.slot_label((origin, oslot), okind)
        label = self.slot_label((node.id, slot), kind)
        fed = {self.bad[(e.src, e.out_slot)] for e in self.g.producers(node.id) if (e.src, e.out_slot) in self.bad}
        turn = " (Inf turned into NaN here: Inf - Inf, 0 x Inf or Inf / Inf)" if kind == "nan" and fed == {"inf"} else ""
        olabel_text = {"saturation": "saturation", "overflow": "the overflow"}.get(okind, olabel)
        message = f"{label} {self.where(node)} is inherited from `{origin}`, where {olabel_text} first appears{turn}"
        key = (node.id, slot)
        root = RootCause(origin, onode.module, f"{olabel_text} first appears at `{origin}`",
                         (ChainLink(node.id, node.module, node.op_type, _or_nan(self.t.get(key, "abs_max"))),
                          ChainLink(origin, onode.module, onode.op_type, _or_nan(self.magnitude((origin, oslot))))))
        metrics: dict[str, Any] = {"slot": slot, "abs_max": self.t.get(key, "abs_max"),
                                   "nan_count": int(self.t.get(key, "nan_count") or 0),
                                   "inf_count": int(self.t.get(key, "inf_count") or 0), "origin": origin}
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
        metrics = {"slot": key[1], "dtype": eff.name, "dtype_max": eff.max, "abs_max": value,
                   "headroom_bits": headroom, "max_growth": best, "chain_length": len(chain)}
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
            message = f"{pct} of the non-zero values {where} are below {eff.name}'s smallest subnormal {sub}: they flush to zero"
        elif how == "zeros":
            message = f"{pct} of the values {where} that are non-zero in float32 became zero in {eff.name} (underflow)"
        else:
            message = (f"every value {where} is below {eff.name}'s smallest subnormal {sub} "
                       f"(abs max {num(self.magnitude(key) or 0.0)}): the tensor flushes to zero")
        hint = None
        if node.phase == "backward" and eff.name == "float16":
            hint = (f"scale the loss (torch.amp.GradScaler, or torch_npu.npu.amp.GradScaler on NPU) so small "
                    f"gradients stay above {sub}")
            message += " — scale the loss"
        metrics = {"slot": key[1], "dtype": eff.name, "fraction": fraction, "source": how,
                   "smallest_subnormal": eff.smallest_subnormal, "abs_max": self.t.get(key, "abs_max")}
        return Finding(CHECK, "underflow", "warning", node.id, node.op_type, node.module, node.index, message,
                       "introduced", metrics, None, hint)


def _or_nan(x: float | None) -> float:
    return math.nan if x is None else x


def _label(kind: str) -> str:
    return {"nan": "NaN", "inf": "Inf", "saturation": "saturation", "overflow": "overflow"}[kind]
