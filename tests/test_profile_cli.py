"""`ascend-tui profile`: tables, findings, baseline diff, JSON and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascend_tui.cli.main import main
from tests.conftest import FIXTURES

PROF = FIXTURES / "profiler"


def test_profile_folder_prints_tables_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.json"
    assert main(["profile", str(PROF / "level2_2025-11"), "--json", str(out), "-q"]) == 0
    text = capsys.readouterr().out
    assert "ascend_pt, 20 kernels" in text and "FlashAttentionScore" in text and "step time" in text
    assert "WARNING profile/host_bound" in text
    report = json.loads(out.read_text())
    assert report["schema"] == "ascend-tui.report/1" and report["profile"]["kernels"] == 20
    cats = {c["key"]: c for c in report["profile"]["by_category"]}
    assert cats["communication"]["count"] == 2 and round(sum(c["share"] for c in cats.values()), 6) == 1.0
    assert {f["kind"] for f in report["findings"]} >= {"hotspot", "host_bound", "unbound"}


def test_baseline_diff_regressions_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    code = main(["profile", str(PROF / "level1_2025-01"), "--baseline", str(PROF / "level0_2025-01"),
                 "--json", str(out), "-q"])
    text = capsys.readouterr().out
    assert code == 1  # the step got >5% slower: an error, so CI fails
    assert "against" in text and "ERROR   profile/regression" in text
    rows = json.loads(out.read_text())["profile"]["baseline"]["type"]
    deltas = [r["after_us"] - r["before_us"] for r in rows]
    assert deltas == sorted(deltas, reverse=True)
    assert rows[0]["key"] == "hcom_allReduce_" and rows[0]["before_us"] > 0  # level0's N/A types read from names


def test_profile_bad_input_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", str(tmp_path / "missing")]) == 2
    (tmp_path / "kernel_details.csv").write_text("Name,Duration(us)\nx,fast\n")
    assert main(["profile", str(tmp_path / "kernel_details.csv")]) == 2
    err = capsys.readouterr().err
    assert "'fast' is not a number" in err and err.count("\n") >= 1
    assert main(["profile", str(PROF / "level1_2025-01"), "--json", str(PROF / "level1_2025-01")]) == 2


def test_kernels_map_onto_a_graph_and_the_unmatched_are_listed(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from ascend_tui.graph.opgraph import OpGraph, OpNode
    from ascend_tui.investigation import Investigation

    g = OpGraph("alexnet")
    for i, (nid, op) in enumerate([("features.0/convolution.0", "aten.convolution"), ("features.1/relu.0", "aten.relu"),
                                   ("trans_TransData_0", "TransData")]):
        g.add_node(OpNode(id=nid, op_type=op, module=nid.partition("/")[0], index=i))
    Investigation(g).save(tmp_path / "g.atui.json")
    out = tmp_path / "r.json"
    assert main(["profile", str(PROF / "level1_2025-01"), "--graph", str(tmp_path / "g.atui.json"),
                 "--json", str(out), "-q"]) == 0
    text = capsys.readouterr().out
    assert "op names matched no graph node: aclnnDropoutGenMaskV2_DSAGenBitMask_DSAGenBitMask" in text
    report = json.loads(out.read_text())
    assert report["graph"]["nodes"] == 3  # the profile sits on the given graph
    from ascend_tui.offline.open import open_path
    from ascend_tui.offline.profile import on_graph

    inv = on_graph(open_path(PROF / "level1_2025-01").profile, Investigation.load(tmp_path / "g.atui.json"))
    t = inv.profile.kernels
    nodes = {t.label("name", i): t.label("node", i) for i in range(t.n)}
    assert nodes["trans_TransData_0"] == "trans_TransData_0"  # exact id
    assert nodes["Conv2D1"] == "features.0/convolution.0"  # Ascend type -> aten op
    assert nodes["aclnnInplaceRelu_Relu_Relu"] == "features.1/relu.0"  # normalised name vs op type
    assert "hcom_allReduce__586_0_1" in inv.profile.unmatched and nodes["hcom_allReduce__586_0_1"] == ""
