"""How far two runs in different dtypes may differ from rounding alone: the expected band of every compare metric.

Rounding a real x to a floating dtype with unit roundoff u gives x(1 + d) with |d| <= u (plus an
absolute `tiny` for values in the subnormal range), so for a rounded tensor x' of x:
|max' - max| <= u |max|, the same for min; |mean' - mean| <= u mean(|x|) <= u rms(x); and
| ||x'|| - ||x|| | <= ||x' - x|| <= u ||x||; per element |x' - x| / |x| <= u; cosine >= 1 - u^2 / 2.
Statistics are themselves summed in float32 (about log2(n) roundings of 2^-24 each), which widens the
mean and L2 bands by that much. A `StatsError` is the largest of these four differences, each divided by
the scale its bound uses, so a tensor differs from its golden only by rounding exactly when that error
is at most u. An op in a lower-precision run rounds its output once more than its inputs did, and a
few more times inside (a matmul's accumulation, a norm's reduction): `OP_BAND` roundings are allowed
as the error an op may add beyond what its inputs carried. Pure: floats in, floats out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

UNIT_ROUNDOFF: dict[str, float] = {
    "float64": 2.0 ** -53, "float32": 2.0 ** -24, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11,
    "float8_e4m3fn": 2.0 ** -4, "float8_e5m2": 2.0 ** -3,
}
# half the smallest subnormal spacing: below it rounding error is absolute, not relative
TINY: dict[str, float] = {"float64": 2.0 ** -1075, "float32": 2.0 ** -150, "bfloat16": 2.0 ** -134,
                          "float16": 2.0 ** -25, "float8_e4m3fn": 2.0 ** -10, "float8_e5m2": 2.0 ** -17}
OP_BAND = 8.0  # roundings an op may add beyond its inputs' error before it is said to introduce one
F32_U = 2.0 ** -24


@lru_cache(maxsize=256)
def dtype_name(dtype: str) -> str:
    """`torch.bfloat16`, `BFloat16`, `bf16`, `Float32` -> the canonical numpy-style name ('' when not a float)."""
    d = dtype.strip().lower().removeprefix("torch.").removeprefix("mindspore.")
    return {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32",
            "fp64": "float64", "double": "float64"}.get(d, d) if d else ""


def unit_roundoff(dtype: str) -> float:
    """u of a floating dtype; NaN for a dtype that is not floating (ints, bool, unknown)."""
    return UNIT_ROUNDOFF.get(dtype_name(dtype), math.nan)


def narrower(a: str, b: str) -> str:
    """Of two dtypes, the one with the larger unit roundoff (the one whose rounding explains a difference)."""
    ua, ub = unit_roundoff(a), unit_roundoff(b)
    if math.isnan(ua):
        return dtype_name(b) if not math.isnan(ub) else ""
    if math.isnan(ub):
        return dtype_name(a)
    return dtype_name(a) if ua >= ub else dtype_name(b)


@dataclass(frozen=True, slots=True)
class Band:
    """The expected difference of one compared tensor: `u` of the narrower dtype, and the statistics band."""

    dtype: str
    u: float
    tiny: float
    numel: int
    stats: float = field(init=False)  # largest `stats_error` of a rounded tensor: u plus float32 summation slack

    def __post_init__(self) -> None:
        object.__setattr__(self, "stats", self.u + max(1.0, math.log2(max(self.numel, 2))) * F32_U)

    @property
    def cosine_min(self) -> float:
        """Least cosine of a tensor rounded to this dtype against the original."""
        return 1.0 - 0.5 * self.u * self.u - 1e-12

    @property
    def rel_l2(self) -> float:
        """Largest ||x' - x|| / ||x|| of a rounded tensor."""
        return self.u


def band(target_dtype: str, golden_dtype: str, numel: int) -> Band:
    """The band of a pair: the narrower of the two dtypes (same dtypes: that dtype's own roundoff)."""
    d = narrower(target_dtype, golden_dtype)
    u = UNIT_ROUNDOFF.get(d, math.nan)
    return Band(d, u, TINY.get(d, 0.0), max(int(numel), 1))


def _rel(d: float, scale: float, tiny: float) -> float:
    """|d| over a scale, with the absolute `tiny` of subnormals taken off first."""
    d = max(0.0, abs(d) - tiny)
    if d == 0.0:
        return 0.0
    return d / scale if scale > 0 else math.inf


def stats_error(target: Sequence[float | None], golden: Sequence[float | None], numel: int,
                tiny: float = 0.0) -> float:
    """Largest of |dmax|, |dmin| over the golden absmax, |dmean| over its rms, |dL2| over its L2 (NaN: unknown).

    `target`/`golden` are (max, min, mean, L2 norm). Each difference is divided by the scale of its
    rounding bound, so the value is directly comparable to the unit roundoff.
    """
    vals = [None if v is None else float(v) for v in (*target[:4], *golden[:4])]
    if len(vals) < 8 or any(v is None or not math.isfinite(v) for v in vals):
        return math.nan
    tmax, tmin, tmean, tnorm, gmax, gmin, gmean, gnorm = vals  # type: ignore[misc]
    amax = max(abs(gmax), abs(gmin))  # type: ignore[arg-type]
    rms = gnorm / math.sqrt(max(numel, 1))  # type: ignore[operator]
    errs = [_rel(tmax - gmax, amax, tiny), _rel(tmin - gmin, amax, tiny),  # type: ignore[operator]
            _rel(tmean - gmean, rms, tiny),  # type: ignore[operator]
            _rel(tnorm - gnorm, gnorm, tiny * math.sqrt(max(numel, 1)))]  # type: ignore[operator]
    return max(errs)


def tensor_error(cosine: float, euc_dist: float, golden_norm: float, numel: int, tiny: float = 0.0) -> float:
    """Relative L2 error ||t - g|| / ||g|| of a pair, or from the cosine where the norm is unknown (NaN: unknown)."""
    if math.isfinite(euc_dist) and math.isfinite(golden_norm) and golden_norm > 0:
        return _rel(euc_dist, golden_norm, tiny * math.sqrt(max(numel, 1)))
    if math.isfinite(cosine):
        return math.sqrt(max(0.0, 2.0 * (1.0 - cosine)))  # the angle: ||t/|t| - g/|g||| for unit vectors
    return math.nan


def times(error: float, limit: float) -> float:
    """How many times `limit` the error is (inf for a non-zero error against a zero limit, NaN unknown)."""
    if math.isnan(error) or math.isnan(limit):
        return math.nan
    if limit <= 0:
        return 0.0 if error == 0 else math.inf
    return error / limit


def growth(out_error: float, in_errors: Sequence[float]) -> float:
    """The error an op adds beyond the worst of its inputs' (its whole output error when no input is measured)."""
    known = [e for e in in_errors if not math.isnan(e)]
    if math.isnan(out_error):
        return math.nan
    return max(0.0, out_error - max(known)) if known else out_error


@dataclass(frozen=True, slots=True)
class RowBand:
    """One compared tensor's relative error and the band rounding explains."""

    band: Band
    error: float
    dtypes_differ: bool

    @property
    def limit(self) -> float:
        return self.band.stats

    @property
    def times(self) -> float:
        """The error in units of the narrower dtype's roundoff."""
        return times(self.error, self.band.u)

    @property
    def within(self) -> bool:
        return not math.isnan(self.error) and self.error <= self.limit

    def describe(self) -> str:
        """`expected bfloat16 rounding (0.4u)` or `3.2x the bfloat16 band`."""
        if math.isnan(self.error):
            return ""
        if math.isinf(self.error):
            return f"NaN/Inf where the golden run is finite: no {self.band.dtype} rounding explains it"
        if self.within:
            return f"expected {self.band.dtype} rounding ({self.times:.2g}u)"
        return f"{times(self.error, self.limit):.1f}x the {self.band.dtype} rounding band"
