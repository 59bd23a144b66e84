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
from ascend_tui.readers.parse.json_events import BadPiece, Ending, decoded_pieces
from ascend_tui.readers.profiler import framework_ops
from ascend_tui.readers.profiler import trace_links as links
from ascend_tui.readers.profiler.trace_columns import ABSENT, Columns, Keep, decode
from ascend_tui.readers.profiler.trace_links import MODULE, end_ns, text_of, thread_pair

# A piece's structs (~1.4x its bytes, over 8 objects an event) stay in cache between decoding and the columns pass
# when the block is 2 MB; at 8 MB the columns pass missed the last-level cache 6x as often (cachegrind, 8 MB LL).
BLOCK = 2 << 20
DEVICE_PROCESSES = ("Ascend Hardware", "HCCL", "Communication")
KINETO_DEVICE_CATS = {"kernel": "GPU", "gpu_memcpy": "MEMCPY", "gpu_memset": "MEMSET"}
OVERLAP = "Overlap Analysis"
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
        with paused_gc():  # the tables' lists and spans hold no cycles: collections would only rescan them (~25%)
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
    pair = thread_pair(pid, x["tid"])
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
    module = rest & (x["cat"] == code("python_function")) & where(x["name"], lambda v: text_of(v).startswith(MODULE))
    rest &= ~module
    overlap = rest & is_proc["overlap"]
    step = rest & ~overlap & np.isin(x["cat"], np.asarray([code(k) for k in STEP_CATS])) \
        & where(x["name"], lambda v: text_of(v).startswith("ProfilerStep#"))
    starts = ([int(x["ts"].min())] if len(x["ts"]) else []) + ([c.first] if c.first is not None else [])
    origin = min(starts, default=0)
    check_cancel(cancel)
    kernel_rows, host_rows = np.flatnonzero(kernel), np.flatnonzero(host)
    flow_kernels = links.flow_kernels(c, pair, kernel_rows)
    module_at = links.module_attribution(c, pair, host_rows, np.flatnonzero(module), kernel_rows, flow_kernels)
    calls = host_rows[np.argsort(x["ts"][host_rows], kind="stable")]  # the host-call table's rows, by start
    host_at = links.host_attribution(c, pair, calls, kernel_rows, flow_kernels)
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
    name_of = [text_of(vals[k]) for k in names.tolist()]
    label = np.where(overlap, inv_k.reshape(-1), len(thread_of) + inv_n.reshape(-1))
    text = np.array(thread_of + name_of, dtype=object)[label].tolist() if len(rows) else []
    track = np.where(overlap, OVERLAP, "Step").astype(object).tolist()
    starts = ((c.x["ts"][rows] - origin) / 1000).tolist()  # exact int ns differences, divided as Python would
    return tuple(map(Span, track, text, starts, c.x["dur"][rows].tolist()))


def _framework_ops(c: Columns, rows: np.ndarray) -> dict[str, Any]:
    """`framework_ops`' aten sequence and optimizer steps of the host rows (µs as the float of the trace's text)."""
    uniq, inv = np.unique(c.x["name"][rows], return_inverse=True)
    inv = inv.reshape(-1)
    names = [text_of(c.values[k]) for k in uniq.tolist()]
    aten = np.array([n.startswith("aten::") for n in names], bool)[inv] if names else np.zeros(0, bool)
    step = np.array([n.startswith(framework_ops.OPTIMIZER_STEP) for n in names], bool)[inv] if names else aten
    starts = [ns / 1000 for ns in c.x["ts"][rows[aten]].tolist()]  # int / int: the float nearest the decimal text
    ends = [t + d for t, d in zip(starts, c.x["dur"][rows[aten]].tolist())]
    return {**framework_ops.sequence([names[i] for i in inv[aten].tolist()], starts, ends),
            **framework_ops.optimizer_steps([names[i] for i in inv[step].tolist()])}


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
            name = text_of(vals[k])
            return name.replace("void ", "", 1).split("(")[0][:60] or name

        core = text_codes(x["cat"][order], lambda k: KINETO_DEVICE_CATS.get(text_of(vals[k]), ""))
    else:
        def op_type(k: int) -> str:
            return type_from_name(text_of(vals[k]))

        core = text_codes(np.where(hardware[order], x["task"][order], -1),
                          lambda k: "COMMUNICATION" if k < 0 else text_of(vals[k]))
    return KernelTable(n, {
        "name": text_codes(names, lambda k: text_of(vals[k])), "type": text_codes(names, op_type), "core": core,
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


def _host_calls(c: Columns, pair: np.ndarray, calls: np.ndarray, threads: dict[tuple[Any, Any], str]) -> KernelTable:
    """The host-call table: every framework op in start order, with its name, thread, start (ns) and duration."""
    if not len(calls):
        return KernelTable(0)
    vals = c.values
    keys = pair[calls]
    uniq, inv = np.unique(keys, return_inverse=True)
    tids = [text_of(vals[k & 0xFFFFFFFF]) for k in uniq.tolist()]
    names = [threads.get((vals[k >> 32], vals[k & 0xFFFFFFFF]), "") or f"thread {tid}"
             for k, tid in zip(uniq.tolist(), tids)]
    shared = {n for n in names if names.count(n) > 1}  # a name several threads have gets each one's id
    labels = [f"{n} ({tid})" if n in shared else n for n, tid in zip(names, tids)]
    return KernelTable(len(calls), {"name": text_codes(c.x["name"][calls], lambda k: text_of(vals[k])),
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
    t0s, ends = x["ts"][host], end_ns(c, host)
    order = np.lexsort((-ends, t0s, thread))  # per thread by start, the outer op first at equal starts
    total = (ends - t0s)[order]
    child = _child_times(thread[order].tolist(), t0s[order].tolist(), ends[order].tolist(), closed := [])
    codes, at = np.unique(x["name"][host][order], return_inverse=True)
    group: dict[str, int] = {}  # codes of one text (None and "") are one name
    grouped = np.array([group.setdefault(text_of(vals[v]), len(group)) for v in codes.tolist()], np.int64)
    name_at = grouped[at.reshape(-1)]
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
                        text_of(vals[stacks[i]]).replace("\r", "").replace(";\n", "\n").strip())
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
