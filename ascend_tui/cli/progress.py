"""The progress line every long subcommand shows on stderr."""

from __future__ import annotations

import threading
import time
from typing import Callable, TextIO

TTY_INTERVAL = 0.1  # seconds between rewrites of the line on a terminal
LOG_INTERVAL = 5.0  # seconds between lines of one phase in a log (stderr not a terminal)


def progress_text(phase: str, done: int, total: int | None) -> str:
    """`phase done/total ops`; a count past its total (a reader's estimate was low) is shown as the total."""
    if total:
        return f"{phase} {min(done, total):,}/{total:,} ops"
    return f"{phase} {done:,} ops" if done else phase


class ProgressLine:
    """A progress line on stderr: rewritten in place on a terminal; in a log, one line when a phase
    starts and then one every `LOG_INTERVAL` seconds while it runs, so a log never stops at `0/N`."""

    def __init__(self, stream: TextIO, quiet: bool = False, *, clock: Callable[[], float] = time.monotonic,
                 log_interval: float = LOG_INTERVAL) -> None:
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty()
        self.clock = clock
        self.log_interval = log_interval
        self._phase = ""
        self._last = 0.0
        self._ended = False  # this phase's `N/N` line is written
        self._lock = threading.Lock()

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        if self.quiet:
            return
        with self._lock:
            now = self.clock()
            same = phase == self._phase
            self._phase = phase
            if not same:
                self._ended = False
            if self.tty:
                if same and now - self._last < TTY_INTERVAL and (total is None or done < total - 1):
                    return
                self._last = now
                self.stream.write("\r\x1b[2K" + progress_text(phase, done, total))
                self.stream.flush()
                return
            if not same:
                # a phase's first line says how big it is rather than `0/N`, which reads as stuck
                text = f"{phase} ({total:,} ops)" if total and done == 0 else progress_text(phase, done, total)
            elif self._ended:
                return
            elif now - self._last >= self.log_interval or (total and done >= total):
                text = progress_text(phase, done, total)
            else:
                return
            self._last = now
            self._ended = bool(total and done >= total)
            self.stream.write(text + "\n")
            self.stream.flush()

    def done(self) -> None:
        if self.tty and not self.quiet and self._phase:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
