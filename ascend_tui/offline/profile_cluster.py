"""Cluster profiles: one profiler output per rank (what `msprof-analyze cluster` reads), or its cluster_step_trace_time.csv.

Each rank's folder is read in a worker (`ascend_tui.pool`: a local process pool, or a dask.distributed
cluster when a scheduler address is given) into a small summary (its steps and time per op type); the main
process then names the slow rank and its slow stage (`checks.profile.cluster_summary`) and keeps
the slow rank's kernel rows so the browser shows where that rank's time goes.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ascend_tui import pool
from ascend_tui.checks.communication import slow_rank
from ascend_tui.checks.profile import cluster_summary, summarize
from ascend_tui.errors import InputError
from ascend_tui.graph.communication import Communication
from ascend_tui.evidence import Finding
from ascend_tui.offline.profile import profile_investigation
from ascend_tui.readers.profiler.csv_tables import read_step_trace
from ascend_tui.readers.base import FunctionReader
from ascend_tui.progress import Progress
from ascend_tui.graph.profile import NO_INT, KernelTable, Profile, StepTime

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

CLUSTER_CSV = "cluster_step_trace_time.csv"
CLUSTER_DB = "cluster_analysis.db"
CLUSTER_OUTPUT = "cluster_analysis_output"


def rank_folders(path: Path) -> list[Path]:
    """The per-rank profiler folders directly under `path` (`*_ascend_pt`, or any holding ASCEND_PROFILER_OUTPUT;
    else msprof's `PROF_*` folders, one a device, as msprof-analyze cluster takes them)."""
    if not path.is_dir():
        return []
    found = sorted(p for p in path.iterdir() if p.is_dir() and
                   (p.name.endswith("_ascend_pt") or (p / "ASCEND_PROFILER_OUTPUT").is_dir()))
    if found or (path / "ASCEND_PROFILER_OUTPUT").is_dir() or path.name.endswith("_ascend_pt"):
        return found  # PROF_* inside one rank's folder are that rank's msprof data, not ranks
    return sorted(p for p in path.iterdir() if p.is_dir() and p.name.startswith("PROF_") and
                  ((p / "mindstudio_profiler_output").is_dir() or any(p.glob("msprof_*.db"))))


def cluster_output(path: Path) -> Path | None:
    """msprof-analyze's step table for `path`: its cluster_step_trace_time.csv (or .gz) or cluster_analysis.db, in
    `path` itself or its cluster_analysis_output/ (a run folder that holds only that output); None when absent."""
    if path.is_file():
        return path if path.name in (CLUSTER_CSV, f"{CLUSTER_CSV}.gz", CLUSTER_DB) else None
    for where in (path, path / CLUSTER_OUTPUT):
        for name in (CLUSTER_CSV, f"{CLUSTER_CSV}.gz", CLUSTER_DB):
            if (where / name).is_file():
                return where / name
    return None


def sniff(path: Path) -> bool:
    """Two or more rank folders, or msprof-analyze's cluster output (a folder, its parent, or the file itself)."""
    if path.is_file():
        return cluster_output(path) is not None
    return len(rank_folders(path)) >= 2 or cluster_output(path) is not None


def read_cluster_db(path: Path) -> list[StepTime]:
    """cluster_analysis.db's ClusterStepTraceTime rows of Type rank (msprof-analyze's export_type=db output)."""
    from ascend_tui.readers.parse import sqlite_ro

    with sqlite_ro.connect(path) as conn:
        if "ClusterStepTraceTime" not in sqlite_ro.tables(conn):
            raise InputError(path, "cluster_analysis.db without a ClusterStepTraceTime table "
                                   "(run msprof-analyze cluster -m all)")
        have = set(sqlite_ro.columns(conn, "ClusterStepTraceTime"))
        names = ("computing", "communication_not_overlapped", "overlapped", "communication", "free", "stage",
                 "bubble", "preparing")
        sel = ", ".join(f"coalesce({n}, 0)" if n in have else "0" for n in names)
        out = []
        for step, kind, index, *vals in conn.execute(f'select step, type, "index", {sel} from ClusterStepTraceTime'):
            if str(kind or "rank").lower() != "rank":
                continue  # per-stage rows
            try:
                out.append(StepTime(int(float(step)) if step not in (None, "") else NO_INT,
                                    *(float(v) for v in vals), rank=int(float(index))))
            except (TypeError, ValueError):
                continue
        return out


def summarize_rank(folder: str) -> dict[str, Any]:
    """One rank's summary (runs in a worker process): its rank id, steps and time per op type."""
    from ascend_tui.readers.profiler.ascend_pt import read_profile

    profile = read_profile(Path(folder))
    if profile is None:
        raise InputError(folder, "not a profiler folder")
    rank = profile.extra.get("rank")
    named = folder_rank(Path(folder))
    if rank is None:
        rank = -1 if named is None else named
    comm = profile.communication
    return {"folder": folder, "rank": int(rank), "named": named, "steps": list(profile.steps),
            "types": [(g.key, g.count, g.total_us) for g in summarize(profile.kernels, "type")],
            "kernel_us": profile.kernels.total_us(), "kernels": profile.kernels.n, "communication": comm,
            "pp_stage": comm.parallel.get("pp_stage") if comm is not None else None}


def folder_rank(folder: Path) -> int | None:
    """The rank a folder's name gives (`rank3_ascend_pt` -> 3, `host_12345_3_..._ascend_pt` -> None), or None."""
    digits = "".join(ch for ch in folder.name.split("_")[0] if ch.isdigit())
    return int(digits) if digits else None


def distinct_ranks(ranks: list[dict[str, Any]]) -> list[str]:
    """Give every rank summary its own rank id, in place; the notes say what was renumbered and why.

    Ranks whose metadata repeat one id (copied folders, a launcher that set no RANK) would merge into one
    rank silently: they are numbered by their folder names when those differ, else in folder order.
    """
    ids = [r["rank"] for r in ranks]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if not dup:
        return []
    named = [r["named"] for r in ranks]
    by_name = None not in named and len(set(named)) == len(named)
    for k, r in enumerate(ranks):
        r["rank"] = int(r["named"]) if by_name else k
    clash = ", ".join(f"rank {i} ({ids.count(i)} folders)" if i >= 0 else f"no rank id ({ids.count(i)} folders)"
                      for i in dup)
    return [f"{len(ranks)} rank folders repeat rank ids in their metadata: {clash}; ranks renumbered by "
            + ("their folder names" if by_name else "folder order") + " so that none is merged into another"]


def map_ranks(folders: list[Path], *, scheduler: str | None = None, workers: int | None = None) -> list[dict[str, Any]]:
    """`summarize_rank` over every folder: on a dask.distributed cluster when `scheduler` is given, else a local pool."""
    names = [str(f) for f in folders]
    return list(pool.run(summarize_rank, names, workers=workers or pool.local_workers(len(names)), scheduler=scheduler))


def load_cluster(path: Path, *, scheduler: str | None = None, workers: int | None = None,
                 progress: Progress | None = None) -> Investigation:
    """The cluster's `Investigation`: every rank's steps, the slow rank's kernels, and a `slow_rank` finding."""
    path = Path(path)
    output = cluster_output(path)
    folders = rank_folders(path) if path.is_dir() else []
    if progress is not None:
        progress(f"reading {len(folders) or 1} rank(s) in {path.name}", 0, len(folders) or None)
    kernels = KernelTable(0)
    per_rank: dict[int, Any] = {}
    comm = Communication()
    notes: list[str] = []
    if len(folders) >= 2:
        ranks = map_ranks(folders, scheduler=scheduler, workers=workers)
        notes = distinct_ranks(ranks)
        steps = [replace(s, rank=r["rank"]) for r in ranks for s in r["steps"]]
        per_rank = {r["rank"]: {"types": r["types"], "kernel_us": r["kernel_us"], "kernels": r["kernels"],
                                "folder": r["folder"]} for r in ranks}
        comm = _gathered(ranks)
    elif output is not None:
        steps = read_cluster_db(output) if output.name == CLUSTER_DB else list(read_step_trace(output))
        from ascend_tui.readers.profiler.communication import read_folder as read_communication

        comm = read_communication(output.parent)
    else:
        raise InputError(path, "not a cluster profile (no rank folders and no cluster_step_trace_time.csv)")
    if not steps and not any(r.get("kernels") for r in per_rank.values()):
        raise InputError(path, "no step times (step_trace_time.csv, or STEP_TIME in a db export) and no kernel rows "
                               "in any rank: nothing to compare")
    if not steps:  # kernels but no steps (msprof without step markers): the ranks' kernels, no comparison
        notes.append(f"no step times in any of the {len(per_rank)} ranks (no step_trace_time.csv or STEP_TIME): "
                     "their step times are not compared; the kernel tables are per rank")
    summary = cluster_summary(steps)
    shown = summary.slow_rank if per_rank.get(summary.slow_rank, {}).get("kernels") else \
        next((r for r in sorted(per_rank) if per_rank[r]["kernels"]), None)
    if shown is not None:  # the slow rank's kernel rows, or the first rank's that has any
        from ascend_tui.readers.profiler.ascend_pt import read_profile

        read = read_profile(Path(per_rank[shown]["folder"]))
        kernels = read.kernels if read is not None else kernels
    cluster = {"ranks": [{"rank": r.rank, "steps": r.steps, "total": r.total, "computing": r.computing,
                          "communication": r.communication, "free": r.free} for r in summary.ranks],
               "slow_rank": summary.slow_rank, "slow_stage": summary.slow_stage, "excess_us": summary.excess_us,
               "spread": summary.spread, "per_rank": per_rank, "shown_rank": shown,
               "kernels": sum(int(r.get("kernels", 0)) for r in per_rank.values()) if per_rank else kernels.n}
    findings = [] if summary.slow_rank < 0 or not summary.ranks else [_slow_finding(summary, per_rank)]
    cluster["slow_kernels"] = findings[0].metrics.get("kernels", []) if findings else []
    profile = Profile("cluster", kernels, steps=tuple(steps), extra={"cluster": cluster},
                      communication=comm if comm or comm.skipped else None)
    inv = profile_investigation(profile, path, source="cluster profile", extra_findings=findings)
    if notes:
        inv.run.extra["notes"] = [*inv.run.extra.get("notes", []), *notes]
        inv.findings.append(Finding("profile", "duplicate_rank", "warning", "", "", "", -1, notes[0],
                                    hint="check RANK / profiler_info_*.json of each folder: two folders of one rank "
                                         "are two runs, not one"))
    inv.run.extra["kernels"] = cluster["kernels"]
    return inv


def _slow_finding(summary: Any, per_rank: dict[int, Any]) -> Finding:
    """The slow rank, with the kernel types that carry its excess over the median rank."""
    slow = next(r for r in summary.ranks if r.rank == summary.slow_rank)
    return slow_rank(summary.slow_rank, summary.slow_stage, summary.excess_us, len(summary.ranks), slow.computing,
                     slow.free, {k: v["types"] for k, v in per_rank.items()}, {r.rank: r.steps for r in summary.ranks})


def _gathered(ranks: list[dict[str, Any]]) -> Communication:
    """Every rank's collectives under its (possibly renumbered) rank id, links between global ranks, the stages."""
    from ascend_tui.readers.profiler.communication import globalise

    comm = Communication()
    for r in ranks:
        part = r.get("communication")
        if part is None:
            continue
        part.ops = [o if o.rank == r["rank"] else replace(o, rank=r["rank"]) for o in part.ops]
        part.tasks = [t if t.rank == r["rank"] else replace(t, rank=r["rank"]) for t in part.tasks]
        comm.extend(part)
    stages = {r["rank"]: int(r["pp_stage"]) for r in ranks if r.get("pp_stage") is not None}
    if len(set(stages.values())) > 1:
        comm.parallel = {**comm.parallel, "stages": stages}
    return globalise(comm)


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None) -> Investigation:
    return load_cluster(path, progress=progress)


READER = FunctionReader("cluster profile", sniff, load)
