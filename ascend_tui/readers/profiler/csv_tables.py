"""The CSV tables of the Ascend profilers, read as written: kernel rows into numpy columns, small tables into records.

kernel_details.csv (torch_npu), op_summary_*.csv and task_time_*.csv (msprof) are one table under
several column names (`Name`/`Op Name`, `Block Dim`/`Block Num`, ...). Blocks of the file are split
with numpy (`fast_csv`: quoted multi-line fields, `\"\"\"32,3,224,224\"\"\"` shapes, CRLF) and each column
is decoded when first read, so a million-row file never exists as a million Python rows.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import itertools
import mmap
import re
import threading
import zlib
from decimal import Decimal, InvalidOperation
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Sequence

import numpy as np

from ascend_tui import threads
from ascend_tui.errors import Cancelled, InputError
import ascend_tui.readers.parse.fast_csv as fast_csv
from ascend_tui.readers.parse.compressed import is_gzip, open_binary, open_text
from ascend_tui.progress import Progress
from ascend_tui.readers.parse.skipped import Skipped
from ascend_tui.graph.profile import NO_INT, NO_START, Codes, Decoder, HostOp, KernelTable, Lazy, OpStat, StepTime

MISSING = frozenset({"", "N/A", "NA", "n/a", "-", "null", "None"})
CHUNK = 65536
INVALID_ID = 4294967295  # msprof's "no value" for ids and block counts
ALIASES: dict[str, tuple[str, ...]] = {
    "name": ("Name", "Op Name", "kernel_name"),
    "type": ("Type", "OP Type", "Op Type"),
    "core": ("Accelerator Core", "Task Type", "kernel_type"),
    "state": ("OP State",),
    "start_ns": ("Start Time(us)", "Task Start Time(us)", "task_start(us)"),
    "dur_us": ("Duration(us)", "Task Duration(us)", "task_time(us)"),
    "wait_us": ("Wait Time(us)", "Task Wait Time(us)"),
    "block_dim": ("Block Dim", "Block Num"),
    "mix_block_dim": ("Mix Block Dim", "Mix Block Num"),
    "step": ("Step Id",),
    "stream": ("Stream ID", "stream_id"),
    "device": ("Device_id",),
    "input_shapes": ("Input Shapes",),
    "input_dtypes": ("Input Data Types",),
    "input_formats": ("Input Formats",),
    "output_shapes": ("Output Shapes",),
    "output_dtypes": ("Output Data Types",),
    "output_formats": ("Output Formats",),
}
_METRIC = re.compile(r"^(aic|aiv)_\w*(ratio|bw\(GB/s\)|fops)$|^(aicore|aiv)_time\(us\)$|^cube_utilization\(%\)$|"
                     r"^memory_bound$")


@contextlib.contextmanager
def csv_errors(path: Path) -> Iterator[None]:
    """Turn what reading a profiler CSV can raise (not UTF-8, bad quoting, I/O) into one `InputError` line."""
    try:
        yield
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not a text file (byte {exc.start} is not UTF-8)") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(path, f"damaged gzip file ({exc or 'it ends early'})") from None
    except csv.Error as exc:
        raise InputError(path, f"not a readable CSV file: {exc}") from None
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None


def open_csv(path: Path, errors: str = "strict") -> tuple[csv.reader, list[str], object]:  # type: ignore[valid-type]
    """(reader, stripped header, file handle) of a CSV written by a profiler; InputError when it is not one."""
    with csv_errors(path):
        fh = open_text(path, errors=errors)
        reader = csv.reader(fh)
        header = [h.strip() for h in next(reader, [])]
    if not header or not any(header):
        fh.close()
        raise InputError(path, "empty file, expected a CSV header")
    while header and header[-1] == "":
        header.pop()  # msprof op ends every line with a comma
    return reader, header, fh


def find_column(header: Sequence[str], names: Sequence[str]) -> int:
    """Index of the first of `names` in `header`, or -1."""
    for name in names:
        if name in header:
            return header.index(name)
    return -1


def kernel_columns(header: Sequence[str]) -> dict[str, int]:
    """Our column name -> index for a kernel table's header (renames across versions folded)."""
    return {key: i for key, names in ALIASES.items() if (i := find_column(header, names)) >= 0}


def is_kernel_header(header: Sequence[str]) -> bool:
    cols = kernel_columns(header)
    return "name" in cols and "dur_us" in cols


def _floats(path: Path, column: str, cells: Sequence[str], first_record: int, skipped: Skipped | None = None,
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


def _ints(path: Path, column: str, cells: Sequence[str], first_record: int, skipped: Skipped | None = None,
          bad: list[int] | None = None) -> np.ndarray:
    f = _floats(path, column, cells, first_record, skipped, bad)
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


def _starts(path: Path, column: str, cells: Sequence[str], first_record: int, bad: list[int] | None = None
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


def iter_kernel_chunks(path: Path, *, block: int | None = None, cancel: threading.Event | None = None,
                       progress: Progress | None = None, skipped: Skipped | None = None) -> Iterator[KernelTable]:
    """The kernel rows of `path` as `KernelTable`s, one per block of about `block` bytes, in file order.

    Each block is split with numpy (`fast_csv`) and its columns are decoded when first read; a block
    it cannot split (a record with more or fewer cells than the header, an odd quote, bytes that
    are not UTF-8, a name or duration that is not one) goes through the csv module, which skips
    each such record and counts it in `skipped`. A cell of another column that is not a number is
    read as missing and counted there too. Without `skipped` the first bad record is an InputError;
    with it, only a file without one usable record is.
    """
    reader, header, fh = open_csv(path, "surrogateescape" if skipped is not None else "strict")
    fh.close()  # type: ignore[attr-defined]
    cols = kernel_columns(header)
    if "name" not in cols or "dur_us" not in cols:
        raise InputError(path, "not a kernel table: no Name/Op Name and Duration(us) columns "
                               f"(columns: {', '.join(header[:12])})", where="1")
    metrics = {h: i for i, h in enumerate(header) if _METRIC.match(h)}
    strict = skipped is not None
    need = min(len(header), max(cols.values()) + 1)
    records = 0  # data records consumed, the skipped ones included (record numbers count them)
    usable = 0
    scratch: dict[int, fast_csv.Scratch] = {}  # one set of work arrays a thread, for this file only
    spare: list = []  # maps of released blocks, filled again

    def split_block(buf: np.ndarray, source: Callable[[fast_csv.Split], fast_csv.Split] | None
                    ) -> tuple[np.ndarray, fast_csv.Split | None, Ready]:
        if len(buf) and int(buf.max()) >= 0x80:  # ASCII needs no check; anything else must be UTF-8
            try:
                buf.tobytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                if not strict:
                    raise InputError(path, f"not a text file (byte {len(first) + exc.start} of a block is not "
                                           "UTF-8)") from None
                return buf, None, {}
        work = scratch.setdefault(threading.get_ident(), fast_csv.Scratch())
        split = fast_csv.Split.of(buf, width, width if strict else max(need, 1), work)
        if split is None or not strict:
            return buf, split.compact() if split is not None else None, {}
        dur = split.floats(cols["dur_us"])  # a duration or start that is not one: the slow path skips its record
        start = split.starts_ns(cols["start_ns"]) if "start_ns" in cols else None
        if dur is None or ("start_ns" in cols and start is None):
            return buf, None, {}
        ready = _hot(split, cols, metrics)
        ready["floats"]["dur_us"] = dur
        if start is not None:
            ready["ints"]["start_ns"] = start
        if source is not None:  # what the summaries read is decoded: the block goes until another column is asked for
            split.release(source)
        else:
            split.compact()
        return buf, split, ready

    def reading(raw: BinaryIO) -> Iterator[Callable[[], tuple[np.ndarray, fast_csv.Split | None, Ready]]]:
        offset = len(first)  # where the next block starts in the file (plain files only)
        for buf in fast_csv.blocks(raw, size=block or fast_csv.BLOCK, spare=spare if stamp is not None else None):
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            source = _source(path, offset, len(buf), stamp) if stamp is not None and offset + len(buf) <= stamp[0] \
                else None  # the last block may end in a newline the file lacks: it keeps its bytes
            offset += len(buf)
            yield partial(split_block, buf, source)

    try:
        with open_binary(path) as raw:
            first = raw.readline()
            width = len(next(csv.reader([first.decode("utf-8-sig", errors="replace").rstrip("\r\n")])))
            stamp = _stamp(path) if strict and not is_gzip(path) else None
            # blocks are read here and split on worker threads, a few ahead of the one handed out
            for buf, split, ready in threads.ordered(reading(raw), ahead=1):
                if split is not None:
                    tables, used = [_fast_table(path, header, split, cols, metrics, records, ready, skipped)], split.n
                    if split.released and len(spare) < 2:  # nothing reads its bytes: the next block fills its map
                        spare.append(getattr(buf.base, "obj", buf.base))
                    del buf
                else:
                    tables, used = _csv_tables(path, header, cols, metrics, buf.tobytes(), records, skipped,
                                               width)
                records += used
                for t in tables:
                    usable += t.n
                    yield t
                if progress is not None:
                    progress(f"reading {path.name}", usable, None)
                if cancel is not None and cancel.is_set():
                    raise Cancelled()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(path, f"damaged gzip file ({exc or 'it ends early'})") from None
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    if skipped is not None:
        skipped.refuse_if_empty(usable)


TEXT_KEYS = ("name", "type", "core", "state", "input_shapes", "input_dtypes", "input_formats", "output_shapes",
             "output_dtypes", "output_formats")
INT_KEYS = ("block_dim", "mix_block_dim", "step", "stream", "device")


Ready = dict[str, dict[str, Any]]  # columns decoded with the split: "text", "ints", "floats", "metrics" -> name ->
# column, and "partial" -> name -> (rows, their Codes)
# what the summaries and the advice read, decoded with the split while the block is at hand: the op tables,
# steps, streams and block dims, bound-ness from the pipes' ratios and, for the kernels without counters, the
# roofline over shapes and dtypes (formats, wait times and the other counters wait until a view asks)
HOT_TEXT = ("name", "type", "core", "state")
ROOFLINE_TEXT = ("input_shapes", "input_dtypes", "output_shapes", "output_dtypes")
PIPE_RATIOS = ("aic_mac_ratio", "aiv_vec_ratio", "aic_mte1_ratio", "aic_mte2_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio",
               "aic_fixpipe_ratio", "aic_scalar_ratio", "aiv_scalar_ratio")  # checks/profile.py's PMU_PIPES (a test
# keeps the two lists one)


def _hot(split: fast_csv.Split, cols: dict[str, int], metrics: dict[str, int]) -> Ready:
    """The HOT_TEXT, INT_KEYS and PIPE_RATIOS columns of a block, and the ROOFLINE_TEXT ones of the rows no pipe
    counter covers (all rows when a counter's column does not decode the fast way). A column with a cell that
    is not a number is left to be decoded, and its skipped cells counted, when read."""
    out: Ready = {"text": {k: split.codes(cols[k]) for k in HOT_TEXT if k in cols}, "ints": {}, "floats": {},
                  "metrics": {}, "partial": {}}
    ints, pipes = [k for k in INT_KEYS if k in cols], [h for h in PIPE_RATIOS if h in metrics]
    js = [cols[k] for k in ints] + [metrics[h] for h in pipes]
    together = split.many_floats(js)  # one pass over all their cells; one by one when one holds junk
    decoded = together if together is not None else [split.floats(j) for j in js]
    for k, f in zip(ints, decoded):
        if f is not None:
            out["ints"][k] = _as_ints(f)
    counted = np.zeros(split.n, bool)  # rows with a pipe counter over 0 (what bound-ness reads them for)
    exact = True
    for h, f in zip(pipes, decoded[len(ints):]):
        if f is not None:
            v = out["metrics"][h] = f.astype(np.float32)
            counted |= np.isfinite(v) & (v > 0)
        else:
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


def _some_codes(split: fast_csv.Split, j: int, have_rows: np.ndarray, have: Codes, rows: np.ndarray | None = None
                ) -> Codes:
    """Column j of a block: from the rows decoded with the split when only some of those are asked for, else
    from the block (read again)."""
    if rows is not None:
        rows = np.asarray(rows)
        at = np.minimum(np.searchsorted(have_rows, rows), len(have_rows) - 1)
        if np.array_equal(have_rows[at], rows):
            return have.take(at)
    return split.codes(j, rows)


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _source(path: Path, offset: int, length: int, stamp: tuple[int, int]) -> Callable[[fast_csv.Split], fast_csv.Split]:
    """What reads a released block again: its bytes from the file split again, refused when the file changed."""
    def read(split: fast_csv.Split) -> fast_csv.Split:
        changed = InputError(path, "the file changed while it was being read: open it again")
        if _stamp(path) != stamp:
            raise changed
        mem = mmap.mmap(-1, length + fast_csv.PAD)
        with csv_errors(path), path.open("rb") as fh:
            fh.seek(offset)
            got = fh.readinto(memoryview(mem)[:length])
        again = split.resplit(np.frombuffer(mem, np.uint8, count=length)) if got == length else None
        if again is None:
            raise changed
        return again

    return read


def _fast_table(path: Path, header: list[str], split: fast_csv.Split, cols: dict[str, int],
                metrics: dict[str, int], done: int, ready: Ready | None = None,
                skipped: Skipped | None = None) -> KernelTable:
    """A block's table over numpy-split fields: the `ready` columns, the others decoded when first read (or some
    of their rows)."""
    first = done + 2
    ready = ready or {}
    rt, ri, rf, rm, some = (ready.get(k, {}) for k in ("text", "ints", "floats", "metrics", "partial"))
    text = Lazy(rt, {k: Decoder(_some_codes, split, cols[k], *some[k]) if k in some else Decoder(split.codes, cols[k])
                     for k in TEXT_KEYS if k in cols})
    pending = {k: Decoder(_fast_ints, path, header, split, cols[k], first, skipped) for k in INT_KEYS if k in cols}
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
        f = _floats(path, header[j], split.cells(j), first, skipped)
        f = f if rows is None else f[rows]
    return f.astype(dtype, copy=False)


def _fast_ints(path: Path, header: list[str], split: fast_csv.Split, j: int, first: int,
               skipped: Skipped | None = None, rows: np.ndarray | None = None) -> np.ndarray:
    return _as_ints(_fast_floats(path, header, split, j, first, np.float64, skipped, rows))


def _as_ints(f: np.ndarray) -> np.ndarray:
    """Whole numbers read as floats as int64, NO_INT for missing cells and msprof's 4294967295."""
    v = np.full(len(f), NO_INT, np.int64)
    ok = np.isfinite(f)
    v[ok] = f[ok].astype(np.int64)
    v[v == INVALID_ID] = NO_INT
    return v


def _fast_starts(path: Path, header: list[str], split: fast_csv.Split, j: int, first: int,
                 rows: np.ndarray | None = None) -> np.ndarray:
    v = split.starts_ns(j, rows)
    if v is None:
        v = _starts(path, header[j], split.cells(j), first)
        v = v if rows is None else v[rows]
    return v


def _odd(row: list[str], width: int, need: int, strict: bool) -> str:
    """Why a record cannot be read as a row of `width` cells ('' when it can)."""
    if len(row) < (width if strict else need):
        return f"{len(row)} cells, the header {width}"
    if strict and len(row) > width and any(c.strip() for c in row[width:]):
        return f"{len(row)} cells, the header {width}"
    if strict and any("\udc80" <= ch <= "\udcff" for c in row for ch in c):
        return "bytes that are not UTF-8"
    return ""


def _csv_tables(path: Path, header: list[str], cols: dict[str, int], metrics: dict[str, int], data: bytes | str,
                done: int, skipped: Skipped | None = None, width: int | None = None) -> tuple[list[KernelTable], int]:
    """A block's tables through the csv module (the slow path) and how many records it consumed; odd records
    are skipped and counted in `skipped`, or an InputError naming the first without it."""
    import io

    strict = skipped is not None
    text = data if isinstance(data, str) else data.decode("utf-8", errors="surrogateescape" if strict else "strict")
    reader = csv.reader(io.StringIO(text, newline=""))
    width = width or len(header)
    need = min(width, max(cols.values()) + 1)
    out = []
    consumed = 0
    while True:
        try:
            rows = list(itertools.islice(reader, CHUNK))
        except csv.Error as exc:
            raise InputError(path, f"not a readable CSV file: {exc}", where=f"record {done + reader.line_num}") from None
        if not rows:
            return out, consumed
        rows = [r for r in rows if len(r) >= width or (len(r) > 1 and any(r)) or (strict and len(r) == 1 and r[0])]
        first = done + consumed + 2
        consumed += len(rows)
        keep = []
        for k, r in enumerate(rows):
            why = _odd(r, width, need, strict)
            if not why:
                keep.append(r)
            elif skipped is None:
                raise InputError(path, f"record {first + k} has {len(r)} cells, the header {width} (truncated file?)")
            else:
                skipped.record(first + k, why)
        numbers = [first + k for k, r in enumerate(rows) if not _odd(r, width, need, strict)]
        rows = keep
        if strict and rows:  # a duration or start that cannot be read skips its record
            columns = list(zip(*rows))
            problems: dict[int, str] = {}
            for key, decode in (("start_ns", _starts), ("dur_us", _floats)):
                if key not in cols:
                    continue
                bad: list[int] = []
                cells = columns[cols[key]]
                decode(path, header[cols[key]], cells, first, bad=bad)  # type: ignore[operator]
                problems.update({i: f"column {header[cols[key]]!r}: {cells[i].strip()!r} is not a "
                                    + ("time in µs" if key == "start_ns" else "number") for i in bad})
            for i, problem in sorted(problems.items()):
                skipped.record(numbers[i], problem)  # type: ignore[union-attr]
            rows = [r for i, r in enumerate(rows) if i not in problems]
            numbers = [n for i, n in enumerate(numbers) if i not in problems]
        if not rows:
            continue
        columns = list(zip(*rows))
        n = len(rows)
        first_row = numbers[0] if numbers else first
        tx = {k: Codes.of(c.strip() for c in columns[cols[k]]) for k in TEXT_KEYS if k in cols}
        ints = {k: _ints(path, header[cols[k]], columns[cols[k]], first_row, skipped) for k in INT_KEYS if k in cols}
        if "start_ns" in cols:
            ints["start_ns"] = _starts(path, header[cols["start_ns"]], columns[cols["start_ns"]], first_row)
        floats = {k: _floats(path, header[cols[k]], columns[cols[k]], first_row, skipped)
                  for k in ("dur_us", "wait_us") if k in cols}
        mets = {h: _floats(path, h, columns[i], first_row, skipped).astype(np.float32) for h, i in metrics.items()}
        out.append(KernelTable(n, tx, ints, floats, mets))


def read_kernels(path: Path, *, cancel: threading.Event | None = None, progress: Progress | None = None,
                 block: int | None = None, skipped: Skipped | None = None) -> KernelTable:
    """Every kernel row of `path` in one `KernelTable` (odd records skipped and counted in `skipped` when given)."""
    return KernelTable.concat(list(iter_kernel_chunks(path, block=block, cancel=cancel, progress=progress,
                                                      skipped=skipped)))


def read_records(path: Path, skipped: Skipped | None = None) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """Header and (record number, {column: stripped cell}) of a small table; missing cells become ''.

    With `skipped`, a record with fewer or more cells than the header, or with bytes that are not
    UTF-8, is skipped and counted there (without it, short records read their missing cells as '').
    """
    reader, header, fh = open_csv(path, "surrogateescape" if skipped is not None else "strict")
    width = len(header)
    out = []
    try:
        with csv_errors(path):
            for k, row in enumerate(reader, start=2):
                cells = [c.strip() for c in row]
                if not any(cells):
                    continue
                if skipped is not None:
                    why = _odd(cells, width, width, True)
                    if why:
                        skipped.record(k, why)
                        continue
                out.append((k, {h: ("" if c in MISSING else c) for h, c in zip(header, cells)}))
    finally:
        fh.close()  # type: ignore[attr-defined]
    return header, out


def _tolerant(path: Path, rows: list[tuple[int, dict[str, str]]], make: Callable[[int, dict[str, str]], Any],
              skipped: Skipped | None) -> list[Any]:
    """`make(record, row)` of every row; a row it refuses (InputError) is skipped and counted in `skipped`, or
    raises without it. A file whose every row was skipped is refused."""
    out = []
    for k, r in rows:
        try:
            out.append(make(k, r))
        except InputError as exc:
            if skipped is None:
                raise
            skipped.record(k, exc.problem)
    if skipped is not None:
        skipped.refuse_if_empty(len(out))
    return out


def _need(path: Path, header: Sequence[str], *names: str) -> None:
    missing = [n for n in names if n not in header]
    if missing:
        raise InputError(path, f"missing column {missing[0]!r} (columns: {', '.join(header)})", where="1")


def _num(path: Path, row: dict[str, str], column: str, line: int, default: float = 0.0) -> float:
    cell = row.get(column, "")
    if cell == "":
        return default
    try:
        return float(cell)
    except ValueError:
        raise InputError(path, f"column {column!r}: {cell!r} is not a number", where=f"record {line}") from None


def read_op_statistic(path: Path, skipped: Skipped | None = None) -> tuple[OpStat, ...]:
    """op_statistic.csv (torch_npu or msprof): one `OpStat` per op type and core type."""
    header, rows = read_records(path, skipped)
    _need(path, header, "OP Type", "Count", "Total Time(us)")
    return tuple(_tolerant(path, rows, lambda k, r: OpStat(
        r["OP Type"], r.get("Core Type", ""), int(_num(path, r, "Count", k)), _num(path, r, "Total Time(us)", k),
        _num(path, r, "Min Time(us)", k), _num(path, r, "Avg Time(us)", k), _num(path, r, "Max Time(us)", k),
        _num(path, r, "Ratio(%)", k), int(_num(path, r, "Device_id", k, NO_INT))), skipped))


STEP_COLUMNS = ("Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage",
                "Bubble", "Preparing")


def read_step_trace(path: Path, skipped: Skipped | None = None) -> tuple[StepTime, ...]:
    """step_trace_time.csv or cluster_step_trace_time.csv: one `StepTime` per step (and rank)."""
    header, rows = read_records(path, skipped)
    _need(path, header, "Computing", "Free")
    rows = [(k, r) for k, r in rows if r.get("Type", "rank") in ("rank", "")]  # cluster files also hold stages

    def step(k: int, r: dict[str, str]) -> StepTime:
        rank = r.get("Index") if "Type" in r else r.get("Device_id")
        vals = [_num(path, r, c, k) for c in STEP_COLUMNS]
        return StepTime(int(_num(path, r, "Step", k, NO_INT)), *vals,
                        rank=int(_num(path, r, "Index" if "Type" in r else "Device_id", k, NO_INT))
                        if rank not in (None, "") else NO_INT)

    return tuple(_tolerant(path, rows, step, skipped))


def read_operator_details(path: Path, skipped: Skipped | None = None) -> tuple[HostOp, ...]:
    """operator_details.csv: framework ops with host and device time, folded by name (the file has one row a call)."""
    header, rows = read_records(path, skipped)
    _need(path, header, "Name")
    acc: dict[str, list[float]] = {}
    stacks: dict[str, tuple[str, str]] = {}
    columns = ("Host Self Duration(us)", "Host Total Duration(us)", "Device Self Duration(us)",
               "Device Total Duration(us)")
    for r, vals in _tolerant(path, rows, lambda k, r: (r, [_num(path, r, c, k) for c in columns]), skipped):
        name = r["Name"]
        cur = acc.setdefault(name, [0.0, 0.0, 0.0, 0.0, 0.0])
        cur[0] += 1
        for i, v in enumerate(vals):
            cur[i + 1] += v
        stacks.setdefault(name, (_lines(r.get("Call Stack", "")), _lines(r.get("Input Shapes", ""))))
    return tuple(HostOp(name, int(v[0]), v[1], v[2], v[3], v[4], *stacks[name])
                 for name, v in sorted(acc.items(), key=lambda kv: -kv[1][2]))


def _lines(cell: str) -> str:
    return "\n".join(p.strip().strip('"') for p in cell.replace("\r", "").split(";\n") if p.strip(" ;\n"))
