"""How a trace's kernels link to what launched them: the `nn.Module` path and the framework op (host call) open
where each kernel's flow starts, found through flows (`s` -> `f`, by category and id) and Kineto's External id.

Module paths come from one sweep of the module spans per thread; a flow end finds its kernel by one
`searchsorted` over (thread, time) keys; a flow start finds its innermost open op by a stack sweep; the
values are carried along flows and ids by sorted-key lookups (`last_match`) that give what dicts built in
file order would (the last start and the last flow end win).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ascend_tui.readers.profiler.trace_columns import Columns

MODULE = "nn.Module: "


def text_of(v: Any) -> str:
    """The text of an interned value (None: "")."""
    return "" if v is None else str(v)


def thread_pair(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One int64 per pair of codes: (pid, tid), or (category, id) for flows."""
    return (pid.astype(np.int64) << 32) | tid.astype(np.int64)


def end_ns(c: Columns, rows: np.ndarray) -> np.ndarray:
    """End times (ns) of X rows: start plus the µs duration, truncated to ns as the profilers do."""
    return c.x["ts"][rows] + np.trunc(c.x["dur"][rows] * 1000).astype(np.int64)


class _ModulePaths:
    """The `nn.Module` path around a time on a thread: the names of the module spans open then, outermost first."""

    def __init__(self, c: Columns, pair: np.ndarray, rows: np.ndarray) -> None:
        starts, ends = c.x["ts"][rows].tolist(), end_ns(c, rows).tolist()
        names = [text_of(c.values[k])[len(MODULE):] for k in c.x["name"][rows].tolist()]
        self.by_thread: dict[int, list[tuple[int, int, str]]] = {}
        for key, s, e, name in zip(pair[rows].tolist(), starts, ends, names):
            self.by_thread.setdefault(key, []).append((s, e, name))
        for spans in self.by_thread.values():
            spans.sort()

    def paths(self, threads: np.ndarray, times: np.ndarray, index: dict[str, int]) -> np.ndarray:
        """The path at each (thread, time) as its code in `index` (which gets the new ones), in one sweep per thread."""
        out = np.zeros(len(times), np.int64)  # "" (code 0) on a thread without module spans
        swept = np.flatnonzero(np.isin(threads, np.fromiter(self.by_thread, np.int64, len(self.by_thread))))
        order = swept[np.lexsort((times[swept], threads[swept]))]
        keys, ts = threads[order].tolist(), times[order].tolist()
        found = [0] * len(order)
        code = index.setdefault
        i = 0
        while i < len(order):
            key = keys[i]
            spans = self.by_thread[key]
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
                found[i] = path
                i += 1
        out[order] = found
        return out


def module_attribution(c: Columns, pair: np.ndarray, host: np.ndarray, modules: np.ndarray,
                        kernels: np.ndarray, flow_kernels: np.ndarray) -> tuple[np.ndarray, list[str]] | None:
    """Per X row, the `nn.Module` path (a code into the list returned, 0: none) around the framework op that launched
    it, through the flows; None when no kernel has one."""
    if not len(modules) or not len(kernels):
        return None
    x, f = c.x, c.f
    paths = _ModulePaths(c, pair, modules)
    index: dict[str, int] = {"": 0}
    s_rows = np.flatnonzero(f["start"])
    opened = paths.paths(thread_pair(f["pid"], f["tid"])[s_rows], f["ts"][s_rows], index)
    out = np.zeros(len(x["ts"]), np.int64)
    _through_flows(c, opened, out, flow_kernels)
    # Kineto links a kernel to its launching op by "External id" too.
    with_ext = host[x["ext"][host] != 0]
    if len(with_ext) and (x["ext"][kernels] != 0).any():
        at = paths.paths(pair[with_ext], x["ts"][with_ext], index)
        todo = kernels[out[kernels] == 0]
        j = last_match(x["ext"][with_ext], x["ext"][todo])
        found = np.where(j >= 0, at[np.maximum(j, 0)], 0) if len(at) else np.zeros(len(todo), np.int64)
        out[todo] = np.where(found > 0, found, out[todo])
    return (out, list(index)) if out.any() else None


def last_match(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
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
    key = thread_pair(f["cat"], f["id"])
    s_rows, f_rows = np.flatnonzero(f["start"]), np.flatnonzero(~f["start"])
    valid = np.flatnonzero(opened >= 1)
    j = last_match(key[s_rows][valid], key[f_rows])
    hit = np.flatnonzero((j >= 0) & (flow_kernels >= 0))
    if not len(hit):
        return
    kernels, values = flow_kernels[hit], opened[valid[j[hit]]]
    last = last_match(kernels, np.unique(kernels))  # a kernel reached by several flow ends takes the last
    out[kernels[last]] = values[last]


def flow_kernels(c: Columns, pair: np.ndarray, kernels: np.ndarray) -> np.ndarray:
    """The X row of the kernel each flow end (`f`) lands on, by thread and start (-1: none; the last of equal keys)."""
    f = c.f
    f_rows = np.flatnonzero(~f["start"])
    if not len(f_rows) or not len(kernels):
        return np.full(len(f_rows), -1, np.int64)
    qpair, qts = thread_pair(f["pid"], f["tid"])[f_rows], f["ts"][f_rows]
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
    if not len(calls) or not len(qts):
        return np.full(len(qts), -1, np.int64)
    out = [-1] * len(qts)
    cpair, starts, ends = pair[calls], c.x["ts"][calls], end_ns(c, calls)
    by_call = np.lexsort((-ends, starts, cpair))  # per thread by start, the longer (outer) first at equal starts
    swept = np.flatnonzero(np.isin(qpair, cpair))  # a query on a thread without calls finds none
    by_query = swept[np.lexsort((qts[swept], qpair[swept]))]
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
    return np.array(out, np.int64)


def host_attribution(c: Columns, pair: np.ndarray, calls: np.ndarray, kernels: np.ndarray,
                      flow_kernels: np.ndarray) -> np.ndarray:
    """Per X row, the host-call index (a position in `calls`) of the framework op that launched that kernel: the
    innermost op open where its flow starts (`s`, torch_npu's async_npu, Kineto's ac2g), else Kineto's External id."""
    x, f = c.x, c.f
    out = np.full(len(x["ts"]), -1, np.int64)
    if not len(calls) or not len(kernels):
        return out
    s_rows = np.flatnonzero(f["start"])
    opened = _innermost(c, pair, calls, thread_pair(f["pid"], f["tid"])[s_rows], f["ts"][s_rows])
    shifted = out + 1  # _through_flows carries values >= 1
    _through_flows(c, opened + 1, shifted, flow_kernels)
    out = shifted - 1
    ext = x["ext"][calls]
    if (ext != 0).any() and (x["ext"][kernels] != 0).any():
        has = np.flatnonzero(ext != 0)
        todo = kernels[(out[kernels] < 0) & (x["ext"][kernels] != 0)]
        j = last_match(ext[has], x["ext"][todo])
        out[todo] = np.where(j >= 0, has[np.maximum(j, 0)], -1)
    return out
