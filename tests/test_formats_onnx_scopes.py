"""Which producer an ONNX node input names: the latest node of its graph to write that name, at whichever output
slot (the reader keeps output 0 apart from the others), else the enclosing graph's, and a body's names stay in
the body."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_tui.readers.graphs import onnx_model

import onnx  # noqa: E402  (in the test extra: a missing onnx fails, never skips)
from onnx import TensorProto, helper  # noqa: E402


def redefining_model(path: Path) -> Path:
    """Tensor names written again at another output slot, outputs left out, and an If body reading and
    shadowing outer names."""
    def split(name: str, source: str, outputs: list[str]) -> onnx.NodeProto:
        return helper.make_node("Split", [source], outputs, name=name, axis=0, num_outputs=len(outputs))

    then = helper.make_graph([helper.make_node("Add", ["u", "t"], ["o1"], name="/if/Add"),
                              split("/if/Split", "o1", ["u", "k"]),  # shadows the outer u in the body only
                              helper.make_node("Mul", ["u", "k"], ["o"], name="/if/Mul")], "then", [],
                             [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Identity", ["a"], ["o"], name="/if/Id")], "else", [],
                              [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)])
    nodes = [
        split("/s1/Split", "x", ["a", "t", "u"]),
        helper.make_node("Relu", ["t"], ["r1"], name="/r/Relu"),  # t: output 1 of s1
        helper.make_node("Neg", ["a"], ["t"], name="/n/Neg"),  # t written again, at output 0
        helper.make_node("Relu", ["t"], ["r2"], name="/r/Relu_1"),
        split("/s2/Split", "r2", ["t", "a"]),  # t at output 0 again, a now at output 1
        helper.make_node("Add", ["t", "a"], ["s"], name="/Add"),
        helper.make_node("Add", ["u", "missing"], ["s2"], name="/Add_1"),
        helper.make_node("Sum", ["u", "a", "", "s"], ["z"], name="/Sum"),
        split("/s3/Split", "z", ["p", ""]),
        split("/s4/Split", "z", ["", "q"]),
        helper.make_node("Add", ["p", "q"], ["w"], name="/Add_2"),
        helper.make_node("Constant", [], ["c"], name="/c",
                         value=helper.make_tensor("v", TensorProto.BOOL, [], [True])),
        helper.make_node("If", ["c"], ["iff"], name="/If", then_branch=then, else_branch=other),
        helper.make_node("Add", ["iff", "u"], ["y"], name="/Add_3"),  # the outer u again
    ]
    graph = helper.make_graph(nodes, "redef", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    out = path / "redef.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(out))
    return out


@pytest.mark.parametrize("chunk", [1, 3, onnx_model.CHUNK])
def test_inputs_read_the_latest_writer_at_its_slot_and_bodies_keep_their_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(onnx_model, "CHUNK", chunk)
    inv = onnx_model.load(redefining_model(tmp_path))
    edges = {(e.src, e.dst, e.out_slot, e.in_slot) for e in inv.graph.edges()}
    assert edges == {
        ("input:x", "s1/Split.0", 0, 0),
        ("s1/Split.0", "r/Relu.0", 1, 0), ("s1/Split.0", "n/Neg.0", 0, 0),
        ("n/Neg.0", "r/Relu.1", 0, 0), ("r/Relu.1", "s2/Split.0", 0, 0),
        ("s2/Split.0", "Add.0", 0, 0), ("s2/Split.0", "Add.0", 1, 1),
        ("s1/Split.0", "Add.1", 2, 0),
        ("s1/Split.0", "Sum.0", 2, 0), ("s2/Split.0", "Sum.0", 1, 1), ("Add.0", "Sum.0", 0, 3),
        ("Sum.0", "s3/Split.0", 0, 0), ("Sum.0", "s4/Split.0", 0, 0),
        ("s3/Split.0", "Add.2", 0, 0), ("s4/Split.0", "Add.2", 1, 1),
        ("Constant.0", "If.0", 0, 0),
        ("s1/Split.0", "if/Add.0", 2, 0), ("s2/Split.0", "if/Add.0", 0, 1),
        ("if/Add.0", "if/Split.0", 0, 0), ("if/Split.0", "if/Mul.0", 0, 0), ("if/Split.0", "if/Mul.0", 1, 1),
        ("s2/Split.0", "if/Identity.0", 1, 0),
        ("If.0", "Add.3", 0, 0), ("s1/Split.0", "Add.3", 2, 1),
    }
    assert inv.graph.edge_count() == len(edges)
    assert "1 node inputs name tensors nothing produces (e.g. 'missing')" in inv.run.extra["notes"]
