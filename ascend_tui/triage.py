"""`ascend-tui triage`: every check that applies, in the order an engineer uses them, and one story.

A model file runs once with every live check's observers on the same capture (precision,
overflow, memory, profile: where it goes wrong, why, whether memory is corrupt, where time
goes); the memory check's clamping keeps a model with a bad index running, so the others
still see the whole run. Artifacts (dumps, logs, profiles, graphs) are read and laid on the
first one's graph. The report's `story` then folds the findings into their causes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from ascend_tui.checks.story import Cause, tell
from ascend_tui.errors import InputError

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation
    from ascend_tui.live.options import RunOptions
    from ascend_tui.progress import Progress

ENGINEER_ORDER = ("precision", "overflow", "memory", "profile")


def triage_checks() -> tuple[str, ...]:
    """The live checks of this version in the order triage runs them."""
    from ascend_tui.live.runner import available_checks

    have = available_checks()
    return tuple(c for c in ENGINEER_ORDER if c in have) + tuple(c for c in have if c not in ENGINEER_ORDER)


def triage_model(target: str, options: RunOptions, progress: Progress | None = None) -> Investigation:
    """Load `model.py[:factory]` and run every live check on one capture."""
    from ascend_tui.live.runner import run_live
    from ascend_tui.live.targets import load_target

    if progress is not None:
        progress(f"loading {target}", 0, None)
    loaded = load_target(target)
    opts = options.but(checks=triage_checks(), loss=loaded.loss, target=target)
    return run_live(loaded.model, loaded.inputs, opts, progress=progress)


def triage_artifacts(paths: Sequence[str], progress: Progress | None = None) -> Investigation:
    """Read every artifact; the first one's graph carries the findings of the others."""
    from ascend_tui.offline.open import open_path
    from ascend_tui.offline.overlay import lay_path

    if not paths:
        raise InputError("", "triage needs a model file or at least one artifact")
    inv = open_path(Path(paths[0]), progress=progress)
    notes = inv.run.extra.setdefault("notes", [])
    for extra in paths[1:]:
        notes.append(lay_path(inv, extra, progress))
    return inv


def format_story(causes: Sequence[Cause], limit: int = 8, verdicts: Mapping[str, str] | None = None) -> list[str]:
    """The causes as a person reads them in a terminal: a numbered title, the fix verdict and evidence under it."""
    if not causes:
        return ["story: no cause found (no errors or warnings)"]
    lines = [f"story: {len(causes)} cause{'s' if len(causes) != 1 else ''}, most effect first"]
    for k, c in enumerate(causes[:limit], 1):
        lines.append(f"{k}. {c.severity.upper()} {c.title} [{', '.join(c.checks)}]")
        if verdicts and c.id in verdicts:
            lines.append(f"     {verdicts[c.id]}")
        for ev in c.evidence[:4]:
            lines.append(f"     - {ev}")
        more = len(c.explains) - min(len(c.evidence), 4)
        if more > 0:
            lines.append(f"     ... explains {more} more finding{'s' if more != 1 else ''}")
    if len(causes) > limit:
        lines.append(f"... and {len(causes) - limit} more causes (see --json or the app)")
    return lines


def story_of(inv: Investigation) -> list[Cause]:
    return tell(inv.graph, inv.findings)
