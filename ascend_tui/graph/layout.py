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

import bisect
from dataclasses import dataclass
from typing import Callable, Iterable, Literal

import numpy as np

from ascend_tui.fmt import count
from ascend_tui.graph.drawing import Box, Scene, raster
from ascend_tui.graph.hierarchy import Hierarchy, cut, module_name

BOX_H = 3  # border, label, border
GAP_X = 2  # columns between two boxes of a layer
FRAME_X = 2  # an opened module's frame: border and one blank column on each side
ItemKind = Literal["op", "module", "virtual"]


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
    # an item with no edge here sits in the layer of the item that ran just before it (not all at the top)
    lone = {v for v in range(len(g.keys)) if dag.degree(v) == 0}
    if lone and len(lone) < len(g.keys):
        placed = sorted((g.order[v], v) for v in range(len(g.keys)) if v not in lone)
        for v in sorted(lone, key=lambda v: (g.order[v], v)):
            k = bisect.bisect_left(placed, (g.order[v], v))
            layer[v] = layer[placed[max(0, k - 1)][1]]
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
    # virtual points start under their producer: sort each layer by the barycenter of the layer above,
    # then sweep up and down; the order with the fewest crossings is kept
    best = [list(row) for row in layers]
    fewest = _crossings(layers, down, rank)
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
        found = _crossings(layers, down, rank)
        if found < fewest:
            fewest, best = found, [list(row) for row in layers]
        if not found:
            break
    layers = best
    return Ordering(n, kinds, lay, sides, up, down, chains, layers)


def _crossings(layers: list[list[int]], down: list[list[int]], rank: list[int]) -> int:
    """How many pairs of edges cross between adjacent layers (inversions of the lower ends, by upper end)."""
    total = 0
    for row in layers[:-1]:
        ends = [rank[v] for u in sorted(row, key=lambda u: rank[u]) for v in sorted(down[u], key=lambda v: rank[v])]
        seen: list[int] = []
        for e in ends:  # edges that started left of this one and end right of it
            total += len(seen) - bisect.bisect_right(seen, e)
            bisect.insort(seen, e)
    return total


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
        mine = frozenset(m for m in opened if self.h.within(m, module))
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
        shown = frozenset(m for m in want if m in self.h.code and all(p in want for p in self.h.ancestors(m)))
        boxes: list[Box] = []
        cells: dict[int, dict[int, tuple[int, int, bool]]] = {}
        ins: set[str] = set()
        outs: set[str] = set()
        touching: dict[str, list[list[tuple[int, int]]]] = {}
        stats = [0, 0]

        def place(module: str, ox: int, oy: int, depth: int) -> None:
            lay = self.module(module, shown)
            for r in lay.routes:
                pts = [(px + ox, py + oy) for px, py in r.points]
                raster(cells, pts, r.sides, r.back)
                touching.setdefault(r.src, []).append(pts)
                touching.setdefault(r.dst, []).append(pts)
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
                     frames, back_edges=stats[1], edges=stats[0], routes=touching)
