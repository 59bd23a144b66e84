"""The ONNX reader counts a model's edges on open and makes them when a view first reads one: the graph every
reader of edges sees (lists in their order, walks, node-link JSON, the summary) is the one linking as it reads
gives, and `ascend-tui graph` prints the count without making them."""

from __future__ import annotations

import argparse
import copy
import io
import json
import pickle
import threading
from pathlib import Path
from typing import Any

import pytest

from ascend_tui.cli.graph import run_graph
from ascend_tui.graph.opgraph import OpGraph, OpNode
from ascend_tui.graph.summary import node_link_json, summarize
from ascend_tui.readers.graphs import onnx_model
from tests.test_formats_onnx import control_flow_model, model_from_sample
from tests.test_formats_onnx_columns import REAL, odd_model
from tests.test_formats_onnx_lazy_shapes import untyped_model

import onnx  # noqa: E402  (in the test extra: a missing onnx fails, never skips)
from onnx import TensorProto, helper  # noqa: E402


def split_model(tmp_path: Path, tail: str = "", blocks: int = 30) -> Path:
    """Blocks of MatMul -> Split (three outputs, one left out) -> Relu of each -> Concat, with a skip join; `tail`
    adds what makes the walk link as it reads from there on (`unresolved`, `twice`: a name made again,
    `early`: a tensor read before it is made) or an op no name or metadata places (`unnamed`)."""
    nodes, prev = [], "x"
    for b in range(blocks):
        t = [f"t{b}_{k}" for k in range(6)]
        nodes += [helper.make_node("MatMul", [prev, "w"], [t[0]], name=f"/layers.{b}/MatMul"),
                  helper.make_node("Split", [t[0]], [t[1], "", t[2]], name=f"/layers.{b}/Split", axis=1,
                                   num_outputs=3),
                  helper.make_node("Relu", [t[2]], [t[3]], name=f"/layers.{b}/act/Relu"),
                  helper.make_node("Sigmoid", [t[1]], [t[4]], name=f"/layers.{b}/gate/Sigmoid"),
                  helper.make_node("Concat", [t[3], t[4], prev, t[2]], [t[5]], name=f"/layers.{b}/Concat", axis=1)]
        prev = t[5]
    mid = f"t{blocks // 2 - 1}_5"  # the last tensor made before the tail, which goes in the middle
    extra = {"unresolved": [helper.make_node("Add", ["nothing", mid], ["z"], name="/tail/Add")],
             "twice": [helper.make_node("Neg", [mid], ["t3_0"], name="/tail/Neg"),
                       helper.make_node("Relu", ["t3_0"], ["z"], name="/tail/Relu")],
             "early": [helper.make_node("Add", ["z", mid], ["q"], name="/tail/Add"),
                       helper.make_node("Neg", [mid], ["z"], name="/tail/Neg")],
             "unnamed": [helper.make_node("Relu", [mid], ["u"], name="fused_relu"),
                         helper.make_node("Add", ["u", "t2_2"], ["z"], name="/layers.2/Add")],
             "": []}[tail]
    graph = helper.make_graph(nodes[:len(nodes) // 2] + extra + nodes[len(nodes) // 2:], "split",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor("w", TensorProto.FLOAT, [4, 4], [0.5] * 16)])
    path = tmp_path / f"split{tail}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


def _models(tmp_path: Path) -> list[Path]:
    return [REAL, model_from_sample(tmp_path), control_flow_model(tmp_path), odd_model(tmp_path),
            untyped_model(tmp_path / "untyped.onnx"),
            *(split_model(tmp_path, tail) for tail in ("", "unresolved", "twice", "early", "unnamed"))]


def _edges(graph: OpGraph) -> dict[str, Any]:
    """Everything that reads edges sees, in its order: the graph's own lists, each node's producers and consumers,
    the edge walk, the walks up and down, the networkx copy and the node-link JSON."""
    ids = [n.id for n in graph]
    return {"ins": graph._ins, "outs": graph._outs,  # noqa: SLF001 - the lists themselves, order and all
            "edges": list(graph.edges()), "producers": [graph.producers(i) for i in ids],
            "consumers": [graph.consumers(i) for i in ids], "up": graph.upstream(ids[-1]),
            "down": [graph.downstream(i) for i in ids[:3]], "topo": graph.topological_order(),
            "sources": graph.sources(), "nx": sorted(graph.nx.edges(keys=True, data=True), key=repr),
            "json": node_link_json(graph, {})}


def _as_read(monkeypatch: pytest.MonkeyPatch, path: Path) -> Any:
    """The model loaded with every segment linked as it is read (the walk's other way)."""
    with monkeypatch.context() as m:
        m.setattr(onnx_model._OnnxBuilder, "link_later", lambda *args: False)  # noqa: SLF001
        return onnx_model.load(path)


@pytest.mark.parametrize("chunk", [1, 3, 1024])
def test_edges_made_on_first_read_are_the_edges_linking_as_read_makes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      chunk: int) -> None:
    monkeypatch.setattr(onnx_model, "CHUNK", chunk)  # a later segment that links as read, at every place
    deferred: list[str] = []
    for path in _models(tmp_path):
        eager = _as_read(monkeypatch, path)
        assert not eager.graph.edges_pending
        inv = onnx_model.load(path)
        pending = inv.graph.edges_pending
        # the summary (its edge count, modules inherited from neighbours, notes) before anything made the edges
        assert summarize(inv.graph) == summarize(eager.graph), path
        assert inv.run.extra == eager.run.extra, path
        assert [(n.id, n.module, n.module_class, n.source, n.attrs) for n in inv.graph.structure()] == \
            [(n.id, n.module, n.module_class, n.source, n.attrs) for n in eager.graph.structure()], path
        assert _edges(inv.graph) == _edges(eager.graph), path
        assert inv.graph.edge_count() == eager.graph.edge_count() == len(list(inv.graph.edges()))
        assert not inv.graph.edges_pending
        if pending:
            deferred.append(path.name)
    # linked on first read: the real export (a Split, an op without metadata), the untyped model, the split models
    # without a tail or with an op placed by its neighbours; the others link as read from where their tail starts
    assert deferred == ["block_dynamo_export.onnx", "block_dynamo.onnx", "untyped.onnx", "split.onnx",
                        "splitunnamed.onnx"]


def test_a_second_output_read_gets_its_edge(tmp_path: Path) -> None:
    """The real export's Split feeds q, k and v from outputs 0, 1 and 2 (k through a Transpose); the Split itself,
    which has no metadata, takes its module from its neighbours, found without making the edges."""
    g = onnx_model.load(REAL).graph
    assert g.edges_pending
    split = next(n for n in g.structure() if n.op_type == "Split")
    assert [(e.dst, e.out_slot, e.in_slot) for e in g.consumers(split.id)] == \
        [("attn/Transpose.0", 1, 0), ("attn/MatMul.0", 0, 0), ("attn/MatMul.1", 2, 1)]
    assert split.module == "attn" and split.attrs == {"name": "node_Split_13", "module_inferred": True}


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Calls of the function that makes a model's edges from what the walk kept."""
    calls: list[int] = []
    real = onnx_model.link_segments

    def counted(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(onnx_model, "link_segments", counted)
    return calls


def test_graph_command_prints_the_edge_count_without_making_the_edges(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = split_model(tmp_path, "unnamed")
    eager = _as_read(monkeypatch, path)
    calls = _counted(monkeypatch)
    out = io.StringIO()
    assert run_graph(argparse.Namespace(path=str(path), evidence=[], json=None, quiet=True, fail_on="error"), out) == 0
    assert calls == []
    assert f"{eager.graph.edge_count():,} edges" in out.getvalue()
    assert "modules inferred from neighbours: 1" in out.getvalue()
    written = tmp_path / "g.json"
    assert run_graph(argparse.Namespace(path=str(path), evidence=[], json=str(written), quiet=True,
                                        fail_on="error"), io.StringIO()) == 0
    assert calls == [1]
    assert json.loads(written.read_text())["links"] == json.loads(node_link_json(eager.graph, {}))["links"]


def test_threads_reading_edges_at_once_make_them_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counted(monkeypatch)
    g = onnx_model.load(split_model(tmp_path)).graph
    last = g.execution_order()[-1]
    start = threading.Barrier(4)
    seen: list[int] = []

    def read() -> None:
        start.wait()
        seen.append(len(g.upstream(last)))

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1] and len(set(seen)) == 1 and seen[0] == len(g) - 1


def test_a_graph_adopted_unlinked_copies_pickles_and_grows_like_any_other(tmp_path: Path) -> None:
    nodes = [OpNode("a", "input", "", -1, "input"), OpNode("b", "relu", "", 0), OpNode("c", "add", "", 1)]
    ab, bc, ac = (0, 1, 0, 0), (1, 2, 0, 0), (0, 2, 0, 1)
    made: list[int] = []

    def graph() -> OpGraph:
        g = OpGraph("g")
        g.adopt_unlinked(list(nodes), 3, lambda: made.append(1) or ([[], [ab], [bc, ac]], [[ab, ac], [bc], []]))
        return g

    g = graph()
    assert g.edge_count() == 3 and g.edges_pending and not made
    for twin in (copy.deepcopy(g), pickle.loads(pickle.dumps(g))):
        assert [(e.src, e.dst) for e in twin.edges()] == [("a", "b"), ("a", "c"), ("b", "c")]
        assert not twin.edges_pending
    g = graph()
    g.add_fed(OpNode("d", "neg", "", 2), [("c", 0)])  # live capture's way of growing a graph
    assert g.edge_count() == 4 and g.upstream("d") == ["c", "b", "a"]
    with pytest.raises(AttributeError):
        g.no_such_thing  # noqa: B018
    wrong = OpGraph()
    wrong.adopt_unlinked(list(nodes), 0, lambda: ([], []))
    with pytest.raises(ValueError, match="3 nodes but edge lists for 0"):
        list(wrong.edges())
