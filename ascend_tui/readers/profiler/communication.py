"""Communication evidence from every place the Ascend tools write it, as `graph.communication` records.

- torch_npu's `communication.json` (step -> p2p/collective -> op -> time and bandwidth info) and
  `communication_matrix.json` (step -> p2p/collective -> op family -> "src-dst" -> link);
- msprof-analyze's `cluster_communication.json` (group -> step -> op -> rank -> the same info) and
  `cluster_communication_matrix.json` (group -> step -> op -> "src-dst" -> link);
- the text export's database twin `analysis.db` (CommAnalyzerTime / Bandwidth / Matrix) and
  msprof-analyze's `cluster_analysis.db` (ClusterCommunicationTime / Bandwidth / Matrix, the group
  mapping; `offline.profile_cluster` reads its ClusterStepTraceTime);
- the db export `ascend_pytorch_profiler_N.db` / `msprof_N.db` (COMMUNICATION_OP with its retry
  count, COMMUNICATION_TASK_INFO joined to TASK for per-task sizes and links);
- the HCCL process of `trace_view.json` (op slices on "Group N Communication", tasks on "Plane k").

Both JSON layouts are read by one walk: the record is found by its marker key and its place in the
tree says which step, group, op and rank it belongs to. A record with a missing or non-numeric field
is skipped and counted in `Communication.skipped`.
"""

from __future__ import annotations

import bisect
import json
import re
import sqlite3
from pathlib import Path
from typing import Any, Iterator, Sequence

from ascend_tui.errors import InputError
from ascend_tui.readers.parse import sqlite_ro
from ascend_tui.graph.communication import CommLink, CommOp, CommTask, Communication, Transport

TIME_INFO = "Communication Time Info"
BANDWIDTH_INFO = "Communication Bandwidth Info"
P2P_NAME = re.compile(r"send|recv|receive", re.I)
STEP_KEY = re.compile(r"^step\s*(\d+)$", re.I)
LINK_KEY = re.compile(r"^\s*(-?\d+)\s*-\s*(-?\d+)\s*$")
JSON_FILES = ("communication.json", "cluster_communication.json")
MATRIX_FILES = ("communication_matrix.json", "cluster_communication_matrix.json")
DB_GLOBS = ("ascend_pytorch_profiler*.db", "msprof_*.db")
ANALYSIS_DBS = ("analysis.db", "cluster_analysis.db")
TRACE_READ_LIMIT = 16 * 1024 * 1024
TRACE_TASK_LIMIT = 200_000  # HCCL tasks kept from one trace: byte alignment needs sizes, not every notify


def _load_json(path: Path) -> Any:
    try:
        with path.open("rb") as fh:
            return json.load(fh)
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not a text file (byte {exc.start} is not UTF-8)") from None
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON: {exc.msg}", where=f"{exc.lineno}:{exc.colno}") from None
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None


def _walk(node: Any, marker: str, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(keys above, record) for every dict holding `marker`, and (keys, None) for a leaf that is not a dict."""
    if not isinstance(node, dict):
        yield path, None
        return
    if marker in node or (marker == "Transport Type" and "Transit Size(MB)" in node):
        yield path, node
        return
    for k, v in node.items():
        yield from _walk(v, marker, (*path, str(k)))


def _num(d: Any, key: str, default: float | None = None) -> float:
    v = d.get(key, default) if isinstance(d, dict) else default
    if v is None:
        raise ValueError(key)
    return float(v)


def _place(keys: tuple[str, ...], rank: int) -> tuple[str, str, str, str, int]:
    """(step, kind, group, op name, rank) from the keys above a record, in either layout."""
    step, kind, group, name = "", "", "", ""
    rest = []
    for k in keys:
        if STEP_KEY.match(k) and not step:
            step = k
        elif k in ("p2p", "collective") and not kind:
            kind = k
        elif k.startswith("(") or (kind == "" and k == "p2p"):
            group = k
        else:
            rest.append(k)
    if rest and rest[-1].lstrip("-").isdigit() and len(rest) >= 2:  # cluster layout: ... op -> rank
        rank = int(rest.pop())
    name = rest[-1] if rest else ""
    if "@" in name:
        name, _, gid = name.partition("@")
        group = group or gid
    if not kind:
        kind = "p2p" if P2P_NAME.search(name) or keys[:1] == ("p2p",) else "collective"
    return step, kind, group, name, rank


def _transports(info: Any) -> tuple[Transport, ...]:
    out = []
    for tname, t in (info or {}).items():
        if not isinstance(t, dict):
            continue
        size, time = _num(t, "Transit Size(MB)", 0.0), _num(t, "Transit Time(ms)", 0.0)
        bw = t.get("Bandwidth(GB/s)")
        bw = float(bw) if bw is not None else (size / 1024 / (time / 1000) if time else 0.0)
        packets = tuple((float(k), int(v[0]), float(v[1])) for k, v in (t.get("Size Distribution") or {}).items())
        out.append(Transport(str(tname), size, time, bw, _num(t, "Large Packet Ratio", 0.0), packets))
    return tuple(out)


def ops_of_json(data: Any, rank: int = -1, source: str = "") -> Communication:
    """The `CommOp`s of a communication.json or cluster_communication.json tree (`Total Op Info` included)."""
    comm = Communication(sources=[source] if source else [])
    for keys, rec in _walk(data, TIME_INFO):
        if rec is None:
            comm.skipped += bool(keys)
            continue
        try:
            step, kind, group, name, r = _place(keys, rank)
            t = rec[TIME_INFO]
            comm.ops.append(CommOp(r, step, kind, name, group, _num(t, "Start Timestamp(us)", 0.0),
                                   _num(t, "Elapse Time(ms)"), _num(t, "Transit Time(ms)", 0.0),
                                   _num(t, "Wait Time(ms)", 0.0), _num(t, "Synchronization Time(ms)", 0.0),
                                   _num(t, "Idle Time(ms)", 0.0), _transports(rec.get(BANDWIDTH_INFO))))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            comm.skipped += 1
    return comm


def links_of_json(data: Any, source: str = "") -> Communication:
    """The `CommLink`s of a communication_matrix.json or cluster_communication_matrix.json tree."""
    comm = Communication(sources=[source] if source else [])
    for keys, rec in _walk(data, "Transport Type"):
        if rec is None:
            comm.skipped += bool(keys)
            continue
        m = LINK_KEY.match(keys[-1]) if keys else None
        try:
            if m is None:
                raise ValueError(keys)
            step, kind, group, name, _ = _place(keys[:-1], -1)
            comm.links.append(CommLink(step, group or kind, name, int(m[1]), int(m[2]), str(rec["Transport Type"]),
                                       _num(rec, "Transit Size(MB)"), _num(rec, "Transit Time(ms)"),
                                       _num(rec, "Bandwidth(GB/s)", 0.0)))
        except (KeyError, TypeError, ValueError):
            comm.skipped += 1
    return comm


def read_json(path: Path, rank: int = -1) -> Communication:
    """Ops or links of one JSON file, by what its records hold."""
    data = _load_json(path)
    if not isinstance(data, dict):
        raise InputError(path, "not a communication file (expected an object of steps or groups)")
    ops, links = ops_of_json(data, rank, path.name), links_of_json(data, path.name)
    comm = ops if len(ops.ops) >= len(links.links) else links
    if not comm and comm.skipped == 0 and data:
        raise InputError(path, f"no '{TIME_INFO}' or 'Transport Type' records in it")
    return comm


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'pragma table_info("{table}")')]


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("select name from sqlite_master where type='table'")}


# (time, bandwidth, matrix) table names: torch_npu's analysis.db, then msprof-analyze's cluster_analysis.db
ANALYSIS_TABLES = (("CommAnalyzerTime", "CommAnalyzerBandwidth", "CommAnalyzerMatrix"),
                   ("ClusterCommunicationTime", "ClusterCommunicationBandwidth", "ClusterCommunicationMatrix"),
                   ("ClusterCommAnalyzerTime", "ClusterCommAnalyzerBandwidth", "ClusterCommAnalyzerMatrix"))


def _rows(con: sqlite3.Connection, table: str) -> Iterator[dict[str, Any]]:
    cols = _columns(con, table)
    for row in con.execute(f'select * from "{table}"'):
        yield dict(zip(cols, row))


def _first_of(r: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if r.get(k) is not None:
            return r[k]
    raise KeyError(keys[0])


def read_analysis_db(path: Path, rank: int = -1) -> Communication:
    """The communication tables of analysis.db (CommAnalyzer*) or cluster_analysis.db (ClusterCommunication*)."""
    comm = Communication(sources=[path.name])
    with sqlite_ro.connect(path) as con:
        try:
            tables = _tables(con)
            time_t, bw_t, matrix_t = next((names for names in ANALYSIS_TABLES
                                           if names[0] in tables or names[2] in tables), ANALYSIS_TABLES[0])
            bw: dict[tuple[str, str, str], dict[str, list[Any]]] = {}
            for r in _rows(con, bw_t) if bw_t in tables else ():
                try:
                    key = (str(r.get("step", "")), str(r["hccl_op_name"]), str(r.get("rank_id", rank)))
                    entry = bw.setdefault(key, {}).setdefault(
                        str(_first_of(r, "transport_type", "band_type")),
                        [float(r["transit_size"] or 0), float(r["transit_time"] or 0), float(r["bandwidth"] or 0),
                         float(r.get("large_packet_ratio") or 0), []])
                    if float(r.get("count") or 0):
                        entry[4].append((float(r["package_size"]), int(r["count"]), float(r["total_duration"] or 0)))
                except (KeyError, TypeError, ValueError):
                    comm.skipped += 1
            for r in _rows(con, time_t) if time_t in tables else ():
                try:
                    name, step = str(r["hccl_op_name"]), str(r.get("step", ""))
                    rk = int(r["rank_id"]) if r.get("rank_id") is not None else rank
                    trans = tuple(Transport(t, v[0], v[1], v[2], v[3], tuple(v[4]))
                                  for t, v in bw.get((step, name, str(r.get("rank_id", rank))), {}).items())
                    kind = str(r.get("type") or ("p2p" if P2P_NAME.search(name) else "collective"))
                    comm.ops.append(CommOp(rk, step, kind, name, str(r.get("group_name", "")),
                                           float(r.get("start_timestamp") or 0),
                                           float(_first_of(r, "elapse_time", "elapsed_time")),
                                           float(r.get("transit_time") or 0), float(r.get("wait_time") or 0),
                                           float(r.get("synchronization_time") or 0), float(r.get("idle_time") or 0),
                                           trans))
                except (KeyError, TypeError, ValueError):
                    comm.skipped += 1
            for r in _rows(con, matrix_t) if matrix_t in tables else ():
                try:
                    comm.links.append(CommLink(str(r.get("step", "")), str(r.get("group_name", "")),
                                               str(r["hccl_op_name"]), int(float(r["src_rank"])),
                                               int(float(r["dst_rank"])), str(r["transport_type"]),
                                               float(r["transit_size"]), float(r["transit_time"]),
                                               float(r.get("bandwidth") or 0)))
                except (KeyError, TypeError, ValueError):
                    comm.skipped += 1
            if "CommunicationGroupMapping" in tables:
                for r in _rows(con, "CommunicationGroupMapping"):
                    ranks = [int(x) for x in re.findall(r"-?\d+", str(r.get("rank_set", "")))]
                    if ranks:
                        comm.groups[str(r.get("group_name", ""))] = ranks
        except sqlite3.DatabaseError as exc:
            raise InputError(path, f"unreadable communication tables: {exc}") from None
    return comm


def read_profiler_db(path: Path, rank: int = -1) -> Communication:
    """COMMUNICATION_OP (elapse, wait, retries) and COMMUNICATION_TASK_INFO + TASK (per-task sizes) of a db export."""
    comm = Communication(sources=[path.name])
    with sqlite_ro.connect(path) as con:
        try:
            tables = _tables(con)
            strings = dict(con.execute("select id, value from STRING_IDS")) if "STRING_IDS" in tables else {}

            def enum(table: str) -> dict[int, str]:
                return dict(con.execute(f'select id, name from "{table}"')) if table in tables else {}

            transports, links = enum("ENUM_HCCL_TRANSPORT_TYPE"), enum("ENUM_HCCL_LINK_TYPE")
            if rank < 0 and "RANK_DEVICE_MAP" in tables:
                got = con.execute("select rankId from RANK_DEVICE_MAP").fetchone()
                rank = int(got[0]) if got and got[0] is not None and int(got[0]) >= 0 else rank
            steps = list(con.execute("select id, startNs, endNs from STEP_TIME")) if "STEP_TIME" in tables else []
            if "COMMUNICATION_OP" in tables:
                cols = _columns(con, "COMMUNICATION_OP")
                for row in con.execute("select * from COMMUNICATION_OP"):
                    r = dict(zip(cols, row))
                    try:
                        name = str(strings.get(r["opName"], r["opName"]))
                        start, end = int(r["startNs"]), int(r["endNs"])
                        step = next((f"step{s}" for s, a, b in steps if a is not None and a <= start <= b), "")
                        wait = float(r.get("waitNs") or 0) / 1e6
                        comm.ops.append(CommOp(rank, step, "p2p" if P2P_NAME.search(name) else "collective", name,
                                               str(strings.get(r.get("groupName"), r.get("groupName") or "")),
                                               start / 1000, (end - start) / 1e6, 0.0, wait, 0.0, 0.0,
                                               retries=int(r.get("retry") or 0)))
                    except (KeyError, TypeError, ValueError):
                        comm.skipped += 1
            if "COMMUNICATION_TASK_INFO" in tables and "TASK" in tables:
                names = {r[0]: r[1] for r in con.execute("select opId, opName from COMMUNICATION_OP")} \
                    if "COMMUNICATION_OP" in tables else {}
                query = ("select i.name, i.taskType, i.transportType, i.linkType, i.size, i.srcRank, i.dstRank, "
                         "i.opId, "
                         "t.startNs, t.endNs from COMMUNICATION_TASK_INFO i join TASK t using (globalTaskId)")
                for name, kind, tr, lk, size, src, dst, op, a, b in con.execute(query):
                    try:  # torch_npu's db has enum tables; msprof's keeps the names in STRING_IDS
                        op_name = strings.get(name) or strings.get(names.get(op), str(op))
                        comm.tasks.append(CommTask(rank, str(op_name), str(strings.get(kind, kind)),
                                                   str(transports.get(tr) or strings.get(tr, tr)),
                                                   str(links.get(lk) or strings.get(lk, lk)), int(size or 0),
                                                   (int(b) - int(a)) / 1000, int(src), int(dst)))
                    except (TypeError, ValueError):
                        comm.skipped += 1
        except sqlite3.DatabaseError as exc:
            raise InputError(path, f"unreadable communication tables: {exc}") from None
    return comm


def tasks_of_trace(events: Sequence[dict[str, Any]], rank: int = -1) -> Communication:
    """HCCL ops ("Group N Communication" slices) and tasks ("Plane k" slices with size and link) of a trace."""
    hccl = {e.get("pid") for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
            and str((e.get("args") or {}).get("name", "")) == "HCCL"}
    threads = {(e.get("pid"), e.get("tid")): str((e.get("args") or {}).get("name", ""))
               for e in events if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") in hccl}
    comm = Communication(sources=["trace_view.json"])
    ops: list[tuple[float, float, str]] = []
    for e in events:
        if e.get("ph") != "X" or e.get("pid") not in hccl:
            continue
        track = threads.get((e.get("pid"), e.get("tid")), "")
        try:
            ts, dur = float(e["ts"]), float(e.get("dur", 0))
            if track.endswith("Communication"):
                ops.append((ts, ts + dur, str(e.get("name", ""))))
            elif len(comm.tasks) < TRACE_TASK_LIMIT:
                a = e.get("args") or {}
                comm.tasks.append(CommTask(rank, "", str(e.get("name", "")), str(a.get("transport type", "")),
                                           str(a.get("link type", "")), int(a.get("size(Byte)", 0) or 0), dur,
                                           int(a.get("src rank", -1)), int(a.get("dst rank", -1))))
        except (KeyError, TypeError, ValueError):
            comm.skipped += 1
    for a, b, name in ops:  # only elapse: the wait/transit split is communication.json's
        comm.ops.append(CommOp(rank, "", "p2p" if P2P_NAME.search(name) else "collective", name, "", a, (b - a) / 1000,
                               0.0, 0.0, 0.0, 0.0))
    if ops and comm.tasks:  # a task belongs to the op slice it starts in (tasks come in the same order)
        ops.sort()
        starts = [o[0] for o in ops]

        tasks_ts = [float(e["ts"]) for e in events if e.get("ph") == "X" and e.get("pid") in hccl
                    and not threads.get((e.get("pid"), e.get("tid")), "").endswith("Communication")]
        for i, (task, ts) in enumerate(zip(comm.tasks, tasks_ts)):
            j = bisect.bisect_right(starts, ts) - 1
            if j >= 0 and ts <= ops[j][1]:
                comm.tasks[i] = CommTask(task.rank, ops[j][2], task.name, task.transport, task.link_type,
                                         task.size_bytes, task.dur_us, task.src, task.dst)
    return comm


def globalise(comm: Communication) -> Communication:
    """Links between global ranks: each rank's matrix numbers a group's ranks 0..n-1 (msprof-analyze's cluster
    step maps them back the same way, through the sorted global ranks that hold ops of that group)."""
    from dataclasses import replace

    members: dict[str, set[int]] = {}
    for o in comm.ops:
        if o.group and o.rank >= 0:
            members.setdefault(o.group, set()).add(o.rank)
    order = {g: sorted(rs) for g, rs in members.items()}
    links = []
    for k in comm.links:
        ranks = order.get(k.group)
        if ranks and 0 <= k.src < len(ranks) and 0 <= k.dst < len(ranks):
            k = replace(k, src=ranks[k.src], dst=ranks[k.dst])
        links.append(k)
    comm.links = links
    return comm


def read_folder(folder: Path, rank: int = -1, *, trace: Path | None = None,
                trace_events: Sequence[dict[str, Any]] | None = None) -> Communication:
    """All communication evidence in one profiler output folder (or a msprof-analyze output folder).

    The trace's HCCL tasks are read only when nothing else gave per-task sizes and the trace is under
    `TRACE_READ_LIMIT` (the kernel reader has read it once already; a second read of a big one costs
    more than byte alignment is worth).
    """
    comm = Communication()

    def read(reader: Any, path: Path) -> Communication | None:
        try:
            return reader(path, rank)  # type: ignore[no-any-return]
        except InputError as exc:  # the kernels beside it are still good: count the file as skipped
            comm.skipped += 1
            comm.sources.append(f"{path.name} (unreadable: {exc.problem})")
            return None

    for names in (JSON_FILES, MATRIX_FILES):
        found = next((folder / n for n in names if (folder / n).is_file()), None)
        got = read(read_json, found) if found is not None else None
        if got is not None:
            comm.extend(got)
    for name in ANALYSIS_DBS:
        p = folder / name
        if p.is_file() and not comm.ops and (got := read(read_analysis_db, p)) is not None:
            comm.extend(got)
    for pattern in DB_GLOBS:
        for p in sorted(folder.glob(pattern))[:1]:
            db = read(read_profiler_db, p)
            if db is None:
                continue
            if comm.ops:  # the JSON has the wait/transit split; the db adds retries and tasks
                retries = {(o.name, o.start_us): o.retries for o in db.ops if o.retries}
                if retries:
                    from dataclasses import replace

                    comm.ops = [replace(o, retries=retries.get((o.name, o.start_us), 0)) for o in comm.ops]
                db.ops = []
            comm.extend(db)
    if trace_events is None and trace is not None and not comm.tasks and \
            trace.stat().st_size <= TRACE_READ_LIMIT:
        from ascend_tui.readers.profiler.trace import read_events

        try:
            trace_events = read_events(trace)
        except InputError:
            trace_events = None  # the kernel reader has said what is wrong with it
    if trace_events is not None and not comm.tasks:
        traced = tasks_of_trace(trace_events, rank)
        comm.tasks, comm.skipped = traced.tasks, comm.skipped + traced.skipped
        comm.ops = comm.ops or traced.ops
        if traced.tasks or traced.ops:
            comm.sources.append("trace_view.json")
    meta = next((p for p in (folder / "profiler_metadata.json", folder.parent / "profiler_metadata.json")
                 if p.is_file()), None)
    if meta is not None:
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict):
            comm.parallel = dict(data.get("distributed_args") or {})
            for g in (data.get("parallel_group_info") or {}).values():
                if isinstance(g, dict) and isinstance(g.get("global_ranks"), list):
                    comm.groups[str(g.get("group_name", ""))] = [int(x) for x in g["global_ranks"]]
                    if g.get("group_name") == "pp" and isinstance(g.get("group_rank"), int):
                        comm.parallel["pp_stage"] = g["group_rank"]  # this rank's pipeline stage
    groups = folder / "communication_group.json"
    if groups.is_file():
        try:
            data = _load_json(groups)
        except InputError:
            data = None
        if isinstance(data, dict):
            comm.groups = {f"{k}:{i}": [int(x) for x in g] for k, gs in data.items() if isinstance(gs, list)
                           for i, g in enumerate(gs) if isinstance(g, list)}
    return comm
