"""Open a file the same way whether it is plain or gzip-compressed, told by its first bytes, not its name.

`tensorboard_trace_handler(use_gzip=True)` writes `*.json.gz`, and profiler folders are often
shipped compressed: a reader opens through here and never needs to know.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import IO, Any

GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: Path) -> bool:
    """Whether `path` starts with the gzip magic bytes."""
    try:
        with path.open("rb") as fh:
            return fh.read(2) == GZIP_MAGIC
    except OSError:
        return False


def open_binary(path: Path) -> IO[bytes]:
    """`path` for reading bytes, decompressed when it is gzip."""
    if is_gzip(path):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def open_text(path: Path, *, encoding: str = "utf-8-sig", errors: str = "strict", newline: str | None = "") -> IO[str]:
    """`path` for reading text (csv-module newline handling by default), decompressed when it is gzip."""
    if is_gzip(path):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding=encoding, errors=errors, newline=newline)
    return path.open(encoding=encoding, errors=errors, newline=newline)


def head(path: Path, n: int = 4096) -> bytes:
    """The first `n` bytes of `path`'s content (decompressed), b"" when it cannot be read."""
    try:
        with open_binary(path) as fh:
            return fh.read(n)
    except (OSError, EOFError, gzip.BadGzipFile):
        return b""


def plain_name(path: Path) -> str:
    """The file name without a `.gz` ending (`kernel_details.csv.gz` -> `kernel_details.csv`)."""
    return path.name[:-3] if path.name.endswith(".gz") else path.name
