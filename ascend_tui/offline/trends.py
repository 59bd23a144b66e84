"""Steps and ranks of the evidence behind an investigation: the points a picker offers, and the per-step series.

An msprobe dump root with step*/rank*/ folders has one point per step x rank; each point's
dump.json is read for statistics only (`readers.msprobe.steps`) and summarised in a line. The
trend series come from wherever the evidence recorded steps: the dump's steps (per-module
max-abs and norm, non-finite outputs, loss, gradient norm, of the rank on screen), the
profiler's step trace (step time, per rank in a cluster), and the light trend `watch()` kept
(`Investigation.sections["trend"]`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from ascend_tui.errors import InputError
from ascend_tui.evidence import StepSeries
from ascend_tui.fmt import magnitude
from ascend_tui.progress import check_cancel
from ascend_tui.readers.msprobe.dump import DumpPoint, dump_points
from ascend_tui.readers.msprobe.steps import PointStatistics, point_statistics

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

TREND_SECTION = "trend"  # `Investigation.sections` key of a trend recorded with the run (watch())
MAX_RANK_SERIES = 8  # a cluster's step time: one series per rank up to this many, then only the slowest
Report = Callable[[str, int, "int | None"], None]


PROFILE_STEP = "profile-step:"  # a `Pick.key` naming one step of the profile on screen, not a folder


@dataclass(frozen=True, slots=True)
class Pick:
    """One entry of the step/rank picker: its label, what choosing it opens (a folder, or `PROFILE_STEP` + a step
    number) and the dump point behind it (None for a profile's step)."""

    label: str
    key: str
    point: DumpPoint | None = None


@dataclass(frozen=True, slots=True)
class PointSummary:
    """One line of the step/rank picker: the entry, whether it is the one on screen, and what its evidence says."""

    pick: Pick
    current: bool
    text: str
    bad: bool


def points_of(inv: Investigation | None) -> list[DumpPoint]:
    """The step x rank folders of the msprobe dump on screen, or the rank folders of a cluster profile ([] for
    anything else or a lone folder)."""
    if inv is None:
        return []
    cluster = _cluster(inv)
    if cluster is not None:
        per_rank = cluster.get("per_rank") or {}
        return [DumpPoint(None, int(r), Path(str(d["folder"]))) for r, d in sorted(per_rank.items(), key=lambda t:
                int(t[0])) if isinstance(d, dict) and d.get("folder")]
    if inv.run.source != "msprobe" or not inv.run.extra.get("dump_root"):
        return []
    try:
        return dump_points(Path(str(inv.run.extra["dump_root"])))
    except InputError:
        return []


def picks_of(inv: Investigation | None) -> list[Pick]:
    """What the picker offers for the investigation on screen: a dump's steps x ranks, a cluster's rank folders, or
    the steps of a profile with several ([] when there is one or none)."""
    if inv is None:
        return []
    recorded = inv.run.extra.get(STEP_LINES)
    if isinstance(recorded, list):  # one step of a profile: the steps of the whole, as the whole listed them
        return [Pick(str(d["label"]), str(d["key"])) for d in recorded if isinstance(d, dict)]
    steps = profile_step_ids(inv)
    if len(steps) >= 2:
        return [Pick(f"step {k}", f"{PROFILE_STEP}{k}") for k in steps]
    return [Pick(p.label, str(p.folder), p) for p in points_of(inv)]


def _cluster(inv: Investigation) -> dict | None:
    """The cluster summary a cluster profile carries (`Profile.extra["cluster"]`), else None."""
    extra = inv.profile.extra if inv.profile is not None else {}
    found = extra.get("cluster") if isinstance(extra, dict) else None
    return found if isinstance(found, dict) else None


def _rank_lines(inv: Investigation, cluster: dict, picks: Sequence[Pick]) -> list[PointSummary]:
    """A cluster's picker lines from the step times it already read: mean step, its split, the slow rank marked."""
    from ascend_tui.fmt import duration_us

    by_rank = {int(r["rank"]): r for r in cluster.get("ranks", ()) if isinstance(r, dict)}
    slow, shown = cluster.get("slow_rank"), cluster.get("shown_rank")
    out = []
    for pick in picks:
        p = pick.point
        rank = p.rank if p is not None else None
        r = by_rank.get(int(rank or 0))
        if r is None:
            text = "no step times"
        else:
            text = (f"mean step {duration_us(float(r['total']))} over {r.get('steps')} · computing "
                    f"{duration_us(float(r['computing']))} · communication {duration_us(float(r['communication']))}"
                    f" · free {duration_us(float(r['free']))}")  # RankTime: means per step already
        if rank == slow:
            text = "slow rank · " + text
        out.append(PointSummary(pick, rank == shown, text, rank == slow))
    return out


def current_point(inv: Investigation) -> str:
    """The label of the point on screen (`step1/rank0`), "" when there is none."""
    return str(inv.run.extra.get("point") or "")


_CACHE: dict[tuple[str, int, int], PointStatistics] = {}
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 4096


def statistics(point: DumpPoint) -> PointStatistics:
    """`point_statistics`, kept while the dump.json is unchanged (the picker and the trend read the same files)."""
    f = point.folder / "dump.json"
    try:
        st = f.stat()
    except OSError as exc:
        raise InputError(f, exc.strerror or str(exc)) from None
    key = (str(f.resolve()), st.st_mtime_ns, st.st_size)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit
    found = point_statistics(point)
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        _CACHE[key] = found
    return found


def summary_line(s: PointStatistics) -> str:
    """`first NaN: Functional.linear.1.forward · max-abs 2.06 · loss 0.869 · grad norm 1.13`."""
    finite = s.max_abs[np.isfinite(s.max_abs)]
    parts = [f"first {s.first_kind or 'NaN/Inf'}: {s.first_nonfinite}" if s.first_nonfinite else "all finite"]
    if finite.size:
        parts.append(f"max-abs {magnitude(float(finite.max()))}")
    if s.loss is not None:
        parts.append(f"loss {magnitude(s.loss)}")
    if s.grad_norm is not None:
        parts.append(f"grad norm {magnitude(s.grad_norm)}")
    if s.skipped:
        parts.append(f"{s.skipped} unreadable")
    return " · ".join(parts)


def summaries(inv: Investigation, picks: Sequence[Pick], report: Report | None = None,
              cancel: threading.Event | None = None) -> list[PointSummary]:
    """A picker line per entry (a dump point's statistics are read; one that cannot be read says why)."""
    recorded = inv.run.extra.get(STEP_LINES)
    if isinstance(recorded, list) or profile_step_ids(inv):
        return _profile_lines(inv, picks)
    cluster = _cluster(inv)
    if cluster is not None:
        return _rank_lines(inv, cluster, picks)
    here = current_point(inv)
    out: list[PointSummary] = []
    for i, pick in enumerate(picks):
        check_cancel(cancel)
        if report is not None:
            report(f"reading {pick.label}", i, len(picks))
        if pick.point is None:
            continue
        try:
            s = statistics(pick.point)
            out.append(PointSummary(pick, pick.label == here, summary_line(s), s.first_nonfinite is not None))
        except InputError as exc:
            out.append(PointSummary(pick, pick.label == here, f"unreadable: {exc}", True))
    return out


def trend_series(inv: Investigation, report: Report | None = None,
                 cancel: threading.Event | None = None) -> tuple[list[StepSeries], list[str]]:
    """Every per-step series the evidence holds, and notes on what could not be read."""
    series: list[StepSeries] = [StepSeries.from_json(d) for d in inv.sections.get(TREND_SECTION, ()) or ()]
    notes: list[str] = []
    points = points_of(inv)
    if points:
        mine = _same_rank(points, current_point(inv))
        if len({p.step for p in mine}) >= 2:
            got, skipped = dump_series(mine, report, cancel)
            series += got
            if skipped:
                notes.append(f"{skipped} of {len(mine)} steps could not be read and are left out")
    series += step_time_series(inv)
    return series, notes


def _same_rank(points: Sequence[DumpPoint], here: str) -> list[DumpPoint]:
    """The points of the rank on screen, one per step."""
    rank = here.rpartition("/")[2] if "/" in here else here
    mine = [p for p in points if p.folder.name == rank] if rank else []
    return mine or [p for p in points if p.folder.name == points[0].folder.name]


def dump_series(points: Sequence[DumpPoint], report: Report | None = None,
                cancel: threading.Event | None = None) -> tuple[list[StepSeries], int]:
    """Per-module max-abs and norm, the count of non-finite outputs, the loss and the gradient norm, by step."""
    stats: list[PointStatistics] = []
    skipped = 0
    for i, p in enumerate(points):
        check_cancel(cancel)
        if report is not None:
            report(f"reading the statistics of {p.label}", i, len(points))
        try:
            stats.append(statistics(p))
        except InputError:
            skipped += 1
    if len(stats) < 2:
        return [], skipped
    steps = [s.point.step if s.point.step is not None else i for i, s in enumerate(stats)]
    names = list(dict.fromkeys(n for s in stats for n in s.names))
    out = [_series("non-finite outputs", "nonfinite", steps, [float(s.nonfinite.sum()) for s in stats]),
           _series("loss", "loss", steps, [s.loss for s in stats]),
           _series("gradient norm", "grad_norm", steps, [s.grad_norm for s in stats])]
    for column, kind in (("max_abs", "max-abs"), ("norm", "norm")):
        for name in names:
            out.append(_series(f"{name or '<model>'} {kind}", column, steps, [_value(s, name, column) for s in stats]))
    return [s for s in out if s is not None], skipped


def _series(name: str, kind: str, steps: list[int], values: list[float | None], unit: str = "") -> StepSeries | None:
    """The steps that have a value (a module that did not run at a step, a step with no loss, are left out)."""
    pairs = [(k, v) for k, v in zip(steps, values) if v is not None]
    if not pairs:
        return None
    return StepSeries(name, kind, tuple(k for k, _ in pairs), tuple(float(v) for _, v in pairs), unit)


def _value(s: PointStatistics, name: str, column: str) -> float | None:
    try:
        return float(getattr(s, column)[s.names.index(name)])
    except ValueError:
        return None


def step_time_series(inv: Investigation) -> list[StepSeries]:
    """Step time (µs) from the profiler's step trace: one series, or one per rank in a cluster (the slowest first)."""
    profile = inv.profile
    if profile is None or not profile.steps:
        return []
    by_rank: dict[int, dict[int, float]] = {}
    for s in profile.steps:
        if s.step >= 0:
            by_rank.setdefault(s.rank, {})[s.step] = s.total
    if not by_rank or max(len(v) for v in by_rank.values()) < 2:
        return []
    if len(by_rank) == 1:
        times = next(iter(by_rank.values()))
        return [StepSeries("step time", "step_time", tuple(sorted(times)), tuple(times[k] for k in sorted(times)),
                           "µs")]
    ranks = sorted(by_rank, key=lambda r: -sum(by_rank[r].values()))[:MAX_RANK_SERIES]
    return [StepSeries(f"step time rank {r}", "step_time", tuple(sorted(by_rank[r])),
                       tuple(by_rank[r][k] for k in sorted(by_rank[r])), "µs") for r in ranks]


# -- the steps of one profile ---------------------------------------------------------------------

STEP_LINES = "step_lines"  # run.extra of one step of a profile: the picker lines of the whole profile
STEP_SOURCE = "step_source"  # ... and the path it was read from


def profile_step_ids(inv: Investigation) -> list[int]:
    """The step numbers of a one-rank profile (its kernels' Step Id, its step trace), when it has several."""
    profile = inv.profile
    if profile is None or _cluster(inv) is not None or STEP_LINES in inv.run.extra:
        return []
    ids = {int(s.step) for s in profile.steps if s.step >= 0}
    if profile.kernels.n and "step" in profile.kernels.ints:
        ids |= {int(k) for k in np.unique(profile.kernels.ints["step"]) if k >= 0}
    return sorted(ids) if len(ids) >= 2 else []


def _profile_lines(inv: Investigation, picks: Sequence[Pick]) -> list[PointSummary]:
    """A profile's steps, each with its time split and kernel count; the step the trend check flags is marked."""
    from ascend_tui.checks.trends import first_anomaly
    from ascend_tui.fmt import duration_us

    recorded = inv.run.extra.get(STEP_LINES)
    here = current_point(inv)
    if isinstance(recorded, list):
        texts = {str(d["label"]): (str(d.get("text", "")), bool(d.get("bad"))) for d in recorded if isinstance(d, dict)}
        return [PointSummary(p, p.label == here, *texts.get(p.label, ("", False))) for p in picks]
    profile = inv.profile
    assert profile is not None
    times = {s.step: s for s in profile.steps}
    counts: dict[int, int] = {}
    if profile.kernels.n and "step" in profile.kernels.ints:
        ks, ns = np.unique(profile.kernels.ints["step"], return_counts=True)
        counts = {int(k): int(n) for k, n in zip(ks, ns)}
    steps = [int(p.key[len(PROFILE_STEP):]) for p in picks]
    timed = [k for k in steps if k in times]
    anomaly = first_anomaly([times[k].total for k in timed], timed) if len(timed) >= 2 else None
    slowest = max(timed, key=lambda k: times[k].total) if timed else None
    out = []
    for pick, k in zip(picks, steps):
        t = times.get(k)
        parts = [f"step time {duration_us(t.total)} · computing {duration_us(t.computing)} · communication "
                 f"{duration_us(t.communication_not_overlapped)} not overlapped · free {duration_us(t.free)}"
                 if t is not None else "no step time"]
        parts.append(f"{counts.get(k, 0):,} kernels")
        if k == slowest and len(timed) > 1:
            parts.append("slowest")
        if anomaly is not None and anomaly.step == k:
            parts.append("first anomalous step")
        flagged = anomaly is not None and anomaly.step == k
        out.append(PointSummary(pick, pick.label == here, " · ".join(parts), flagged))
    return out


def profile_step(inv: Investigation, step: int, lines: Sequence[PointSummary]) -> Investigation:
    """The investigation of one step of a profile: its kernels and step-trace row, the advice re-run on them.

    Per-type and host tables (op_statistic, operator_details) are totals over every step: not kept.
    """
    from dataclasses import replace

    from ascend_tui.offline.profile import profile_investigation

    profile = inv.profile
    if profile is None:
        raise InputError(inv.run.target or "profile", "no profile to take a step of")
    rows = np.flatnonzero(profile.kernels.ints["step"] == step) if profile.kernels.n else np.zeros(0, np.int64)
    one = replace(profile, kernels=profile.kernels.take(rows), steps=tuple(s for s in profile.steps if s.step == step),
                  op_stats=(), host_ops=(), extra={**profile.extra, "step": step})
    out = profile_investigation(one, Path(inv.run.target or "profile"), source=inv.run.source, device=inv.run.device)
    out.run.extra.update({"point": f"step {step}", STEP_SOURCE: inv.run.target,
                          STEP_LINES: [{"label": s.pick.label, "key": s.pick.key, "text": s.text, "bad": s.bad}
                                       for s in lines]})
    out.run.extra.setdefault("notes", []).append(
        f"step {step}, one of {len(lines)} steps: its kernels and step time; the per-type and host tables cover "
        f"every step and are left out (i picks another step)")
    return out


def open_pick(inv: Investigation, key: str, progress: Report | None = None,
              cancel: threading.Event | None = None) -> Investigation:
    """Open a profile step the picker chose (`PROFILE_STEP`+k): from the whole profile on screen, or, when a step is
    on screen, from the profile read again from its path."""
    from ascend_tui.offline.open import open_path

    step = int(key[len(PROFILE_STEP):])
    whole = inv
    if STEP_SOURCE in inv.run.extra:
        whole = open_path(str(inv.run.extra[STEP_SOURCE]), progress, cancel)
    check_cancel(cancel)
    return profile_step(whole, step, summaries(whole, picks_of(whole)))
