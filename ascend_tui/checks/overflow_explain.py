"""Why an overflow happened: the amplification chain, the root cause and the fixes the evidence supports.

Used by `checks.overflow` (its `_Analysis` mixes `Explainer` in); pure like it: no torch, no I/O.
Also the dtype ranges, the names and numbers the messages use, and `StatRows` (the row access both read through).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ascend_tui.checks.effect import OpStats, divergence
from ascend_tui.evidence import ChainLink, RootCause
from ascend_tui.graph.trace import greedy_upstream

if TYPE_CHECKING:
    from ascend_tui.graph.opgraph import Edge, OpGraph, OpNode

UNNORMALIZED_RMS = 10.0
MAX_CHAIN = 256


@dataclass(frozen=True, slots=True)
class RangeEvidence:
    """Numbers a live run measured on the device for one output, beyond the summary statistics."""

    dtype: str
    flushed: int
    nonzero: int
    min_abs: float


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
            "double": "float64", "fp64": "float64", "single": "float32", "dt_float16": "float16", "dt_float": "float32",
            "dt_bf16": "bfloat16", "dt_double": "float64"}

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
_SCALE_FACTORS = frozenset("rsqrt reciprocal".split())


def range_of(dtype: str | None) -> DtypeRange | None:
    """The range of a floating dtype named any common way (`torch.float16`, `fp16`, `DT_FLOAT16`); None otherwise."""
    if not dtype:
        return None
    found = _RANGE_OF.get(dtype, _UNSEEN)
    if found is _UNSEEN:  # a graph names a handful of dtypes, each read once per output
        name = dtype.lower().removeprefix("torch.").strip()
        found = RANGES.get(_ALIASES.get(name, name))
        if len(_RANGE_OF) < 1024:
            _RANGE_OF[dtype] = found
    return found  # type: ignore[return-value]


_UNSEEN = object()
_RANGE_OF: dict[str, DtypeRange | None] = {}


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


def headroom(limit: float, value: float | None) -> float | None:
    """Bits between `value` and the dtype max `limit` (log2(limit / value)), defined for every input.

    0 gives +Inf, +-Inf gives -Inf, NaN or None gives None: a statistic can never crash the check.
    """
    if value is None or limit is None or math.isnan(value) or math.isnan(limit):
        return None
    value, limit = abs(value), abs(limit)
    if math.isinf(value):
        return -math.inf if math.isfinite(limit) else 0.0
    if value == 0:
        return math.inf
    if math.isinf(limit):
        return math.inf
    return math.log2(limit) - math.log2(value)


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b when it is a number (growth, shares): None for NaN, a zero or non-finite divisor, or a NaN result."""
    if a is None or b is None or b == 0 or not math.isfinite(b) or math.isnan(a):
        return None
    return a / b


def label(kind: str) -> str:
    """`NaN`, `Inf`, `saturation`, `overflow`: a kind as a message names it."""
    return {"nan": "NaN", "inf": "Inf"}.get(kind, kind)


def times(g: float) -> str:
    """`x15`, `x3.9`, `x1.2e3`: a growth factor."""
    return f"x{g:.2g}" if g < 100 else f"x{num(g)}"


class StatRows:
    """Row access to a `StatsTable` (or None: no rows) through its columns, counts made whole and magnitudes >= 0."""

    def __init__(self, table: Any) -> None:
        self.rows = {key: i for i, key in enumerate(table.keys())} if table is not None else {}
        self.col = {n: (table.column(n) if table is not None else np.zeros(0)) for n in
                    ("min", "max", "abs_max", "nan_count", "inf_count", "zero_count", "numel", "l2norm")}
        # Counts are whole numbers >= 0 whatever a reader found; magnitudes are >= 0 (NaN stays: it means NaN).
        for n in ("nan_count", "inf_count", "zero_count", "numel"):
            self.col[n] = np.nan_to_num(self.col[n], nan=0.0, posinf=2.0 ** 62, neginf=0.0).clip(0.0, 2.0 ** 62)
        for n in ("abs_max", "l2norm"):
            self.col[n] = np.abs(self.col[n])
        self._values: dict[str, list[float]] = {}  # a column as Python floats, made when first read one at a time

    def get(self, key: tuple[str, int], name: str) -> float | None:
        row = self.rows.get(key)
        if row is None:
            return None
        values = self._values.get(name)
        if values is None:  # one `tolist` instead of a numpy scalar and a float() per read (~7k reads a step)
            values = self._values[name] = self.col[name].astype(np.float64).tolist()
        return values[row]


def rows_to_check(t: StatRows, r: StatRows, bad: np.ndarray, *, checked: set[DtypeRange], headroom_bits: float,
                  flags: dict[str, bool]) -> list[tuple[tuple[str, int], int]]:
    """The (key, row) pairs of `t` an overflow analysis can find something in, in row order: those `bad` marks (NaN,
    Inf), those flagged, and those whose magnitude (in `t` or the reference `r`; a NaN one too) comes within a bit of
    the headroom limit of the narrowest range in `checked` (every range an output is checked against, so also past
    half of the range it is stored in: saturation); all of them when one of those is low precision (underflow reads
    each). The rest hold values far inside every range (all ~570 module outputs of a float32 training step): reading
    them one by one found nothing."""
    items = list(t.rows.items())
    if not items or any(c.low_precision for c in checked) or not headroom_bits < 1e6:
        return items
    limit = min(c.max for c in checked) * 2.0 ** -(max(headroom_bits, 0.0) + 1)  # the exact tests come later
    with np.errstate(invalid="ignore"):
        hot = (bad | ~(t.col["abs_max"] <= limit)).tolist()
        big = r.col["abs_max"] > limit
    loud = {k for k, j in r.rows.items() if big[j]} if big.any() else ()
    return [kv for kv in items if hot[kv[1]] or kv[0] in loud or flags and flags.get(kv[0][0])]


class Explainer:
    """Chain walking, hints and root causes over the statistics an analysis holds."""

    g: OpGraph
    t: Any
    r: Any
    evidence: dict[tuple[str, int], RangeEvidence]
    predict: bool
    _weights: dict[str, bool]
    masks: dict[str, str]

    _prods: dict[str, list[Edge]]

    def prods(self, nid: str) -> list[Edge]:
        """`graph.producers(nid)`, computed once per node."""
        edges = self._prods.get(nid)
        if edges is None:
            edges = self._prods[nid] = self.g.producers(nid)
        return edges

    def op_stats(self, table: Any, key: tuple[str, int]) -> OpStats | None:
        l2, zeros, n = (table.get(key, c) for c in ("l2norm", "zero_count", "numel"))
        return None if l2 is None or n is None else OpStats(l2, zeros or 0.0, n)

    def downstream_damage(self, nid: str, dtype: str, *, skip: frozenset[str] = frozenset(),
                          limit: int = 12) -> tuple[str, str] | None:
        """(op, what differs from float32) at the first ops after `nid` that hold numbers again (past the ops that
        carry its Inf or NaN), or None when they match the reference: the cheap check of an absorbed problem."""
        if not self.r.rows:
            return None
        seen, queue, checked = {nid}, [nid], 0
        while queue and checked < limit:
            cur = queue.pop(0)
            for e in self.g.consumers(cur):
                if e.dst in seen:
                    continue
                seen.add(e.dst)
                key = (e.dst, 0)
                if e.dst in skip or (self.t.get(key, "inf_count") or 0) > 0 or (self.t.get(key, "nan_count") or 0) > 0:
                    queue.append(e.dst)  # still carries the problem: look further
                    continue
                t, r = self.op_stats(self.t, key), self.op_stats(self.r, key)
                checked += 1
                if t is not None and r is not None and (what := divergence(t, r, dtype)):
                    return e.dst, what
                if t is None or r is None:
                    queue.append(e.dst)
        return None

    def magnitude(self, key: tuple[str, int]) -> float | None:
        """Abs max of an output: from the float32 reference when it has a number, else from the run."""
        for table in (self.r, self.t):
            v = table.get(key, "abs_max")
            if v is not None and not math.isnan(v):
                return v
        return None

    def weight_like(self, nid: str) -> bool:
        """Parameters, buffers, constants and ops computed only from them (`t` of a weight): not activations."""
        memo, stack = self._weights, [nid]
        while stack:  # iterative: graphs are deeper than Python's recursion limit
            n = stack[-1]
            node = self.g.node(n)
            if n in memo or node.kind != "op":
                memo.setdefault(n, node.kind != "input")
                stack.pop()
                continue
            prods = [e.src for e in self.prods(n)]
            pending = [p for p in prods if p not in memo]
            if pending:
                stack.extend(pending)
            else:
                memo[n] = all(memo[p] for p in prods)
                stack.pop()
        return memo[nid]

    def chain(self, origin: str, slot: int) -> list[tuple[str, float]]:
        """The walk upstream along the largest-magnitude floating activation (a weight only when no activation
        feeds the op): [(node, abs max)], origin first."""
        def score(src: str, out_slot: int) -> float | None:
            node = self.g.node(src)
            meta = node.outputs[out_slot] if out_slot < len(node.outputs) else None
            if (meta is not None and range_of(meta.dtype) is None) or src in self.masks:
                return None  # integers and masks carry no data to follow
            v = self.magnitude((src, out_slot))
            if v is None or not math.isfinite(v):
                return None
            scale = op_name(node.op_type) in _SCALE_FACTORS  # 1/rms of a norm: a factor, not the data it scales
            return -1.0 / (1.0 + v) if scale or self.weight_like(src) else v

        path = greedy_upstream(self.g, origin, score, max_hops=MAX_CHAIN)
        values = [self.magnitude((origin, slot))] + [self._out_mag(n, path[i]) for i, n in enumerate(path[1:])]
        return [(n, v if v is not None else math.nan) for n, v in zip(path, values)]

    def _out_mag(self, node: str, consumer: str) -> float | None:
        slots = [e.out_slot for e in self.prods(consumer) if e.src == node]
        return max((self.magnitude((node, s)) or 0.0 for s in slots), default=None)

    def input_max(self, nid: str) -> float | None:
        """Largest abs max among the floating inputs the op actually read (in the run checked)."""
        vals = [self.t.get((e.src, e.out_slot), "abs_max") for e in self.prods(nid)]
        vals = [v for v in vals if v is not None and not math.isnan(v)]
        return max(vals) if vals else None

    def rms(self, key: tuple[str, int]) -> float | None:
        l2, n = self.r.get(key, "l2norm"), self.r.get(key, "numel")
        if l2 is None:
            l2, n = self.t.get(key, "l2norm"), self.t.get(key, "numel")
        return l2 / math.sqrt(n) if l2 is not None and n and math.isfinite(l2) else None

    def hints(self, node: OpNode, slot: int, kind: str, eff: DtypeRange,
              src: tuple[str, float] | None) -> list[tuple[str, str, str]]:
        """(tag, short remedy, full hint) for each fix the evidence supports, strongest first."""
        name, out = op_name(node.op_type), []
        prods = self.prods(node.id)
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
            key = (node.id, slot)
            f32 = self.r.get(key, "abs_max") if key in self.r.rows else (
                self.t.get(key, "abs_max") if self.predict else None)
            where = f"`{node.module}`" if node.module else "this op"
            high = "ASCEND_OP_SELECT_IMPL_MODE=high_precision"
            if f32 is not None and math.isfinite(f32) and f32 < eff.max:
                out.append(("accumulation", f"accumulate {where} in float32",
                            f"the float32 result peaks at {num(f32)}, inside {eff.name}'s range: the {eff.name} "
                            f"accumulation overflows. Accumulate in float32 (on NPU: {high}) or exclude {where} "
                            f"from autocast"))
            else:
                known = f32 is not None and math.isfinite(f32)
                out.append(("accumulation", f"keep {where} in float32", (
                    f"the result itself (float32 peak {num(f32)}) does not fit {eff.name}: keep {where} in float32 "
                    f"(exclude it from autocast) or scale its inputs down" if known else
                    f"keep {where} in float32 (exclude it from autocast); if only the partial sums overflow, "
                    f"float32 accumulation is enough (on NPU: {high})")))
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
            return RootCause(node.id, node.module, intrinsic.partition(": ")[0], links), best[1] if best else None
        if node.is_placeholder:
            return RootCause(node.id, node.module, f"{label(kind)} is already in `{node.id}` before any op runs",
                             links), None
        if src is not None and src_rms is not None and (best is None or src_rms >= best[1]):
            snode = self.g.node(src[0])
            return RootCause(src[0], snode.module, f"un-normalized input: values up to {num(src[1])} "
                             f"(rms {num(src_rms)})", links), best[1] if best else None
        if best is not None and best[1] >= 2:
            i = [n for n, _ in chain].index(best[0])
            bnode = self.g.node(best[0])
            weights = [(e.src, v) for e in self.prods(best[0]) if self.weight_like(e.src) and e.src not in self.masks
                       and (v := self.magnitude((e.src, e.out_slot))) is not None and v >= 2 and math.isfinite(v)]
            by = ""
            if weights:
                w, v = max(weights, key=lambda wv: wv[1])
                while self.g.node(w).kind == "op" and self.prods(w):
                    w = self.prods(w)[0].src
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
        kind = self.g.node(sid).kind
        source = (f"an input with max {num(sval)}" if kind == "input" else
                  f"{'parameter' if kind == 'param' else kind} `{sid.split(':', 1)[-1]}` (max {num(sval)})"
                  if kind in ("param", "buffer") else f"`{sid}` (max {num(sval)})")
        return f"the values grew {grew} from {source}" if grew else f"the largest input path starts at {source}"
