"""Advice from a profile: msprof-analyze's core rules plus the ones it lacks, as `check: "profile"` findings.

Rules (thresholds from msprof-analyze 26.2.0 where it has them): `hotspot` and `hot_op` (the types and
single ops that take the time), `dynamic_shape` (operators compiled online), `layout_conversion` (TransData / permute+contiguous / format casts, naming the modules or
neighbouring ops that cause them — msprof-analyze has no such rule), `unbound` (kernels over 20 µs
whose busiest pipe is under 80%), `aicpu` (AI CPU kernels over 20 µs, and the dtypes that send them
there), `block_dim` (block dim not a multiple of the core count), `fusion` (sequences a fused
kernel replaces), `host_bound` (device idle waiting for the host), `sync` (frequent host-device
synchronisation), `memcpy` (host-device copies) and `communication` (exposed collective time).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ascend_tui import fmt
from ascend_tui.checks.profile import BOUND_RATIO, categories, distinct, pmu_max, start_order, stream_order, summarize
from ascend_tui.checks.affinity_api import affinity
from ascend_tui.evidence import Finding
from ascend_tui.graph.profile import NO_INT, Codes, KernelTable, Profile

MIN_TASK_US = 20.0  # msprof-analyze's _MIN_TASK_DURATION for the bound and AI CPU checkers
HOTSPOT_SHARE = 0.05
LAYOUT_SHARE = 0.05
IDLE_SHARE = 0.10
SYNC_PER_STEP = 10
FUSIONS: tuple[tuple[str, str, str], ...] = (
    # (name, regex over the ';'-joined op types, hint). Every kernel type a match touches must hold one of its
    # pattern's words (the letter-and-digit runs outside escapes) or be empty: `_matches` skips the others.
    ("MatMul + bias + activation", r"(?:BatchMatMul|MatMul)\w*;(?:BiasAdd|Add|AddV2);(?:Relu|Gelu|FastGelu\w*|Swish|Silu|"
     r"Sigmoid|Tanh|GeluV2)", "use a fused linear (torch_npu.npu_linear / aclnnMatmulAddRelu style) or let the "
     "graph compiler fuse it (torch.compile / torchair)"),
    ("MatMul + bias", r"(?:BatchMatMul|MatMul)\w*;(?:BiasAdd|Add|AddV2)(?=;|$)", "pass the bias to the matmul "
     "(F.linear with bias, torch.addmm) instead of adding it afterwards"),
    ("Conv + bias + activation", r"Conv2D\w*;(?:BiasAdd|Add|AddV2);(?:Relu|Relu6|LeakyRelu|Swish|Silu)",
     "fold the bias and activation into the convolution (conv with bias=True, graph-mode fusion)"),
    ("RMSNorm", r"(?:Pow|Square);ReduceMean\w*;(?:Add|AddV2|Adds);(?:Rsqrt|Sqrt);(?:Mul|RealDiv)(?:;Mul)?",
     "use torch_npu.npu_rms_norm"),
    ("attention softmax", r"BatchMatMul\w*;(?:Mul|Muls|RealDiv|Div)?;?(?:Add;)?Softmax\w*;(?:Dropout\w*;)?BatchMatMul",
     "use fused attention (torch_npu.npu_fusion_attention / F.scaled_dot_product_attention)"),
    ("LayerNorm", r"ReduceMean\w*;Sub;(?:Pow|Square);ReduceMean\w*;(?:Add|Adds);(?:Sqrt|Rsqrt)",
     "use nn.LayerNorm (one LayerNorm kernel) instead of composing it"),
)
SYNC_NAMES = re.compile(r"synchroniz|aten::item$|_local_scalar_dense|cudaStreamSynchronize|cudaDeviceSynchronize",
                        re.I)


@dataclass(frozen=True, slots=True)
class Cores:
    """Core counts the block-dim rule divides by (Atlas A2 training cards: 24 AI cube cores, 48 vector)."""

    aic: int = 24
    aiv: int = 48


def advise(profile: Profile, nodes: Mapping[str, str] | None = None, cores: Cores = Cores()) -> list[Finding]:
    """Every finding the rules make on `profile`; `nodes` maps a kernel name to its graph node id."""
    t = profile.kernels
    nodes = nodes or {}
    out: list[Finding] = []
    if t.n:
        total = t.total_us() or 1.0
        cats = categories(t)
        out += _hotspots(t, nodes, total)
        out += _layout(t, cats, nodes, total)
        out += _unbound(t, nodes)
        out += _aicpu(t, nodes)
        out += _block_dim(t, nodes, cores, total)
        out += _fusion(t, nodes, total)
        out += _memcpy(t, cats, nodes, total)
        out += _dynamic(t, nodes, total)
    out += _host_bound(profile, nodes)
    out += _sync(profile)
    out += affinity(profile.extra, ((h.name, h.count) for h in profile.host_ops))
    return out


def _finding(kind: str, severity: str, t: KernelTable, rows: np.ndarray, nodes: Mapping[str, str], message: str,
             hint: str | None = None, **metrics: object) -> Finding:
    """A finding on the longest of `rows` (its node is that kernel's graph node)."""
    top = int(rows[np.argmax(t.dur_us[rows])]) if len(rows) else -1
    name = t.label("name", top) if top >= 0 else ""
    node = (t.label("node", top) if top >= 0 else "") or nodes.get(name, name)
    return Finding("profile", kind, severity, node, t.label("type", top) if top >= 0 else "",
                   t.label("module", top) if top >= 0 else "", -1, message, metrics=metrics, hint=hint)


def _rows_of(t: KernelTable, column: str, value: str) -> np.ndarray:
    code = t.text[column].code(value)
    return np.flatnonzero(t.text[column].codes == code)


def _hotspots(t: KernelTable, nodes: Mapping[str, str], total: float) -> list[Finding]:
    """The op types that take the most kernel time; communication has its own finding and is left out."""
    cats = categories(t)
    comm = cats.code("communication")
    rows = np.flatnonzero(cats.codes != comm) if comm >= 0 else np.arange(t.n)
    out = []
    for g in summarize(t, "type", rows)[:5]:
        if g.share < HOTSPOT_SHARE:
            break
        bound = f", {g.bound}-bound" if g.bound and g.bound not in ("unbound",) else ""
        out.append(_finding("hotspot", "info", t, _rows_of(t, "type", g.key), nodes,
                            f"{g.key} takes {fmt.percent(g.share)} of kernel time (communication aside): "
                            f"{fmt.plural(g.count, 'call')}, {fmt.duration_us(g.total_us)}, mean "
                            f"{fmt.duration_us(g.avg_us)} ({g.category}{bound})",
                            share=g.share, total_us=g.total_us, count=g.count))
    for g in summarize(t, "name", rows)[:10]:  # single ops that are hot on their own light the graph's T badge
        if g.share < HOTSPOT_SHARE:
            break
        top = _rows_of(t, "name", g.key)
        out.append(_finding("hot_op", "info", t, top, nodes,
                            f"{g.key} alone takes {fmt.percent(g.share)} of kernel time ({fmt.plural(g.count, 'call')}, "
                            f"{fmt.duration_us(g.total_us)})", share=g.share, total_us=g.total_us, count=g.count))
    return out


def _layout(t: KernelTable, cats, nodes: Mapping[str, str], total: float) -> list[Finding]:
    code = cats.code("layout")
    rows = np.flatnonzero(cats.codes == code) if code >= 0 else np.zeros(0, np.int64)
    time = float(t.dur_us[rows].sum())
    if not len(rows) or _step_median(t, rows, time / total) < LAYOUT_SHARE:  # one noisy step does not decide it
        return []
    types = _summed(t.text["type"], rows, t.dur_us[rows])
    causes = _causes(t, rows)
    where = ", ".join(f"{k} ({fmt.percent(v / time)})" for k, v in causes[:4])
    return [_finding("layout_conversion", "warning", t, rows, nodes,
                     f"layout conversions ({', '.join(k for k, _ in types.most_common(3))}) take "
                     f"{fmt.percent(time / total)} of kernel time in {fmt.plural(len(rows), 'kernel')}; "
                     f"caused by {where}",
                     "keep one memory layout through the model: drop permute()/contiguous() pairs around "
                     "normalisations, use channels_last throughout, or let the NPU keep its private format",
                     share=time / total, total_us=time, count=len(rows),
                     causes=[{"cause": k, "us": v} for k, v in causes[:10]])]


def _step_median(t: KernelTable, rows: np.ndarray, overall: float) -> float:
    """The median over profiled steps of `rows`' share of each step's kernel time (`overall` without steps)."""
    steps = t.ints["step"]
    keys = distinct(steps[steps >= 0])
    if len(keys) < 2:
        return overall
    mine = np.bincount(np.searchsorted(keys, steps[rows][steps[rows] >= 0]), weights=t.dur_us[rows][steps[rows] >= 0],
                       minlength=len(keys))
    every = np.bincount(np.searchsorted(keys, steps[steps >= 0]), weights=t.dur_us[steps >= 0], minlength=len(keys))
    return float(np.median(mine / np.where(every > 0, every, 1.0)))


def _causes(t: KernelTable, rows: np.ndarray) -> list[tuple[str, float]]:
    """Who makes the conversions: their modules when known, else the op each conversion feeds (same stream)."""
    acc: Counter[str] = Counter()
    modules = t.text["module"]
    if any(modules.values[modules.codes[r]] for r in rows[:1000]):
        return _summed(modules, rows, t.dur_us[rows], "(no module)").most_common()
    stream = t.ints["stream"]
    order = stream_order(t)
    pos = np.empty(t.n, np.int64)
    pos[order] = np.arange(t.n)
    cats = categories(t)
    layout = cats.code("layout")
    # plain lists: this walks every conversion row, and numpy scalars cost ten times a list item here
    order_l, pos_l, cat_l, stream_l = order.tolist(), pos.tolist(), cats.codes.tolist(), stream.tolist()
    types, type_codes, dur = t.text["type"].values, t.text["type"].codes.tolist(), t.dur_us.tolist()
    for r in rows.tolist():
        p = pos_l[r] + 1
        s = stream_l[r]
        while p < t.n and cat_l[order_l[p]] == layout and stream_l[order_l[p]] == s:
            p += 1
        nxt = types[type_codes[order_l[p]]] if p < t.n and stream_l[order_l[p]] == s else "end"
        acc[f"input of {nxt}"] += dur[r]
    return acc.most_common()


def _summed(col: Codes, rows: np.ndarray, weights: np.ndarray, empty: str = "") -> Counter[str]:
    """Sum of `weights` per text of `col` over `rows`, keys in order of first appearance (as a row-by-row sum)."""
    codes = col.codes[rows]
    out: Counter[str] = Counter()
    if not len(codes):
        return out
    sums = np.bincount(codes, weights=np.asarray(weights, np.float64), minlength=len(col.values))
    uniq, first = np.unique(codes, return_index=True)
    for c in uniq[np.argsort(first, kind="stable")].tolist():
        out[col.values[c] or empty] += float(sums[c])
    return out


def _pmu_max(t: KernelTable) -> tuple[np.ndarray, np.ndarray]:
    best, _, have = pmu_max(t)
    return best, have


def _per_type(t: KernelTable, rows: np.ndarray) -> list[tuple[str, np.ndarray]]:
    codes = t.text["type"].codes[rows]
    out = [(t.text["type"].values[c], rows[codes == c]) for c in distinct(codes).tolist()]
    out.sort(key=lambda kv: -float(t.dur_us[kv[1]].sum()))
    return out


def _unbound(t: KernelTable, nodes: Mapping[str, str]) -> list[Finding]:
    best, have = _pmu_max(t)
    rows = np.flatnonzero(have & (best <= BOUND_RATIO) & (t.dur_us > MIN_TASK_US))
    out = []
    for typ, rs in _per_type(t, rows)[:5]:
        out.append(_finding("unbound", "warning", t, rs, nodes,
                            f"{fmt.plural(len(rs), typ + ' kernel')} over {MIN_TASK_US:.0f} us use no pipe over "
                            f"{fmt.percent(BOUND_RATIO, 0)} (busiest {fmt.percent(float(best[rs].max()), 0)}): "
                            f"{fmt.duration_us(float(t.dur_us[rs].sum()))} lost to latency or too few cores",
                            "tune the operator (AOE), check its block dim and shapes (multiples of 16)",
                            total_us=float(t.dur_us[rs].sum()), count=len(rs), max_ratio=float(best[rs].max())))
    return out


def _aicpu(t: KernelTable, nodes: Mapping[str, str]) -> list[Finding]:
    code = t.text["core"].code("AI_CPU")
    if code < 0:
        return []
    rows = np.flatnonzero((t.text["core"].codes == code) & (t.dur_us > MIN_TASK_US))
    out = []
    for typ, rs in _per_type(t, rows):
        some = t.text.rows("input_dtypes", rs[:200])  # these rows only: the column is not read whole
        dtypes = {d.strip() for c in set(some.codes.tolist()) for d in some.values[c].split(";") if d.strip()}
        bad = sorted(dtypes & {"DOUBLE", "INT64", "UINT64", "COMPLEX64", "COMPLEX128"})
        note = f"; inputs in {', '.join(bad)} often send it there" if bad else ""
        out.append(_finding("aicpu", "warning", t, rs, nodes,
                            f"{typ} runs on the AI CPU: {fmt.plural(len(rs), 'kernel')} over {MIN_TASK_US:.0f} us, "
                            f"{fmt.duration_us(float(t.dur_us[rs].sum()))}{note}",
                            "convert the inputs to float32/int32 or replace the op with one the AI cores run",
                            total_us=float(t.dur_us[rs].sum()), count=len(rs)))
    return out


def _block_dim(t: KernelTable, nodes: Mapping[str, str], cores: Cores, total: float) -> list[Finding]:
    core = t.text["core"]
    n_of = {"AI_CORE": cores.aic, "MIX_AIC": cores.aic, "AI_VECTOR_CORE": cores.aiv}
    bd = np.full(t.n, NO_INT, np.int64)
    on = np.flatnonzero(np.isin(core.codes, [core.code(name) for name in n_of]))
    if len(on):  # block dims of the AI-core rows only (the other rows' are never read)
        bd[on] = t.ints["block_dim"] if len(on) == t.n else t.ints.rows("block_dim", on)
    bad = np.zeros(t.n, bool)
    for name, n in n_of.items():
        c = core.code(name)
        if c >= 0:
            sel = (core.codes == c) & (bd > 0) & (bd % n != 0)
            if name == "MIX_AIC" and sel.any():  # a mix kernel whose vector blocks divide evenly is fine
                rows = np.flatnonzero(sel)
                mix = t.ints.rows("mix_block_dim", rows)
                sel[rows[(mix > 0) & (mix % cores.aiv == 0)]] = False
            bad |= sel
    out = []
    for typ, rs in _per_type(t, np.flatnonzero(bad))[:5]:
        time = float(t.dur_us[rs].sum())
        if time / total < 0.01:
            continue
        dims = sorted({int(x) for x in bd[rs]})[:6]
        out.append(_finding("block_dim", "info", t, rs, nodes,
                            f"{typ} launches on {', '.join(map(str, dims))} blocks, not a multiple of "
                            f"{cores.aic} AI cores / {cores.aiv} vector cores: the last wave leaves cores idle "
                            f"({fmt.duration_us(time)} in {fmt.plural(len(rs), 'kernel')})",
                            "reshape or tile so the block count divides by the core count (or tune with AOE)",
                            total_us=time, count=len(rs)))
    return out


def _fusion(t: KernelTable, nodes: Mapping[str, str], total: float) -> list[Finding]:
    order = stream_order(t)
    typ = t.text["type"]
    codes = typ.codes[order]
    out = []
    taken = np.zeros(len(codes), bool)
    dur = None
    for name, pattern, hint in FUSIONS:
        first, stop = _matches(pattern, typ.values, codes)
        if not len(first):
            continue
        before = np.concatenate([[0], np.cumsum(taken)])
        earlier = (before[np.maximum(stop, first)] - before[first] > 0).tolist()  # rows an earlier rule took
        kept: list[tuple[int, int]] = []
        last = -1
        for a, b, clash in zip(first.tolist(), stop.tolist(), earlier):
            if b > a and (clash or a < last):  # matches come in order: only the last kept one can overlap
                continue
            kept.append((a, b))
            last = max(last, b)
        for a, b in kept:
            taken[a:b] = True
        hits = [order[a:b] for a, b in kept]
        if not hits:
            continue
        rows = np.concatenate(hits)
        # what fusing saves: the kernels after the first of each sequence, summed in order as plain floats
        # (only those rows become Python floats: a list of every row would hold 32 MB a million rows)
        if dur is None:
            dur = t.dur_us[order]
        after = np.array([b - a - 1 for a, b in kept], np.int64)
        firsts = np.array([a + 1 for a, _ in kept], np.int64)
        at = np.repeat(firsts - np.cumsum(after) + after, after) + np.arange(int(after.sum()))
        picked = dur[at].tolist()
        saved, k = 0, 0
        for m in after.tolist():
            saved += sum(picked[k:k + m])
            k += m
        saved = float(saved)
        out.append(_finding("fusion", "warning" if saved / total >= 0.02 else "info", t, rows, nodes,
                            f"{name}: {fmt.plural(len(hits), 'sequence')} of {len(hits[0])} kernels could be one "
                            f"(up to {fmt.duration_us(saved)}, {fmt.percent(saved / total)} of kernel time)",
                            hint, count=len(hits), saved_us=saved))
    return out


def _matches(pattern: str, values: list[str], codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row, row after the last) of each `re.finditer` match of `pattern` over the ';'-joined `values[codes]`.

    A row whose type holds none of the pattern's words takes no part in a match, so each run of
    such rows is searched as one `#` (no word, no `;`): the text shrinks to the rows that matter,
    decided once per distinct type. A match that touches a `#` anyway is searched again in full.
    """
    words = set(re.findall(r"\w+", re.sub(r"\\.|\(\?[:=!<]*", " ", pattern)))
    relevant = np.fromiter((not v or any(w in v for w in words) for v in values), bool, len(values))
    keep = relevant[codes] if len(codes) else np.zeros(0, bool)
    if not keep.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    after_skipped = np.concatenate([[False], ~keep[:-1]])
    tokens = np.flatnonzero(keep | ~after_skipped)  # the kept rows, and the first row of each skipped run (its `#`)
    label = np.where(keep[tokens], codes[tokens], len(values))
    spans, starts = _spans(pattern, [*values, "#"], label)
    if not len(spans):
        return spans[:, 0], spans[:, 1]
    first = np.searchsorted(starts, spans[:, 0], side="right") - 1
    stop = np.searchsorted(starts, spans[:, 1], side="left")
    skipped = np.concatenate([[0], np.cumsum(label == len(values))])
    if (skipped[stop] - skipped[first]).any():  # a match through a skipped run: the pattern breaks the rule above
        spans, starts = _spans(pattern, values, codes)
        return np.searchsorted(starts, spans[:, 0], side="right") - 1, np.searchsorted(starts, spans[:, 1], "left")
    return tokens[first], tokens[stop - 1] + 1


def _spans(pattern: str, values: list[str], codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The match spans of `pattern` over the ';'-joined `values[codes]`, and where each row starts in that text."""
    lengths = np.fromiter((len(v) + 1 for v in values), np.int64, len(values))
    starts = np.concatenate([[0], np.cumsum(lengths[codes])])
    text = ";".join(np.array(values, dtype=object)[codes].tolist())
    return np.array([m.span() for m in re.finditer(pattern, text)], np.int64).reshape(-1, 2), starts


def _memcpy(t: KernelTable, cats, nodes: Mapping[str, str], total: float) -> list[Finding]:
    code = cats.code("memcpy")
    rows = np.flatnonzero(cats.codes == code) if code >= 0 else np.zeros(0, np.int64)
    time = float(t.dur_us[rows].sum())
    if time / total < 0.05:
        return []
    return [_finding("memcpy", "warning", t, rows, nodes,
                     f"memory copies take {fmt.percent(time / total)} of kernel time "
                     f"({fmt.plural(len(rows), 'copy', 'copies')}, {fmt.duration_us(time)})",
                     "keep tensors on the device; move inputs once with non_blocking=True from pinned memory",
                     share=time / total, total_us=time)]


def _dynamic(t: KernelTable, nodes: Mapping[str, str], total: float) -> list[Finding]:
    """msprof-analyze's dynamic-shape rule: kernels compiled for dynamic shapes (OP State `dynamic`) recompile online."""
    code = t.text["state"].code("dynamic")
    if code < 0:
        return []
    rows = np.flatnonzero(t.text["state"].codes == code)
    time = float(t.dur_us[rows].sum())
    return [_finding("dynamic_shape", "info", t, rows, nodes,
                     f"{fmt.plural(len(rows), 'kernel')} ({fmt.percent(time / total)} of kernel time) ran as "
                     "dynamic-shape operators, compiled online",
                     "with static shapes, turn online compilation off: torch_npu.npu.set_compile_mode(jit_compile=False)"
                     " and torch_npu.npu.config.allow_internal_format = False",
                     count=len(rows), share=time / total)]


def _host_bound(profile: Profile, nodes: Mapping[str, str]) -> list[Finding]:
    steps = [s for s in profile.steps if s.total > 0]
    if steps:
        free = sum(s.free for s in steps)
        wall = sum(s.total for s in steps)
        comm = sum(s.communication_not_overlapped for s in steps)
        out = []
        if free / wall >= IDLE_SHARE:
            out.append(Finding("profile", "host_bound", "warning", "", "", "", -1,
                               f"the device sits idle {fmt.percent(free / wall)} of each step "
                               f"({fmt.duration_us(free / len(steps))} a step): it waits for the host",
                               metrics={"free_share": free / wall, "free_us": free / len(steps)},
                               hint="look at the host timeline for dispatch gaps, dataloader waits and "
                                    "synchronisations; larger batches or graph mode amortise dispatch"))
        if comm / wall >= 0.2:
            out.append(Finding("profile", "communication", "warning", "", "", "", -1,
                               f"exposed communication takes {fmt.percent(comm / wall)} of each step",
                               metrics={"share": comm / wall},
                               hint="overlap collectives with compute (bucketed allreduce, async p2p) or "
                                    "shrink what is sent"))
        return out
    t = profile.kernels
    if t.n < 2 or t.text["core"].values == ["CPU"]:
        return []  # on the CPU the gaps between ops are the same thread's Python: nothing waits on the host
    ok = t.start_ns != np.iinfo(np.int64).min
    if ok.sum() < 2:
        return []
    every = bool(ok.all())
    s = t.start_ns if every else t.start_ns[ok]
    dur = t.dur_us if every else t.dur_us[ok]
    if not bool((s[1:] >= s[:-1]).all()):  # sorted only when the rows are not in time order yet
        # (the order of rows that start together changes no gap: the table's one start order serves)
        order = start_order(t) if every else np.argsort(s)
        s, dur = s[order], dur[order]
    idle, end = _idle_ns(s, dur)
    wall = float(end - s[0]) or 1.0
    idle = float(idle)
    if idle / wall < IDLE_SHARE * 2:
        return []
    return [Finding("profile", "host_bound", "warning", "", "", "", -1,
                    f"kernels leave the device idle {fmt.percent(idle / wall)} of the profiled time "
                    f"({fmt.duration_us(idle / 1000)} in gaps): the host does not keep it fed",
                    metrics={"free_share": idle / wall},
                    hint="larger batches, fewer small ops, graph mode, or remove host synchronisations")]


def _idle_ns(start: np.ndarray, dur_us: np.ndarray, chunk: int = 1 << 16) -> tuple[int, int]:
    """(ns between kernels with nothing running, the last end) of rows in start order, a chunk of rows at a time
    (a million rows' ends would be 8 MB more at the command's peak)."""
    idle, last = 0, None
    for a in range(0, len(start), chunk):
        b = min(a + chunk, len(start))
        e = np.empty(b - a, np.int64)
        np.multiply(dur_us[a:b], 1000, out=e, casting="unsafe")  # as .astype(np.int64)
        e += start[a:b]
        if last is not None:
            e[0] = max(int(e[0]), last)
        np.maximum.accumulate(e, out=e)
        following = start[a + 1:b + 1]  # the next row's start for each row (none after the last)
        gaps = np.subtract(following, e[:len(following)])
        np.maximum(gaps, 0, out=gaps)
        idle += int(gaps.sum())
        last = int(e[-1])
    return idle, int(last if last is not None else 0)


def _sync(profile: Profile) -> list[Finding]:
    api = profile.extra.get("api_statistic") or []
    syncs = sum(int(r.get("count", 0)) for r in api if SYNC_NAMES.search(str(r.get("name", ""))))
    launches = sum(int(r.get("count", 0)) for r in api if "launch" in str(r.get("name", "")).lower())
    syncs += sum(h.count for h in profile.host_ops if SYNC_NAMES.search(h.name))
    steps = max(len({s.step for s in profile.steps}), 1)
    if syncs < SYNC_PER_STEP * steps and not (launches and syncs / launches >= 0.5 and syncs >= 4):
        return []
    return [Finding("profile", "sync", "warning", "", "", "", -1,
                    f"{fmt.plural(syncs, 'host-device synchronisation')} in {fmt.plural(steps, 'step')}"
                    + (f" against {fmt.count(launches)} kernel launches" if launches else ""),
                    metrics={"synchronisations": syncs, "launches": launches},
                    hint="avoid .item(), .cpu(), printing tensors and data-dependent shapes (nonzero) inside the "
                         "step; unset ASCEND_LAUNCH_BLOCKING / CUDA_LAUNCH_BLOCKING")]


REGRESSION_SHARE = 0.05  # a step this much slower than the baseline fails the comparison


def regressions(rows: list, before_us: float, after_us: float, graph: object | None = None,
                share: float = REGRESSION_SHARE) -> list[Finding]:
    """Findings for a baseline diff (`profile.diff` rows per type, per-step µs): an error when the whole step got
    more than `share` (5%) slower, a warning for each op type that grew by more than that share of the step."""
    def node_of(op_type: str) -> str:
        for n in graph or ():  # type: ignore[attr-defined]
            if n.op_type == op_type:
                return n.id
        return ""

    out = []
    if before_us > 0 and after_us > before_us * (1 + share):
        worst = rows[0] if rows else None
        out.append(Finding("profile", "regression", "error", node_of(worst.key) if worst else "",
                           worst.key if worst else "", "", -1,
                           f"kernel time per step went from {fmt.duration_us(before_us)} to "
                           f"{fmt.duration_us(after_us)} ({fmt.ratio(after_us / before_us)})"
                           + (f"; most of it in {worst.key} (+{fmt.duration_us(worst.delta_us)})" if worst else ""),
                           metrics={"before_us": before_us, "after_us": after_us}))
    for r in rows[:5]:
        if r.delta_us <= max(share * before_us, 1.0):
            break
        out.append(Finding("profile", "regression", "warning", node_of(r.key), r.key, "", -1,
                           f"{r.key}: {fmt.duration_us(r.before_us)} -> {fmt.duration_us(r.after_us)} a step "
                           f"(+{fmt.duration_us(r.delta_us)}, {r.before_count} -> {r.after_count} calls)",
                           metrics={"before_us": r.before_us, "after_us": r.after_us}))
    return out
