"""Readers of what the real tools wrote; `open_path` picks the reader for a path.

`READERS` is an ordinary list of `Reader`s (see `reader.py`), tried in order: the first whose
`sniff` accepts a path loads it. Adding a format is one module plus one line here.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ascend_tui.errors import InputError
from ascend_tui.formats import (ascend_profiler, cluster, msprobe, msprobe_overflow, msprof_op, native,
                                profiler_memory, sanitizer)
from ascend_tui.formats.reader import Reader

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation
    from ascend_tui.progress import Progress

READERS: list[Reader] = [
    native.INVESTIGATION_READER,
    native.GRAPH_READER,
    msprobe.READER,
    msprobe_overflow.READER,
    sanitizer.READER,
    cluster.READER,
    ascend_profiler.READER,
    msprof_op.READER,
    profiler_memory.READER,
]


def reader_for(path: str | Path) -> Reader | None:
    """The reader that would open `path`, or None."""
    p = Path(path)
    return next((r for r in READERS if r.sniff(p)), None)


def kind_of(path: str | Path) -> str | None:
    """The name of the format of `path`, or None."""
    reader = reader_for(path)
    return reader.name if reader is not None else None


def open_path(path: str | Path, progress: Progress | None = None, cancel: threading.Event | None = None,
              on_partial: Callable[[Investigation], None] | None = None) -> Investigation:
    """Read any artifact the project understands into an `Investigation` (readers that stream also hand
    partial investigations to `on_partial` while they read)."""
    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file or folder")
    reader = reader_for(p)
    if reader is None:
        names = ", ".join(r.name for r in READERS)
        raise InputError(p, f"not a format ascend-tui reads (expected one of: {names})")
    if on_partial is not None and getattr(reader, "streams", False):
        return reader.load(p, progress=progress, cancel=cancel, on_partial=on_partial)
    return reader.load(p, progress=progress, cancel=cancel)


def merge_path(inv: Investigation, path: str | Path, progress: Progress | None = None,
               cancel: threading.Event | None = None) -> str:
    """Lay what `path` holds onto `inv`'s graph (the app's `open A B`, `triage A B`); a note saying what was added."""
    from ascend_tui.formats.sanitizer import investigation_from_log, parse_file

    p = Path(path)
    if progress is not None:
        progress(f"reading {p.name}", 0, None)
    if kind_of(p) == "sanitizer log":
        before = len(inv.findings), len(inv.memory_events)
        investigation_from_log(parse_file(p, progress, cancel), inv)
        events = inv.memory_events[before[1]:]
        placed = sum(1 for e in events if e.node and e.node in inv.graph)
        return (f"{p.name}: {len(events)} memory events, {placed} placed on operators, "
                f"{len(inv.findings) - before[0]} findings")
    other = open_path(p, progress=progress, cancel=cancel)
    inside = [f for f in other.findings if f.node in inv.graph]
    inv.add_findings(inside)
    inv.memory_events.extend(other.memory_events)
    inv.memory_samples.extend(other.memory_samples)
    skipped = len(other.findings) - len(inside)
    note = f"{p.name}: {len(inside)} findings added"
    return note + (f", {skipped} on operators not in this graph" if skipped else "")
