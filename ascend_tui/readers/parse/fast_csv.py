"""Split a CSV into columns with numpy: quote parity finds the delimiters, a column is decoded only when asked.

A million-row kernel table through the csv module costs a Python object per cell; here a block of
the file is one uint8 array, every record's separators are found at once (commas and newlines
outside quoted spans) and kept as small offsets, and a column is decoded on demand: numbers eight
bytes at a time as uint64 words (SWAR digit parsing, exact for the short decimals profilers write),
text hashed word by word into codes and checked byte-exactly against each code's first row.
Anything irregular (too few fields, an odd quote) returns None so the caller can use the csv module,
which names the bad record; a cell that is not a number returns None for that column only.
"""

from __future__ import annotations

import mmap
import threading
from typing import Callable, Iterator

import numpy as np

from ascend_tui.graph.profile import Codes
from ascend_tui.readers.parse import fast_numbers
from ascend_tui.readers.parse.fast_numbers import MAX_WIDTH, matrix

BLOCK = 4 * 1024 * 1024
PAD = 16  # readable bytes after a block's last record, so an 8-byte word can be loaded at any field
GROUP = 8  # fields a record's offsets are anchored in
SAMPLE = 4096  # rows whose distinct values are found first; the rest are looked up among them
QUOTE, COMMA, NL, CR = ord('"'), ord(","), ord("\n"), ord("\r")

_U = np.uint64
_MIX = np.random.default_rng(20261130).integers(1, 2**63 - 1, size=MAX_WIDTH // 8 + 1, dtype=np.int64).astype(
    np.uint64) | np.uint64(1)  # odd multipliers, one a word of a cell
_LOW_BYTES = np.array([(1 << (8 * b)) - 1 for b in range(9)], np.uint64)  # [n]: keeps a word's first n bytes


def blocks(fh, first: bytes = b"", size: int = BLOCK,  # type: ignore[no-untyped-def]
           spare: list[mmap.mmap] | None = None) -> Iterator[np.ndarray]:
    """Blocks of whole records (quote-aware), each a uint8 array ending with a newline, PAD readable bytes after.

    Each block lives in its own anonymous memory map: untouched pages cost nothing and a block's
    memory goes back to the system as soon as nothing reads it. With `spare`, the caller hands back
    the maps of blocks nothing reads any more (`np.ndarray.base`) and they are filled again: a
    fresh map costs a page fault every 4 KiB it is written.
    """
    for buf, _ in quoted_blocks(fh, first, size, spare):
        yield buf


def quoted_blocks(fh, first: bytes = b"", size: int = BLOCK,  # type: ignore[no-untyped-def]
                  spare: list[mmap.mmap] | None = None) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
    """`blocks`, each with where its `"` bytes are (found to cut the block outside quotes; `Split.of` takes them
    instead of scanning the block again), or None for the last one."""
    carry = first
    marks = np.empty(0, bool)  # work space for finding the quotes, reused block to block
    while True:
        need = len(carry) + size + PAD
        buf = spare.pop() if spare else None
        if buf is None or len(buf) < need:
            buf = mmap.mmap(-1, need if spare is None else max(need, 2 * size + PAD))
        buf[:len(carry)] = carry
        got = fh.readinto(memoryview(buf)[len(carry):len(carry) + size]) or 0
        end = len(carry) + got
        if not got:
            if carry.strip(b"\r\n"):
                tail = carry + (b"" if carry.endswith(b"\n") else b"\n")
                last = mmap.mmap(-1, len(tail) + PAD)
                last[:len(tail)] = tail
                yield np.frombuffer(last, np.uint8, count=len(tail)), None
            return
        cut = buf.rfind(b"\n", 0, end)
        if cut < 0:
            carry = buf[:end]
            continue
        if len(marks) < cut:
            marks = np.empty(end, bool)
        quotes = np.flatnonzero(np.equal(np.frombuffer(buf, np.uint8, count=cut), QUOTE, out=marks[:cut]))
        while cut >= 0 and len(quotes) & 1:  # that newline sits inside a quoted field: step back
            cut = buf.rfind(b"\n", 0, cut)
            quotes = quotes[:int(np.searchsorted(quotes, cut + 1))] if cut >= 0 else quotes[:0]
        if cut < 0:
            carry = buf[:end]
            continue
        carry = buf[cut + 1:end]
        yield np.frombuffer(buf, np.uint8, count=cut + 1), quotes


class Scratch:
    """Work arrays reused from block to block (one set a thread): a fresh block-sized array costs its page faults."""

    __slots__ = ("arrays",)

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def counting(self, n: int) -> np.ndarray:
        """0, 1, ... n-1 as int32 (made once)."""
        a = self.arrays.get("counting")
        if a is None or len(a) < n:
            a = self.arrays["counting"] = np.arange(max(n, 2 * len(a) if a is not None else 1 << 16), dtype=np.int32)
        return a[:n]

    def get(self, name: str, n: int, dtype: type = bool) -> np.ndarray:
        a = self.arrays.get(name)
        if a is None or len(a) < n:
            a = self.arrays[name] = np.empty(max(n, BLOCK + PAD), dtype)
        return a[:n]


_REREAD = threading.Lock()  # one block read again at a time: two threads asking for it read it once


class Split:
    """The fields of the records in one block: record i's field j spans `bounds(j)[0][i]` to `bounds(j)[1][i]`.

    Where each field ends is first kept as whole offsets (the columns a reader decodes at once read
    them directly); `compact` then keeps them relative to each record's start: the low byte of every
    offset plus a uint16 anchor a GROUP of fields (when no group spans 256 bytes; whole offsets
    otherwise), about a fifth of the text it indexes, so any column can be decoded later. Or, once
    the columns a reader needs now are decoded, `release` lets the block go (bytes and offsets);
    a column asked for later reads the bytes again from their `source` (the file) and splits them
    again, checked to hold the same records.
    """

    __slots__ = ("_buf", "_full", "_source", "_ends", "_need", "_last", "row", "anchor", "delta", "n", "width",
                 "ragged")  # delta: offsets or their low bytes

    def __init__(self, buf: np.ndarray, row: np.ndarray, ends: np.ndarray, ragged: bool = False,
                 need: int | None = None) -> None:
        """`ends[i, j]`: where field j of record i ends in `buf`; `row[i]`: where record i starts."""
        self._buf: np.ndarray | None = buf
        self._full: np.ndarray | None = _padded(buf)
        self._source: Callable[[Split], Split] | None = None
        self._ends: np.ndarray | None = ends
        self._need, self._last = need, -1
        self.row, self.ragged = row, ragged
        self.n, self.width = ends.shape
        self.anchor: np.ndarray | None = None
        self.delta: np.ndarray | None = None

    def compact(self) -> Split:
        """Keep the field ends as their low bytes and anchors, not whole offsets (a fifth of the memory)."""
        ends, row = self._ends, self.row
        if ends is None:
            return self
        n, w = ends.shape
        longest = int((ends[:, -1] - row).max()) if n else 0
        rel = np.empty((n, w), np.uint16 if longest < 65536 else np.int64)
        np.subtract(ends, row[:, None], out=rel, casting="unsafe")  # from the record's start
        # kept as the low byte of each offset plus the offset where each GROUP of fields starts, when
        # no group spans 256 bytes: a third less than uint16 offsets for every field
        last = np.minimum(np.arange((w - 1) // GROUP + 1) * GROUP + GROUP - 1, w - 1)
        tail = rel[:, last].astype(np.int64)  # where each group's last field ends
        span = tail.copy()
        span[:, 1:] -= tail[:, :-1]
        if rel.dtype == np.uint16 and (int(span.max()) if n else 0) < 256:
            # what a block keeps goes in a memory map of its own, apart from the split's short-lived arrays
            # (interleaved on the heap they would leave it fragmented, a third more memory than needed)
            keep = _Arena(n * 8 + n * (len(last) - 1) * 2 + n * w)
            self.row = keep.take(row)
            self.anchor = keep.take(rel[:, last[:-1]].T)
            self.delta = keep.take(rel.T, np.uint8)  # a field's offsets side by side: a column reads them at once
        else:
            self.anchor, self.delta = None, np.ascontiguousarray(rel.T)
        self._ends = None
        return self

    @classmethod
    def of(cls, buf: np.ndarray, width: int, need: int | None = None, scratch: Scratch | None = None,
           quotes: np.ndarray | None = None) -> Split | None:
        """Split `buf` into records of `width` fields; None when a record has fewer than `need` (default `width`)
        or a quote is left open.

        A record with more fields keeps its first `width`; one with fewer (but at least `need`) reads
        the missing ones as empty cells. With `need == width` (strict) a record's extra fields must be
        empty (a trailing comma), else None: the caller's slow path skips the odd record. `quotes`: where the
        block's `"` bytes are, when known.
        """
        need = width if need is None else need
        size = len(buf)
        scratch = scratch if scratch is not None else Scratch()
        nlm = np.equal(buf, NL, out=scratch.get("nl", size))
        sep = np.equal(buf, COMMA, out=scratch.get("sep", size))
        sep |= nlm
        if quotes is None:  # (`quoted_blocks` hands over where they are)
            quotes = np.flatnonzero(np.equal(buf, QUOTE, out=scratch.get("quote", size)))
        if len(quotes) & 1:
            return None
        if len(quotes):  # no separator inside a quoted span (from an opening quote to its closing one)
            lens = quotes[1::2] - quotes[0::2]
            total = int(lens.sum())
            offset = np.cumsum(lens) - lens
            inside = np.repeat((quotes[0::2] - offset).astype(np.int32), lens)
            inside += scratch.counting(total)
            sep[inside] = False
            del inside
        del quotes
        pos = np.flatnonzero(sep)
        nl = pos[width - 1::width] if width > 1 and len(pos) and len(pos) % width == 0 else pos[:0]
        # the common block: every record `width` fields, its newline the last of them, and no other newline
        # (none in quotes, no blank line); else the newlines outside quotes are found from the bytes
        blanks = False
        if not (len(nl) and bool((buf[nl] == NL).all()) and int(np.count_nonzero(nlm)) == len(nl)):
            nl = np.flatnonzero(nlm)
            nl = nl[sep[nl]]  # the record ends: newlines outside quotes
            # blank lines (a newline right after a newline, or after a lone \r) hold no record
            prev = np.concatenate((np.array([-1], np.int64), nl[:-1]))
            empty = (nl - prev == 1) | ((nl - prev == 2) & (buf[np.maximum(nl - 1, 0)] == CR))
            blanks = bool(empty.any())
            if blanks:
                pos = pos[np.isin(pos, nl[empty], assume_unique=True, invert=True)]
                nl = nl[~empty]
        del nlm, sep
        records = len(nl)
        if records == 0:
            return None
        ragged = len(pos) != records * width or not np.array_equal(pos[width - 1::width], nl)
        if ragged:
            ends = np.searchsorted(pos, nl)  # index in pos of each record's newline
            counts = np.diff(ends, prepend=-1)
            if int(counts.min()) < need:
                return None
            firsts = ends - counts + 1
            long = np.flatnonzero(counts > width)
            if need >= width and len(long):  # strict: extra cells must be empty (a trailing comma), not data
                last = pos[firsts[long] + width - 1]  # where field `width` ends
                gap = nl[long] - last - (buf[np.maximum(nl[long] - 1, 0)] == CR)
                if not np.array_equal(gap, counts[long] - width):
                    return None
            mat = pos[firsts[:, None] + np.minimum(np.arange(width)[None, :], counts[:, None] - 1)]
        else:
            mat = pos.reshape(records, width)
        del pos
        first = np.empty(records, np.int64)
        first[0] = 0
        first[1:] = nl[:-1] + 1
        if blanks:
            while True:  # skip the blank lines before a record
                blank = (first < mat[:, 0]) & ((buf[first] == NL) | (buf[first] == CR))
                if not blank.any():
                    break
                first = np.where(blank, first + 1, first)
        return cls(buf, first, mat, ragged, need)

    @property
    def buf(self) -> np.ndarray:
        """The block's bytes (read again from the source when they were released)."""
        buf = self._buf
        return buf if buf is not None else self._reread()[0]

    @property
    def full(self) -> np.ndarray:
        """The block's bytes and the PAD bytes after them."""
        full = self._full
        return full if full is not None else self._reread()[1]

    def release(self, source: Callable[[Split], Split]) -> None:
        """Let the block go, bytes and offsets; `source(self)` reads and splits it again (`resplit`), or refuses,
        when a column not decoded yet is asked for."""
        self._source = source
        self._last = int(self.row[-1]) if self.n else -1
        self._buf = self._full = self._ends = self.anchor = self.delta = None
        self.row = np.zeros(0, np.int64)

    @property
    def released(self) -> bool:
        """Whether the block's bytes went (`release`) and are not read again yet."""
        return self._buf is None

    def resplit(self, buf: np.ndarray) -> Split | None:
        """`buf` split the way this block was, when it holds the same records (else None): how a source checks
        the bytes it read again."""
        again = Split.of(buf, self.width, self._need)
        if again is None or (again.n, again.ragged, int(again.row[-1]) if again.n else -1) != \
                (self.n, self.ragged, self._last):
            return None
        return again.compact()

    def _reread(self) -> tuple[np.ndarray, np.ndarray]:
        with _REREAD:
            buf, full = self._buf, self._full
            if buf is None or full is None:
                assert self._source is not None
                again = self._source(self)
                buf, full = again.buf, again.full
                self.row, self.anchor = again.row, again.anchor
                self._full, self._buf = full, buf
                self.delta = again.delta  # last: a split with offsets is one that can be read
            return buf, full

    def bounds(self, j: int, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of field j of every record, or of records `rows` (end excludes the delimiter and a CR
        before the newline)."""
        ends = self._ends
        if ends is None and self.delta is None:
            self._reread()
            ends = self._ends
        row = self.row if rows is None else self.row[rows]
        if ends is not None:  # whole offsets (before `compact`)
            start = row if j == 0 else (ends[:, j - 1] if rows is None else ends[rows, j - 1]) + 1
            end = ends[:, j].copy() if rows is None else ends[rows, j]
        else:
            start = row if j == 0 else self._end(j - 1, row, rows) + 1
            end = self._end(j, row, rows)
        if self.ragged:  # a padded field is empty; a short record's last field may end at its newline
            start = np.minimum(start, end)
            end = end - ((self.buf[end] == NL) & (self.buf[np.maximum(end - 1, 0)] == CR) & (end > start))
        elif j == self.width - 1:
            end = end - (self.buf[np.maximum(end - 1, 0)] == CR)
        return start, end

    def _end(self, j: int, row: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        assert self.delta is not None
        low = self.delta[j] if rows is None else self.delta[j, rows]
        g = j // GROUP
        if self.anchor is None or g == 0:  # whole offsets, or the first group (under 256 bytes)
            return row + low
        anchor = self.anchor[g - 1] if rows is None else self.anchor[g - 1, rows]
        return row + anchor + (low - anchor.astype(np.uint8))  # the bytes past the anchor, modulo 256

    def words(self) -> np.ndarray:
        """The 8 bytes at every offset of the block (a strided view, no copy) that `fast_numbers` reads as uint64."""
        return np.ndarray(shape=(len(self.full) - 7,), dtype="S8", buffer=self.full, strides=(1,))

    def floats(self, j: int, rows: np.ndarray | None = None) -> np.ndarray | None:
        """Column j (or its records `rows`) as float64, NaN for missing cells; None when a cell is not a number."""
        s, e = self.bounds(j, rows)
        return fast_numbers.floats(self.full, self.words(), s, e)

    def starts_ns(self, j: int, rows: np.ndarray | None = None) -> np.ndarray | None:
        """Column j (µs with up to ns decimals, maybe a trailing TAB) as exact int64 ns; None for junk."""
        s, e = self.bounds(j, rows)
        return fast_numbers.stamps(self.full, self.words(), s, e)

    def codes(self, j: int, rows: np.ndarray | None = None) -> Codes:
        """Column j (or its records `rows`) as `Codes`: cells hashed a word at a time, each distinct value
        decoded once (csv quoting undone)."""
        s, e = self.bounds(j, rows)
        n = len(s)
        if n == 0:
            return Codes()
        lengths = e - s
        longest = int(lengths.max())
        if longest > MAX_WIDTH:
            return Codes.of(self.cells(j, rows))
        k_words = max(1, -(-longest // 8))
        items = np.ndarray(shape=(len(self.full) - 8 * k_words + 1,), dtype=f"S{8 * k_words}", buffer=self.full,
                           strides=(1,))
        # each cell's bytes as k uint64 words (one gather a row), the bytes past its end cleared word by word,
        # then hashed a word at a time (a cell of one word is its own key, with its length)
        m = items[np.minimum(s, len(items) - 1)].view("<u8").reshape(n, k_words)
        if k_words == 1:
            m[:, 0] &= _LOW_BYTES[np.minimum(lengths, 8)]
            h = m[:, 0]
        else:
            h = lengths.astype(np.uint64) * _U(0x9E3779B97F4A7C15)
            x = np.empty(n, np.uint64)
            for i in range(k_words):
                word = m[:, i]
                word &= _LOW_BYTES[np.clip(lengths - 8 * i, 0, 8)]
                np.multiply(word, _MIX[i], out=x)
                x ^= x >> _U(29)
                h += x
            del x
        found = _group(h)
        if found is not None:
            inverse, first = found
            rep = first[inverse]
            if not (np.array_equal(lengths, lengths[rep]) and (k_words == 1 or np.array_equal(m, m[rep]))):
                found = None  # two values shared a hash: group the bytes themselves
        del m
        if found is None:
            m = matrix(self.full, s, e)
            assert m is not None
            _, first, inverse = np.unique(m.view(f"S{m.shape[1]}").ravel(), return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
        else:
            inverse, first = found
        order = np.argsort(first, kind="stable")  # values in order of first appearance
        rank = np.empty(len(order), np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)
        values = [_unquote(self.full[s[k]:e[k]].tobytes()) for k in first[order]]
        codes = rank[inverse]
        if len(set(values)) < len(values):  # e.g. `x` and `"x"` are one value
            index = {v: i for i, v in enumerate(dict.fromkeys(values))}
            codes = np.array([index[v] for v in values], np.int32)[codes]
            values = list(index)
        return Codes(codes, values)

    def cells(self, j: int, rows: np.ndarray | None = None) -> list[str]:
        """Column j as strings, one Python object a cell (the slow path, for exact error messages)."""
        s, e = self.bounds(j, rows)
        full = self.full
        return [_unquote(full[a:b].tobytes()) for a, b in zip(s.tolist(), e.tolist())]


class _Arena:
    """Arrays copied one after another into an anonymous memory map (8-byte items first, for alignment)."""

    __slots__ = ("mem", "used")

    def __init__(self, size: int) -> None:
        self.mem, self.used = mmap.mmap(-1, max(size, 1)), 0

    def take(self, a: np.ndarray, dtype: type | None = None) -> np.ndarray:
        dt = np.dtype(dtype or a.dtype)
        out = np.frombuffer(self.mem, dt, count=a.size, offset=self.used).reshape(a.shape)
        out[...] = a  # a cast to a narrower dtype keeps the low bytes
        self.used += a.size * dt.itemsize
        return out


def _padded(buf: np.ndarray) -> np.ndarray:
    """`buf` and the PAD bytes after it as one array (a copy only when `buf` does not own them)."""
    base = buf.base
    if isinstance(base, (bytes, bytearray, memoryview, mmap.mmap)):
        whole = np.frombuffer(base, np.uint8)
        if whole.ctypes.data == buf.ctypes.data and len(whole) >= len(buf) + PAD:
            return whole
    out = np.zeros(len(buf) + PAD, np.uint8)
    out[:len(buf)] = buf
    return out


def _group(h: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(index of each row's value, first row of each value) for hashes `h`; distinct values found in a sample first."""
    head = h[:SAMPLE]
    cand, first = np.unique(head, return_index=True)
    at = np.minimum(np.searchsorted(cand, h), len(cand) - 1)
    hit = cand[at] == h
    if hit.all():
        return at, first
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    return inverse.reshape(-1), first


def _unquote(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1].replace('""', '"')
    return text.strip()
