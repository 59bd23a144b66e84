"""Where the time goes: categories, per-group totals and shares, bound-ness, roofline estimates, baseline diffs, ranks.

Pure numpy over a `KernelTable` (no I/O): the readers, the live profiler, the CLI and the app all
summarise time the same way. The advice rules that turn these numbers into findings are in
`profile_advice.py`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ascend_tui.graph.profile_kernels import CATEGORIES, categories, category_of, unique_rows  # noqa: F401
from ascend_tui.graph.profile import Codes, KernelTable, StepTime

GROUP_BY = ("type", "name", "module", "category", "core")
BOUND_RATIO = 0.8  # msprof-analyze's operator_bound_ratio
PMU_PIPES = {"cube": ("aic_mac_ratio",), "vector": ("aiv_vec_ratio",),
             "memory": ("aic_mte1_ratio", "aic_mte2_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio", "aic_fixpipe_ratio"),
             "scalar": ("aic_scalar_ratio", "aiv_scalar_ratio")}
DTYPE_BYTES = {"FLOAT": 4, "FLOAT32": 4, "FLOAT16": 2, "BF16": 2, "DT_BF16": 2, "BFLOAT16": 2, "INT64": 8,
               "INT32": 4, "INT16": 2, "INT8": 1, "UINT8": 1, "BOOL": 1, "DOUBLE": 8, "UINT64": 8, "UINT32": 4,
               "UINT16": 2, "COMPLEX64": 8, "HIFLOAT8": 1, "FLOAT8_E4M3FN": 1}


def column(table: KernelTable, by: str) -> Codes:
    """The grouping column `by` (one of `GROUP_BY`) of `table`."""
    if by == "category":
        return categories(table)
    if by not in table.text:
        raise ValueError(f"cannot group by {by!r} (one of {', '.join(GROUP_BY)})")
    return table.text[by]


@dataclass(frozen=True, slots=True)
class Group:
    """Totals of one op, type, module or category: what a profile table row shows."""

    key: str
    count: int
    total_us: float
    share: float
    avg_us: float
    max_us: float
    category: str
    bound: str = ""


def summarize(table: KernelTable, by: str = "type", rows: np.ndarray | None = None) -> list[Group]:
    """One `Group` per distinct value of `by`, largest total first; `rows` restricts to some rows."""
    t = table if rows is None else table.take(rows)
    if t.n == 0:
        return []
    col = column(t, by)
    k = len(col.values)
    dur = t.dur_us
    total = np.bincount(col.codes, weights=dur, minlength=k)
    count = np.bincount(col.codes, minlength=k)
    mx = np.full(k, -np.inf)
    np.maximum.at(mx, col.codes, dur)
    grand = float(dur.sum()) or 1.0
    # row by row labels: those of the whole table (computed once for it) taken at `rows`
    cats = categories(t) if rows is None else categories(table).take(rows)
    bounds = boundness(t) if rows is None else boundness(table).take(rows)
    # the category / bound of a group: that of its longest-running row kind
    group, weight = col.codes.astype(np.int64), dur + 1e-9  # shared by both labels
    cat_of = _dominant(group, cats.codes, weight, k)
    bound_of = _dominant(group, bounds.codes, weight, k)
    out = [Group(col.values[i], int(count[i]), float(total[i]), float(total[i]) / grand,
                 float(total[i]) / max(int(count[i]), 1), float(mx[i]), cats.values[cat_of[i]],
                 bounds.values[bound_of[i]] if len(bounds.values) else "")
           for i in range(k) if count[i]]
    out.sort(key=lambda g: (-g.total_us, g.key))
    return out


def _dominant(group: np.ndarray, label: np.ndarray, weight: np.ndarray, k: int) -> np.ndarray:
    """For each group (int64 codes), the label carrying the most weight (each row's weight over 0)."""
    if len(label) == 0:
        return np.zeros(k, np.int64)
    m = int(label.max()) + 1
    key = group * m
    key += label
    acc = np.bincount(key, weights=weight, minlength=k * m).reshape(k, m)
    return acc.argmax(axis=1)


def shares(table: KernelTable, by: str = "category") -> dict[str, float]:
    """Share of device time per value of `by`."""
    return {g.key: g.share for g in summarize(table, by)}


def boundness(table: KernelTable, *, ratio: float = BOUND_RATIO) -> Codes:
    """Per row: `cube`, `vector`, `memory` or `scalar` when that pipe is busy over `ratio` of the time (PMU),
    `unbound` when PMU counters exist but no pipe is, else a roofline estimate `~compute` / `~memory`, or ''."""
    for seen, r, codes in _BOUND:
        if seen is table and r == ratio:
            return codes
    out = _boundness(table, ratio)
    _BOUND[:] = [(table, ratio, out), *_BOUND[:1]]
    return out


_BOUND: list[tuple[KernelTable, float, Codes]] = []  # the last two tables' labels: each summary asks again


def pmu_max(table: KernelTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the busiest pipe's ratio (float32, 0 without counters), its index in `PMU_PIPES` (-1 without) and
    whether any counter is over 0; made once a table (bound-ness and the unbound rule read it)."""
    for seen, out in _PMU:
        if seen is table:
            return out
    n = table.n
    best = np.zeros(n, np.float32)
    which = np.full(n, -1, np.int8)
    have = np.zeros(n, bool)
    ok = np.empty(n, bool)
    better = np.empty(n, bool)
    for i, cols in enumerate(PMU_PIPES.values()):
        for c in cols:
            v = table.metrics.get(c)
            if v is None:
                continue
            np.greater(v, 0, out=ok)  # NaN is not (nor is it finite); +inf is finite's only other exception
            if np.isinf(v).any():
                ok &= np.isfinite(v)
            have |= ok
            np.greater(v, best, out=better)
            better &= ok
            np.copyto(best, v, where=better, casting="unsafe")  # in place: no new million-row arrays a column
            np.copyto(which, i, where=better, casting="unsafe")
    out = (best, which, have)
    _PMU[:] = [(table, out), *_PMU[:1]]
    return out


_PMU: list[tuple[KernelTable, tuple[np.ndarray, np.ndarray, np.ndarray]]] = []  # the last two tables'


def _boundness(table: KernelTable, ratio: float) -> Codes:
    n = table.n
    if n == 0:
        return Codes()
    best, which, have = pmu_max(table)
    names = list(PMU_PIPES)
    labels = np.where(~have, -1, np.where(best > ratio, which, len(names)))
    values = names + ["unbound", "", "~compute", "~memory"]
    codes = np.where(labels < 0, len(names) + 1, labels).astype(np.int32)
    missing = np.flatnonzero(~have)
    if len(missing):
        est = roofline(table, missing)
        codes[missing] = np.where(np.isnan(est), len(names) + 1,
                                  np.where(est >= RIDGE_FLOP_PER_BYTE, len(names) + 2, len(names) + 3))
    return Codes(codes, values)


def stream_order(table: KernelTable) -> np.ndarray:
    """Row indices by stream, then start time (ties in row order): `np.lexsort((start_ns, stream))`, made once a table."""
    for seen, order in _ORDER:
        if seen is table:
            return order
    stream = table.ints["stream"]
    order = start_order(table)
    lo = int(stream.min()) if table.n else 0
    if table.n and int(stream.max()) - lo < 1 << 16:  # few streams: a radix sort of small keys
        key = (stream[order] - lo).astype(np.uint16)
    else:
        key = stream[order]
    if table.n and (key[1:] < key[:-1]).any():
        order = order[np.argsort(key, kind="stable")]
    _ORDER[:] = [(table, order), *_ORDER[:1]]
    return order


_ORDER: list[tuple[KernelTable, np.ndarray]] = []  # the last two tables' orders: the fusion and layout rules share one


def start_order(table: KernelTable) -> np.ndarray:
    """Row indices by start time, ties in row order (`np.argsort(start_ns, kind="stable")`), made once a table."""
    for seen, order in _BY_START:
        if seen is table:
            return order
    start = table.start_ns
    order = np.arange(table.n) if table.n < 2 or bool((start[1:] >= start[:-1]).all()) else \
        np.argsort(start, kind="stable")
    _BY_START[:] = [(table, order), *_BY_START[:1]]
    return order


_BY_START: list[tuple[KernelTable, np.ndarray]] = []  # stream order and the host-bound rule share one


RIDGE_FLOP_PER_BYTE = 200.0  # ~ 320 TFLOP/s fp16 over ~1.6 TB/s HBM on an Atlas A2; CPUs sit lower, GPUs alike


def parse_shapes(cell: str) -> list[tuple[int, ...]]:
    """`'"32,3,224,224;64"'` -> [(32, 3, 224, 224), (64,)]; empty for N/A."""
    out = []
    for part in cell.replace('"', "").split(";"):
        part = part.strip().strip("[]")
        if not part:
            continue
        try:
            out.append(tuple(int(x) for x in part.replace(" ", "").split(",") if x != ""))
        except ValueError:
            return []
    return out


def intensity(op_type: str, in_shapes: str, in_dtypes: str, out_shapes: str, out_dtypes: str) -> float:
    """Estimated FLOPs per byte moved for one kernel from its shapes and dtypes; NaN when they are unknown."""
    ins, outs = parse_shapes(in_shapes), parse_shapes(out_shapes)
    if not outs:
        return math.nan
    def nbytes(shapes: list[tuple[int, ...]], dtypes: str) -> int:
        kinds = [d.strip().upper() for d in dtypes.split(";")] if dtypes else []
        return sum(math.prod(s) * DTYPE_BYTES.get(kinds[i] if i < len(kinds) else "", 4) for i, s in enumerate(shapes))
    moved = nbytes(ins, in_dtypes) + nbytes(outs, out_dtypes)
    out_n = math.prod(outs[0])
    low = op_type.lower()
    if ("matmul" in low or low in ("mm", "bmm", "addmm", "linear")) and ins and ins[0]:
        flops = 2.0 * out_n * ins[0][-1]
    elif "conv" in low and len(ins) > 1 and ins[1]:
        w = ins[1]
        cout = max(outs[0][1] if len(outs[0]) > 1 else 1, 1)
        if len(outs[0]) == 5:
            cout = outs[0][1] * outs[0][4]
        flops = 2.0 * out_n * math.prod(w) / max(cout, 1)
    else:
        flops = float(out_n)
    return flops / moved if moved else math.nan


def roofline(table: KernelTable, rows: np.ndarray) -> np.ndarray:
    """`intensity` of the given rows (computed once per distinct type/shape/dtype combination)."""
    cols = ("type", "input_shapes", "input_dtypes", "output_shapes", "output_dtypes")
    sub = table.take(rows)  # a column not read yet is decoded for these rows only
    uniq, inverse = unique_rows([sub.text[c] for c in cols])
    vals = np.array([intensity(*(sub.text[c].values[k] for c, k in zip(cols, row))) for row in uniq], np.float64)
    return vals[inverse.reshape(-1)]


@dataclass(frozen=True, slots=True)
class DiffRow:
    """One op type or module before and after: time, calls, and the change (positive = slower)."""

    key: str
    before_us: float
    after_us: float
    before_count: int
    after_count: int

    @property
    def delta_us(self) -> float:
        return self.after_us - self.before_us

    @property
    def ratio(self) -> float:
        return self.after_us / self.before_us if self.before_us else math.inf


def diff(before: KernelTable, after: KernelTable, by: str = "type", *,
         per_step: tuple[int, int] = (1, 1)) -> list[DiffRow]:
    """Per value of `by`, time in the baseline and in the new profile, regressions (largest increase) first.

    `per_step` divides each side's totals by its number of steps, so a 10-step profile compares
    with a 5-step one.
    """
    b = {g.key: g for g in summarize(before, by)}
    a = {g.key: g for g in summarize(after, by)}
    sb, sa = max(per_step[0], 1), max(per_step[1], 1)
    rows = [DiffRow(k, (b[k].total_us / sb) if k in b else 0.0, (a[k].total_us / sa) if k in a else 0.0,
                    b[k].count if k in b else 0, a[k].count if k in a else 0) for k in dict.fromkeys([*a, *b])]
    rows.sort(key=lambda r: (-r.delta_us, r.key))
    return rows


def distinct(a: np.ndarray) -> np.ndarray:
    """`np.unique(a)` of integers, by counting when their range is small (a million step ids or codes: no sort)."""
    if len(a) == 0:
        return np.unique(a)
    lo, hi = int(a.min()), int(a.max())
    if hi - lo > 2 * len(a) + 4096:
        return np.unique(a)
    return (np.flatnonzero(np.bincount(a - lo, minlength=hi - lo + 1)) + lo).astype(a.dtype)


def step_count(table: KernelTable, steps: Sequence[StepTime] = ()) -> int:
    """How many steps a profile covers (Step Id column, else step_trace rows, else 1)."""
    s = table.ints["step"]
    known = distinct(s[s >= 0]) if table.n else np.zeros(0)
    return max(len(known), len({st.step for st in steps}), 1)


@dataclass(frozen=True, slots=True)
class RankTime:
    """A rank's mean step, split the way step_trace_time.csv splits it (µs)."""

    rank: int
    steps: int
    total: float
    computing: float
    communication: float
    free: float


@dataclass(frozen=True, slots=True)
class ClusterSummary:
    """Per-rank step times, the slowest rank, and the stage that makes it slow."""

    ranks: tuple[RankTime, ...]
    slow_rank: int
    slow_stage: str
    excess_us: float

    @property
    def spread(self) -> float:
        totals = [r.total for r in self.ranks]
        return (max(totals) - min(totals)) / max(totals) if totals and max(totals) else 0.0


STAGES = ("computing", "communication", "free")
EVEN_SHARE = 0.01  # a rank whose own time (computing + free) is within 1% of a step of the median is not slow


def cluster_summary(steps: Sequence[StepTime]) -> ClusterSummary:
    """Who holds the cluster back, and in which stage.

    Collectives make every rank's step equally long, so the wall time does not tell the slow rank:
    the others wait for it in communication. The slow rank is the one with the most time of its own
    (computing + free, i.e. compute and host-side idle); its slow stage is the one of the two furthest
    above the median rank. When no rank's own time is more than `EVEN_SHARE` of a step above the
    median, there is no slow rank (`slow_rank` -1).
    """
    by_rank: dict[int, list[StepTime]] = {}
    for s in steps:
        by_rank.setdefault(s.rank, []).append(s)
    ranks = []
    for rank, rows in sorted(by_rank.items()):
        n = len(rows)
        ranks.append(RankTime(rank, n, sum(r.total for r in rows) / n, sum(r.computing for r in rows) / n,
                              sum(r.communication_not_overlapped for r in rows) / n, sum(r.free for r in rows) / n))
    if not ranks:
        return ClusterSummary((), -1, "", 0.0)
    slow = max(ranks, key=lambda r: (r.computing + r.free, -r.rank))
    medians = {st: float(np.median([getattr(r, st) for r in ranks])) for st in STAGES}
    own = float(np.median([r.computing + r.free for r in ranks]))
    if slow.computing + slow.free - own <= EVEN_SHARE * float(np.median([r.total for r in ranks])):
        return ClusterSummary(tuple(ranks), -1, "", 0.0)  # no rank holds the others back
    excess = {st: getattr(slow, st) - medians[st] for st in ("computing", "free")}
    stage = max(excess, key=lambda st: excess[st])
    return ClusterSummary(tuple(ranks), slow.rank, stage, float(excess[stage]))


@dataclass(frozen=True, slots=True)
class ProfileSummary:
    """What a profile reports first, computed once: totals, the groups by category, type and module, the cluster."""

    kernels: int
    total_us: float
    steps: int
    by_category: tuple[Group, ...]
    by_type: tuple[Group, ...]
    by_module: tuple[Group, ...]  # empty when no kernel carries a module
    cluster: ClusterSummary | None  # only for a cluster (several ranks' step traces)


def profile_summary(table: KernelTable, steps: Sequence[StepTime] = (), *, cluster: bool = False) -> ProfileSummary:
    """The one summary the CLI's tables, the JSON report and the app's profile view all render."""
    return ProfileSummary(table.n, table.total_us(), step_count(table, steps), tuple(summarize(table, "category")),
                          tuple(summarize(table, "type")),
                          tuple(summarize(table, "module")) if any(table.names("module")) else (),
                          cluster_summary(steps) if cluster else None)


def attribute(names: Sequence[str], node_ids: Sequence[str], op_types: Mapping[str, str]) -> dict[str, str]:
    """Kernel/op name -> graph node id, by exact id, then normalised name against ids and op types."""
    ids = set(node_ids)
    norm_ids: dict[str, str] = {}
    for nid in node_ids:
        norm_ids.setdefault(normalize(nid), nid)
    by_type: dict[str, str] = {}
    for nid, t in op_types.items():
        by_type.setdefault(normalize(t), nid)
    out = {}
    for name in names:
        k = normalize(name)
        if name in ids:
            out[name] = name
            continue
        last = normalize(name.rstrip("_0123456789").rsplit("_", 1)[-1])  # aclnnInplaceRelu_Relu_Relu -> relu
        for key in (k, OP_ALIASES.get(k, ""), last, OP_ALIASES.get(last, "")):
            if not key:
                continue
            if key in norm_ids:
                out[name] = norm_ids[key]
                break
            if key in by_type:
                out[name] = by_type[key]
                break
    return out


# Ascend operator types -> the aten op a captured graph calls them (normalised)
OP_ALIASES = {"conv2d": "convolution", "conv3d": "convolution", "conv2dv": "convolution", "matmul": "mm",
              "matmulv": "mm", "batchmatmul": "bmm", "batchmatmulv": "bmm", "layernorm": "nativelayernorm",
              "softmaxv": "softmax", "gelu": "gelu", "fastgelu": "gelu", "add": "add", "addv": "add",
              "realdiv": "div", "transdata": "clone", "transposed": "permute", "tensormove": "copy"}


def normalize(name: str) -> str:
    """`aten::addmm` / `aten.addmm.default` / `Addmm_3` -> `addmm`: what two tools' names for one op share."""
    s = name.rsplit("/", 1)[-1].lower()
    for prefix in ("aten::", "aten.", "npu::", "aclnn", "torch."):
        if s.startswith(prefix):
            s = s[len(prefix):]
    s = s.split(".default")[0].split(".tensor")[0]
    s = re.sub(r"[._]\d+$", "", s)
    return re.sub(r"[^a-z0-9]", "", s).rstrip("0123456789") or s
