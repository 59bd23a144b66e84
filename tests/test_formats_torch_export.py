"""torch.export archives: the real model.json excerpt, a real archive against live capture, bad archives."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from ascend_tui.errors import InputError
from ascend_tui.offline.open import kind_of, open_path
from tests.conftest import FIXTURES
from tests.graph_models import block_and_input, live_modules

EXCERPT = FIXTURES / "graphs" / "torch_export_pt2_model_json_excerpt.json"


def _archive(tmp_path: Path, model_json: bytes, name: str = "m.pt2") -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("m/models/model.json", model_json)
        zf.writestr("m/archive_format", "pt2")
    return path


def test_excerpt_reads_without_torch(tmp_path: Path) -> None:
    assert EXCERPT.is_file(), f"fixture missing: {EXCERPT}"
    path = _archive(tmp_path, EXCERPT.read_bytes())
    assert kind_of(path) == "torch.export archive"
    inv = open_path(path)
    g = inv.graph
    data = json.loads(EXCERPT.read_text())
    assert len([n for n in g if not n.is_placeholder]) == len(data["graph_module"]["graph"]["nodes"])
    ln = g.node("ln1/layer_norm.0")
    assert ln.op_type == "aten.layer_norm" and ln.module_class == "LayerNorm"
    assert ln.source is not None and ln.source.short() == "models.py:41"
    # slots count tensor arguments as live capture does; the excerpt lacks input x, so slot 0 is unwired
    assert [(e.src, e.in_slot) for e in g.producers("ln1/layer_norm.0")] == [("param:ln1.weight", 1),
                                                                             ("param:ln1.bias", 2)]
    assert any("nothing produces" in n for n in inv.run.extra["notes"])
    lin = g.node("attn.qkv/linear.0")
    assert lin.source.short() == "models.py:24" and lin.attrs["name"] == "linear"
    chunk = next(n for n in g if n.op_type == "aten.chunk")
    assert len(chunk.outputs) == 3 and chunk.module == "attn"
    assert inv.run.source == "torch_export"


def test_real_archive_module_paths_match_live_capture(tmp_path: Path) -> None:
    import torch  # in the test command (.[live,test]): a missing torch fails, never skips
    model, x = block_and_input()
    path = tmp_path / "block.pt2"
    torch.export.save(torch.export.export(model, (x,)), str(path))
    inv = open_path(path)
    g = inv.graph
    assert {n.module for n in g if not n.is_placeholder} == live_modules(model, x)
    assert {n.id for n in g if n.kind == "param"} >= {"param:attn.qkv.weight", "param:mlp.2.bias"}
    assert g.node("param:mlp.0.weight").module == "mlp.0"
    assert "input:x" in {n.id for n in g if n.kind == "input"}
    last = g.execution_order()[-1]
    assert {"input:x", "param:ln1.weight", "param:mlp.2.bias"} <= set(g.upstream(last))
    src = g.node("attn/softmax.0").source
    assert src is not None and src.file.endswith("graph_models.py")


@pytest.mark.parametrize("content, problem", [
    (None, "not a zip"),
    (b"{not json", "not valid JSON"),
    (b'{"graph_module": {}}', "no graph_module.graph"),
    (b'{"graph_module": {"graph": {"nodes": [{"inputs": []}]}}}', "has no target"),
])
def test_malformed_archive_is_one_clear_line(tmp_path: Path, content: bytes | None, problem: str) -> None:
    if content is None:
        path = tmp_path / "bad.pt2"
        path.write_bytes(b"PK\x03\x04 truncated")
    else:
        path = _archive(tmp_path, content)
    with pytest.raises(InputError) as info:
        open_path(path)
    assert problem in info.value.line() and str(path) in info.value.line()


def test_archive_without_model_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "aoti.pt2"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("m/data/aotinductor/model.so", b"\x7fELF")
    with pytest.raises(InputError, match="no models/model.json"):
        open_path(path)


def test_signature_kinds_become_placeholders(tmp_path: Path) -> None:
    model = {"graph_module": {
        "graph": {"inputs": [{"as_tensor": {"name": n}} for n in ("b_bn_running_mean", "x")],
                  "nodes": [{"target": "torch.ops.aten.sub.Tensor", "name": "sub",
                             "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "x"}}},
                                        {"name": "other", "arg": {"as_tensor": {"name": "b_bn_running_mean"}}}],
                             "outputs": [{"as_tensor": {"name": "sub"}}],
                             "metadata": {"nn_module_stack": "L__self__,,M;L__self__bn,bn,torch.nn.BatchNorm1d"}}],
                  "tensor_values": {"x": {"dtype": 13, "sizes": [{"as_int": 2}, {"as_expr": {"expr_str": "s0"}}]}}},
        "signature": {"input_specs": [
            {"buffer": {"arg": {"name": "b_bn_running_mean"}, "buffer_name": "bn.running_mean", "persistent": True}},
            {"user_input": {"arg": {"as_tensor": {"name": "x"}}}}]}}}
    g = open_path(_archive(tmp_path, json.dumps(model).encode())).graph
    assert g.node("buffer:bn.running_mean").module == "bn"
    assert g.node("input:x").outputs[0] is not None and g.node("input:x").outputs[0].shape == (2, -1)
    assert g.node("input:x").outputs[0].dtype == "bfloat16"
    assert [e.src for e in g.producers("bn/sub.0")] == ["input:x", "buffer:bn.running_mean"]
    assert g.node("bn/sub.0").module_class == "BatchNorm1d"
