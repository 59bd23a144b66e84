"""MindSpore save_graphs IR: the real sample's nodes, scopes, sources, call bindings; malformed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_tui.errors import InputError
from ascend_tui.offline.open import kind_of, open_path
from ascend_tui.readers.graphs import mindspore_ir
from tests.conftest import FIXTURES

SAMPLE = FIXTURES / "graphs" / "mindspore_ir_sample_validate.ir"


def test_sample_nodes_scopes_and_sources() -> None:
    assert SAMPLE.is_file(), f"fixture missing: {SAMPLE}"
    assert kind_of(SAMPLE) == "MindSpore IR"
    inv = open_path(SAMPLE)
    g = inv.graph
    assert len([n for n in g if not n.is_placeholder]) == 12  # "Total number of cnodes: 12"
    assert len(g) == 17 and g.edge_count() == 21
    add = g.node("Add.0")
    assert add.attrs["name"] == "Default/Add-op0" and add.attrs["aliases"] == ["Default_Add-op0"]
    assert add.source is not None and add.source.short() == "test_ir.py:17"
    assert add.inputs[0] == add.outputs[0] and add.outputs[0].dtype == "float32"
    assert g.node("Cast.0").outputs[0].dtype == "bool"
    assert [e.src for e in g.producers("Add.0")] == ["Sub.0", "input:y"]
    # Partial(@true_branch, %1, %0) binds the branch's parameters, so the walk crosses the call
    assert {"Add.0", "Sub.0", "input:x", "input:y"} <= set(g.upstream("Mul.0"))
    assert g.node("Div.0").source.short() == "test_ir.py:13"
    assert inv.run.extra["call_bindings"] == 3


def test_scopes_become_module_paths() -> None:
    scope = ("Gradients/Default/network-WithLossCell/layers-CellList/0-LLamaDecodeLayer/"
             "attention-LLamaAttention/MatMul-op3")
    assert mindspore_ir.scope_module(scope) == ("network.layers.0.attention", "LLamaAttention", "backward")
    assert mindspore_ir.scope_module("Default/Add-op0") == ("", "", "forward")


@pytest.mark.parametrize("text, problem", [
    ("# IR entry: @g\nsubgraph @g() {\n  %0(x) = PrimFunc_Add(%para1_x, %para1_x)\n", "never closed"),
    ("# IR entry: @g\n# nothing else\n", "no MindSpore graph nodes"),
])
def test_malformed_ir_is_one_clear_line(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "01_validate_0001.ir"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        open_path(path)
    assert problem in info.value.line() and str(path) in info.value.line()
