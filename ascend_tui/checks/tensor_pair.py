"""One tensor pair up close: histograms of its absolute and relative error, its worst elements, both sides' statistics.

Pure numpy, fed in chunks of the flattened data (`PairAccumulator.feed`) so a tensor larger than
memory is read once. The error of an element is |target - golden| in float64; an element where both
sides are NaN, or both the same Inf, agrees (error 0), as msprobe zeroes them; one side NaN (or
Inf against a finite or opposite Inf) is a *non-finite mismatch*: counted apart, never put in a
bin, and ranked worst among the top-k. The relative error is |t - g| / |g|, and where the golden
value is 0 it is |t| / eps of the compared dtype, as msprobe's MaxRelativeErr adds eps there.
Histogram bins are fixed decades (a fixed edge set lets chunks add up), exact zeros apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

LOW_DECADE = -12  # errors below 1e-12 (but above 0) fall in the first bin
HIGH_DECADE = 12  # errors at or above 1e12 fall in the last bin
BINS_PER_DECADE = 2
TOP_K = 20


@dataclass(frozen=True, slots=True)
class Histogram:
    """Counts of an error over log bins: `edges[i] <= e < edges[i + 1]` in `counts[i]`; zeros and mismatches apart.

    The first bin also holds every positive error below `edges[0]` and the last every one at or above
    `edges[-1]` (its upper edge is inf); `trimmed()` drops the empty bins at both ends for drawing.
    """

    edges: tuple[float, ...]
    counts: tuple[int, ...]
    zeros: int
    nonfinite: int

    @property
    def total(self) -> int:
        return sum(self.counts) + self.zeros + self.nonfinite

    def trimmed(self) -> Histogram:
        """The same histogram without its empty bins at either end (all bins when none is filled)."""
        filled = [i for i, c in enumerate(self.counts) if c]
        if not filled:
            return self
        lo, hi = filled[0], filled[-1] + 1
        return Histogram(self.edges[lo:hi + 1], self.counts[lo:hi], self.zeros, self.nonfinite)


@dataclass(frozen=True, slots=True)
class Worst:
    """One of the worst elements: its index in the tensor's shape, both values and its errors (NaN: mismatch)."""

    index: tuple[int, ...]
    flat: int
    target: float
    golden: float
    abs_err: float
    rel_err: float


@dataclass(frozen=True, slots=True)
class SideStats:
    """Summary statistics of one side over its finite values, with counts of what is not finite."""

    numel: int
    max: float
    min: float
    mean: float
    l2norm: float
    nan: int
    posinf: int
    neginf: int
    zeros: int

    @property
    def finite(self) -> int:
        return self.numel - self.nan - self.posinf - self.neginf


@dataclass(frozen=True, slots=True)
class PairDetail:
    """Everything the tensor-pair screen shows: both histograms, the top-k worst elements, both sides' statistics."""

    shape: tuple[int, ...]
    numel: int
    abs_hist: Histogram
    rel_hist: Histogram
    worst: tuple[Worst, ...]
    target: SideStats
    golden: SideStats
    nonfinite_mismatch: int
    first_mismatch: tuple[int, ...] | None
    max_abs: float
    max_rel: float
    mean_abs: float


def log_edges(low: int = LOW_DECADE, high: int = HIGH_DECADE, per_decade: int = BINS_PER_DECADE) -> np.ndarray:
    """The fixed histogram edges: 10**low ... 10**high, `per_decade` bins a decade."""
    return 10.0 ** (np.arange(low * per_decade, high * per_decade + 1) / per_decade)


class _Side:
    """Running statistics of one side."""

    __slots__ = ("numel", "max", "min", "sum", "sq", "nan", "posinf", "neginf", "zeros")

    def __init__(self) -> None:
        self.numel = self.nan = self.posinf = self.neginf = self.zeros = 0
        self.max, self.min, self.sum, self.sq = -math.inf, math.inf, 0.0, 0.0

    def feed(self, x: np.ndarray) -> None:
        self.numel += x.size
        nan, pinf, ninf = np.isnan(x), np.isposinf(x), np.isneginf(x)
        self.nan += int(nan.sum())
        self.posinf += int(pinf.sum())
        self.neginf += int(ninf.sum())
        fin = x[~(nan | pinf | ninf)]
        self.zeros += int(np.count_nonzero(fin == 0))
        if fin.size:
            self.max = max(self.max, float(fin.max()))
            self.min = min(self.min, float(fin.min()))
            self.sum += float(fin.sum())
            self.sq += float(np.einsum("i,i->", fin, fin))

    def result(self) -> SideStats:
        finite = self.numel - self.nan - self.posinf - self.neginf
        if not finite:
            return SideStats(self.numel, math.nan, math.nan, math.nan, math.nan, self.nan, self.posinf, self.neginf,
                             self.zeros)
        return SideStats(self.numel, self.max, self.min, self.sum / finite, math.sqrt(self.sq), self.nan,
                         self.posinf, self.neginf, self.zeros)


class PairAccumulator:
    """The detail of a tensor pair fed in equal-length 1-D chunks of the flattened target and golden data."""

    def __init__(self, shape: tuple[int, ...], eps: float = float(np.finfo(np.float32).eps), k: int = TOP_K,
                 edges: np.ndarray | None = None) -> None:
        self.shape = tuple(int(d) for d in shape)
        self.numel = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        self.eps = float(eps)
        self.k = int(k)
        self.edges = log_edges() if edges is None else np.asarray(edges, dtype=np.float64)
        self.abs_counts = np.zeros(self.edges.size - 1, np.int64)
        self.rel_counts = np.zeros(self.edges.size - 1, np.int64)
        self.abs_zeros = self.rel_zeros = self.mismatch = 0
        self.first_mismatch: int | None = None
        self.max_abs = self.max_rel = -math.inf
        self.sum_abs = 0.0
        self.seen = 0
        self.t, self.g = _Side(), _Side()
        self._top: list[tuple[float, int, float, float, float, float]] = []  # (rank, flat, t, g, abs, rel)

    def feed(self, target: np.ndarray, golden: np.ndarray) -> None:
        """Add the next chunk (equal-length 1-D arrays, any numeric dtype)."""
        t = np.asarray(target, dtype=np.float64).reshape(-1)
        g = np.asarray(golden, dtype=np.float64).reshape(-1)
        if t.size != g.size:
            raise ValueError(f"chunks of different lengths ({t.size} and {g.size})")
        offset = self.seen
        self.seen += t.size
        self.t.feed(t)
        self.g.feed(g)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            err = np.abs(t - g)
            same = (t == g) | (np.isnan(t) & np.isnan(g))  # equal Infs and NaN against NaN agree
            err[same] = 0.0
            bad = ~np.isfinite(err)
            rel = np.where(g != 0, err / np.abs(g), np.abs(t) / self.eps)
            rel[same] = 0.0
        rel[bad] = np.nan
        err[bad] = np.nan
        nbad = int(bad.sum())
        if nbad:
            self.mismatch += nbad
            if self.first_mismatch is None:
                self.first_mismatch = offset + int(np.flatnonzero(bad)[0])
        good = ~bad
        e, r = err[good], rel[good]
        self.abs_zeros += int(np.count_nonzero(e == 0))
        self.rel_zeros += int(np.count_nonzero(r == 0))
        self.abs_counts += _bin(e, self.edges)
        self.rel_counts += _bin(r, self.edges)
        if e.size:
            self.max_abs = max(self.max_abs, float(e.max()))
            self.sum_abs += float(e.sum())
        if r.size:
            self.max_rel = max(self.max_rel, float(r.max()))
        self._keep_top(t, g, err, rel, offset)

    def _keep_top(self, t: np.ndarray, g: np.ndarray, err: np.ndarray, rel: np.ndarray, offset: int) -> None:
        """Merge this chunk's k worst elements (mismatches first, then by absolute error) into the running top-k."""
        rank = np.where(np.isnan(err), np.inf, err)
        k = min(self.k, rank.size)
        if k == 0:
            return
        pick = np.argpartition(-rank, k - 1)[:k] if rank.size > k else np.arange(rank.size)
        pick = pick[rank[pick] > 0]
        self._top.extend((float(rank[i]), offset + int(i), float(t[i]), float(g[i]), float(err[i]), float(rel[i]))
                         for i in pick)
        self._top.sort(key=lambda x: (-x[0], x[1]))
        del self._top[self.k:]

    def result(self) -> PairDetail:
        """The detail of everything fed so far."""
        edges = tuple(float(x) for x in self.edges)
        good = self.seen - self.mismatch
        worst = tuple(Worst(unravel(flat, self.shape), flat, t, g, a, r) for _rank, flat, t, g, a, r in self._top)
        first = unravel(self.first_mismatch, self.shape) if self.first_mismatch is not None else None
        return PairDetail(
            self.shape, self.seen,
            Histogram(edges, tuple(int(c) for c in self.abs_counts), self.abs_zeros, self.mismatch),
            Histogram(edges, tuple(int(c) for c in self.rel_counts), self.rel_zeros, self.mismatch),
            worst, self.t.result(), self.g.result(), self.mismatch, first,
            self.max_abs if good else math.nan, self.max_rel if self.max_rel > -math.inf else math.nan,
            self.sum_abs / good if good else math.nan)


def _bin(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Counts of the positive values in the bins of `edges` (below the first edge: bin 0; at/above the last: the last)."""
    pos = values[values > 0]
    n = edges.size - 1
    if not pos.size:
        return np.zeros(n, np.int64)
    idx = np.searchsorted(edges, pos, side="right") - 1
    np.clip(idx, 0, n - 1, out=idx)
    return np.bincount(idx, minlength=n).astype(np.int64)


def unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The index in `shape` of flat (C-order) position `flat`; () for a 0-d tensor."""
    if not shape:
        return ()
    return tuple(int(i) for i in np.unravel_index(int(flat), shape))


def pair_detail(target: Any, golden: Any, *, eps: float | None = None, k: int = TOP_K,
                chunk: int = 1 << 20) -> PairDetail:
    """The detail of two whole arrays of the same number of elements (the target's shape names the indices)."""
    t, g = np.asarray(target), np.asarray(golden)
    if t.size != g.size:
        raise ValueError(f"the two tensors have {t.size} and {g.size} elements")
    if eps is None:
        kinds = [a.dtype for a in (t, g) if a.dtype.kind == "f"]
        eps = float(np.finfo(np.result_type(*kinds, np.float32)).eps) if kinds else float(np.finfo(np.float64).eps)
    acc = PairAccumulator(t.shape, eps, k)
    ft, fg = t.reshape(-1), g.reshape(-1)
    for start in range(0, ft.size, chunk):
        acc.feed(ft[start:start + chunk], fg[start:start + chunk])
    return acc.result()
