"""Chrome-trace timelines: torch_npu's trace_view.json, msprof's msprof_*.json and PyTorch/Kineto traces.

All three speak the same event vocabulary (`ph` X/M/C/s/f, µs `ts`), with quirks: trace_view.json is
a bare array whose `ts` are strings with nanosecond decimals; Kineto wraps events in `traceEvents`
(and is often gzipped). Device kernels become a `KernelTable`, framework ops `HostOp`s, the overlap
tracks and profiler steps `Span`s; a kernel is attributed to the `nn.Module` around the framework op
that launched it (flows). The file is read a block at a time into columns (`trace_columns`), so a
multi-gigabyte trace costs the columns, not a Python object per event.
"""

from __future__ import annotations

import json
import threading
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ascend_tui.errors import InputError
from ascend_tui.graph.profile import NO_INT, Codes, HostOp, KernelTable, Profile, Span
from ascend_tui.progress import Progress, check_cancel, paused_gc
from ascend_tui.readers.base import head
from ascend_tui.readers.parse.json_events import BLOCK, BadPiece, Ending, decoded_pieces
from ascend_tui.readers.profiler import framework_ops
from ascend_tui.readers.profiler.trace_columns import ABSENT, Columns, Keep, decode

DEVICE_PROCESSES = ("Ascend Hardware", "HCCL", "Communication")
KINETO_DEVICE_CATS = {"kernel": "GPU", "gpu_memcpy": "MEMCPY", "gpu_memset": "MEMSET"}
OVERLAP = "Overlap Analysis"
MODULE = "nn.Module: "
STEP_CATS = ("user_annotation", "gpu_user_annotation")
# What the tables below read of a complete event: a device process's (kernels) or the overlap tracks', and on any
# process framework ops, Kineto kernels, module spans and step annotations; the rest (CANN/AscendCL API calls, the
# Python tracer's plain function calls, task-queue events) is skipped as read once its process is named.
KEEP = Keep(frozenset((*DEVICE_PROCESSES, OVERLAP)), frozenset(("cpu_op", *KINETO_DEVICE_CATS, *STEP_CATS)),
            ("python_function", MODULE))


def is_trace_name(path: Path) -> bool:
    """`*.json` or `*.json.gz` (Kineto writes `*.pt.trace.json.gz`)."""
    return path.suffix == ".json" or path.name.endswith(".json.gz")


def sniff_json(path: Path) -> bool:
    """A JSON file (plain or gzip) whose first bytes look like trace events."""
    if not is_trace_name(path):
        return False
    start = head(path)
    if start[:2] == b"\x1f\x8b":
        import gzip
        import zlib

        try:
            with gzip.open(path, "rb") as fh:
                start = fh.read(4096)
        except (OSError, EOFError, zlib.error):
            return False
    text = start.lstrip()
    return (text.startswith(b"[") and b'"ph"' in start) or b'"traceEvents"' in start or \
        (text.startswith(b"{") and b'"schemaVersion"' in start)


def read_trace(path: Path, cancel: threading.Event | None = None, progress: Progress | None = None, *,
               block: int = BLOCK, fast: bool = True) -> Profile:
    """A `Profile` of a trace file: device kernels, framework ops, overlap/step spans.

    A file cut while being written is read up to its last whole event, the lost tail said in
    `unmatched`; `fast=False` decodes with the standard json module even where msgspec is installed.
    """
    cols, ending = _columns(path, cancel, progress, block, fast, KEEP)
    if cols.conflict():  # a process named late holds events that were skipped: read them all
        cols, ending = _columns(path, cancel, progress, block, fast, None)
    try:
        profile = profile_of_columns(cols, cancel)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(path, f"malformed trace event: {type(exc).__name__}: {exc}") from None
    if not ending.closed:
        profile.extra["trace_cut"] = {"offset": ending.offset, "bad_bytes": ending.bad_bytes}
        lost = f"{ending.bad_bytes} bytes of an incomplete last event skipped" if ending.bad_bytes else \
            "no event lost"
        profile.unmatched = (*profile.unmatched, f"{path.name}: the trace ends at byte {ending.offset} before its "
                                                  f"closing ']' (cut while being written?): {lost}")
    return profile


def _columns(path: Path, cancel: threading.Event | None, progress: Progress | None, block: int, fast: bool,
             keep: Keep | None) -> tuple[Columns, Ending]:
    cols = Columns(keep)
    ending = Ending()
    with paused_gc():  # millions of short-lived structs, no cycles
        for events in decoded_pieces(path, partial(decode, fast=fast), block=block, cancel=cancel,
                                     progress=progress, ending=ending):
            try:
                cols.add(events)
            except (TypeError, ValueError) as exc:
                raise InputError(path, f"malformed trace event: {exc}", where=f"event {cols.events}+") from None
            del events
    cols.finish()
    return cols, ending


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every event of a trace as a plain dict, a block at a time: for small traces whose args a reader needs
    whole (the HCCL tasks' sizes and links), never for a kernel timeline, which `read_trace` keeps in columns."""
    events: list[dict[str, Any]] = []
    for piece in decoded_pieces(path, _plain_events):
        events.extend(piece)
    return events


def _plain_events(piece: bytes | memoryview) -> list[dict[str, Any]]:
    try:
        out = json.loads(bytes(piece))
    except json.JSONDecodeError as exc:
        raise BadPiece(f"JSON is malformed: {exc.msg}", exc.pos) from None
    return [e for e in out if isinstance(e, dict)]


def profile_of_columns(c: Columns, cancel: threading.Event | None = None) -> Profile:
    """The `Profile` of a trace's event columns."""
    vals = c.values
    procs: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for kind, pid, tid, name in c.meta:
        if kind == "process_name":
            procs[pid] = name
        else:
            threads[(pid, tid)] = name
    x = c.x
    check_cancel(cancel)

    def code(v: str) -> int:
        return c.index.get(v, -1)

    def where(col: np.ndarray, test: Callable[[Any], bool]) -> np.ndarray:
        """Rows whose interned value passes `test` (tested once per distinct value, looked up by code)."""
        hit = np.zeros(len(vals), bool)
        for u in np.flatnonzero(np.bincount(col, minlength=len(vals))).tolist():
            hit[u] = test(vals[u])
        return hit[col]

    def of_values(col: np.ndarray, raw: Iterable[Any]) -> np.ndarray:
        """Rows whose value is one of `raw`."""
        return np.isin(col, np.asarray([k for v in raw if (k := code(v)) >= 0] or [-1], np.int32))

    pid = x["pid"]
    is_proc = {name: of_values(pid, [p for p, v in procs.items() if v in names])
               for name, names in (("device", DEVICE_PROCESSES), ("hardware", ("Ascend Hardware",)),
                                   ("overlap", (OVERLAP,)))}
    pair = _pair(pid, x["tid"])
    comm_thread = np.zeros(len(pid), bool)  # on a thread whose name says Communication
    for (p, t), name in threads.items():
        if "Communication" in name and (pc := code(p)) >= 0 and (tc := code(t)) >= 0:
            comm_thread |= pair == (pc << 32 | tc)
    kcat = np.isin(x["cat"], np.asarray([code(k) for k in KINETO_DEVICE_CATS], np.int32))
    kineto = bool(kcat.any())
    kernel = kcat | (not kineto) & is_proc["device"] & (is_proc["hardware"] | comm_thread)
    rest = ~kernel
    host = rest & (x["cat"] == code("cpu_op"))
    rest &= ~host
    module = rest & (x["cat"] == code("python_function")) & where(x["name"], lambda v: _text(v).startswith(MODULE))
    rest &= ~module
    overlap = rest & is_proc["overlap"]
    step = rest & ~overlap & np.isin(x["cat"], np.asarray([code(k) for k in STEP_CATS])) \
        & where(x["name"], lambda v: _text(v).startswith("ProfilerStep#"))
    starts = ([int(x["ts"].min())] if len(x["ts"]) else []) + ([c.first] if c.first is not None else [])
    origin = min(starts, default=0)
    check_cancel(cancel)
    kernel_rows, host_rows = np.flatnonzero(kernel), np.flatnonzero(host)
    flow_kernels = _flow_kernels(c, pair, kernel_rows)
    module_at = _module_attribution(c, pair, host_rows, np.flatnonzero(module), kernel_rows, flow_kernels)
    calls = host_rows[np.argsort(x["ts"][host_rows], kind="stable")]  # the host-call table's rows, by start
    host_at = _host_attribution(c, pair, calls, kernel_rows, flow_kernels)
    table = _kernel_table(c, kernel_rows, kineto, is_proc["hardware"], module_at, host_at)
    rows = np.flatnonzero(overlap | step)
    rows = rows[np.argsort(x["ts"][rows], kind="stable")]
    spans = _spans(c, pair, rows, overlap[rows], threads, origin)
    return Profile("kineto" if kineto else "trace", table, host_ops=_host_ops(c, pair, host_rows),
                   spans=spans, extra={"trace_events": c.events, **_framework_ops(c, host_rows)},
                   host_calls=_host_calls(c, pair, calls, threads))


def _spans(c: Columns, pair: np.ndarray, rows: np.ndarray, overlap: np.ndarray, threads: dict[tuple[Any, Any], str],
           origin: int) -> tuple[Span, ...]:
    """The overlap tracks' and profiler steps' spans of `rows` (an overlap span is named by its thread)."""
    vals = c.values
    keys, inv_k = np.unique(pair[rows], return_inverse=True)
    names, inv_n = np.unique(c.x["name"][rows], return_inverse=True)
    thread_of = [threads.get((vals[k >> 32], vals[k & 0xFFFFFFFF]), "") for k in keys.tolist()]
    name_of = [_text(vals[k]) for k in names.tolist()]
    label = np.where(overlap, inv_k.reshape(-1), len(thread_of) + inv_n.reshape(-1))
    text = np.array(thread_of + name_of, dtype=object)[label].tolist() if len(rows) else []
    track = np.where(overlap, OVERLAP, "Step").astype(object).tolist()
    starts = ((c.x["ts"][rows] - origin) / 1000).tolist()  # exact int ns differences, divided as Python would
    return tuple(map(Span, track, text, starts, c.x["dur"][rows].tolist()))


def _framework_ops(c: Columns, rows: np.ndarray) -> dict[str, Any]:
    """`framework_ops`' aten sequence and optimizer steps of the host rows (µs as the float of the trace's text)."""
    uniq, inv = np.unique(c.x["name"][rows], return_inverse=True)
    inv = inv.reshape(-1)
    names = [_text(c.values[k]) for k in uniq.tolist()]
    aten = np.array([n.startswith("aten::") for n in names], bool)[inv] if names else np.zeros(0, bool)
    step = np.array([n.startswith(framework_ops.OPTIMIZER_STEP) for n in names], bool)[inv] if names else aten
    starts = [ns / 1000 for ns in c.x["ts"][rows[aten]].tolist()]  # int / int: the float nearest the decimal text
    ends = [t + d for t, d in zip(starts, c.x["dur"][rows[aten]].tolist())]
    return {**framework_ops.sequence([names[i] for i in inv[aten].tolist()], starts, ends),
            **framework_ops.optimizer_steps([names[i] for i in inv[step].tolist()])}


def _text(v: Any) -> str:
    return "" if v is None else str(v)


def _pair(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One int64 per (pid, tid) code pair."""
    return (pid.astype(np.int64) << 32) | tid.astype(np.int64)


def text_codes(raw: np.ndarray, text: Callable[[int], str]) -> Codes:
    """A text column of interned codes `raw`, `text(code)` its string; values in order of first appearance."""
    if not len(raw):
        return Codes(np.zeros(0, np.int32), [])
    uniq, first, inv = np.unique(raw, return_index=True, return_inverse=True)
    final = np.empty(len(uniq), np.int32)
    index: dict[str, int] = {}
    for j in np.argsort(first, kind="stable").tolist():
        final[j] = index.setdefault(text(int(uniq[j])), len(index))
    return Codes(final[inv.reshape(-1)], list(index))


def _kernel_table(c: Columns, kidx: np.ndarray, kineto: bool, hardware: np.ndarray,
                  module_at: tuple[np.ndarray, list[str]] | None, host_at: np.ndarray) -> KernelTable:
    x, vals = c.x, c.values
    order = kidx[np.argsort(x["ts"][kidx], kind="stable")]
    n = len(order)
    names = x["name"][order]
    if kineto:
        def op_type(k: int) -> str:
            name = _text(vals[k])
            return name.replace("void ", "", 1).split("(")[0][:60] or name

        core = text_codes(x["cat"][order], lambda k: KINETO_DEVICE_CATS.get(_text(vals[k]), ""))
    else:
        def op_type(k: int) -> str:
            return type_from_name(_text(vals[k]))

        core = text_codes(np.where(hardware[order], x["task"][order], -1),
                          lambda k: "COMMUNICATION" if k < 0 else _text(vals[k]))
    return KernelTable(n, {
        "name": text_codes(names, lambda k: _text(vals[k])), "type": text_codes(names, op_type), "core": core,
        "module": text_codes(module_at[0][order], module_at[1].__getitem__) if module_at else Codes.constant("", n),
    }, {"start_ns": x["ts"][order], "stream": _streams(c, order), "host_op": host_at[order]},
        {"dur_us": x["dur"][order]})


def _streams(c: Columns, rows: np.ndarray) -> np.ndarray:
    """The stream of each row: its first stream arg, else its tid when that is a number."""
    arg, tid = c.x["stream"][rows], c.x["tid"][rows]
    uniq, inv = np.unique(tid, return_inverse=True)
    as_int = np.array([v if isinstance(v := c.values[k], int) else NO_INT for k in uniq.tolist()], np.int64)
    return np.where(arg == ABSENT, as_int[inv.reshape(-1)] if len(uniq) else NO_INT, arg)


def type_from_name(name: str) -> str:
    """`aclnnMatmul_MatMulV3_MatMulV3` -> `MatMulV3`, `trans_TransData_12` -> `TransData`, `Conv2D1` -> `Conv2D`."""
    if name.startswith("hcom_") and "__" in name:
        return name.split("__")[0] + "_"  # hcom_allReduce__586_0_1 -> hcom_allReduce_, as kernel_details types it
    parts = [p for p in name.split("_") if p and not p.isdigit()]
    last = parts[-1] if parts else name
    stripped = last.rstrip("0123456789")
    if stripped.endswith("V") or len(stripped) <= 2:
        return last  # MatMulV3, MaxPoolWithArgmaxV1: a version, not a counter
    return stripped


def _ends(c: Columns, rows: np.ndarray) -> np.ndarray:
    """End times (ns) of X rows: start plus the µs duration, truncated to ns as the profilers do."""
    return c.x["ts"][rows] + np.trunc(c.x["dur"][rows] * 1000).astype(np.int64)


class _ModulePaths:
    """The `nn.Module` path around a time on a thread: the names of the module spans open then, outermost first."""

    def __init__(self, c: Columns, pair: np.ndarray, rows: np.ndarray) -> None:
        starts, ends = c.x["ts"][rows].tolist(), _ends(c, rows).tolist()
        names = [_text(c.values[k])[len(MODULE):] for k in c.x["name"][rows].tolist()]
        self.by_thread: dict[int, list[tuple[int, int, str]]] = {}
        for key, s, e, name in zip(pair[rows].tolist(), starts, ends, names):
            self.by_thread.setdefault(key, []).append((s, e, name))
        for spans in self.by_thread.values():
            spans.sort()

    def paths(self, threads: np.ndarray, times: np.ndarray, index: dict[str, int]) -> np.ndarray:
        """The path at each (thread, time) as its code in `index` (which gets the new ones), in one sweep per thread."""
        out = [0] * len(times)
        order = np.lexsort((times, threads))
        keys, ts, order_list = threads[order].tolist(), times[order].tolist(), order.tolist()
        code = index.setdefault
        i = 0
        while i < len(order):
            key = keys[i]
            spans = self.by_thread.get(key, [])
            j, active, path, soonest = 0, [], 0, 1 << 63  # open spans, their path's code, the earliest end among them
            while i < len(order) and keys[i] == key:
                t = ts[i]
                if soonest < t or (j < len(spans) and spans[j][0] <= t):
                    while j < len(spans) and spans[j][0] <= t:
                        active.append(spans[j])
                        j += 1
                    active = [s for s in active if s[1] >= t]
                    text = ".".join(s[2] for s in active)
                    path = code(text, len(index))
                    soonest = min((s[1] for s in active), default=1 << 63)
                out[order_list[i]] = path
                i += 1
        return np.array(out, np.int64)


def _module_attribution(c: Columns, pair: np.ndarray, host: np.ndarray, modules: np.ndarray,
                        kernels: np.ndarray, flow_kernels: np.ndarray) -> tuple[np.ndarray, list[str]] | None:
    """Per X row, the `nn.Module` path (a code into the list returned, 0: none) around the framework op that launched
    it, through the flows; None when no kernel has one."""
    if not len(modules) or not len(kernels):
        return None
    x, f = c.x, c.f
    paths = _ModulePaths(c, pair, modules)
    index: dict[str, int] = {"": 0}
    s_rows = np.flatnonzero(f["start"])
    opened = paths.paths(_pair(f["pid"], f["tid"])[s_rows], f["ts"][s_rows], index)
    out = np.zeros(len(x["ts"]), np.int64)
    _through_flows(c, opened, out, flow_kernels)
    # Kineto links a kernel to its launching op by "External id" too.
    with_ext = host[x["ext"][host] != 0]
    if len(with_ext) and (x["ext"][kernels] != 0).any():
        at = paths.paths(pair[with_ext], x["ts"][with_ext], index)
        todo = kernels[out[kernels] == 0]
        j = _last_match(x["ext"][with_ext], x["ext"][todo])
        found = np.where(j >= 0, at[np.maximum(j, 0)], 0) if len(at) else np.zeros(len(todo), np.int64)
        out[todo] = np.where(found > 0, found, out[todo])
    return (out, list(index)) if out.any() else None


def _last_match(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """For each query, the position of the last of `keys` equal to it (-1: none), as a dict built from them would."""
    if not len(keys) or not len(queries):
        return np.full(len(queries), -1, np.int64)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    last = np.ones(len(order), bool)
    last[:-1] = ordered[1:] != ordered[:-1]
    uniq, pos = ordered[last], order[last]
    j = np.minimum(np.searchsorted(uniq, queries), len(uniq) - 1)
    return np.where(uniq[j] == queries, pos[j], -1)


def _through_flows(c: Columns, opened: np.ndarray, out: np.ndarray, flow_kernels: np.ndarray) -> None:
    """`out[kernel] = opened[s]` for each flow end on a kernel whose start `s` (same category and id; the last such
    start) has `opened >= 1`: the value at the launch, carried to the kernel (the last flow end wins)."""
    f = c.f
    key = _pair(f["cat"], f["id"])
    s_rows, f_rows = np.flatnonzero(f["start"]), np.flatnonzero(~f["start"])
    valid = np.flatnonzero(opened >= 1)
    j = _last_match(key[s_rows][valid], key[f_rows])
    hit = np.flatnonzero((j >= 0) & (flow_kernels >= 0))
    if not len(hit):
        return
    kernels, values = flow_kernels[hit], opened[valid[j[hit]]]
    last = _last_match(kernels, np.unique(kernels))  # a kernel reached by several flow ends takes the last
    out[kernels[last]] = values[last]


def _flow_kernels(c: Columns, pair: np.ndarray, kernels: np.ndarray) -> np.ndarray:
    """The X row of the kernel each flow end (`f`) lands on, by thread and start (-1: none; the last of equal keys)."""
    f = c.f
    f_rows = np.flatnonzero(~f["start"])
    if not len(f_rows) or not len(kernels):
        return np.full(len(f_rows), -1, np.int64)
    qpair, qts = _pair(f["pid"], f["tid"])[f_rows], f["ts"][f_rows]
    kkey, qkey = _thread_time_keys(pair[kernels], c.x["ts"][kernels], qpair, qts)
    order = np.argsort(kkey, kind="stable")  # equal keys keep file order: the last one wins, as a dict would
    kkey = kkey[order]
    j = np.searchsorted(kkey, qkey, side="right") - 1
    hit = (j >= 0) & (kkey[np.maximum(j, 0)] == qkey)
    return np.where(hit, kernels[order[np.maximum(j, 0)]], -1)


def _thread_time_keys(apair: np.ndarray, ats: np.ndarray, bpair: np.ndarray, bts: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """One sortable key per (thread, time) of two sets, equal where both are: a thread's rank times the time span
    plus the time, or the rank of the pair among both sets where that would not fit 63 bits."""
    threads, inv = np.unique(np.concatenate([apair, bpair]), return_inverse=True)
    ts = np.concatenate([ats, bts])
    t0, span = int(ts.min()), int(ts.max()) - int(ts.min()) + 1
    if len(threads) * span < (1 << 62):
        key = inv.reshape(-1).astype(np.int64) * span + (ts - t0)
    else:  # rank the (thread, time) pairs themselves
        order = np.lexsort((ts, inv.reshape(-1)))
        pairs = np.stack([inv.reshape(-1)[order], ts[order]], axis=1)
        new = np.ones(len(order), bool)
        new[1:] = (pairs[1:] != pairs[:-1]).any(axis=1)
        key = np.empty(len(order), np.int64)
        key[order] = np.cumsum(new) - 1
    return key[:len(apair)], key[len(apair):]


def _innermost(c: Columns, pair: np.ndarray, calls: np.ndarray, qpair: np.ndarray, qts: np.ndarray) -> np.ndarray:
    """For each (thread, time) query, the host-call index of the innermost call open then on that thread (-1: none)."""
    out = np.full(len(qts), -1, np.int64)
    if not len(calls) or not len(qts):
        return out
    cpair, starts, ends = pair[calls], c.x["ts"][calls], _ends(c, calls)
    by_call = np.lexsort((-ends, starts, cpair))  # per thread by start, the longer (outer) first at equal starts
    by_query = np.lexsort((qts, qpair))
    cp, cs, ce, ci = cpair[by_call].tolist(), starts[by_call].tolist(), ends[by_call].tolist(), by_call.tolist()
    j, n = 0, len(ci)
    thread, stack = None, []  # the calls open at the last query time, outermost first: (end, index)
    for q, key, t in zip(by_query.tolist(), qpair[by_query].tolist(), qts[by_query].tolist()):
        if key != thread:
            thread, stack = key, []
            while j < n and cp[j] < key:
                j += 1
        while j < n and cp[j] == key and cs[j] <= t:
            while stack and stack[-1][0] < cs[j]:
                stack.pop()
            stack.append((ce[j], ci[j]))
            j += 1
        while stack and stack[-1][0] < t:
            stack.pop()
        if stack:
            out[q] = stack[-1][1]
    return out


def _host_attribution(c: Columns, pair: np.ndarray, calls: np.ndarray, kernels: np.ndarray,
                      flow_kernels: np.ndarray) -> np.ndarray:
    """Per X row, the host-call index (a position in `calls`) of the framework op that launched that kernel: the
    innermost op open where its flow starts (`s`, torch_npu's async_npu, Kineto's ac2g), else Kineto's External id."""
    x, f = c.x, c.f
    out = np.full(len(x["ts"]), -1, np.int64)
    if not len(calls) or not len(kernels):
        return out
    s_rows = np.flatnonzero(f["start"])
    opened = _innermost(c, pair, calls, _pair(f["pid"], f["tid"])[s_rows], f["ts"][s_rows])
    shifted = out + 1  # _through_flows carries values >= 1
    _through_flows(c, opened + 1, shifted, flow_kernels)
    out = shifted - 1
    ext = x["ext"][calls]
    if (ext != 0).any() and (x["ext"][kernels] != 0).any():
        has = np.flatnonzero(ext != 0)
        todo = kernels[(out[kernels] < 0) & (x["ext"][kernels] != 0)]
        j = _last_match(ext[has], x["ext"][todo])
        out[todo] = np.where(j >= 0, has[np.maximum(j, 0)], -1)
    return out


def _host_calls(c: Columns, pair: np.ndarray, calls: np.ndarray, threads: dict[tuple[Any, Any], str]) -> KernelTable:
    """The host-call table: every framework op in start order, with its name, thread, start (ns) and duration."""
    if not len(calls):
        return KernelTable(0)
    vals = c.values
    keys = pair[calls]
    uniq, inv = np.unique(keys, return_inverse=True)
    tids = [_text(vals[k & 0xFFFFFFFF]) for k in uniq.tolist()]
    names = [threads.get((vals[k >> 32], vals[k & 0xFFFFFFFF]), "") or f"thread {tid}"
             for k, tid in zip(uniq.tolist(), tids)]
    shared = {n for n in names if names.count(n) > 1}  # a name several threads have gets each one's id
    labels = [f"{n} ({tid})" if n in shared else n for n, tid in zip(names, tids)]
    return KernelTable(len(calls), {"name": text_codes(c.x["name"][calls], lambda k: _text(vals[k])),
                                    "thread": Codes(inv.reshape(-1).astype(np.int32), labels)},
                       {"start_ns": c.x["ts"][calls]}, {"dur_us": c.x["dur"][calls]})


def _host_ops(c: Columns, pair: np.ndarray, host: np.ndarray) -> tuple[HostOp, ...]:
    """Framework ops folded by name, with self time (total minus nested ops on the same thread)."""
    if not len(host):
        return ()
    x, vals = c.x, c.values
    uniq, first, inv = np.unique(pair[host], return_index=True, return_inverse=True)
    rank = np.empty(len(uniq), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))
    thread = rank[inv.reshape(-1)]
    t0s, ends = x["ts"][host], _ends(c, host)
    order = np.lexsort((-ends, t0s, thread))  # per thread by start, the outer op first at equal starts
    total = (ends - t0s)[order]
    child = _child_times(thread[order].tolist(), t0s[order].tolist(), ends[order].tolist(), closed := [])
    codes, at = np.unique(x["name"][host][order], return_inverse=True)
    group: dict[str, int] = {}  # codes of one text (None and "") are one name
    name_at = np.array([group.setdefault(_text(vals[v]), len(group)) for v in codes.tolist()], np.int64)[at.reshape(-1)]
    text, k = list(group), len(group)
    calls = np.bincount(name_at, minlength=k)
    self_ns = np.bincount(name_at, np.maximum(total - child, 0).astype(np.float64), minlength=k)
    total_ns = np.bincount(name_at, total.astype(np.float64), minlength=k)  # exact: integers below 2**53
    first_push = np.unique(name_at, return_index=True)[1]  # a name's call stack: its first op in sweep order
    first_close = np.full(k, len(order), np.int64)  # ties in self time keep the order the names first closed
    closing = name_at[np.asarray(closed, np.int64)]
    np.minimum.at(first_close, closing, np.arange(len(closing)))
    stacks = x["stack"][host][order][first_push].tolist()
    return tuple(HostOp(text[i], int(calls[i]), self_ns[i] / 1000, total_ns[i] / 1000, 0.0, 0.0,
                        _text(vals[stacks[i]]).replace("\r", "").replace(";\n", "\n").strip())
                 for i in np.lexsort((first_close, -self_ns)).tolist())


def _child_times(threads: list[int], starts: list[int], ends: list[int], closed: list[int]) -> np.ndarray:
    """Per op (sorted by thread, start, outer first), the time of the ops directly nested in it; `closed` gets the
    ops in the order they close (a stack sweep: an op closes when one starts at or after its end)."""
    child = [0] * len(starts)
    stack: list[tuple[int, int]] = []  # (end, op) of the open ops, outermost first
    pop, push, close = stack.pop, stack.append, closed.append
    thread = None
    for i, (th, t0, end) in enumerate(zip(threads, starts, ends)):
        if th != thread:
            while stack:
                close(pop()[1])
            thread = th
        while stack and stack[-1][0] <= t0:
            close(pop()[1])
        if stack:
            child[stack[-1][1]] += end - t0
        push((end, i))
    while stack:
        close(pop()[1])
    return np.array(child, np.int64)
