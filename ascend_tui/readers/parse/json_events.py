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
from typing import Any, BinaryIO, Callable, Iterator, TypeVar

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
    while len(buf.lstrip(_SPACE)) < 3:  # the first bytes that are not blanks (and a BOM)
        more = _read(path, fh, block, len(buf))
        if not more:
            break
        buf += more
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


class _Window:
    """The bytes being cut: one reused buffer, `buf[1:1 + size]` the unread rest of the file read so far.

    Reusing it saves the page faults of three fresh block-sized allocations per block; the free byte
    before the data and the one after the cut let a piece be decoded in place as `[...]`.
    """

    def __init__(self, first: bytes, block: int) -> None:
        self.buf = bytearray(len(first) + block + 2)
        self.buf[1:1 + len(first)] = first
        self.size = len(first)

    def fill(self, path: Path, fh: BinaryIO, block: int, at: int) -> int:
        """Read up to `block` more bytes after the data; how many came."""
        need = 1 + self.size + block + 1
        if len(self.buf) < need:
            self.buf.extend(bytes(need - len(self.buf)))
        view = memoryview(self.buf)[1 + self.size:1 + self.size + block]
        try:
            got = fh.readinto(view) or 0  # type: ignore[attr-defined]
        except EOFError:  # a gzip stream cut short: what came out before is kept
            got = 0
        except (OSError, zlib.error) as exc:
            raise InputError(path, f"cannot be decompressed: {exc}", where=f"byte {at + self.size}") from None
        finally:
            view.release()
        self.size += got
        return got

    def data(self) -> memoryview:
        return memoryview(self.buf)[1:1 + self.size]

    def drop(self, n: int) -> None:
        """Forget the first `n` data bytes (the carry moves to the front)."""
        rest = self.size - n
        self.buf[1:1 + rest] = self.buf[1 + n:1 + self.size]
        self.size = rest

    def decode(self, decode: Callable[[Any], T], first: int, end: int) -> T:
        """`decode` of `[` + data[first:end] + `]`, in place."""
        buf = self.buf
        before, after = buf[first], buf[1 + end]
        buf[first], buf[1 + end] = 91, 93
        view = memoryview(buf)[first:end + 2]
        try:
            return decode(view)
        finally:
            view.release()
            buf[first], buf[1 + end] = before, after


def _pieces(path: Path, fh: BinaryIO, decode: Callable[[Any], T], block: int, cancel: threading.Event | None,
            progress: Progress | None, ending: Ending, total: int | None) -> Iterator[T]:
    first, at = _start(path, fh, block)  # `at`: the byte offset of the window's first byte
    win = _Window(first, block)
    events = 0
    step = block  # doubled while no event ends in what was read, so one huge event costs no rescans
    while True:
        check_cancel(cancel)
        more = win.fill(path, fh, step, at)
        if more:
            guess = _guess(win, decode)
            if guess is not None:
                decoded, cut = guess
                del guess
                events += 1
                yield decoded
                del decoded  # before the next block is decoded: one block's events alive at a time
                win.drop(cut)
                at += cut
                step = block
                if progress is not None:
                    progress(f"reading {path.name}", at, total)
                continue
        data = win.data()
        marks, depth = _structure(np.frombuffer(data, np.uint8))
        closing = np.flatnonzero(depth < 0)
        if len(closing):
            k = int(closing[0])
            if data[marks[k]] != 93:  # a `}` closing nothing
                raise InputError(path, "not valid JSON: an unmatched '}'", where=f"byte {at + int(marks[k])}")
            span = _piece(path, data, marks[:k], depth[:k], at)
            end = span[1] if span is not None else 0
            if bytes(data[end:int(marks[k])]).strip(_SPACE + b","):  # the `]` closes the array
                raise InputError(path, "not valid JSON: junk before the closing ']'", where=f"byte {at + end}")
            data.release()
            if span is not None:
                yield _decoded(path, win, decode, span, at)
            if progress is not None:
                progress(f"reading {path.name}", at + win.size, total)
            return
        span = _piece(path, data, marks, depth, at)
        data.release()
        if span is not None:
            events += 1
            yield _decoded(path, win, decode, span, at)
            win.drop(span[1])
            at += span[1]
            step = block
            if progress is not None:
                progress(f"reading {path.name}", at, total)
        else:
            step *= 2
        if not more:  # the file ended inside the array
            rest = bytes(win.data()).lstrip(_SPACE + b",")
            ending.closed = False
            ending.offset = at + win.size - len(rest)
            ending.bad_bytes = len(rest)
            if events == 0:
                raise InputError(path, "truncated: the file ends before its first complete event",
                                 where=f"byte {at + win.size}")
            return


def _guess(win: _Window, decode: Callable[[Any], T]) -> tuple[T, int] | None:
    """The decoded events up to the last `}, {` in the window's tail, and where the last ends, if that decodes.

    A cut inside a string or a nested object leaves unbalanced quotes or braces, which no decoder
    accepts: a piece that decodes is whole events, so the exact scan is needed only when it does not.
    """
    buf, hi = win.buf, 1 + win.size
    last = None
    for last in _CUT.finditer(buf, max(1, hi - 65536), hi):
        pass
    if last is None:
        return None
    end = last.start()  # the `}` is at buf[end], data[end - 1]: `end` is the data index just past it
    first = 0
    while first < end and buf[1 + first] in _SPACE + b",":
        first += 1
    if first >= end or buf[1 + first] != 123:
        return None
    try:
        return win.decode(decode, first, end), end
    except BadPiece:
        return None


def _decoded(path: Path, win: _Window, decode: Callable[[Any], T], span: tuple[int, int], at: int) -> T:
    first, end = span
    try:
        return win.decode(decode, first, end)
    except BadPiece as exc:
        try:
            bytes(win.buf[1 + first:1 + end]).decode("utf-8")
        except UnicodeDecodeError as bad:
            raise InputError(path, "not UTF-8 text", where=f"byte {at + first + bad.start}") from None
        raise InputError(path, f"not a valid trace: {exc.problem}", where=f"byte {at + first - 1 + exc.pos}") from None


class BadPiece(ValueError):
    """A piece that does not decode: what is wrong and where, counted from the piece's first byte."""

    def __init__(self, problem: str, pos: int) -> None:
        super().__init__(problem)
        self.problem, self.pos = problem, pos


def _piece(path: Path, data: memoryview, marks: np.ndarray, depth: np.ndarray, at: int) -> tuple[int, int] | None:
    """`(first, end)` of the whole events in `data` (which starts between two), or None if none ends there."""
    ends = np.flatnonzero(depth == 0)
    if not len(ends):
        return None
    end = int(marks[ends[-1]]) + 1
    first = int(marks[0])
    head = bytes(data[:first])
    junk = len(head) - len(head.lstrip(_SPACE + b","))
    if data[first] != 123 or junk < first:
        raise InputError(path, "not a Chrome trace: the event array holds something other than objects",
                         where=f"byte {at + min(junk, first)}")
    return first, end
