"""Lay the evidence of one investigation (a dump, a profile, a sanitizer log) on another's graph, by name.

`ascend-tui open model.onnx dump/ log.txt` reads each evidence file with its own reader, then
moves its statistics, findings and memory events onto the graph's nodes through the one
name-matching layer (`graph/names.py`). Evidence whose operator matches no node is listed in
`run.extra["unmatched_evidence"]` and in the note, never dropped silently.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable

import numpy as np

from ascend_tui.evidence import MemoryEvent, StatsTable
from ascend_tui.graph.names import NameIndex, NameMatch, node_names
from ascend_tui.investigation import Investigation
from ascend_tui.progress import Progress

_CONFIDENCE = {"id": 1.0, "exact": 1.0, "normalized": 0.9, "fused-origin": 0.8}
_EXAMPLES = 3


@dataclass(slots=True)
class Overlay:
    """What laying one evidence file on a graph did: counts by match kind, and what matched nothing."""

    source: str
    how: dict[str, int] = field(default_factory=dict)
    unmatched: list[str] = field(default_factory=list)
    findings: int = 0
    stats: int = 0
    events: int = 0
    as_reference: bool = False

    def note(self) -> str:
        """One line for the user: what was added and what could not be placed."""
        placed = sum(self.how.values())
        kinds = ", ".join(f"{k} {v}" for k, v in self.how.items() if v)
        stats = f"{self.stats} statistics" + (" (as the reference)" if self.as_reference else "")
        text = (f"{self.source}: {self.findings} findings, {stats}, {self.events} memory events "
                f"on {placed} operators" + (f" ({kinds})" if kinds else ""))
        if self.unmatched:
            shown = ", ".join(self.unmatched[:_EXAMPLES])
            text += f"; {len(self.unmatched)} operators matched no node (e.g. {shown})"
        return text


def _evidence_names(other: Investigation, node_id: str) -> list[str]:
    """Every name an evidence node goes by, its own spelling first and its id last."""
    node = other.graph.get(node_id)
    if node is None:
        return [node_id]
    names, origins = node_names(node)
    return [*names[1:], *origins, names[0]]


def lay_on(base: Investigation, other: Investigation, source: str, index: NameIndex | None = None) -> Overlay:
    """Move `other`'s statistics, findings and memory events onto `base`'s nodes by name; return what happened."""
    index = index or NameIndex(base.graph)
    result = Overlay(source)
    wanted = dict.fromkeys([*(k[0] for k in other.stats.keys()),
                            *(k[0] for k in (other.reference.keys() if other.reference is not None else ())),
                            *(f.node for f in other.findings if f.node),
                            *(e.node for e in other.memory_events if e.node)])
    mapping: dict[str, NameMatch] = {}
    for nid in wanted:
        m = index.match_first(_evidence_names(other, nid))
        if m is None:
            node = other.graph.get(nid)
            label = (node.attrs or {}).get("name") if node is not None and node.attrs else None
            result.unmatched.append(str(label or nid))
        else:
            mapping[nid] = m
            result.how[m.how] = result.how.get(m.how, 0) + 1
    # A graph that already has target statistics (a dump, a live run) takes a second dump as its reference:
    # `open bf16.vis.db fp32_dump/` compares the two instead of overwriting one with the other.
    result.as_reference = len(base.stats) > 0 and len(other.stats) > 0
    if result.as_reference or other.reference is not None:
        if base.reference is None:
            base.reference = StatsTable()
    target = base.reference if result.as_reference else base.stats
    assert target is not None
    result.stats = _move_stats(other.stats, target, mapping)
    if other.reference is not None and not result.as_reference:
        assert base.reference is not None
        _move_stats(other.reference, base.reference, mapping)
    moved = []
    for f in other.findings:
        m = mapping.get(f.node)
        if m is None:
            continue
        node = base.graph.node(m.node)
        moved.append(replace(f, node=node.id, op_type=node.op_type, module=node.module, index=node.index,
                             metrics={**f.metrics, "evidence_name": f.node, "matched_by": m.how}))
    base.add_findings(moved)
    result.findings = len(moved)
    events = list(_move_events(other.memory_events, mapping))
    base.memory_events.extend(events)
    base.memory_samples.extend(other.memory_samples)
    result.events = sum(1 for e in events if e.node)
    base.run.checks = tuple(dict.fromkeys((*base.run.checks, *other.run.checks)))
    if result.unmatched:
        base.run.extra.setdefault("unmatched_evidence", {})[source] = list(result.unmatched)
    base.run.extra.setdefault("evidence", {})[source] = {"matched": dict(result.how),
                                                         "unmatched": len(result.unmatched)}
    return result


def _move_stats(src: StatsTable, dst: StatsTable, mapping: dict[str, NameMatch]) -> int:
    keys, rows = [], []
    for (nid, slot), stats in src.items():
        m = mapping.get(nid)
        if m is not None:
            keys.append((m.node, slot))
            rows.append(stats.to_row())
    if keys:
        dst.add_many(keys, np.asarray(rows, dtype=np.float64))
    return len(keys)


def _move_events(events: Iterable[MemoryEvent], mapping: dict[str, NameMatch]) -> Iterable[MemoryEvent]:
    for e in events:
        m = mapping.get(e.node) if e.node else None
        if m is not None:
            yield replace(e, node=m.node, confidence=min(e.confidence or 1.0, _CONFIDENCE[m.how]),
                          extra={**e.extra, "evidence_node": e.node, "mapping": f"name ({m.how})"})
        else:
            yield replace(e, node=None, extra={**e.extra, "evidence_node": e.node}) if e.node else e


def name_events(base: Investigation, events: Iterable[MemoryEvent], index: NameIndex | None = None
                ) -> list[MemoryEvent]:
    """Sanitizer events whose kernel is named like a node (GE and MindSpore kernels are) placed on it by name.

    Events left unplaced keep `node=None` for the kernel-name-to-aten-op rules of `checks.memory_log`.
    """
    index = index or NameIndex(base.graph)
    out = []
    for e in events:
        if e.node is None and e.kernel:
            m = index.match(e.kernel)
            if m is not None:
                e = replace(e, node=m.node, confidence=_CONFIDENCE[m.how],
                            extra={**e.extra, "mapping": f"kernel name is the operator's name ({m.how})",
                                   "name_match": m.how})
        out.append(e)
    return out


def lay_path(base: Investigation, path: str | Path, progress: Progress | None = None,
             cancel: threading.Event | None = None, index: NameIndex | None = None) -> str:
    """Read the evidence file `path` and lay it on `base`'s graph; returns a note saying what was added.

    Sanitizer logs are placed event by event: by kernel name through the name layer first, then by
    `checks.memory_log`'s kernel-to-aten rules and sizes; everything else through `lay_on`.
    """
    from ascend_tui.offline.open import kind_of, open_path

    path = Path(path)
    if progress is not None:
        progress(f"reading {path.name}", 0, None)
    if kind_of(path) == "sanitizer log":
        from ascend_tui.offline.memory import investigation_from_log
        from ascend_tui.readers.sanitizer.log import parse_file

        log = parse_file(path, progress, cancel)
        log.events = name_events(base, log.events, index)
        before_findings, before_events = len(base.findings), len(base.memory_events)
        investigation_from_log(log, base)  # the one path from a log to findings, as `sanitize --log --graph`
        events = base.memory_events[before_events:]
        added = len(base.findings) - before_findings  # findings stay in execution order: count, do not slice
        placed = sum(1 for e in events if e.node and e.node in base.graph)
        by_name = sum(1 for e in events if e.extra.get("name_match"))
        unplaced = sorted({str(e.kernel) for e in events if e.kernel and not (e.node and e.node in base.graph)})
        if unplaced:
            base.run.extra.setdefault("unmatched_evidence", {})[path.name] = unplaced
        note = (f"{path.name}: {len(events)} memory events, {placed} placed on operators ({by_name} by name), "
                f"{added} findings")
        return note + (f"; {len(unplaced)} kernels matched no node (e.g. {', '.join(unplaced[:_EXAMPLES])})"
                       if unplaced else "")
    other = open_path(path, progress=progress, cancel=cancel)
    return lay_on(base, other, path.name, index).note()
