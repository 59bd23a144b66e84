"""Reading msprobe tensor files and computing pair metrics, spread over processes or a dask cluster.

Each `.pt` file is memory-mapped (`torch_pt`, without torch; `torch.load(..., weights_only=True,
mmap=True)` for files that needs) and read once, in chunks, by `checks.precision.Accumulator`; work goes out as batches of pairs to a
local process pool or, with a scheduler address, to `dask.distributed` workers that see the
same paths. Results come back in submission order whatever the finishing order.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from ascend_tui.checks.precision import SHAPE_UNMATCH, Accumulator, TensorMetrics
from ascend_tui.errors import Cancelled, InputError
from ascend_tui.readers.parse import torch_pt
from ascend_tui.progress import Progress

CHUNK = 1 << 16
BATCH_BYTES = 32 << 20
PARALLEL_BYTES = 256 << 20
SCHEDULER_ENV = "ASCEND_TUI_SCHEDULER"
NO_TORCH = "this tensor file needs PyTorch to read (pip install torch)"


@dataclass(frozen=True, slots=True)
class Pair:
    """One target/golden tensor file pair to compare; `nbytes` sizes the batches."""

    target: str
    golden: str
    nbytes: int = 0


def torch_available() -> bool:
    """True when torch can be imported (without importing it)."""
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def load_tensor(path: str) -> Any:
    """The tensor in an msprobe `.pt` file, memory-mapped, on the CPU; anything else is an InputError."""
    import torch

    try:
        t = torch.load(path, weights_only=True, mmap=True, map_location="cpu")
    except FileNotFoundError:
        raise InputError(path, "tensor file named in dump.json is missing") from None
    except Exception as exc:  # noqa: BLE001 - torch raises many types for foreign or truncated files
        raise InputError(path, f"not a readable torch tensor file ({type(exc).__name__}: {str(exc)[:120]})") from None
    if not isinstance(t, torch.Tensor):
        raise InputError(path, f"holds a {type(t).__name__}, expected one tensor")
    return t.detach()


def _numpy_chunks(t: Any, size: int) -> Iterator[Any]:
    """Flattened chunks of `t` as numpy arrays in the dtype msprobe compares (bfloat16/float8 -> float32)."""
    import torch

    flat = t.reshape(-1)
    widen = flat.dtype == torch.bfloat16 or "float8" in str(flat.dtype)
    for start in range(0, flat.numel(), size):
        part = flat[start:start + size]
        yield (part.float() if widen else part).numpy()


def _np_dtype(t: Any) -> Any:
    import numpy as np
    import torch

    if t.dtype == torch.bfloat16 or "float8" in str(t.dtype):
        return np.dtype(np.float32)
    return torch.empty(0, dtype=t.dtype).numpy().dtype


def _open(path: str) -> Any:
    """A tensor file as something with `numel`, `shape`, `compare_dtype` and `chunks(size)`.

    The torch-free memory-mapped reader first (`torch_pt`); `torch.load(weights_only=True, mmap=True)`
    for the files it does not handle.
    """
    if path.endswith(".npy"):
        return _NpyFlat(path)
    try:
        return torch_pt.open_tensor(path)
    except torch_pt.Unsupported:
        if not torch_available():
            raise InputError(path, NO_TORCH) from None
        return _TorchFlat(load_tensor(path))


class _NpyFlat:
    """A MindSpore dump's `.npy` tensor (numpy, memory-mapped, never unpickled), seen like `torch_pt.FlatTensor`."""

    def __init__(self, path: str) -> None:
        import numpy as np

        try:
            self.a = np.load(path, mmap_mode="r", allow_pickle=False)
        except FileNotFoundError:
            raise InputError(path, "tensor file named in dump.json is missing") from None
        except (OSError, ValueError) as exc:
            raise InputError(path, f"not a readable .npy tensor file ({exc})") from None
        self.shape = tuple(self.a.shape)
        self.numel = int(self.a.size)
        self.compare_dtype = self.a.dtype

    def chunks(self, size: int) -> Iterator[Any]:
        flat = self.a.reshape(-1)
        for start in range(0, self.numel, size):
            yield flat[start:start + size]


class _TorchFlat:
    """A tensor loaded by torch, seen through the same interface as `torch_pt.FlatTensor`."""

    def __init__(self, t: Any) -> None:
        self.t = t
        self.shape = tuple(t.shape)
        self.numel = t.numel()
        self.compare_dtype = _np_dtype(t)

    def chunks(self, size: int) -> Iterator[Any]:
        return _numpy_chunks(self.t, size)


def compare_pair(target: str, golden: str, chunk: int = CHUNK) -> TensorMetrics:
    """Metrics of two tensor files, each read once in chunks."""
    n, b = _open(target), _open(golden)
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
    """Metrics of every pair, in order: inline for small jobs, else on processes or the dask cluster."""
    if not pairs:
        return []
    groups = batches(pairs)
    payload = [[(p.target, p.golden) for p in g] for g in groups]
    scheduler = scheduler or os.environ.get(SCHEDULER_ENV) or None
    total = len(pairs)
    done = 0
    results: list[TensorMetrics] = []

    def take(batch_result: list[dict[str, Any] | str]) -> None:
        nonlocal done
        for item in batch_result:
            if isinstance(item, str):
                raise InputError("", item)
            results.append(from_json(item))
        done += len(batch_result)
        if progress is not None:
            progress("comparing tensors", done, total)

    if scheduler is not None:
        for r in _on_dask(scheduler, payload, cancel):
            take(r)
        return results
    big = sum(p.nbytes for p in pairs) >= PARALLEL_BYTES
    n = workers if workers is not None else min(len(groups), os.cpu_count() or 1) if big else 1
    if n <= 1 or len(groups) == 1:
        for group in payload:
            _check(cancel)
            take(compare_batch(group))
        return results
    for r in _on_processes(n, payload, cancel):
        take(r)
    return results


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled("the compare was cancelled")


def _on_processes(n: int, payload: list[list[tuple[str, str]]], cancel: threading.Event | None
                  ) -> Iterator[list[dict[str, Any] | str]]:
    """Batches on a local process pool (forked: workers start in milliseconds), results in submission order."""
    import multiprocessing as mp

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
        futures: list[Future[Any]] = [pool.submit(compare_batch, g) for g in payload]
        try:
            for f in futures:
                while True:
                    _check(cancel)
                    try:
                        yield f.result(timeout=0.2)
                        break
                    except TimeoutError:
                        continue
        finally:
            for f in futures:
                f.cancel()


def _on_dask(address: str, payload: list[list[tuple[str, str]]], cancel: threading.Event | None
             ) -> Iterator[list[dict[str, Any] | str]]:
    """Batches on an existing dask.distributed scheduler; the workers must see the dump paths."""
    try:
        from distributed import Client
    except ImportError:
        raise InputError(address, "--scheduler needs dask.distributed (pip install 'ascend-tui[cluster]')") from None
    try:
        client = Client(address, timeout="10s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise InputError(address, f"cannot reach the dask scheduler ({exc})") from None
    try:
        futures = client.map(compare_batch, payload, pure=False)
        for f in futures:
            _check(cancel)
            yield f.result()
    finally:
        client.close()

