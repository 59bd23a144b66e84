"""A multi-rank msprobe dump (step*/rank0..N): find the rank and op where a NaN/Inf is born, then open that rank.

Every rank's dump.json is reduced to (record, inputs non-finite, outputs non-finite) — on the
project's pool when the files are big — and `checks.nan_ranks` follows the collectives between them. The
investigation shown is the origin rank's (rank 0's when nothing is non-finite), with the
cross-rank finding on top of that rank's own overflow findings.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ascend_tui import pool
from ascend_tui.checks.nan_ranks import OpState, findings, trace
from ascend_tui.errors import InputError
from ascend_tui.readers.base import FunctionReader
from ascend_tui.readers.msprobe import dump as msprobe
from ascend_tui.progress import Progress

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

POOL_BYTES = 32 * 1024 * 1024  # below this much dump.json in all, a pool costs more than it saves


def _bad(leaves: list[Any]) -> bool:
    return any(s is not None and not math.isfinite(s) for leaf in leaves for s in (leaf.stats or ()))


def rank_states(rank_dir: str) -> tuple[int, list[OpState], int, str]:
    """(rank number, op states in dump order, records skipped, why the file is unreadable or "") of one rank folder
    (runs in a worker)."""
    path = Path(rank_dir) / "dump.json"
    digits = "".join(ch for ch in Path(rank_dir).name if ch.isdigit())
    try:
        _header, data = msprobe.read_dump(path)
    except InputError as exc:
        return int(digits or 0), [], 0, exc.line()
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
    return int(digits or 0), apis or modules, skipped, ""  # modules wrap the APIs: judge the APIs where there are any


def read_ranks(folders: list[Path], workers: int | None = None) -> dict[int, Any]:
    """Every rank's op states, on local processes (`ascend_tui.pool`) when the dumps are big."""
    names = [str(f) for f in folders]
    size = sum((f / "dump.json").stat().st_size for f in folders)
    n = workers or (pool.local_workers(len(names)) if len(names) > 2 and size > POOL_BYTES else 1)
    got = list(pool.run(rank_states, names, workers=n))
    bad = [why for *_, why in got if why]
    if len(bad) == len(got):
        raise InputError(folders[0].parent, f"no rank's dump.json could be read ({bad[0]})")
    return {rank: (ops, skipped, folder, why) for (rank, ops, skipped, why), folder in zip(got, folders)}


def sniff(path: Path) -> bool:
    """An msprobe dump root or step folder with two or more rank folders."""
    path = Path(path)
    if path.is_file() or not msprobe.sniff(path):
        return False
    try:
        return len(msprobe.rank_folders(path)[0]) >= 2
    except InputError:
        return False


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None) -> Investigation:
    """The origin rank's investigation, with the finding that says where the NaN/Inf was born across ranks."""
    from dataclasses import replace

    folders, notes = msprobe.rank_folders(Path(path))
    if progress is not None:
        progress(f"reading {len(folders)} ranks", 0, len(folders))
    everyone = read_ranks(folders)
    unread = [why for *_, why in everyone.values() if why]
    ranks = {r: v for r, v in everyone.items() if not v[3]}
    origin = trace({r: ops for r, (ops, *_rest) in ranks.items()})
    found = findings(origin, len(ranks))
    show = origin.origins[0].rank if origin.origins else min(ranks)
    inv = msprobe.load(ranks[show][2], progress, cancel)
    by_record = {str(n.attrs.get("msprobe")): n for n in inv.graph if n.attrs.get("msprobe")}
    for f in found:
        node = by_record.get(f.node)
        inv.add_findings([replace(f, node=node.id, op_type=node.op_type, module=node.module) if node else f])
    skipped = sum(v[1] for v in ranks.values())
    why = "where the NaN/Inf is born" if origin.origins else "the first rank"
    inv.run.extra["notes"] = [*notes, f"{len(ranks)} ranks in {folders[0].parent.name}; showing "
                                      f"{ranks[show][2].name} ({why})",
                              *([f"{skipped} malformed records skipped across ranks"] if skipped else []),
                              *(f"rank left out: {why}" for why in unread),
                              *inv.run.extra.get("notes", [])]
    inv.run.extra["ranks"] = sorted(ranks)
    inv.run.target = str(path)
    return inv


READER = FunctionReader("msprobe multi-rank dump", sniff, load)
