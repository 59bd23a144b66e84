"""`ascend-tui graph`: the summary a user reads, the node-link JSON, evidence laid by name, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest

from ascend_tui.cli.main import main
from tests.conftest import FIXTURES

GE = FIXTURES / "graphs" / "ge_proto_sample_afterUBMatch_excerpt.txt"
VIS = FIXTURES / "msprobe" / "msprobe_output" / "vis" / "build_20261130002230.vis.db"


def test_graph_prints_summary_and_writes_node_link_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "g.json"
    assert main(["graph", str(GE), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "GE graph dump" in text and "6 nodes (3 operators, 3 input), 5 edges" in text
    assert "Conv2D 1" in text and "inferred edges: 0" in text
    data = json.loads(out.read_text())
    g = nx.node_link_graph(data, edges="links")
    assert g.number_of_nodes() == 6 and g.number_of_edges() == 5
    conv = next(n for n in data["nodes"] if n["id"] == "Conv2D.0")
    assert conv["attrs"]["origin_names"] == ["scale_conv1", "conv1", "bn_conv1"]
    assert data["graph"]["format"] == "GE graph dump"


def test_graph_counts_inferred_edges_and_lays_evidence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "vis.json"
    # the overflow dump's errors fail the run (exit 1 at the default --fail-on error), the JSON is written all the same
    assert main(["graph", str(VIS), str(FIXTURES / "msprobe" / "dump_ovf"), "--json", str(out)]) == 1
    text = capsys.readouterr().out
    assert "inferred edges: 12" in text and "module tree: 2 modules, depth 1" in text
    assert "note: dump_ovf:" in text and "exact" in text
    links = json.loads(out.read_text())["links"]
    assert sum(1 for link in links if link["inferred"]) == 12


def test_graph_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"\x00garbage")
    assert main(["graph", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1 and err[-1].startswith("ascend-tui: error: ") and str(bad) in err[-1]
    assert main(["graph", str(GE), "--json", str(GE)]) == 2  # never overwrite an input
    assert "would overwrite an input" in capsys.readouterr().err
