"""Statistics of unchanged weights, kept from one recorded run to the next.

A model's parameters and buffers are read by every run: in an inference loop, by the target
and the repeated iterations of one investigation, by the next investigation of the same
model. Reducing a 50 MB weight again costs milliseconds and tells nothing new when the weight
has not changed, so its row is kept and reused while the tensor is provably the same:

- the same tensor object (a weak reference: a freed weight's entry goes with it),
- the same version counter (every in-place write through autograd-visible tensors bumps it:
  optimizer steps, `load_state_dict`, `copy_` under `no_grad`),
- the same memory, shape, strides and offset,
- and the same 4096 values sampled across the whole tensor (64 evenly spaced runs of 64), which
  catches writes the version counter does not see (`p.data.copy_(...)`, full updates through
  `.data`). A write through `.data` to a few elements that miss every sampled run is the one
  change this cannot see.

Only contiguous float32 CPU weights larger than the host batch's limit are kept: the rest
cost about as much to measure as to check.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from ascend_tui.live.statistics import SMALL, cpu_stats_chunked, raw_histogram, raw_view, sample_of


@dataclass(slots=True)
class _Entry:
    ref: Any
    version: int
    layout: tuple[Any, ...]
    sample: bytes
    row: np.ndarray
    hist: np.ndarray


class WeightCache:
    """(statistics row, histogram row) of weights, reused while a weight is unchanged (see the module doc)."""

    def __init__(self) -> None:
        self._entries: dict[int, _Entry] = {}
        self._lock = threading.Lock()
        self.hits = 0

    def wants(self, t: Any, float32: Any) -> bool:
        """Whether `t` is a weight this cache keeps: contiguous float32 on the CPU, larger than a host batch slot."""
        return t.dtype == float32 and t.is_cpu and t.numel() > SMALL and t.is_contiguous() and not t.is_neg()

    def measure(self, torch: Any, t: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """The rows of `t`, from the cache when it is unchanged, else measured now and kept; None if unreadable."""
        view = raw_view(t)
        if view is None:
            return None
        try:
            version = t._version
        except RuntimeError:  # an inference tensor keeps no version counter: nothing proves it unchanged
            return None
        sample = sample_of(view)
        fingerprint = sample.tobytes()  # bytes compare: a NaN equals itself here
        layout = (view.ctypes.data, tuple(t.shape), t.stride(), t.storage_offset())
        key = id(t)
        entry = self._entries.get(key)
        if (entry is not None and entry.ref() is t and entry.version == version and entry.layout == layout
                and entry.sample == fingerprint):
            self.hits += 1
            return entry.row, entry.hist
        row = cpu_stats_chunked(torch, t)
        if row is None:
            return None
        hist = raw_histogram(sample, sampled=True)
        with self._lock:
            self._entries[key] = _Entry(weakref.ref(t, self._forget(key)), version, layout, fingerprint, row, hist)
        return row, hist

    def _forget(self, key: int) -> Any:
        def drop(ref: Any) -> None:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None and entry.ref is ref:
                    del self._entries[key]

        return drop

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


WEIGHTS = WeightCache()
