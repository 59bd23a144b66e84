"""Independent numpy work side by side on a few shared threads, in order.

numpy releases the GIL inside its loops, so the blocks of a million-row file split and decode on
several cores at once; a call made from inside a worker runs inline, so nesting cannot deadlock.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

T = TypeVar("T")
# one a CPU, at most 4 (only 2 CPUs were there to measure): on the 2-CPU test machine two threads read a
# million rows in 2.1-2.7 s instead of 3.1 s when it was otherwise idle, ~5% slower when other jobs held
# both CPUs (pandas' reader in the benchmark used both CPUs too: its CPU time exceeds its wall time)
WORKERS = max(1, min(4, os.cpu_count() or 1))

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_inside = threading.local()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="ascend-tui-numpy")
        return _pool


def _forked() -> None:
    """A forked child (a process pool's worker) has none of the parent's threads: it starts its own pool."""
    global _pool, _lock
    _pool, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forked)


def _marked(call: Callable[[], T]) -> T:
    _inside.on = True
    try:
        return call()
    finally:
        _inside.on = False


def inline() -> bool:
    """Whether work should run on the calling thread (one core, or already inside a worker)."""
    return WORKERS < 2 or getattr(_inside, "on", False)


def run_all(calls: Sequence[Callable[[], T]]) -> list[T]:
    """The results of `calls`, in order (the first exception is raised); one task a worker, each running
    a contiguous run of the calls (a task a call would hand the GIL over a few thousand times a column)."""
    if len(calls) < 2 or inline():
        return [c() for c in calls]
    size = -(-len(calls) // min(WORKERS, len(calls)))
    runs = [calls[i:i + size] for i in range(0, len(calls), size)]
    return [r for out in _executor().map(_marked, [partial(_each, run) for run in runs]) for r in out]


def _each(calls: Sequence[Callable[[], T]]) -> list[T]:
    return [c() for c in calls]


def ordered(calls: Iterable[Callable[[], T]], ahead: int = WORKERS) -> Iterator[T]:
    """The results of `calls` in order, up to `ahead` of them computed while the caller uses earlier ones."""
    if inline():
        for call in calls:
            yield call()
        return
    running: deque[Future[T]] = deque()
    try:
        for call in calls:
            running.append(_executor().submit(_marked, call))
            if len(running) > ahead:
                yield running.popleft().result()
        while running:
            yield running.popleft().result()
    finally:
        for f in running:
            f.cancel()
