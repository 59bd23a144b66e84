"""What `ascend-tui graph` prints and exports: a graph's shape in numbers, and the graph as node-link JSON.

The node-link form is the one `networkx.node_link_graph(data, edges="links")` reads back, with
every node's record (op type, module, tensors, source, reader attrs) and every edge's slots, so
other tools (Netron-style viewers, notebooks) can take the graph as we read it.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from functools import partial
from json.encoder import encode_basestring_ascii
from operator import attrgetter
from typing import Any

from ascend_tui.graph.opgraph import PLACEHOLDER_KINDS, Edge, OpGraph, OpNode

INFERRED_MATCHES = frozenset({"stats", "view", "cast", "param", "param-cast"})
NODE_LINK_SCHEMA = "ascend-tui.node-link/1"
_KIND, _OP_TYPE, _MODULE = attrgetter("kind"), attrgetter("op_type"), attrgetter("module")
_DUMP = partial(json.dumps, separators=(",", ":"), allow_nan=False)  # what the file is written with


@dataclass(frozen=True, slots=True)
class GraphSummary:
    """Counts a person checks first when a graph file is opened."""

    nodes: int
    operators: int
    edges: int
    placeholders: dict[str, int]
    op_types: list[tuple[str, int]]
    modules: int
    module_depth: int
    inferred_edges: int
    inferred_modules: int
    control_edges: int

    def to_json(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "operators": self.operators, "edges": self.edges,
                "placeholders": self.placeholders, "op_types": dict(self.op_types), "modules": self.modules,
                "module_depth": self.module_depth, "inferred_edges": self.inferred_edges,
                "inferred_modules": self.inferred_modules, "control_edges": self.control_edges}


def is_inferred(graph: OpGraph, edge: Edge) -> bool:
    """True when a reader recovered this edge from matching values (msprobe dumps), not from the file's own links."""
    attrs = graph.node(edge.dst).attrs or {}
    how = attrs.get("edge_match")
    return isinstance(how, list) and 0 <= edge.in_slot < len(how) and how[edge.in_slot] in INFERRED_MATCHES


def summarize(graph: OpGraph) -> GraphSummary:
    """Node, edge, op-type and module counts of `graph` (no tensor metadata: deferred shapes stay deferred)."""
    nodes = graph.structure()
    kinds = Counter(map(_KIND, nodes))
    placeholders = {k: v for k, v in kinds.items() if k in PLACEHOLDER_KINDS}
    ops = [n for n in nodes if n.kind not in PLACEHOLDER_KINDS] if placeholders else nodes
    types = Counter(map(_OP_TYPE, ops))
    modules, depth = _module_tree(ops)
    inferred = control = inferred_modules = 0
    for n in nodes:  # only nodes with attrs can hold any of these: no pass over every edge
        attrs = n.attrs
        if not attrs or (len(attrs) == 1 and "name" in attrs):  # most nodes of most readers: a name alone
            continue
        how = attrs.get("edge_match")
        if isinstance(how, list):
            inferred += sum(1 for e in graph.producers(n.id) if is_inferred(graph, e))
        if not n.is_placeholder:
            control += len(attrs.get("control_inputs") or ())
            inferred_modules += bool(attrs.get("module_inferred"))
    return GraphSummary(len(graph), len(ops), graph.edge_count(), dict(sorted(placeholders.items())),
                        types.most_common(), modules, depth, inferred, inferred_modules, control)


def _module_tree(ops: list[OpNode]) -> tuple[int, int]:
    """(how many paths `OpGraph.modules()` lists, the depth of the deepest) for operators `ops`, without
    building and sorting that list (80k modules in a 100k-node model: the sort was a third of the summary).
    Parents a level at a time: each step takes one dot off every path, so the deepest (most dots) lasts
    longest and the steps count its depth."""
    level = set(map(_MODULE, ops))
    level.discard("")
    found = set(level)
    depth = 0
    while level:
        depth += 1
        level = {module.rpartition(".")[0] for module in level if "." in module}
        found |= level
    return len(found), depth


def _plain(value: Any) -> Any:
    """JSON-safe copy: non-finite floats as strings, tuples as lists, other objects as their text."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def _node_json(n: OpNode, tensors: dict[int, list[Any]]) -> dict[str, Any]:
    """One node's record; `tensors` holds each `TensorMeta`'s JSON by object (readers share one per type)."""
    attrs = n.attrs
    return {"id": n.id, "op_type": n.op_type, "module": n.module, "index": n.index, "kind": n.kind,
            "phase": n.phase, "module_class": n.module_class,
            "inputs": [None if m is None else tensors.get(id(m)) or tensors.setdefault(id(m), m.to_json())
                       for m in n.inputs],
            "outputs": [None if m is None else tensors.get(id(m)) or tensors.setdefault(id(m), m.to_json())
                        for m in n.outputs],
            "source": n.source.to_json() if n.source is not None else None,
            "attrs": {} if not attrs else _node_attrs(attrs)}


def node_link(graph: OpGraph, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The graph in networkx's node-link layout (`links` with `key` = input slot), every record included.

    Nodes whose tensors have one type share its JSON list: the result is for writing out, not for editing."""
    nodes = graph.nodes  # works deferred shapes out first
    # what is_inferred reads, looked up once per node that has it rather than once per edge
    matches = {n.id: how for n in nodes if n.attrs and isinstance(how := n.attrs.get("edge_match"), list)}
    links = [{"source": e.src, "target": e.dst, "key": e.in_slot, "out_slot": e.out_slot, "in_slot": e.in_slot,
              "inferred": (how := matches.get(e.dst)) is not None and 0 <= e.in_slot < len(how)
              and how[e.in_slot] in INFERRED_MATCHES} for e in graph.edges()]
    tensors: dict[int, list[Any]] = {}
    return {"directed": True, "multigraph": True,
            "graph": {"schema": NODE_LINK_SCHEMA, "name": graph.name, **_plain(meta or {})},
            "nodes": [_node_json(n, tensors) for n in nodes], "links": links}


def node_link_json(graph: OpGraph, meta: dict[str, Any] | None = None) -> str:
    """`json.dumps(node_link(graph, meta), separators=(",", ":"), allow_nan=False)`, the same text, written
    record by record: each distinct string, tensor list and source encoded once (a third of the time at
    100k nodes, and no dict per node or edge)."""
    nodes = graph.nodes  # works deferred shapes out first
    text = _Texts()
    head = _DUMP({"directed": True, "multigraph": True,
                  "graph": {"schema": NODE_LINK_SCHEMA, "name": graph.name, **_plain(meta or {})}})
    string, tensors, source, attrs_of = text.string, text.tensors, text.source, text.attrs
    ids: list[str] = []  # each node's id as JSON, by position
    records: list[str] = []
    for n in nodes:
        node_id = encode_basestring_ascii(n.id)
        ids.append(node_id)
        index = n.index
        records.append(f'{{"id":{node_id},"op_type":{string(n.op_type)},"module":{string(n.module)},'
                       f'"index":{index if type(index) is int else _DUMP(index)},"kind":{string(n.kind)},'
                       f'"phase":{string(n.phase)},"module_class":{string(n.module_class)},'
                       f'"inputs":{tensors(n.inputs)},"outputs":{tensors(n.outputs)},'
                       f'"source":{"null" if n.source is None else source(n.source)},"attrs":{attrs_of(n.attrs)}}}')
    matches = {k: how for k, n in enumerate(nodes) if n.attrs and isinstance(how := n.attrs.get("edge_match"), list)}
    links: list[str] = []
    # graph.edges() as positions: the same edges in the same order, without an Edge and two ids looked up per edge
    for src, dst, out, slot in graph._edge_tuples():  # noqa: SLF001 - the graph package's own edge order
        inferred = (how := matches.get(dst)) is not None and 0 <= slot < len(how) and how[slot] in INFERRED_MATCHES
        slot_text = slot if type(slot) is int else _DUMP(slot)
        links.append(f'{{"source":{ids[src]},"target":{ids[dst]},"key":{slot_text},'
                     f'"out_slot":{out if type(out) is int else _DUMP(out)},"in_slot":{slot_text},'
                     f'"inferred":{"true" if inferred else "false"}}}')
    return f'{head[:-1]},"nodes":[{",".join(records)}],"links":[{",".join(links)}]}}'


class _Texts:
    """JSON texts of what many records share, each worked out once: strings, tensor lists (by object: readers
    share one tuple per type), sources (by object), and attrs that are a name alone."""

    __slots__ = ("strings", "metas", "lists", "sources")

    def __init__(self) -> None:
        self.strings: dict[str, str] = {}
        self.metas: dict[int, str] = {}
        self.lists: dict[int, tuple[Any, str]] = {}  # id -> (the tuple, kept so the id is not reused; its text)
        self.sources: dict[int, tuple[Any, str]] = {}

    def string(self, value: Any) -> str:
        if type(value) is not str:
            return _DUMP(value)
        found = self.strings.get(value)
        if found is None:
            found = self.strings[value] = encode_basestring_ascii(value)
        return found

    def tensors(self, metas: Any) -> str:
        hit = self.lists.get(id(metas))
        if hit is not None and hit[0] is metas:
            return hit[1]
        known = self.metas
        parts: list[str] = []
        for m in metas:
            if m is None:
                parts.append("null")
                continue
            found = known.get(id(m))
            if found is None:
                found = known[id(m)] = _DUMP(m.to_json())
            parts.append(found)
        found = f"[{','.join(parts)}]"
        self.lists[id(metas)] = (metas, found)
        return found

    def source(self, src: Any) -> str:
        hit = self.sources.get(id(src))
        if hit is None or hit[0] is not src:
            hit = self.sources[id(src)] = (src, _DUMP(src.to_json()))
        return hit[1]

    def attrs(self, attrs: Any) -> str:
        if not attrs:
            return "{}"
        if len(attrs) == 1 and type(name := attrs.get("name")) is str:  # most readers' attrs
            return f'{{"name":{encode_basestring_ascii(name)}}}'
        string = self.string
        parts: list[str] = []
        for key, value in attrs.items():  # strings, lists of them, ints, bools and None as they are; else in full
            kind = type(value)
            if type(key) is not str:
                return _DUMP(_node_attrs(attrs))
            if kind is str:
                parts.append(f"{string(key)}:{encode_basestring_ascii(value)}")
            elif kind is list and all(type(v) is str for v in value):
                parts.append(f"{string(key)}:[{','.join(map(encode_basestring_ascii, value))}]")
            elif kind is int:
                parts.append(f"{string(key)}:{value!r}")  # int.__repr__, as json writes ints
            elif kind is bool or value is None:
                parts.append(f"{string(key)}:{'null' if value is None else 'true' if value else 'false'}")
            else:
                return _DUMP(_node_attrs(attrs))
        return f"{{{','.join(parts)}}}"


def _node_attrs(attrs: Any) -> dict[str, Any]:
    """A record's attrs as the node-link JSON holds them: most readers' are names alone, already plain (what
    `_plain` would copy them into)."""
    return (dict(attrs) if all(type(v) is str for v in attrs.values()) and all(type(k) is str for k in attrs)
            else _plain(dict(attrs)))
