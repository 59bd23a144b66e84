"""A sanitizer log as an `Investigation`: its events on a graph of the kernels they name, and the reader.

`log.py` parses the reports; the memory findings on them are `offline/memory.py`'s.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from ascend_tui.evidence import MemoryEvent
from ascend_tui.readers.base import FunctionReader
from ascend_tui.readers.sanitizer.log import TOOL_TITLES, LogSummary, SanitizerLog, parse_file, sniff

if TYPE_CHECKING:
    from ascend_tui.graph.opgraph import OpGraph
    from ascend_tui.investigation import Investigation
    from ascend_tui.progress import Progress

HOST_NODE = "host"


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None) -> Investigation:
    """Read a sanitizer log into an `Investigation` on a graph of the kernels it names."""
    return log_investigation(parse_file(path, progress, cancel))


def log_graph(events: Iterable[MemoryEvent], name: str = "") -> OpGraph:
    """One node per distinct kernel, in order of first report (`host` for host-side reports); no edges."""
    from ascend_tui.graph.opgraph import OpGraph, OpNode

    graph = OpGraph(name)
    for e in events:
        nid = e.kernel or HOST_NODE
        if nid not in graph:
            graph.add_node(OpNode(id=nid, op_type="kernel" if e.kernel else "host", module="", index=len(graph),
                                  attrs={"tool": e.tool}))
    return graph


def log_extra(log: SanitizerLog) -> dict[str, Any]:
    """What the run records of a log beyond its events: tools, runs, files, summaries, unread lines."""
    return {"sanitizer": {"tools": list(log.tools), "sessions": log.sessions, "log_files": list(log.log_files),
                          "summaries": [asdict(s) for s in log.summaries], "events": len(log.events),
                          "unrecognized_lines": log.unrecognized[:50]}}


def tools_title(tools: Iterable[str]) -> str:
    """`msSanitizer + compute-sanitizer`, or `sanitizer` when the log named no tool."""
    return " + ".join(TOOL_TITLES[t] for t in tools) or "sanitizer"


def log_investigation(log: SanitizerLog, *, target: str | None = None) -> Investigation:
    """The log as an investigation on a graph of its kernels, each event on its own kernel's node (no findings)."""
    from ascend_tui.investigation import Investigation, RunInfo

    tools = tools_title(log.tools)
    inv = Investigation(log_graph(log.events, name=Path(log.source).name), run=RunInfo(
        target=target or log.source, checks=("memory",), source=f"{tools} log", extra=log_extra(log),
        device={"backend": "none", "name": f"offline ({tools} log)", "inf_nan_mode": True}))
    inv.memory_events.extend(replace(e, node=e.kernel or HOST_NODE, confidence=1.0) for e in log.events)
    return inv


def summaries_of(inv: Investigation) -> list[LogSummary]:
    """The run summaries a log's investigation recorded (`log_extra`)."""
    return [LogSummary(**d) for d in inv.run.extra.get("sanitizer", {}).get("summaries", [])]


READER = FunctionReader("sanitizer log", sniff, load)
