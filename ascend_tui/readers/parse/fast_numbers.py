"""Numbers out of a split CSV block, eight bytes at a time: short decimals as float64, µs start times as exact ns.

`fast_csv.Split` finds where each cell starts and ends; here a column's cells are read as uint64
words loaded at those offsets (SWAR digit parsing: a word's ASCII digits paired up by three
multiplications), so a million cells cost a few dozen numpy passes, not a Python object each.
A cell the word path does not take (a sign, an exponent, quotes, a long or odd cell) goes through
the general path — numpy's string conversion, or a digit matrix for start times — for those
cells only; `N/A`, `NA`, empty and the like are missing (NaN, `NO_START`); junk returns None.
"""

from __future__ import annotations

import numpy as np

from ascend_tui.graph.profile import NO_START

MAX_WIDTH = 2048
MISSING = (b"", b"N/A", b"NA", b"n/a", b"-", b"null", b"None")
CR = ord("\r")

_U = np.uint64
_ONES, _HIGHS, _DOTS = _U(0x0101010101010101), _U(0x8080808080808080), _U(0x2E2E2E2E2E2E2E2E)
_ZEROS, _SIXES, _NIBBLE = _U(0x3030303030303030), _U(0x0606060606060606), _U(0xF0F0F0F0F0F0F0F0)
_LOW7 = _U(0x7F7F7F7F7F7F7F7F)
_BYTE_OF_BIT = _U(0x0001020304050607)  # times a word with one bit set at 8k+7 (shifted down by 7): k in the top byte
_POW10F = 10.0 ** np.arange(23)
_POW10 = 10 ** np.arange(19, dtype=np.int64)
_FRAC_NS = np.array([0, 100, 10, 1], np.uint64)  # ns a unit of the first 0..3 decimals of a µs is worth
_MAX_US = _U(np.iinfo(np.int64).max // 1000)  # whole µs whose ns still fit an int64


def floats(full: np.ndarray, words: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray | None:
    """Cells s..e of `full` as float64, exactly as `float()` reads them, NaN for missing cells; None when one
    is not a number (`words`: the 8 bytes at every offset of `full`, see `fast_csv.Split.words`)."""
    lengths = e - s
    out, ok, word = _short_decimals(words, s, lengths)
    if ok.all():
        return out
    bad = np.flatnonzero(~ok)
    missing = _missing(word[bad], lengths[bad])
    out[bad[missing]] = np.nan
    bad = bad[~missing]
    if not len(bad):
        return out
    rest = _general_floats(full, s[bad], e[bad])
    if rest is None:
        return None
    out[bad] = rest
    return out


def stamps(full: np.ndarray, words: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray | None:
    """Cells s..e (µs with up to ns decimals, maybe a trailing TAB) as exact int64 ns, `NO_START` for missing
    cells; None for junk. Cells with their dot where the first one has it take the word path."""
    n = len(s)
    if n == 0:
        return np.zeros(0, np.int64)
    p = _dot_column(full, s, e)
    if p is None:
        ok = np.zeros(n, bool)
        out = np.zeros(n, np.int64)
    else:
        out, ok = _word_stamps(words, full, s, e - s, p)
    if ok.all():
        return out
    bad = np.flatnonzero(~ok)
    m = matrix(full, s[bad], e[bad])
    rest = _stamps(m) if m is not None else None
    if rest is None:
        return None
    out[bad] = rest
    return out


def _dot_column(full: np.ndarray, s: np.ndarray, e: np.ndarray, look: int = 64) -> int | None:
    """Where the dot sits in the first of the first `look` cells that has one (1..16 bytes in), else None."""
    for a, b in zip(s[:look].tolist(), e[:look].tolist()):
        p = full[a:b].tobytes().find(b".")
        if p >= 0:
            return p if 1 <= p <= 16 else None
    return None


def _word_stamps(words: np.ndarray, full: np.ndarray, s: np.ndarray, lengths: np.ndarray, p: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(ns, ok) of cells `p` digits, a dot, 0 to 8 more bytes: digits then at most one blank (TAB, space, CR).

    The whole µs are one or two words of digits, the decimals one word: its leading digits are
    found as the first byte that is not one, the first three of them are the ns (the rest cut,
    as `to_ns` does). Any other cell is not ok (the caller reads those cells the general way).
    """
    size = len(words) - 1
    frac_len = lengths - (p + 1)
    ok = (frac_len >= 0) & (frac_len <= 8)
    ok &= full[s + p] == 46  # s + p < the block's end + PAD: every index is inside `full`
    if p > 8:
        hi, ok_hi = _parse8(_load(words, s), _U(p - 8))
        lo, ok_lo = _parse8(_load(words, s + (p - 8)), _U(8))
        whole = hi * _U(10**8) + lo
        ok &= ok_hi & ok_lo
    else:
        whole, ok_w = _parse8(_load(words, s), _U(p))
        ok &= ok_w
    ok &= whole <= _MAX_US
    n = np.clip(frac_len, 0, 8).view(np.uint64)
    keep = _low_bytes(n)
    x = _load(words, np.minimum(s + (p + 1), size)) & keep
    x |= ~keep  # bytes past the cell: 0xFF, never a digit or a blank
    digit_prefix = _digit_prefix(x)
    rest = n - digit_prefix  # bytes after the decimals: none, or one blank
    shift = (digit_prefix << _U(3)) & _U(63)
    after = (x >> shift) & _U(0xFF)
    ok &= (rest == _U(0)) | ((rest == _U(1)) & ((after == _U(9)) | (after == _U(32)) | (after == _U(CR))))
    k = np.minimum(digit_prefix, _U(3))
    frac, _ = _parse8(x, k)
    ns = whole * _U(1000) + frac * _FRAC_NS[k.view(np.int64)]
    return ns.view(np.int64), ok


def _digit_prefix(x: np.ndarray) -> np.ndarray:
    """How many of each word's low bytes (0..8) are ASCII digits before the first byte that is not one."""
    nd = (x & _NIBBLE) ^ _ZEROS  # nonzero where the high nibble is not 3
    nd |= ((x & _U(0x0F0F0F0F0F0F0F0F)) + _SIXES) & _U(0x1010101010101010)  # or the low one is over 9 (no carries)
    y = (((nd & _LOW7) + _LOW7) | nd) & _HIGHS  # the high bit of each byte that is not a digit
    low = y & (~y + _U(1))
    k = ((low >> _U(7)) * _BYTE_OF_BIT) >> _U(56)
    k[y == _U(0)] = 8
    return k


def _load(words: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The little-endian uint64 at each offset `at` (offsets inside the block: PAD bytes follow it)."""
    return words[at].view("<u8")


_MISSING_WORDS = [(len(m), int.from_bytes(m, "little")) for m in MISSING if len(m) <= 8]


def _missing(word: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Which cells (their first 8 bytes as `word`, the rest cleared) are one of MISSING (`N/A`, `NA`, empty...)."""
    out = np.zeros(len(word), bool)
    for n, w in _MISSING_WORDS:
        out |= (lengths == n) & (word == _U(w))
    return out


def _parse8(x: np.ndarray, digits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(value, ok) of the `digits` (uint64, 0..8) ASCII digits in the low bytes of each word; ok: all are digits.

    The digits are shifted to the top of the word with '0's below them, then paired up by three
    multiplications (8 digits -> 4 two-digit -> 2 four-digit -> 1 number).
    """
    bits = digits << _U(3)  # in place from here on: each pass allocating costs more than its work
    low = _ZEROS >> bits
    x = x << (_U(64) - bits)  # a shift by 64 gives 0 in numpy
    x |= low
    check = x & _NIBBLE
    ok = check == _ZEROS
    np.add(x, _SIXES, out=check)
    check &= _NIBBLE
    ok &= check == _ZEROS
    x &= _U(0x0F0F0F0F0F0F0F0F)
    x *= _U(2561)
    x >>= _U(8)
    x &= _U(0x00FF00FF00FF00FF)
    x *= _U(6553601)
    x >>= _U(16)
    x &= _U(0x0000FFFF0000FFFF)
    x *= _U(42949672960001)
    x >>= _U(32)
    return x, ok


def _low_bytes(n: np.ndarray) -> np.ndarray:
    """A mask of the low `n` (uint64, 0..8) bytes of a word."""
    return (_U(1) << (n << _U(3))) - _U(1)  # n = 8: 1 << 64 is 0, minus 1 is all ones


def _short_decimals(words: np.ndarray, s: np.ndarray, lengths: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(float64, ok, the cell's word) for cells of one to eight bytes that are digits with at most one dot,
    exactly as `float()` reads them (an integer under 10^8 over a power of ten is correctly rounded).

    In place where it can: a block's column is a few dozen passes over uint64 words, each allocation
    one more (mixing dtypes, e.g. uint64 with bool, is slower still).
    """
    n = np.minimum(lengths, 8).view(np.uint64)  # lengths are never negative
    keep = _low_bytes(n)
    word = _load(words, s)
    word &= keep
    x = np.invert(keep, out=keep)  # bytes past the cell become 0xFF: never a dot or a digit
    x |= word
    y = x ^ _DOTS
    t = y - _ONES
    np.invert(y, out=y)
    t &= y
    t &= _HIGHS  # the lowest flagged byte is the first dot
    np.negative(t, out=y)
    t &= y  # its lowest bit alone
    t >>= _U(7)  # 1 in the dot's byte, 0 without a dot
    dot = np.minimum(t, _U(1))
    p = t * _BYTE_OF_BIT
    p >>= _U(56)  # the dot's byte index
    t -= _U(1)  # the bytes before the dot (all of them without one)
    hi = x >> _U(8)
    x &= t
    np.invert(t, out=t)
    hi &= t
    x |= hi  # the dot taken out
    digits = n - dot
    value, ok = _parse8(x, digits)
    ok &= (lengths - 1).view(np.uint64) < _U(8)
    ok &= digits != _U(0)  # 1 to 8 bytes, a digit among them
    n -= _U(1)
    n -= p
    n *= dot  # the decimals after the dot
    out = value.view(np.int64).astype(np.float64)  # under 10^8
    out /= _POW10F[n.view(np.int64)]  # intp: a fast gather
    return out, ok, word


def matrix(full: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray | None:
    """Cells s..e as an (n, W) uint8 matrix, NUL-padded; None when a cell is wider than MAX_WIDTH."""
    lengths = e - s
    n = len(s)
    w = max(int(lengths.max()) if n else 0, 1)
    if w > MAX_WIDTH:
        return None
    size = len(full)
    # every offset of the buffer as a w-byte string: a column is one 1-D fancy index
    items = np.ndarray(shape=(size - w + 1,), dtype=f"S{w}", buffer=full, strides=(1,))
    tail = s + w > size
    if tail.any():
        m = np.zeros((n, w), np.uint8)
        m[~tail] = items[s[~tail]].view(np.uint8).reshape(-1, w)
        for i in np.flatnonzero(tail):
            cell = full[s[i]:e[i]]
            m[i, :len(cell)] = cell
    else:
        m = items[s].view(np.uint8).reshape(n, w)
    if n and int(lengths.min()) < w:
        m = np.where(np.arange(w, dtype=np.int32)[None, :] < lengths[:, None], m, np.uint8(0))
    return m


def _general_floats(full: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray | None:
    """Cells s..e as float64 through numpy's string conversion (signs, exponents, quotes, `N/A`); None for junk."""
    m = matrix(full, s, e)
    if m is None:
        return None
    arr = m.view(f"S{m.shape[1]}").ravel()
    arr = np.char.strip(arr, b' \t\r"')
    missing = np.isin(arr, MISSING)
    if missing.any():
        arr = arr.copy()
        arr[missing] = b"nan"
    try:
        return arr.astype(np.float64)
    except ValueError:
        return None


def _stamps(m: np.ndarray) -> np.ndarray | None:
    """Cells of µs with up to ns decimals (maybe a trailing TAB) as exact int64 ns; None for junk."""
    uniform = _uniform_stamps(m)
    if uniform is not None:
        return uniform
    n, w = m.shape
    digit = (m >= 48) & (m <= 57)
    dot = m == ord(".")
    blank = (m == 0) | (m == 9) | (m == 32) | (m == CR)
    col = np.arange(w)[None, :]
    has_dot = dot.any(axis=1)
    dotpos = np.where(has_dot, dot.argmax(axis=1), np.where(blank.all(axis=1), 0, (~blank).sum(axis=1)))
    arr = m.view(f"S{w}").ravel()
    missing = np.isin(np.char.strip(arr, b' \t\r"'), MISSING)
    ok = digit | dot | blank
    if not (ok.all(axis=1) | missing).all() or (dot.sum(axis=1) > 1).any():
        return None
    d = (m.astype(np.int64) - 48) * digit
    power = dotpos[:, None] - 1 - col
    whole_mask = (power >= 0) & digit
    if (power[whole_mask] > 18).any():
        return None
    whole = (d * _POW10[np.clip(power, 0, 18)] * whole_mask).sum(axis=1)
    frac = np.zeros(n, np.int64)
    for k, scale in ((1, 100), (2, 10), (3, 1)):
        c = np.minimum(dotpos + k, w - 1)
        inside = has_dot & (dotpos + k < w)
        dig = np.take_along_axis(d, c[:, None], axis=1)[:, 0]
        isd = np.take_along_axis(digit, c[:, None], axis=1)[:, 0]
        frac += np.where(inside & isd, dig * scale, 0)
    out = whole * 1000 + frac
    out[missing] = NO_START
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
    if p == 0 or p > 18 or p + 4 > w or not (m[:, p] == 46).all():
        return None
    whole, frac = m[:, :p], m[:, p + 1:p + 4]
    if not (((whole >= 48) & (whole <= 57)).all() and ((frac >= 48) & (frac <= 57)).all()):
        return None
    rest = m[:, p + 4:]
    if not (((rest >= 48) & (rest <= 57)) | (rest == 0) | (rest == 9) | (rest == 32) | (rest == CR)).all():
        return None
    return np.ascontiguousarray(whole).view(f"S{p}").ravel().astype(np.int64) * 1000 + \
        np.ascontiguousarray(frac).view("S3").ravel().astype(np.int64)
