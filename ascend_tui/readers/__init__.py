"""Readers of what the real tools wrote; `open_path` picks the reader for a path.

`READERS` is an ordinary list of `Reader`s (see `reader.py`), tried in order: the first whose
`sniff` accepts a path loads it. Adding a format is one module plus one line here.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ascend_tui.errors import InputError
from ascend_tui.readers.profiler import ascend_pt as ascend_profiler
from ascend_tui.offline import cluster
from ascend_tui.offline import nan_ranks
from ascend_tui.readers.graphs import ge_dump
from ascend_tui.readers.graphs import mindspore_ir
from ascend_tui.readers.msprobe import dump as msprobe
from ascend_tui.readers.msprobe import overflow as msprobe_overflow
from ascend_tui.readers.msprobe import vis as msprobe_vis
from ascend_tui.readers.profiler import msprof_op
from ascend_tui.readers import native
from ascend_tui.readers.graphs import onnx_model, torch_export
from ascend_tui.readers.profiler import memory as profiler_memory
from ascend_tui.readers.sanitizer import log as sanitizer
from ascend_tui.readers.base import Reader

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation
    from ascend_tui.progress import Progress

READERS: list[Reader] = [
    native.INVESTIGATION_READER,
    native.GRAPH_READER,
    nan_ranks.READER,
    msprobe.READER,
    msprobe_overflow.READER,
    sanitizer.READER,
    cluster.READER,
    ascend_profiler.READER,
    msprof_op.READER,
    profiler_memory.READER,
    ge_dump.READER,
    onnx_model.READER,
    torch_export.READER,
    mindspore_ir.READER,
    msprobe_vis.READER,
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

