"""The operators a graph drawing shows, as arrays: their modules as a tree, the edges, and which side holds each.

`Hierarchy` is what `graph/layout.py` lays out: placeholders (inputs, parameters, buffers,
constants) are left out, a module with more than `GROUP` children gets a level of groups of that
many (a flat 100k-op graph opens a hundred at a time), and two graphs (target and golden) can be
held as one, matched by id, each node and edge marked with the sides that have it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ascend_tui.graph.node import PLACEHOLDER_KINDS, OpNode

if TYPE_CHECKING:
    from ascend_tui.graph.opgraph import OpGraph

LABEL_MAX = 18  # a label longer than this is cut with "…"
GROUP = 100  # a module with more children than this shows them in groups of this many (`⋯1-100`)
GROUP_MARK = "⋯"
TARGET, GOLDEN, BOTH = 1, 2, 3  # which side of a pair holds a node or edge


def short_op(op_type: str) -> str:
    """`add` for `aten.add.Tensor`, `conv2d` for `Functional.conv2d`: the op without namespace or overload."""
    parts = op_type.split(".")
    if len(parts) >= 2 and parts[0] in ("aten", "prims", "torch", "npu", "c10d", "_c10d_functional"):
        return parts[1]
    return parts[-1]


def cut(text: str, width: int = LABEL_MAX) -> str:
    """`text` in at most `width` cells, its end replaced by `…` when longer."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def module_name(path: str) -> str:
    """The last part of a module path (`conv1` for `layer1.0.conv1`; `layers.1` where the last part is a number)."""
    if not path:
        return "(model)"
    parts = [p for p in path.split(".") if not p.startswith(GROUP_MARK)] or [path]
    last = path.rsplit(".", 1)[-1]
    if last.startswith(GROUP_MARK):
        return last
    return ".".join(parts[-2:]) if last.isdigit() and len(parts) > 1 else last


class Hierarchy:
    """Shown nodes (placeholders left out), their modules as a tree, and the edges between them, as arrays."""

    def __init__(self, nodes: list[OpNode], src: np.ndarray, dst: np.ndarray, sides: np.ndarray | None = None,
                 edge_sides: np.ndarray | None = None) -> None:
        self.nodes = nodes
        self.ids = ids = [n.id for n in nodes]
        self.pos = {nid: i for i, nid in enumerate(ids)}
        self.order = np.array([n.index for n in nodes], dtype=np.int64)
        modules = [n.module for n in nodes]
        self.src, self.dst = src.astype(np.int64), dst.astype(np.int64)
        n = len(ids)
        self.sides = sides if sides is not None else np.full(n, TARGET, dtype=np.int8)
        self.edge_sides = edge_sides if edge_sides is not None else np.full(len(src), TARGET, dtype=np.int8)
        names: set[str] = {""}
        for m in set(modules):  # every module and its ancestors, each parent walked to only once
            while m and m not in names:
                names.add(m)
                m = m.rpartition(".")[0]
        self.modules = sorted(names)  # "" (the model) first
        self.code = {m: i for i, m in enumerate(self.modules)}
        self.parent_of = np.array([self.code[m.rpartition(".")[0]] if m else 0 for m in self.modules], dtype=np.int64)
        self.mod = np.array([self.code[m] for m in modules], dtype=np.int64)
        self._group(GROUP)
        count = len(self.modules)
        self.depth = np.zeros(count, dtype=np.int64)
        for _ in range(count):  # each module one deeper than its parent: as many rounds as the tree is deep
            depth = self.depth[self.parent_of] + 1
            depth[0] = 0
            if np.array_equal(depth, self.depth):
                break
            self.depth = depth
        cols = int(self.depth.max()) + 2
        # anc[c, k]: the ancestor at depth k of module c (itself at its own depth), -1 below its depth
        self.anc = np.full((count, cols), -1, dtype=np.int64)
        self.anc[0, 0] = 0
        for d in range(1, cols - 1):  # level by level: each copies its parents' rows
            level = np.flatnonzero(self.depth == d)
            self.anc[level] = self.anc[self.parent_of[level]]
            self.anc[level, d] = level
        self.n_ops = np.bincount(self.mod, minlength=count)
        for d in range(cols - 2, 0, -1):  # deepest first: each level adds its ops to its parents
            level = np.flatnonzero(self.depth == d)
            np.add.at(self.n_ops, self.parent_of[level], self.n_ops[level])

    def _group(self, most: int) -> None:
        """A level of groups (`name.⋯1-100`) under every module with more than `most` children (its operators
        and child modules), `most` to a group in execution order; the modules keep their own names."""
        count = len(self.modules)
        kids = np.bincount(self.mod, minlength=count) + np.bincount(self.parent_of[1:], minlength=count)
        needy = np.flatnonzero(kids > most)
        if not len(needy):
            return
        first = np.full(count, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, self.mod, self.order)
        for _ in range(count):  # a module ran first when its first operator or child module did
            lower = first.copy()
            np.minimum.at(lower, self.parent_of[1:], first[1:])
            if np.array_equal(lower, first):
                break
            first = lower
        parents = self.parent_of.tolist()
        for c in needy.tolist():
            ops = np.flatnonzero(self.mod == c).tolist()
            children = [k for k in np.flatnonzero(self.parent_of == c).tolist() if k != 0]
            items = sorted([(int(self.order[i]), 0, i) for i in ops] + [(int(first[k]), 1, k) for k in children])
            name = self.modules[c]
            for a in range(0, len(items), most):
                part = items[a:a + most]
                group = f"{GROUP_MARK}{a + 1}-{a + len(part)}"
                g = len(self.modules)
                self.modules.append(f"{name}.{group}" if name else group)
                self.code[self.modules[-1]] = g
                parents.append(c)
                for _o, is_module, i in part:
                    if is_module:
                        parents[i] = g
                    else:
                        self.mod[i] = g
        self.parent_of = np.array(parents, dtype=np.int64)

    @classmethod
    def of(cls, graph: OpGraph) -> Hierarchy:
        """The operators of `graph` (inputs, parameters, buffers and constants left out) and their edges."""
        return cls.pair(graph, None)

    @classmethod
    def pair(cls, target: OpGraph, golden: OpGraph | None) -> Hierarchy:
        """Target and golden operators as one graph, matched by id: each node and edge says which sides hold it."""
        shown: list[OpNode] = []
        sides: list[int] = []
        pos: dict[str, int] = {}
        pairs, edge_sides = [], []
        for side, graph in ((TARGET, target), (GOLDEN, golden)):
            if graph is None:
                continue
            nodes = graph.nodes
            local = np.full(len(nodes), -1, dtype=np.int64)
            if not shown:
                keep = [k for k, n in enumerate(nodes) if n.kind not in PLACEHOLDER_KINDS]
                shown = [nodes[k] for k in keep]
                pos = {n.id: i for i, n in enumerate(shown)}
                sides = [side] * len(shown)
                local[keep] = np.arange(len(keep))
            else:
                for k, node in enumerate(nodes):
                    if node.kind in PLACEHOLDER_KINDS:
                        continue
                    at = pos.get(node.id)
                    if at is None:
                        at = pos[node.id] = len(shown)
                        shown.append(node)
                        sides.append(0)
                    sides[at] |= side
                    local[k] = at
            # the edge lists by position, the model's own storage
            flat = np.array([e[:2] for outs in graph._outs for e in outs], dtype=np.int64).reshape(-1, 2)  # noqa: SLF001
            a, b = local[flat[:, 0]], local[flat[:, 1]]
            keep_e = (a >= 0) & (b >= 0) & (a != b)
            pairs.append(np.unique(a[keep_e] * (1 << 32) + b[keep_e]))
            edge_sides.append(np.full(len(pairs[-1]), side, dtype=np.int8))
        code = np.concatenate(pairs) if pairs else np.zeros(0, dtype=np.int64)
        es = np.concatenate(edge_sides) if edge_sides else np.zeros(0, dtype=np.int8)
        uniq, inv = np.unique(code, return_inverse=True)
        both = np.zeros(len(uniq), dtype=np.int8)
        np.bitwise_or.at(both, inv, es)
        return cls(shown, uniq >> 32, uniq & 0xFFFFFFFF, np.array(sides, dtype=np.int8), both)

    def label(self, node_id: str) -> str:
        """`conv2d.0` (`∇mm.0` for a gradient op): the op's call name within its module."""
        node = self.nodes[self.pos[node_id]]
        return ("∇" if node.phase == "backward" else "") + _call_name(node.id, node.op_type)

    def module_of(self, node_id: str) -> str:
        return self.modules[int(self.mod[self.pos[node_id]])]

    def parent(self, module: str) -> str | None:
        """The module holding `module` ("" for a top module; a group `⋯1-100` where its parent has many), None
        for the whole model."""
        if not module:
            return None
        return self.modules[int(self.parent_of[self.code[module]])]

    def ancestors(self, module: str) -> list[str]:
        """The modules holding `module`, outermost first (the model's "" left out)."""
        c = self.code[module]
        return [self.modules[int(a)] for a in self.anc[c, 1: int(self.depth[c])]]

    def within(self, module: str, outer: str) -> bool:
        """True when `module` lies inside `outer` (at any depth, itself excluded)."""
        c, o = self.code.get(module), self.code.get(outer)
        if c is None or o is None or c == o:
            return False
        k = int(self.depth[o])
        return k == 0 or (int(self.depth[c]) > k and int(self.anc[c, k]) == o)

    def chain(self, node_id: str) -> list[str]:
        """The modules that hold `node_id`, outermost first (the model's "" left out)."""
        c = int(self.mod[self.pos[node_id]])
        return [self.modules[int(a)] for a in self.anc[c, 1: int(self.depth[c]) + 1]]

    def ops_under(self, module: str) -> int:
        return int(self.n_ops[self.code[module]])

    def first_op(self, module: str) -> str | None:
        """The operator of `module` (or inside it) that ran first."""
        rows = np.flatnonzero(self._inside(module))
        if not len(rows):
            return None
        return self.ids[int(rows[np.argmin(self.order[rows])])]

    def _inside(self, module: str) -> np.ndarray:
        c, k = self.code[module], int(self.depth[self.code[module]])
        return np.ones(len(self.ids), dtype=bool) if k == 0 else self.anc[self.mod, k] == c


def _call_name(node_id: str, op_type: str) -> str:
    """`conv2d.0` for `layer1/conv2d.0`: the op and its call index within its module, or the short op type."""
    last = node_id.rsplit("/", 1)[-1]
    phase, colon, rest = last.partition(":")
    if colon:  # `backward:mm.0` (marked ∇ by the caller), `optimizer:add_.0` -> `opt:add_.0`
        last = rest if phase == "backward" else f"{phase[:3]}:{rest}"
    return last if "/" in node_id or "." in last else short_op(op_type)
