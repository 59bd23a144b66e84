"""What a coarse-to-fine capture (`live.coarse`) makes of its passes: the events' rows for the suspects, the window's
widening, and the replay completed from the module pass (`adopt_rest`, `merged`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ascend_tui.checks.suspects import first_bad_event, first_zeroed_event
from ascend_tui.graph.opgraph import op_node
from ascend_tui.live.capture import CaptureResult, SlotRef
from ascend_tui.live.coarse_pass import Event, StepRecorder

def event_rows(rec: StepRecorder, stats: Any) -> tuple[np.ndarray, ...]:
    """(event index, min, max, NaN count, Inf count) per measured output of every event with a node, in row order."""
    event_of = {ev.node: ev.index for ev in rec.events if ev.node}
    found = [(event_of[key[0]], i) for i, key in enumerate(stats.keys()) if key[0] in event_of]
    if not found:
        empty = np.zeros(0)
        return empty, empty, empty, empty, empty
    idx, at = np.asarray(found).T
    return (idx, stats.column("min")[at], stats.column("max")[at], stats.column("nan_count")[at],
            stats.column("inf_count")[at])


def first_bad(rec: StepRecorder, stats: Any, saturation_limit: float | None) -> int | None:
    """`first_bad_event` over the events' rows (`event_rows`), mapped to their events only when some row of the table
    is bad: a clean step's ~570 rows are judged at once and need no map (0.25 ms of a Llama step's investigation)."""
    if not len(stats):
        return None
    rows = (stats.column("min"), stats.column("max"), stats.column("nan_count"), stats.column("inf_count"))
    if first_bad_event(np.zeros(len(stats), dtype=np.int64), *rows, saturation_limit=saturation_limit) is None:
        return None  # no row at all is bad, so no event's is
    return first_bad_event(*event_rows(rec, stats), saturation_limit=saturation_limit)


def zeroed(target: tuple[StepRecorder, Any], reference: tuple[StepRecorder, Any]) -> int | None:
    """The first event whose output the target zeroed where the reference did not (`first_zeroed_event`)."""
    (rt, st), (rr, sr) = target, reference
    idx, zeros, ref_zeros, numel = [], [], [], []
    for et, er in zip(rt.events, rr.events):
        if not (et.node and er.node):
            continue
        for slot in range(len(rt.graph.node(et.node).outputs)):
            a = st.get(et.node, slot) if (et.node, slot) in st else None
            b = sr.get(er.node, slot) if (er.node, slot) in sr else None
            if a is not None and b is not None and a.numel == b.numel:
                idx.append(et.index)
                zeros.append(a.zero_count)
                ref_zeros.append(b.zero_count)
                numel.append(a.numel)
    if not idx:
        return None
    return first_zeroed_event(np.asarray(idx), np.asarray(zeros, dtype=float), np.asarray(ref_zeros, dtype=float),
                              np.asarray(numel, dtype=float))


def widened(events: list[Event], window: tuple[int, int]) -> tuple[int, int]:
    """The window started where the call enclosing the current start began (backward: the backward's start)."""
    start, end = window
    target = events[end]
    if target.phase == "backward":
        first = next((e.index for e in events if e.phase == "backward"), end)
        return (first - 1 if start >= first else -1), end
    probe = events[start] if start >= 0 else None
    while probe is not None:
        parent = next((e for e in events[probe.index + 1:] if e.phase == "forward" and e.entered_at <= probe.entered_at
                       and _encloses(e.module, probe.module)), None)
        if parent is None:
            return -1, end
        if parent.entered_at - 1 < start:
            return parent.entered_at - 1, end
        probe = parent
    return -1, end


def _encloses(outer: str, inner: str) -> bool:
    return outer == "" or inner.startswith(outer + ".") or outer == inner


def window_inputs_bad(rec: StepRecorder, stats: Any) -> bool:
    """Whether a tensor the window read from outside (a placeholder) already held NaN or Inf."""
    for node in rec.graph.nodes:
        if node.is_placeholder:
            for slot in range(max(1, len(node.outputs))):
                if (node.id, slot) in stats:
                    r = stats.get(node.id, slot)
                    if r.nan_count > 0 or r.inf_count > 0 or not (np.isfinite(r.min) and np.isfinite(r.max)):
                        return True
    return False


def adopt_rest(replay: StepRecorder, first: StepRecorder) -> bool:
    """Give a replay that ran only part of the step (forward only, or stopped where its window closed) the rest from
    the module pass: its later events, their module-level nodes (an edge from a module the replay recorded operator
    by operator now comes from the operator that made that output) and the parameter gradients. False when the
    replay's events are not the module pass's first ones (the step does something else when run again)."""
    n = len(replay.events)
    fe = first.events
    if n > len(fe) or any(a.module != b.module or a.phase != b.phase for a, b in zip(replay.events, fe)):
        return False
    remap: dict[str, list[SlotRef]] = {fe[i].node: refs for i, refs in replay.window_outputs.items() if fe[i].node}
    graph, target = first.graph, replay.graph
    for ev in fe[n:]:
        replay.events.append(ev)
        if not ev.node:
            continue
        _copy_node(replay, graph.node(ev.node))
        for edge in graph.producers(ev.node):
            refs = remap.get(edge.src)
            if refs is not None:
                if edge.out_slot < len(refs):
                    target.add_edge(refs[edge.out_slot].node, ev.node, refs[edge.out_slot].slot, edge.in_slot)
                continue
            if edge.src not in target:
                source = graph.node(edge.src)
                if not source.is_placeholder:
                    continue
                _copy_node(replay, source)
            target.add_edge(edge.src, ev.node, edge.out_slot, edge.in_slot)
    for node in graph.nodes:
        if node.id.startswith("grad:") and node.id not in target:
            _copy_node(replay, node)
    if replay.stopped:
        replay.outputs = first.outputs  # the same step's outputs: the replay stopped before making them
    return True


def _copy_node(rec: StepRecorder, node: Any) -> None:
    index = -1 if node.is_placeholder else rec.op_count
    rec.graph.add_node(op_node(node.id, node.op_type, node.module, index, node.kind, node.inputs, node.outputs,
                               node.source, node.phase, node.module_class, node.attrs))
    if index >= 0:
        rec.op_count += 1


def merged(first: tuple[StepRecorder, Any], replay: tuple[StepRecorder, Any]) -> CaptureResult:
    """The replay's capture with its module nodes' statistics and histograms taken from the module pass (the same
    events of the same step: measuring them twice would double the cost of the replay)."""
    from ascend_tui.evidence import HIST_BINS, STAT_FIELDS, HistogramTable, StatsTable

    (r1, s1), (r2, s2) = first, replay
    h1, h2 = r1.finish_histograms(), r2.finish_histograms()
    same: dict[str, str] = {e2.node: e1.node for e1, e2 in zip(r1.events, r2.events) if e1.node and e2.node}
    same.update({n.id: n.id for n in r2.graph.nodes if n.id.startswith("grad:")
                 or (n.is_placeholder and n.kind in ("input", "param", "buffer"))})  # named: the same tensor
    copy_of = dict(r2.stat_rows.copies)  # views of a module's output hold its values: the module pass's row
    pos1, pos2 = _positions(s1), _positions(s2)
    hist1, hist2 = h1._rows, h2._rows  # histogram rows by key: gathered at the end, not copied one key at a time
    keys, rows1, rows2, hkeys, hrows, hfirst = [], [], [], [], [], []
    for node in r2.graph.nodes:
        for slot in range(max(1, len(node.outputs))):
            key, src = (node.id, slot), (same.get(node.id, ""), slot)
            hop, seen = key, 0
            while hop not in pos2 and hop in copy_of and seen < 64:  # a view of a view of a module's output
                hop, seen = copy_of[hop], seen + 1
            if hop != key and hop not in pos2 and hop[0] in same:
                src = (same[hop[0]], hop[1])
            i = pos2.get(key)
            j = pos1.get(src) if i is None else None
            if i is not None or j is not None:
                keys.append(key)
                rows2.append(-1 if i is None else i)
                rows1.append(-1 if j is None else j)
            h = hist2.get(key)
            if h is None and src[0]:
                h = hist1.get(src)
                if h is not None:
                    hkeys.append(key)
                    hrows.append(h)
                    hfirst.append(True)
            elif h is not None:
                hkeys.append(key)
                hrows.append(h)
                hfirst.append(False)
    stats = StatsTable()
    if keys:
        a, b = np.asarray(rows2), np.asarray(rows1)
        data = np.empty((len(keys), len(STAT_FIELDS)), dtype=np.float64)
        data[a >= 0] = _matrix(s2)[a[a >= 0]]
        data[b >= 0] = _matrix(s1)[b[b >= 0]]
        stats.add_many(keys, data)
    hists = HistogramTable()
    if hkeys:
        at, from1 = np.asarray(hrows, dtype=np.int64), np.asarray(hfirst, dtype=bool)
        rows = np.empty((len(hkeys), HIST_BINS + 1), dtype=np.int64)
        for table, take in ((h1, from1), (h2, ~from1)):  # an empty table holds no array (pass 1 may sample none)
            if take.any():
                rows[take] = table._data[at[take]]
        hists = HistogramTable(hkeys, rows)
    return CaptureResult(r2.graph, stats, r2.outputs, r2.op_count, recorder=r2, histograms=hists)


def _positions(table: Any) -> dict[tuple[str, int], int]:
    return {k: i for i, k in enumerate(table.keys())}  # a StatsTable's keys are in row order


def _matrix(table: Any) -> np.ndarray:
    from ascend_tui.evidence import STAT_FIELDS

    return np.column_stack([table.column(f) for f in STAT_FIELDS]) if len(table) else \
        np.zeros((0, len(STAT_FIELDS)))


def result_of(rec: StepRecorder, stats: Any) -> CaptureResult:
    return CaptureResult(rec.graph, stats, rec.outputs, rec.op_count, recorder=rec, histograms=rec.finish_histograms())
