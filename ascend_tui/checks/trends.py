"""The first anomalous step of a per-step series: where it turns non-finite, or jumps out of its own robust band.

A step is judged against the steps before it only (what a person watching the run would have
known): the band is the median of the earlier finite values plus or minus `k` scaled median
absolute deviations, widened to `floor` of the median so a flat series does not flag rounding
noise. The first `warmup` steps are never called a jump (too little history), though a
non-finite value is an anomaly from step 0 on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ascend_tui.evidence import StepSeries

MAD_SCALE = 1.4826  # MAD of a normal distribution -> its standard deviation
DEFAULT_K = 6.0
DEFAULT_WARMUP = 5
DEFAULT_FLOOR = 0.05
COUNT_KIND = "nonfinite"  # a `StepSeries.kind` that counts non-finite outputs


@dataclass(frozen=True, slots=True)
class Anomaly:
    """The first step a series left its band: its position in the series, the step number, what happened."""

    position: int
    step: int
    kind: str  # "nonfinite" | "jump"
    value: float
    low: float  # the band it left (NaN for a non-finite value with no finite history)
    high: float

    def describe(self) -> str:
        """One line: `step 2: NaN` or `step 7: 3.1e4, above the band 0.9–1.4 of the steps before`."""
        if self.kind == "nonfinite" and math.isfinite(self.value):
            return f"step {self.step}: {self.value:g} non-finite"
        if self.kind == "nonfinite":
            word = "NaN" if math.isnan(self.value) else ("+Inf" if self.value > 0 else "-Inf")
            return f"step {self.step}: {word}"
        side = "above" if self.value > self.high else "below"
        return (f"step {self.step}: {self.value:.4g}, {side} the band {self.low:.4g}–{self.high:.4g} of the steps "
                f"before")


def first_anomaly(values: Sequence[float] | np.ndarray, steps: Sequence[int] | None = None, *, k: float = DEFAULT_K,
                  warmup: int = DEFAULT_WARMUP, floor: float = DEFAULT_FLOOR, counts: bool = False) -> Anomaly | None:
    """The first position whose value is non-finite or outside median ± k·MAD of the finite values before it.

    `counts`: the series counts bad things (non-finite outputs): any value above 0 is the anomaly.
    """
    v = np.asarray(values, dtype=np.float64)
    nums = list(steps) if steps is not None else list(range(len(v)))
    if len(nums) != len(v):
        raise ValueError(f"{len(nums)} steps for {len(v)} values")
    finite = np.isfinite(v)
    for i in range(len(v)):
        if not finite[i]:
            return Anomaly(i, int(nums[i]), "nonfinite", float(v[i]), math.nan, math.nan)
        if counts:
            if v[i] > 0:
                return Anomaly(i, int(nums[i]), "nonfinite", float(v[i]), 0.0, 0.0)
            continue
        history = v[:i][finite[:i]]
        if i < warmup or len(history) < warmup:
            continue
        low, high = band(history, k=k, floor=floor)
        if not low <= v[i] <= high:
            return Anomaly(i, int(nums[i]), "jump", float(v[i]), low, high)
    return None


def band(history: np.ndarray, *, k: float = DEFAULT_K, floor: float = DEFAULT_FLOOR) -> tuple[float, float]:
    """(low, high): the median of `history` ± k scaled MADs, at least ± `floor` of the median's magnitude."""
    med = float(np.median(history))
    mad = float(np.median(np.abs(history - med))) * MAD_SCALE
    half = max(k * mad, floor * abs(med), np.finfo(np.float64).tiny)
    return med - half, med + half


@dataclass(frozen=True, slots=True)
class SeriesVerdict:
    """A series and its first anomaly (None when every step stayed in its band)."""

    series: StepSeries
    anomaly: Anomaly | None


def judge(series: Sequence[StepSeries], **band_options: float) -> list[SeriesVerdict]:
    """`first_anomaly` of every series, in the order given (a `nonfinite` series is a count: above 0 is bad)."""
    return [SeriesVerdict(s, first_anomaly(s.values, s.steps, counts=s.kind == COUNT_KIND,
                                           **band_options))  # type: ignore[arg-type]
            for s in series]


def earliest(verdicts: Sequence[SeriesVerdict]) -> SeriesVerdict | None:
    """The verdict whose anomaly comes at the earliest step (non-finite before a jump at the same step)."""
    flagged = [v for v in verdicts if v.anomaly is not None]
    if not flagged:
        return None
    return min(flagged, key=lambda v: (v.anomaly.step, v.anomaly.kind != "nonfinite"))  # type: ignore[union-attr]
