"""OpGraph's own position-indexed edge store against networkx on a branched graph: same walks, same order.

OpGraph keeps edges in per-node lists of positions (not in networkx) so that 100k-node graphs build
and walk fast; these tests hold it to what a `MultiDiGraph` keyed by input slot answers.
"""

from __future__ import annotations

import random
from typing import Any

import networkx as nx
import pytest

from ascend_tui.errors import InputError
from ascend_tui.graph.opgraph import Edge, OpGraph, OpNode


def _branched(seed: int = 7, ops: int = 300) -> tuple[list[OpNode], list[tuple[str, str, int, int]]]:
    """Placeholders and ops where each op reads 1-3 earlier nodes (branches, joins, a tensor read twice)."""
    rng = random.Random(seed)
    nodes = [OpNode(f"input:{k}", "input", "", -1, "input") for k in range(3)]
    edges: list[tuple[str, str, int, int]] = []
    for i in range(ops):
        nid = f"m{i % 7}/op.{i}"
        nodes.append(OpNode(nid, "op", f"m{i % 7}", i))
        earlier = [n.id for n in nodes[:-1]]
        for slot in range(rng.choice((1, 1, 2, 2, 3))):
            src = rng.choice(earlier[-12:]) if rng.random() < 0.8 else rng.choice(earlier)
            edges.append((src, nid, rng.choice((0, 0, 1)), slot))
        if rng.random() < 0.1:  # the same producer output read twice (x * x)
            edges.append((edges[-1][0], nid, edges[-1][2], 3))
    return nodes, edges


def _reference(nodes: list[OpNode], edges: list[tuple[str, str, int, int]]) -> nx.MultiDiGraph:
    ref = nx.MultiDiGraph()
    ref.add_nodes_from(n.id for n in nodes)
    for src, dst, out_slot, in_slot in edges:
        ref.add_edge(src, dst, key=in_slot, out_slot=out_slot, in_slot=in_slot)
    return ref


def _reference_bfs(ref: nx.MultiDiGraph, pos: dict[str, int], start: str, depth: int | None, up: bool) -> list[str]:
    """The walk as OpGraph defined it over networkx: by hop, each node's neighbours latest first, once each."""
    step = ref.predecessors if up else ref.successors
    seen, frontier, out, hops = {start}, [start], [], 0
    while frontier and (depth is None or hops < depth):
        nxt = []
        for nid in frontier:
            for other in sorted(set(step(nid)), key=pos.__getitem__, reverse=True):
                if other not in seen:
                    seen.add(other)
                    nxt.append(other)
        out += nxt
        frontier, hops = nxt, hops + 1
    return out


def _edges_of(ref: nx.MultiDiGraph) -> list[Edge]:
    return [Edge(u, v, d["out_slot"], d["in_slot"]) for u, v, d in ref.edges(data=True)]


def _built(nodes: list[OpNode], edges: list[tuple[str, str, int, int]], bulk: bool, name: str = "") -> OpGraph:
    """The graph of `nodes` and `edges`, added in one `add_bulk` or node by node and edge by edge."""
    g = OpGraph(name)
    if bulk:
        g.add_bulk(nodes, edges)
        return g
    for n in nodes:
        g.add_node(n)
    for e in edges:
        g.add_edge(*e)
    return g


@pytest.mark.parametrize("bulk", [False, True])
def test_walks_match_networkx_on_a_branched_graph(bulk: bool) -> None:
    nodes, edges = _branched()
    g = _built(nodes, edges, bulk, "branched")
    ref = _reference(nodes, edges)
    pos = {n.id: i for i, n in enumerate(nodes)}
    assert g.edge_count() == ref.number_of_edges() and list(g.edges()) == _edges_of(ref)
    last = nodes[-1].id
    up = g.upstream(last)
    assert len(up) > 50 and set(up) == nx.ancestors(ref, last)
    for nid in (last, nodes[len(nodes) // 2].id, nodes[5].id, "input:0"):
        assert g.upstream(nid) == _reference_bfs(ref, pos, nid, None, True)
        assert g.downstream(nid) == _reference_bfs(ref, pos, nid, None, False)
        assert set(g.downstream(nid)) == nx.descendants(ref, nid)
        for depth in (1, 2, 5):
            assert g.upstream(nid, depth) == _reference_bfs(ref, pos, nid, depth, True)
            assert g.downstream(nid, depth) == _reference_bfs(ref, pos, nid, depth, False)
    for n in nodes:
        producers = sorted((Edge(u, n.id, d["out_slot"], d["in_slot"]) for u, _, d in ref.in_edges(n.id, data=True)),
                           key=lambda e: e.in_slot)
        consumers = sorted((Edge(n.id, v, d["out_slot"], d["in_slot"]) for _, v, d in ref.out_edges(n.id, data=True)),
                           key=lambda e: (pos[e.dst], e.in_slot))
        assert g.producers(n.id) == producers and g.consumers(n.id) == consumers
        assert (g.in_degree(n.id), g.out_degree(n.id)) == (ref.in_degree(n.id), ref.out_degree(n.id))
    assert g.sources() == [n.id for n in nodes if ref.in_degree(n.id) == 0]
    assert g.topological_order() == list(nx.lexicographical_topological_sort(ref, key=pos.__getitem__))
    assert list(g.nx.edges(keys=True, data=True)) == list(ref.edges(keys=True, data=True))
    assert list(g.nx.nodes) == list(ref.nodes)


def test_walks_follow_changes_made_after_a_walk() -> None:
    nodes, edges = _branched(seed=3, ops=60)
    g = OpGraph()
    g.add_bulk(nodes, edges)
    last = nodes[-1].id
    before = g.upstream(last)
    view = g.nx
    assert "late/op.0" not in view
    g.add_node(OpNode("input:late", "input", "", -1, "input"))
    g.add_node(OpNode("late/op.0", "op", "late", 1000))
    g.add_edge("input:late", "late/op.0")
    g.add_edge(last, "late/op.0", 0, 1)
    assert g.upstream("late/op.0") == ["input:late", last, *before]  # latest position first
    assert g.downstream("input:late") == ["late/op.0"]
    assert g.nx is not view and g.nx.has_edge(last, "late/op.0", key=1) and g.nx.number_of_edges() == g.edge_count()
    g.add_edge("input:late", last, 0, 9)  # a new producer for an existing node reaches its walks too
    assert "input:late" in g.upstream(last) and last in g.downstream("input:late")


def test_an_edge_added_again_replaces_the_old_one_as_networkx_keys_it() -> None:
    nodes = [OpNode("a", "op", "", 0), OpNode("b", "op", "", 1), OpNode("c", "op", "", 2)]
    edges = [("a", "c", 0, 0), ("b", "c", 0, 1), ("a", "c", 1, 0), ("a", "b", 0, 0)]
    for bulk in (False, True):
        g = _built(nodes, edges, bulk)
        ref = _reference(nodes, edges)
        assert g.edge_count() == 3 == ref.number_of_edges()
        assert g.producers("c") == [Edge("a", "c", 1, 0), Edge("b", "c", 0, 1)]
        assert g.consumers("a") == [Edge("a", "b", 0, 0), Edge("a", "c", 1, 0)]
        assert list(g.edges()) == _edges_of(ref)


def test_saved_graph_round_trips_its_edges_and_rejects_bad_positions(tmp_path: Any) -> None:
    nodes, edges = _branched(seed=11, ops=80)
    g = OpGraph("saved")
    g.add_bulk(nodes, edges)
    path = tmp_path / "g.json"
    g.save(path)
    h = OpGraph.load(path)
    assert list(h.edges()) == list(g.edges()) and h.upstream(nodes[-1].id) == g.upstream(nodes[-1].id)
    data = g.to_json()
    for bad in ([len(nodes), 0, 0, 0], [-1, 3, 0, 0]):
        data["edges"] = [bad]
        with pytest.raises(InputError, match="graph is malformed"):
            OpGraph.from_json(data, path="x.json")


def test_unknown_ends_and_cycles_are_reported() -> None:
    g = OpGraph()
    g.add_node(OpNode("a", "op", "", 0))
    g.add_node(OpNode("b", "op", "", 1))
    with pytest.raises(KeyError, match="nope"):
        g.add_edge("a", "nope")
    with pytest.raises(KeyError, match="nope"):
        g.add_bulk([], [("nope", "a", 0, 0)])
    with pytest.raises(KeyError, match="nope"):
        g.in_degree("nope")
    assert g.edge_count() == 0
    g.add_edge("a", "b")
    g.add_edge("b", "a")
    assert g.upstream("a") == ["b"] and g.downstream("a") == ["b"]
    with pytest.raises(nx.NetworkXUnfeasible):
        g.topological_order()


def test_op_node_builds_the_same_record_as_the_constructor() -> None:
    from dataclasses import fields

    from ascend_tui.evidence import SourceLocation, TensorMeta
    from ascend_tui.graph.opgraph import NODE_COLUMNS, op_node

    assert tuple(f.name for f in fields(OpNode)) == NODE_COLUMNS
    meta = TensorMeta((2, 3), "float16")
    args = ("enc/mm.0", "MatMul", "enc", 4, "op", (meta, None), (meta,), SourceLocation("/m.py", 3, "f", ()),
            "forward", "Linear", {"name": "/enc/MatMul"})
    fast, plain = op_node(*args), OpNode(*args)  # type: ignore[arg-type]
    assert fast == plain and repr(fast) == repr(plain)
    with pytest.raises(AttributeError):
        fast.module = "other"  # type: ignore[misc]


def test_records_built_in_bulk_are_the_records_the_constructor_builds() -> None:
    from itertools import repeat

    from ascend_tui.evidence import TensorMeta
    from ascend_tui.graph.opgraph import op_nodes

    meta = TensorMeta((4,), "int64")
    columns = (["a", "b"], ["Add", "Mul"], ["", "enc"], [0, 1], repeat("op"), [(meta,), ()], [(), (None,)],
               repeat(None), repeat("forward"), ["", "Linear"], [None, {"name": "/enc/Mul"}])
    built = op_nodes(*columns)
    plain = [OpNode("a", "Add", "", 0, "op", (meta,), ()), OpNode("b", "Mul", "enc", 1, "op", (), (None,), None,
                                                                   "forward", "Linear", {"name": "/enc/Mul"})]
    assert built == plain and [type(n) for n in built] == [OpNode, OpNode] and hash(built[0]) == hash(plain[0])
    with pytest.raises(AttributeError):
        built[1].id = "c"  # type: ignore[misc]


def test_adopted_edge_lists_give_the_graph_add_bulk_builds() -> None:
    nodes, edges = _branched(seed=9, ops=60)
    pos = {n.id: i for i, n in enumerate(nodes)}
    by_position = [(pos[s], pos[d], o, i) for s, d, o, i in edges]
    bulk = OpGraph()
    bulk.add_bulk(nodes, by_position, by_position=True)
    ins: list[list[tuple[int, int, int, int]]] = [[] for _ in nodes]
    outs: list[list[tuple[int, int, int, int]]] = [[] for _ in nodes]
    for edge in by_position:
        ins[edge[1]].append(edge)
        outs[edge[0]].append(edge)
    adopted = OpGraph()
    adopted.adopt(list(nodes), ins, outs)
    assert list(adopted.edges()) == list(bulk.edges()) and adopted.edge_count() == bulk.edge_count() > len(nodes)
    assert adopted.to_json() == bulk.to_json() and adopted.topological_order() == bulk.topological_order()
    last = nodes[-1].id
    first = nodes[0].id
    assert adopted.upstream(last) == bulk.upstream(last) and adopted.consumers(first) == bulk.consumers(first)
    with pytest.raises(ValueError, match="empty graph"):
        adopted.adopt(list(nodes), ins, outs)
    with pytest.raises(ValueError, match="duplicate node id 'a'"):
        OpGraph().adopt([OpNode("a", "op", "", 0), OpNode("a", "op", "", 1)], [[], []], [[], []])
    with pytest.raises(ValueError, match="edge lists"):
        OpGraph().adopt([OpNode("a", "op", "", 0)], [], [])


def test_bulk_edges_by_position_land_like_edges_by_id() -> None:
    nodes, edges = _branched(seed=5, ops=40)
    by_id, by_pos = OpGraph(), OpGraph()
    by_id.add_bulk(nodes, edges)
    pos = {n.id: i for i, n in enumerate(nodes)}
    by_pos.add_bulk(nodes, [(pos[s], pos[d], o, i) for s, d, o, i in edges], by_position=True)
    assert list(by_pos.edges()) == list(by_id.edges()) and by_pos.edge_count() == by_id.edge_count()
    with pytest.raises(IndexError):
        OpGraph().add_bulk(nodes[:2], [(0, 2, 0, 0)], by_position=True)


def test_bulk_add_refuses_duplicate_ids_and_leaves_the_graph_as_it_was() -> None:
    g = OpGraph()
    g.add_bulk([OpNode("a", "op", "", 0), OpNode("b", "op", "", 1)], [("a", "b", 0, 0)])
    twice = [OpNode("c", "op", "", 2), OpNode("c", "op", "", 3)]
    again = [OpNode("d", "op", "", 2), OpNode("a", "op", "", 3)]
    for batch in (twice, again):
        with pytest.raises(ValueError, match="duplicate node id '(c|a)'"):
            g.add_bulk(batch)
        assert len(g) == 2 and "c" not in g and "d" not in g and g.node("a").index == 0
    g.add_bulk([OpNode("c", "op", "", 2)], [("b", "c", 0, 0)])
    assert g.upstream("c") == ["b", "a"] and g.position("c") == 2
