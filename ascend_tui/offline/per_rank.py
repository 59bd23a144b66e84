"""What a worker does for one rank: summarise its profiler folder, or reduce its dump.json to op states.

These run in local pool processes or on dask workers, which import this module first to unpickle
the task: it imports no reader at the top (the readers' registry imports the offline readers,
so a worker that imported `offline.cluster` first would meet it half made).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from ascend_tui.checks.nan_ranks import OpState
from ascend_tui.checks.profile import summarize
from ascend_tui.errors import InputError


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
    return {"folder": folder, "rank": int(rank), "steps": [replace(s, rank=int(rank)) for s in profile.steps],
            "types": [(g.key, g.count, g.total_us) for g in summarize(profile.kernels, "type")],
            "kernel_us": profile.kernels.total_us(), "communication": comm}


def _bad(leaves: list[Any]) -> bool:
    return any(s is not None and not math.isfinite(s) for leaf in leaves for s in (leaf.stats or ()))


def rank_states(rank_dir: str) -> tuple[int, list[OpState], int]:
    """(rank number, op states in dump order, records skipped) of one rank folder (runs in a worker)."""
    from ascend_tui.readers.msprobe import dump as msprobe

    path = Path(rank_dir) / "dump.json"
    _header, data = msprobe.read_dump(path)
    apis, modules, skipped = [], [], 0
    for name, record in data.items():
        try:
            entry = msprobe.parse_entry(name, record, path)
        except InputError:
            skipped += 1
            continue
        if entry is None:
            continue
        state = OpState(name, _bad(entry.inputs), _bad(entry.outputs))
        (modules if entry.kind == "module" else apis).append(state)
    digits = "".join(ch for ch in Path(rank_dir).name if ch.isdigit())
    return int(digits or 0), apis or modules, skipped  # modules wrap the APIs: judge the APIs where there are any
