"""What `ascend-tui graph` prints and writes (`graph/summary.py`): the module tree counted as `OpGraph.modules()`
lists it, and the node-link text written record by record (`node_link_json`), the same bytes as `json.dumps` of
`node_link` on every graph format the command reads and on records holding odd attrs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ascend_tui.evidence import SourceLocation, TensorMeta
from ascend_tui.graph.opgraph import OpGraph, OpNode
from ascend_tui.graph.summary import node_link, node_link_json, summarize
from ascend_tui.offline.open import open_path
from ascend_tui.offline.overlay import lay_path
from tests.conftest import FIXTURES
from tests.test_formats_onnx import model_from_sample
from tests.test_formats_onnx_columns import REAL
from tests.test_formats_torch_export import _archive

VIS = FIXTURES / "msprobe" / "msprobe_output" / "vis" / "build_20261130002230.vis.db"


def _same(graph: OpGraph, meta: dict[str, object] | None = None) -> str:
    text = node_link_json(graph, meta)
    assert text == json.dumps(node_link(graph, meta), separators=(",", ":"), allow_nan=False)
    return text


@pytest.mark.parametrize("name", ["graphs/ge_proto_sample_afterUBMatch_excerpt.txt",
                                  "graphs/mindspore_ir_sample_validate.ir",
                                  "graphs/torch_export_pt2_model_json_excerpt.json",
                                  "msprobe/msprobe_output/vis/build_20261130002230.vis.db"])
def test_the_text_equals_json_dumps_of_node_link_on_each_format(name: str, tmp_path: Path) -> None:
    path = FIXTURES / name
    assert path.exists(), f"fixture missing: {path}"
    if path.suffix == ".json":  # the torch.export excerpt: its archive
        path = _archive(tmp_path, path.read_bytes())
    inv = open_path(path)
    _same(inv.graph, {"path": str(path), "summary": summarize(inv.graph).to_json()})


def test_the_text_equals_json_dumps_of_node_link_with_evidence_laid_and_on_onnx(tmp_path: Path) -> None:
    inv = open_path(VIS)
    lay_path(inv, FIXTURES / "msprobe" / "dump_ovf", None, None)
    text = _same(inv.graph, {"evidence": inv.run.extra.get("evidence", {})})
    assert '"inferred":true' in text
    for path in (REAL, model_from_sample(tmp_path)):
        _same(open_path(path).graph, {"path": str(path)})


def test_the_text_equals_json_dumps_of_node_link_on_odd_records() -> None:
    meta = TensorMeta((2, -1), "float32")
    src = SourceLocation("/src/n\u00e9t.py", 3, "forward", ("/src/n\u00e9t.py:3 in forward",))
    g = OpGraph("g\u00e9 \"q\"")
    g.add_node(OpNode("input:x", "input", "", -1, "input", (), (meta,), attrs={"name": "x"}))
    g.add_node(OpNode("a/\u4e2d.0", "Add", "a", 0, "op", (meta, None), (meta,), src, "forward", "Blk",
                      {"name": "n", "edge_match": ["stats", "exact"], "count": 3, "flag": True, "none": None,
                       "nested": {"k": (1, 2.5)}, "bad": math.nan, "obj": Path("/p")}))
    g.add_node(OpNode("b.0", "Mul", "", 1, "op", (meta, meta), (), None, "backward", "", {1: "x", "t": ("u",)}))
    g.add_node(OpNode("c.0", "Relu", "", True, "op", (), (), src, attrs={"name": "c", "lst": ["a", 1]}))
    g.add_node(OpNode("d.0", "Relu", "", 2, "op", attrs={}))
    g.add_node(OpNode("e.0", "Relu", "", 3, "op", attrs={"name": 5}))
    g.add_node(OpNode("f.0", "Relu", "", 4, "op", attrs={"name": "f", "on": True, "off": False, "k": 7, "no": None,
                                                          "aliases": ["a", "\u00e9"], "big": 2 ** 70, "neg": -1}))
    for src_id, dst, out, slot in (("input:x", "a/\u4e2d.0", 0, 0), ("input:x", "a/\u4e2d.0", 0, 1),
                                   ("a/\u4e2d.0", "b.0", 0, 1), ("input:x", "b.0", 0, 0), ("b.0", "c.0", 0, 0)):
        g.add_edge(src_id, dst, out, slot)
    text = _same(g, {"x": math.inf, "y": [1, (2,)]})
    assert '"inferred":true' in text and '"bad":"nan"' in text


@pytest.mark.parametrize("modules", [[], [""], ["a"], ["a.b", "a"], ["x.y.z", "q"], ["a..b", ".a", "a.", "."],
                                     ["a.b.c", "a.b.d", "e.f", "", "a.b"], ["l.0.mlp", "l.0", "l.1.act", "l.10.a.b"]])
def test_the_module_tree_counts_what_modules_lists_and_its_depth(modules: list[str]) -> None:
    g = OpGraph()
    for k, module in enumerate(modules):
        g.add_node(OpNode(f"op{k}", "Relu", module, k, "op"))
    listed = g.modules()
    summary = summarize(g)
    assert summary.modules == len(listed)
    assert summary.module_depth == max((m.count(".") + 1 for m in modules if m), default=0)
