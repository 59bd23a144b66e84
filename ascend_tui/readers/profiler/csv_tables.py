"""The CSV tables of the Ascend profilers, read as written: kernel rows into numpy columns, small tables into records.

kernel_details.csv (torch_npu), op_summary_*.csv and task_time_*.csv (msprof) are one table under
several column names (`Name`/`Op Name`, `Block Dim`/`Block Num`, ...). Blocks of the file are split
with numpy (`fast_csv`: quoted multi-line fields, `\"\"\"32,3,224,224\"\"\"` shapes, CRLF) and each column
is decoded when first read, so a million-row file never exists as a million Python rows.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import re
import threading
from decimal import Decimal, InvalidOperation
from functools import partial
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, Sequence

import numpy as np

from ascend_tui import threads
from ascend_tui.errors import Cancelled, InputError
import ascend_tui.readers.parse.fast_csv as fast_csv
from ascend_tui.progress import Progress
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
    except csv.Error as exc:
        raise InputError(path, f"not a readable CSV file: {exc}") from None
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None


def open_csv(path: Path) -> tuple[csv.reader, list[str], object]:  # type: ignore[valid-type]
    """(reader, stripped header, file handle) of a CSV written by a profiler; InputError when it is not one."""
    with csv_errors(path):
        fh = path.open(newline="", encoding="utf-8-sig")
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


def _floats(path: Path, column: str, cells: Sequence[str], first_record: int) -> np.ndarray:
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
            raise InputError(path, f"column {column!r}: {cell.strip()!r} is not a number",
                             where=f"record {first_record + i}") from None
    return out


def _ints(path: Path, column: str, cells: Sequence[str], first_record: int) -> np.ndarray:
    f = _floats(path, column, cells, first_record)
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


def _starts(path: Path, column: str, cells: Sequence[str], first_record: int) -> np.ndarray:
    try:
        return np.fromiter(map(to_ns, cells), np.int64, len(cells))
    except ValueError as exc:
        i = list(cells).index(exc.args[0]) if exc.args and exc.args[0] in cells else 0
        raise InputError(path, f"column {column!r}: {cells[i].strip()!r} is not a time in µs",
                         where=f"record {first_record + i}") from None


def iter_kernel_chunks(path: Path, *, block: int | None = None, cancel: threading.Event | None = None,
                       progress: Progress | None = None) -> Iterator[KernelTable]:
    """The kernel rows of `path` as `KernelTable`s, one per block of about `block` bytes, in file order.

    Each block is split with numpy (`fast_csv`) and its columns are decoded when first read; a block
    it cannot split (too few fields in a record, an odd quote) goes through the csv module, which
    names the bad record. A cell that is not a number raises `InputError` when its column is read.
    """
    reader, header, fh = open_csv(path)
    fh.close()  # type: ignore[attr-defined]
    cols = kernel_columns(header)
    if "name" not in cols or "dur_us" not in cols:
        raise InputError(path, "not a kernel table: no Name/Op Name and Duration(us) columns "
                               f"(columns: {', '.join(header[:12])})", where="1")
    metrics = {h: i for i, h in enumerate(header) if _METRIC.match(h)}
    need = min(len(header), max(cols.values()) + 1)
    done = 0
    scratch: dict[int, fast_csv.Scratch] = {}  # one set of work arrays a thread, for this file only

    def split_block(buf: np.ndarray) -> tuple[np.ndarray, fast_csv.Split | None]:
        if len(buf) and int(buf.max()) >= 0x80:  # ASCII needs no check; anything else must be UTF-8
            try:
                buf.tobytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(path, f"not a text file (byte {len(first) + exc.start} of a block is not "
                                       "UTF-8)") from None
        work = scratch.setdefault(threading.get_ident(), fast_csv.Scratch())
        return buf, fast_csv.Split.of(buf, width, max(need, 1), work)

    def reading(raw: BinaryIO) -> Iterator[Callable[[], tuple[np.ndarray, fast_csv.Split | None]]]:
        for buf in fast_csv.blocks(raw, size=block or fast_csv.BLOCK):
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            yield partial(split_block, buf)

    try:
        with path.open("rb") as raw:
            first = raw.readline()
            width = len(next(csv.reader([first.decode("utf-8-sig").rstrip("\r\n")])))
            # blocks are read here and split on worker threads, a few ahead of the one handed out
            for buf, split in threads.ordered(reading(raw), ahead=1):
                tables = [_fast_table(path, header, split, cols, metrics, done)] if split is not None else \
                    _csv_tables(path, header, cols, metrics, buf.tobytes().decode("utf-8"), done)
                for t in tables:
                    done += t.n
                    yield t
                if progress is not None:
                    progress(f"reading {path.name}", done, None)
                if cancel is not None and cancel.is_set():
                    raise Cancelled()
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None


TEXT_KEYS = ("name", "type", "core", "state", "input_shapes", "input_dtypes", "input_formats", "output_shapes",
             "output_dtypes", "output_formats")
INT_KEYS = ("block_dim", "mix_block_dim", "step", "stream", "device")


def _fast_table(path: Path, header: list[str], split: fast_csv.Split, cols: dict[str, int],
                metrics: dict[str, int], done: int) -> KernelTable:
    """A block's table over numpy-split fields, each column decoded when first read (or some of its rows)."""
    first = done + 2
    text = Lazy({}, {k: Decoder(split.codes, cols[k]) for k in TEXT_KEYS if k in cols})
    pending = {k: Decoder(_fast_ints, path, header, split, cols[k], first) for k in INT_KEYS if k in cols}
    if "start_ns" in cols:
        pending["start_ns"] = Decoder(_fast_starts, path, header, split, cols["start_ns"], first)
    ints = Lazy({}, pending)
    floats = Lazy({}, {k: Decoder(_fast_floats, path, header, split, cols[k], first, np.float64)
                       for k in ("dur_us", "wait_us") if k in cols})
    mets = Lazy({}, {h: Decoder(_fast_floats, path, header, split, i, first, np.float32) for h, i in metrics.items()})
    return KernelTable(split.n, text, ints, floats, mets)


def _fast_floats(path: Path, header: list[str], split: fast_csv.Split, j: int, first: int, dtype: type,
                 rows: np.ndarray | None = None) -> np.ndarray:
    f = split.floats(j, rows)
    if f is None:  # a cell that is not a number: the slow path over the whole column names it
        f = _floats(path, header[j], split.cells(j), first)
        f = f if rows is None else f[rows]
    return f.astype(dtype, copy=False)


def _fast_ints(path: Path, header: list[str], split: fast_csv.Split, j: int, first: int,
               rows: np.ndarray | None = None) -> np.ndarray:
    f = _fast_floats(path, header, split, j, first, np.float64, rows)
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


def _csv_tables(path: Path, header: list[str], cols: dict[str, int], metrics: dict[str, int], text: str,
                done: int) -> list[KernelTable]:
    """A block's tables through the csv module (the slow path, with exact record numbers in errors)."""
    import io

    reader = csv.reader(io.StringIO(text, newline=""))
    width = len(header)
    out = []
    while True:
        try:
            rows = list(itertools.islice(reader, CHUNK))
        except csv.Error as exc:
            raise InputError(path, f"not a readable CSV file: {exc}", where=f"record {done + reader.line_num}") from None
        if not rows:
            return out
        rows = [r for r in rows if len(r) >= width or (len(r) > 1 and any(r))]
        short = next((k for k, r in enumerate(rows) if len(r) < min(width, max(cols.values()) + 1)), None)
        if short is not None:
            raise InputError(path, f"record {done + short + 2} has {len(rows[short])} cells, the header "
                                   f"{width} (truncated file?)")
        if not rows:
            continue
        columns = list(zip(*rows))
        n = len(rows)
        first = done + 2
        tx = {k: Codes.of(c.strip() for c in columns[cols[k]]) for k in TEXT_KEYS if k in cols}
        ints = {k: _ints(path, header[cols[k]], columns[cols[k]], first) for k in INT_KEYS if k in cols}
        if "start_ns" in cols:
            ints["start_ns"] = _starts(path, header[cols["start_ns"]], columns[cols["start_ns"]], first)
        floats = {k: _floats(path, header[cols[k]], columns[cols[k]], first) for k in ("dur_us", "wait_us") if k in cols}
        mets = {h: _floats(path, h, columns[i], first).astype(np.float32) for h, i in metrics.items()}
        done += n
        out.append(KernelTable(n, tx, ints, floats, mets))


def read_kernels(path: Path, *, cancel: threading.Event | None = None, progress: Progress | None = None,
                 block: int | None = None) -> KernelTable:
    """Every kernel row of `path` in one `KernelTable`."""
    return KernelTable.concat(list(iter_kernel_chunks(path, block=block, cancel=cancel, progress=progress)))


def read_records(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """Header and (record number, {column: stripped cell}) of a small table; missing cells become ''."""
    reader, header, fh = open_csv(path)
    out = []
    try:
        with csv_errors(path):
            for k, row in enumerate(reader, start=2):
                cells = [c.strip() for c in row]
                if any(cells):
                    out.append((k, {h: ("" if c in MISSING else c) for h, c in zip(header, cells)}))
    finally:
        fh.close()  # type: ignore[attr-defined]
    return header, out


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


def read_op_statistic(path: Path) -> tuple[OpStat, ...]:
    """op_statistic.csv (torch_npu or msprof): one `OpStat` per op type and core type."""
    header, rows = read_records(path)
    _need(path, header, "OP Type", "Count", "Total Time(us)")
    return tuple(OpStat(r["OP Type"], r.get("Core Type", ""), int(_num(path, r, "Count", k)),
                        _num(path, r, "Total Time(us)", k), _num(path, r, "Min Time(us)", k),
                        _num(path, r, "Avg Time(us)", k), _num(path, r, "Max Time(us)", k),
                        _num(path, r, "Ratio(%)", k), int(_num(path, r, "Device_id", k, NO_INT)))
                 for k, r in rows)


STEP_COLUMNS = ("Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage",
                "Bubble", "Preparing")


def read_step_trace(path: Path) -> tuple[StepTime, ...]:
    """step_trace_time.csv or cluster_step_trace_time.csv: one `StepTime` per step (and rank)."""
    header, rows = read_records(path)
    _need(path, header, "Computing", "Free")
    out = []
    for k, r in rows:
        if r.get("Type", "rank") not in ("rank", ""):
            continue  # cluster files also hold per-stage rows
        rank = r.get("Index") if "Type" in r else r.get("Device_id")
        vals = [_num(path, r, c, k) for c in STEP_COLUMNS]
        out.append(StepTime(int(_num(path, r, "Step", k, NO_INT)), *vals,
                            rank=int(float(rank)) if rank not in (None, "") else NO_INT))
    return tuple(out)


def read_operator_details(path: Path) -> tuple[HostOp, ...]:
    """operator_details.csv: framework ops with host and device time, folded by name (the file has one row a call)."""
    header, rows = read_records(path)
    _need(path, header, "Name")
    acc: dict[str, list[float]] = {}
    stacks: dict[str, tuple[str, str]] = {}
    for k, r in rows:
        name = r["Name"]
        vals = [_num(path, r, c, k) for c in ("Host Self Duration(us)", "Host Total Duration(us)",
                                              "Device Self Duration(us)", "Device Total Duration(us)")]
        cur = acc.setdefault(name, [0.0, 0.0, 0.0, 0.0, 0.0])
        cur[0] += 1
        for i, v in enumerate(vals):
            cur[i + 1] += v
        stacks.setdefault(name, (_lines(r.get("Call Stack", "")), _lines(r.get("Input Shapes", ""))))
    return tuple(HostOp(name, int(v[0]), v[1], v[2], v[3], v[4], *stacks[name])
                 for name, v in sorted(acc.items(), key=lambda kv: -kv[1][2]))


def _lines(cell: str) -> str:
    return "\n".join(p.strip().strip('"') for p in cell.replace("\r", "").split(";\n") if p.strip(" ;\n"))
