"""A typed ONNX model's tensor types are read when a node's tensors are first read, not on open: `ascend-tui graph`
never reads value_info nor runs inference, `--json` reads them, and what is read equals an eager read."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import onnx  # in the test extra: a missing onnx fails, never skips
import pytest
from onnx import TensorProto, helper

from ascend_tui.cli.graph import run_graph
from ascend_tui.graph.summary import summarize
from ascend_tui.readers.graphs import onnx_model, onnx_types
from tests.conftest import ROOT
from tests.test_formats_onnx import control_flow_model, model_from_sample
from tests.test_formats_onnx_columns import REAL, odd_model
from tests.test_formats_onnx_lazy_shapes import tensors, untyped_model


def typed_model(path: Path, blocks: int = 6) -> Path:
    """The untyped model with every tensor typed in value_info, as exporters write them."""
    onnx.save(onnx.shape_inference.infer_shapes(onnx.load(str(untyped_model(path, blocks)))), str(path))
    return path


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times value_info was read (a graph's declarations collected) and shape inference ran."""
    calls = {"collect": 0, "infer": 0}
    collect, infer = onnx_types.TypeTable.collect, onnx.shape_inference.infer_shapes

    def counted_collect(self: onnx_types.TypeTable, graph: object) -> None:
        calls["collect"] += 1
        collect(self, graph)

    def counted_infer(model: object, **kw: object) -> object:
        calls["infer"] += 1
        return infer(model, **kw)

    monkeypatch.setattr(onnx_types.TypeTable, "collect", counted_collect)
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", counted_infer)
    return calls


def _graph(path: Path, json_out: Path | None = None) -> str:
    out = io.StringIO()
    args = argparse.Namespace(path=str(path), evidence=[], json=str(json_out) if json_out else None, fail_on="error",
                              quiet=True)
    assert run_graph(args, out) == 0
    return out.getvalue()


def test_the_graph_command_reads_no_tensor_types_and_its_json_reads_them_once(tmp_path: Path,
                                                                              counted: dict[str, int]) -> None:
    path, untyped = typed_model(tmp_path / "typed.onnx"), untyped_model(tmp_path / "untyped.onnx")
    counted.update(collect=0, infer=0)  # making the typed model ran inference once
    assert "24 operators" in _graph(path) and counted == {"collect": 0, "infer": 0}
    assert "24 operators" in _graph(untyped) and counted == {"collect": 0, "infer": 0}
    written = tmp_path / "g.json"
    _graph(path, written)
    assert counted == {"collect": 1, "infer": 0}  # the one graph's declarations, once; typed: no inference
    nodes = {n["id"]: n for n in json.loads(written.read_text())["nodes"]}
    assert nodes["layers.5/Add.0"]["outputs"] == [[[2, 8], "float16"]]
    assert nodes["layers.0.mlp/MatMul.0"]["inputs"] == [[[2, 8], "float16"], [[8, 8], "float16"]]


def test_types_read_on_first_ask_equal_an_eager_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = [REAL, model_from_sample(tmp_path), control_flow_model(tmp_path), odd_model(tmp_path),
             typed_model(tmp_path / "typed.onnx"), untyped_model(tmp_path / "untyped.onnx")]
    lazy = []
    for path in paths:
        inv = onnx_model.load(path)
        assert inv.graph.shapes_pending  # nothing read them yet
        lazy.append((tensors(inv), inv.run.extra["shape_inference"]))
    monkeypatch.setattr(onnx_model, "_KEEP_LIMIT", -1)  # every file "mostly weights": types read on open
    for path, (types, inferred) in zip(paths, lazy):
        inv = onnx_model.load(path)
        eager = inv.graph.shapes_pending
        assert (tensors(inv), inv.run.extra["shape_inference"]) == (types, inferred)
        assert eager == (inferred is True)  # only a model that needs inference still defers it
    assert [inferred for _, inferred in lazy] == [False, False, True, True, False, True]


def test_a_body_typing_an_outer_name_keeps_it_for_later_outer_nodes_as_the_eager_walk_did(tmp_path: Path) -> None:
    body = helper.make_graph([helper.make_node("Relu", ["a"], ["b_out"], name="/then/Relu")], "then", [],
                             [helper.make_tensor_value_info("b_out", TensorProto.FLOAT, [3])],
                             value_info=[helper.make_tensor_value_info("a", TensorProto.FLOAT16, [7])])
    other = helper.make_graph([helper.make_node("Neg", ["a"], ["e_out"], name="/else/Neg")], "else", [],
                              [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [3])])
    nodes = [helper.make_node("Abs", ["x"], ["a"], name="/Abs"),
             helper.make_node("If", ["c"], ["y"], name="/If", then_branch=body, else_branch=other),
             helper.make_node("Neg", ["a"], ["z"], name="/after/Neg")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
                                           helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])],
                              value_info=[helper.make_tensor_value_info("a", TensorProto.FLOAT, [3])])
    path = tmp_path / "shadow.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    g = onnx_model.load(path).graph
    assert g.node("Abs.0").outputs[0].dtype == "float32"
    assert g.node("then/Relu.0").inputs[0].shape == (7,)  # the body's own declaration
    assert g.node("after/Neg.0").inputs[0].shape == (7,)  # what a walk one node at a time saw next


def test_summary_counts_the_modules_graph_modules_lists(tmp_path: Path) -> None:
    from ascend_tui.graph.opgraph import OpGraph, OpNode

    for path in (REAL, control_flow_model(tmp_path), odd_model(tmp_path)):
        g = onnx_model.load(path).graph
        s = summarize(g)
        assert s.modules == len(g.modules())
        assert s.module_depth == max((m.count(".") + 1 for m in g.modules()), default=0)
    g = OpGraph("odd names")
    for k, module in enumerate(["a.b.c", "a", ".x", "a..b", "", "q.r"]):
        g.add_node(OpNode(f"n{k}", "Op", module, k))
    g.add_node(OpNode("param:w", "param", "w.v.u", -1, "param"))  # a placeholder's module is no module that ran
    s = summarize(g)
    assert (s.modules, s.module_depth) == (len(g.modules()), 3) and s.operators == 6 and s.placeholders == {"param": 1}


def test_the_graph_command_imports_neither_onnx_nor_the_heavy_front_ends(tmp_path: Path) -> None:
    typed = typed_model(tmp_path / "typed.onnx")
    untyped = untyped_model(tmp_path / "untyped.onnx")
    script = f"""
import io, sys, argparse
from ascend_tui.cli.graph import run_graph
from ascend_tui.readers.graphs import onnx_model
args = argparse.Namespace(path={str(typed)!r}, evidence=[], json=None, fail_on="error", quiet=True)
assert run_graph(args, io.StringIO()) == 0
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & {{"onnx", "ml_dtypes", "textual", "torch", "dask",
                                                          "pandas", "networkx", "numpy"}})
assert not heavy, heavy
model = onnx_model.read_model({str(typed)!r})  # by onnx's generated protobuf module alone
inv = onnx_model.load({str(untyped)!r})
assert "onnx" not in sys.modules
relu = inv.graph.node("layers.2.act/Relu.0")  # inference imports onnx: its classes are the ones already made
import onnx
assert type(model) is onnx.ModelProto
assert inv.run.extra["shape_inference"] is True and relu.outputs[0].shape == (2, 8), (inv.run.extra, relu)
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_an_onnx_package_of_another_layout_falls_back_to_importing_it(tmp_path: Path) -> None:
    model = typed_model(tmp_path / "typed.onnx")
    fake = tmp_path / "site" / "onnx"
    fake.mkdir(parents=True)
    (fake / "onnx_pb.py").write_text("from .onnx_elsewhere_pb2 import *\n")  # no such module: not the layout known
    (fake / "__init__.py").write_text("raise ImportError('broken onnx')\n")
    done = subprocess.run([sys.executable, "-m", "ascend_tui", "graph", "-q", str(model)], capture_output=True,
                          text=True, cwd=ROOT, env={"PYTHONPATH": f"{fake.parent}:{ROOT}", "PATH": "/usr/bin:/bin"},
                          timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "needs the onnx package" in lines[0], done.stderr[-2000:]
