"""Statistics of large CPU tensors, reduced chunk by chunk so each element is read from memory once.

numpy does the reducing (a numpy call costs a microsecond where a torch reduction costs ten),
through a raw view of the tensor's memory (`raw_view`: never `.numpy()`, which would make the
storage refuse `resize_`); other dtypes are cast chunk by chunk into a scratch buffer of ours.
Rows are (min, max, sum, norm, nan, inf, zeros), the order every statistics route gives.
"""

from __future__ import annotations

import functools
import math
import threading
from typing import Any

import numpy as np

from ascend_tui.threads import run_all

CHUNK = 262144  # elements per chunk of a large CPU tensor: 1 MiB of float32 stays in L2 for every pass
# (and 0/1 sums of a chunk stay exact in float32, which is exact to 2**24)


def cpu_stats_chunked(torch: Any, t: Any) -> np.ndarray | None:
    """min, max, sum, norm, nan, inf, zeros of a CPU tensor, reduced chunk by chunk so each element is read
    from memory once (the passes over a chunk hit the cache).

    numpy does the reducing: a numpy call costs a microsecond where a torch reduction costs ten.
    A contiguous float32 tensor is read in place through a raw view of its memory (never
    `.numpy()`, which would make its storage refuse `resize_`); any other dtype is cast chunk by
    chunk into a float32 scratch buffer of our own (one per thread). A tensor of several chunks
    is reduced on as many threads as torch itself runs on (numpy lets go of the GIL while it
    reduces): the model is paused meanwhile, so those cores would idle.
    """
    if t.is_complex() or t.layout != torch.strided:
        return None
    x = t.detach()
    x = x.reshape(-1) if x.is_contiguous() else x.contiguous().view(-1)
    n = x.numel()
    if n == 0:
        return None
    raw = raw_view(x) if x.dtype == torch.float32 else None
    if n <= CHUNK:  # most outputs: one chunk, no partial results to combine
        if raw is not None:
            return view_stats(raw)
        lo, hi, s, sq, z, na, nf = _chunk_stats(torch, x, None, 0, n, n)
        return np.array([lo, hi, s, math.sqrt(sq), na, nf, z], dtype=np.float64)
    calls = [functools.partial(_chunk_stats, torch, x, raw, start, min(CHUNK, n - start), n)
             for start in range(0, n, CHUNK)]
    parts = run_all(calls) if len(calls) > 1 and torch.get_num_threads() > 1 else [c() for c in calls]
    mn, mx, total, squares, zeros, nan, inf = math.inf, -math.inf, 0.0, 0.0, 0, 0, 0
    nan_seen = False
    for lo, hi, s, sq, z, na, nf in parts:
        if lo != lo or hi != hi:
            nan_seen = True
        else:
            mn, mx = min(mn, lo), max(mx, hi)
        total, squares, zeros, nan, inf = total + s, squares + sq, zeros + z, nan + na, inf + nf
    if nan_seen:
        mn = mx = math.nan
    return np.array([mn, mx, total, math.sqrt(squares), nan, inf, zeros], dtype=np.float64)


def view_stats(raw: np.ndarray) -> np.ndarray:
    """`cpu_stats_chunked` of a flat float32 view of at most `CHUNK` values (most outputs): no torch call."""
    lo, hi, s, sq, z, na, nf = _chunk_stats(None, None, raw, 0, raw.size, raw.size)
    return np.array([lo, hi, s, math.sqrt(sq), na, nf, z], dtype=np.float64)


def _chunk_stats(torch: Any, x: Any, raw: np.ndarray | None, start: int, k: int,
                 n: int) -> tuple[float, float, float, float, int, int, int]:
    """(min, max, sum, sum of squares, zeros, nan, inf) of `k` elements of flat `x` from `start`."""
    if raw is not None:
        a = raw[start:start + k]
    else:
        buf, a = _scratch(torch, k)
        buf.copy_(x[start:start + k] if k < n else x)
    flags = _flags(k)
    lo, hi = float(np.minimum.reduce(a)), float(np.maximum.reduce(a))  # the ufuncs: a.min() wraps them in Python
    zeros = nan = inf = 0
    if -_NO_OVERFLOW < lo and hi < _NO_OVERFLOW:  # the common case: no partial sum can overflow float32
        s, sq = _sum(a), _squares(a)
    else:  # NaN, Inf or huge values: numpy's overflow warnings silenced (entering errstate costs microseconds)
        with np.errstate(over="ignore", invalid="ignore"):
            s = _sum(a)
            sq = math.nan if lo != lo or hi != hi else _squares(a)
        if sq == math.inf and math.isfinite(lo) and math.isfinite(hi):  # |x| > 1.8e19: again in float64
            sq = _squares(a.astype(np.float64))  # rows again: one long np.dot wakes every OpenBLAS thread
    if not math.isfinite(s):
        np.isnan(a, out=flags)
        nan = int(np.count_nonzero(flags))
        np.isinf(a, out=flags)
        inf = int(np.count_nonzero(flags))
    if not lo > 0 and not hi < 0:  # zero lies in [lo, hi] (or NaN hides the range): count them
        np.equal(a, 0, out=flags)
        zeros = int(np.count_nonzero(flags))
    return lo, hi, s, sq, zeros, nan, inf


class _Memory:
    """Raw memory numpy can read through (`__array_interface__`), without numpy owning or pinning it."""

    __slots__ = ("__array_interface__",)

    def __init__(self, ptr: int, n: int, typestr: str) -> None:
        self.__array_interface__ = {"data": (ptr, True), "shape": (n,), "typestr": typestr, "version": 3}


def raw_view(t: Any) -> np.ndarray | None:
    """A read-only float32 numpy view of a contiguous, un-negated CPU float32 tensor's memory; None when
    there is none (no plain storage). Valid only while `t` is alive and unchanged: read it and drop it."""
    if t.is_neg():
        return None
    try:
        ptr = t.data_ptr()
    except RuntimeError:  # a wrapper subclass without storage
        return None
    return np.asarray(_Memory(ptr, t.numel(), "<f4")) if ptr else None


_COLUMNS = 1024
# Below this magnitude neither a column sum (CHUNK / _COLUMNS values) nor a row's sum of squares (_COLUMNS
# values) can overflow float32's 3.4e38: 1024 * (5e17)**2 = 2.6e38.
_NO_OVERFLOW = 5e17


def _sum(a: np.ndarray) -> float:
    """The sum of a float32 chunk: 1024 column sums (short float32 runs, vectorised), added in float64."""
    k = a.size
    whole = k - k % _COLUMNS
    s = float(np.add.reduce(np.add.reduce(a[:whole].reshape(-1, _COLUMNS), axis=0), dtype=np.float64)) if whole else 0.0
    if whole < k:
        s += float(np.add.reduce(a[whole:], dtype=np.float64))
    if not math.isfinite(s) and np.isfinite(a).all():  # a column's float32 sum overflowed: again in float64
        s = float(a.sum(dtype=np.float64))
    return s


def _squares(a: np.ndarray) -> float:
    """The sum of squares of a float32 (or float64) chunk: a dot product per 1024-value row (`vecdot`), added in
    float64.

    One `np.dot` over the whole chunk is as fast alone, but OpenBLAS runs a dot product of more
    than 10000 values on all its threads, which then compete with torch's own for the cores (on a
    busy 2-core machine a 32K-value float64 `np.dot` took 19 ms where these rows take 30 us); a
    row this short stays on one thread (and its float32 partial sums stay short).
    """
    k = a.size
    whole = k - k % _COLUMNS
    rows = a[:whole].reshape(-1, _COLUMNS)
    sq = float(np.add.reduce(np.vecdot(rows, rows), dtype=np.float64)) if whole else 0.0
    if whole < k:
        sq += float(np.dot(a[whole:], a[whole:]))
    return sq


_LOCAL = threading.local()


def _scratch(torch: Any, n: int) -> tuple[Any, np.ndarray]:
    """A float32 buffer of `n` <= `CHUNK` elements as a tensor and as an array, reused (per thread): a fresh
    1 MiB temporary per chunk costs its page faults every time."""
    bufs = getattr(_LOCAL, "bufs", None)
    if bufs is None:
        tensor = torch.empty(CHUNK, dtype=torch.float32)
        bufs = _LOCAL.bufs = (tensor, tensor.numpy())
    return bufs[0][:n], bufs[1][:n]


def _flags(n: int) -> np.ndarray:
    """A bool buffer of `n` <= `CHUNK` elements for masks, reused (per thread)."""
    flags = getattr(_LOCAL, "flags", None)
    if flags is None:
        flags = _LOCAL.flags = np.empty(CHUNK, dtype=bool)
    return flags[:n]
