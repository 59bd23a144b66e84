"""The CI gate: which findings fail a run, given a severity threshold and an optional baseline.

A baseline is an earlier report (`--json`) or saved investigation: findings it already had
(same id: check, kind and operator) are known and do not fail the run; only new ones do. A
baseline that is a profile (a profiler folder, or a saved run with timing) is diffed against
this run's profile instead: a step more than `--max-slowdown` slower is a new error.
`--fail-on unverified` gates on a fix run instead (the report's `fix` section, from `ascend-tui fix`
or `triage --fix`): the run fails when a fix it needed is not verified.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ascend_tui.checks.story import finding_ids
from ascend_tui.errors import InputError
from ascend_tui.evidence import SEVERITY_RANK, Finding

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

FAIL_ON = ("error", "warning", "unverified")


@dataclass(frozen=True, slots=True)
class GateResult:
    """The findings that fail the run and how many at or above the threshold the baseline already knew."""

    failing: tuple[tuple[str, Finding], ...]
    known: int
    threshold: str
    unverified: tuple[str, ...] = ()  # --fail-on unverified: one line per fix that is not verified

    @property
    def passed(self) -> bool:
        return not self.failing and not self.unverified


def baseline_ids(path: str | Path) -> set[str]:
    """Finding ids of an earlier report or saved investigation."""
    p = Path(path)
    if not p.is_file():
        raise InputError(p, "--baseline: expected a report (--json) or saved investigation (.atui.json) file")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(p, f"--baseline is not a JSON report: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise InputError(p, "--baseline: no findings list (expected schema ascend-tui.report/1 or an investigation)")
    try:
        found = [Finding.from_json(f) for f in data["findings"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(p, f"--baseline: malformed finding ({type(exc).__name__}: {exc})") from None
    return set(finding_ids(found))


def gate(inv: Investigation, fail_on: str = "error", baseline: set[str] | None = None) -> GateResult:
    """Findings at or above `fail_on` that the baseline did not already have."""
    if fail_on not in FAIL_ON:
        raise InputError("--fail-on", f"expected one of {', '.join(FAIL_ON)}, got {fail_on!r}")
    if fail_on == "unverified":
        return gate_unverified(inv)
    limit = SEVERITY_RANK[fail_on]
    over = [(fid, f) for fid, f in zip(finding_ids(inv.findings), inv.findings)
            if SEVERITY_RANK.get(f.severity, 9) <= limit]
    known = baseline or set()
    return GateResult(tuple((fid, f) for fid, f in over if fid not in known),
                      sum(1 for fid, _ in over if fid in known), fail_on)


def gate_unverified(inv: Investigation) -> GateResult:
    """Fail when a fix is not verified: with a story (`triage --fix`), every error cause and every cause the fix
    run gave a verdict must read `fix verified`; for `ascend-tui fix`, the fix itself must be verified.

    A run with nothing to fix (no error finding, outputs within tolerance) passes.
    """
    from ascend_tui.checks.story import tell

    fix = inv.sections.get("fix")
    if not isinstance(fix, dict):
        raise InputError("--fail-on", "unverified needs a fix run: `ascend-tui fix`, or `triage --fix`")
    ids = finding_ids(inv.findings)
    by_id = dict(zip(ids, inv.findings))
    lines: list[str] = []
    failing: list[tuple[str, Finding]] = []
    summary = str(fix.get("summary") or "not verified")
    if "story" in fix:
        verdicts = {str(m.get("cause")): str(m.get("verdict")) for m in fix.get("story") or ()}
        for k, cause in enumerate(tell(inv.graph, inv.findings), 1):
            verdict = verdicts.get(cause.id)
            if (verdict is None and cause.severity != "error") or (verdict or "").startswith("fix verified"):
                continue
            why = verdict or ("not verified: the fix run was not for this cause" if not summary.startswith(
                "not verified") else summary)
            lines.append(f"cause {k} ({cause.title}): {why}")
            origin = next((f for f in cause.explains if f in by_id and by_id[f].node == cause.node),
                          cause.explains[0] if cause.explains else None)
            if origin in by_id:
                failing.append((origin, by_id[origin]))
    elif not fix.get("verified") and not summary.startswith("nothing to fix"):
        lines.append(summary if summary.startswith("not verified") else f"not verified: {summary}")
        failing = [(fid, f) for fid, f in zip(ids, inv.findings) if f.severity == "error"]
    return GateResult(tuple(failing), 0, "unverified", tuple(lines))


def parse_share(text: str) -> float:
    """`5%` or `0.05` -> 0.05."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise InputError("--max-slowdown", f"expected a share such as 5% or 0.05, got {text!r}") from None
    if not 0 <= value < 10:
        raise InputError("--max-slowdown", f"{text!r} is not a sensible slowdown (use e.g. 5%)")
    return value


def is_report(path: str | Path) -> bool:
    """Whether a --baseline is an earlier report or saved run (known findings) rather than an artifact to read."""
    from ascend_tui.offline.open import kind_of

    p = Path(path)
    return p.is_file() and p.suffix == ".json" and kind_of(p) in (None, "investigation")


def apply_baseline(inv: Investigation, path: str | Path, max_slowdown: float,
                   base: Investigation | None = None) -> set[str] | None:
    """Known finding ids from a report baseline; for a profile baseline, add its regression findings instead.

    `base` is the baseline already opened (the `profile` command reads it as it reads its target).
    """
    from ascend_tui.offline.open import kind_of, open_path

    p = Path(path)
    if base is not None and base.profile is None:
        return set(finding_ids(base.findings))
    if base is None:
        if not p.exists():
            raise InputError(p, "--baseline: no such file or folder")
        base = open_path(p) if not is_report(p) or kind_of(p) == "investigation" else None
    if base is not None and getattr(base, "profile", None) is not None:
        if getattr(inv, "profile", None) is None:
            raise InputError(p, "--baseline is a profile, but this run has no timing to compare (add --checks "
                                "profile, or give a profiler folder)")
        if "baseline" not in inv.profile.extra:
            from ascend_tui.offline.profile_baseline import attach_baseline

            attach_baseline(inv, base, max_slowdown)
        return None
    return baseline_ids(p)
