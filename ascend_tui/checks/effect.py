"""What an overflow or underflow did to the numbers: the model's outputs and the first ops downstream, against float32.

An Inf absorbed downstream (turned into zeros by a division, say) or a flushed underflow may be harmless
or may wreck the output; only a comparison with the float32 reference run tells which. This module
measures that: `compare_outputs` on the output arrays of both runs (cosine, relative L2 error, rows
that became all zero, non-finite values), and `divergence` on one op's statistics in both runs, the
cheap check of the ops right after the problem. Pure numpy, no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ascend_tui.fmt import count, percent

# (least cosine, largest relative L2 error) an output may show against float32 and still count as unchanged.
PRECISION: dict[str, tuple[float, float]] = {
    "float16": (0.999, 0.02),
    "bfloat16": (0.995, 0.08),
    "float8_e4m3fn": (0.98, 0.25),
    "float8_e5m2": (0.98, 0.3),
    "float32": (0.99999, 1e-4),
}


@dataclass(frozen=True, slots=True)
class OutputEffect:
    """How far the checked run's outputs are from the float32 reference's, worst output first."""

    dtype: str
    output: str
    cosine: float
    rel_l2: float
    rows_zeroed: int
    rows: int
    nonfinite: int
    outputs: int
    source: str = "outputs"

    @property
    def thresholds(self) -> tuple[float, float]:
        return PRECISION.get(self.dtype, PRECISION["float16"])

    @property
    def damaged(self) -> bool:
        """True when the outputs differ beyond what the dtype's precision explains."""
        cos_min, err_max = self.thresholds
        bad_cos = not math.isnan(self.cosine) and self.cosine < cos_min
        bad_err = math.isnan(self.rel_l2) or self.rel_l2 > err_max
        return bad_cos or bad_err or self.rows_zeroed > 0 or self.nonfinite > 0

    def describe(self) -> str:
        """`17 of 32 rows of output 0 became 0; output cosine 0.52, relative L2 error 71%`."""
        parts = []
        if self.rows_zeroed:
            parts.append(f"{count(self.rows_zeroed)} of {count(self.rows)} rows of {self.output} became 0")
        if self.nonfinite:
            parts.append(f"{count(self.nonfinite)} values of {self.output} are NaN or Inf where float32 is finite")
        err = "NaN" if math.isnan(self.rel_l2) else percent(min(self.rel_l2, 99.99))
        cos = "undefined" if math.isnan(self.cosine) else f"{self.cosine:.4g}"
        where = "output" if self.outputs == 1 else f"{self.output}"
        parts.append(f"{where} cosine {cos}, relative L2 error {err} against float32")
        text = "; ".join(parts)
        return text + (" (from output statistics)" if self.source == "statistics" else "")

    def verdict(self) -> str:
        """The comparison and whether it passes the dtype's thresholds."""
        cos_min, err_max = self.thresholds
        limits = f"{self.dtype} thresholds: cosine >= {cos_min:g}, error <= {percent(err_max)}"
        return f"{self.describe()} ({'beyond' if self.damaged else 'within'} {limits})"

    def to_json(self) -> dict[str, object]:
        """JSON-safe: an undefined cosine or an infinite error is null (reports are written with allow_nan off)."""
        def num(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {"dtype": self.dtype, "output": self.output, "cosine": num(self.cosine), "rel_l2": num(self.rel_l2),
                "rows_zeroed": self.rows_zeroed, "rows": self.rows, "nonfinite": self.nonfinite,
                "source": self.source, "damaged": self.damaged}


def _one(target: np.ndarray, reference: np.ndarray) -> tuple[float, float, int, int, int]:
    """(cosine, relative L2 error, rows zeroed, rows, non-finite where the reference is finite) of one output."""
    t = np.asarray(target, dtype=np.float64).reshape(-1)
    r = np.asarray(reference, dtype=np.float64).reshape(-1)
    rfin = np.isfinite(r)
    bad = ~np.isfinite(t) & rfin
    nonfinite = int(bad.sum())
    # a NaN/Inf where the reference is finite carries none of the reference's value: it counts as 0 here, so
    # an all-NaN output is 100% error with an undefined cosine, never "cosine 1"
    tf = np.where(rfin & ~bad, t, 0.0)
    rf = np.where(rfin, r, 0.0)
    rn, tn = float(np.linalg.norm(rf)), float(np.linalg.norm(tf))
    diff = float(np.linalg.norm(tf - rf))
    if rn == 0.0:
        rel = (0.0 if diff == 0.0 else math.inf) if not nonfinite else 1.0
        cos = (1.0 if tn == 0.0 else 0.0) if not nonfinite else math.nan
    else:
        rel = diff / rn
        cos = float(np.dot(tf, rf) / (tn * rn)) if tn > 0 else math.nan
    shape = np.shape(target)
    zeroed = rows = 0
    if len(shape) >= 2 and shape[-1] > 0:
        t2 = np.asarray(target, dtype=np.float64).reshape(-1, shape[-1])
        r2 = np.asarray(reference, dtype=np.float64).reshape(-1, shape[-1])
        rows = t2.shape[0]
        zeroed = int(((t2 == 0).all(axis=1) & ~(r2 == 0).all(axis=1)).sum())
    return cos, rel, zeroed, rows, nonfinite


def compare_outputs(targets: Sequence[np.ndarray], references: Sequence[np.ndarray], dtype: str,
                    names: Sequence[str] | None = None) -> OutputEffect | None:
    """The worst of the floating outputs the two runs share (same shapes), or None when there is none."""
    worst: tuple[tuple[bool, float], OutputEffect] | None = None
    pairs = [(i, t, r) for i, (t, r) in enumerate(zip(targets, references)) if np.shape(t) == np.shape(r)
             and np.size(t) > 0]
    for i, t, r in pairs:
        cos, rel, zeroed, rows, nonfinite = _one(t, r)
        name = names[i] if names is not None and i < len(names) else f"output {i}"
        eff = OutputEffect(dtype, name, cos, rel, zeroed, rows, nonfinite, len(pairs))
        rank = (eff.damaged, rel if not math.isnan(rel) else math.inf)
        if worst is None or rank > worst[0]:
            worst = (rank, eff)
    return worst[1] if worst is not None else None


@dataclass(frozen=True, slots=True)
class OpStats:
    """The few statistics of one op output the divergence test reads."""

    l2norm: float
    zero_count: float
    numel: float


def divergence(target: OpStats, reference: OpStats, dtype: str) -> str | None:
    """What differs measurably between an op's output in the two runs (new zeros, a changed L2 norm), or None."""
    _, err_max = PRECISION.get(dtype, PRECISION["float16"])
    if target.numel != reference.numel or target.numel <= 0:
        return None
    new_zeros = target.zero_count - reference.zero_count
    if new_zeros > 0 and new_zeros >= max(1.0, 0.001 * target.numel):
        return f"{count(int(target.zero_count))} zeros (float32: {count(int(reference.zero_count))})"
    t, r = target.l2norm, reference.l2norm
    if math.isfinite(t) and math.isfinite(r) and r > 0 and abs(t - r) / r > 2 * err_max:
        return f"L2 norm {t:.4g} (float32: {r:.4g})"
    return None
