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

from ascend_tui import fmt, pool
from ascend_tui.checks.profile import cluster_summary, summarize
from ascend_tui.errors import InputError
from ascend_tui.evidence import Finding
from ascend_tui.offline.profile import profile_investigation
from ascend_tui.readers.profiler.csv_tables import read_step_trace
from ascend_tui.readers.base import FunctionReader
from ascend_tui.progress import Progress
from ascend_tui.graph.profile import KernelTable, Profile

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

CLUSTER_CSV = "cluster_step_trace_time.csv"


def rank_folders(path: Path) -> list[Path]:
    """The per-rank profiler folders directly under `path` (`*_ascend_pt`, or any holding ASCEND_PROFILER_OUTPUT)."""
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if p.is_dir() and
                  (p.name.endswith("_ascend_pt") or (p / "ASCEND_PROFILER_OUTPUT").is_dir()))


def sniff(path: Path) -> bool:
    """Two or more rank folders, or msprof-analyze's cluster output (a folder or the CSV itself)."""
    if path.is_file():
        return path.name == CLUSTER_CSV
    return len(rank_folders(path)) >= 2 or (path / CLUSTER_CSV).is_file()


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
    return {"folder": folder, "rank": int(rank), "steps": [replace(s, rank=int(rank)) for s in profile.steps],
            "types": [(g.key, g.count, g.total_us) for g in summarize(profile.kernels, "type")],
            "kernel_us": profile.kernels.total_us()}


def map_ranks(folders: list[Path], *, scheduler: str | None = None, workers: int | None = None) -> list[dict[str, Any]]:
    """`summarize_rank` over every folder: on a dask.distributed cluster when `scheduler` is given, else a local pool."""
    names = [str(f) for f in folders]
    return list(pool.run(summarize_rank, names, workers=workers or pool.local_workers(len(names)), scheduler=scheduler))


def load_cluster(path: Path, *, scheduler: str | None = None, workers: int | None = None,
                 progress: Progress | None = None) -> Investigation:
    """The cluster's `Investigation`: every rank's steps, the slow rank's kernels, and a `slow_rank` finding."""
    path = Path(path)
    csv_path = path if path.is_file() else path / CLUSTER_CSV
    folders = rank_folders(path) if path.is_dir() else []
    if progress is not None:
        progress(f"reading {len(folders) or 1} rank(s) in {path.name}", 0, len(folders) or None)
    kernels = KernelTable(0)
    per_rank: dict[int, Any] = {}
    if len(folders) >= 2:
        ranks = map_ranks(folders, scheduler=scheduler, workers=workers)
        steps = [s for r in ranks for s in r["steps"]]
        per_rank = {r["rank"]: {"types": r["types"], "kernel_us": r["kernel_us"], "folder": r["folder"]} for r in ranks}
    elif csv_path.is_file():
        steps = list(read_step_trace(csv_path))
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
    profile = Profile("cluster", kernels, steps=tuple(steps), extra={"cluster": cluster})
    slow = next(r for r in summary.ranks if r.rank == summary.slow_rank)
    finding = Finding("profile", "slow_rank", "warning", "", "", "", -1,
                      f"rank {summary.slow_rank} is the slow rank: {summary.slow_stage} "
                      f"{fmt.duration_us(summary.excess_us)} above the median of {len(summary.ranks)} ranks "
                      f"(computing {fmt.duration_us(slow.computing)}, free {fmt.duration_us(slow.free)} a step); "
                      "the other ranks wait for it in communication",
                      metrics={"rank": summary.slow_rank, "stage": summary.slow_stage, "excess_us": summary.excess_us},
                      hint="free time: host-side stalls (dataloader, dispatch, synchronisation) on that rank; "
                           "computing: uneven work (pipeline stage balance, sequence lengths) or a slow card")
    inv = profile_investigation(profile, path, source="cluster profile", extra_findings=[finding])
    return inv


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None) -> Investigation:
    return load_cluster(path, progress=progress)


READER = FunctionReader("cluster profile", sniff, load)
