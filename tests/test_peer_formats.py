"""Files from the Ascend tools' own test suites (fixtures/peer/) and the cluster cases the issue names."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ascend_tui.cli.main import main
from ascend_tui.errors import InputError
from ascend_tui.offline.open import kind_of, open_path
from ascend_tui.readers.graphs.ge_dump import op_family
from ascend_tui.readers.sanitizer.log import parse_file
from tests.conftest import FIXTURES

PEER = FIXTURES / "peer"
OLD_VIS = PEER / ("xiaobingling93-pixel__Ascend-mstt/plugins/tensorboard-plugins/tb_graph_ascend/test/data/ut_test_cases/"
                  "test_layout_hierarchy_controller/mock_single_statis_graph.vis")
OM_JSON = PEER / "Ascend__msit/msit/test/UT/resource/analyze/dataset/model/test.om.json"
MS_DUMP = PEER / "Ascend__msprobe/test/msprobe_test/mindspore_ut/compare/dump_file/mindspore_data"
LEVEL1 = FIXTURES / "profiler/level1_2025-01"


def test_older_vis_json_reads(fixtures: Path) -> None:
    assert kind_of(OLD_VIS) == "msprobe graph_visualize"
    inv = open_path(OLD_VIS)
    ops = [n for n in inv.graph if not n.is_placeholder]
    # its 17 nodes: 11 leaves become operators, the rest the module tree above them
    assert len(ops) == 11 and {"add_5", "add_2", "arg0_1_0"} <= {n.id for n in ops}
    assert inv.graph.node("add_2").module == "AddThree_0.Test.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.tt.ee"
    flagged = {f.node for f in inv.findings if f.check == "precision"}
    assert {"add_5", "add_2"} <= flagged  # precision_index 1 and 9475: marked by graph_visualize


def test_ge_graph_as_json_reads(fixtures: Path) -> None:
    assert kind_of(OM_JSON) == "GE graph dump"
    inv = open_path(OM_JSON)
    assert len(inv.graph) == 132 and inv.graph.edge_count() == 140
    types = {n.op_type for n in inv.graph}
    assert {"Conv2D", "TransData", "BNInferenceD", "LeakyRelu", "Const"} <= types


def test_ge_opset_suffixes_fold_into_one_type() -> None:
    assert op_family("ResizeV14") == op_family("ResizeV18") == "Resize"
    assert op_family("ReduceMeanV18") == "ReduceMean"
    for own in ("MatMulV2", "MatMulV3", "PadV3", "TopKV2", "BNInferenceD", "Conv2D", "V14"):
        assert op_family(own) == own  # GE's own versions are different operators


def test_ge_dump_with_opset_suffixes(tmp_path: Path) -> None:
    path = tmp_path / "ge_proto_00001_Build.txt"
    path.write_text('graph {\n name: "g"\n op { name: "x" type: "Data" }\n'
                    ' op { name: "r1" type: "ResizeV14" input: "x:0" }\n'
                    ' op { name: "r2" type: "ResizeV18" input: "r1:0" }\n}\n')
    inv = open_path(path)
    resize = [n for n in inv.graph if n.op_type == "Resize"]
    assert len(resize) == 2 and {n.attrs["ge_type"] for n in resize} == {"ResizeV14", "ResizeV18"}


def test_mindspore_cell_records_are_cells(fixtures: Path) -> None:
    inv = open_path(MS_DUMP)
    types = {n.op_type for n in inv.graph}
    assert "Cell.FusedRMSNorm" in types and not any(t.startswith("Module.") for t in types)


def test_refused_sanitizer_log_counts_every_line(tmp_path: Path) -> None:
    log = tmp_path / "odd.log"
    log.write_text("====== WARNING: something odd\n====== \nfoo\n====== bar\n")
    with pytest.raises(InputError, match="in its 4 lines; 3 start like report lines"):
        parse_file(log)


def test_folder_with_only_cluster_analysis_output(fixtures: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "profiler/msprof_analyze", run / "cluster_analysis_output")
    assert kind_of(run) == "cluster profile"
    c = open_path(run).profile.extra["cluster"]
    assert len(c["ranks"]) == 16 and c["slow_rank"] == 13


def test_cluster_analysis_db(tmp_path: Path) -> None:
    import sqlite3

    out = tmp_path / "run" / "cluster_analysis_output"
    out.mkdir(parents=True)
    with sqlite3.connect(out / "cluster_analysis.db") as conn:
        conn.execute('create table ClusterStepTraceTime (step TEXT, type TEXT, "index" TEXT, computing NUMERIC, '
                     "communication_not_overlapped NUMERIC, overlapped NUMERIC, communication NUMERIC, free NUMERIC, "
                     "stage NUMERIC, bubble NUMERIC, preparing NUMERIC)")
        rows = [("0", "rank", str(r), 100.0, 10.0, 5, 15, 20.0 + (60 if r == 2 else 0), 0, 0, 0) for r in range(4)]
        conn.executemany("insert into ClusterStepTraceTime values (?,?,?,?,?,?,?,?,?,?,?)",
                         rows + [("0", "stage", "(0, 1)", 1, 1, 1, 1, 1, 1, 1, 1)])
    conn.close()
    inv = open_path(tmp_path / "run")
    c = inv.profile.extra["cluster"]
    assert [r["rank"] for r in c["ranks"]] == [0, 1, 2, 3] and (c["slow_rank"], c["slow_stage"]) == (2, "free")


def _rank(root: Path, name: str, kernels: bool) -> None:
    shutil.copytree(LEVEL1, root / name)
    if not kernels:  # a rank whose export has steps but no kernel rows (and no timeline to take them from)
        out = root / name / "ASCEND_PROFILER_OUTPUT"
        for f in ("kernel_details.csv", "trace_view.json", "op_statistic.csv", "operator_details.csv"):
            (out / f).unlink(missing_ok=True)


def test_four_ranks_two_with_kernels_equal_steps(fixtures: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "job"
    for r in range(4):
        _rank(root, f"rank{r}_ascend_pt", kernels=r in (1, 3))
    inv = open_path(root)
    c = inv.profile.extra["cluster"]
    # every folder's profiler_info says rank 0: numbered by folder name, loudly
    assert [r["rank"] for r in c["ranks"]] == [0, 1, 2, 3]
    assert any("repeat rank ids" in n for n in inv.run.extra["notes"])
    assert any(f.kind == "duplicate_rank" for f in inv.findings)
    per = {r: v["kernels"] for r, v in c["per_rank"].items()}
    assert per[0] == per[2] == 0 and per[1] == per[3] > 0
    assert c["kernels"] == 2 * per[1] and inv.profile.kernels.n == per[1] and c["shown_rank"] == 1
    assert c["slow_rank"] == -1 and not [f for f in inv.findings if f.kind == "slow_rank"]  # equal step times
    assert main(["profile", str(root), "-q"]) == 0
    out = capsys.readouterr().out
    assert f"4 ranks, {c['kernels']} kernels in all" in out and "no slow rank" in out and "<- slow" not in out


def test_eight_ranks_all_saying_rank_0_are_never_merged(fixtures: Path, tmp_path: Path) -> None:
    root = tmp_path / "job"
    for r in range(8):  # names without a rank number: numbered in folder order
        _rank(root, f"host_{r:02d}_{1000 + r}_ascend_pt", kernels=False)
    inv = open_path(root)
    c = inv.profile.extra["cluster"]
    assert [r["rank"] for r in c["ranks"]] == list(range(8)) and len(c["per_rank"]) == 8
    assert "rank 0 (8 folders)" in inv.run.extra["notes"][0] and "folder order" in inv.run.extra["notes"][0]


def test_bad_records_in_json_graphs_are_skipped_and_counted(fixtures: Path, tmp_path: Path) -> None:
    import json

    data = json.loads(OLD_VIS.read_text())
    data["node"]["broken"] = "not an object"
    vis = tmp_path / "old.vis"
    vis.write_text(json.dumps(data))
    inv = open_path(vis)
    assert inv.run.extra["skipped"][0]["skipped_records"] == 1 and len([n for n in inv.graph if not n.is_placeholder]) == 11
    model = json.loads(OM_JSON.read_text())
    model["graph"][0]["op"].insert(3, {"type": "Cast"})  # an op without its name
    ge = tmp_path / "model.om.json"
    ge.write_text(json.dumps(model))
    inv = open_path(ge)
    assert len(inv.graph) == 132 and inv.run.extra["skipped"][0]["first_bad_record"].startswith("record 4:")
