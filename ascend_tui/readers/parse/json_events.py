"""The event array of a Chrome-trace file cut into pieces of whole events, read a block at a time.

A trace is a bare array of events or an object whose `traceEvents` key holds one (Kineto). A
numpy pass over each block finds the quotes that are not escaped and the braces outside strings;
the block is cut after the last event it holds whole and the rest carried into the next block, so
a decoder only ever sees `[{...}, ..., {...}]` of a few megabytes and memory stays bounded by the
block, not the file. Plain or gzip files (told apart by their magic bytes).
"""

from __future__ import annotations

import gzip
import re
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, TypeVar

import numpy as np

from ascend_tui.errors import InputError
from ascend_tui.progress import Progress, check_cancel

BLOCK = 8 << 20
SEEK_LIMIT = 256 << 20  # how far into an object to look for its traceEvents array
_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_SPACE = b" \t\r\n"
_CUT = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
T = TypeVar("T")


@dataclass(slots=True)
class Ending:
    """How the event array ended: closed, or cut (while being written) with `bad_bytes` of a last event lost."""

    closed: bool = True
    offset: int = 0  # byte where the incomplete tail starts
    bad_bytes: int = 0


def open_trace(path: Path) -> BinaryIO:
    """The file's bytes, gunzipped when it starts with the gzip magic."""
    fh = path.open("rb")
    if fh.read(2) == b"\x1f\x8b":
        fh.close()
        return gzip.open(path, "rb")  # type: ignore[return-value]
    fh.seek(0)
    return fh


def _structure(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the braces and brackets outside strings in `a` (which starts outside one), and the depth after each."""
    q = np.flatnonzero(a == 34)
    if len(q):
        esc = q[(q > 0) & (a[q - 1] == 92)]
        if len(esc):
            drop = []
            for p in esc.tolist():  # rare: count the backslashes before the quote
                k = p - 1
                while k >= 0 and a[k] == 92:
                    k -= 1
                if (p - 1 - k) & 1:
                    drop.append(p)
            if drop:
                q = np.setdiff1d(q, np.asarray(drop, q.dtype), assume_unique=True)
    br = np.flatnonzero((a | 32) == 123)  # { and [  (123, 91)
    br2 = np.flatnonzero((a | 32) == 125)  # } and ]  (125, 93)
    marks = np.concatenate([br, br2])
    marks.sort()
    if len(q):
        marks = marks[(np.searchsorted(q, marks) & 1) == 0]
    c = a[marks]
    depth = np.cumsum(np.where((c == 123) | (c == 91), 1, -1), dtype=np.int64)
    return marks, depth


def decoded_pieces(path: Path, decode: Callable[[bytes], T], *, block: int = BLOCK,
                   cancel: threading.Event | None = None, progress: Progress | None = None,
                   ending: Ending | None = None) -> Iterator[T]:
    """`decode(b"[{...}, ...]")` of the events of `path`, a block at a time.

    `decode` raises `BadPiece` for a piece that is not JSON. Raises `InputError` naming the byte for
    a file that is no trace, holds junk or non-UTF-8 text, or is cut before its first event; a file
    cut later yields what it holds whole and records the cut in `ending`.
    """
    ending = ending if ending is not None else Ending()
    try:
        fh = open_trace(path)
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    total = path.stat().st_size if not isinstance(fh, gzip.GzipFile) else None
    with fh:
        yield from _pieces(path, fh, decode, block, cancel, progress, ending, total)


def _read(path: Path, fh: BinaryIO, size: int, at: int) -> bytes:
    try:
        return fh.read(size)
    except EOFError:  # a gzip stream cut short: what came out before is kept
        return b""
    except (OSError, zlib.error) as exc:
        raise InputError(path, f"cannot be decompressed: {exc}", where=f"byte {at}") from None


def _start(path: Path, fh: BinaryIO, block: int) -> tuple[bytes, int]:
    """The bytes after the `[` that opens the event array, and the offset of their first byte."""
    buf = _read(path, fh, block, 0)
    lead = len(buf) - len(buf.lstrip(_SPACE))
    if buf[lead:lead + 3] == b"\xef\xbb\xbf":
        lead += 3
        lead += len(buf[lead:]) - len(buf[lead:].lstrip(_SPACE))
    first = buf[lead:lead + 1]
    if first == b"[":
        return buf[lead + 1:], lead + 1
    if first != b"{":
        what = "it is empty" if not buf.strip() else f"expected '[' or '{{', found {first!r}"
        raise InputError(path, f"not a Chrome trace: {what}", where=f"byte {lead}")
    while True:
        for m in _KEY.finditer(buf):
            if not _quotes_even(buf, m.start()):
                continue
            marks, depth = _structure(np.frombuffer(buf, np.uint8, count=m.start()))
            if len(depth) and int(depth[-1]) == 1:
                return buf[m.end():], m.end()
        more = _read(path, fh, block, len(buf))
        if not more or len(buf) > SEEK_LIMIT:
            raise InputError(path, "not a Chrome trace: an object without a traceEvents array",
                             where=f"byte {lead}")
        buf += more


def _quotes_even(buf: bytes, stop: int) -> bool:
    """Whether `buf[:stop]` ends outside a string (its unescaped quotes are even in number)."""
    a = np.frombuffer(buf, np.uint8, count=stop)
    q = np.flatnonzero(a == 34)
    escaped = 0
    for p in q[(q > 0) & (a[q - 1] == 92)].tolist():
        k = p - 1
        while k >= 0 and a[k] == 92:
            k -= 1
        escaped += (p - 1 - k) & 1
    return (len(q) - escaped) % 2 == 0


def _pieces(path: Path, fh: BinaryIO, decode: Callable[[bytes], T], block: int, cancel: threading.Event | None,
            progress: Progress | None, ending: Ending, total: int | None) -> Iterator[T]:
    carry, at = _start(path, fh, block)  # `at`: the byte offset of carry[0]
    events = 0
    while True:
        check_cancel(cancel)
        more = _read(path, fh, block, at + len(carry))
        buf = carry + more if carry else more
        if more:
            guess = _guess(path, buf, at, decode)
            if guess is not None:
                events += 1
                yield guess[0]
                carry, at = buf[guess[1]:], at + guess[1]
                if progress is not None:
                    progress(f"reading {path.name}", at, total)
                continue
        marks, depth = _structure(np.frombuffer(buf, np.uint8))
        closing = np.flatnonzero(depth < 0)
        if len(closing):
            k = int(closing[0])
            if buf[marks[k]] != 93:  # a `}` closing nothing
                raise InputError(path, "not valid JSON: an unmatched '}'", where=f"byte {at + int(marks[k])}")
            piece = _piece(path, buf, marks[:k], depth[:k], at)
            end = piece[2] if piece is not None else 0
            if buf[end:int(marks[k])].strip(_SPACE + b","):  # the `]` closes the array; what follows is not events
                raise InputError(path, "not valid JSON: junk before the closing ']'", where=f"byte {at + end}")
            if piece is not None:
                yield _decoded(path, decode, piece[1], piece[0])
            if progress is not None:
                progress(f"reading {path.name}", at + len(buf), total)
            return
        piece = _piece(path, buf, marks, depth, at)
        if piece is not None:
            events += 1
            yield _decoded(path, decode, piece[1], piece[0])
            carry, at = buf[piece[2]:], at + piece[2]
            if progress is not None:
                progress(f"reading {path.name}", at, total)
        else:
            carry = buf  # no event ends in this block: read on
        if not more:  # the file ended inside the array
            rest = carry.lstrip(_SPACE + b",")
            ending.closed = False
            ending.offset = at + len(carry) - len(rest)
            ending.bad_bytes = len(rest)
            if events == 0:
                raise InputError(path, "truncated: the file ends before its first complete event",
                                 where=f"byte {at + len(carry)}")
            return


def _guess(path: Path, buf: bytes, at: int, decode: Callable[[bytes], T]) -> tuple[T, int] | None:
    """The decoded events up to the last `}, {` in the block's tail, and the end of the last, if that decodes.

    A cut inside a string or a nested object leaves unbalanced quotes or braces, which no decoder
    accepts: a piece that decodes is whole events, so the exact scan is needed only when it does not.
    """
    tail = max(0, len(buf) - 65536)
    last = None
    for last in _CUT.finditer(buf, tail):
        pass
    if last is None:
        return None
    end = last.start() + 1
    first = len(buf) - len(buf.lstrip(_SPACE + b","))
    if first >= end or buf[first] != 123:
        return None
    body = buf[first:end]
    if not body.isascii():
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        return decode(b"[" + body + b"]"), end
    except BadPiece:
        return None


def _decoded(path: Path, decode: Callable[[bytes], T], piece: bytes, offset: int) -> T:
    try:
        return decode(piece)
    except BadPiece as exc:
        raise InputError(path, f"not a valid trace: {exc.problem}", where=f"byte {offset - 1 + exc.pos}") from None


class BadPiece(ValueError):
    """A piece that does not decode: what is wrong and where, counted from the piece's first byte."""

    def __init__(self, problem: str, pos: int) -> None:
        super().__init__(problem)
        self.problem, self.pos = problem, pos


def _piece(path: Path, buf: bytes, marks: np.ndarray, depth: np.ndarray, at: int) -> tuple[int, bytes, int] | None:
    """`(offset, b"[events]", end)` of the whole events in `buf` (which starts between two), or None if none ends."""
    ends = np.flatnonzero(depth == 0)
    if not len(ends):
        return None
    end = int(marks[ends[-1]]) + 1
    first = int(marks[0])
    junk = len(buf[:first]) - len(buf[:first].lstrip(_SPACE + b","))
    if buf[first] != 123 or junk < first:
        raise InputError(path, "not a Chrome trace: the event array holds something other than objects",
                         where=f"byte {at + min(junk, first)}")
    body = buf[first:end]
    if not body.isascii():
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(path, "not UTF-8 text", where=f"byte {at + first + exc.start}") from None
    return at + first, b"[" + body + b"]", end
