"""The CSV tables of the Ascend profilers, read as written: kernel rows into numpy columns, small tables into records.

kernel_details.csv (torch_npu), op_summary_*.csv and task_time_*.csv (msprof) are one table under
several column names (`Name`/`Op Name`, `Block Dim`/`Block Num`, ...). Blocks of the file are split
with numpy (`fast_csv`: quoted multi-line fields, `\"\"\"32,3,224,224\"\"\"` shapes, CRLF) and each column
is decoded when first read (`csv_columns`), so a million-row file never exists as a million Python rows.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import itertools
import re
import threading
import zlib
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Sequence

import numpy as np

from ascend_tui import threads
from ascend_tui.errors import Cancelled, InputError
import ascend_tui.readers.parse.fast_csv as fast_csv
from ascend_tui.readers.profiler.csv_columns import (  # noqa: F401 (INVALID_ID, PIPE_RATIOS, to_ns: read from here too)
    INT_KEYS, INVALID_ID, MISSING, PIPE_RATIOS, TEXT_KEYS, Ready, cell_floats, cell_ints, cell_starts, fast_table,
    file_stamp, hot, reread, to_ns)
from ascend_tui.readers.parse.compressed import is_gzip, open_binary, open_text
from ascend_tui.progress import Progress
from ascend_tui.readers.parse.skipped import Skipped
from ascend_tui.graph.profile import NO_INT, Codes, HostOp, KernelTable, OpStat, StepTime

CHUNK = 65536
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

    def split_block(buf: np.ndarray, quotes: np.ndarray | None,
                    source: Callable[[fast_csv.Split], fast_csv.Split] | None
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
        split = fast_csv.Split.of(buf, width, width if strict else max(need, 1), work, quotes)
        if split is None or not strict:
            return buf, split.compact() if split is not None else None, {}
        dur = split.floats(cols["dur_us"])  # a duration or start that is not one: the slow path skips its record
        start = split.starts_ns(cols["start_ns"]) if "start_ns" in cols else None
        if dur is None or ("start_ns" in cols and start is None):
            return buf, None, {}
        ready = hot(split, cols, metrics)
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
        for buf, quotes in fast_csv.quoted_blocks(raw, size=block or fast_csv.BLOCK,
                                                  spare=spare if stamp is not None else None):
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            source = reread(path, offset, len(buf), stamp) if stamp is not None and offset + len(buf) <= stamp[0] \
                else None  # the last block may end in a newline the file lacks: it keeps its bytes
            offset += len(buf)
            yield partial(split_block, buf, quotes, source)

    try:
        with open_binary(path) as raw:
            first = raw.readline()
            width = len(next(csv.reader([first.decode("utf-8-sig", errors="replace").rstrip("\r\n")])))
            stamp = file_stamp(path) if strict and not is_gzip(path) else None
            # blocks are read here and split on worker threads, a few ahead of the one handed out
            for buf, split, ready in threads.ordered(reading(raw), ahead=1):
                if split is not None:
                    tables, used = [fast_table(path, header, split, cols, metrics, records, ready, skipped)], split.n
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
            for key, decode in (("start_ns", cell_starts), ("dur_us", cell_floats)):
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
        ints = {k: cell_ints(path, header[cols[k]], columns[cols[k]], first_row, skipped)
                for k in INT_KEYS if k in cols}
        if "start_ns" in cols:
            ints["start_ns"] = cell_starts(path, header[cols["start_ns"]], columns[cols["start_ns"]], first_row)
        floats = {k: cell_floats(path, header[cols[k]], columns[cols[k]], first_row, skipped)
                  for k in ("dur_us", "wait_us") if k in cols}
        mets = {h: cell_floats(path, h, columns[i], first_row, skipped).astype(np.float32) for h, i in metrics.items()}
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
