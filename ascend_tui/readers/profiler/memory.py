"""Memory timeline of an Ascend PyTorch Profiler folder: `memory_record.csv` and `operator_memory.csv`.

`memory_record.csv` gives allocated / reserved memory over time per component (APP, PTA, GE,
PTA+GE, WORKSPACE); `operator_memory.csv` gives every block an operator allocated, with its size
and when it was released. Both come in a newer and an older column layout, with CRLF line ends,
a TAB after timestamps and `N/A` cells; all of these are read as written.
"""

from __future__ import annotations

import csv
import re
import threading
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ascend_tui.progress import Progress
from ascend_tui.errors import Cancelled, InputError
from ascend_tui.evidence import MemoryEvent, MemorySample
from ascend_tui.readers.profiler.csv_tables import csv_errors
from ascend_tui.readers.base import FunctionReader
from ascend_tui.readers.parse.compressed import head as compressed_head, open_text, plain_name
from ascend_tui.readers.parse.skipped import Skipped, report as report_skips

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

RECORD, OPERATOR = "memory_record.csv", "operator_memory.csv"
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
TOOL = "ascend profiler"
_UNITS = {"B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}


@dataclass(frozen=True, slots=True)
class Holder:
    """One operator's share of device memory: its blocks, their total and largest size, how long they lived."""

    name: str
    blocks: int
    total_bytes: int
    largest_bytes: int
    unreleased: int
    longest_us: float | None


def find_files(path: str | Path) -> tuple[Path | None, Path | None]:
    """(memory_record.csv, operator_memory.csv) of a profiler folder, its ASCEND_PROFILER_OUTPUT, or one of the files."""
    p = Path(path)
    if p.is_file() and plain_name(p) not in (RECORD, OPERATOR):  # a renamed copy: its header says which it is
        kind = file_kind(p)
        return (p if kind == RECORD else None), (p if kind == OPERATOR else None)
    if p.is_file():
        folder = p.parent
    elif (p / OUTPUT_DIR).is_dir():
        folder = p / OUTPUT_DIR
    else:
        folder = p
    def found(name: str) -> Path | None:  # plain, or compressed as name.gz
        return next((f for f in (folder / name, folder / f"{name}.gz") if f.is_file()), None)

    return found(RECORD), found(OPERATOR)


def file_kind(path: Path) -> str | None:
    """RECORD or OPERATOR for a CSV whose header is memory_record's or operator_memory's, whatever its name."""
    if not plain_name(path).endswith(".csv"):
        return None
    header = [h.strip() for h in compressed_head(path, 2048).decode("utf-8-sig", errors="replace")
              .split("\n", 1)[0].split(",")]
    if any(h.startswith("Allocation Time") for h in header) and any(h.startswith("Size") for h in header):
        return OPERATOR
    if "Component" in header and any(h.startswith("Total Allocated") for h in header) and \
            any(h.startswith("Timestamp") for h in header):
        return RECORD
    return None


def _table(path: Path, cancel: threading.Event | None = None, skipped: Skipped | None = None
           ) -> tuple[list[str], list[tuple[int, dict[str, str | None]]]]:
    """Header and (line number, {column: cell}) per record; cells lose the Excel-guard TAB, `N/A`/empty become None.

    With `skipped`, a record with more or fewer cells than the header, or bytes that are not UTF-8, is
    skipped and counted there.
    """
    rows: list[tuple[int, dict[str, str | None]]] = []
    errors = "surrogateescape" if skipped is not None else "strict"
    with csv_errors(path), open_text(path, errors=errors) as fh:
        reader = csv.reader(fh)
        header = [h.strip() for h in next(reader, [])]
        if not header:
            raise InputError(path, "empty file, expected a CSV header")
        for i, row in enumerate(reader):
            if cancel is not None and not i % 8192 and cancel.is_set():
                raise Cancelled()
            cells = [c.strip() for c in row]
            if skipped is not None and any(cells):
                while len(cells) > len(header) and not cells[-1]:
                    cells.pop()  # a trailing comma
                bad = len(cells) != len(header) or any("\udc80" <= ch <= "\udcff" for c in cells for ch in c)
                if bad:
                    skipped.record(i + 2, f"{len(cells)} cells, the header {len(header)}" if len(cells) != len(header)
                                   else "bytes that are not UTF-8")
                    continue
            if any(cells):
                rows.append((reader.line_num, {h: (c if c not in ("", "N/A", "NA") else None)
                                               for h, c in zip(header, cells)}))
    return header, rows


def _column(path: Path, header: list[str], prefix: str, *, required: bool = True) -> tuple[str | None, int]:
    """The column starting with `prefix` and its unit factor (`Total Allocated(MB)` -> 1048576)."""
    for name in header:
        if name == prefix or name.startswith(prefix + "("):
            unit = re.search(r"\((KB|MB|GB|B)\)$", name)
            return name, _UNITS[unit.group(1)] if unit else 1
    if required:
        raise InputError(path, f"missing column {prefix!r} (columns: {', '.join(header)})", where="1")
    return None, 1


def _num(path: Path, line: int, column: str, value: str | None) -> Decimal | None:
    if value is None:
        return None
    try:
        return Decimal(value.strip('"'))
    except InvalidOperation:
        raise InputError(path, f"column {column!r}: {value!r} is not a number", where=str(line)) from None


def _kept(skipped: Skipped | None, line: int, make: Callable[[], Any]) -> Any:
    """`make()`, or None with the record counted in `skipped` when it raises InputError (raised without `skipped`)."""
    try:
        return make()
    except InputError as exc:
        if skipped is None:
            raise
        skipped.record(line, exc.problem)
        return None


def read_memory_record(path: Path, cancel: threading.Event | None = None, skipped: Skipped | None = None
                       ) -> list[tuple[Decimal, str, float, float]]:
    """(timestamp µs, component label, allocated bytes, reserved bytes) per row, in file order.

    APP rows record only the memory the whole process holds on the device (no allocator view), so
    that one figure is both their allocated and their reserved value.
    """
    header, rows = _table(path, cancel, skipped)
    comp, _ = _column(path, header, "Component")
    ts, _ = _column(path, header, "Timestamp")
    alloc, alloc_unit = _column(path, header, "Total Allocated")
    reserved, reserved_unit = _column(path, header, "Total Reserved")
    device = _column(path, header, "Device Type", required=False)[0] or _column(path, header, "Device", required=False)[0]
    devices = {row.get(device) for _, row in rows} if device else set()
    out = []
    for line, row in rows:
        got = _kept(skipped, line, lambda: (_num(path, line, ts, row.get(ts)), _num(path, line, alloc, row.get(alloc)),
                                            _num(path, line, reserved, row.get(reserved))))
        if got is None:
            continue
        t, a, r = got
        if t is None or (a is None and r is None):
            continue
        a_bytes = float(a * alloc_unit) if a is not None else float(r * reserved_unit)  # type: ignore[operator]
        r_bytes = float(r * reserved_unit) if r is not None else a_bytes
        label = row.get(comp) or "?"
        if len(devices) > 1 and device and row.get(device):
            label = f"{label} {row[device]}"
        out.append((t, label, a_bytes, r_bytes))
    if skipped is not None:
        skipped.refuse_if_empty(len(out))
    return out


def read_operator_memory(path: Path, cancel: threading.Event | None = None, skipped: Skipped | None = None
                         ) -> list[dict[str, Any]]:
    """One dict per allocated block: op name, bytes, allocation / release time (µs, Decimal), totals, device."""
    header, rows = _table(path, cancel, skipped)
    name, _ = _column(path, header, "Name")
    size, size_unit = _column(path, header, "Size")
    t_alloc, _ = _column(path, header, "Allocation Time")
    t_free, _ = _column(path, header, "Release Time")
    total_alloc, total_unit = _column(path, header, "Allocation Total Allocated", required=False)
    device = _column(path, header, "Device Type", required=False)[0]
    def block(line: int, row: dict[str, str | None]) -> dict[str, Any]:
        s = _num(path, line, size, row.get(size))
        start = _num(path, line, t_alloc, row.get(t_alloc))
        if s is None or start is None:
            raise InputError(path, f"row without {size!r} or {t_alloc!r}", where=str(line))
        total = _num(path, line, total_alloc, row.get(total_alloc)) if total_alloc else None
        return {"op": row.get(name) or "?", "bytes": int(s * size_unit), "start": start,
                "end": _num(path, line, t_free, row.get(t_free)), "line": line, "device": row.get(device or ""),
                "total_allocated": int(total * total_unit) if total is not None else None}

    out = [b for line, row in rows if (b := _kept(skipped, line, lambda: block(line, row))) is not None]
    if skipped is not None:
        skipped.refuse_if_empty(len(out))
    return out


def _component(op: str) -> str:
    return "PTA" if op.startswith("aten::") else ("GE" if op.startswith("cann::") else "")


def load_memory_timeline(folder: str | Path, cancel: threading.Event | None = None, skips: list[Skipped] | None = None
                         ) -> tuple[list[MemorySample], list[MemoryEvent]]:
    """(samples over time, blocks largest first) of a profiler folder; times are µs from its first record.

    Each block's `node` is its operator's name, the node id `load` gives that operator.
    """
    record, operator = find_files(folder)
    if record is None and operator is None:
        raise InputError(folder, f"no {RECORD} or {OPERATOR} here (an Ascend PyTorch Profiler folder was expected; "
                                 "profile with profile_memory=True)")
    skipped = {p: Skipped(str(p)) for p in (record, operator) if p is not None} if skips is not None else {}
    rows = read_memory_record(record, cancel, skipped.get(record)) if record else []
    ops = read_operator_memory(operator, cancel, skipped.get(operator)) if operator else []
    if skips is not None:
        skips.extend(skipped.values())
    return timeline(rows, ops)


def timeline(rows: list[tuple[Decimal, str, float, float]], ops: list[dict[str, Any]]
             ) -> tuple[list[MemorySample], list[MemoryEvent]]:
    """(samples, blocks largest first) of memory_record rows and operator_memory blocks (the CSVs' or the db's)."""
    stamps = [r[0] for r in rows] + [o["start"] for o in ops]
    origin = min(stamps) if stamps else Decimal(0)
    samples = [MemorySample(float(t - origin), a, r, label) for t, label, a, r in rows]
    samples.sort(key=lambda s: s.time)
    blocks = [_block(o, origin) for o in ops]
    blocks.sort(key=lambda e: (-(e.size or 0), e.extra["allocated_us"]))
    return samples, blocks


def _block(o: dict[str, Any], origin: Decimal) -> MemoryEvent:
    start = float(o["start"] - origin)
    end = float(o["end"] - origin) if o["end"] is not None else None
    held = float(o["end"] - o["start"]) if o["end"] is not None else None
    extra: dict[str, Any] = {"op": o["op"], "component": _component(o["op"]), "allocated_us": start,
                             "released_us": end, "duration_us": held}
    if o["device"]:
        extra["device"] = o["device"]
    if o["total_allocated"] is not None:
        extra["total_allocated_bytes"] = o["total_allocated"]
    return MemoryEvent(kind="allocation", tool=TOOL, size=o["bytes"], line_no=o["line"], extra=extra,
                       node=o["op"], confidence=1.0,
                       message=f"{o['op']} allocated {_human(o['bytes'])} at {start / 1000:.3f} ms, "
                               + (f"released after {held / 1000:.3f} ms" if held is not None
                                  else "not released within the capture"))


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"


def top_holders(blocks: list[MemoryEvent], n: int = 10) -> list[Holder]:
    """The `n` operators holding the most memory, by their largest block, then their total."""
    by_op: dict[str, list[MemoryEvent]] = {}
    for b in blocks:
        by_op.setdefault(str(b.extra.get("op", "?")), []).append(b)
    holders = []
    for name, bs in by_op.items():
        durations = [b.extra["duration_us"] for b in bs if b.extra.get("duration_us") is not None]
        holders.append(Holder(name, len(bs), sum(b.size or 0 for b in bs), max(b.size or 0 for b in bs),
                              sum(1 for b in bs if b.extra.get("released_us") is None),
                              max(durations) if durations else None))
    holders.sort(key=lambda h: (-h.largest_bytes, -h.total_bytes, h.name))
    return holders[:n]


def sniff(path: Path) -> bool:
    """A profiler folder (or its output folder, or one of the two files) with a memory record."""
    if path.is_file():
        return plain_name(path) in (RECORD, OPERATOR) or file_kind(path) is not None
    record, operator = find_files(path) if path.is_dir() else (None, None)
    return record is not None or operator is not None


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None) -> Investigation:
    """An `Investigation` holding the memory timeline, on a graph with one node per allocating operator."""
    if progress is not None:
        progress(f"reading memory records in {Path(path).name}", 0, None)
    skips: list[Skipped] = []
    samples, blocks = load_memory_timeline(path, cancel, skips)
    inv = memory_investigation(path, samples, blocks)
    report_skips(inv.run.extra, skips)
    return inv


def memory_investigation(path: str | Path, samples: list[MemorySample], blocks: list[MemoryEvent]) -> Investigation:
    """The memory timeline as an `Investigation` on a graph with one node per allocating operator."""
    from ascend_tui.graph.opgraph import OpGraph, OpNode
    from ascend_tui.investigation import Investigation, RunInfo

    graph = OpGraph(Path(path).name)
    for b in sorted(blocks, key=lambda e: e.extra["allocated_us"]):
        op = str(b.extra["op"])
        if op not in graph:
            graph.add_node(OpNode(id=op, op_type=op.replace("::", "."), module="", index=len(graph),
                                  attrs={"component": b.extra["component"]} if b.extra["component"] else None))
    holders = [{"op": h.name, "blocks": h.blocks, "total_bytes": h.total_bytes, "largest_bytes": h.largest_bytes,
                "unreleased": h.unreleased} for h in top_holders(blocks)]
    run = RunInfo(target=str(path), source="ascend profiler memory",
                  device={"backend": "npu", "name": "offline (Ascend PyTorch Profiler)", "inf_nan_mode": True},
                  extra={"memory_holders": holders})
    return Investigation(graph, memory_events=blocks, memory_samples=samples, run=run)


READER = FunctionReader("profiler memory", sniff, load)
