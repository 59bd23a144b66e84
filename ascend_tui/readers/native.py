"""Our own files: saved investigations (`ascend-tui.investigation/1`) and graphs (`ascend-tui.graph/1`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ascend_tui.graph.opgraph import OpGraph
from ascend_tui.investigation import INVESTIGATION_SCHEMA, Investigation, RunInfo
from ascend_tui.readers.base import FunctionReader, head


def sniff_investigation(path: Path) -> bool:
    return path.is_file() and INVESTIGATION_SCHEMA.encode() in head(path, 256)


def sniff_graph(path: Path) -> bool:
    return path.is_file() and b'"ascend-tui.graph/1"' in head(path, 256)


def load_investigation(path: Path, **_: Any) -> Investigation:
    return Investigation.load(path)


def load_graph(path: Path, **_: Any) -> Investigation:
    graph = OpGraph.load(path)
    return Investigation(graph, run=RunInfo(target=str(path), source="graph"))


INVESTIGATION_READER = FunctionReader("investigation", sniff_investigation, load_investigation)
GRAPH_READER = FunctionReader("graph", sniff_graph, load_graph)
