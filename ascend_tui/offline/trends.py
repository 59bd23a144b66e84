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


@dataclass(frozen=True, slots=True)
class PointSummary:
    """One line of the step/rank picker: the point, whether it is the one on screen, and what its statistics say."""

    point: DumpPoint
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


def _cluster(inv: Investigation) -> dict | None:
    """The cluster summary a cluster profile carries (`Profile.extra["cluster"]`), else None."""
    extra = inv.profile.extra if inv.profile is not None else {}
    found = extra.get("cluster") if isinstance(extra, dict) else None
    return found if isinstance(found, dict) else None


def _rank_lines(inv: Investigation, cluster: dict, points: Sequence[DumpPoint]) -> list[PointSummary]:
    """A cluster's picker lines from the step times it already read: mean step, its split, the slow rank marked."""
    from ascend_tui.fmt import duration_us

    by_rank = {int(r["rank"]): r for r in cluster.get("ranks", ()) if isinstance(r, dict)}
    slow, shown = cluster.get("slow_rank"), cluster.get("shown_rank")
    out = []
    for p in points:
        r = by_rank.get(int(p.rank or 0))
        if r is None:
            text = "no step times"
        else:
            text = (f"mean step {duration_us(float(r['total']))} over {r.get('steps')} · computing "
                    f"{duration_us(float(r['computing']))} · communication {duration_us(float(r['communication']))}"
                    f" · free {duration_us(float(r['free']))}")  # RankTime: means per step already
        if p.rank == slow:
            text = "slow rank · " + text
        out.append(PointSummary(p, p.rank == shown, text, p.rank == slow))
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


def summaries(inv: Investigation, points: Sequence[DumpPoint], report: Report | None = None,
              cancel: threading.Event | None = None) -> list[PointSummary]:
    """A picker line per point, reading each point's statistics (a point that cannot be read says why)."""
    cluster = _cluster(inv)
    if cluster is not None:
        return _rank_lines(inv, cluster, points)
    here = current_point(inv)
    out: list[PointSummary] = []
    for i, p in enumerate(points):
        check_cancel(cancel)
        if report is not None:
            report(f"reading {p.label}", i, len(points))
        try:
            s = statistics(p)
            out.append(PointSummary(p, p.label == here, summary_line(s), s.first_nonfinite is not None))
        except InputError as exc:
            out.append(PointSummary(p, p.label == here, f"unreadable: {exc}", True))
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
    out = [_series("non-finite module outputs", "nonfinite", steps, [float(s.nonfinite.sum()) for s in stats]),
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
