"""What the app's thread workers run: plain functions over `formats`, `targets` and `investigation`.

Nothing here touches a widget. Each function takes a progress callback and the worker's
cancel event (passed straight into domain code) and returns records the app posts back.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ascend_tui.app.messages import ProgressReported
from ascend_tui.errors import Cancelled, InputError
from ascend_tui.live.options import RunOptions
from ascend_tui.progress import Progress

if TYPE_CHECKING:
    from textual.message import Message

    from ascend_tui.investigation import Investigation
    from ascend_tui.live.targets import Target



@dataclass(slots=True)
class Loaded:
    """The outcome of opening paths: the investigation, the model file behind it (if any) and notes for the user."""

    inv: Investigation
    target: Target | None = None
    notes: list[str] = field(default_factory=list)


class ProgressPoster:
    """A progress callback that posts `ProgressReported`, at most every `interval` seconds per phase."""

    def __init__(self, post: Callable[[Message], Any], job: str, interval: float = 0.05) -> None:
        self.post = post
        self.job = job
        self.interval = interval
        self._phase = ""
        self._last = 0.0
        self._pending: tuple[str, int, int | None] | None = None

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        now = time.monotonic()
        last_one = total is not None and done >= total - 1  # capture counts from 0: the last op is total - 1
        if phase == self._phase and now - self._last < self.interval and not last_one:
            self._pending = (phase, done, total)
            return
        if phase != self._phase and self._pending is not None:
            self.post(ProgressReported(self.job, *self._pending))  # where the previous phase ended
        self._phase, self._last, self._pending = phase, now, None
        self.post(ProgressReported(self.job, phase, done, total))


def available_checks() -> tuple[str, ...]:
    """Names of the checks that run live in this version."""
    from ascend_tui.live.runner import available_checks as live_checks

    return live_checks()


def split_checks(wanted: Sequence[str] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(checks that can run here, requested checks that cannot); None asks for every available one."""
    have = available_checks()
    if wanted is None or "all" in wanted:
        return have, ()
    return tuple(c for c in wanted if c in have), tuple(c for c in wanted if c not in have)


def is_model_file(path: str) -> bool:
    """`model.py` or `model.py:factory`: something to run rather than read."""
    from ascend_tui.live.targets import split_spec

    return split_spec(path)[0].suffix == ".py"


def load_paths(paths: Sequence[str], live: RunOptions, progress: Progress,
               cancel: threading.Event, on_partial: Callable[[Investigation], None] | None = None) -> Loaded:
    """Open the first path as the investigation; map later sanitizer logs (and findings) onto its graph."""
    if not paths:
        raise InputError("", "nothing to open")
    first, rest = str(paths[0]), [str(p) for p in paths[1:]]
    if is_model_file(first):
        target = load_model(first, progress)
        names, missing = split_checks(live.checks)
        loaded = Loaded(run_checks(target, live, names, progress, cancel, on_partial), target)
        if missing:
            loaded.notes.append(f"not part of this version yet: the {', '.join(missing)} check")
    elif rest and is_msprobe_pair(first, rest[0]):
        loaded = Loaded(compare_dumps(first, rest.pop(0), progress, cancel))
    else:
        from ascend_tui.offline.open import open_path

        progress(f"reading {Path(first).name}", 0, None)
        loaded = Loaded(open_path(first, progress=progress, cancel=cancel, on_partial=on_partial))
        loaded.inv.graph.resolve_shapes(progress)  # the list shows every row's shape: infer here, not on the UI thread
        # records a reader skipped are said as a notification too, not only in the notes
        loaded.notes.extend(str(e.get("note", "")) for e in loaded.inv.run.extra.get("skipped", ()) or ())
    from ascend_tui.offline.overlay import lay_path as merge_path

    for extra in rest:
        _check(cancel)
        loaded.notes.append(merge_path(loaded.inv, extra, progress, cancel))
    return loaded


def is_msprobe_pair(first: str, second: str) -> bool:
    """Two msprobe dumps: the first is the target, the second the golden run to compare it with."""
    from ascend_tui.offline.open import kind_of

    return kind_of(first) == "msprobe dump" and kind_of(second) == "msprobe dump"


def compare_dumps(target: str, golden: str, progress: Progress, cancel: threading.Event) -> Investigation:
    """The precision compare of two msprobe dumps, as an investigation on the target's graph."""
    from ascend_tui.offline.compare import compare

    progress(f"comparing {Path(target).name} with {Path(golden).name}", 0, None)
    return compare(Path(target), Path(golden), progress=progress, cancel=cancel).investigation


def load_model(spec: str, progress: Progress) -> Target:
    """Import a model file and call its factory (errors in it name the file and line)."""
    from ascend_tui.live.targets import load_target

    progress(f"loading {spec}", 0, None)
    return load_target(spec)


def run_checks(target: Target, live: RunOptions, checks: Sequence[str] | None, progress: Progress,
               cancel: threading.Event, on_partial: Callable[[Investigation], None] | None = None) -> Investigation:
    """Capture `target` on the device and run `checks` (None: all available) in a worker thread."""
    from ascend_tui.live.runner import run_live

    options = live.but(checks=split_checks(checks)[0], loss=target.loss, target=target.spec)
    return run_live(target.model, target.inputs, options, progress=progress, cancel=cancel, on_partial=on_partial)


def fix_findings(target: Target | None, spec: str, live: RunOptions, inv: Investigation, findings: Sequence[Any],
                 progress: Progress, cancel: threading.Event) -> Any:
    """Re-run the model behind `inv` with the remedies `findings` (one cause's) name, verify, build the patch."""
    from ascend_tui.live.fix_run import run_fix

    return run_fix(spec, live, before=inv, only=list(findings), progress=progress, cancel=cancel, loaded=target)


def _check(cancel: threading.Event) -> None:
    if cancel.is_set():
        raise Cancelled("cancelled")
