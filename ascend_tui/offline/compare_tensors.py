"""Pair metrics of msprobe tensor files, spread over processes or a dask cluster (`ascend_tui.pool`).

Each file is opened memory-mapped by the reader (`readers/msprobe/tensors.py`) and read once, in
chunks, by `checks.precision.Accumulator`; work goes out as batches of pairs, and results come back
in submission order whatever the finishing order.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Sequence

from ascend_tui import pool
from ascend_tui.checks.precision import SHAPE_UNMATCH, Accumulator, TensorMetrics
from ascend_tui.errors import InputError
from ascend_tui.progress import Progress
from ascend_tui.readers.msprobe.tensors import open_tensor

CHUNK = 1 << 16
BATCH_BYTES = 32 << 20
PARALLEL_BYTES = 256 << 20


@dataclass(frozen=True, slots=True)
class Pair:
    """One target/golden tensor file pair to compare; `nbytes` sizes the batches."""

    target: str
    golden: str
    nbytes: int = 0


def compare_pair(target: str, golden: str, chunk: int = CHUNK) -> TensorMetrics:
    """Metrics of two tensor files, each read once in chunks."""
    n, b = open_tensor(target), open_tensor(golden)
    if tuple(d for d in n.shape if d != 1) != tuple(d for d in b.shape if d != 1):
        return TensorMetrics.marker(SHAPE_UNMATCH, "Shape of NPU and bench tensor do not match. Skipped.", n.numel)
    acc = Accumulator(n.compare_dtype, b.compare_dtype, n.numel)
    for cn, cb in zip(n.chunks(chunk), b.chunks(chunk)):
        acc.feed(cn, cb)
    return acc.result()


def compare_batch(pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any] | str]:
    """Worker entry: metrics (as JSON dicts) of each pair, or the InputError line of a pair that failed."""
    _one_thread()
    out: list[dict[str, Any] | str] = []
    for target, golden in pairs:
        try:
            out.append(compare_pair(target, golden).to_json())
        except InputError as exc:
            out.append(str(exc))
    return out


def _one_thread() -> None:
    """Keep torch (when a file needed it) on one thread: parallelism comes from the processes."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def from_json(d: dict[str, Any]) -> TensorMetrics:
    """A `TensorMetrics` from `compare_batch`'s JSON form."""
    return TensorMetrics(d["cosine"], d["euc_dist"], d["max_abs"], d["max_rel"], d["one_thousandth"],
                         d["five_thousandths"], d["rmse"], int(d.get("numel", 0)), str(d.get("message", "")))


def batches(pairs: Sequence[Pair], batch_bytes: int = BATCH_BYTES) -> list[list[Pair]]:
    """Consecutive pairs grouped into batches of about `batch_bytes` (one big pair is a batch of its own)."""
    out: list[list[Pair]] = []
    cur: list[Pair] = []
    size = 0
    for p in pairs:
        if cur and size + p.nbytes > batch_bytes:
            out.append(cur)
            cur, size = [], 0
        cur.append(p)
        size += p.nbytes
    if cur:
        out.append(cur)
    return out


def run_pairs(pairs: Sequence[Pair], *, workers: int | None = None, scheduler: str | None = None,
              progress: Progress | None = None, cancel: threading.Event | None = None) -> list[TensorMetrics]:
    """Metrics of every pair, in order: inline for small jobs, else on processes or the dask cluster (`pool`)."""
    if not pairs:
        return []
    groups = batches(pairs)
    payload = [[(p.target, p.golden) for p in g] for g in groups]
    scheduler = pool.scheduler_from(scheduler)
    big = sum(p.nbytes for p in pairs) >= PARALLEL_BYTES
    n = workers if workers is not None else pool.local_workers(len(groups)) if big else 1
    results: list[TensorMetrics] = []
    for batch_result in pool.run(compare_batch, payload, workers=n, scheduler=scheduler, cancel=cancel,
                                 what="the compare was cancelled"):
        for item in batch_result:
            if isinstance(item, str):
                raise InputError("", item)
            results.append(from_json(item))
        if progress is not None:
            progress("comparing tensors", len(results), len(pairs))
    return results
