"""`OpGraph`: a typed facade over a networkx multigraph of executed operators.

Node records live in a list in execution order (placeholders first); networkx holds only
ids and port-carrying edges, so `add(x, x)` is two edges and every edge names its slots.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal, Mapping

import networkx as nx

from ascend_tui.errors import InputError
from ascend_tui.evidence import SourceLocation, TensorMeta

NodeKind = Literal["op", "input", "param", "buffer", "const", "output"]
PLACEHOLDER_KINDS = frozenset({"input", "param", "buffer", "const"})
GRAPH_SCHEMA = "ascend-tui.graph/1"
NODE_COLUMNS = ("id", "op_type", "module", "index", "kind", "inputs", "outputs", "source", "phase",
                "module_class", "attrs")


@dataclass(frozen=True, slots=True)
class OpNode:
    """One executed operator (or a placeholder for a graph input, parameter, buffer or constant)."""

    id: str
    op_type: str
    module: str
    index: int
    kind: NodeKind = "op"
    inputs: tuple[TensorMeta | None, ...] = ()
    outputs: tuple[TensorMeta | None, ...] = ()
    source: SourceLocation | None = None
    phase: str = "forward"
    module_class: str = ""
    attrs: Mapping[str, Any] | None = None

    @property
    def is_placeholder(self) -> bool:
        return self.kind in PLACEHOLDER_KINDS

    @property
    def short_op(self) -> str:
        """`addmm` for `aten.addmm` — what fits a narrow column."""
        return self.op_type.rsplit(".", 1)[-1]


_SETTERS = tuple(OpNode.__dict__[name].__set__ for name in NODE_COLUMNS)  # the slots' own descriptors


def op_node(id: str, op_type: str, module: str, index: int, kind: NodeKind, inputs: tuple[TensorMeta | None, ...],
            outputs: tuple[TensorMeta | None, ...], source: SourceLocation | None, phase: str, module_class: str,
            attrs: Mapping[str, Any] | None) -> OpNode:
    """`OpNode(...)` with every field given, at a third of the cost: a frozen dataclass's `__init__` goes
    through `object.__setattr__` per field, this sets the slots directly. Live capture makes one per op."""
    node = object.__new__(OpNode)
    s = _SETTERS
    s[0](node, id)
    s[1](node, op_type)
    s[2](node, module)
    s[3](node, index)
    s[4](node, kind)
    s[5](node, inputs)
    s[6](node, outputs)
    s[7](node, source)
    s[8](node, phase)
    s[9](node, module_class)
    s[10](node, attrs)
    return node


@dataclass(frozen=True, slots=True)
class Edge:
    """A tensor from output `out_slot` of `src` into input `in_slot` of `dst`."""

    src: str
    dst: str
    out_slot: int
    in_slot: int


class OpGraph:
    """Operators in execution order plus producer -> consumer edges with slots."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._nx: nx.MultiDiGraph = nx.MultiDiGraph()
        self._nodes: list[OpNode] = []
        self._pos: dict[str, int] = {}
        self._ops: list[str] | None = None

    # -- building ---------------------------------------------------------------------------

    def add_node(self, node: OpNode) -> OpNode:
        """Add a node; ids must be unique."""
        if node.id in self._pos:
            raise ValueError(f"duplicate node id {node.id!r}")
        self._pos[node.id] = len(self._nodes)
        self._nodes.append(node)
        # What networkx's add_node does for a new id without attributes, at a fifth of its cost
        # (live capture adds a node per operator).
        g = self._nx
        g._succ[node.id] = {}
        g._pred[node.id] = {}
        g._node[node.id] = {}
        g.__networkx_cache__.clear()
        self._ops = None
        return node

    def replace_node(self, node: OpNode) -> None:
        """Swap in an updated record for an existing id (e.g. outputs known after the op ran)."""
        self._nodes[self._pos[node.id]] = node
        self._ops = None

    def add_edge(self, src: str, dst: str, out_slot: int = 0, in_slot: int = 0) -> None:
        """Connect output `out_slot` of `src` to input `in_slot` of `dst`."""
        if src not in self._pos or dst not in self._pos:
            missing = src if src not in self._pos else dst
            raise KeyError(f"unknown node {missing!r}")
        # networkx's add_edge(src, dst, key=in_slot, ...) for two existing nodes, at a third of its cost.
        g = self._nx
        keydict = g._succ[src].get(dst)
        if keydict is None:
            keydict = g._succ[src][dst] = g._pred[dst][src] = {}
        keydict[in_slot] = {"out_slot": out_slot, "in_slot": in_slot}
        g.__networkx_cache__.clear()

    # -- lookup -----------------------------------------------------------------------------

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._pos

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[OpNode]:
        return iter(self._nodes)

    def node(self, node_id: str) -> OpNode:
        """The record of `node_id`; KeyError names it when absent."""
        try:
            return self._nodes[self._pos[node_id]]
        except KeyError:
            raise KeyError(f"no operator {node_id!r} in the graph") from None

    def get(self, node_id: str | None) -> OpNode | None:
        if node_id is None:
            return None
        pos = self._pos.get(node_id)
        return None if pos is None else self._nodes[pos]

    @property
    def nx(self) -> nx.MultiDiGraph:
        """The underlying networkx graph (ids only; edge data `out_slot`, `in_slot`)."""
        return self._nx

    @property
    def nodes(self) -> list[OpNode]:
        """All nodes in the order they were first seen (a placeholder just before its first reader)."""
        return self._nodes

    def edge_count(self) -> int:
        return self._nx.number_of_edges()

    def edges(self) -> Iterator[Edge]:
        for src, dst, data in self._nx.edges(data=True):
            yield Edge(src, dst, data["out_slot"], data["in_slot"])

    # -- walks ------------------------------------------------------------------------------

    def producers(self, node_id: str) -> list[Edge]:
        """Edges into `node_id`, by input slot: who made each input."""
        edges = [Edge(src, node_id, d["out_slot"], d["in_slot"])
                 for src, _, d in self._nx.in_edges(node_id, data=True)]
        return sorted(edges, key=lambda e: e.in_slot)

    def producer(self, node_id: str, slot: int) -> str | None:
        """The node that made input `slot` of `node_id`, if any."""
        for edge in self.producers(node_id):
            if edge.in_slot == slot:
                return edge.src
        return None

    def consumers(self, node_id: str) -> list[Edge]:
        """Edges out of `node_id`, in the consumers' execution order."""
        edges = [Edge(node_id, dst, d["out_slot"], d["in_slot"])
                 for _, dst, d in self._nx.out_edges(node_id, data=True)]
        return sorted(edges, key=lambda e: (self._pos[e.dst], e.in_slot))

    def upstream(self, node_id: str, depth: int | None = None) -> list[str]:
        """Every ancestor within `depth` hops (all when None), nearest first."""
        return self._bfs(node_id, depth, self._nx.predecessors)

    def downstream(self, node_id: str, depth: int | None = None) -> list[str]:
        """Every descendant within `depth` hops (all when None), nearest first."""
        return self._bfs(node_id, depth, self._nx.successors)

    def _bfs(self, start: str, depth: int | None, step: Any) -> list[str]:
        self.node(start)
        # networkx's adjacency dicts hold each neighbour once; reading them directly (not through
        # predecessors()/successors() and a set) keeps a full walk of a 100k-node graph under 100 ms.
        adj = self._nx._pred if step == self._nx.predecessors else self._nx._succ
        pos = self._pos.__getitem__
        seen = {start}
        frontier = [start]
        out: list[str] = []
        hops = 0
        while frontier and (depth is None or hops < depth):
            nxt: list[str] = []
            for nid in frontier:
                nbrs = adj[nid]
                if len(nbrs) == 1:
                    ordered: Any = nbrs
                elif len(nbrs) == 2:  # joins: the common case past a single producer, no sort needed
                    a, b = nbrs
                    ordered = (a, b) if pos(a) > pos(b) else (b, a)
                else:
                    ordered = sorted(nbrs, key=pos, reverse=True)
                for other in ordered:
                    if other not in seen:
                        seen.add(other)
                        nxt.append(other)
            out.extend(nxt)
            frontier = nxt
            hops += 1
        return out

    def sources(self) -> list[str]:
        """Nodes nothing feeds: graph inputs, parameters, constants, factory ops."""
        return [n.id for n in self._nodes if self._nx.in_degree(n.id) == 0]

    def path_to_sources(self, node_id: str, limit: int = 64) -> list[list[str]]:
        """Paths from `node_id` back to source nodes (node first), at most `limit` of them, shortest first."""
        self.node(node_id)
        paths: list[list[str]] = []
        stack: list[list[str]] = [[node_id]]
        while stack and len(paths) < limit:
            path = stack.pop()
            preds = sorted(set(self._nx.predecessors(path[-1])), key=self._pos.__getitem__)
            if not preds:
                paths.append(path)
                continue
            for p in preds:
                if p not in path:
                    stack.append(path + [p])
        return sorted(paths, key=len)

    def execution_order(self) -> list[str]:
        """Operator ids in the order they ran (placeholders excluded)."""
        if self._ops is None:
            ops = [n for n in self._nodes if not n.is_placeholder]
            ops.sort(key=lambda n: n.index)
            self._ops = [n.id for n in ops]
        return self._ops

    def topological_order(self) -> list[str]:
        """All ids so that producers come before consumers; ties broken by execution order."""
        return list(nx.lexicographical_topological_sort(self._nx, key=self._pos.__getitem__))

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
        found: set[str] = set()
        for n in self._nodes:
            if n.is_placeholder or not n.module:
                continue
            parts = n.module.split(".")
            for i in range(1, len(parts) + 1):
                found.add(".".join(parts[:i]))
        return sorted(found)

    def find(self, text: str) -> list[str]:
        """Ids whose id, module or op type contains `text` (case-insensitive), in graph order."""
        needle = text.lower()
        return [n.id for n in self._nodes
                if needle in n.id.lower() or needle in n.op_type.lower() or needle in n.module.lower()]

    # -- persistence ------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """Columnar JSON: tensor types and source locations interned in tables, edges by node position."""
        metas: dict[TensorMeta, int] = {}
        sources: dict[SourceLocation, int] = {}

        def meta_ref(m: TensorMeta | None) -> int:
            return -1 if m is None else metas.setdefault(m, len(metas))

        def source_ref(src: SourceLocation | None) -> int:
            return -1 if src is None else sources.setdefault(src, len(sources))

        rows = [[n.id, n.op_type, n.module, n.index, n.kind, [meta_ref(m) for m in n.inputs],
                 [meta_ref(m) for m in n.outputs], source_ref(n.source), n.phase, n.module_class,
                 dict(n.attrs) if n.attrs else None] for n in self._nodes]
        pos = self._pos
        edges = [[pos[u], pos[v], d["out_slot"], d["in_slot"]] for u, v, d in self._nx.edges(data=True)]
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
                OpNode(str(nid), str(op), str(mod), int(idx), kind,
                       tuple(metas[i] if i >= 0 else None for i in ins),
                       tuple(metas[i] if i >= 0 else None for i in outs),
                       sources[src] if src >= 0 else None, str(phase), str(mclass), attrs)
                for nid, op, mod, idx, kind, ins, outs, src, phase, mclass, attrs in data["nodes"]
            ]
            graph._bulk_load(nodes, data["edges"])
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise InputError(path, f"graph is malformed: {type(exc).__name__}: {exc}") from None
        return graph

    def _bulk_load(self, nodes: list[OpNode], edges: list[list[int]]) -> None:
        """Add many nodes and position-addressed edges at once (saved graphs of 100k ops load in bulk)."""
        self._nodes = nodes
        self._pos = {n.id: i for i, n in enumerate(nodes)}
        if len(self._pos) != len(nodes):
            raise ValueError("duplicate node ids")
        ids = [n.id for n in nodes]
        self._add_ids(ids)
        self._fill_edges((ids[s], ids[d], o, i) for s, d, o, i in edges)

    def add_bulk(self, nodes: Iterable[OpNode], edges: Iterable[tuple[str, str, int, int]] = ()) -> None:
        """Add many nodes, then many `(src, dst, out_slot, in_slot)` edges, at once (readers of 100k-op graphs)."""
        new = list(nodes)
        start = len(self._nodes)
        for i, n in enumerate(new, start):
            if self._pos.setdefault(n.id, i) != i:
                for m in new[:i - start]:
                    del self._pos[m.id]
                raise ValueError(f"duplicate node id {n.id!r}")
        self._nodes.extend(new)
        self._add_ids([n.id for n in new])
        self._fill_edges(edges)

    def _add_ids(self, ids: list[str]) -> None:
        """Add node ids as MultiDiGraph.add_node does (an attribute dict and two adjacency dicts each), in bulk."""
        g = self._nx
        node, succ, pred = g._node, g._succ, g._pred
        for nid in ids:
            if nid not in node:
                node[nid] = {}
                succ[nid] = {}
                pred[nid] = {}
        g.__dict__.pop("nodes", None)  # networkx caches views; a fresh one sees the new nodes

    def _fill_edges(self, edges: Iterable[tuple[str, str, int, int]]) -> None:
        # networkx's add_edges_from costs ~10 us an edge; filling its adjacency the way
        # MultiDiGraph.add_edge does (one key dict shared by _succ and _pred) costs ~1 us.
        succ, pred = self._nx._succ, self._nx._pred
        for u, v, o, i in edges:
            slot = int(i)
            out = succ.get(u)
            if out is None or v not in pred:
                self._ops = None
                raise KeyError(f"unknown node {u if out is None else v!r}")
            keydict = out.get(v)
            if keydict is None:
                keydict = out[v] = pred[v][u] = {}
            keydict[slot] = {"out_slot": int(o), "in_slot": slot}
        self._ops = None

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


def derive(node: OpNode, **changes: Any) -> OpNode:
    """A copy of `node` with some fields changed."""
    return replace(node, **changes)


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
