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
from ascend_tui.offline.profile import profile_investigation
from ascend_tui.readers.profiler.csv_tables import read_step_trace
from ascend_tui.readers.base import FunctionReader
from ascend_tui.progress import Progress
from ascend_tui.graph.profile import KernelTable, Profile

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

CLUSTER_CSV = "cluster_step_trace_time.csv"
CLUSTER_DB = "cluster_analysis.db"  # msprof-analyze's db export of the same tables


def rank_folders(path: Path) -> list[Path]:
    """The per-rank profiler folders directly under `path` (`*_ascend_pt`, or any holding ASCEND_PROFILER_OUTPUT)."""
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if p.is_dir() and
                  (p.name.endswith("_ascend_pt") or (p / "ASCEND_PROFILER_OUTPUT").is_dir()))


def sniff(path: Path) -> bool:
    """Two or more rank folders, or msprof-analyze's cluster output (a folder, the CSV or cluster_analysis.db)."""
    if path.is_file():
        return path.name in (CLUSTER_CSV, CLUSTER_DB)
    return len(rank_folders(path)) >= 2 or (path / CLUSTER_CSV).is_file() or (path / CLUSTER_DB).is_file()


def summarize_rank(folder: str) -> dict[str, Any]:
    """One rank's summary (runs in a worker process): its rank id, steps and time per op type."""
    from ascend_tui.readers.profiler.ascend_pt import output_dir, read_folder

    out = output_dir(Path(folder))
    if out is None:
        raise InputError(folder, "not a profiler folder")
    profile = read_folder(out)
    rank = profile.extra.get("rank")
    if rank is None:
        digits = "".join(ch for ch in Path(folder).name.split("_")[0] if ch.isdigit())
        rank = int(digits) if digits else -1
    comm = profile.communication
    if comm is not None:
        comm.ops = [o if o.rank == rank else replace(o, rank=int(rank)) for o in comm.ops]
        comm.tasks = [t if t.rank == rank else replace(t, rank=int(rank)) for t in comm.tasks]
    stage = comm.parallel.get("pp_stage") if comm is not None else None
    return {"folder": folder, "rank": int(rank), "steps": [replace(s, rank=int(rank)) for s in profile.steps],
            "pp_stage": stage,
            "types": [(g.key, g.count, g.total_us) for g in summarize(profile.kernels, "type")],
            "kernel_us": profile.kernels.total_us(), "communication": comm}


def map_ranks(folders: list[Path], *, scheduler: str | None = None, workers: int | None = None) -> list[dict[str, Any]]:
    """`summarize_rank` over every folder: on a dask.distributed cluster when `scheduler` is given, else a local pool."""
    names = [str(f) for f in folders]
    return list(pool.run(summarize_rank, names, workers=workers or pool.local_workers(len(names)), scheduler=scheduler))


def load_cluster(path: Path, *, scheduler: str | None = None, workers: int | None = None,
                 progress: Progress | None = None) -> Investigation:
    """The cluster's `Investigation`: every rank's steps, the slow rank's kernels, and a `slow_rank` finding."""
    path = Path(path)
    csv_path = path if path.is_file() and path.name == CLUSTER_CSV else \
        (path.parent if path.is_file() else path) / CLUSTER_CSV
    folders = rank_folders(path) if path.is_dir() else []
    if progress is not None:
        progress(f"reading {len(folders) or 1} rank(s) in {path.name}", 0, len(folders) or None)
    kernels = KernelTable(0)
    per_rank: dict[int, Any] = {}
    comm = Communication()
    if len(folders) >= 2:
        ranks = map_ranks(folders, scheduler=scheduler, workers=workers)
        steps = [s for r in ranks for s in r["steps"]]
        per_rank = {r["rank"]: {"types": r["types"], "kernel_us": r["kernel_us"], "folder": r["folder"]} for r in ranks}
        for r in ranks:
            if r.get("communication") is not None:
                comm.extend(r["communication"])
        stages = {r["rank"]: int(r["pp_stage"]) for r in ranks if r.get("pp_stage") is not None}
        if len(set(stages.values())) > 1:
            comm.parallel = {**comm.parallel, "stages": stages}
        from ascend_tui.readers.profiler.communication import globalise

        comm = globalise(comm)
    elif csv_path.is_file() or (csv_path.parent / CLUSTER_DB).is_file():
        from ascend_tui.readers.profiler.communication import read_cluster_steps
        from ascend_tui.readers.profiler.communication import read_folder as read_communication

        db = csv_path.parent / CLUSTER_DB
        steps = list(read_step_trace(csv_path)) if csv_path.is_file() else read_cluster_steps(db)
        comm = read_communication(csv_path.parent)
    else:
        raise InputError(path, "not a cluster profile (no rank folders and no cluster_step_trace_time.csv)")
    if not steps:
        raise InputError(path, "no step_trace_time rows in any rank: cannot compare ranks")
    summary = cluster_summary(steps)
    if summary.slow_rank in per_rank:
        from ascend_tui.readers.profiler.ascend_pt import output_dir, read_folder

        out = output_dir(Path(per_rank[summary.slow_rank]["folder"]))
        kernels = read_folder(out).kernels if out is not None else kernels
    cluster = {"ranks": [{"rank": r.rank, "steps": r.steps, "total": r.total, "computing": r.computing,
                          "communication": r.communication, "free": r.free} for r in summary.ranks],
               "slow_rank": summary.slow_rank, "slow_stage": summary.slow_stage, "excess_us": summary.excess_us,
               "spread": summary.spread, "per_rank": per_rank}
    slow = next(r for r in summary.ranks if r.rank == summary.slow_rank)
    n_steps = {r.rank: r.steps for r in summary.ranks}
    finding = slow_rank(summary.slow_rank, summary.slow_stage, summary.excess_us, len(summary.ranks), slow.computing,
                        slow.free, {k: v["types"] for k, v in per_rank.items()}, n_steps)
    cluster["slow_kernels"] = finding.metrics.get("kernels", [])
    profile = Profile("cluster", kernels, steps=tuple(steps), extra={"cluster": cluster},
                      communication=comm if comm or comm.skipped else None)
    inv = profile_investigation(profile, path, source="cluster profile", extra_findings=[finding])
    return inv


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None) -> Investigation:
    return load_cluster(path, progress=progress)


READER = FunctionReader("cluster profile", sniff, load)
