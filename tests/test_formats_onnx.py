"""ONNX models: dynamo-exporter metadata, legacy node names, subgraphs, shapes, and bad files."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from ascend_tui.errors import InputError
from ascend_tui.offline.open import kind_of, open_path
from tests.conftest import FIXTURES
from tests.graph_models import block_and_input, live_modules

import onnx  # noqa: E402  (in the test extra: a missing onnx fails, never skips)
from onnx import TensorProto, helper  # noqa: E402

SAMPLE = FIXTURES / "graphs" / "onnx_dynamo_export_node_metadata_sample.json"


def model_from_sample(path: Path) -> Path:
    """An ONNX file holding the nodes and metadata_props the dynamo exporter wrote for the sample Block."""
    assert SAMPLE.is_file(), f"fixture missing: {SAMPLE}"
    data = json.loads(SAMPLE.read_text())
    nodes, value_info = [], []
    for n in data["nodes"]:
        node = helper.make_node(n["op_type"], n["inputs"], n["outputs"], name=n["name"])
        for k, v in n.get("metadata_props", {}).items():
            node.metadata_props.add(key=k, value=v)
        nodes.append(node)
        for out, t in zip(n["outputs"], n["output_types"]):
            value_info.append(helper.make_tensor_value_info(out, getattr(TensorProto, t["elem_type"]), t["shape"]))
    inits = [helper.make_tensor(name, TensorProto.FLOAT, dims, [0.0] * (dims[0] if len(dims) == 1 else 16 * 48))
             for name, dims in (("ln1.weight", [16]), ("ln1.bias", [16]), ("attn.qkv.bias", [48]),
                                ("val_2", [16, 48]))]
    inits.append(helper.make_tensor("val_13", TensorProto.INT64, [4], [2, 5, 2, 8]))
    graph = helper.make_graph(nodes, "main_graph", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 16])],
                              [helper.make_tensor_value_info("transpose", TensorProto.FLOAT, [2, 2, 5, 8])],
                              inits, value_info=value_info)
    out = path / "block_dynamo.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(out))
    return out


def test_dynamo_metadata_gives_module_paths_and_source(tmp_path: Path) -> None:
    path = model_from_sample(tmp_path)
    assert kind_of(path) == "ONNX model"
    inv = open_path(path)
    g = inv.graph
    ops = [n for n in g if not n.is_placeholder]
    assert len(ops) == 8 and len(g) == 8 + 6
    assert g.edge_count() == 15
    by_name = {n.attrs["name"]: n for n in ops}
    ln = by_name["node_layer_norm"]
    assert ln.id == "ln1/LayerNormalization.0" and ln.module_class == "LayerNorm"
    assert ln.source is not None and ln.source.short() == "models.py:41"
    mm = by_name["node_MatMul_1"]
    assert mm.module == "attn.qkv" and mm.source.short() == "models.py:24" and mm.attrs["aten"] == "aten.linear.default"
    assert mm.outputs[0].shape == (2, 5, 48) and mm.outputs[0].dtype == "float32"
    split = by_name["node_Split_43"]  # the optimizer's node has no metadata: it sits between attn.qkv and attn
    assert split.module == "attn" and split.attrs["module_inferred"]
    assert [(e.src, e.out_slot) for e in g.producers(by_name["node_view_1"].id)] == [(split.id, 1), ("param:val_13", 0)]
    assert g.node("param:ln1.weight").module == "ln1"
    assert inv.run.extra["nodes_with_module_metadata"] == 7


def test_legacy_export_module_paths_match_live_capture(tmp_path: Path) -> None:
    import torch  # in the test command (.[live,test]): a missing torch fails, never skips
    model, x = block_and_input()
    path = tmp_path / "block.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), str(path), dynamo=False)
    inv = open_path(path)
    onnx_modules = {n.module for n in inv.graph if not n.is_placeholder}
    assert onnx_modules == live_modules(model, x)
    assert "mlp.0" in onnx_modules and "attn.qkv" in onnx_modules
    assert inv.run.extra["shape_inference"] is False or inv.graph.node("ln1/LayerNormalization.0").outputs[0].shape
    last = inv.graph.execution_order()[-1]
    assert "input:input" in inv.graph.upstream(last)


def test_if_subgraphs_see_outer_tensors(tmp_path: Path) -> None:
    then_g = helper.make_graph([helper.make_node("Relu", ["a"], ["t_out"], name="then_relu")], "then", [],
                               [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, [3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["a"], ["e_out"], name="else_neg")], "else", [],
                               [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [3])])
    nodes = [helper.make_node("Abs", ["x"], ["a"], name="/enc/Abs"),
             helper.make_node("ReduceSum", ["a"], ["s"], name="/enc/ReduceSum", keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="/Greater"),
             helper.make_node("If", ["c"], ["y"], name="/If", then_branch=then_g, else_branch=else_g)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
                              [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    path = tmp_path / "if.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    inv = open_path(path)
    g = inv.graph
    relu = next(n for n in g if n.attrs and n.attrs.get("name") == "then_relu")
    assert [e.src for e in g.producers(relu.id)] == ["enc/Abs.0"]  # the outer-scope tensor `a`
    assert sorted(g.node("If.0").attrs["subgraphs"]) == ["else_branch", "then_branch"]
    assert inv.run.extra["subgraphs"] == 2
    assert g.node("enc/ReduceSum.0").outputs[0].dtype == "float32"  # from shape inference


def test_malformed_onnx_is_one_clear_line(tmp_path: Path) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\xff\xfe not a protobuf \x00\x01" * 8)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    for path in (junk, empty):
        with pytest.raises(InputError) as info:
            open_path(path)
        line = info.value.line()
        assert str(path) in line and "\n" not in line
        assert "ONNX" in line


def test_external_weights_are_never_read(tmp_path: Path) -> None:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="/proj/MatMul")]
    weight = helper.make_tensor("w", TensorProto.FLOAT, [64, 64], b"\x00\x00\x00\x3f" * 4096, raw=True)
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], [weight])
    path = tmp_path / "big.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path),
              save_as_external_data=True, all_tensors_to_one_file=True, location="big.data", size_threshold=0)
    (tmp_path / "big.data").unlink()  # the weights are gone: reading the graph must not need them
    g = open_path(path).graph
    assert g.node("param:w").outputs[0].shape == (64, 64)
    assert [e.src for e in g.producers("proj/MatMul.0")] == ["input:x", "param:w"]


def test_a_real_dynamo_export_gives_the_module_paths_of_live_capture() -> None:
    path = Path(__file__).parent / "data" / "block_dynamo_export.onnx"
    inv = open_path(path)
    model, x = block_and_input()
    assert {n.module for n in inv.graph if not n.is_placeholder} == live_modules(model, x)
    assert inv.run.extra["nodes_with_module_metadata"] >= 15 and inv.run.extra["producer"].startswith("pytorch")
    with_source = [n for n in inv.graph if n.source is not None]
    assert with_source and all(n.source.file.endswith("graph_models.py") for n in with_source)
def control_flow_model(tmp_path: Path) -> Path:
    """If and Loop bodies reading outer tensors, a custom-domain op, legacy names and nameless ops."""
    then_g = helper.make_graph([helper.make_node("Relu", ["a"], ["t_out"], name="/blk/then/Relu")], "then", [],
                               [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, [3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["a"], ["e_out"], name="else_neg")], "else", [],
                               [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [3])])
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "a"], ["v_out"], name="/loop/Add"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [3])])
    nodes = [helper.make_node("Abs", ["x"], ["a"], name="/enc/Abs"),
             helper.make_node("ReduceSum", ["a"], ["s"], name="/enc/ReduceSum", keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="/Greater"),
             helper.make_node("If", ["c"], ["y"], name="/blk/If", then_branch=then_g, else_branch=else_g),
             helper.make_node("Loop", ["trip", "c", "y"], ["z"], name="/blk/blk.0/Loop", body=body),
             helper.make_node("Custom", ["z", "missing"], ["q"], name="custom", domain="my.dom"),
             helper.make_node("Mul", ["q", "q"], ["r"], name="/enc/enc.1/Mul")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("r", TensorProto.FLOAT, [3])],
                              [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
                               helper.make_tensor("trip", TensorProto.INT64, [], [2])])
    path = tmp_path / "ctrl.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("my.dom", 1)]),
              str(path))
    return path


def test_loop_and_if_bodies_custom_domains_and_legacy_names(tmp_path: Path) -> None:
    path = control_flow_model(tmp_path)
    inv = open_path(path)
    g = inv.graph
    assert [n.id for n in g] == [
        "param:zero", "param:trip", "input:x", "enc/Abs.0", "enc/ReduceSum.0", "Greater.0", "blk/If.0", "blk/Neg.0",
        "blk.then/Relu.0", "blk.0/Loop.0", "input:/blk/blk.0/Loop.body/i", "input:/blk/blk.0/Loop.body/cond_in",
        "input:/blk/blk.0/Loop.body/v_in", "loop/Add.0", "blk.0/Identity.0", "Custom.0", "enc.1/Mul.0"]
    assert g.node("blk/Neg.0").module == "blk" and g.node("blk/Neg.0").attrs["module_inferred"]  # the If's module
    assert g.node("blk.0/Identity.0").module == "blk.0" and g.node("input:/blk/blk.0/Loop.body/i").module == "blk.0"
    assert g.node("blk/If.0").attrs["subgraphs"] == ["else_branch", "then_branch"]
    assert g.node("blk.0/Loop.0").attrs["subgraphs"] == ["body"]
    assert g.node("Custom.0").attrs["domain"] == "my.dom"
    assert [(e.src, e.in_slot) for e in g.producers("loop/Add.0")] == [("input:/blk/blk.0/Loop.body/v_in", 0),
                                                                       ("enc/Abs.0", 1)]
    assert [(e.src, e.in_slot) for e in g.producers("blk.0/Loop.0")] == [("param:trip", 0), ("Greater.0", 1),
                                                                         ("blk/If.0", 2)]
    assert [(e.src, e.in_slot) for e in g.producers("enc.1/Mul.0")] == [("Custom.0", 0), ("Custom.0", 1)]
    assert g.producers("Custom.0") == g.producers("Custom.0")[:1]  # `missing` has no producer: listed, not linked
    assert g.edge_count() == 16 and inv.run.extra["subgraphs"] == 3
    assert inv.run.extra["notes"] == ["1 node inputs name tensors nothing produces (e.g. 'missing')"]
    assert g.upstream("enc.1/Mul.0") == ["Custom.0", "blk.0/Loop.0", "blk/If.0", "Greater.0", "param:trip",
                                         "enc/ReduceSum.0", "param:zero", "enc/Abs.0", "input:x"]


def test_module_paths_from_names_cached_per_prefix_match_the_plain_derivation() -> None:
    from ascend_tui.readers.graphs.torch_meta import NodeNameModules, module_from_node_name

    parts = ["", "layers", "layers.0", "layers.0.attn", "attn", "mlp", "mlp.0", "mlp.0.1", "mlp.01", "x.y"]
    names = ["/layers.3/attn/MatMul_1", "/MatMul", "MatMul", "a/b/c", "//x/y", "/", "", "/mlp/mlp.0/mlp.0.1/Relu",
             "/a//b/c", "/mlp/mlp.01/Relu"]
    for k in range(4000):  # every combination of up to four parts, deterministic
        picked = [parts[(k // len(parts) ** j) % len(parts)] for j in range(1 + k % 4)]
        names.append(("/" if k % 5 else "") + "/".join(picked) + ("/Op" if k % 3 else ""))
    modules = NodeNameModules()
    for _ in range(2):  # the second pass answers from the cache
        assert [modules.of(n) for n in names] == [module_from_node_name(n) for n in names]
    assert modules.of("/layers.3/mlp/mlp.0/Gemm") == "layers.3.mlp.0" == modules["/layers.3/mlp/mlp.0"]
    deep = "/" + "/".join(f"m{k}" for k in range(5000)) + "/Relu"  # deeper than the interpreter's stack
    assert modules.of(deep) == module_from_node_name(deep)
