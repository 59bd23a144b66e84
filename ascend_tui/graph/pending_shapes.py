"""Tensor shapes a reader left to be worked out on first request (ONNX types and inference), once, thread-safe.

A reader hands the graph a resolver instead of reading every node's tensor types (or running
shape inference) up front: `ascend-tui graph` prints counts and never pays for them, while
anything that reads a node's tensors (`OpGraph.node`, iteration, export, the app's panes)
resolves them first.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    from ascend_tui.evidence import TensorMeta
    from ascend_tui.graph.node import OpNode
    from ascend_tui.progress import Progress

# Given a progress callback (or None), the input and the output tensors of each node position of the graph
# as the reader built it, or None when nothing better than what the records hold could be worked out.
Tensors = tuple[Optional["TensorMeta"], ...]
Resolver = Callable[[Optional["Progress"]], Optional[tuple[list[Tensors], list[Tensors]]]]


class PendingShapes:
    """A resolver run at most once, under a lock, by whichever thread asks first; the others wait for it."""

    __slots__ = ("lock", "resolve", "done")

    def __init__(self, resolve: Resolver) -> None:
        self.lock = threading.Lock()
        self.resolve = resolve
        self.done = False

    def run(self, nodes: list[OpNode], progress: Progress | None) -> None:
        """Fill the tensors of `nodes` in place the first time; a thread that asks meanwhile returns once they are."""
        from ascend_tui.graph.node import op_node

        with self.lock:
            if self.done:
                return
            try:
                resolved = self.resolve(progress)
            finally:
                self.done = True
                self.resolve = _nothing  # lets go of what the resolver held (a whole model proto)
            if resolved is None:
                return
            ins, outs = resolved
            for k, (old, inputs, outputs) in enumerate(zip(nodes, ins, outs)):  # records replaced meanwhile keep
                if old.inputs != inputs or old.outputs != outputs:  # the rest of what they were given
                    nodes[k] = op_node(old.id, old.op_type, old.module, old.index, old.kind, inputs, outputs,
                                       old.source, old.phase, old.module_class, old.attrs)


def _nothing(progress: Progress | None) -> None:
    return None
