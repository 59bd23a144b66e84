"""Work items on local processes or on a dask.distributed scheduler, results in submission order.

Every fan-out of the package goes through `run`: the tensor pairs of an msprobe compare
(`offline/compare_tensors.py`) and the rank folders of a cluster profile (`offline/profile_cluster.py`).
Local work runs on a forked process pool where fork exists (workers start in milliseconds); with a
scheduler address it goes to the dask.distributed workers there, which must see the same paths.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Callable, Iterator, Sequence, TypeVar

from ascend_tui.errors import InputError
from ascend_tui.progress import check_cancel

SCHEDULER_ENV = "ASCEND_TUI_SCHEDULER"
INSTALL = "pip install 'ascend-tui[cluster]'"
T = TypeVar("T")
R = TypeVar("R")


def scheduler_from(address: str | None) -> str | None:
    """The scheduler address given, else the one in $ASCEND_TUI_SCHEDULER, else None (local processes)."""
    return address or os.environ.get(SCHEDULER_ENV) or None


def local_workers(items: int) -> int:
    """How many local processes `items` work items get by default: one per item, at most one per CPU."""
    return max(1, min(items, os.cpu_count() or 1))


def run(fn: Callable[[T], R], items: Sequence[T], *, workers: int = 1, scheduler: str | None = None,
        cancel: threading.Event | None = None, what: str = "the work was cancelled") -> Iterator[R]:
    """`fn(item)` for every item, yielded in order: in this process when `workers` <= 1 (or there is one item),
    on `workers` local processes, or on the dask scheduler at `scheduler` (`fn` must then be importable there);
    a set `cancel` stops it with `Cancelled(what)`."""
    if scheduler:
        yield from _on_dask(scheduler, fn, items, cancel, what)
    elif workers <= 1 or len(items) <= 1:
        for item in items:
            check_cancel(cancel, what)
            yield fn(item)
    else:
        yield from _on_processes(min(workers, len(items)), fn, items, cancel, what)


def _on_processes(n: int, fn: Callable[[T], R], items: Sequence[T], cancel: threading.Event | None,
                  what: str) -> Iterator[R]:
    import multiprocessing as mp

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
        futures: list[Future[Any]] = [pool.submit(fn, item) for item in items]
        try:
            for f in futures:
                while True:
                    check_cancel(cancel, what)
                    try:
                        yield f.result(timeout=0.2)
                        break
                    except TimeoutError:
                        continue
        finally:
            for f in futures:
                f.cancel()


def _on_dask(address: str, fn: Callable[[T], R], items: Sequence[T], cancel: threading.Event | None,
             what: str) -> Iterator[R]:
    try:
        from distributed import Client
    except ImportError:
        raise InputError(address, f"--scheduler needs dask.distributed ({INSTALL})") from None
    try:
        client = Client(address, timeout="10s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise InputError(address, f"cannot reach the dask scheduler ({exc})") from None
    try:
        futures = client.map(fn, list(items), pure=False)
        for f in futures:
            check_cancel(cancel, what)
            yield f.result()
    finally:
        client.close()
