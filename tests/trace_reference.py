"""Today's trace reader before the streaming one (json.load, then a walk over dicts): the reference the
streaming reader's result is compared with on every fixture trace. Test-only; never imported by the package."""

from __future__ import annotations

import bisect
import json
import threading
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ascend_tui.errors import Cancelled, InputError
from ascend_tui.readers.profiler import framework_ops
from ascend_tui.readers.profiler.csv_tables import to_ns
from ascend_tui.graph.profile import NO_INT, Codes, HostOp, KernelTable, Profile, Span

DEVICE_PROCESSES = ("Ascend Hardware", "HCCL", "Communication")
KINETO_DEVICE_CATS = {"kernel": "GPU", "gpu_memcpy": "MEMCPY", "gpu_memset": "MEMSET"}
OVERLAP = "Overlap Analysis"


def read_events(path: Path) -> list[dict[str, Any]]:
    """The event list of a trace file, bare array or `{"traceEvents": [...]}`."""
    try:
        with path.open("rb") as fh:
            data = json.load(fh)
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not a text file (byte {exc.start} is not UTF-8)") from None
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON: {exc.msg}", where=f"{exc.lineno}:{exc.colno}") from None
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events[:100]):
        raise InputError(path, "not a Chrome trace (expected a list of events or an object with traceEvents)")
    return events


def _ns(value: Any) -> int:
    return to_ns(value) if isinstance(value, str) else int(round(float(value) * 1000))


def read_trace(path: Path, cancel: threading.Event | None = None) -> Profile:
    """A `Profile` of a trace file: device kernels, framework ops, overlap/step spans."""
    events = read_events(path)
    try:
        return profile_of_events(events, cancel)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(path, f"malformed trace event: {type(exc).__name__}: {exc}") from None


def profile_of_events(events: list[dict[str, Any]], cancel: threading.Event | None = None) -> Profile:
    """The `Profile` of a list of Chrome-trace events."""
    procs: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e.get("pid")] = str((e.get("args") or {}).get("name", ""))
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e.get("pid"), e.get("tid"))] = str((e.get("args") or {}).get("name", ""))
    xs = [e for e in events if e.get("ph") == "X" and "ts" in e]
    if cancel is not None and cancel.is_set():
        raise Cancelled()
    kineto = any(e.get("cat") in KINETO_DEVICE_CATS for e in xs)
    kernels, host, modules_of, spans = [], [], [], []
    for e in xs:
        proc = procs.get(e.get("pid"), "")
        cat = e.get("cat")
        if cat in KINETO_DEVICE_CATS or (not kineto and proc in DEVICE_PROCESSES and
                                         (proc == "Ascend Hardware" or "Communication" in threads.get(
                                             (e.get("pid"), e.get("tid")), ""))):
            kernels.append(e)
        elif cat == "cpu_op":
            host.append(e)
        elif cat == "python_function" and str(e.get("name", "")).startswith("nn.Module: "):
            modules_of.append(e)
        elif proc == OVERLAP:
            spans.append(e)
        elif cat in ("user_annotation", "gpu_user_annotation") and str(e.get("name", "")).startswith("ProfilerStep#"):
            spans.append(e)
    origin = min((_ns(e["ts"]) for e in xs), default=0)
    module_at = _module_attribution(host, modules_of, events, kernels)
    calls = sorted(host, key=lambda e: _ns(e["ts"]))
    host_at = _host_attribution(calls, events, kernels)
    table = _kernel_table(kernels, procs, threads, module_at, host_at)
    step_spans = tuple(Span(OVERLAP if procs.get(e.get("pid")) == OVERLAP else "Step",
                            threads.get((e.get("pid"), e.get("tid")), "") if procs.get(e.get("pid")) == OVERLAP
                            else str(e.get("name", "")), (_ns(e["ts"]) - origin) / 1000, float(e.get("dur", 0)))
                       for e in sorted(spans, key=lambda e: _ns(e["ts"])))
    return Profile("kineto" if kineto else "trace", table, host_ops=_host_ops(host), spans=step_spans,
                   extra={"trace_events": len(events), **framework_ops.of_events(host)},  # affinity-API rules
                   host_calls=_host_calls(calls, threads))


def _kernel_table(kernels: list[dict[str, Any]], procs: dict[Any, str], threads: dict[tuple[Any, Any], str],
                  module_at: dict[int, str], host_at: dict[int, int]) -> KernelTable:
    kernels = sorted(kernels, key=lambda e: _ns(e["ts"]))
    n = len(kernels)

    def core(e: dict[str, Any]) -> str:
        if e.get("cat") in KINETO_DEVICE_CATS:
            return KINETO_DEVICE_CATS[e["cat"]]
        if procs.get(e.get("pid")) != "Ascend Hardware":
            return "COMMUNICATION"
        return str((e.get("args") or {}).get("Task Type", ""))

    def op_type(e: dict[str, Any]) -> str:
        name = str(e.get("name", ""))
        if e.get("cat") in KINETO_DEVICE_CATS:
            return name.replace("void ", "", 1).split("(")[0][:60] or name
        return type_from_name(name)

    def stream(e: dict[str, Any]) -> int:
        a = e.get("args") or {}
        for key in ("Physic Stream Id", "Stream Id", "stream"):
            if key in a:
                return int(a[key])
        return int(e["tid"]) if isinstance(e.get("tid"), int) else NO_INT

    return KernelTable(n, {
        "name": Codes.of(str(e.get("name", "")) for e in kernels), "type": Codes.of(map(op_type, kernels)),
        "core": Codes.of(map(core, kernels)), "module": Codes.of(module_at.get(id(e), "") for e in kernels),
    }, {"start_ns": np.fromiter((_ns(e["ts"]) for e in kernels), np.int64, n),
        "stream": np.fromiter(map(stream, kernels), np.int64, n),
        "host_op": np.fromiter((host_at.get(id(e), -1) for e in kernels), np.int64, n)},
        {"dur_us": np.fromiter((float(e.get("dur", 0)) for e in kernels), np.float64, n)})


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


def _module_attribution(host: list[dict[str, Any]], modules: list[dict[str, Any]], events: list[dict[str, Any]],
                        kernels: list[dict[str, Any]]) -> dict[int, str]:
    """id(kernel event) -> the `nn.Module` path around the framework op that launched it, through the flows."""
    if not modules or not kernels:
        return {}
    by_thread: dict[tuple[Any, Any], list[tuple[int, int, str]]] = {}
    for m in modules:
        t0 = _ns(m["ts"])
        by_thread.setdefault((m.get("pid"), m.get("tid")), []).append(
            (t0, t0 + int(float(m.get("dur", 0)) * 1000), str(m["name"])[len("nn.Module: "):]))
    for spans in by_thread.values():
        spans.sort()

    def module_path(pid: Any, tid: Any, t: int) -> str:
        spans = by_thread.get((pid, tid), [])
        return ".".join(name for s, end, name in spans[:bisect.bisect_right(spans, (t, 1 << 62, ""))] if end >= t)

    starts: dict[Any, str] = {}
    for e in events:
        if e.get("ph") == "s" and "ts" in e:
            path = module_path(e.get("pid"), e.get("tid"), _ns(e["ts"]))
            if path:
                starts[(e.get("cat"), e.get("id"))] = path
    out: dict[int, str] = {}
    by_key = {(k.get("pid"), k.get("tid"), _ns(k["ts"])): k for k in kernels}
    for e in events:
        if e.get("ph") == "f" and (e.get("cat"), e.get("id")) in starts:
            k = by_key.get((e.get("pid"), e.get("tid"), _ns(e["ts"])))
            if k is not None:
                out[id(k)] = starts[(e.get("cat"), e.get("id"))]
    # Kineto links a kernel to its launching op by "External id" too.
    ext = {(h.get("args") or {}).get("External id"): module_path(h.get("pid"), h.get("tid"), _ns(h["ts"]))
           for h in host if (h.get("args") or {}).get("External id") is not None}
    for k in kernels:
        if id(k) not in out:
            path = ext.get((k.get("args") or {}).get("External id"))
            if path:
                out[id(k)] = path
    return out


def _host_attribution(calls: list[dict[str, Any]], events: list[dict[str, Any]], kernels: list[dict[str, Any]]
                      ) -> dict[int, int]:
    """id(kernel event) -> index in `calls` of the innermost host op open where a flow into the kernel starts, else
    the host op of the kernel's External id."""
    by_thread: dict[tuple[Any, Any], list[tuple[int, int, int]]] = {}
    for i, h in enumerate(calls):
        t0 = _ns(h["ts"])
        by_thread.setdefault((h.get("pid"), h.get("tid")), []).append((t0, t0 + int(float(h.get("dur", 0)) * 1000), i))

    def innermost(pid: Any, tid: Any, t: int) -> int | None:
        open_ = [(s, -e, i) for s, e, i in by_thread.get((pid, tid), []) if s <= t <= e]
        return max(open_)[2] if open_ else None

    starts: dict[Any, int] = {}
    for e in events:
        if e.get("ph") == "s" and "ts" in e:
            h = innermost(e.get("pid"), e.get("tid"), _ns(e["ts"]))
            if h is not None:
                starts[(e.get("cat"), e.get("id"))] = h
    out: dict[int, int] = {}
    by_key = {(k.get("pid"), k.get("tid"), _ns(k["ts"])): k for k in kernels}
    for e in events:
        if e.get("ph") == "f" and "ts" in e and (e.get("cat"), e.get("id")) in starts:
            k = by_key.get((e.get("pid"), e.get("tid"), _ns(e["ts"])))
            if k is not None:
                out[id(k)] = starts[(e.get("cat"), e.get("id"))]
    ext = {(h.get("args") or {}).get("External id"): i for i, h in enumerate(calls)
           if (h.get("args") or {}).get("External id") is not None}
    for k in kernels:
        e_id = (k.get("args") or {}).get("External id")
        if id(k) not in out and e_id is not None:
            out[id(k)] = ext.get(e_id, -1)
    return out


def _host_calls(calls: list[dict[str, Any]], threads: dict[tuple[Any, Any], str]) -> KernelTable:
    """Every host op in start order: name, thread (its name; with its id where several threads share it)."""
    keys = sorted({(h.get("pid"), h.get("tid")) for h in calls}, key=repr)
    names = {k: threads.get(k, "") or f"thread {k[1]}" for k in keys}
    shared = {n for n in names.values() if list(names.values()).count(n) > 1}
    label = {k: f"{n} ({k[1]})" if n in shared else n for k, n in names.items()}
    n = len(calls)
    return KernelTable(n, {"name": Codes.of(str(h.get("name", "")) for h in calls),
                           "thread": Codes.of(label[(h.get("pid"), h.get("tid"))] for h in calls)},
                       {"start_ns": np.fromiter((_ns(h["ts"]) for h in calls), np.int64, n)},
                       {"dur_us": np.fromiter((float(h.get("dur", 0)) for h in calls), np.float64, n)})


def _host_ops(host: Iterable[dict[str, Any]]) -> tuple[HostOp, ...]:
    """Framework ops folded by name, with self time (total minus nested ops on the same thread)."""
    by_thread: dict[tuple[Any, Any], list[tuple[int, int, str, dict[str, Any]]]] = {}
    for e in host:
        t0 = _ns(e["ts"])
        by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(
            (t0, -(t0 + int(float(e.get("dur", 0)) * 1000)), str(e.get("name", "")), e))
    acc: dict[str, list[float]] = {}
    stacks: dict[str, str] = {}
    for evs in by_thread.values():
        evs.sort(key=lambda x: (x[0], x[1]))
        open_: list[list[Any]] = []  # [end, name, child time]
        for t0, neg_end, name, e in evs:
            end = -neg_end
            while open_ and open_[-1][0] <= t0:
                _close(open_.pop(), acc)
            if open_:
                open_[-1][2] += end - t0
            open_.append([end, name, 0, end - t0])
            stacks.setdefault(name, str((e.get("args") or {}).get("Call stack", "")))
        while open_:
            _close(open_.pop(), acc)
    return tuple(HostOp(name, int(v[0]), v[1] / 1000, v[2] / 1000, 0.0, 0.0,
                        stacks.get(name, "").replace("\r", "").replace(";\n", "\n").strip())
                 for name, v in sorted(acc.items(), key=lambda kv: -kv[1][1]))


def _close(frame: list[Any], acc: dict[str, list[float]]) -> None:
    end, name, child, total = frame
    cur = acc.setdefault(name, [0, 0.0, 0.0])
    cur[0] += 1
    cur[1] += max(total - child, 0)
    cur[2] += total
