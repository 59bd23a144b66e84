"""`OpGraph`: executed operators and the port-carrying edges between them, walkable at 100k nodes.

Node records live in a list in execution order (placeholders first); edges are tuples of node
positions and slots in per-node lists, so `add(x, x)` is two edges and every edge names its
slots. `OpGraph.nx` gives the same graph as a networkx `MultiDiGraph` when a caller wants one.
A reader that knows how many edges it will make may hand over a linker instead (`adopt_unlinked`):
the lists are made when anything first reads them, so `ascend-tui graph` prints the count alone.
"""

from __future__ import annotations

import heapq
import json
import threading
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

from ascend_tui.errors import InputError
from ascend_tui.evidence import SourceLocation, TensorMeta
from ascend_tui.graph.node import NODE_COLUMNS, PLACEHOLDER_KINDS, Edge, NodeKind, OpNode, derive, op_node, op_nodes
from ascend_tui.graph.pending_shapes import PendingShapes, Resolver

if TYPE_CHECKING:
    import networkx as nx
    from ascend_tui.progress import Progress  # imported where `nx` is built: ~0.2 s that opening a file does not need

GRAPH_SCHEMA = "ascend-tui.graph/1"
EdgeLists = list[list[tuple[int, int, int, int]]]
Linker = Callable[[], tuple[EdgeLists, EdgeLists]]  # (ins, outs) as `OpGraph.adopt` takes them
_ID = attrgetter("id")
__all__ = ["GRAPH_SCHEMA", "NODE_COLUMNS", "PLACEHOLDER_KINDS", "Edge", "NodeKind", "OpGraph", "OpNode", "derive",
           "op_node", "op_nodes", "read_json", "write_json_atomic"]


class OpGraph:
    """Operators in execution order plus producer -> consumer edges with slots."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._nodes: list[OpNode] = []
        self._pos: dict[str, int] = {}
        # Edges by node position, one shared (src, dst, out_slot, in_slot) tuple per edge, listed in
        # the consumer's `_ins` and the producer's `_outs` in the order they were added. Plain lists
        # of ints build and walk several times faster than networkx's dicts of dicts at 100k nodes.
        self._ins: list[list[tuple[int, int, int, int]]] = []
        self._outs: list[list[tuple[int, int, int, int]]] = []
        self._edge_count = 0
        self._version = 0
        self._ops: list[str] | None = None
        self._nx: nx.MultiDiGraph | None = None
        self._nx_version = -1
        self._pending: PendingShapes | None = None
        # (lock, link) of a graph adopted unlinked (`adopt_unlinked`): `_ins` and `_outs` are absent from the
        # instance until `link()` makes them, on the first read of either (`__getattr__`).
        self._linking: tuple[threading.Lock, Linker] | None = None

    # -- building ---------------------------------------------------------------------------

    def add_node(self, node: OpNode) -> OpNode:
        """Add a node; ids must be unique."""
        if node.id in self._pos:
            raise ValueError(f"duplicate node id {node.id!r}")
        self._pos[node.id] = len(self._nodes)
        self._nodes.append(node)
        self._ins.append([])
        self._outs.append([])
        self._version += 1
        self._ops = None
        return node

    def replace_node(self, node: OpNode) -> None:
        """Swap in an updated record for an existing id (e.g. outputs known after the op ran)."""
        self._nodes[self._pos[node.id]] = node
        self._ops = None

    def add_edge(self, src: str, dst: str, out_slot: int = 0, in_slot: int = 0) -> None:
        """Connect output `out_slot` of `src` to input `in_slot` of `dst` (again: the new `out_slot` wins)."""
        s, d = self._pos.get(src), self._pos.get(dst)
        if s is None or d is None:
            raise KeyError(f"unknown node {src if s is None else dst!r}")
        edge = (s, d, int(out_slot), int(in_slot))
        into = self._ins[d]
        for old in into:  # what _fill_edges does for one edge, without its loop (live capture: one call an edge)
            if old[3] == edge[3] and old[0] == s:
                into[into.index(old)] = edge
                out = self._outs[s]
                out[out.index(old)] = edge
                break
        else:
            into.append(edge)
            self._outs[s].append(edge)
            self._edge_count += 1
        self._version += 1

    def add_fed(self, node: OpNode, sources: Iterable[tuple[str, int]]) -> OpNode:
        """Add a new node fed by `sources` (input k reads output `sources[k][1]` of node `sources[k][0]`).

        What `add_node` and one `add_edge` per input do, without `add_edge`'s search for an
        edge the new node cannot have yet (a live capture adds one node and its inputs per op).
        """
        pos = self._pos
        if node.id in pos:
            raise ValueError(f"duplicate node id {node.id!r}")
        d = len(self._nodes)
        into: list[tuple[int, int, int, int]] = []
        outs = self._outs
        for k, (src, slot) in enumerate(sources):
            s = pos.get(src)
            if s is None:
                raise KeyError(f"unknown node {src!r}")
            edge = (s, d, slot, k)
            into.append(edge)
            outs[s].append(edge)
        pos[node.id] = d
        self._nodes.append(node)
        self._ins.append(into)
        outs.append([])
        self._edge_count += len(into)
        self._version += 1
        self._ops = None
        return node

    def add_bulk(self, nodes: Iterable[OpNode], edges: Iterable[tuple[Any, Any, int, int]] = (), *,
                 by_position: bool = False) -> None:
        """Add many nodes, then many `(src, dst, out_slot, in_slot)` edges, at once (readers of 100k-op graphs).

        Edge ends are node ids, or with `by_position` positions in the graph after the add (indices into
        `nodes` when the graph was empty: a reader that numbered its nodes itself skips two id lookups)."""
        new = list(nodes)
        start, pos = len(self._nodes), self._pos
        ids = [n.id for n in new]
        fresh = dict(zip(ids, range(start, start + len(new))))
        if len(fresh) != len(new) or not fresh.keys().isdisjoint(pos):
            seen = set(pos)
            for nid in ids:
                if nid in seen:
                    raise ValueError(f"duplicate node id {nid!r}")
                seen.add(nid)
        pos.update(fresh)
        self._append_nodes(new)
        self._fill_edges(edges, None if by_position else self._pos)

    def adopt(self, nodes: list[OpNode], ins: list[list[tuple[int, int, int, int]]],
              outs: list[list[tuple[int, int, int, int]]]) -> None:
        """Fill an empty graph with a reader's nodes and the edge lists it built while reading, as they are.

        `ins[p]` lists the `(src, dst, out_slot, in_slot)` position tuples into node `p`, `outs[p]` the same
        tuples out of it in the order they were made, no two with the same ends and input slot: what
        `add_bulk(nodes, edges, by_position=True)` would build, without its per-edge work (160k edges)."""
        if self._nodes:
            raise ValueError("adopt() fills an empty graph")
        if not len(nodes) == len(ins) == len(outs):
            raise ValueError(f"{len(nodes)} nodes but edge lists for {len(ins)} and {len(outs)}")
        self._adopt_nodes(nodes)
        self._ins, self._outs = ins, outs
        self._edge_count = sum(map(len, ins))

    def adopt_unlinked(self, nodes: list[OpNode], edge_count: int, link: Linker) -> None:
        """`adopt(nodes, *link())`, with `link()` called the first time anything reads an edge (once, under a
        lock): a reader whose `edge_count` edges are known but not yet made (`ascend-tui graph` prints the count
        and reads no edge). `link()` must return what `adopt` takes, `edge_count` edges in all."""
        if self._nodes:
            raise ValueError("adopt() fills an empty graph")
        self._adopt_nodes(nodes)
        del self._ins, self._outs  # made by `__getattr__` on first read
        self._linking = (threading.Lock(), link)
        self._edge_count = edge_count

    def __getattr__(self, name: str) -> Any:
        """`_ins` and `_outs` of a graph adopted unlinked: made on the first read of either, by one thread."""
        if name == "_ins" or name == "_outs":
            found = self.__dict__
            linking = found.get("_linking")
            if linking is not None:
                with linking[0]:
                    if "_outs" not in found:
                        ins, outs = linking[1]()
                        if not len(ins) == len(outs) == len(self._nodes):
                            raise ValueError(f"{len(self._nodes)} nodes but edge lists for {len(ins)} and "
                                             f"{len(outs)}")
                        self._ins, self._outs = ins, outs
                    self._linking = None
            if name in found:
                return found[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def edges_pending(self) -> bool:
        """True while the edges of a graph adopted unlinked are still to be made (their count is known)."""
        return self._linking is not None

    def _adopt_nodes(self, nodes: list[OpNode]) -> None:
        pos = dict(zip(map(_ID, nodes), range(len(nodes))))
        if len(pos) != len(nodes):
            seen: set[str] = set()
            for n in nodes:
                if n.id in seen:
                    raise ValueError(f"duplicate node id {n.id!r}")
                seen.add(n.id)
        self._nodes, self._pos = nodes, pos
        self._version += 1
        self._ops = None

    def _bulk_load(self, nodes: list[OpNode], edges: Iterable[list[int]]) -> None:
        """Add many nodes and position-addressed edges at once (saved graphs of 100k ops load in bulk)."""
        pos = {n.id: i for i, n in enumerate(nodes)}
        if len(pos) != len(nodes):
            raise ValueError("duplicate node ids")
        self._nodes, self._pos, self._ins, self._outs, self._edge_count = [], pos, [], [], 0
        self._append_nodes(nodes)
        self._fill_edges(edges, None)

    def _append_nodes(self, nodes: list[OpNode]) -> None:
        self._nodes.extend(nodes)
        self._ins += [[] for _ in nodes]
        self._outs += [[] for _ in nodes]
        self._version += 1
        self._ops = None

    def _fill_edges(self, edges: Iterable[Any], pos: Mapping[str, int] | None) -> None:
        """Add `(src, dst, out_slot, in_slot)` edges, ends named by id through `pos` or (None) by position;
        an edge with the same ends and input slot as an existing one replaces it in place."""
        ins, outs, count, added = self._ins, self._outs, len(self._ins), 0
        try:
            for edge in edges:
                u, v, o, i = edge
                if pos is None:
                    s, d = u, v
                    if s < 0 or d < 0 or s >= count or d >= count:
                        raise IndexError(f"edge {s} -> {d} names a node position outside 0..{count - 1}")
                    if type(edge) is not tuple or type(o) is not int or type(i) is not int:
                        edge = (s, d, int(o), int(i))
                else:
                    s, d = pos.get(u), pos.get(v)
                    if s is None or d is None:
                        raise KeyError(f"unknown node {u if s is None else v!r}")
                    edge = (s, d, int(o), int(i))
                into = ins[d]
                slot = edge[3]
                for old in into:  # usually one or two inputs to look at, often none
                    if old[3] == slot and old[0] == s:
                        into[into.index(old)] = edge
                        out = outs[s]
                        out[out.index(old)] = edge
                        break
                else:
                    into.append(edge)
                    outs[s].append(edge)
                    added += 1
        finally:
            self._edge_count += added
            self._version += 1

    # -- lookup -----------------------------------------------------------------------------

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._pos

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[OpNode]:
        if self._pending is not None:
            self.resolve_shapes()
        return iter(self._nodes)

    # -- tensor shapes a reader left to work out on request (`pending_shapes.py`) -------------

    def defer_shapes(self, resolve: Resolver) -> None:
        """Have `resolve` fill in the nodes' tensors the first time anything reads them."""
        self._pending = PendingShapes(resolve)

    @property
    def shapes_pending(self) -> bool:
        """True while the tensors of some nodes are still to be worked out (never shown as absent)."""
        return self._pending is not None

    def resolve_shapes(self, progress: Progress | None = None) -> None:
        """Work the deferred shapes out now (once; other threads asking meanwhile wait for it)."""
        pending = self._pending
        if pending is None:
            return
        pending.run(self._nodes, progress)
        self._pending = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a process pool, a deep copy) with its shapes worked out and edges made: a pending resolver
        and a pending linker hold locks."""
        self.resolve_shapes()
        self._outs  # noqa: B018 - makes pending edges
        return {**self.__dict__, "_pending": None, "_linking": None}

    def structure(self) -> list[OpNode]:
        """The node records without working out deferred shapes: for callers that read no tensor metadata."""
        return self._nodes

    def node(self, node_id: str) -> OpNode:
        """The record of `node_id`; KeyError names it when absent."""
        if self._pending is not None:
            self.resolve_shapes()
        try:
            return self._nodes[self._pos[node_id]]
        except KeyError:
            raise KeyError(f"no operator {node_id!r} in the graph") from None

    def get(self, node_id: str | None) -> OpNode | None:
        if node_id is None:
            return None
        if self._pending is not None:
            self.resolve_shapes()
        pos = self._pos.get(node_id)
        return None if pos is None else self._nodes[pos]

    def _at(self, node_id: str) -> int:
        """Position of `node_id`; KeyError names it when absent."""
        pos = self._pos.get(node_id)
        if pos is None:
            raise KeyError(f"no operator {node_id!r} in the graph")
        return pos

    @property
    def nx(self) -> nx.MultiDiGraph:
        """The graph as a networkx `MultiDiGraph` (ids only; edges keyed by input slot, data `out_slot`,
        `in_slot`), built on first use after each change: a copy to read, not to edit."""
        if self._nx is None or self._nx_version != self._version:
            import networkx as nx

            g = nx.MultiDiGraph()
            # What add_node/add_edge do for new ids and keyed edges, without their per-call checks.
            node, succ, pred = g._node, g._succ, g._pred
            ids = [n.id for n in self._nodes]
            for nid in ids:
                node[nid] = {}
                succ[nid] = {}
                pred[nid] = {}
            for e in self.edges():
                keydict = succ[e.src].get(e.dst)
                if keydict is None:
                    keydict = succ[e.src][e.dst] = pred[e.dst][e.src] = {}
                keydict[e.in_slot] = {"out_slot": e.out_slot, "in_slot": e.in_slot}
            self._nx, self._nx_version = g, self._version
        return self._nx

    @property
    def nodes(self) -> list[OpNode]:
        """All nodes in the order they were first seen (a placeholder just before its first reader)."""
        if self._pending is not None:
            self.resolve_shapes()
        return self._nodes

    def edge_count(self) -> int:
        return self._edge_count

    def in_degree(self, node_id: str) -> int:
        """How many edges feed `node_id` (the same tensor read twice counts twice)."""
        return len(self._ins[self._at(node_id)])

    def out_degree(self, node_id: str) -> int:
        """How many edges leave `node_id`."""
        return len(self._outs[self._at(node_id)])

    def edges(self) -> Iterator[Edge]:
        """Every edge, by producer in graph order, then consumer as first linked, then input slot as added
        (networkx's order, so saved graphs read the same as before)."""
        nodes = self._nodes
        for s, d, o, i in self._edge_tuples():
            yield Edge(nodes[s].id, nodes[d].id, o, i)

    def _edge_tuples(self) -> Iterator[tuple[int, int, int, int]]:
        for outs in self._outs:
            if len(outs) > 1:
                first: dict[int, int] = {}
                for e in outs:
                    first.setdefault(e[1], len(first))
                if len(first) > 1:
                    outs = sorted(outs, key=lambda e: first[e[1]])
            yield from outs

    # -- walks ------------------------------------------------------------------------------

    def producers(self, node_id: str) -> list[Edge]:
        """Edges into `node_id`, by input slot: who made each input."""
        nodes = self._nodes
        edges = [Edge(nodes[s].id, node_id, o, i) for s, _, o, i in self._ins[self._at(node_id)]]
        return sorted(edges, key=lambda e: e.in_slot)

    def producer(self, node_id: str, slot: int) -> str | None:
        """The node that made input `slot` of `node_id`, if any."""
        for edge in self.producers(node_id):
            if edge.in_slot == slot:
                return edge.src
        return None

    def consumers(self, node_id: str) -> list[Edge]:
        """Edges out of `node_id`, in the consumers' execution order."""
        nodes = self._nodes
        outs = sorted(self._outs[self._at(node_id)], key=lambda e: (e[1], e[3]))
        return [Edge(node_id, nodes[d].id, o, i) for _, d, o, i in outs]

    def upstream(self, node_id: str, depth: int | None = None) -> list[str]:
        """Every ancestor within `depth` hops (all when None), nearest first; within a hop, later nodes first."""
        return self._bfs(node_id, depth, self._ins, 0)

    def downstream(self, node_id: str, depth: int | None = None) -> list[str]:
        """Every descendant within `depth` hops (all when None), nearest first; within a hop, later nodes first."""
        return self._bfs(node_id, depth, self._outs, 1)

    def _bfs(self, start: str, depth: int | None, adj: list[list[tuple[int, int, int, int]]], end: int
             ) -> list[str]:
        """Breadth-first over node positions; each hop's neighbours of one node in descending position."""
        first = self._at(start)
        seen = bytearray(len(self._nodes))
        seen[first] = 1
        frontier = [first]
        out: list[int] = []
        hops = 0
        while frontier and (depth is None or hops < depth):
            nxt: list[int] = []
            append = nxt.append
            for p in frontier:
                edges = adj[p]
                n = len(edges)
                if n == 1:
                    q = edges[0][end]
                    if not seen[q]:
                        seen[q] = 1
                        append(q)
                elif n == 2:  # joins, and a tensor read twice: the common case past one neighbour
                    q, r = edges[0][end], edges[1][end]
                    if q < r:
                        q, r = r, q
                    if not seen[q]:
                        seen[q] = 1
                        append(q)
                    if not seen[r]:
                        seen[r] = 1
                        append(r)
                elif n:
                    for q in sorted({e[end] for e in edges}, reverse=True):
                        if not seen[q]:
                            seen[q] = 1
                            append(q)
            out += nxt
            frontier = nxt
            hops += 1
        nodes = self._nodes
        return [nodes[q].id for q in out]

    def sources(self) -> list[str]:
        """Nodes nothing feeds: graph inputs, parameters, constants, factory ops."""
        return [n.id for n, ins in zip(self._nodes, self._ins) if not ins]

    def path_to_sources(self, node_id: str, limit: int = 64) -> list[list[str]]:
        """Paths from `node_id` back to source nodes (node first), at most `limit` of them, shortest first."""
        ins, nodes = self._ins, self._nodes
        paths: list[list[int]] = []
        stack: list[list[int]] = [[self._at(node_id)]]
        while stack and len(paths) < limit:
            path = stack.pop()
            preds = sorted({e[0] for e in ins[path[-1]]})
            if not preds:
                paths.append(path)
                continue
            for p in preds:
                if p not in path:
                    stack.append(path + [p])
        return [[nodes[p].id for p in path] for path in sorted(paths, key=len)]

    def execution_order(self) -> list[str]:
        """Operator ids in the order they ran (placeholders excluded)."""
        if self._ops is None:
            ops = [n for n in self._nodes if not n.is_placeholder]
            ops.sort(key=lambda n: n.index)
            self._ops = [n.id for n in ops]
        return self._ops

    def topological_order(self) -> list[str]:
        """All ids so that producers come before consumers; ties broken by position (networkx's
        lexicographical topological sort keyed by position, which raises `NetworkXUnfeasible` on a cycle)."""
        waiting = [len(ins) for ins in self._ins]
        ready = [p for p, n in enumerate(waiting) if n == 0]
        heapq.heapify(ready)
        order: list[int] = []
        outs = self._outs
        while ready:
            p = heapq.heappop(ready)
            order.append(p)
            for e in outs[p]:
                d = e[1]
                waiting[d] -= 1
                if waiting[d] == 0:
                    heapq.heappush(ready, d)
        if len(order) != len(self._nodes):
            import networkx as nx

            raise nx.NetworkXUnfeasible("Graph contains a cycle or graph changed during iteration")
        nodes = self._nodes
        return [nodes[p].id for p in order]

    def position(self, node_id: str) -> int:
        """Position of `node_id` in `nodes`."""
        return self._pos[node_id]

    def module_nodes(self, module: str) -> list[str]:
        """Operators executed by `module` or any module inside it, in execution order."""
        if module == "":
            return list(self.execution_order())
        prefix = module + "."
        return [nid for nid in self.execution_order()
                if (m := self._nodes[self._pos[nid]].module) == module or m.startswith(prefix)]

    def modules(self) -> list[str]:
        """Every module path that ran an operator, plus all their ancestors, sorted."""
        ran = {n.module for n in self._nodes if n.module and n.kind not in PLACEHOLDER_KINDS}
        found = set(ran)
        for module in ran:  # each ancestor once: a parent already found has its own ancestors added in its turn
            while "." in module:
                module = module.rpartition(".")[0]
                if module in found:
                    break
                found.add(module)
        return sorted(found)

    def find(self, text: str) -> list[str]:
        """Ids whose id, module or op type contains `text` (case-insensitive), in graph order."""
        needle = text.lower()
        return [n.id for n in self._nodes
                if needle in n.id.lower() or needle in n.op_type.lower() or needle in n.module.lower()]

    # -- persistence ------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """Columnar JSON: tensor types and source locations interned in tables, edges by node position."""
        self.resolve_shapes()
        metas: dict[TensorMeta, int] = {}
        sources: dict[SourceLocation, int] = {}

        def meta_ref(m: TensorMeta | None) -> int:
            return -1 if m is None else metas.setdefault(m, len(metas))

        def source_ref(src: SourceLocation | None) -> int:
            return -1 if src is None else sources.setdefault(src, len(sources))

        rows = [[n.id, n.op_type, n.module, n.index, n.kind, [meta_ref(m) for m in n.inputs],
                 [meta_ref(m) for m in n.outputs], source_ref(n.source), n.phase, n.module_class,
                 dict(n.attrs) if n.attrs else None] for n in self._nodes]
        edges = [[s, d, o, i] for s, d, o, i in self._edge_tuples()]
        return {
            "schema": GRAPH_SCHEMA,
            "name": self.name,
            "columns": list(NODE_COLUMNS),
            "metas": [m.to_json() for m in metas],
            "sources": [src.to_json() for src in sources],
            "nodes": rows,
            "edges": edges,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, path: str = "") -> OpGraph:
        if not isinstance(data, Mapping) or data.get("schema") != GRAPH_SCHEMA:
            raise InputError(path, f"not an ascend-tui graph (expected schema {GRAPH_SCHEMA!r})")
        graph = cls(str(data.get("name", "")))
        try:
            metas = [TensorMeta.from_json(m) for m in data.get("metas", [])]
            sources = [SourceLocation.from_json(x) for x in data.get("sources", [])]
            nodes = [
                op_node(str(nid), str(op), str(mod), int(idx), kind,
                       tuple(metas[i] if i >= 0 else None for i in ins),
                       tuple(metas[i] if i >= 0 else None for i in outs),
                       sources[src] if src >= 0 else None, str(phase), str(mclass), attrs)
                for nid, op, mod, idx, kind, ins, outs, src, phase, mclass, attrs in data["nodes"]
            ]
            graph._bulk_load(nodes, data["edges"])
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise InputError(path, f"graph is malformed: {type(exc).__name__}: {exc}") from None
        return graph

    def save(self, path: str | Path) -> None:
        """Write the graph as JSON (atomically: a crash never leaves half a file)."""
        write_json_atomic(Path(path), self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> OpGraph:
        return cls.from_json(read_json(Path(path)), path=str(path))

    def with_nodes(self, nodes: Iterable[OpNode]) -> None:
        """Replace several node records at once."""
        for n in nodes:
            self.replace_node(n)


def read_json(path: Path) -> Any:
    """Read a JSON file, turning every failure into one `InputError` line naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except IsADirectoryError:
        raise InputError(path, "is a folder, expected a JSON file") from None
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not a text file (byte {exc.start} is not UTF-8)") from None
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"invalid JSON: {exc.msg}", where=f"{exc.lineno}:{exc.colno}") from None


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON next to `path` and rename over it, so readers never see half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, separators=(",", ":"), allow_nan=False), encoding="utf-8")
    tmp.replace(path)
