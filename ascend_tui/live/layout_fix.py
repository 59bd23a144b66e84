"""The layout remedy: drop the copies of the permute/transpose + contiguous() pairs a profile finding names.

`plan_layout` reads the modules from the `layout_conversion` finding (`checks/layout_pairs.py`);
`try_layout` runs the model with the copies skipped (`Remedy("layout", module)`, a torch function
mode inside each module: the code is not edited), checks the outputs against the same run without
the remedy (bit-identical, or the largest difference), and times both in turn, step after step, so
drift on a busy machine hits both alike: the median and the spread of each.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Sequence

from ascend_tui.live.remedies import Outcome, Remedy, Trial

LAYOUT_STEPS = 7
UNCHANGED_COSINE = 1.0 - 1e-6  # outputs this close to the run without the remedy are unchanged up to rounding


def plan_layout(findings: Sequence[Any]) -> list[Remedy]:
    """One layout remedy per module the layout finding says its conversion pairs are in."""
    out: list[Remedy] = []
    for f in findings:
        if f.check != "profile" or f.kind != "layout_conversion":
            continue
        modules = f.metrics.get("modules") or ([f.module] if f.module else [""])
        for m in modules:
            r = Remedy("layout", str(m), reason=f"{f.kind} at `{f.node}`")
            if r not in out:
                out.append(r)
    # a module inside another one on the list is covered by it
    names = {r.module for r in out}
    return [r for r in out if not any(o != r.module and (o == "" or r.module.startswith(f"{o}.")) for o in names)]


@dataclass(frozen=True, slots=True)
class StepTimes:
    """Seconds per step: median, fastest, slowest, over `steps` steps."""

    median: float
    low: float
    high: float
    steps: int

    @classmethod
    def of(cls, times: Sequence[float]) -> StepTimes:
        return cls(statistics.median(times), min(times), max(times), len(times))

    def to_json(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.low, "max": self.high, "steps": self.steps}

    def text(self) -> str:
        return f"{_ms(self.median)} (spread {_ms(self.low)}–{_ms(self.high)})"


def _ms(seconds: float) -> str:
    from ascend_tui.fmt import duration_us

    return duration_us(seconds * 1e6)


@dataclass(frozen=True, slots=True)
class LayoutResult:
    """What dropping the layout copies did: outputs against the run without it, time per step before and after."""

    remedies: tuple[Remedy, ...]
    outcome: Outcome  # the run with base + layout remedies against the float32 reference
    identical: bool
    max_diff: float
    cosine: float  # against the run without the layout remedies
    before: StepTimes | None
    after: StepTimes | None
    accepted: bool
    reason: str
    needed: tuple[str, ...] = ()  # modules whose code needs its copies (the run failed without them): left alone

    @property
    def gain_measured(self) -> bool:
        """Every step with the copies dropped was faster than every step without (the spreads do not overlap)."""
        return self.before is not None and self.after is not None and self.after.high < self.before.low

    def describe(self) -> str:
        """`step 12.1 ms (spread ...) → 9.8 ms (spread ...), median of 7 steps each; outputs bit-identical`."""
        if self.before is None or self.after is None:
            return self.reason
        change = self.after.median / self.before.median - 1.0 if self.before.median > 0 else math.nan
        speed = (f"step {self.before.text()} → {self.after.text()}, median of {self.after.steps} steps each "
                 f"({change:+.0%}{'' if self.gain_measured else ': within the spread, no gain measured here'})")
        kept = (f"; copies kept in {len(self.needed)} module(s) whose code needs them ("
                f"{', '.join(f'`{m}`' for m in self.needed[:3])}{', ...' if len(self.needed) > 3 else ''})"
                if self.needed else "")
        same = "outputs bit-identical" if self.identical else (
            f"outputs not bit-identical: at most {self.max_diff:.3g} apart (cosine {self.cosine:.9f} against the "
            f"run without the remedy)")
        return f"{speed}; {same}{kept}"

    def to_json(self) -> dict[str, Any]:
        return {"remedies": [r.to_json() for r in self.remedies], "outcome": self.outcome.to_json(),
                "bit_identical": self.identical, "max_abs_difference": _num(self.max_diff),
                "cosine_vs_without": _num(self.cosine),
                "step_before": self.before.to_json() if self.before else None,
                "step_after": self.after.to_json() if self.after else None, "gain_measured": self.gain_measured,
                "accepted": self.accepted, "reason": self.reason, "copies_needed_in": list(self.needed),
                "summary": self.describe()}


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def difference(a: Sequence[Any], b: Sequence[Any]) -> tuple[bool, float, float]:
    """(bit-identical, largest absolute difference, cosine) of two runs' outputs."""
    import torch

    if len(a) != len(b) or any(x.shape != y.shape or x.dtype != y.dtype for x, y in zip(a, b)):
        return False, math.inf, math.nan
    identical = all(torch.equal(x, y) for x, y in zip(a, b))
    if identical:
        return True, 0.0, 1.0
    u = torch.cat([x.reshape(-1).double() for x in a])
    v = torch.cat([y.reshape(-1).double() for y in b])
    finite = torch.isfinite(u) & torch.isfinite(v)
    diff = float((u[finite] - v[finite]).abs().max()) if bool(finite.any()) else math.inf
    nu, nv = float(u[finite].norm()), float(v[finite].norm())
    cosine = float(u[finite] @ v[finite]) / (nu * nv) if nu and nv else math.nan
    return False, diff, cosine


def try_layout(trial: Trial, base: Sequence[Remedy], layout: Sequence[Remedy], tolerance: float,
               steps: int = LAYOUT_STEPS) -> LayoutResult:
    """Run with the layout copies dropped on top of `base`; accepted when the values are unchanged (bit-identical,
    or equal to rounding and no further from the float32 reference)."""
    base, layout = tuple(base), tuple(layout)
    without, outcome = trial.measure(base), trial.measure((*base, *layout))
    needed: tuple[str, ...] = ()
    if without.error:  # nothing to compare against: the model does not run even without the layout remedy
        return LayoutResult(layout, outcome, False, math.inf, math.nan, None, None, False,
                            f"not tried: the run it would be compared with fails ({without.error})")
    if outcome.error and len(layout) > 1:  # some module's code needs its copy (a .view() after it): leave it
        runs = _runnable(trial, base, list(layout))
        if runs:
            needed = tuple(r.module for r in layout if r not in runs)
            layout, outcome = tuple(runs), trial.measure((*base, *runs))
    if outcome.error:
        return LayoutResult(layout, outcome, False, math.inf, math.nan, None, None, False,
                            f"the run with the copies dropped failed ({outcome.error}): the code needs the "
                            f"contiguous tensor")
    identical, diff, cosine = difference(trial.outputs(base), trial.outputs((*base, *layout)))
    before, after = (StepTimes.of(t) for t in trial.step_times([base, (*base, *layout)], steps))
    no_worse = not math.isfinite(without.cosine) or (math.isfinite(outcome.cosine)
                                                      and outcome.cosine >= without.cosine - 1e-6)
    if identical:
        accepted, reason = True, "outputs bit-identical"
    elif math.isfinite(cosine) and cosine >= UNCHANGED_COSINE and no_worse:
        accepted, reason = True, f"outputs equal up to rounding (at most {diff:.3g} apart)"
    else:
        accepted, reason = False, (f"dropping the copies changes the outputs (at most {diff:.3g} apart, cosine "
                                   f"{cosine:.6f} against the run without it)")
    return LayoutResult(layout, outcome, identical, diff, cosine, before, after, accepted, reason, needed)


def _runnable(trial: Trial, base: tuple[Remedy, ...], items: list[Remedy]) -> list[Remedy]:
    """The layout remedies that run (by halves: a set that runs is kept whole, one that fails is split)."""
    if not trial.measure((*base, *items)).error:
        return items
    if len(items) == 1:
        return []
    half = len(items) // 2
    return _runnable(trial, base, items[:half]) + _runnable(trial, base, items[half:])
