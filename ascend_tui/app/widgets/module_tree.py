"""`ModuleTree`: the graph folded by module; children are added when a node is expanded, in chunks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

CHUNK = 200


@dataclass(frozen=True, slots=True)
class ModuleRef:
    """Tree node data: a module path, or a "more" row standing for `parent`'s children from `start` on."""

    module: str
    more_from: int = -1


class ModuleIndex:
    """Children and operator counts per module path, computed in one pass over the operators."""

    def __init__(self, inv: Investigation) -> None:
        self.children: dict[str, list[str]] = {}
        self.ops: dict[str, int] = {}
        self.flagged: dict[str, int] = {}
        flagged = inv.flagged_nodes()
        graph = inv.graph
        for nid in graph.execution_order():
            module = graph.node(nid).module
            bad = nid in flagged
            path = ""
            self._count("", bad)
            for part in module.split(".") if module else ():
                child = f"{path}.{part}" if path else part
                if child not in self.ops:
                    self.children.setdefault(path, []).append(child)
                path = child
                self._count(path, bad)

    def _count(self, path: str, bad: bool) -> None:
        self.ops[path] = self.ops.get(path, 0) + 1
        if bad:
            self.flagged[path] = self.flagged.get(path, 0) + 1


class ModuleTree(Tree[ModuleRef]):
    """Select a module to show only its operators; select the root to show them all."""

    DEFAULT_CSS = """
    ModuleTree { width: 34; border-right: vkey $panel; }
    """

    class ModuleSelected(Message):
        """A module (None: the whole model) was chosen."""

        def __init__(self, module: str | None) -> None:
            super().__init__()
            self.module = module

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(Text("model"), data=ModuleRef(""), id=id, classes=classes)
        self.index: ModuleIndex | None = None
        self._loaded: set[str] = set()
        self.show_root = True

    def set_investigation(self, inv: Investigation) -> None:
        """Index the modules of `inv` and show the top level."""
        self.index = ModuleIndex(inv)
        self._loaded.clear()
        self.clear()
        self.root.set_label(self._label("", "model"))
        self._load(self.root, "", 0)
        self.root.expand()

    def _label(self, module: str, name: str) -> Text:
        assert self.index is not None
        text = Text(name)
        text.append(f" {self.index.ops.get(module, 0):,}", "dim")
        bad = self.index.flagged.get(module, 0)
        if bad:
            text.append(f" ●{bad}", "bold")
        return text

    def _load(self, node: TreeNode[ModuleRef], module: str, start: int) -> None:
        assert self.index is not None
        kids = self.index.children.get(module, [])
        for child in kids[start:start + CHUNK]:
            name = child.rsplit(".", 1)[-1]
            node.add(self._label(child, name), data=ModuleRef(child), allow_expand=child in self.index.children)
        if start + CHUNK < len(kids):
            node.add_leaf(Text(f"… {len(kids) - start - CHUNK:,} more", "dim italic"),
                          data=ModuleRef(module, start + CHUNK))
        self._loaded.add(module)

    @on(Tree.NodeExpanded)
    def _expanded(self, event: Tree.NodeExpanded[ModuleRef]) -> None:
        ref = event.node.data
        if ref is not None and ref.module not in self._loaded and ref.more_from < 0:
            self._load(event.node, ref.module, 0)

    @on(Tree.NodeSelected)
    def _selected(self, event: Tree.NodeSelected[ModuleRef]) -> None:
        event.stop()
        ref = event.node.data
        if ref is None:
            return
        if ref.more_from >= 0:
            parent = event.node.parent
            event.node.remove()
            if parent is not None:
                self._load(parent, ref.module, ref.more_from)
            return
        self.post_message(self.ModuleSelected(ref.module or None))
