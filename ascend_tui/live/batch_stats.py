"""Statistics of many tensors with the least work per tensor: the module-level pass's reductions.

`BatchStats.add(t)` measures a floating tensor and returns its row; `finish()` gives every row at
once. On the CPU a tensor costs a handful of numpy reductions over a raw view of its memory (no
torch call, and no copy for float32), and its histogram sample is copied into one array that a
single `bincount` bins for the whole run. `add(t, later=True)` keeps a CPU tensor until the next
`flush` (a byte budget, or `finish`) and measures the batch in one loop; a kept tensor changed in
place before its flush (its version moved) is not measured, and its row is listed in `changed` (as
is one no route can measure). The coarse pass measures at once: on the CPU a batch measured no
faster than measuring between two modules (the tensor is hot in the cache then), and a caller may
change a module's output in place. On an accelerator the reductions stay queued on the device (`statistics.tensor_stats_row`
/ `histogram_row`), and `finish()` brings them to the host in one transfer per device. A histogram
bins a sample of `HIST_SAMPLE` values as every other route does, or fewer (`sample`): binning costs
about 4 ns a value, more than the statistics of a mid-sized output. Rows are (min, max, sum, norm,
nan, inf, zeros), as `stat_rows.finish_rows` takes them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ascend_tui.evidence import HIST_BINS, HIST_EDGES_LOG2, HIST_SAMPLE
from ascend_tui.live.statistics import histogram_row, raw_view, sample_of, tensor_stats_row

_RUN = 64  # consecutive values per run of a histogram sample (a cache line or four)
_BIN_VALUES = 1 << 16  # sample values binned at once (`_host_histograms`): temporaries of 256-512 KiB
_GROUP_ROWS = 63  # rows binned at once: row * 512 + key stays within int16
SAMPLE_BUDGET = 1 << 20  # sample values kept (float32: 4 MiB) before they are binned and the array reused

_COLUMNS = 1024  # a sum of squares as per-row dot products of this length: vectorised, and never BLAS's threads
# Below this magnitude neither a float32 sum nor a row's sum of squares (`_COLUMNS` values) can overflow:
# 1024 * (5e17)**2 = 2.6e38 < 3.4e38.
_NO_OVERFLOW = 5e17
_ONES = np.ones(_COLUMNS, dtype=np.float32)
_add = np.add.reduce
_all = np.logical_and.reduce
_STEP = HIST_EDGES_LOG2[1] - HIST_EDGES_LOG2[0]
_CODE = np.clip((np.arange(256) - 127 - HIST_EDGES_LOG2[0]) // _STEP + 1, 0, HIST_BINS - 1)  # bin of each exponent
_FIRST_EXPONENT = np.searchsorted(_CODE, np.arange(HIST_BINS))  # bins are runs of exponents: where each starts


class BatchStats:
    """Rows of statistics (and sampled log2 histograms) of floating tensors, in the order they were added."""

    def __init__(self, torch: Any, *, histograms: bool = True, sample: int = HIST_SAMPLE, host: bool = True,
                 budget: int = 64 << 20) -> None:
        self._torch = torch
        self.host = host  # False: CPU tensors too take the accelerator's route (queued torch reductions)
        self.sample = sample  # values per histogram: `HIST_SAMPLE` as every other route, or fewer (module-level)
        self._runs = max(1, sample // _RUN)
        self._float32 = torch.float32
        self._float64 = torch.float64
        self._strided = torch.strided
        self.histograms = histograms
        self.numel: list[int] = []
        self._rows: list[tuple[float, ...]] = []  # per row its (min, max, sum, norm, nan, inf, zeros); `_NO_ROW` where
        # the host measured none (queued on a device, kept for later, changed): an array only at `finish`
        # A reused raw-memory handle (`_Memory`) for the common float32 tensor (`_measure_host`).
        self._memory = _Memory(0, 0)
        self._interface = self._memory.__array_interface__
        self._device: list[tuple[int, Any, Any]] = []  # (row, values, counts) queued on an accelerator
        self._device_hist: list[tuple[int, Any]] = []
        self._samples = np.empty(HIST_SAMPLE * 64, dtype=np.float32)  # the samples' values, back to back (`_sample`)
        self._sample_out: list[tuple[int, bool, bool]] = []  # (sample, count its zeros, count its NaN) where it may hold any
        self._room = min(self._samples.size, SAMPLE_BUDGET)  # sample values that fit before `_grow_samples`
        self._binned: list[tuple[np.ndarray, np.ndarray]] = []
        self._bin_keys = np.empty(_BIN_VALUES, dtype=np.int16)  # a group's keys (`_host_histograms`)
        self._keys: Any = None  # int16 scratch of `_count_keys`  # (rows, histograms) binned when the samples filled
        self._sample_rows: list[int] = []
        self._sample_lens: list[int] = []
        self._used = 0
        self._flags = np.empty(1 << 16, dtype=bool)
        self._partials = np.empty((2, 64), dtype=np.float32)  # per-row sums and squares (`_scratch`)
        self._scratches: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self.budget = budget  # bytes of CPU tensors kept for later before a flush
        self._pending: list[tuple[int, Any, int, bool]] = []  # (row, tensor, its version when handed over, hist)
        self.pending_ids: set[int] = set()
        self._pending_bytes = 0
        self.changed: list[int] = []  # rows not measured: changed in place before their flush (no values)

    def __len__(self) -> int:
        return len(self.numel)

    def add(self, t: Any, *, later: bool = False, hist: bool = True) -> int | None:
        """Measure a floating tensor (a CPU one `later`: at the next `flush`, with the rest of the batch); its row,
        or None when it holds nothing to measure (empty, complex, meta). `hist`: False takes no histogram sample of
        it (as `histogram_row` takes none of a non-contiguous tensor)."""
        n = t.numel()
        if n == 0 or not t.is_floating_point():
            return None
        row = len(self.numel)
        if self.host and t.is_cpu and t.layout == self._strided:
            self.numel.append(n)
            self._rows.append(_NO_ROW)
            if later:
                self._pending.append((row, t, t._version, hist))
                self.pending_ids.add(id(t))
                self._pending_bytes += n * t.element_size()
                if self._pending_bytes > self.budget:
                    self.flush()
            else:
                self._measure_host(row, t, hist)
            return row
        if not self._queue(row, t, hist):
            return None
        self.numel.append(n)
        self._rows.append(_NO_ROW)
        return row

    def flush(self) -> None:
        """Measure every tensor kept for later, in one tight loop; one changed in place since it was handed over
        (its version moved) is not measured: its row goes to `changed`."""
        pending, self._pending = self._pending, []
        self.pending_ids.clear()
        self._pending_bytes = 0
        for row, t, version, hist in pending:
            if t._version != version:
                self.changed.append(row)
            else:
                self._measure_host(row, t, hist)

    def _measure_host(self, row: int, t: Any, hist: bool = True) -> None:
        keep = None
        if t.dtype == self._float32 and t.is_contiguous() and not t.is_neg():  # most outputs: read in place
            try:
                ptr = t.data_ptr()
            except RuntimeError:  # a wrapper subclass without storage: the torch route measures it
                ptr = 0
            a = None
            if ptr:  # the reused handle's interface refilled: half of what a new `_Memory` cost (0.9 of 1.7 us)
                face = self._interface
                face["data"] = (ptr, True)
                n = t.numel()
                face["shape"] = (n // _COLUMNS, _COLUMNS) if n % _COLUMNS == 0 else (n,)  # whole rows: no reshape
                a = np.asarray(self._memory)
        else:
            a, keep = self._host_view(t)
        if a is None:
            if not self._queue(row, t, hist):
                self.changed.append(row)
            return
        found = self._rows[row] = self._cpu_row(a)
        if hist and self.histograms:
            self._sample(row, a, found[6], found[4])
        del keep

    def _queue(self, row: int, t: Any, hist: bool = True) -> bool:
        """The accelerator's route: reductions queued on `t`'s device, brought over at `finish`."""
        found = tensor_stats_row(self._torch, t)
        if found is None:
            return False
        self._device.append((row, found[0], found[1]))
        if hist and self.histograms:
            binned = histogram_row(self._torch, t)
            if binned is not None:
                self._device_hist.append((row, binned))
        return True

    def _host_view(self, t: Any) -> tuple[np.ndarray | None, Any]:
        """A float32 numpy view of `t`'s values (its own memory when it is contiguous float32, else a copy of
        ours) and the tensor that owns that memory (kept alive while it is read); None without plain storage."""
        x = t.detach()
        if x.dtype == self._float64:  # its own range: float32 would turn 1e300 into Inf
            x = x.to(memory_format=self._torch.contiguous_format, copy=True).resolve_neg()
            return x.numpy().reshape(-1), x  # our copy: numpy may share its storage
        if x.dtype != self._float32 or x.is_neg() or not x.is_contiguous():
            x = x.to(self._float32, memory_format=self._torch.contiguous_format, copy=True).resolve_neg()
        a = raw_view(x)
        return (a, x) if a is not None else (None, None)

    def _cpu_row(self, a: np.ndarray) -> tuple[float, ...]:
        """(min, max, sum, norm, nan, inf, zeros) of a float32 (or float64) array, flat or (for float32) as whole
        `_COLUMNS`-value rows: min and max first; the counts only where they can be non-zero (NaN/Inf when the
        range is not finite, zeros when it holds 0)."""
        if a.ndim == 1 and a.size % _COLUMNS == 0 and a.dtype == np.float32:  # (a copy made by `_host_view`)
            a = a.reshape(-1, _COLUMNS)
        lo, hi = float(np.minimum.reduce(a, axis=None)), float(np.maximum.reduce(a, axis=None))
        nan = inf = zeros = 0
        if a.ndim == 2:  # whole rows: their scratch (a mask of their shape, no reshape)
            partials, sums, squares, flags = self._scratch(a.shape[0])
        else:
            k = a.size
            flags = self._flags[:k] if k <= self._flags.size else self._mask(k)
        if -_NO_OVERFLOW < lo and hi < _NO_OVERFLOW:  # the common case (False for NaN too): float32 partials
            if a.ndim == 2:  # sum and squares as dot products of its 1024-value rows, added in float64 together
                np.vecdot(a, _ONES, out=sums)
                np.vecdot(a, a, out=squares)
                s, sq = _add(partials, axis=1, dtype=np.float64).tolist()  # the ufunc: `.sum` is a Python wrapper
                if not lo > 0 and not hi < 0 and not _all(a, axis=None):  # 0 lies in [lo, hi] and a value is 0
                    zeros = int(np.count_nonzero(np.equal(a, 0, out=flags)))
                return lo, hi, s, math.sqrt(sq), 0, 0, zeros
            s, sq = float(np.add.reduce(a)), _squares(a)
        elif lo != lo or hi != hi or lo == -math.inf or hi == math.inf:  # NaN or Inf: count them; no sum to widen
            nan = int(np.count_nonzero(np.isnan(a, out=flags)))
            inf = int(np.count_nonzero(np.isinf(a, out=flags)))
            if nan:
                s = sq = math.nan
            else:
                with np.errstate(invalid="ignore"):  # +Inf and -Inf together sum to NaN
                    s, sq = float(np.add.reduce(a, axis=None)), math.inf
        else:  # huge finite values: float32 partial sums could overflow, so in float64
            with np.errstate(over="ignore"):
                wide = a.reshape(-1).astype(np.float64)
                s, sq = float(wide.sum()), _squares(wide)  # by rows: one long np.dot wakes every BLAS thread
        if not lo > 0 and not hi < 0:  # 0 lies in [lo, hi] (or NaN hides the range): count the zeros
            zeros = int(np.count_nonzero(np.equal(a, 0, out=flags)))
        return lo, hi, s, math.sqrt(sq), nan, inf, zeros

    def _scratch(self, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For `m` whole rows: (the [2, m] partials, its sums row, its squares row, an [m, 1024] bool mask), views
        made once per row count (a module's shapes repeat; a slice costs about what a small reduction does)."""
        found = self._scratches.get(m)
        if found is None:
            if m > self._partials.shape[1]:
                self._partials = np.empty((2, max(m, 2 * self._partials.shape[1])), dtype=np.float32)
                self._scratches.clear()
            partials = self._partials[:, :m]
            found = self._scratches[m] = (partials, partials[0], partials[1],
                                          self._mask(m * _COLUMNS).reshape(m, _COLUMNS))
        return found

    def _mask(self, n: int) -> np.ndarray:
        if n > self._flags.size:
            self._flags = np.empty(max(n, 2 * self._flags.size), dtype=bool)
            self._scratches.clear()  # (their masks are views of the old array)
        return self._flags[:n]

    def _sample(self, row: int, a: np.ndarray, zeros: int = -1, nan: int = -1) -> None:
        """Keep a copy of `a`'s histogram sample (the runs `statistics.sample_of` names, or `sample` values' worth of
        such runs), binned with every other one later (`_host_histograms`).

        A same-dtype copy out of a strided view is the cheapest numpy call for it (~2 us for 4096
        values, where computing the bin keys here, a casting `right_shift`, took ~7). The key cannot
        tell a zero from a subnormal, nor NaN from Inf: the sample's zeros and NaN are counted when
        it is binned, and only where `a` holds any (`zeros`, `nan`: `a`'s own counts; -1 when
        unknown, or when a cast to float32 may have made some).
        """
        sample = sample_of(a) if self.sample == HIST_SAMPLE else _strided_sample(a, self._runs)
        if sample.dtype != np.float32:  # float64: what a float32 cast makes of it, as `histogram_row` bins
            with np.errstate(over="ignore"):
                sample = sample.astype(np.float32)
            zeros = nan = -1  # (tiny values flush to zero in the cast)
        k = sample.size
        if self._used + k > self._room:
            self._grow_samples(k)
        np.copyto(self._samples[self._used: self._used + k].reshape(sample.shape), sample)
        self._used += k
        self._sample_rows.append(row)
        self._sample_lens.append(k)
        if zeros or nan:  # the sample's own zeros and NaN are counted when binned, and left out of their bins
            self._sample_out.append((len(self._sample_rows) - 1, bool(zeros), bool(nan)))

    def _grow_samples(self, k: int) -> None:
        """Room for `k` more sample values: what is kept is binned (and the array reused) once `SAMPLE_BUDGET`
        values are, so a long run's samples never take more memory than that; else the array doubles."""
        if self._used and self._used + k > SAMPLE_BUDGET:
            self._binned.append(self._host_histograms())
            self._used = 0
            self._sample_rows, self._sample_lens, self._sample_out = [], [], []
        if self._used + k > self._samples.size:
            bigger = np.empty(max(min(2 * self._samples.size, SAMPLE_BUDGET), self._used + k), dtype=np.float32)
            bigger[: self._used] = self._samples[: self._used]
            self._samples = bigger
        self._room = min(self._samples.size, max(SAMPLE_BUDGET, k))

    def finish(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(rows [n, 7], numels [n], histogram rows' indices [h], histograms [h, HIST_BINS + 1]): one transfer per
        device for what was queued there, one `bincount` for every CPU sample. Rows in `changed` hold NaN."""
        self.flush()
        n = len(self.numel)
        raw = np.array(self._rows, dtype=np.float64).reshape(n, 7)
        raw[self.changed] = np.nan
        by_device: dict[Any, list[tuple[int, Any, Any]]] = {}
        for entry in self._device:
            by_device.setdefault(entry[1].device, []).append(entry)
        for entries in by_device.values():
            rows = [e[0] for e in entries]
            raw[rows, :4] = self._torch.stack([e[1] for e in entries]).cpu().double().numpy()
            raw[rows, 4:] = self._torch.stack([e[2] for e in entries]).cpu().numpy()
        hist_rows, hists = self._host_histograms()
        if self._binned:
            hist_rows = np.concatenate([r for r, _ in self._binned] + [hist_rows])
            hists = np.concatenate([h for _, h in self._binned] + [hists])
        if self._device_hist:
            extra_rows = [r for r, _ in self._device_hist]
            extra = np.zeros((len(extra_rows), HIST_BINS + 1), dtype=np.int64)
            on_device: dict[Any, list[int]] = {}
            for i, (_, h) in enumerate(self._device_hist):
                if isinstance(h, np.ndarray):
                    extra[i] = h
                else:
                    on_device.setdefault(h.device, []).append(i)
            for idx in on_device.values():
                extra[idx] = self._torch.stack([self._device_hist[i][1] for i in idx]).cpu().numpy()
            hist_rows = np.concatenate([hist_rows, np.asarray(extra_rows, dtype=np.int64)])
            hists = np.concatenate([hists, extra])
        return raw, np.asarray(self.numel, dtype=np.float64), hist_rows, hists

    def _host_histograms(self) -> tuple[np.ndarray, np.ndarray]:
        """Every CPU sample binned: one `bincount` of (row, key) per group of at most `_GROUP_ROWS` rows holding at
        most `_BIN_VALUES` values, the sign folded after, then the zeros and NaN `_sample` counted taken out of
        exponents 0 and 255 (where they lie among subnormals and Inf). Groups keep each temporary small enough for
        the allocator to hand the same memory back every time: one array over all of a step's samples (~6 MB on
        the Llama step) came fresh from the system each pass, ~1.5k page faults."""
        rows = np.asarray(self._sample_rows, dtype=np.int64)
        out = np.zeros((len(rows), HIST_BINS + 1), dtype=np.int64)
        if not len(rows):
            return rows, out
        lens = np.asarray(self._sample_lens, dtype=np.int64)
        ends = np.cumsum(lens)
        values = self._samples[: self._used]
        exponents = np.empty((len(rows), 256), dtype=np.int64)
        first, start = 0, 0
        while first < len(rows):
            last = max(first + 1, int(np.searchsorted(ends, start + _BIN_VALUES, side="right")))
            last = min(last, first + _GROUP_ROWS)
            stop = int(ends[last - 1])
            if self._bin_keys.size < stop - start:
                self._bin_keys = np.empty(stop - start, dtype=np.int16)
            keys = self._bin_keys[: stop - start]  # sign and biased exponent: the float32 bits >> 23
            np.right_shift(values[start:stop].view(np.uint32), 23, out=keys, casting="unsafe")
            exponents[first:last] = self._count_keys(keys, lens[first:last])
            first, start = last, stop
        kept = lens.copy()
        if self._sample_out:
            which = np.asarray([w for w, _, _ in self._sample_out], dtype=np.int64)
            zeros, nan = np.zeros(len(which), dtype=np.int64), np.zeros(len(which), dtype=np.int64)
            for j, (i, count_zeros, count_nan) in enumerate(self._sample_out):
                sample = values[int(ends[i] - lens[i]): int(ends[i])]
                if count_zeros:
                    zeros[j] = np.count_nonzero(sample == 0)
                if count_nan:
                    nan[j] = np.count_nonzero(np.isnan(sample))
            exponents[which, 0] -= zeros
            exponents[which, 255] -= nan
            kept[which] -= zeros + nan
        out[:, :HIST_BINS] = np.add.reduceat(exponents, _FIRST_EXPONENT, axis=1)
        out[:, HIST_BINS] = kept
        return rows, out

    def _count_keys(self, keys: np.ndarray, lens: np.ndarray) -> np.ndarray:
        """[rows, 256] counts of each biased exponent among the keys of `len(lens)` consecutive samples.

        Row r's keys are offset by r * 512 (into a reused scratch: int16 holds `_GROUP_ROWS` rows of
        them) and counted by one torch `bincount` (numpy's casts its input to int64 first: twice
        as slow over the Llama step's 6M sample values); the sign is folded after.
        """
        torch = self._torch
        n = len(lens)
        src = torch.from_numpy(keys)
        if self._keys is None or self._keys.numel() < keys.size:
            self._keys = torch.empty(max(keys.size, _BIN_VALUES), dtype=torch.int16)
        key = self._keys[: keys.size]
        offsets = torch.arange(0, 512 * n, 512, dtype=torch.int16)
        if n == 1:
            key = src
        elif (lens == lens[0]).all():  # the common case: every row a whole sample, offsets by broadcasting
            torch.add(src.view(n, -1), offsets[:, None], out=key.view(n, -1))
        else:
            torch.add(src, torch.repeat_interleave(offsets, torch.from_numpy(lens)), out=key)
        counts = torch.bincount(key, minlength=512 * n).numpy().reshape(n, 2, 256)
        return counts[:, 0] + counts[:, 1]


_NO_ROW = (math.nan,) * 7  # a row the host did not measure (yet): filled in by `finish`, or left NaN (`changed`)


class _Memory:
    """Raw float32 memory numpy can read through (`__array_interface__`), without numpy owning or pinning it: never
    `.numpy()` on a caller's tensor, which would make its storage refuse `resize_`."""

    __slots__ = ("__array_interface__",)

    def __init__(self, ptr: int, n: int) -> None:
        self.__array_interface__ = {"data": (ptr, True), "shape": (n,), "typestr": "<f4", "version": 3}


def _strided_sample(a: np.ndarray, runs: int) -> np.ndarray:
    """`runs` evenly spaced runs of `_RUN` consecutive values of flat `a` (a strided view, no copy); all of `a`
    when it is no longer than that."""
    n = a.size
    if n <= runs * _RUN:
        return a
    step = (n - _RUN) // (runs - 1) if runs > 1 else 0
    return np.ndarray((runs, _RUN), a.dtype, a, 0, (step * a.itemsize, a.itemsize))


def _squares(a: np.ndarray) -> float:
    """The sum of squares of a float32 (or float64) array: a dot product per `_COLUMNS`-value row, added in float64."""
    k = a.size
    whole = k - k % _COLUMNS
    sq = 0.0
    if whole:
        rows = a[:whole].reshape(-1, _COLUMNS)
        sq = float(np.vecdot(rows, rows).sum(dtype=np.float64))
    if whole < k:
        tail = a[whole:]
        sq += float(np.vecdot(tail, tail))
    return sq
