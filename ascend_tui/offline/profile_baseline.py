"""A profile against an earlier one: the per-type, per-module and per-category diff and the regression findings.

Used by `ascend-tui profile --baseline`, by the CI gate (`--baseline` that is a profile) and by the
app's diff view, which shows the numbers stored here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ascend_tui.checks.profile import DiffRow
    from ascend_tui.investigation import Investigation


def attach_baseline(inv: Investigation, base: Investigation, share: float | None = None) -> list[dict[str, Any]]:
    """Diff `inv` against `base` per type and module, store it in the profile and add regression findings
    (an error when a step is more than `share` slower; 5% by default)."""
    from ascend_tui.checks.profile import diff, step_count
    from ascend_tui.checks.profile_advice import REGRESSION_SHARE, regressions

    assert inv.profile is not None and base.profile is not None
    new, old = inv.profile, base.profile
    steps = (step_count(old.kernels, old.steps), step_count(new.kernels, new.steps))
    tables = {by: diff(old.kernels, new.kernels, by, per_step=steps) for by in ("type", "module", "category")}
    new.extra["baseline"] = {"target": base.run.target, "steps": list(steps),
                             **{by: [_row(r) for r in rows] for by, rows in tables.items()}}
    found = regressions(tables["type"], old.kernels.total_us() / steps[0], new.kernels.total_us() / steps[1],
                        inv.graph, REGRESSION_SHARE if share is None else share)
    inv.replace_findings("profile", [*[f for f in inv.findings if f.check == "profile"], *found])
    return new.extra["baseline"]["type"]


def _row(r: DiffRow) -> dict[str, Any]:
    return {"key": r.key, "before_us": r.before_us, "after_us": r.after_us, "before_count": r.before_count,
            "after_count": r.after_count}
