"""OpGraph walks on hand-built graphs, and save/load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascend_tui.errors import InputError
from ascend_tui.evidence import SourceLocation, TensorMeta
from ascend_tui.graph.opgraph import OpGraph, OpNode
from ascend_tui.graph.trace import first_reaching, greedy_upstream, origins

F32 = TensorMeta((4, 8), "float32")


def _op(graph: OpGraph, node_id: str, index: int, module: str = "", n_in: int = 1) -> None:
    graph.add_node(OpNode(node_id, f"aten.{node_id.rsplit('/', 1)[-1].split('.')[0]}", module, index,
                          inputs=(F32,) * n_in, outputs=(F32,)))


def diamond() -> OpGraph:
    """x -> a -> (b, c) -> add(b, c) -> mul(add, add); w feeds b."""
    g = OpGraph("diamond")
    g.add_node(OpNode("input:0", "input", "", -1, kind="input", outputs=(F32,)))
    g.add_node(OpNode("param:enc.w", "param", "enc", -1, kind="param", outputs=(F32,)))
    _op(g, "enc/relu.0", 0, "enc")
    _op(g, "enc/mm.0", 1, "enc", 2)
    _op(g, "enc.inner/tanh.0", 2, "enc.inner")
    _op(g, "add.0", 3, "", 2)
    _op(g, "mul.0", 4, "", 2)
    g.add_edge("input:0", "enc/relu.0")
    g.add_edge("enc/relu.0", "enc/mm.0", 0, 0)
    g.add_edge("param:enc.w", "enc/mm.0", 0, 1)
    g.add_edge("enc/relu.0", "enc.inner/tanh.0")
    g.add_edge("enc/mm.0", "add.0", 0, 0)
    g.add_edge("enc.inner/tanh.0", "add.0", 0, 1)
    g.add_edge("add.0", "mul.0", 0, 0)
    g.add_edge("add.0", "mul.0", 0, 1)
    return g


def test_same_tensor_twice_is_two_edges_with_slots() -> None:
    g = diamond()
    edges = g.producers("mul.0")
    assert [(e.src, e.in_slot) for e in edges] == [("add.0", 0), ("add.0", 1)]
    assert g.edge_count() == 8
    assert g.producer("enc/mm.0", 1) == "param:enc.w"
    assert g.producer("enc/mm.0", 5) is None


def test_consumers_in_execution_order() -> None:
    g = diamond()
    assert [e.dst for e in g.consumers("enc/relu.0")] == ["enc/mm.0", "enc.inner/tanh.0"]


def test_upstream_and_downstream_by_depth() -> None:
    g = diamond()
    assert g.upstream("add.0", 1) == ["enc.inner/tanh.0", "enc/mm.0"]
    assert set(g.upstream("add.0")) == {"enc.inner/tanh.0", "enc/mm.0", "enc/relu.0", "param:enc.w", "input:0"}
    assert g.downstream("enc/relu.0", 1) == ["enc.inner/tanh.0", "enc/mm.0"]
    assert g.downstream("input:0")[-1] == "mul.0"
    with pytest.raises(KeyError, match="nope"):
        g.upstream("nope")


def test_paths_to_sources() -> None:
    g = diamond()
    paths = g.path_to_sources("add.0")
    assert ["add.0", "enc/mm.0", "param:enc.w"] in paths
    assert ["add.0", "enc.inner/tanh.0", "enc/relu.0", "input:0"] in paths
    assert all(p[0] == "add.0" and p[-1] in g.sources() for p in paths)
    assert set(g.sources()) == {"input:0", "param:enc.w"}


def test_orders_and_modules() -> None:
    g = diamond()
    assert g.execution_order() == ["enc/relu.0", "enc/mm.0", "enc.inner/tanh.0", "add.0", "mul.0"]
    topo = g.topological_order()
    for e in g.edges():
        assert topo.index(e.src) < topo.index(e.dst)
    assert g.module_nodes("enc") == ["enc/relu.0", "enc/mm.0", "enc.inner/tanh.0"]
    assert g.module_nodes("enc.inner") == ["enc.inner/tanh.0"]
    assert g.modules() == ["enc", "enc.inner"]
    assert g.find("TANH") == ["enc.inner/tanh.0"]


def test_trace_helpers() -> None:
    g = diamond()
    bad = {"enc/mm.0", "add.0", "mul.0"}
    assert origins(g, bad.__contains__) == ["enc/mm.0"]
    weights = {"enc/mm.0": 5.0, "enc.inner/tanh.0": 1.0, "param:enc.w": 9.0, "enc/relu.0": 2.0, "add.0": 6.0}
    path = greedy_upstream(g, "mul.0", lambda n, _slot: weights.get(n))
    assert path == ["mul.0", "add.0", "enc/mm.0", "param:enc.w"]
    assert first_reaching(g, "mul.0", lambda n: n.startswith("enc/relu")) == "enc/relu.0"


def test_save_load_round_trip(tmp_path: Path) -> None:
    g = diamond()
    g.replace_node(OpNode("add.0", "aten.add", "", 3, inputs=(F32, F32), outputs=(F32,),
                          source=SourceLocation("/m.py", 7, "forward", ("/m.py:7 in forward",))))
    path = tmp_path / "g.json"
    g.save(path)
    h = OpGraph.load(path)
    assert [n for n in h] == [n for n in g]
    assert sorted(h.edges(), key=str) == sorted(g.edges(), key=str)
    assert h.node("add.0").source and h.node("add.0").source.short() == "m.py:7"
    for n in g:
        assert h.producers(n.id) == g.producers(n.id) and h.consumers(n.id) == g.consumers(n.id)
    assert h.execution_order() == g.execution_order() and h.topological_order() == g.topological_order()
    h.add_edge("input:0", "mul.0", 0, 2)  # a loaded graph keeps growing like a built one
    assert h.producer("mul.0", 2) == "input:0"


@pytest.mark.parametrize("content, problem", [
    (b"", "invalid JSON"),
    (b"{\"schema\": \"other\"}", "not an ascend-tui graph"),
    (b"\x00\xff\xfe junk", "not a text file"),
    (b"{\"schema\": \"ascend-tui.graph/1\", \"nodes\": [{}], \"edges\": []}", "malformed"),
])
def test_bad_graph_files_name_the_file(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(InputError) as err:
        OpGraph.load(path)
    assert str(path) in str(err.value) and problem in str(err.value)
    assert "\n" not in str(err.value)


def test_duplicate_ids_rejected() -> None:
    g = diamond()
    with pytest.raises(ValueError):
        g.add_node(OpNode("add.0", "aten.add", "", 9))
    assert json.loads(json.dumps(g.to_json()))["schema"] == "ascend-tui.graph/1"


def test_the_fast_node_constructor_builds_exactly_the_dataclass() -> None:
    from dataclasses import fields

    from ascend_tui.graph.opgraph import NODE_COLUMNS, op_node

    assert tuple(f.name for f in fields(OpNode)) == NODE_COLUMNS  # a new field must reach op_node too
    values = ("blocks.0/addmm.0", "aten.addmm", "blocks.0", 3, "op", (TensorMeta((2, 3), "float16"),),
              (None,), None, "backward", "Linear", {"overload": "out"})
    fast, slow = op_node(*values), OpNode(*values)
    assert fast == slow and repr(fast) == repr(slow)
    with pytest.raises(AttributeError):
        fast.index = 4  # type: ignore[misc]
