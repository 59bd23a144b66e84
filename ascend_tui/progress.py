"""The one progress callback type every long operation takes, the cancel check, and the collector pause of big loads."""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from typing import Callable, Iterator

from ascend_tui.errors import Cancelled

Progress = Callable[[str, int, "int | None"], None]
"""`progress(phase, done, total)`: what is happening, how far, and out of how much (None when unknown)."""


def check_cancel(cancel: threading.Event | None, what: str = "cancelled") -> None:
    """Raise `Cancelled` when the caller asked to stop."""
    if cancel is not None and cancel.is_set():
        raise Cancelled(what)


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building millions of objects that form no cycles.

    Loading a 100k-operator graph or a 100 MB dump allocates and frees nothing cyclic; the
    collector would only rescan everything again and again (a third of the time or more).
    What the load leaves behind lives as long as the graph, so it goes straight to the oldest
    generation (`freeze` then `unfreeze`: two list splices) instead of being scanned once as
    young and once as middle-aged on the way there (~0.2 s each for 100k operators). Skipped
    when something else holds objects frozen, so as not to thaw them.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


@contextlib.contextmanager
def frozen_gc() -> Iterator[None]:
    """Let the cyclic garbage collector look only at objects made inside the block.

    A recorded run makes ~10 objects an operator in a process that already holds hundreds of
    thousands (torch's); every full collection would rescan all of those. `gc.freeze()` sets
    them aside for the block (and collections of what the run makes go on as usual), and
    `gc.unfreeze()` puts them back. Pausing the collector instead only moves the cost to the
    block's end, where the first allocation pays one collection of everything made inside it.
    A process that froze objects itself is left as it is.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()



class HeldFreeze:
    """What is alive set aside from the collector's full passes (`gc.freeze()`) until `release()`, which undoes it.

    An interface keeps its investigation (150k+ objects) alive while it is shown; each full collection
    would walk all of it inside a key press. `refreeze()` first undoes its own earlier freeze, so what a
    new investigation replaced is collected; it does nothing in a process that froze objects itself, and
    nothing after `release()` (a worker finishing after the interface closed leaves no freeze behind).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held = False
        self._released = False

    def refreeze(self) -> None:
        with self._lock:
            if self._released or (not self._held and gc.get_freeze_count()):
                return
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self._held = True

    def release(self) -> None:
        with self._lock:
            self._released = True
            if self._held:
                gc.unfreeze()
                self._held = False


class IdleCollector:
    """The collector's full passes taken out of the allocation-driven path and run when an interface is idle.

    A full (generation 2) collection walks every object not frozen; while an interface is shown that is
    tens of thousands of cached painted lines, ~25 ms of CPU, and the allocations of a key press set it off
    (1 key in ~25). `hold()` raises the third threshold to `BACKSTOP` (generations 0 and 1 go on as before,
    so short-lived cycles die as usual); `collect_if_due(quiet)`, called by the interface on a timer, runs
    the full pass once `DUE` middle-generation passes have happened since the last one (the default
    policy's third threshold) and `quiet()` says nothing is waiting to be handled or painted. Should the
    interface stay busy that long, `BACKSTOP` middle-generation passes still set off a full one on their
    own: cyclic garbage is collected either way, memory stays bounded. `release()` puts the thresholds
    back as they were (a process that changed them meanwhile keeps its own).
    """

    DUE = 10
    BACKSTOP = 100
    collecting = False  # True during a collection made here (a `gc.callbacks` hook can tell it from the rest)

    def __init__(self) -> None:
        self._saved: tuple[int, ...] | None = None
        self.runs = 0
        self.cpu_s = 0.0  # CPU time of the collections made here

    def hold(self) -> None:
        if self._saved is not None:
            return
        self._saved = gc.get_threshold()
        gc.set_threshold(self._saved[0], self._saved[1], max(self._saved[2], self.BACKSTOP))

    def collect_if_due(self, quiet: Callable[[], bool]) -> bool:
        """One full collection when it is due and `quiet()`; True when it ran."""
        if self._saved is None or gc.get_count()[2] < self.DUE or not gc.isenabled() or not quiet():
            return False
        start = time.thread_time()
        IdleCollector.collecting = True
        try:
            gc.collect(2)
        finally:
            IdleCollector.collecting = False
        self.cpu_s += time.thread_time() - start
        self.runs += 1
        return True

    def release(self) -> None:
        if self._saved is None:
            return
        if gc.get_threshold() == (self._saved[0], self._saved[1], max(self._saved[2], self.BACKSTOP)):
            gc.set_threshold(*self._saved)
        self._saved = None
