"""A layered (Sugiyama-style) drawing of the operator graph, one module at a time: graph in, cells out.

Each module is laid out over its direct children only (its own operators, and its child modules as one
box each), so a collapsed 100k-operator model costs one layout of its top modules; an opened module's
box becomes a frame holding its own layout. A module's layout: layers from
`networkx.topological_generations` (sources pulled down next to their first reader), long edges split
through one virtual point per layer they cross, order within a layer by the barycenter of the
neighbours (a few sweeps down and up), x by centring groups over their neighbours, and the edges
between two layers on their own tracks. Layouts are cached per module and per set of opened modules
inside it. No Textual here: the app paints a `Scene`'s boxes and edge cells.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Literal

import numpy as np

from ascend_tui.fmt import count
from ascend_tui.graph.node import PLACEHOLDER_KINDS, OpNode

if TYPE_CHECKING:
    from ascend_tui.graph.opgraph import OpGraph

BOX_H = 3  # border, label, border
GAP_X = 2  # columns between two boxes of a layer
LABEL_MAX = 18  # a label longer than this is cut with "…"
FRAME_X = 2  # an opened module's frame: border and one blank column on each side
GROUP = 100  # a module with more children than this shows them in groups of this many (`⋯1-100`)
GROUP_MARK = "⋯"
TARGET, GOLDEN, BOTH = 1, 2, 3  # which side of a pair holds a node or edge
N, S, E, W = 1, 2, 4, 8  # the directions an edge cell connects to
ItemKind = Literal["op", "module", "virtual"]


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


def grouped(modules: list[str], order: np.ndarray, most: int) -> list[str]:
    """Node modules with a group level put under every module that holds more than `most` children (its own
    operators and child modules), `most` children a group in execution order: a flat 100k-op graph opens
    a hundred at a time instead of laying out 100k boxes at once."""
    direct: dict[str, list[int]] = {}
    for i, m in enumerate(modules):
        direct.setdefault(m, []).append(i)
    children: dict[str, set[str]] = {}
    for m in list(direct):
        while m:
            parent = m.rpartition(".")[0]
            kids = children.setdefault(parent, set())
            if m in kids:
                break
            kids.add(m)
            m = parent
    if all(len(direct.get(m, ())) + len(children.get(m, ())) <= most for m in {*direct, *children}):
        return modules
    at = order.tolist()
    first: dict[str, int] = {}
    for m, rows in direct.items():
        low = min(at[i] for i in rows)
        while first.get(m, low + 1) > low:  # an ancestor that ran earlier already holds a smaller one
            first[m] = low
            if not m:
                break
            m = m.rpartition(".")[0]
    out = list(modules)
    todo = [("", "")]
    while todo:
        old, new = todo.pop()
        items = [(at[i], 0, i, "") for i in direct.get(old, ())]
        items += [(first[c], 1, 0, c) for c in children.get(old, ())]
        items.sort()
        for k, (_o, is_module, row, child) in enumerate(items):
            home = new
            if len(items) > most:
                a = k // most * most
                group = f"{GROUP_MARK}{a + 1}-{min(a + most, len(items))}"
                home = f"{new}.{group}" if new else group
            if is_module:
                todo.append((child, f"{home}.{child.rpartition('.')[2]}" if home else child.rpartition(".")[2]))
            else:
                out[row] = home
    return out


# -- the hierarchy -------------------------------------------------------------------------------


class Hierarchy:
    """Shown nodes (placeholders left out), their modules as a tree, and the edges between them, as arrays."""

    def __init__(self, nodes: list[OpNode], src: np.ndarray, dst: np.ndarray, sides: np.ndarray | None = None,
                 edge_sides: np.ndarray | None = None) -> None:
        self.nodes = nodes
        self.ids = ids = [n.id for n in nodes]
        self.pos = {nid: i for i, nid in enumerate(ids)}
        self.order = np.array([n.index for n in nodes], dtype=np.int64)
        modules = grouped([n.module for n in nodes], self.order, GROUP)
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
        self.depth = np.array([m.count(".") + 1 if m else 0 for m in self.modules], dtype=np.int64)
        parent = np.array([self.code[m.rpartition(".")[0]] if m else 0 for m in self.modules], dtype=np.int64)
        cols = int(self.depth.max()) + 2
        # anc[c, k]: the ancestor at depth k of module c (itself at its own depth), -1 below its depth
        self.anc = np.full((len(self.modules), cols), -1, dtype=np.int64)
        self.anc[0, 0] = 0
        for d in range(1, cols - 1):  # modules are sorted by depth: each level copies its parents' rows
            level = np.flatnonzero(self.depth == d)
            self.anc[level] = self.anc[parent[level]]
            self.anc[level, d] = level
        self.mod = np.array([self.code[m] for m in modules], dtype=np.int64)
        self.n_ops = np.bincount(self.mod, minlength=len(self.modules))
        for d in range(cols - 2, 0, -1):  # deepest first: each level adds its ops to its parents
            level = np.flatnonzero(self.depth == d)
            np.add.at(self.n_ops, parent[level], self.n_ops[level])

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
        """The module holding `module` ("" for a top module), None for the whole model."""
        if not module:
            return None
        return module.rsplit(".", 1)[0] if "." in module else ""

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
    last = node_id.rsplit("/", 1)[-1].removeprefix("backward:")
    return last if "/" in node_id or "." in last else short_op(op_type)


# -- one module's children as a small graph --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModuleGraph:
    """A module's direct children (its operators, its child modules) and the edges among them."""

    module: str
    keys: tuple[str, ...]
    kinds: tuple[ItemKind, ...]
    order: tuple[int, ...]
    sides: tuple[int, ...]
    edges: tuple[tuple[int, int, int], ...]  # (from, to, sides), by index into keys


def module_graph(h: Hierarchy, module: str) -> ModuleGraph:
    """The children of `module` and the edges between them (edges inside one child are that child's)."""
    c = h.code[module]
    k = int(h.depth[c])
    inside = h._inside(module)
    child = h.anc[h.mod, k + 1]  # -1 where the node sits in `module` itself
    n = len(h.ids)
    item = np.where(child >= 0, n + child, np.arange(n))
    rows = np.flatnonzero(inside)
    codes, local = np.unique(item[rows], return_inverse=True)
    first = np.full(len(codes), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, local, h.order[rows])
    sides = np.zeros(len(codes), dtype=np.int8)
    np.bitwise_or.at(sides, local, h.sides[rows])
    keep = inside[h.src] & inside[h.dst]
    a, b = item[h.src[keep]], item[h.dst[keep]]
    es = h.edge_sides[keep]
    cross = a != b
    a, b, es = np.searchsorted(codes, a[cross]), np.searchsorted(codes, b[cross]), es[cross]
    pair = a * len(codes) + b
    uniq, inv = np.unique(pair, return_inverse=True)
    esides = np.zeros(len(uniq), dtype=np.int8)
    np.bitwise_or.at(esides, inv, es)
    keys = tuple(h.ids[int(x)] if x < n else h.modules[int(x) - n] for x in codes)
    kinds: tuple[ItemKind, ...] = tuple("op" if x < n else "module" for x in codes)
    edges = tuple((int(p // len(codes)), int(p % len(codes)), int(s)) for p, s in zip(uniq.tolist(), esides.tolist()))
    return ModuleGraph(module, keys, kinds, tuple(first.tolist()), tuple(int(s) for s in sides), edges)


# -- placing one module ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Placed:
    """One box of a module's layout, relative to the module's origin: an operator, a module, or an edge's point."""

    key: str
    kind: ItemKind
    layer: int
    x: int
    y: int
    w: int
    h: int
    sides: int


@dataclass(frozen=True, slots=True)
class Route:
    """One edge as orthogonal points from below its producer's box to above its consumer's."""

    src: str
    dst: str
    points: tuple[tuple[int, int], ...]
    sides: int
    back: bool  # the module graph had it the other way round (a module feeding its caller back)


@dataclass(frozen=True, slots=True)
class ModuleLayout:
    """A module's children placed, its edges routed, and its size in cells."""

    module: str
    width: int
    height: int
    items: tuple[Placed, ...]
    routes: tuple[Route, ...]
    layers: int


def layer_of(g: ModuleGraph) -> tuple[list[int], list[bool]]:
    """Each child's layer (topological generations; sources moved down to just above their first reader),
    and which edges were turned round to break a cycle of modules (an edge against execution order)."""
    import networkx as nx

    dag = nx.DiGraph()
    dag.add_nodes_from(range(len(g.keys)))
    back = []
    for a, b, _s in g.edges:
        turned = (g.order[a], a) > (g.order[b], b)
        back.append(turned)
        dag.add_edge(b, a) if turned else dag.add_edge(a, b)
    layer = [0] * len(g.keys)
    for k, gen in enumerate(nx.topological_generations(dag)):
        for v in gen:
            layer[v] = k
    for v in sorted(range(len(g.keys)), key=lambda v: -layer[v]):
        succ = list(dag.successors(v))
        if dag.in_degree(v) == 0 and succ:
            layer[v] = min(layer[s] for s in succ) - 1
    low = min(layer, default=0)
    return [x - low for x in layer], back


@dataclass(frozen=True, slots=True)
class Ordering:
    """A module graph's layers and the order within each, virtual points included: what does not depend on sizes."""

    n: int
    kinds: list[ItemKind]
    lay: list[int]
    sides: list[int]
    up: list[list[int]]
    down: list[list[int]]
    chains: list[tuple[list[int], int, bool]]
    layers: list[list[int]]


def order(g: ModuleGraph, sweeps: int = 4) -> Ordering:
    """Layers from the topological generations, long edges through virtual points, barycenter order."""
    n = len(g.keys)
    layer, back = layer_of(g)
    # long edges: one virtual point per layer crossed
    kinds: list[ItemKind] = list(g.kinds)
    lay = list(layer)
    sides = list(g.sides)
    up: list[list[int]] = [[] for _ in range(n)]
    down: list[list[int]] = [[] for _ in range(n)]
    chains: list[tuple[list[int], int, bool]] = []
    for (a, b, s), turned in zip(g.edges, back):
        top, bottom = (b, a) if turned else (a, b)
        path = [top]
        for k in range(lay[top] + 1, lay[bottom]):
            v = len(kinds)
            kinds.append("virtual")
            lay.append(k)
            sides.append(s)
            up.append([])
            down.append([])
            path.append(v)
        path.append(bottom)
        for u, v in zip(path, path[1:]):
            down[u].append(v)
            up[v].append(u)
        chains.append((path, s, turned))
    total = len(kinds)
    layers: list[list[int]] = [[] for _ in range(max(lay, default=-1) + 1)]
    key_order = [g.order[v] if v < n else 0 for v in range(total)]
    for v in sorted(range(total), key=lambda v: (key_order[v], v)):
        layers[lay[v]].append(v)
    rank = [0] * total
    for row in layers:
        for i, v in enumerate(row):
            rank[v] = i
    # virtual points start under their producer: sort each layer by the barycenter of the layer above
    for sweep in range(sweeps + 1):
        going_down = sweep % 2 == 0
        rows = layers[1:] if going_down else layers[-2::-1]
        for row in rows:
            def centre(v: int) -> float:
                near = up[v] if going_down else down[v]
                return sum(rank[u] for u in near) / len(near) if near else rank[v]
            row.sort(key=lambda v: (centre(v), rank[v]))
            for i, v in enumerate(row):
                rank[v] = i
    return Ordering(n, kinds, lay, sides, up, down, chains, layers)


def lay_out(g: ModuleGraph, size: Callable[[int], tuple[int, int]], ordering: Ordering | None = None) -> ModuleLayout:
    """Place `g`'s children (`size(i)` gives child i's box width and height) and route its edges."""
    o = ordering or order(g)
    n, kinds, lay, sides, up, down, chains, layers = o.n, o.kinds, o.lay, o.sides, o.up, o.down, o.chains, o.layers
    total = len(kinds)
    sizes = [size(v) for v in range(n)]
    width = [sizes[v][0] if v < n else 1 for v in range(total)]
    height = [sizes[v][1] if v < n else 0 for v in range(total)]
    # x: each layer's boxes as close as they can be to the centre of their producers, groups centred
    x = [0] * total
    for k, row in enumerate(layers):
        want = []
        for v in row:
            near = up[v] if k else []
            c = sum(x[u] + width[u] // 2 for u in near) / len(near) if near else None
            want.append(c)
        _place_row(row, want, width, x)
    # a second pass upwards pulls producers over their readers where the layer above had room
    for k in range(len(layers) - 2, -1, -1):
        row = layers[k]
        want = []
        for v in row:
            near = down[v]
            c = sum(x[u] + width[u] // 2 for u in near) / len(near) if near and not up[v] else None
            want.append(c if c is not None else x[v] + width[v] // 2)
        _place_row(row, want, width, x)
    left = min((x[v] for v in range(total)), default=0)
    x = [v - left for v in x]
    # y: layers top to bottom; between two layers, one track per edge net that has to move sideways
    y = [0] * total
    tracks: list[dict[int, int]] = []
    top = 0
    tops, bottoms = [], []
    for k, row in enumerate(layers):
        tall = max((height[v] for v in row), default=1) or 1
        for v in row:
            y[v] = top
        tops.append(top)
        bottoms.append(top + tall)
        gap_tracks = _tracks(row, down, x, width) if k + 1 < len(layers) else {}
        tracks.append(gap_tracks)
        top += tall + max(1, len(set(gap_tracks.values())))
    items = []
    for v in range(total):
        if v < n:
            items.append(Placed(g.keys[v], kinds[v], lay[v], x[v], y[v], width[v], height[v], sides[v]))
    routes = []
    for path, s, turned in chains:
        pts: list[tuple[int, int]] = []
        for u, v in zip(path, path[1:]):
            k = lay[u]
            xu = x[u] + width[u] // 2
            xv = x[v] + width[v] // 2
            start = (y[u] + height[u]) if u < n else tops[k]
            if not pts:
                pts.append((xu, start))
            ty = bottoms[k] + tracks[k].get(u, 0)
            pts.append((xu, ty))
            pts.append((xv, ty))
            end = bottoms[k + 1] - 1 if v >= n else y[v] - 1
            pts.append((xv, end))
        a, b = path[0], path[-1]
        src, dst = (g.keys[b], g.keys[a]) if turned else (g.keys[a], g.keys[b])
        routes.append(Route(src, dst, _simplify(pts), s, turned))
    right = max((x[v] + width[v] for v in range(total)), default=0)
    return ModuleLayout(g.module, right, bottoms[-1] if bottoms else 0, tuple(items), tuple(routes), len(layers))


def _place_row(row: list[int], want: list[float | None], width: list[int], x: list[int]) -> None:
    """Left-to-right boxes of one layer at their wanted centres, overlapping groups centred on their wishes."""
    blocks: list[list[int]] = []  # [first, last, left] by index into row
    cursor = 0.0
    for i, v in enumerate(row):
        c = want[i]
        left = int(round(c - width[v] // 2)) if c is not None else int(cursor)
        blocks.append([i, i, left])
        cursor = left + width[v] + GAP_X
        while len(blocks) > 1:
            prev, cur = blocks[-2], blocks[-1]
            prev_end = prev[2] + sum(width[row[j]] + GAP_X for j in range(prev[0], prev[1] + 1))
            if prev_end <= cur[2]:
                break
            # merge: the group's left is the mean of what each member would like
            first, last = prev[0], cur[1]
            offs, off = [], 0
            for j in range(first, last + 1):
                offs.append(off)
                off += width[row[j]] + GAP_X
            wishes = [(want[j] - width[row[j]] // 2 if want[j] is not None else None) for j in range(first, last + 1)]
            got = [w - o for w, o in zip(wishes, offs) if w is not None]
            left = int(round(sum(got) / len(got))) if got else prev[2]
            blocks[-2:] = [[first, last, left]]
            cursor = left + off
    for first, last, left in blocks:
        at = left
        for j in range(first, last + 1):
            x[row[j]] = at
            at += width[row[j]] + GAP_X


def _tracks(row: list[int], down: list[list[int]], x: list[int], width: list[int]) -> dict[int, int]:
    """A track per producer whose edges to the next layer move sideways, no two overlapping on one track."""
    spans = []
    for u in row:
        if not down[u]:
            continue
        xs = [x[u] + width[u] // 2] + [x[v] + width[v] // 2 for v in down[u]]
        lo, hi = min(xs), max(xs)
        if lo != hi:
            spans.append((lo, hi, u))
    spans.sort()
    ends: list[int] = []
    out: dict[int, int] = {}
    for lo, hi, u in spans:
        t = next((i for i, e in enumerate(ends) if e < lo - 1), None)
        if t is None:
            t = len(ends)
            ends.append(hi)
        else:
            ends[t] = hi
        out[u] = t
    return out


def _simplify(pts: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Drop repeated points and points in the middle of a straight run."""
    out: list[tuple[int, int]] = []
    for p in pts:
        if out and out[-1] == p:
            continue
        if len(out) >= 2 and (out[-2][0] == out[-1][0] == p[0] or out[-2][1] == out[-1][1] == p[1]):
            out[-1] = p
            continue
        out.append(p)
    return tuple(out)


# -- the whole drawing -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Box:
    """A box on the drawing, in absolute cells: an operator, a closed module, or an opened module's frame."""

    key: str
    kind: Literal["op", "module", "frame"]
    x: int
    y: int
    w: int
    h: int
    sides: int
    depth: int
    has_in: bool = False
    has_out: bool = False


@dataclass(slots=True)
class Scene:
    """Every box and edge cell of the drawing, indexed by row so a line is painted from its own row only."""

    width: int
    height: int
    boxes: list[Box]
    box_of: dict[str, int]
    rows: list[list[int]]  # row -> indices of the operator and closed-module boxes that cross it
    cells: dict[int, dict[int, tuple[int, int, bool]]]  # row -> column -> (target's bits, golden's, all back)
    frames: list[int] = field(default_factory=list)  # indices of the opened modules' frames, outermost first
    back_edges: int = 0
    edges: int = 0


class Layout:
    """Lays a `Hierarchy` out lazily: a module's layout is made the first time it is shown, and kept."""

    def __init__(self, h: Hierarchy, measure: Callable[[str, ItemKind], int] | None = None) -> None:
        self.h = h
        self.measure = measure or self.default_measure
        self._graphs: dict[str, ModuleGraph] = {}
        self._layouts: dict[tuple[str, frozenset[str]], ModuleLayout] = {}
        self._orders: dict[str, Ordering] = {}

    def default_measure(self, key: str, kind: ItemKind) -> int:
        """The width of a box's text: the op's call name, or `▸ name ·N` for a closed module."""
        return len(self.label(key, kind))

    def label(self, key: str, kind: ItemKind) -> str:
        if kind == "op":
            return cut(self.h.label(key))
        return cut(f"▸ {module_name(key)} ·{count(self.h.ops_under(key))}")

    def graph(self, module: str) -> ModuleGraph:
        g = self._graphs.get(module)
        if g is None:
            g = self._graphs[module] = module_graph(self.h, module)
        return g

    def module(self, module: str, opened: frozenset[str]) -> ModuleLayout:
        """The layout of `module` with the `opened` modules inside it drawn as frames (cached)."""
        prefix = module + "." if module else ""
        mine = frozenset(m for m in opened if m.startswith(prefix) and m != module)
        cached = self._layouts.get((module, mine))
        if cached is not None:
            return cached
        g = self.graph(module)

        def size(i: int) -> tuple[int, int]:
            key, kind = g.keys[i], g.kinds[i]
            if kind == "module" and key in opened:
                inner = self.module(key, opened)
                title = len(module_name(key)) + 6
                return max(inner.width, title) + 2 * FRAME_X, inner.height + 2
            return self.measure(key, kind) + 4, BOX_H

        ordering = self._orders.get(module)
        if ordering is None:
            ordering = self._orders[module] = order(g)
        out = lay_out(g, size, ordering)
        self._layouts[(module, mine)] = out
        return out

    def scene(self, opened: Iterable[str] = ()) -> Scene:
        """The drawing with the `opened` modules as frames (a module opens only where its parents are open)."""
        want = frozenset(opened)
        shown = frozenset(m for m in want if all(p in want for p in _parents(m)))
        boxes: list[Box] = []
        cells: dict[int, dict[int, tuple[int, int, bool]]] = {}
        ins: set[str] = set()
        outs: set[str] = set()
        stats = [0, 0]

        def place(module: str, ox: int, oy: int, depth: int) -> None:
            lay = self.module(module, shown)
            for r in lay.routes:
                _raster(cells, [(px + ox, py + oy) for px, py in r.points], r.sides, r.back)
                outs.add(r.src if not r.back else r.dst)
                ins.add(r.dst if not r.back else r.src)
                stats[0] += 1
                stats[1] += r.back
            for it in lay.items:
                if it.kind == "module" and it.key in shown:
                    boxes.append(Box(it.key, "frame", ox + it.x, oy + it.y, it.w, it.h, it.sides, depth))
                    inner = self.module(it.key, shown)
                    ix = ox + it.x + (it.w - inner.width) // 2
                    place(it.key, ix, oy + it.y + 1, depth + 1)
                else:
                    boxes.append(Box(it.key, "op" if it.kind == "op" else "module", ox + it.x, oy + it.y, it.w, it.h,
                                     it.sides, depth))

        root = self.module("", shown)
        place("", 0, 0, 0)
        boxes = [Box(b.key, b.kind, b.x, b.y, b.w, b.h, b.sides, b.depth, b.key in ins, b.key in outs) for b in boxes]
        rows: list[list[int]] = [[] for _ in range(root.height)]
        frames = [i for i, b in enumerate(boxes) if b.kind == "frame"]  # few (the opened modules): kept apart
        for i, b in enumerate(boxes):
            if b.kind != "frame":
                for yy in range(b.y, min(b.y + b.h, root.height)):
                    rows[yy].append(i)
        return Scene(root.width, root.height, boxes, {b.key: i for i, b in enumerate(boxes)}, rows, cells,
                     frames, back_edges=stats[1], edges=stats[0])


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _raster(cells: dict[int, dict[int, tuple[int, int, bool]]], pts: list[tuple[int, int]], sides: int,
            back: bool) -> None:
    """Set the direction bits of every cell an orthogonal polyline passes through (it runs on into both boxes)."""
    t, g = (sides & TARGET) != 0, (sides & GOLDEN) != 0

    def mark(cx: int, cy: int, bits: int) -> None:
        row = cells.setdefault(cy, {})
        old = row.get(cx, (0, 0, True))
        row[cx] = (old[0] | (bits if t else 0), old[1] | (bits if g else 0), back and old[2])

    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 == x1:
            lo, hi = min(y0, y1), max(y0, y1)
            for yy in range(lo, hi + 1):
                mark(x0, yy, (N if yy > lo else 0) | (S if yy < hi else 0))
        else:
            lo, hi = min(x0, x1), max(x0, x1)
            for xx in range(lo, hi + 1):
                mark(xx, y0, (W if xx > lo else 0) | (E if xx < hi else 0))
    mark(pts[0][0], pts[0][1], N)
    mark(pts[-1][0], pts[-1][1], S)


GLYPHS = {0: " ", N: "│", S: "│", N | S: "│", E: "─", W: "─", E | W: "─", S | E: "╭", S | W: "╮", N | E: "╰",
          N | W: "╯", N | S | E: "├", N | S | W: "┤", E | W | S: "┬", E | W | N: "┴", N | S | E | W: "┼"}


def glyph(bits: int) -> str:
    """The box-drawing character for a cell connecting in the `bits` directions."""
    return GLYPHS.get(bits, "┼")


EDGE, BLANK, EDGE_ONLY = -2, -1, -3  # what `paint_row` says a cell holds besides a box's index (EDGE_ONLY: an
# edge of this side that the other side does not have)
_LINES = {"op": "╭─╮│╰╯┴┬", "frame": "╭─╮│╰╯┴┬", "module": "┏━┓┃┗┛┷┯", "absent": "╭╌╮╎╰╯╌╌"}


def paint_row(scene: Scene, y: int, x0: int, width: int, text: Callable[[Box], str],
              side: int = BOTH) -> tuple[list[str], list[int]]:
    """Row `y` of the drawing from column `x0`, `width` cells: the characters and, per cell, the index of the
    box it belongs to (`EDGE`, `BLANK`). Boxes and edges not on `side` are drawn as dashed outlines / left out."""
    chars = [" "] * width
    who = [BLANK] * width
    for cx, (bits_t, bits_g, _back) in scene.cells.get(y, {}).items():
        bits = (bits_t if side & TARGET else 0) | (bits_g if side & GOLDEN else 0)
        if bits and x0 <= cx < x0 + width:
            chars[cx - x0] = glyph(bits)
            other = bits_g if side == TARGET else bits_t if side == GOLDEN else bits
            who[cx - x0] = EDGE if bits & ~other == 0 else EDGE_ONLY
    if not 0 <= y < len(scene.rows):
        return chars, who
    crossing = [i for i in scene.frames if scene.boxes[i].y <= y < scene.boxes[i].y + scene.boxes[i].h]
    for i in [*crossing, *scene.rows[y]]:
        b = scene.boxes[i]
        if b.x >= x0 + width or b.x + b.w <= x0:
            continue
        here = bool(b.sides & side)
        lines = _LINES[b.kind if here else "absent"]
        mid = b.x + b.w // 2
        if y == b.y or y == b.y + b.h - 1:
            top = y == b.y
            row = [lines[1]] * b.w
            row[0], row[-1] = (lines[0], lines[2]) if top else (lines[4], lines[5])
            if here and (b.has_in if top else b.has_out) and b.w > 2:
                row[b.w // 2] = lines[6] if top else lines[7]
            if top and b.kind == "frame":
                title = f" {text(b)} "[: max(0, b.w - 4)]
                row[2:2 + len(title)] = list(title)
            cells = row
        elif b.kind == "frame":
            cells = None
            for cx in (b.x, b.x + b.w - 1):
                if x0 <= cx < x0 + width:
                    chars[cx - x0] = lines[3]
                    who[cx - x0] = i
        else:
            inner = text(b) if here and y == b.y + 1 else ""
            inner = inner[: b.w - 4].ljust(b.w - 4)
            cells = [lines[3], " ", *inner, " ", lines[3]]
        if cells is None:
            continue
        for k, ch in enumerate(cells):
            cx = b.x + k
            if x0 <= cx < x0 + width:
                chars[cx - x0] = ch
                who[cx - x0] = i
        del mid
    return chars, who
