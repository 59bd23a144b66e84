"""msprobe graph_visualize databases: module tree, inferred dataflow, compare results, overflow levels, bad files."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from ascend_tui.errors import InputError
from ascend_tui.offline.open import kind_of, open_path
from tests.conftest import FIXTURES

VIS = FIXTURES / "msprobe" / "msprobe_output" / "vis"
BUILD = VIS / "build_20261130002230.vis.db"
COMPARE = VIS / "compare_20261130002202.vis.db"


def test_build_db_lays_overflow_levels_on_the_inferred_graph() -> None:
    assert BUILD.is_file(), f"fixture missing: {BUILD}"
    assert kind_of(BUILD) == "msprobe graph_visualize"
    inv = open_path(BUILD)
    g = inv.graph
    assert len(g) == 16 and g.edge_count() == 28
    assert [e.src for e in g.producers("exp.0")] == ["mul.0"]
    assert g.node("exp.0").attrs["edge_match"] == ["stats"]  # recovered from matching statistics: marked
    assert [e.src for e in g.producers("fc/linear.0")][1:] == ["param:fc.weight", "param:fc.bias"]
    levels = {f.node: (f.severity, f.metrics["overflow_level"]) for f in inv.findings if f.check == "overflow"}
    assert levels["exp.0"] == ("error", "critical") and levels["mul.0"] == ("warning", "high")
    assert g.node("exp.0").source.short() == "ovf.py:9"
    assert not inv.stats.get("exp.0").finite


def test_compare_db_gives_precision_findings_and_bench_reference() -> None:
    inv = open_path(COMPARE)
    g = inv.graph
    dump = open_path(FIXTURES / "msprobe" / "dump_bf16")
    assert g.edge_count() == dump.graph.edge_count() == 75  # the same inferred dataflow as the dump itself
    assert inv.run.reference == "Bench" and inv.reference is not None
    conv = [f for f in inv.findings if f.node == "conv1/conv2d.0"]
    assert conv and conv[0].check == "precision" and conv[0].severity == "error"
    assert conv[0].metrics["Cosine"] == pytest.approx(0.999996)
    assert "dtype of NPU and Bench are inconsistent" in conv[0].metrics["Err_message"]
    target, bench = inv.stats.get("conv1/conv2d.0"), inv.reference.get("conv1/conv2d.0")
    assert target.max == pytest.approx(2.21875) and bench.max == pytest.approx(2.2095046043395996)
    assert {"conv1", "bn1", "fc"} <= set(g.modules())


def test_malformed_vis_db_is_one_clear_line(tmp_path: Path) -> None:
    junk = tmp_path / "junk.vis.db"
    junk.write_bytes(b"SQLite format 3\x00" + b"\x00" * 40)
    other = tmp_path / "other.vis.db"
    conn = sqlite3.connect(other)
    conn.execute("create table t (x)")
    conn.commit()
    conn.close()
    truncated = tmp_path / "cut.vis.db"
    truncated.write_bytes(BUILD.read_bytes()[:4096])
    for path, problem in ((junk, "SQLite"), (other, "without tb_nodes"), (truncated, "")):
        with pytest.raises(InputError) as info:
            open_path(path)
        assert problem in info.value.line() and str(path) in info.value.line()
    copy = tmp_path / "b.vis.db"
    shutil.copy(BUILD, copy)
    copy.chmod(0o444)
    assert len(open_path(copy).graph) == 16  # read-only files open (the reader never writes)
