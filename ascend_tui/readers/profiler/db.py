"""The profilers' SQLite exports: torch_npu's `ascend_pytorch_profiler_N.db` (+ `analysis.db`) and msprof's `msprof_*.db`.

Both hold one schema (what MindStudio Insight and msprof-analyze query): `TASK` rows are device
tasks (ns), `COMPUTE_TASK_INFO` names the kernels among them and `COMMUNICATION_OP` the
collectives, every text cell an id into `STRING_IDS`; `TASK_PMU_INFO` holds the counters (times in
ns), `STEP_TIME` the steps, `OVERLAP_ANALYSIS` the compute/communication/free intervals,
`PYTORCH_API` the framework ops (linked to tasks through `CONNECTION_IDS`), `MEMORY_RECORD`,
`NPU_MEM` and `OP_MEMORY` the memory timeline; `analysis.db` has the step split torch_npu computed
(`StepTraceTime`). Each view is one SQL query of integer columns (strings stay ids, looked up once),
so the tables fill the same `Profile` and memory records the CSV readers fill.
"""

from __future__ import annotations

import bisect
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ascend_tui.errors import InputError
from ascend_tui.evidence import MemoryEvent, MemorySample
from ascend_tui.graph.profile import NO_INT, Codes, HostOp, KernelTable, OpStat, Profile, Span, StepTime
from ascend_tui.readers.profiler import framework_ops
from ascend_tui.readers.parse.sqlite_ro import columns, connect, is_sqlite, tables
from ascend_tui.readers.profiler.csv_tables import INVALID_ID

TORCH_DB = "ascend_pytorch_profiler*.db"
MSPROF_DB = "msprof_*.db"
ANALYSIS_DB = "analysis.db"
OVERLAP = "Overlap Analysis"
OVERLAP_TYPES = {0: "Computing", 1: "Communication", 2: "Communication(Not Overlapped)", 3: "Free"}
PMU_NAMES = {"aic_total_time": "aicore_time(us)", "aiv_total_time": "aiv_time(us)"}  # ns in the db, µs in the CSV
BATCH = 65536
HCCL, NOT_APPLICABLE = -2, -3  # string ids of no STRING_IDS row: the texts kernel_details.csv gives collectives
_INT_MAX = np.iinfo(np.int64).max


def find(folder: Path) -> tuple[Path | None, Path | None]:
    """(profile db, analysis.db) of a profiler output folder, its parent, or a PROF_* folder; None when absent."""
    for where in (folder, folder / "ASCEND_PROFILER_OUTPUT", *sorted(folder.glob("PROF_*")),
                  *sorted(folder.glob("PROF_*/mindstudio_profiler_output"))):
        if not where.is_dir():
            continue
        for pattern in (TORCH_DB, MSPROF_DB):
            found = sorted(p for p in where.glob(pattern) if p.is_file() and is_sqlite(p))
            if found:
                analysis = where / ANALYSIS_DB
                return found[0], analysis if analysis.is_file() else None
    return None, None


def sniff_file(path: Path) -> bool:
    """A profiler db export by its name and header."""
    return path.is_file() and (path.match(TORCH_DB) or path.match(MSPROF_DB)) and is_sqlite(path)


class Strings:
    """STRING_IDS looked up once: id -> text ('' for NULL, -1 and ids the table lacks)."""

    __slots__ = ("values",)

    def __init__(self, conn: sqlite3.Connection, have: set[str]) -> None:
        self.values: dict[int, str] = dict(conn.execute("select id, value from STRING_IDS")) if "STRING_IDS" in have \
            else {}
        self.values.update({HCCL: "HCCL", NOT_APPLICABLE: "N/A"})  # what kernel_details.csv writes for collectives

    def codes(self, ids: np.ndarray) -> Codes:
        """A text column of string ids."""
        uniq, inverse = np.unique(ids, return_inverse=True)
        return Codes(inverse.astype(np.int32), [str(self.values.get(int(i), "") or "") for i in uniq])

    def text(self, i: Any) -> str:
        return str(self.values.get(int(i), "")) if i is not None else ""


def _rows(conn: sqlite3.Connection, sql: str, width: int, params: Iterable[Any] = ()) -> np.ndarray:
    """An int64 (n, width) array of a query's integer columns (NULL -> -1), fetched a batch at a time."""
    cur = conn.execute(sql, tuple(params))
    parts = []
    while True:
        got = cur.fetchmany(BATCH)
        if not got:
            break
        try:
            parts.append(np.array(got, dtype=np.int64).reshape(len(got), width))
        except (TypeError, ValueError, OverflowError):  # a NULL or a text cell the export left: read as -1
            parts.append(np.array([[_int(v) for v in row] for row in got], dtype=np.int64).reshape(len(got), width))
    return np.concatenate(parts) if parts else np.zeros((0, width), np.int64)


def _int(value: Any) -> int:
    """An integer cell, -1 for NULL or text that is not a number."""
    for cast in (int, lambda v: int(float(v))):  # exact for integer text (ns stamps), then decimals
        try:
            return cast(value)
        except (TypeError, ValueError, OverflowError):
            continue
    return -1


def _col(have_cols: list[str], *names: str, alias: str = "c") -> str:
    """The first of `names` the table (`alias` in the query) has, as an SQL expression defaulting to -1."""
    found = next((n for n in names if n in have_cols), None)
    return f'coalesce({alias}."{found}", -1)' if found else "-1"


TEXT = ("name", "type", "core", "input_shapes", "input_dtypes", "input_formats", "output_shapes", "output_dtypes",
        "output_formats")
_COMPUTE = {"name": ("name",), "type": ("opType",), "core": ("taskType",), "input_shapes": ("inputShapes",),
            "input_dtypes": ("inputDataTypes",), "input_formats": ("inputFormats",), "output_shapes": ("outputShapes",),
            "output_dtypes": ("outputDataTypes",), "output_formats": ("outputFormats",)}


def read_kernels(conn: sqlite3.Connection, have: set[str], strings: Strings, steps: np.ndarray,
                 calls: np.ndarray | None = None) -> KernelTable:
    """Compute tasks (COMPUTE_TASK_INFO x TASK) and collectives (COMMUNICATION_OP) as kernel_details rows; `calls`
    (the host-call table's PYTORCH_API rowids) gives each the host call that launched it."""
    parts: list[tuple[dict[str, np.ndarray], np.ndarray]] = []  # (columns, global task ids)
    if "COMPUTE_TASK_INFO" in have and "TASK" in have:
        cc = columns(conn, "COMPUTE_TASK_INFO")
        tc = columns(conn, "TASK")
        text = ", ".join(_col(cc, *_COMPUTE[k]) for k in TEXT)
        stream, device = (_col(tc, name, alias="t") for name in ("streamId", "deviceId"))
        sql = (f"select {text}, t.startNs, t.endNs - t.startNs, {_col(cc, 'waitNs')}, {_col(cc, 'blockDim', 'block_dim')},"
               f" {_col(cc, 'mixBlockDim')}, {stream}, {device}, t.globalTaskId"
               " from COMPUTE_TASK_INFO c join TASK t on t.globalTaskId = c.globalTaskId"
               " where t.startNs is not null and t.endNs is not null")
        a = _rows(conn, sql, len(TEXT) + 8)
        k = len(TEXT)
        cols = {key: a[:, i] for i, key in enumerate(TEXT)}
        cols.update(start=a[:, k], dur=a[:, k + 1], wait=a[:, k + 2], block=a[:, k + 3], mix=a[:, k + 4],
                    stream=a[:, k + 5], device=a[:, k + 6])
        parts.append((cols, a[:, k + 7]))
    if "COMMUNICATION_OP" in have:
        oc = columns(conn, "COMMUNICATION_OP")
        sql = (f"select {_col(oc, 'opName')}, {_col(oc, 'opType')}, c.startNs, c.endNs - c.startNs, {_col(oc, 'waitNs')}"
               " from COMMUNICATION_OP c where c.startNs is not null and c.endNs is not null")
        a = _rows(conn, sql, 5)
        n = len(a)
        none = np.full(n, -1, np.int64)
        cols = {key: np.full(n, NOT_APPLICABLE, np.int64) for key in TEXT}
        cols.update(name=a[:, 0], type=a[:, 1], core=np.full(n, HCCL, np.int64), start=a[:, 2], dur=a[:, 3],
                    wait=a[:, 4], block=np.zeros(n, np.int64), mix=none, stream=none, device=none)
        parts.append((cols, none))
    if not parts:
        return KernelTable(0)
    joined = {key: np.concatenate([p[0][key] for p in parts]) for key in parts[0][0]}
    tasks = np.concatenate([p[1] for p in parts])
    order = np.argsort(joined["start"], kind="stable")
    joined = {k: v[order] for k, v in joined.items()}
    tasks = tasks[order]
    n = len(order)
    text = {key: strings.codes(joined[key]) for key in TEXT}
    types = text["type"]
    if any(not v for v in types.values):  # msprof writes opType -1 for collectives: the name says the type
        from ascend_tui.readers.profiler.trace import type_from_name

        text["type"] = Codes.of(types.at(i) or type_from_name(text["name"].at(i)) for i in range(n))
    step = np.full(n, NO_INT, np.int64)
    if len(steps):
        at = np.searchsorted(steps[:, 1], joined["start"], side="right") - 1
        inside = (at >= 0) & (joined["start"] <= steps[np.clip(at, 0, None), 2])
        step[inside] = steps[at[inside], 0]

    def ints(v: np.ndarray) -> np.ndarray:
        v = v.copy()
        v[(v < 0) | (v == INVALID_ID)] = NO_INT
        return v

    wait = joined["wait"].astype(np.float64) / 1000
    wait[joined["wait"] < 0] = np.nan
    modules = read_modules(conn, have, strings, tasks)
    if modules is not None:
        text["module"] = modules
    return KernelTable(n, text, {"start_ns": joined["start"], "block_dim": ints(joined["block"]),
                                 "mix_block_dim": ints(joined["mix"]), "stream": ints(joined["stream"]),
                                 "device": ints(joined["device"]), "step": step,
                                 "host_op": launching_calls(conn, have, tasks, calls)},
                       {"dur_us": joined["dur"].astype(np.float64) / 1000, "wait_us": wait},
                       _metrics(conn, have, strings, tasks))


MODULE_PREFIX = "nn.Module: "


def read_modules(conn: sqlite3.Connection, have: set[str], strings: Strings, tasks: np.ndarray) -> Codes | None:
    """The `nn.Module` path around the framework op that launched each task (PYTORCH_API -> CONNECTION_IDS ->
    TASK, the trace's flows), as trace_view.json's module column; None when the db has no module records."""
    if not {"PYTORCH_API", "CONNECTION_IDS", "TASK"} <= have or not len(tasks):
        return None
    ids = [i for i, v in strings.values.items() if isinstance(v, str) and v.startswith(MODULE_PREFIX)]
    if not ids:
        return None
    spans: dict[int, list[tuple[int, int, str]]] = {}
    for tid, start, end, name in _rows(conn, "select coalesce(globalTid, -1), cast(startNs as integer), "
                                             f"cast(endNs as integer), name from PYTORCH_API where name in "
                                             f"({','.join(map(str, ids))}) and startNs is not null", 4).tolist():
        spans.setdefault(tid, []).append((start, end, strings.text(name)[len(MODULE_PREFIX):]))
    for v in spans.values():
        v.sort()
    op_type = "(select id from ENUM_API_TYPE where name = 'op')" if "ENUM_API_TYPE" in have else "p.type"
    launched = _rows(conn, "select t.globalTaskId, coalesce(p.globalTid, -1), max(cast(p.startNs as integer)) "
                           "from TASK t join CONNECTION_IDS ci on ci.connectionId = t.connectionId "
                           f"join PYTORCH_API p on p.connectionId = ci.id where p.type = {op_type} "
                           "group by t.globalTaskId", 3)
    if not len(launched):
        return None
    paths: dict[tuple[int, int], str] = {}

    def path(tid: int, t: int) -> str:
        key = (tid, t)
        if key not in paths:
            around = spans.get(tid, [])
            upto = bisect.bisect_right(around, (t, 1 << 62, ""))
            paths[key] = ".".join(name for s, e, name in around[:upto] if e >= t)
        return paths[key]

    by_task = {task: path(tid, t) for task, tid, t in launched.tolist()}
    found = [by_task.get(int(task), "") for task in tasks.tolist()]
    return Codes.of(found) if any(found) else None


def _metrics(conn: sqlite3.Connection, have: set[str], strings: Strings, tasks: np.ndarray) -> dict[str, np.ndarray]:
    """TASK_PMU_INFO pivoted onto the kernel rows, under the CSV's column names (ratios as is, times in µs)."""
    if "TASK_PMU_INFO" not in have or not len(tasks):
        return {}
    cur = conn.execute("select globalTaskId, name, value from TASK_PMU_INFO")
    order = np.argsort(tasks, kind="stable")
    ordered = tasks[order]
    out: dict[str, np.ndarray] = {}
    while True:
        got = cur.fetchmany(BATCH)
        if not got:
            break
        a = np.array([(t, n) for t, n, _ in got], dtype=np.int64)
        v = np.array([x if isinstance(x, (int, float)) else np.nan for _, _, x in got], dtype=np.float64)
        pos = np.searchsorted(ordered, a[:, 0])
        ok = (pos < len(ordered)) & (ordered[np.clip(pos, 0, len(ordered) - 1)] == a[:, 0]) & (a[:, 0] >= 0)
        for name_id in np.unique(a[ok, 1]).tolist():
            raw = strings.text(name_id)
            name = PMU_NAMES.get(raw, raw)
            if not (name in PMU_NAMES.values() or raw.endswith(("ratio", "fops")) or "bw" in raw):
                continue
            col = out.setdefault(name, np.full(len(tasks), np.nan, np.float32))
            sel = ok & (a[:, 1] == name_id)
            col[order[pos[sel]]] = v[sel] / (1000 if raw in PMU_NAMES else 1)
    return out


def read_steps_table(conn: sqlite3.Connection, have: set[str]) -> np.ndarray:
    """(id, startNs, endNs) of STEP_TIME, by start."""
    if "STEP_TIME" not in have:
        return np.zeros((0, 3), np.int64)
    return _rows(conn, "select coalesce(id, -1), startNs, endNs from STEP_TIME where startNs is not null "
                       "order by startNs", 3)


def read_step_times(conn: sqlite3.Connection, have: set[str], steps: np.ndarray, rank: int) -> tuple[StepTime, ...]:
    """Each step's compute / communication / free split from OVERLAP_ANALYSIS (how torch_npu builds step_trace_time)."""
    if "OVERLAP_ANALYSIS" not in have:
        return ()
    a = _rows(conn, "select type, startNs, endNs from OVERLAP_ANALYSIS where startNs is not null", 3)
    if not len(a):
        return ()
    ranges = steps[:, :3] if len(steps) else np.array([[NO_INT, int(a[:, 1].min()), int(a[:, 2].max())]])
    out = []
    for step, lo, hi in ranges.tolist():
        inside = (a[:, 1] >= lo) & (a[:, 1] <= hi)
        sums = {t: float((a[inside & (a[:, 0] == t), 2] - a[inside & (a[:, 0] == t), 1]).sum()) / 1000
                for t in OVERLAP_TYPES}
        out.append(StepTime(int(step), sums[0], sums[2], sums[1] - sums[2], sums[1], sums[3], 0.0, 0.0, rank=rank))
    return tuple(out)


def read_analysis_steps(path: Path, rank: int) -> tuple[StepTime, ...]:
    """analysis.db's StepTraceTime: the rows of step_trace_time.csv, as torch_npu computed them."""
    with connect(path) as conn:
        if "StepTraceTime" not in tables(conn):
            return ()
        have = columns(conn, "StepTraceTime")
        names = ("computing", "communication_not_overlapped", "overlapped", "communication", "free", "stage",
                 "bubble", "preparing")
        sel = ", ".join(f"coalesce({n}, 0)" if n in have else "0" for n in names)
        out = []
        for step, *vals in conn.execute(f"select step, {sel} from StepTraceTime"):
            try:
                sid = int(float(step))
            except (TypeError, ValueError):
                sid = NO_INT
            out.append(StepTime(sid, *(float(v) for v in vals), rank=rank))
        return tuple(out)


def read_op_stats(kernels: KernelTable) -> tuple[OpStat, ...]:
    """op_statistic rows (count, total, min, mean, max, share per op type and core) of the compute kernels
    (op_statistic.csv leaves the collectives out)."""
    hccl = kernels.text["core"].code("HCCL")
    if hccl >= 0:
        kernels = kernels.take(kernels.text["core"].codes != hccl)
    if kernels.n == 0:
        return ()
    key = kernels.text["type"].codes.astype(np.int64) * (len(kernels.text["core"].values) + 1) + \
        kernels.text["core"].codes
    uniq, inv = np.unique(key, return_inverse=True)
    dur = kernels.dur_us
    total = np.bincount(inv, weights=dur)
    count = np.bincount(inv)
    lo = np.full(len(uniq), np.inf)
    hi = np.full(len(uniq), -np.inf)
    np.minimum.at(lo, inv, dur)
    np.maximum.at(hi, inv, dur)
    first = np.full(len(uniq), kernels.n)
    np.minimum.at(first, inv, np.arange(kernels.n))
    whole = float(dur.sum()) or 1.0
    stats = [OpStat(kernels.label("type", int(first[g])), kernels.label("core", int(first[g])), int(count[g]),
                    round(float(total[g]), 3), round(float(lo[g]), 3), round(float(total[g] / count[g]), 3),
                    round(float(hi[g]), 3), round(float(total[g]) / whole * 100, 3)) for g in range(len(uniq))]
    return tuple(sorted(stats, key=lambda s: -s.total_us))


def read_host_calls(conn: sqlite3.Connection, have: set[str], strings: Strings) -> tuple[KernelTable, np.ndarray]:
    """Every framework-op call (PYTORCH_API rows of type 'op') in start order, as the trace's host-call table,
    and the PYTORCH_API rowid of each row."""
    if "PYTORCH_API" not in have:
        return KernelTable(0), np.zeros(0, np.int64)
    op_type = "(select id from ENUM_API_TYPE where name = 'op')" if "ENUM_API_TYPE" in have else "p.type"
    a = _rows(conn, "select p.rowid, coalesce(p.globalTid, -1), cast(p.startNs as integer), "
                    f"cast(p.endNs as integer) - cast(p.startNs as integer), coalesce(p.name, -1) from PYTORCH_API p "
                    f"where p.type = {op_type} and p.startNs is not null and p.endNs is not null "
                    "order by cast(p.startNs as integer), p.rowid", 5)
    if not len(a):
        return KernelTable(0), np.zeros(0, np.int64)
    threads, inv = np.unique(a[:, 1], return_inverse=True)  # globalTid: the pid in the high, the tid in the low 32 bits
    labels = [f"thread {int(t) & 0xFFFFFFFF}" if t >= 0 else "thread ?" for t in threads.tolist()]
    table = KernelTable(len(a), {"name": strings.codes(a[:, 4]),
                                 "thread": Codes(inv.reshape(-1).astype(np.int32), labels)},
                        {"start_ns": a[:, 2]}, {"dur_us": a[:, 3].astype(np.float64) / 1000})
    return table, a[:, 0]


def launching_calls(conn: sqlite3.Connection, have: set[str], tasks: np.ndarray, calls: np.ndarray | None
                    ) -> np.ndarray:
    """Per task, the host-call row (a position in `calls`) of the innermost framework op linked to it through
    CONNECTION_IDS (the latest start, the shortest at equal starts), as the trace's flows give it; -1 for none."""
    out = np.full(len(tasks), -1, np.int64)
    if calls is None or not len(calls) or not len(tasks) or not {"CONNECTION_IDS", "TASK"} <= have:
        return out
    op_type = "(select id from ENUM_API_TYPE where name = 'op')" if "ENUM_API_TYPE" in have else "p.type"
    links = _rows(conn, "select t.globalTaskId, p.rowid, cast(p.startNs as integer), cast(p.endNs as integer) "
                        "from TASK t join CONNECTION_IDS ci on ci.connectionId = t.connectionId "
                        f"join PYTORCH_API p on p.connectionId = ci.id where p.type = {op_type} "
                        "and p.startNs is not null and p.endNs is not null", 4)
    if not len(links):
        return out
    order = np.lexsort((-links[:, 3], links[:, 2], links[:, 0]))  # per task, the innermost call last
    links = links[order]
    last = np.append(links[1:, 0] != links[:-1, 0], True)
    task, rowid = links[last, 0], links[last, 1]
    by_rowid = np.argsort(calls, kind="stable")
    at = np.searchsorted(calls[by_rowid], rowid)
    ok = (at < len(calls)) & (calls[by_rowid[np.minimum(at, len(calls) - 1)]] == rowid)
    task_order = np.argsort(task, kind="stable")
    task, call = task[task_order], np.where(ok, by_rowid[np.minimum(at, len(calls) - 1)], -1)[task_order]
    j = np.searchsorted(task, tasks)
    hit = (j < len(task)) & (task[np.minimum(j, len(task) - 1)] == tasks) & (tasks >= 0)
    out[hit] = call[j[hit]]
    return out


def read_host_ops(conn: sqlite3.Connection, have: set[str], strings: Strings) -> tuple[HostOp, ...]:
    """Framework ops (PYTORCH_API rows of type 'op') folded by name, as operator_details.csv has them: host time
    total and self (less the ops nested inside, per thread), device time of the tasks each launched."""
    if "PYTORCH_API" not in have:
        return ()
    op_type = "(select id from ENUM_API_TYPE where name = 'op')" if "ENUM_API_TYPE" in have else "p.type"
    device = ("coalesce((select sum(t.endNs - t.startNs) from CONNECTION_IDS ci join TASK t on "
              "t.connectionId = ci.connectionId where ci.id = p.connectionId), 0)") \
        if {"CONNECTION_IDS", "TASK"} <= have else "0"
    a = _rows(conn, f"select coalesce(p.globalTid, -1), cast(p.startNs as integer), cast(p.endNs as integer), "
                    f"coalesce(p.name, -1), {device} from PYTORCH_API p where p.type = {op_type} "
                    "order by p.globalTid, cast(p.startNs as integer), cast(p.endNs as integer) desc", 5)
    if not len(a):
        return ()
    n = len(a)
    host = (a[:, 2] - a[:, 1]).astype(np.float64)
    child = np.zeros(n)
    dev_total = a[:, 4].astype(np.float64)
    stack: list[int] = []
    for i, (tid, start, end) in enumerate(a[:, :3].tolist()):  # nesting per thread: parents first, by start
        while stack and (a[stack[-1], 0] != tid or a[stack[-1], 2] < end or a[stack[-1], 2] <= start):
            done = stack.pop()
            if stack:
                dev_total[stack[-1]] += dev_total[done]
        if stack:
            child[stack[-1]] += host[i]
        stack.append(i)
    while stack:
        done = stack.pop()
        if stack:
            dev_total[stack[-1]] += dev_total[done]
    uniq, inv = np.unique(a[:, 3], return_inverse=True)
    sums = [np.bincount(inv, weights=w) / 1000 for w in (host - child, host, a[:, 4].astype(np.float64), dev_total)]
    count = np.bincount(inv)
    ops = [HostOp(strings.text(int(uniq[g])), int(count[g]), *(float(s[g]) for s in sums)) for g in range(len(uniq))]
    return tuple(sorted(ops, key=lambda h: -h.host_self_us))


def read_aten_sequence(conn: sqlite3.Connection, have: set[str], strings: Strings) -> dict[str, Any]:
    """The first-level aten ops of PYTORCH_API in start order (what the affinity-API rules match), as
    `framework_ops.sequence` stores them."""
    if "PYTORCH_API" not in have:
        return {}
    steps = {i: v for i, v in strings.values.items() if isinstance(v, str) and v.startswith(framework_ops.OPTIMIZER_STEP)}
    found: dict[str, Any] = {}
    if steps:
        calls = conn.execute(f"select name, count(*) from PYTORCH_API where name in ({','.join(map(str, steps))}) "
                             "group by name").fetchall()
        found = framework_ops.optimizer_steps(steps[i] for i, n in calls for _ in range(n))
    aten = [i for i, v in strings.values.items() if isinstance(v, str) and v.startswith("aten::")]
    if not aten:
        return found
    a = _rows(conn, "select coalesce(p.name, -1), cast(p.startNs as integer), cast(p.endNs as integer) "
                    f"from PYTORCH_API p where p.name in ({','.join(map(str, aten))}) and p.startNs is not null", 3)
    names = [strings.text(i) for i in a[:, 0].tolist()]
    return {**framework_ops.sequence(names, a[:, 1].tolist(), a[:, 2].tolist()), **found}


def read_spans(conn: sqlite3.Connection, have: set[str], origin_ns: int) -> tuple[Span, ...]:
    """OVERLAP_ANALYSIS intervals as the trace's Overlap Analysis track, and the steps as Step spans (µs from origin)."""
    out = []
    if "OVERLAP_ANALYSIS" in have:
        for t, s, e in _rows(conn, "select type, startNs, endNs from OVERLAP_ANALYSIS where startNs is not null "
                                   "order by startNs", 3).tolist():
            out.append(Span(OVERLAP, OVERLAP_TYPES.get(t, str(t)), (s - origin_ns) / 1000, (e - s) / 1000))
    for step, s, e in read_steps_table(conn, have).tolist():
        out.append(Span("Step", f"ProfilerStep#{step}", (s - origin_ns) / 1000, (e - s) / 1000))
    return tuple(sorted(out, key=lambda sp: sp.start_us))


def origin(conn: sqlite3.Connection, have: set[str]) -> int:
    """The earliest task or framework-op start (ns), where the timeline's µs count from."""
    starts = [r[0] for table in ("TASK", "PYTORCH_API") if table in have
              for r in conn.execute(f"select min(cast(startNs as integer)) from {table}") if r[0] is not None]
    return int(min(starts)) if starts else 0


def read_memory(conn: sqlite3.Connection, have: set[str], strings: Strings
                ) -> tuple[list[tuple[Decimal, str, float, float]], list[dict[str, Any]]]:
    """memory_record and operator_memory rows (as `memory.read_memory_record` / `read_operator_memory` give them)."""
    rows: list[tuple[Decimal, str, float, float]] = []
    devices: set[int] = set()
    if "NPU_MEM" in have:  # the process's whole device memory: memory_record's APP rows
        for kind, hbm, ddr, ts, dev in conn.execute("select type, hbm, ddr, timestampNs, deviceId from NPU_MEM "
                                                    "where timestampNs is not null"):
            if strings.text(kind).lower() == "app":
                total = float((hbm or 0) + (ddr or 0))
                rows.append((Decimal(int(ts)) / 1000, "APP", total, total))
    if "MEMORY_RECORD" in have:
        for comp, ts, alloc, reserved, dev in conn.execute(
                "select component, timestamp, totalAllocated, totalReserved, deviceId from MEMORY_RECORD "
                "where timestamp is not null"):
            if alloc is None and reserved is None:
                continue
            a = float(alloc if alloc is not None else reserved)
            rows.append((Decimal(int(ts)) / 1000, strings.text(comp) or "?", a,
                         float(reserved) if reserved is not None else a))
            devices.add(dev)
    ops: list[dict[str, Any]] = []
    ge: set[int] = set()  # blocks CANN (GE) allocated: operator_memory.csv names them cann::<op>
    if "NPU_OP_MEM" in have:
        ge = {int(n) for n, c in conn.execute("select distinct operatorName, component from NPU_OP_MEM "
                                              "where operatorName is not null") if strings.text(c) == "GE"}
    if "OP_MEMORY" in have:
        for k, (name, size, start, end, total, dev) in enumerate(conn.execute(
                "select name, size, allocationTime, releaseTime, allocationTotalAllocated, deviceId from OP_MEMORY "
                "where allocationTime is not null and size is not null order by rowid"), start=1):
            op = strings.text(name) or "?"
            if name in ge and not op.startswith("cann::"):
                op = f"cann::{op}"
            ops.append({"op": op, "bytes": int(size), "start": Decimal(int(start)) / 1000,
                        "end": Decimal(int(end)) / 1000 if end not in (None, "") else None, "line": k,
                        "device": f"NPU:{dev}" if dev is not None else None,
                        "total_allocated": int(total) if total not in (None, "") else None})
    return rows, ops


def rank_of(conn: sqlite3.Connection, have: set[str]) -> int | None:
    """The rank RANK_DEVICE_MAP names (torch_npu), or None."""
    if "RANK_DEVICE_MAP" not in have:
        return None
    row = conn.execute("select rankId from RANK_DEVICE_MAP where rankId is not null and rankId >= 0 limit 1").fetchone()
    return int(row[0]) if row else None


def check_schema(path: Path, have: set[str]) -> None:
    """InputError unless the db holds one of the tables a profile is made of."""
    if not have & {"TASK", "COMPUTE_TASK_INFO", "COMMUNICATION_OP", "STEP_TIME", "MEMORY_RECORD", "OP_MEMORY"}:
        raise InputError(path, "SQLite database without profiler tables (TASK, COMPUTE_TASK_INFO, COMMUNICATION_OP, "
                               f"STEP_TIME, MEMORY_RECORD ...); it has: {', '.join(sorted(have)[:12]) or 'no tables'}")


def read(path: Path, analysis: Path | None = None) -> tuple[Profile, list[MemorySample], list[MemoryEvent]]:
    """The `Profile` and the memory timeline (samples, blocks) of one profiler db export."""
    from ascend_tui.readers.profiler.memory import timeline

    with connect(path) as conn:
        have = tables(conn)
        check_schema(path, have)
        strings = Strings(conn, have)
        step_rows = read_steps_table(conn, have)
        calls, call_rowids = read_host_calls(conn, have, strings)
        kernels = read_kernels(conn, have, strings, step_rows, call_rowids)
        rank = rank_of(conn, have)
        steps: tuple[StepTime, ...] = ()
        if analysis is not None:
            steps = read_analysis_steps(analysis, NO_INT if rank is None else rank)
        if not steps and len(step_rows):
            steps = read_step_times(conn, have, step_rows, NO_INT if rank is None else rank)
        host = read_host_ops(conn, have, strings)
        aten = read_aten_sequence(conn, have, strings)
        spans = read_spans(conn, have, origin(conn, have))
        rows, ops = read_memory(conn, have, strings)
    kind = "msprof" if path.match(MSPROF_DB) else "ascend_pt"
    extra: dict[str, Any] = {"files": [path.name] + ([analysis.name] if analysis is not None else []), "export": "db",
                             **aten}
    if rank is not None:
        extra["rank"] = rank
    samples, blocks = timeline(rows, ops) if rows or ops else ([], [])
    return Profile(kind, kernels, read_op_stats(kernels), steps, host, spans, extra, host_calls=calls), samples, blocks
