"""The progress line every long subcommand shows on stderr."""

from __future__ import annotations

import threading
import time
from typing import TextIO


class ProgressLine:
    """A progress line on stderr: rewritten in place on a terminal, one line per phase elsewhere."""

    def __init__(self, stream: TextIO, quiet: bool = False) -> None:
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty()
        self._phase = ""
        self._last = 0.0
        self._lock = threading.Lock()

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        if self.quiet:
            return
        with self._lock:
            text = f"{phase} {done}/{total} ops" if total else (f"{phase} {done} ops" if done else phase)
            if self.tty:
                now = time.monotonic()
                if phase == self._phase and now - self._last < 0.1 and (total is None or done < total - 1):
                    return
                self._last = now
                self.stream.write("\r\x1b[2K" + text)
                self.stream.flush()
            elif phase != self._phase:
                self.stream.write(text + "\n")
                self.stream.flush()
            self._phase = phase

    def done(self) -> None:
        if self.tty and not self.quiet and self._phase:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
