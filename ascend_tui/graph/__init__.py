"""The operator graph: nodes are executed operators, edges carry tensors between slots."""

from ascend_tui.graph.opgraph import NodeKind, OpGraph, OpNode

__all__ = ["NodeKind", "OpGraph", "OpNode"]
