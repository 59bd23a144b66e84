"""Follow mode (toolong's `tail -f` for evidence): keep reading a growing sanitizer log or a `watch()` folder.

A follower is polled from a worker thread; each poll reads only what was appended since the
last one and returns a fresh `Investigation` when something new arrived (None otherwise), so
the app adds findings as the running tool writes them. No textual here.
"""

from __future__ import annotations

import codecs
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ascend_tui.errors import InputError

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

READ_LIMIT = 16 * 1024 * 1024  # bytes read per poll at most: a huge log catches up over a few polls
WATCH_PATTERN = "*.atui.json"  # what ascend_tui.watch() saves (ascend-tui-watch-step{step}.atui.json)


class Follower(Protocol):
    """Something that grows: `poll()` returns a newer investigation when it changed."""

    path: Path

    def poll(self) -> Investigation | None: ...


class LogFollower:
    """A sanitizer log still being written: complete lines go through the streaming parser as they land."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._reset()

    def _reset(self) -> None:
        from ascend_tui.readers.sanitizer.log import SanitizerParser

        self.parser = SanitizerParser(str(self.path), strict=False)
        self.offset = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._tail = ""
        self._shown = -1

    def poll(self) -> Investigation | None:
        """Read what was appended; a new investigation when the events or summaries changed."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise InputError(self.path, exc.strerror or str(exc)) from None
        if size < self.offset:  # truncated or replaced: start over
            self._reset()
        if size > self.offset:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read(min(size - self.offset, READ_LIMIT))
            self.offset += len(data)
            lines = (self._tail + self._decoder.decode(data)).split("\n")
            self._tail = lines.pop()
            for line in lines:
                self.parser.feed(line)
        log = self.parser.log
        seen = len(log.events) + len(log.summaries)
        if seen == self._shown or not log.tools:
            return None
        self._shown = seen
        return self._investigation()

    def _investigation(self) -> Investigation:
        from ascend_tui.offline.memory import investigation_from_log

        log = self.parser.log
        return investigation_from_log(replace(log, events=list(log.events), summaries=list(log.summaries),
                                              tools=list(log.tools), log_files=list(log.log_files),
                                              unrecognized=list(log.unrecognized)))


class FolderFollower:
    """A folder `ascend_tui.watch()` saves into: each new investigation file is shown when it appears."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: dict[Path, float] = {}

    def poll(self) -> Investigation | None:
        """The newest investigation file that appeared or changed since the last poll, read."""
        from ascend_tui.offline.open import open_path

        fresh: list[tuple[float, Path]] = []
        for file in self.path.glob(WATCH_PATTERN):
            try:
                mtime = file.stat().st_mtime
            except OSError:
                continue
            if self._seen.get(file) != mtime:
                self._seen[file] = mtime
                fresh.append((mtime, file))
        if not fresh:
            return None
        return open_path(max(fresh)[1])


def follower_for(path: str | Path) -> Follower:
    """A `LogFollower` for a file, a `FolderFollower` for a folder."""
    p = Path(path)
    if p.is_dir():
        return FolderFollower(p)
    if p.exists() and not p.is_file():
        raise InputError(p, "can only follow a sanitizer log file or a watch() output folder")
    return LogFollower(p)
