"""Per-output statistics and log2-magnitude histograms, taken at the cost of about one read of each output.

Three routes, one result (min, max, sum, L2 norm, NaN/Inf/zero counts; all in float32 values,
sums accumulated in float64):
- small CPU tensors are copied (one `memmove`, no torch call) into a per-dtype host batch
  and reduced all together with vectorised numpy passes when the batch fills or the run ends;
- large CPU tensors are reduced in cache-sized chunks, so the output is read from memory once
  (`live/chunked_stats.py`);
- on accelerators the reductions stay queued on the device (`tensor_stats_row`): no sync per op.
"""

from __future__ import annotations

import ctypes
import functools
import math
from typing import Any

import numpy as np

from ascend_tui.evidence import HIST_BINS, HIST_EDGES_LOG2, HIST_SAMPLE
from ascend_tui.live.chunked_stats import CHUNK, cpu_stats_chunked, raw_view, view_stats

__all__ = ["CHUNK", "SMALL", "HostBatch", "cpu_stats_chunked", "flushed_by_cast", "histogram_row", "histogram_sample",
           "negated", "raw_histogram", "raw_view", "sample_of", "tensor_stats_row", "view_stats"]

SMALL = 8192  # elements: up to this a copy into the host batch beats a handful of torch calls
BATCH_BYTES = 32 << 20  # host batch size per dtype before it is reduced and reused (a 1 MiB batch, reduced while in
# the cache, took ~10k page faults a Llama step: glibc mapped and unmapped each block's same-size 2 MiB temporaries)
_RUN = 64
# The bin of every float32 biased exponent (a positive float's bits >> 23): floor(log2|x|) = e - 127.
_BIN_OF_EXPONENT = np.clip((np.arange(256) - 127 - HIST_EDGES_LOG2[0]) // (HIST_EDGES_LOG2[1] - HIST_EDGES_LOG2[0]) + 1,
                           0, HIST_BINS - 1)
_BIN_CODE = _BIN_OF_EXPONENT.astype(np.uint8)
_SKIP = 15  # bin code of zeros and NaN: past every real bin, counted and dropped


# -- the host batch (small CPU tensors) ----------------------------------------------------------


class _Arena:
    """Raw elements of one dtype, back to back, and where each tensor starts."""

    __slots__ = ("np_dtype", "kind", "itemsize", "buf", "addr", "used", "starts", "slots", "hist")

    def __init__(self, np_dtype: Any, kind: str) -> None:
        self.np_dtype, self.kind = np.dtype(np_dtype), kind
        self.itemsize = self.np_dtype.itemsize
        self.buf = np.empty(SMALL * 4, dtype=self.np_dtype)
        self.addr = self.buf.ctypes.data
        self.used = 0
        self.starts: list[int] = []
        self.slots: list[int] = []
        self.hist: list[bool] = []


class HostBatch:
    """Statistics (and histograms) of small CPU tensors, reduced in batches with numpy.

    `add` copies a tensor's elements and returns its slot; `rows()` / `histograms()` give the
    finished rows by slot. Copying is one `memmove` of the tensor's bytes (never a numpy view of
    the user's tensor: that would make its storage non-resizable).
    """

    def __init__(self, torch: Any, flush_below: float | None = None, flush_dtype: str = "") -> None:
        self._torch = torch
        self.flush_below = flush_below  # also count, per floating tensor, what a narrower dtype flushes
        self.flush_dtype = flush_dtype  # ... by casting to it (round to nearest even), when it is known
        self._kinds = {torch.float32: (np.float32, "f"), torch.float16: (np.float16, "f"),
                       torch.float64: (np.float64, "f"), torch.bfloat16: (np.uint16, "bf"),
                       torch.int64: (np.int64, "i"), torch.int32: (np.int32, "i"), torch.int16: (np.int16, "i"),
                       torch.int8: (np.int8, "i"), torch.uint8: (np.uint8, "i"), torch.bool: (np.uint8, "i")}
        self._arenas: dict[Any, _Arena] = {}
        self._negate: list[int] = []
        self._values = np.empty((256, 7), dtype=np.float64)
        self._hist = np.zeros((256, HIST_BINS + 1), dtype=np.int64)
        self._evidence = np.zeros((256, 3), dtype=np.float64)
        self._n = 0

    def add(self, t: Any, hist: bool, negate: bool = False) -> int | None:
        """Copy a small contiguous CPU tensor in and return its slot; None when it does not fit this route.

        `negate`: the values are the negatives of what the memory holds (a negated view).
        """
        arena = self._arenas.get(t.dtype)
        if arena is None:
            kind = self._kinds.get(t.dtype)
            if kind is None:
                return None
            arena = self._arenas[t.dtype] = _Arena(*kind)
        n = t.numel()
        try:
            ptr = t.data_ptr()
        except RuntimeError:  # no plain storage (a wrapper subclass): the torch route measures it
            return None
        if ptr == 0:
            return None
        if arena.used + n > arena.buf.size:
            self._grow(arena, n)
        ctypes.memmove(arena.addr + arena.used * arena.itemsize, ptr, n * arena.itemsize)
        slot = self._n
        self._n += 1
        if slot >= self._values.shape[0]:
            self._values = np.concatenate([self._values, np.empty_like(self._values)])
            self._hist = np.concatenate([self._hist, np.zeros_like(self._hist)])
            self._evidence = np.concatenate([self._evidence, np.zeros_like(self._evidence)])
        arena.starts.append(arena.used)
        arena.slots.append(slot)
        arena.hist.append(hist and arena.kind != "i")
        arena.used += n
        if negate:
            self._negate.append(slot)
        return slot

    def _grow(self, arena: _Arena, n: int) -> None:
        if (arena.used + n) * arena.itemsize > BATCH_BYTES:
            self._reduce(arena)
        if arena.used + n > arena.buf.size:
            bigger = np.empty(max(2 * arena.buf.size, arena.used + n), dtype=arena.np_dtype)
            bigger[: arena.used] = arena.buf[: arena.used]
            arena.buf, arena.addr = bigger, bigger.ctypes.data

    def evidence(self) -> np.ndarray:
        """Per slot of a floating tensor: values below `flush_below` but not zero, non-zero values, smallest |x| > 0."""
        self.finish()
        return self._evidence[: self._n]

    def finish(self) -> tuple[np.ndarray, np.ndarray]:
        """(values [slots, 7]: min, max, sum, norm, nan, inf, zeros; histograms [slots, HIST_BINS + 1])."""
        for arena in self._arenas.values():
            self._reduce(arena)
        if self._negate:
            negated(self._values[self._negate], out=self._values, rows=self._negate)
            self._negate = []
        return self._values[: self._n], self._hist[: self._n]

    def _reduce(self, arena: _Arena) -> None:
        """Reduce every pending tensor of `arena` into its rows, then empty the arena.

        The tensors are reduced a block of about `CHUNK` values at a time: each block's float64
        copy and masks stay in the cache for every pass (one pass over the whole 32 MiB arena
        made temporaries of up to 256 MiB and ran at memory speed, ~40 ns a value on a busy VM).
        """
        if not arena.starts:
            return
        starts = np.asarray(arena.starts, dtype=np.int64)
        slots = np.asarray(arena.slots, dtype=np.int64)
        want = np.asarray(arena.hist, dtype=bool)
        ends = np.append(starts[1:], arena.used)
        first = 0
        while first < len(starts):
            last = int(np.searchsorted(starts, starts[first] + CHUNK, side="left"))
            last = max(last, first + 1)
            self._reduce_block(arena, starts[first:last], ends[first:last], slots[first:last], want[first:last])
            first = last
        arena.used = 0
        arena.starts, arena.slots, arena.hist = [], [], []

    def _reduce_block(self, arena: _Arena, starts: np.ndarray, ends: np.ndarray, slots: np.ndarray,
                      want: np.ndarray) -> None:
        """Rows (and histograms) of the consecutive tensors `starts`..`ends` of `arena`."""
        lo = int(starts[0])
        data = arena.buf[lo: int(ends[-1])]
        starts = starts - lo
        if arena.kind == "bf":
            a = (data.astype(np.uint32) << 16).view(np.float32)
        else:
            a = data.astype(np.float32, copy=False)
        out = np.empty((len(starts), 7), dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            out[:, 0] = np.minimum.reduceat(a, starts)
            out[:, 1] = np.maximum.reduceat(a, starts)
            wide = a.astype(np.float64)
            out[:, 2] = np.add.reduceat(wide, starts)
            np.multiply(wide, wide, out=wide)
            out[:, 3] = np.sqrt(np.add.reduceat(wide, starts))
        out[:, 6] = _zeros_by_segment(a, starts)
        out[:, 4:6] = 0
        if arena.kind != "i" and not np.isfinite(out[:, 2]).all():
            out[:, 4] = np.add.reduceat(np.isnan(a), starts, dtype=np.int64)
            out[:, 5] = np.add.reduceat(np.isinf(a), starts, dtype=np.int64)
        self._values[slots] = out
        if self.flush_below is not None and arena.kind != "i":
            self._evidence[slots] = _evidence_rows(data if arena.kind == "f" and data.dtype == np.float64 else a,
                                                   starts, self.flush_below, self.flush_dtype)
        if want.any():
            self._hist[slots[want]] = _batch_histograms(a, starts[want], (ends - lo - starts)[want])


def _zeros_by_segment(a: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """How many zeros each segment of `a` (from each of `starts` to the next) holds.

    Most outputs hold none: one count over the block says so (a casting `reduceat` of the mask
    cost ~1.6 ns a value, the largest pass of a block); a few are found by position.
    """
    zero = a == 0
    total = int(np.count_nonzero(zero))
    if total == 0:
        return np.zeros(len(starts), dtype=np.int64)
    if total <= a.size // 64:
        return np.diff(np.searchsorted(np.flatnonzero(zero), np.append(starts, a.size))).astype(np.int64)
    return np.add.reduceat(zero, starts, dtype=np.int64)


def flushed_by_cast(v: np.ndarray, dtype: str, flush_below: float) -> np.ndarray:
    """Which magnitudes `v` a cast to `dtype` rounds to zero (round to nearest even: subnormals and ties included)."""
    if dtype == "float16":
        return v.astype(np.float16) == 0
    if dtype == "bfloat16":  # the top half of a float32, rounded to nearest even
        bits = v.astype(np.float32).view(np.uint32)
        rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16
        return (rounded & np.uint32(0x7FFF)) == 0
    return v <= flush_below / 2  # no such dtype here: at most half the smallest subnormal (the tie) rounds to 0


def _evidence_rows(a: np.ndarray, starts: np.ndarray, flush_below: float, dtype: str = "") -> np.ndarray:
    """(flushed, non-zero, smallest non-zero |x|) per segment, as `EvidenceObserver` measures one tensor."""
    v = np.abs(a)
    nonzero = v != 0  # NaN counts as non-zero, and makes the smallest NaN, as the torch route does
    out = np.empty((len(starts), 3), dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        flushed = flushed_by_cast(v, dtype, flush_below)
    out[:, 0] = np.add.reduceat(nonzero & flushed, starts, dtype=np.int64)
    out[:, 1] = np.add.reduceat(nonzero, starts, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        out[:, 2] = np.minimum.reduceat(np.where(nonzero, v, np.inf), starts)
    return out


def _batch_histograms(a: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """`histogram_row` for many segments of one float32 array at once (same sample, same bins).

    A segment of at most `HIST_SAMPLE` values is its own sample: every value gets a bin code
    (`_SKIP` for zeros and NaN, which are left out) and one `bincount` of segment * 16 + code
    counts them all. A longer segment is binned alone by `raw_histogram` (a gather of every long
    segment's runs by one index array, then one `bincount`, ran at memory speed: twice as slow).
    """
    rows = len(starts)
    out = np.zeros((rows, HIST_BINS + 1), dtype=np.int64)
    whole = lens <= HIST_SAMPLE
    if whole.any():
        idx = np.flatnonzero(whole)
        parts = [a[int(s): int(s + n)] for s, n in zip(starts[idx], lens[idx])] if not whole.all() else None
        values = np.concatenate(parts) if parts is not None else a[int(starts[0]): int(starts[-1] + lens[-1])]
        if parts is None and not np.array_equal(starts[1:], starts[:-1] + lens[:-1]):
            values = np.concatenate([a[int(s): int(s + n)] for s, n in zip(starts, lens)])
        key = np.repeat(np.arange(len(idx), dtype=np.int32) * 16, lens[idx])
        key += _bin_codes(values)
        counts = np.bincount(key, minlength=16 * len(idx)).reshape(len(idx), 16)
        out[idx, :HIST_BINS] = counts[:, :HIST_BINS]
        out[idx, HIST_BINS] = counts[:, :HIST_BINS].sum(axis=1)
    for r in np.flatnonzero(~whole):  # its evenly spaced runs read through a strided view, binned by exponent
        start = int(starts[r])
        out[r] = raw_histogram(a[start: start + int(lens[r])])
    return out


def _bin_codes(a: np.ndarray) -> np.ndarray:
    """The histogram bin of every float32 value as uint8; `_SKIP` for zeros and NaN (left out)."""
    bits = a.view(np.uint32) & np.uint32(0x7FFFFFFF)  # |x|
    codes = _BIN_CODE[bits >> 23]
    codes[(bits == 0) | (bits > 0x7F800000)] = _SKIP
    return codes


@functools.lru_cache(maxsize=256)
def _sample_offsets(n: int) -> np.ndarray:
    """Offsets of `HIST_SAMPLE // _RUN` evenly spaced runs of `_RUN` consecutive elements of `n`
    (an equal step between runs, so a strided view can read the same sample: `sample_of`)."""
    starts = np.arange(HIST_SAMPLE // _RUN, dtype=np.int64) * _run_step(n)
    return (starts[:, None] + np.arange(_RUN)).ravel()


def _run_step(n: int) -> int:
    return (n - _RUN) // (HIST_SAMPLE // _RUN - 1)


def negated(values: np.ndarray, *, out: np.ndarray | None = None, rows: Any = None) -> np.ndarray:
    """Rows (min, max, sum, norm, nan, inf, zeros) of memory turned into those of its negated view."""
    flipped = values.copy()
    flipped[..., 0], flipped[..., 1], flipped[..., 2] = -values[..., 1], -values[..., 0], -values[..., 2]
    if out is not None:
        out[rows] = flipped
    return flipped


def sample_of(view: np.ndarray) -> np.ndarray:
    """The values `histogram_row` bins from a flat array: all of them, or (as a strided view, no copy) the
    64 evenly spaced runs of 64 `_sample_offsets` names."""
    n = view.size
    if n <= HIST_SAMPLE:
        return view
    item = view.itemsize  # (np.ndarray over the view's buffer: a fifth of as_strided's cost)
    return np.ndarray((HIST_SAMPLE // _RUN, _RUN), view.dtype, view, 0, (_run_step(n) * item, item))


_BIN_STARTS = np.flatnonzero(np.diff(_BIN_OF_EXPONENT, prepend=-1))  # each bin's first exponent (bins are runs)


def raw_histogram(view: np.ndarray, sampled: bool = False) -> np.ndarray:
    """`histogram_row` of a raw float32 view (or of its `sample_of`, when `sampled`), binned by numpy:
    one `bincount` of sign and biased exponent (the sign folded after), then zeros (exponent 0) and NaN
    (exponent 255) taken out; |x| is computed only when there are any."""
    sample = view if sampled else sample_of(view)
    bits = sample.view(np.uint32)
    counts = np.bincount((bits >> 23).ravel(), minlength=512)
    exponents = counts[:256] + counts[256:]
    row = np.empty(HIST_BINS + 1, dtype=np.int64)
    row[:HIST_BINS] = np.add.reduceat(exponents, _BIN_STARTS)
    left_out = 0
    if exponents[0] or exponents[255]:
        magnitude = bits & np.uint32(0x7FFFFFFF)
        if exponents[0]:
            zeros = int(np.count_nonzero(magnitude == 0))
            row[_BIN_OF_EXPONENT[0]] -= zeros
            left_out += zeros
        if exponents[255]:
            nan = int(np.count_nonzero(magnitude > 0x7F800000))
            row[_BIN_OF_EXPONENT[255]] -= nan
            left_out += nan
    row[HIST_BINS] = bits.size - left_out
    return row


# -- accelerators: queued on the device ----------------------------------------------------------


def tensor_stats_row(torch: Any, t: Any) -> tuple[Any, Any] | None:
    """Reductions of `t` on its own device: min, max, sum, L2 norm, and the NaN, Inf and zero counts.

    Returns (float32 [min, max, sum, norm], int64 [nan, inf, zeros]), or None for tensors without
    numbers to reduce (empty, complex, meta). Every reduction stays queued on the device (no sync).
    """
    if t.is_complex() or t.device.type == "meta" or t.layout != torch.strided:
        return None
    n = t.numel()
    if n == 0:
        return None
    x = t.detach()
    if x.dtype != torch.float32:
        x = x.float()  # float64 too: one dtype for every row, and NPUs have no float64 reductions
    count = torch.int32 if n < 2**31 else torch.int64  # a bool sum into int32 is 4x faster than int64
    mn, mx = torch.aminmax(x)
    values = torch.stack((mn, mx, x.sum(), torch.linalg.vector_norm(x)))
    counts = torch.stack((torch.isnan(x).sum(dtype=count), torch.isinf(x).sum(dtype=count),
                          (x == 0).sum(dtype=count)))
    # Counts stay integers: float32 is exact only up to 2**24, and activations are larger than that.
    return values, counts.long()


def histogram_row(torch: Any, t: Any) -> Any | None:
    """log2|x| bin counts of an evenly strided sample of a floating tensor, then the sample's size.

    A sample keeps the cost per op small and fixed. On accelerators the counts are queued on the
    device like the statistics (a torch tensor); on the CPU numpy does it without torch's per-op
    overhead (a numpy array). Zeros and NaN are left out (the statistics count them); Inf falls
    in the top bin.
    """
    if not t.is_floating_point() or t.numel() == 0 or not t.is_contiguous() or t.device.type == "meta":
        return None
    flat = t.detach().reshape(-1)
    n = flat.numel()
    if flat.device.type == "cpu":
        # Never call .numpy() on the user's tensor: sharing its storage with numpy makes it
        # non-resizable (resize_ would then fail); gather or copy a sample of our own first.
        if n > HIST_SAMPLE:  # 64 evenly spaced runs of 64: a few cache lines each, not 4096 scattered reads
            sample = flat.index_select(0, _sample_index(torch, n)).float()
        else:
            sample = flat.to(torch.float32, copy=True)
        return raw_histogram(sample.numpy(), sampled=True)
    sample = flat[:: max(1, n // HIST_SAMPLE)][:HIST_SAMPLE]
    sample = torch.nan_to_num(sample.float().abs(), nan=0.0, posinf=math.inf)
    bins = torch.bucketize(sample, _hist_edges(torch, sample.device), right=True)
    counts = torch.bincount(bins, minlength=HIST_BINS + 1)[: HIST_BINS + 1].clone()
    zeros = (sample == 0).sum()
    counts[0] -= zeros  # zeros (and NaN) landed in the first bin
    counts[HIST_BINS] = sample.numel() - zeros
    return counts


def histogram_sample(torch: Any, t: Any) -> Any:
    """The values `histogram_row` bins for a contiguous CPU tensor larger than the sample: evenly spaced
    runs, gathered into a tensor of our own (for a host batch to bin with everything else)."""
    return t.detach().reshape(-1).index_select(0, _sample_index(torch, t.numel()))


@functools.lru_cache(maxsize=256)
def _sample_index(torch: Any, n: int) -> Any:
    return torch.from_numpy(_sample_offsets(n))


_EDGES: dict[Any, Any] = {}


def _hist_edges(torch: Any, device: Any) -> Any:
    edges = _EDGES.get(device)
    if edges is None:
        edges = _EDGES[device] = torch.tensor([2.0 ** e for e in HIST_EDGES_LOG2], device=device)
    return edges
