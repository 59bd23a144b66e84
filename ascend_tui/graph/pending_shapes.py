"""Tensor shapes a reader left to be worked out on first request (ONNX shape inference), once, thread-safe.

A reader whose file lacks most tensor types hands the graph a resolver instead of running the
inference up front: `ascend-tui graph` prints counts and never pays for it, while anything that
reads a node's tensors (`OpGraph.node`, iteration, export, the app's panes) resolves it first.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    from ascend_tui.graph.node import OpNode
    from ascend_tui.progress import Progress

# Given a progress callback (or None), the graph's node records with their tensors filled in (the same ids
# in the same positions), or None when nothing better than what the file says could be worked out.
Resolver = Callable[[Optional["Progress"]], Optional[list["OpNode"]]]


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
            for k, (old, new) in enumerate(zip(nodes, resolved or ())):  # nodes replaced meanwhile keep the rest
                if old.id == new.id and (old.inputs != new.inputs or old.outputs != new.outputs):
                    nodes[k] = op_node(old.id, old.op_type, old.module, old.index, old.kind, new.inputs, new.outputs,
                                       old.source, old.phase, old.module_class, old.attrs)


def _nothing(progress: Progress | None) -> None:
    return None
