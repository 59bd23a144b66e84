"""A kernel table's columns out of a split block (`fast_table`), or out of the csv module's cells (the slow path).

`csv_tables.iter_kernel_chunks` splits each block of a kernel CSV on a worker thread; `hot` then
decodes what the summaries and the advice read while the block is at hand, and `reread` is how a
released block's bytes come back from the file when another column is asked for. The `cell_*`
decoders read the csv module's cells: a cell that is not a number is named, or counted as skipped.
"""

from __future__ import annotations

import mmap
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

import ascend_tui.readers.parse.fast_csv as fast_csv
from ascend_tui.errors import InputError
from ascend_tui.graph.profile import NO_INT, NO_START, Codes, Decoder, KernelTable, Lazy
from ascend_tui.readers.parse.skipped import Skipped

MISSING = frozenset({"", "N/A", "NA", "n/a", "-", "null", "None"})
INVALID_ID = 4294967295  # msprof's "no value" for ids and block counts
TEXT_KEYS = ("name", "type", "core", "state", "input_shapes", "input_dtypes", "input_formats", "output_shapes",
             "output_dtypes", "output_formats")
INT_KEYS = ("block_dim", "mix_block_dim", "step", "stream", "device")
# columns decoded with the split: "text", "ints", "floats", "metrics" -> name -> column, and "partial" /
# "partial_ints" -> name -> (rows, their Codes / int64 values)
Ready = dict[str, dict[str, Any]]

# what the summaries and the advice read, decoded with the split while the block is at hand: the op tables,
# steps, streams and block dims, bound-ness from the pipes' ratios and, for the kernels without counters, the
# roofline over shapes and dtypes (formats, wait times and the other counters wait until a view asks)
HOT_TEXT = ("name", "type", "core", "state")
ROOFLINE_TEXT = ("input_shapes", "input_dtypes", "output_shapes", "output_dtypes")
PIPE_RATIOS = ("aic_mac_ratio", "aiv_vec_ratio", "aic_mte1_ratio", "aic_mte2_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio",
               "aic_fixpipe_ratio", "aic_scalar_ratio", "aiv_scalar_ratio")  # checks/profile.py's PMU_PIPES (a test
# keeps the two lists one)


def hot(split: fast_csv.Split, cols: dict[str, int], metrics: dict[str, int]) -> Ready:
    """The HOT_TEXT, INT_KEYS and PIPE_RATIOS columns of a block, the ROOFLINE_TEXT ones of the rows no pipe
    counter covers (all rows when a counter's column does not decode the fast way) and the mix block dims of
    the MIX_AIC rows. A column with a cell that is not a number is left to be decoded, and its skipped cells
    counted, when read."""
    out: Ready = {"text": {k: split.codes(cols[k]) for k in HOT_TEXT if k in cols}, "ints": {}, "floats": {},
                  "metrics": {}, "partial": {}, "partial_ints": {}}
    for k in INT_KEYS:  # a column at a time: its work arrays stay in cache (all of them at once ran 60% slower)
        if k == "mix_block_dim" and k in cols and "core" in out["text"]:
            # the block-dim rule reads the mix block dims of MIX_AIC kernels only (0.07 s a million rows)
            core = out["text"]["core"]
            mix = np.flatnonzero(core.codes == core.code("MIX_AIC")) if "MIX_AIC" in core.values else \
                np.zeros(0, np.int64)
            if len(mix) < split.n:
                f = split.floats(cols[k], mix) if len(mix) else np.zeros(0)
                if f is not None:
                    out["partial_ints"][k] = (mix, as_ints(f))
                continue
        f = split.floats(cols[k]) if k in cols else None
        if f is not None:
            out["ints"][k] = as_ints(f)
    counted = np.zeros(split.n, bool)  # rows with a pipe counter over 0 (what bound-ness reads them for)
    exact = True
    for h in PIPE_RATIOS:
        j = metrics.get(h)
        f = split.floats(j) if j is not None else None
        if f is not None:
            v = out["metrics"][h] = f.astype(np.float32)
            counted |= np.isfinite(v) & (v > 0)
        elif j is not None:
            exact = False
    bare = np.flatnonzero(~counted)
    for k in ROOFLINE_TEXT:
        if k not in cols:
            continue
        if not exact or len(bare) == split.n:
            out["text"][k] = split.codes(cols[k])
        elif len(bare):
            out["partial"][k] = (bare, split.codes(cols[k], bare))
    return out


def some_codes(split: fast_csv.Split, j: int, have_rows: np.ndarray, have: Codes, rows: np.ndarray | None = None
                ) -> Codes:
    """Column j of a block: from the rows decoded with the split when only some of those are asked for, else
    from the block (read again)."""
    at = _among(have_rows, rows)
    return have.take(at) if at is not None else split.codes(j, rows)


def _among(have_rows: np.ndarray, rows: np.ndarray | None) -> np.ndarray | None:
    """Where each of `rows` sits in the sorted `have_rows`; None when one is not there (or all rows are asked)."""
    if rows is None:
        return None
    rows = np.asarray(rows)
    if not len(rows):
        return rows.astype(np.int64)
    if not len(have_rows):
        return None
    at = np.minimum(np.searchsorted(have_rows, rows), len(have_rows) - 1)
    return at if np.array_equal(have_rows[at], rows) else None


def file_stamp(path: Path) -> tuple[int, int] | None:
    """(size, mtime in ns) of `path`: what a block read again checks the file against."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def reread(path: Path, offset: int, length: int, stamp: tuple[int, int]) -> Callable[[fast_csv.Split], fast_csv.Split]:
    """What reads a released block again: its bytes from the file split again, refused when the file changed."""
    def read(split: fast_csv.Split) -> fast_csv.Split:
        changed = InputError(path, "the file changed while it was being read: open it again")
        if file_stamp(path) != stamp:
            raise changed
        mem = mmap.mmap(-1, length + fast_csv.PAD)
        try:
            with path.open("rb") as fh:
                fh.seek(offset)
                got = fh.readinto(memoryview(mem)[:length])
        except OSError as exc:
            raise InputError(path, exc.strerror or str(exc)) from None
        again = split.resplit(np.frombuffer(mem, np.uint8, count=length)) if got == length else None
        if again is None:
            raise changed
        return again

    return read


def as_ints(f: np.ndarray) -> np.ndarray:
    """Whole numbers read as floats as int64, NO_INT for missing cells and msprof's 4294967295."""
    ok = np.isfinite(f)
    if ok.all():  # the common column: no boolean indexing (two passes each, a block's column at a time)
        v = f.astype(np.int64)
    else:
        v = np.full(len(f), NO_INT, np.int64)
        v[ok] = f[ok].astype(np.int64)
    invalid = v == INVALID_ID
    if invalid.any():
        v[invalid] = NO_INT
    return v


def cell_floats(path: Path, column: str, cells: Sequence[str], first_record: int, skipped: Skipped | None = None,
            bad: list[int] | None = None) -> np.ndarray:
    """The cells as float64, NaN for missing ones; a cell that is not a number is NaN too and counted in
    `skipped` (its index appended to `bad`), or an InputError without `skipped`."""
    try:
        return np.array(cells, dtype=np.float64)
    except ValueError:
        pass
    out = np.empty(len(cells), np.float64)
    for i, cell in enumerate(cells):
        c = cell.strip().strip('"')
        if c in MISSING:
            out[i] = np.nan
            continue
        try:
            out[i] = float(c)
        except ValueError:
            problem = f"column {column!r}: {cell.strip()!r} is not a number"
            if skipped is None and bad is None:
                raise InputError(path, problem, where=f"record {first_record + i}") from None
            out[i] = np.nan
            if bad is not None:
                bad.append(i)
            elif skipped is not None:
                skipped.cell(first_record + i, problem)
    return out


def cell_ints(path: Path, column: str, cells: Sequence[str], first_record: int, skipped: Skipped | None = None,
          bad: list[int] | None = None) -> np.ndarray:
    f = cell_floats(path, column, cells, first_record, skipped, bad)
    out = np.full(len(f), NO_INT, np.int64)
    ok = np.isfinite(f)
    out[ok] = f[ok].astype(np.int64)
    out[out == INVALID_ID] = NO_INT
    return out


def to_ns(cell: str) -> int:
    """`'1736408883704643.212\\t'` (µs) -> 1736408883704643212 ns, exactly; NO_START for `N/A`; ValueError for junk."""
    s = cell.strip().strip('"')
    if s in MISSING:
        return NO_START
    whole, dot, frac = s.partition(".")
    if whole.isdigit() and (not frac or frac.isdigit()):
        return int(whole) * 1000 + (int((frac + "000")[:3]) if frac else 0)
    try:
        return int(Decimal(s) * 1000)
    except InvalidOperation:
        raise ValueError(cell) from None


def cell_starts(path: Path, column: str, cells: Sequence[str], first_record: int, bad: list[int] | None = None
            ) -> np.ndarray:
    """The cells as exact ns; a cell that is not a time is an InputError, or NO_START with its index in `bad`."""
    try:
        return np.fromiter(map(to_ns, cells), np.int64, len(cells))
    except ValueError as exc:
        if bad is None:
            i = list(cells).index(exc.args[0]) if exc.args and exc.args[0] in cells else 0
            raise InputError(path, f"column {column!r}: {cells[i].strip()!r} is not a time in µs",
                             where=f"record {first_record + i}") from None
    out = np.empty(len(cells), np.int64)
    for i, cell in enumerate(cells):
        try:
            out[i] = to_ns(cell)
        except ValueError:
            out[i] = NO_START
            bad.append(i)
    return out


def fast_table(path: Path, header: list[str], split: fast_csv.Split, cols: dict[str, int],
                metrics: dict[str, int], done: int, ready: Ready | None = None,
                skipped: Skipped | None = None) -> KernelTable:
    """A block's table over numpy-split fields: the `ready` columns, the others decoded when first read (or some
    of their rows)."""
    first = done + 2
    ready = ready or {}
    rt, ri, rf, rm, some, some_ints = (ready.get(k, {}) for k in ("text", "ints", "floats", "metrics", "partial",
                                                                    "partial_ints"))
    text = Lazy(rt, {k: Decoder(some_codes, split, cols[k], *some[k]) if k in some else Decoder(split.codes, cols[k])
                     for k in TEXT_KEYS if k in cols})
    pending = {k: Decoder(_some_ints, path, header, split, cols[k], first, skipped, *some_ints[k]) if k in some_ints
               else Decoder(_fast_ints, path, header, split, cols[k], first, skipped) for k in INT_KEYS if k in cols}
    if "start_ns" in cols:
        pending["start_ns"] = Decoder(_fast_starts, path, header, split, cols["start_ns"], first)
    ints = Lazy(ri, pending)
    floats = Lazy(rf, {k: Decoder(_fast_floats, path, header, split, cols[k], first, np.float64, skipped)
                       for k in ("dur_us", "wait_us") if k in cols})
    mets = Lazy(rm, {h: Decoder(_fast_floats, path, header, split, i, first, np.float32, skipped)
                     for h, i in metrics.items()})
    return KernelTable(split.n, text, ints, floats, mets)


def _fast_floats(path: Path, header: list[str], split: fast_csv.Split, j: int, first: int, dtype: type,
                 skipped: Skipped | None = None, rows: np.ndarray | None = None) -> np.ndarray:
    f = split.floats(j, rows)
    if f is None:  # a cell that is not a number: the slow path over the whole column names (or counts) it
        f = cell_floats(path, header[j], split.cells(j), first, skipped)
        f = f if rows is None else f[rows]
    return f.astype(dtype, copy=False)


def _fast_ints(path: Path, header: list[str], split: fast_csv.Split, j: int, first: int,
               skipped: Skipped | None = None, rows: np.ndarray | None = None) -> np.ndarray:
    return as_ints(_fast_floats(path, header, split, j, first, np.float64, skipped, rows))


def _some_ints(path: Path, header: list[str], split: fast_csv.Split, j: int, first: int, skipped: Skipped | None,
               have_rows: np.ndarray, have: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    at = _among(have_rows, rows)
    return have[at] if at is not None else _fast_ints(path, header, split, j, first, skipped, rows)


def _fast_starts(path: Path, header: list[str], split: fast_csv.Split, j: int, first: int,
                 rows: np.ndarray | None = None) -> np.ndarray:
    v = split.starts_ns(j, rows)
    if v is None:
        v = cell_starts(path, header[j], split.cells(j), first)
        v = v if rows is None else v[rows]
    return v
