"""Shape inference of an untyped ONNX model runs when a node's tensors are first read, once, and never shows as
"no shape": `ascend-tui graph` without `--json` skips it, every reader of a node's tensors gets the inferred ones."""

from __future__ import annotations

import argparse
import io
import json
import threading
from pathlib import Path

import onnx  # in the test extra: a missing onnx fails, never skips
from onnx import TensorProto, helper

from ascend_tui.cli.graph import run_graph
from ascend_tui.offline.open import open_path
from ascend_tui.readers.graphs import onnx_model
from tests.test_formats_onnx import control_flow_model


def untyped_model(path: Path, blocks: int = 6) -> Path:
    """MatMul -> Relu | Sigmoid -> Add blocks with no value_info: only inference knows the inner shapes."""
    nodes, prev = [], "x"
    for b in range(blocks):
        mm, r, s, j = (f"t{b}_{k}" for k in ("mm", "relu", "sig", "join"))
        nodes += [helper.make_node("MatMul", [prev, "w"], [mm], name=f"/layers.{b}/mlp/MatMul"),
                  helper.make_node("Relu", [mm], [r], name=f"/layers.{b}/act/Relu"),
                  helper.make_node("Sigmoid", [mm], [s], name=f"/layers.{b}/gate/Sigmoid"),
                  helper.make_node("Add", [r, s], [j], name=f"/layers.{b}/Add")]
        prev = j
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 8])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT16, [2, 8])],
                              [helper.make_tensor("w", TensorProto.FLOAT16, [8, 8], [0.0] * 64)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


def tensors(inv: object) -> list[tuple[str, object, object]]:
    return [(n.id, n.inputs, n.outputs) for n in inv.graph]  # type: ignore[attr-defined]


def test_shapes_are_inferred_on_first_read_as_an_eager_inference_gives_them(tmp_path: Path) -> None:
    path = untyped_model(tmp_path / "m.onnx")
    inv = open_path(path)
    assert inv.graph.shapes_pending and inv.run.extra["shape_inference"] == "pending"
    # the node records as they stand before anything asked: no tensors yet, but nobody is shown them
    assert inv.graph.structure()[inv.graph.position("layers.2.act/Relu.0")].outputs == ()
    relu = inv.graph.node("layers.2.act/Relu.0")  # the first read works them out
    assert not inv.graph.shapes_pending and inv.run.extra["shape_inference"] is True
    assert relu.outputs[0] is not None and relu.outputs[0].shape == (2, 8) and relu.outputs[0].dtype == "float16"
    eager = tmp_path / "eager.onnx"  # what the file would hold had the exporter typed every tensor
    onnx.save(onnx.shape_inference.infer_shapes(onnx.load(str(path))), str(eager))
    typed = open_path(eager)
    assert typed.graph.shapes_pending and typed.run.extra["shape_inference"] is False  # types read on first ask
    assert tensors(inv) == tensors(typed)
    assert all(m is not None for n in inv.graph if not n.is_placeholder for m in n.outputs)


def test_bodies_get_their_shapes_too(tmp_path: Path) -> None:
    path = control_flow_model(tmp_path)
    inv = onnx_model.load(path)
    eager = tmp_path / "eager.onnx"
    onnx.save(onnx.shape_inference.infer_shapes(onnx.load(str(path))), str(eager))
    assert tensors(inv) == tensors(onnx_model.load(eager))


def test_graph_command_prints_counts_without_inferring_and_json_with_shapes(tmp_path: Path) -> None:
    path = untyped_model(tmp_path / "m.onnx")
    out = io.StringIO()
    args = argparse.Namespace(path=str(path), evidence=[], json=None, fail_on="error", quiet=True)
    assert run_graph(args, out) == 0 and "24 operators" in out.getvalue()
    written = tmp_path / "g.json"
    args.json = str(written)
    assert run_graph(args, io.StringIO()) == 0
    nodes = {n["id"]: n for n in json.loads(written.read_text())["nodes"]}
    assert nodes["layers.5/Add.0"]["outputs"] == [[[2, 8], "float16"]]
    assert nodes["layers.0.mlp/MatMul.0"]["inputs"] == [[[2, 8], "float16"], [[8, 8], "float16"]]


def test_threads_asking_at_once_run_inference_once_and_all_see_shapes(tmp_path: Path, monkeypatch) -> None:
    calls: list[int] = []
    real = onnx.shape_inference.infer_shapes

    def counted(model: object, **kw: object) -> object:
        calls.append(1)
        return real(model, **kw)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", counted)
    inv = onnx_model.load(untyped_model(tmp_path / "m.onnx", blocks=40))
    seen: list[object] = []
    start = threading.Barrier(4)

    def read() -> None:
        start.wait()
        seen.append(inv.graph.node("layers.39/Add.0").outputs[0])

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(seen) == 4 and all(m is not None and m.shape == (2, 8) for m in seen)


def test_a_model_inference_rejects_keeps_its_file_types_and_says_so(tmp_path: Path, monkeypatch) -> None:
    def rejects(model: object, **kw: object) -> object:
        raise RuntimeError("unsupported op")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", rejects)
    inv = onnx_model.load(untyped_model(tmp_path / "m.onnx"))
    assert inv.graph.node("input:x").outputs[0].shape == (2, 8)  # what the file types stays
    assert inv.run.extra["shape_inference"] is False and not inv.graph.shapes_pending


def test_saving_or_pickling_works_the_shapes_out_first(tmp_path: Path) -> None:
    import pickle

    inv = onnx_model.load(untyped_model(tmp_path / "m.onnx"))
    copy = pickle.loads(pickle.dumps(inv.graph))  # a pending resolver holds a lock: never pickled
    assert not copy.shapes_pending and copy.node("layers.1/Add.0").outputs[0].shape == (2, 8)
    inv = onnx_model.load(untyped_model(tmp_path / "m.onnx"))
    saved = inv.to_json()
    assert saved["run"]["extra"]["shape_inference"] is True
