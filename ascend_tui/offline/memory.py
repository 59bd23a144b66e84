"""Sanitizer logs to findings offline: the log's events placed on a graph and judged by `checks/memory_log.py`.

The one path from a log to findings, alone (`open LOG`: on the graph of its kernels), on a graph
(`open GRAPH LOG`, `sanitize --log --graph`, `triage`: `offline/overlay.py` places the events by
name first) or streamed from a live tool's output (`sanitize -- CMD`, the app's follow mode).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ascend_tui.checks.memory_log import findings_from_events, hidden_error_findings, match_kernel, prepare_events
from ascend_tui.readers.sanitizer.investigation import log_extra, log_investigation, summaries_of, tools_title
from ascend_tui.readers.sanitizer.log import SanitizerLog, hidden_errors

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

LIKELY_OP = 0.5  # a kernel's name names an aten op at least this surely: the kernel node says which


def investigation_from_log(log: SanitizerLog, base: Investigation | None = None, *,
                           pool_enabled: bool | None = None, target: str | None = None) -> Investigation:
    """`base` (or a new investigation on a graph of the log's kernels) with the log's events and memory findings."""
    if base is None:
        return log_findings(log_investigation(log, target=target), pool_enabled=pool_enabled)
    inv = base
    inv.run.checks = tuple(dict.fromkeys([*inv.run.checks, "memory"]))
    inv.run.extra.update(log_extra(log))
    events = prepare_events(inv.graph, log.events, pool_enabled=pool_enabled)
    inv.memory_events.extend(events)
    inv.add_findings([*findings_from_events(inv.graph, events, pool_enabled=pool_enabled),
                      *hidden_error_findings(log.hidden_errors(), tools_title(log.tools))])
    return inv


def log_findings(inv: Investigation, *, pool_enabled: bool | None = None) -> Investigation:
    """The memory findings on a log the reader made into an investigation on its kernel graph (`open LOG`)."""
    for node in inv.graph:
        match = match_kernel(node.id) if node.op_type == "kernel" else None
        if match is not None and match.confidence >= LIKELY_OP and isinstance(node.attrs, dict):
            node.attrs.update(likely_op=f"aten.{match.op_types[0]}", likely_op_confidence=match.confidence)
    extra = inv.run.extra.get("sanitizer", {})
    hidden = hidden_errors(summaries_of(inv), inv.memory_events)
    inv.memory_events[:] = prepare_events(inv.graph, inv.memory_events, pool_enabled=pool_enabled)
    inv.add_findings([*findings_from_events(inv.graph, inv.memory_events, pool_enabled=pool_enabled),
                      *hidden_error_findings(hidden, tools_title(extra.get("tools", ())))])
    return inv
