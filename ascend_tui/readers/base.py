"""What a reader is: a name, a cheap sniff, and a load that returns an `Investigation` or raises `InputError`."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation
    from ascend_tui.progress import Progress


class Reader(Protocol):
    """One artifact format: `sniff` looks at names and the first bytes only; `load` reads it all."""

    @property
    def name(self) -> str: ...

    def sniff(self, path: Path) -> bool: ...

    def load(self, path: Path, progress: Progress | None = None,
             cancel: threading.Event | None = None) -> Investigation: ...


@dataclass(frozen=True, slots=True)
class FunctionReader:
    """A reader made of a module's `sniff` and `load` functions; `streams` when `load` also takes `on_partial`
    (called with partial investigations while a large file is still being read)."""

    name: str
    sniff: Callable[[Path], bool]
    load: Callable[..., Investigation]
    streams: bool = False


def head(path: Path, n: int = 4096) -> bytes:
    """The first `n` bytes of a regular file, or b"" when it is not one or cannot be read (what sniffing needs)."""
    try:
        if not path.is_file():
            return b""
        with path.open("rb") as fh:
            return fh.read(n)
    except OSError:
        return b""
