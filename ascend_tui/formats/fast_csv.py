"""Split a CSV into columns with numpy: quote parity finds the delimiters, fields are gathered column by column.

A million-row kernel table through the csv module costs a Python object per cell; here a block of
the file is one uint8 array, a field is a (start, end) pair, a column becomes a fixed-width bytes
array converted in C (numbers) or hashed to codes (text). Anything irregular (a record with the
wrong number of fields, a cell that is not a number) returns None so the caller can fall back to
the csv module, which names the bad record.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ascend_tui.timing import NO_START, Codes

BLOCK = 32 * 1024 * 1024
MAX_WIDTH = 2048
MISSING = (b"", b"N/A", b"NA", b"n/a", b"-", b"null", b"None")
_POW10 = 10 ** np.arange(19, dtype=np.int64)
_MIX = np.random.default_rng(20261130).integers(1, 2**63 - 1, size=MAX_WIDTH // 8 + 1, dtype=np.int64).astype(
    np.uint64) | np.uint64(1)
QUOTE, COMMA, NL, CR = ord('"'), ord(","), ord("\n"), ord("\r")


def blocks(fh, first: bytes = b"", size: int = BLOCK) -> Iterator[np.ndarray]:  # type: ignore[no-untyped-def]
    """Blocks of whole records (quote-aware), each a uint8 array ending with a newline."""
    carry = first
    while True:
        data = fh.read(size)
        if not data:
            if carry.strip(b"\r\n"):
                yield np.frombuffer(carry + (b"" if carry.endswith(b"\n") else b"\n"), np.uint8)
            return
        buf = carry + data
        cut = buf.rfind(b"\n")
        odd = buf.count(b'"', 0, cut) & 1 if cut >= 0 else 0
        while cut >= 0 and odd:  # that newline sits inside a quoted field: step back
            prev = buf.rfind(b"\n", 0, cut)
            odd ^= buf.count(b'"', prev + 1, cut) & 1
            cut = prev
        if cut < 0:
            carry = buf
            continue
        carry = buf[cut + 1:]
        yield np.frombuffer(buf, np.uint8, count=cut + 1)


class Split:
    """The fields of the records in one block: record i's field j spans `start(j)[i]` to `end(j)[i]`."""

    __slots__ = ("buf", "pos", "n", "first")

    def __init__(self, buf: np.ndarray, pos: np.ndarray, first: np.ndarray) -> None:
        self.buf, self.pos, self.n, self.first = buf, pos, pos.shape[0], first

    @classmethod
    def of(cls, buf: np.ndarray, width: int) -> Split | None:
        """Split `buf` into records of `width` fields; None when a record has another count."""
        special = np.flatnonzero((buf == COMMA) | (buf == NL) | (buf == QUOTE)).astype(np.int32)
        kind = buf[special]
        if (kind == QUOTE).any():
            inside = np.cumsum(kind == QUOTE, dtype=np.int32) & 1
            keep = (kind != QUOTE) & (inside == 0)
            cand, kind = special[keep], kind[keep]
        else:
            cand = special
        del special
        nl_mask = kind == NL
        nl = cand[nl_mask]
        # blank lines (a newline right after a newline, or after a lone \r) hold no record
        prev = np.concatenate((np.array([-1], np.int32), nl[:-1]))
        empty = (nl - prev == 1) | ((nl - prev == 2) & (buf[np.maximum(nl - 1, 0)] == CR))
        if empty.any():
            keep = np.ones(len(cand), bool)
            keep[np.flatnonzero(nl_mask)[empty]] = False
            cand, nl_mask = cand[keep], nl_mask[keep]
        records = int(nl_mask.sum())
        if records == 0 or len(cand) != records * width:
            return None
        pos = cand.reshape(records, width)
        if not nl_mask.reshape(records, width)[:, -1].all():
            return None
        first = np.concatenate((np.array([-1], np.int32), pos[:-1, -1])) + 1
        if empty.any():
            while True:  # skip the blank lines before a record
                blank = (first < pos[:, 0]) & ((buf[first] == NL) | (buf[first] == CR))
                if not blank.any():
                    break
                first = np.where(blank, first + 1, first)
        return cls(buf, pos, first)

    def bounds(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of field j of every record (end excludes the delimiter and a CR before the newline)."""
        start = self.first if j == 0 else self.pos[:, j - 1] + 1
        end = self.pos[:, j]
        if j == self.pos.shape[1] - 1:
            end = end - (self.buf[np.maximum(end - 1, 0)] == CR)
        return start, end

    def matrix(self, j: int) -> np.ndarray | None:
        """Column j as an (n, W) uint8 matrix, NUL-padded; None when a cell is wider than MAX_WIDTH."""
        s, e = self.bounds(j)
        lengths = e - s
        w = max(int(lengths.max()) if self.n else 0, 1)
        if w > MAX_WIDTH:
            return None
        base = self.buf.base if isinstance(self.buf.base, bytes) else self.buf.tobytes()
        size = len(base)
        # every offset of the buffer as a w-byte string: a column is one 1-D fancy index
        items = np.ndarray(shape=(size - w + 1,), dtype=f"S{w}", buffer=base, strides=(1,))
        tail = s + w > size
        if tail.any():
            m = np.zeros((self.n, w), np.uint8)
            m[~tail] = items[s[~tail]].view(np.uint8).reshape(-1, w)
            for i in np.flatnonzero(tail):
                cell = self.buf[s[i]:e[i]]
                m[i, :len(cell)] = cell
        else:
            m = items[s].view(np.uint8).reshape(self.n, w)
        if int(lengths.min()) < w:
            m = np.where(np.arange(w, dtype=np.int32)[None, :] < lengths[:, None], m, np.uint8(0))
        return m

    def floats(self, j: int) -> np.ndarray | None:
        """Column j as float64 (NaN for missing cells); None when a cell is not a number."""
        m = self.matrix(j)
        if m is None:
            return None
        if m.shape[1] <= 10:
            small = _small_ints(m)
            if small is not None:
                return small
        arr = m.view(f"S{m.shape[1]}").ravel()
        arr = np.char.strip(arr, b' \t"') if (m == 9).any() or (m == QUOTE).any() or (m == 32).any() else arr
        missing = np.isin(arr, MISSING)
        if missing.any():
            arr = arr.copy()
            arr[missing] = b"nan"
        try:
            return arr.astype(np.float64)
        except ValueError:
            return None

    def starts_ns(self, j: int) -> np.ndarray | None:
        """Column j (µs with up to ns decimals, maybe a trailing TAB) as exact int64 ns; None for junk."""
        m = self.matrix(j)
        if m is None:
            return None
        uniform = _uniform_stamps(m)
        if uniform is not None:
            return uniform
        digit = (m >= 48) & (m <= 57)
        dot = m == ord(".")
        blank = (m == 0) | (m == 9) | (m == 32) | (m == CR)
        w = m.shape[1]
        col = np.arange(w)[None, :]
        has_dot = dot.any(axis=1)
        dotpos = np.where(has_dot, dot.argmax(axis=1), np.where(blank.all(axis=1), 0, (~blank).sum(axis=1)))
        arr = m.view(f"S{w}").ravel()
        missing = np.isin(np.char.strip(arr, b" \t\r"), MISSING)
        ok = digit | dot | blank
        if not (ok.all(axis=1) | missing).all() or (dot.sum(axis=1) > 1).any():
            return None
        d = (m.astype(np.int64) - 48) * digit
        power = dotpos[:, None] - 1 - col
        whole_mask = (power >= 0) & digit
        if (power[whole_mask] > 18).any():
            return None
        whole = (d * _POW10[np.clip(power, 0, 18)] * whole_mask).sum(axis=1)
        frac = np.zeros(self.n, np.int64)
        for k, scale in ((1, 100), (2, 10), (3, 1)):
            c = np.minimum(dotpos + k, w - 1)
            inside = has_dot & (dotpos + k < w)
            dig = np.take_along_axis(d, c[:, None], axis=1)[:, 0]
            isd = np.take_along_axis(digit, c[:, None], axis=1)[:, 0]
            frac += np.where(inside & isd, dig * scale, 0)
        out = whole * 1000 + frac
        out[missing] = NO_START
        return out

    def codes(self, j: int) -> Codes:
        """Column j as `Codes`: rows hashed, distinct values decoded once (csv quoting undone)."""
        m = self.matrix(j)
        if m is None:
            values = [self._cell(i, j) for i in range(self.n)]
            return Codes.of(values)
        w = m.shape[1]
        w8 = -(-w // 8) * 8
        if w8 != w:
            m = np.concatenate([m, np.zeros((self.n, w8 - w), np.uint8)], axis=1)
        words = m.view(np.uint64)
        h = (words * _MIX[: words.shape[1]][None, :]).sum(axis=1, dtype=np.uint64)
        _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        if not np.array_equal(words, words[first][inverse]):  # a hash collision: sort the bytes instead
            _, first, inverse = np.unique(m.view(f"S{w8}").ravel(), return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
        order = np.argsort(first, kind="stable")  # values in order of first appearance
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        values = [_unquote(bytes(m[first[k]]).rstrip(b"\0")) for k in order]
        return Codes(rank[inverse].astype(np.int32), values)

    def _cell(self, i: int, j: int) -> str:
        s, e = self.bounds(j)
        return _unquote(bytes(self.buf[s[i]:e[i]]))


def _small_ints(m: np.ndarray) -> np.ndarray | None:
    """Cells of at most 10 plain digits (or missing) as float64, by place value; None when any cell is more."""
    digit = (m >= 48) & (m <= 57)
    pad = m == 0
    if not (digit | pad).all():
        return None
    n, w = m.shape
    count = digit.sum(axis=1)
    if (digit & np.cumsum(pad, axis=1).astype(bool)).any():
        return None  # a NUL before a digit cannot happen in a left-aligned cell; be safe
    power = count[:, None] - 1 - np.arange(w)[None, :]
    out = ((m.astype(np.int64) - 48) * digit * _POW10[np.clip(power, 0, 18)]).sum(axis=1).astype(np.float64)
    out[count == 0] = np.nan
    return out


def _uniform_stamps(m: np.ndarray) -> np.ndarray | None:
    """The common case in one pass: every cell is digits, a dot at one column, three or more decimals, then blanks."""
    n, w = m.shape
    if n == 0:
        return None
    dots = np.flatnonzero(m[0] == 46)
    if len(dots) != 1:
        return None
    p = int(dots[0])
    if p == 0 or p + 4 > w or not (m[:, p] == 46).all():
        return None
    whole, frac = m[:, :p], m[:, p + 1:p + 4]
    if not (((whole >= 48) & (whole <= 57)).all() and ((frac >= 48) & (frac <= 57)).all()):
        return None
    rest = m[:, p + 4:]
    if not (((rest >= 48) & (rest <= 57)) | (rest == 0) | (rest == 9) | (rest == 32) | (rest == CR)).all():
        return None
    return np.ascontiguousarray(whole).view(f"S{p}").ravel().astype(np.int64) * 1000 + \
        np.ascontiguousarray(frac).view("S3").ravel().astype(np.int64)


def _unquote(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1].replace('""', '"')
    return text.strip()
