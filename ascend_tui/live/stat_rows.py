"""Where each measured output's statistics go, and how they come together at the end of a run.

Every tensor a recorder measures takes one of three routes (`live/statistics.py`): a small CPU
tensor is copied into the host batch, a large one is reduced chunk by chunk now, an accelerator's
stays queued on its device. `StatRows` keeps the queued rows in recording order, whichever route
made them, and turns them into one `StatsTable` and one `HistogramTable` at the end: two
transfers per device, whatever the op count. Views and copies that hold exactly their input's
values are not measured again; they take their source's row.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ascend_tui.evidence import HIST_BINS, STAT_FIELDS, HistogramTable, StatsTable
from ascend_tui.live.batch_stats import BatchStats
from ascend_tui.live.statistics import (
    CHUNK,
    SMALL,
    HostBatch,
    cpu_stats_chunked,
    histogram_row,
    histogram_sample,
    negated,
    raw_histogram,
    raw_view,
    tensor_stats_row,
    view_stats,
)

Key = tuple[str, int]  # (node id, output slot)
_OTHER = 1 << 62  # (a finish's slot code for a row that is no host-batch slot: an ndarray or device tensors)


class StatRows:
    """The statistics (and histograms) of one recorded run's outputs, by (node, slot), in recording order."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch
        self._strided = torch.strided
        self._float32 = torch.float32
        # (key, row, numel, histogram) per measured output, in recording order: the row is a host-batch slot (int),
        # a host row (ndarray) or device tensors; the histogram likewise, or None. One append an output.
        self.entries: list[tuple[Key, Any, int, Any]] = []
        self.copies: list[tuple[Key, Key]] = []  # (key, source key): outputs holding exactly their input's values
        # (key, source key, k) in recording order, copies (k = 1) and repeats (each source value k times) alike
        self.derived: list[tuple[Key, Key, int]] = []
        self.has: set[Key] = set()  # keys that get a row: queued, copied or repeated
        self.batch = HostBatch(torch)
        # Mid-sized float32/16 outputs: rows measured at once, histogram samples binned together at the end;
        # their `rows` / `hist_rows` entries are `-1 - row` of this batch.
        self.lean = BatchStats(torch)
        self._lean = frozenset({torch.float32, torch.float16, torch.bfloat16})  # float64: in float32, as the rest
        self._lean_done: tuple[np.ndarray, np.ndarray] | None = None

    def copy(self, key: Key, source: Key) -> None:
        """`key` holds exactly the values of `source` (a view or copy): its row is the source's."""
        self.copies.append((key, source))
        self.derived.append((key, source, 1))
        self.has.add(key)

    def repeat(self, key: Key, source: Key, k: int) -> bool:
        """`key` holds each value of `source` `k` times (an `expand`): its row is the source's with sums, counts and
        numel times k and the norm times sqrt(k), and no histogram (a repeat is not contiguous); False when `source`
        gets no row here (the caller measures the tensor itself)."""
        if source not in self.has:
            return False
        self.derived.append((key, source, k))
        self.has.add(key)
        return True

    def take(self, key: Key, t: Any) -> None:
        """Measure `t` for `key` on the route it needs (nothing for an empty or unmeasurable tensor)."""
        if t.is_cpu and t.layout == self._strided:
            n = t.numel()
            if n == 0:
                return
            contiguous = t.is_contiguous()
            if SMALL < n <= CHUNK and t.dtype in self._lean:  # most outputs: a handful of numpy passes while the
                row = self.lean.add(t, hist=contiguous)  # output is hot in the cache; its sample binned later
                if row is not None and not (self.lean.changed and self.lean.changed[-1] == row):  # (no route: none)
                    self.has.add(key)  # (`queue` inlined: most outputs come this way)
                    self.entries.append((key, -1 - row, n, -1 - row if contiguous else None))
                    return
            hist = contiguous and t.is_floating_point()
            neg = t.is_neg()
            if neg:  # measure the memory as it is (torch calls here may not resolve the bit), then negate
                t = self._torch._neg_view(t)
            if n <= SMALL:
                row = self.batch.add(t if contiguous else t.detach().contiguous(), hist, neg)
                if row is not None:
                    self.queue(key, row, n, row if hist else None)
                    return
            found = cpu_stats_chunked(self._torch, t)
            if found is not None:
                binned = None
                if hist:
                    view = raw_view(t) if t.dtype == self._float32 else None
                    if view is not None:  # float32: sampled and binned by numpy in place
                        binned = raw_histogram(view)
                    else:  # the sample joins the host batch, which bins it with everything else
                        binned = self.batch.add(histogram_sample(self._torch, t), True)
                        if binned is None:
                            binned = histogram_row(self._torch, t)
                self.queue(key, negated(found) if neg else found, n, binned)
            return
        neg = t.is_neg()
        if neg:
            t = self._torch._neg_view(t)
        values = tensor_stats_row(self._torch, t)
        if values is not None and neg:  # (min, max, sum, norm) of -x: (-max, -min, -sum, norm), still queued
            v = values[0]
            values = (self._torch.stack((-v[1], -v[0], -v[2], v[3])), values[1])
        if values is not None:
            self.queue(key, values, t.numel(), histogram_row(self._torch, t))

    def queue(self, key: Key, row: Any, numel: int, hist: Any) -> None:
        """Add a finished or queued row (and histogram) for `key`."""
        self.has.add(key)
        self.entries.append((key, row, numel, hist))

    def finish_stats(self) -> StatsTable:
        """Bring every queued statistic to the host at once: two transfers per device, whatever the op count."""
        table = StatsTable()
        if not self.entries:
            return table
        torch = self._torch
        batch_values, _ = self.batch.finish()
        lean_values = self._lean_finish()[0]
        keys_t, rows, numel, _ = zip(*self.entries)
        raw = np.empty((len(rows), 7), dtype=np.float64)
        slots = np.fromiter((r if type(r) is int else _OTHER for r in rows), dtype=np.int64, count=len(rows))
        other = np.flatnonzero(slots == _OTHER)
        batched = np.flatnonzero((slots >= 0) & (slots != _OTHER))
        lean = np.flatnonzero(slots < 0)
        if batched.size:
            raw[batched] = batch_values[slots[batched]]
        if lean.size:
            raw[lean] = lean_values[-1 - slots[lean]]
        by_device: dict[Any, list[int]] = {}
        for i in other.tolist():
            row = rows[i]
            if isinstance(row, np.ndarray):
                raw[i] = row
            else:
                by_device.setdefault(row[0].device, []).append(i)
        for on_device in by_device.values():
            raw[on_device, :4] = torch.stack([rows[i][0] for i in on_device]).cpu().double().numpy()
            raw[on_device, 4:] = torch.stack([rows[i][1] for i in on_device]).cpu().numpy()
        keys = list(keys_t)
        data = finish_rows(raw, np.asarray(numel, dtype=np.float64))
        position = {k: (i, 1) for i, k in enumerate(keys)}
        found_rows: list[tuple[Key, int, int]] = []
        for key, source, k in self.derived:  # in recording order, so a view of a view finds its row
            found = position.get(source)
            if found is not None:
                i, k = found[0], found[1] * k  # the measured row it derives from, and how many times over
                position[key] = (i, k)
                found_rows.append((key, i, k))
        if not found_rows:
            table.add_many(keys, data)
            return table
        derived_keys, extra, times = zip(*found_rows)
        keys.extend(derived_keys)
        rows_out = data[list(extra)]
        factor = np.asarray(times, dtype=np.float64)
        repeats = np.flatnonzero(factor != 1)
        if repeats.size:  # each value k times: sums, counts and numel k times over, the norm sqrt(k) times
            rows_out[repeats, 3] *= np.sqrt(factor[repeats])
            rows_out[repeats, 5:9] *= factor[repeats, None]
        table.add_many(keys, np.concatenate([data, rows_out]))
        return table

    def finish_histograms(self) -> HistogramTable:
        """Bring every queued histogram to the host at once."""
        entries = [(e[0], e[3]) for e in self.entries if e[3] is not None]
        if not entries:
            return HistogramTable()
        torch = self._torch
        _, batch_hist = self.batch.finish()
        lean_hist = self._lean_finish()[1]
        keys_t, hist_rows = zip(*entries)
        data = np.zeros((len(hist_rows), HIST_BINS + 1), dtype=np.int64)
        slots = np.fromiter((r if type(r) is int else _OTHER for r in hist_rows), dtype=np.int64, count=len(hist_rows))
        batched = np.flatnonzero((slots >= 0) & (slots != _OTHER))
        if batched.size:
            data[batched] = batch_hist[slots[batched]]
        dropped: list[int] = []
        for i in np.flatnonzero(slots < 0).tolist():
            found = lean_hist[-1 - int(slots[i])]
            if found is not None:
                data[i] = found
            else:  # the lean batch took no sample of it (no plain storage; a torch route with no histogram)
                dropped.append(i)
        by_device: dict[Any, list[int]] = {}
        for i in np.flatnonzero(slots == _OTHER).tolist():
            row = hist_rows[i]
            if isinstance(row, np.ndarray):
                data[i] = row
            else:
                by_device.setdefault(row.device, []).append(i)
        for on_device in by_device.values():
            data[on_device] = torch.stack([hist_rows[i] for i in on_device]).cpu().numpy()
        keys = list(keys_t)
        if dropped:
            kept = np.ones(len(keys), dtype=bool)
            kept[dropped] = False
            keys = [k for k, keep in zip(keys, kept) if keep]
            data = data[kept]
        position = {k: i for i, k in enumerate(keys)}
        extra = []
        for key, source in self.copies:
            if source in position:
                position[key] = position[source]
                keys.append(key)
                extra.append(position[source])
        return HistogramTable(keys, np.concatenate([data, data[extra]]) if extra else data)

    def _lean_finish(self) -> tuple[np.ndarray, list[np.ndarray | None]]:
        """The lean batch's rows, and each of its rows' histogram (None where it took none), finished once."""
        if self._lean_done is None:
            raw, _, hist_rows, hists = self.lean.finish()
            by_row: list[np.ndarray | None] = [None] * len(raw)
            for r, h in zip(hist_rows.tolist(), hists):
                by_row[r] = h
            self._lean_done = (raw, by_row)
        return self._lean_done


def finish_rows(raw: np.ndarray, numel: np.ndarray) -> np.ndarray:
    """Turn rows (min, max, sum, norm, nan, inf, zeros) and their numels into `STAT_FIELDS` order."""
    out = np.empty((raw.shape[0], len(STAT_FIELDS)), dtype=np.float64)
    mn, mx, total, norm, nan, inf, zeros = (raw[:, i] for i in range(7))
    with np.errstate(invalid="ignore", divide="ignore"):
        out[:, 0] = mn
        out[:, 1] = mx
        out[:, 2] = total / numel
        out[:, 3] = norm
        out[:, 4] = np.fmax(np.abs(mn), np.abs(mx))
        out[:, 4] = np.where(np.isnan(mn) | np.isnan(mx), np.nan, out[:, 4])
    out[:, 5] = nan
    out[:, 6] = inf
    out[:, 7] = zeros
    out[:, 8] = numel
    return out
