"""Open any artifact offline: read it with its reader, then run the analyses its kind gets.

`open_path` is what every front-end calls (the CLI's commands, the app, `triage`, `gate`): the
reader (`readers/`) translates the file into an `Investigation`, and the analysis named here for
that reader adds the findings. The cluster profile is read here rather than in `readers/`: it
reads every rank in a pool (`ascend_tui.pool`) and names the slow rank from the ranks' summaries;
so is a multi-rank msprobe dump, whose ranks are compared to find where a NaN/Inf is born.
"""

from __future__ import annotations

import importlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ascend_tui import readers
from ascend_tui.readers import FOLDERS, LazyReader, Takes

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation
    from ascend_tui.progress import Progress

CLUSTER = LazyReader("cluster profile", "ascend_tui.offline.profile_cluster:READER", takes=Takes(
    True, ("cluster_step_trace_time.csv", "cluster_step_trace_time.csv.gz", "cluster_analysis.db")))
RANKS_DUMP = LazyReader("msprobe multi-rank dump", "ascend_tui.offline.nan_ranks:READER", takes=FOLDERS)

# reader name -> the analysis (`module:function`, Investigation -> Investigation) that adds its findings
ANALYSES = {
    "msprobe dump": "ascend_tui.offline.overflow:dump_findings",
    "msprobe multi-rank dump": "ascend_tui.offline.overflow:dump_findings",
    "msprobe overflow_check": "ascend_tui.offline.overflow:overflow_check_findings",
    "sanitizer log": "ascend_tui.offline.memory:log_findings",
    "profiler": "ascend_tui.offline.profile:advise_profile",
    "msprof op": "ascend_tui.offline.profile:advise_profile",
}


def all_readers() -> list[LazyReader]:
    """Every reader in the order tried: the built-in ones with the cluster profile before the single-rank
    profiler (a folder of rank folders is a cluster), then the plug-ins."""
    out = readers.all_readers()
    at = next((i for i, r in enumerate(out) if r.name == "profiler"), len(out))
    out = [*out[:at], CLUSTER, *out[at:]]
    at = next((i for i, r in enumerate(out) if r.name == "msprobe dump"), len(out))
    return [*out[:at], RANKS_DUMP, *out[at:]]  # several ranks: the one where a NaN is born is the one to open


def reader_for(path: str | Path) -> LazyReader | None:
    """The reader that would open `path`, or None."""
    return readers.reader_for(path, all_readers())


def kind_of(path: str | Path) -> str | None:
    """The name of the format of `path`, or None."""
    return readers.kind_of(path, all_readers())


def analysis(name: str) -> Callable[[Investigation], Investigation] | None:
    """The analysis the reader called `name` gets, or None."""
    target = ANALYSES.get(name)
    if target is None:
        return None
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


def open_path(path: str | Path, progress: Progress | None = None, cancel: threading.Event | None = None,
              on_partial: Callable[[Investigation], None] | None = None) -> Investigation:
    """Read any artifact the project understands into an `Investigation` with its findings (readers that
    stream also hand partial investigations, analysed the same way, to `on_partial` while they read).

    With `on_partial`, what was read is handed over before the analysis runs (a copy, without its
    findings), so a front-end shows it while the findings are computed (seconds on a million kernels).
    """
    reader = readers.choose(path, all_readers())
    analyse = analysis(reader.name)
    if analyse is None:
        return readers.read_with(reader, path, progress, cancel, on_partial)
    partial = None if on_partial is None else (lambda inv: on_partial(analyse(inv)))
    inv = readers.read_with(reader, path, progress, cancel, partial)
    if on_partial is not None:
        on_partial(inv.snapshot())
        if progress is not None:
            progress(f"computing the findings on {Path(path).name}", 0, None)
    return analyse(inv)
