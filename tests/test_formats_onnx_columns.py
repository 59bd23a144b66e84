"""The ONNX reader reads nodes a chunk at a time, column by column: any chunking gives one and the same graph."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascend_tui.readers.graphs import onnx_model
from ascend_tui.readers.graphs.torch_meta import NodeNameModules, literal_list, module_from_node_name
from tests.test_formats_onnx import control_flow_model, model_from_sample

import onnx  # noqa: E402  (in the test extra: a missing onnx fails, never skips)
from onnx import TensorProto, helper  # noqa: E402

REAL = Path(__file__).parent / "data" / "block_dynamo_export.onnx"


def odd_model(tmp_path: Path) -> Path:
    """What exporters and hand edits leave in real files: multi-output ops with an output left out, an input
    left out, a tensor read before it is made, a tensor made twice, a custom domain, metadata on one op."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="/enc/Relu"),
             helper.make_node("Split", ["a"], ["b", "", "c"], name="/enc/Split", axis=0, num_outputs=3),
             helper.make_node("Add", ["later", "b"], ["d"], name="late_reader"),
             helper.make_node("Clip", ["d", "", "w"], ["e"], name="/dec/Clip"),
             helper.make_node("Fused", ["c", "w"], ["later"], name="/dec/Fused", domain="my.dom"),
             helper.make_node("Add", ["later", "e"], ["a"], name="/dec/Add"),
             helper.make_node("Neg", ["a"], ["y"], name="/out/Neg")]
    for key, value in (("pkg.torch.onnx.name_scopes", "['', 'dec', 'dec.clip', 'clamp']"),
                       ("pkg.torch.onnx.class_hierarchy", "['Net', 'Decoder', 'Clip', 'aten.clamp.default']"),
                       ("pkg.torch.onnx.stack_trace", 'File "/src/net.py", line 7, in forward\n    y = clip(x)')):
        nodes[3].metadata_props.add(key=key, value=value)
    graph = helper.make_graph(nodes, "odd", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                              [helper.make_tensor("w", TensorProto.FLOAT, [], [1.0])],
                              value_info=[helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])])
    path = tmp_path / "odd.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("my.dom", 1)]),
              str(path))
    return path


def _everything(path: Path) -> str:
    """The loaded graph and run facts, attrs in their order, as one string to compare."""
    inv = onnx_model.load(path)
    g = inv.graph
    attrs = [list((n.attrs or {}).items()) for n in g]
    return json.dumps([g.to_json(), attrs, inv.run.extra, [repr(n) for n in g]], default=repr)


def test_odd_tensors_link_as_a_walk_one_node_at_a_time_links_them(tmp_path: Path) -> None:
    inv = onnx_model.load(odd_model(tmp_path))
    g = inv.graph
    assert [n.id for n in g] == ["param:w", "input:x", "enc/Relu.0", "enc/Split.0", "Add.0", "dec.clip/Clip.0",
                                 "dec/Fused.0", "dec/Add.0", "out/Neg.0"]
    assert [(e.src, e.out_slot, e.in_slot) for e in g.producers("Add.0")] == [("enc/Split.0", 0, 1)]  # `later`: not yet
    assert [(e.src, e.in_slot) for e in g.producers("dec.clip/Clip.0")] == [("Add.0", 0), ("param:w", 2)]
    assert [(e.src, e.out_slot) for e in g.producers("dec/Fused.0")] == [("enc/Split.0", 2), ("param:w", 0)]
    assert [e.src for e in g.producers("out/Neg.0")] == ["dec/Add.0"]  # `a` made again: the later maker
    assert [e.dst for e in g.consumers("enc/Relu.0")] == ["enc/Split.0"]
    assert g.node("enc/Split.0").outputs[0].shape == (2,) and g.node("enc/Split.0").outputs[1] is None
    clip = g.node("dec.clip/Clip.0")
    assert clip.module_class == "Clip" and clip.source is not None and clip.source.short() == "net.py:7"
    assert clip.attrs == {"name": "/dec/Clip", "aten": "aten.clamp.default"}
    assert g.node("dec/Fused.0").attrs == {"name": "/dec/Fused", "domain": "my.dom"}
    assert g.node("Add.0").attrs == {"name": "late_reader", "module_inferred": True}
    assert inv.run.extra["notes"] == ["1 node inputs name tensors nothing produces (e.g. 'later')"]
    assert inv.run.extra["nodes_with_module_metadata"] == 1


def test_any_chunk_size_gives_the_same_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert REAL.is_file(), f"fixture missing: {REAL}"
    paths = [REAL, model_from_sample(tmp_path), control_flow_model(tmp_path), odd_model(tmp_path)]
    whole = [_everything(p) for p in paths]
    for size in (1, 2, 3, 5):  # bodies, metadata and custom domains at every place in a chunk
        monkeypatch.setattr(onnx_model, "CHUNK", size)
        assert [_everything(p) for p in paths] == whole


def test_progress_and_cancel_are_checked_between_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from ascend_tui.errors import Cancelled

    monkeypatch.setattr(onnx_model, "CHUNK", 2)
    seen: list[tuple[str, int, int | None]] = []
    onnx_model.load(odd_model(tmp_path), progress=lambda what, done, total: seen.append((what, done, total)))
    # top-level operators done out of the 7 (placeholders and bodies are not counted: `8/7` read as a bug)
    assert [s for s in seen if s[0] == "building graph"] == [("building graph", k, 7) for k in (0, 2, 4, 6, 7)]
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        onnx_model.load(odd_model(tmp_path), cancel=cancel)


def test_module_paths_of_many_names_at_once_match_the_plain_derivation() -> None:
    parts = ["", "layers", "layers.0", "attn", "mlp", "mlp.0", "mlp.0.1", "mlp.01", "m\n", "x.y"]
    names = [("/" if k % 5 else "") + "/".join(parts[(k // len(parts) ** j) % len(parts)] for j in range(1 + k % 4))
             + ("/Op" if k % 3 else "") for k in range(3000)]
    modules = NodeNameModules()
    assert modules.of_all(names) == [module_from_node_name(n) for n in names] == modules.of_all(names)
    unfolded = ["layers.0", "attn", "x.y", "q", "Op_1"]  # no part starts with another and a dot: the one-split way
    plain = [("/" if k % 5 else "") + "/".join(unfolded[(k // 5 ** j) % 5] for j in range(1 + k % 4))
             for k in range(600)]
    for chunk in (names, plain, plain[:7], names[:40], ["/a/b/Op", "/a/b/", "/x/y/Op"], ["/m/m.0/Op"], ["/a/b/c"], []):
        assert onnx_model.legacy_modules(NodeNameModules(), chunk) == [module_from_node_name(n) for n in chunk]


def test_plain_list_literals_read_like_the_python_parser_reads_them() -> None:
    import ast

    texts = ["['', 'attn', 'attn.qkv', 'linear']", "[]", "['a','b']", "['a\\\\b']", "['it''s']", "['a\nb']",
             "[\"it's\", 'b']", "('a', 'b')", "['a', 3]", "['<locals>.Block', 'x y']", "['a'] ", "[", "['a']]"]
    for text in texts:
        try:
            value = ast.literal_eval(text)
            expected = [str(v) for v in value] if isinstance(value, (list, tuple)) else []
        except (ValueError, SyntaxError):
            expected = []
        assert literal_list(text) == expected, text
