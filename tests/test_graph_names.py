"""Evidence by name: exact, normalized and fused-origin matches, and the unmatched listed, on real graphs."""

from __future__ import annotations

import threading

import numpy as np

from ascend_tui.evidence import Finding, MemoryEvent, StatsTable, TensorStats
from ascend_tui.offline.open import open_path
from ascend_tui.offline.overlay import lay_on, name_events
from ascend_tui.graph.names import NameIndex, normalize
from ascend_tui.graph.opgraph import OpGraph, OpNode
from ascend_tui.investigation import Investigation
from tests.conftest import FIXTURES

GE = FIXTURES / "graphs" / "ge_proto_sample_afterUBMatch_excerpt.txt"
MS = FIXTURES / "graphs" / "mindspore_ir_sample_validate.ir"


def test_ge_names_exact_dump_file_and_fused_origin() -> None:
    index = NameIndex(open_path(GE).graph)
    assert (index.match("conv1").node, index.match("conv1").how) == ("Conv2D.0", "exact")
    assert index.match("Conv2D.0").how == "id"
    assert (index.match("bn_conv1").node, index.match("bn_conv1").how) == ("Conv2D.0", "fused-origin")
    dumped = index.match("LeakyRelu.conv1_relu.5.2.1717171717171")  # a CANN data-dump file name
    assert dumped is not None and dumped.node == "LeakyRelu.0"
    assert index.match("fc1000") is None


def test_mindspore_kernel_dump_spelling_matches_the_scope() -> None:
    index = NameIndex(open_path(MS).graph)
    assert index.match("Default_Add-op0").node == "Add.0"
    assert index.match("default/add-op0").how == "normalized"
    assert normalize("Default/network-Net/Add-op0") == normalize("Default_network_Net_Add_op0")


def _evidence() -> Investigation:
    graph = OpGraph("profile")
    for i, name in enumerate(("pool1", "scale_conv1", "ghost_op")):
        graph.add_node(OpNode(name, "Kernel", "", i, attrs={"name": name}))
    stats = StatsTable()
    stats.add_many([("pool1", 0), ("scale_conv1", 0), ("ghost_op", 0)], np.array(
        [TensorStats(-1, 7, 0.5, 3, 7, 0, 0, 0, 64).to_row()] * 3))
    findings = [Finding("overflow", "inf", "error", n, "Kernel", "", i, f"{n} overflowed")
                for i, n in enumerate(("pool1", "ghost_op"))]
    events = [MemoryEvent("allocation", "ascend profiler", "pool1 allocated", size=64, node="pool1")]
    return Investigation(graph, stats=stats, findings=findings, memory_events=events)


def test_laying_evidence_moves_what_matches_and_lists_the_rest() -> None:
    base = open_path(GE)
    result = lay_on(base, _evidence(), "profile.csv")
    assert base.stats.get("Pooling.0").max == 7 and base.stats.get("Conv2D.0").max == 7
    assert result.how == {"exact": 1, "fused-origin": 1}
    assert result.unmatched == ["ghost_op"]
    assert base.run.extra["unmatched_evidence"]["profile.csv"] == ["ghost_op"]
    moved = base.findings_for("Pooling.0")
    assert moved and moved[0].metrics["evidence_name"] == "pool1" and moved[0].op_type == "Pooling"
    assert all(f.node in base.graph for f in base.findings)
    assert base.memory_events[0].node == "Pooling.0"
    assert "1 operators matched no node (e.g. ghost_op)" in result.note()


def test_sanitizer_kernels_named_like_ge_ops_land_by_name() -> None:
    base = open_path(GE)
    events = name_events(base, [MemoryEvent("out_of_bounds", "mssanitizer", "oob", kernel="conv1_relu"),
                                MemoryEvent("out_of_bounds", "mssanitizer", "oob", kernel="softmax_kernel")])
    assert events[0].node == "LeakyRelu.0" and events[0].extra["name_match"] == "exact"
    assert events[1].node is None


def test_open_lays_evidence_files_on_a_graph_in_the_worker() -> None:
    from ascend_tui.app.workers import load_paths
    from ascend_tui.live.options import RunOptions

    vis = FIXTURES / "msprobe" / "msprobe_output" / "vis" / "compare_20261130002202.vis.db"
    loaded = load_paths([str(vis), str(FIXTURES / "msprobe" / "dump_fp32")], RunOptions(),
                        lambda *_: None, threading.Event())
    assert loaded.notes and "as the reference" in loaded.notes[0]
    assert loaded.inv.reference is not None and loaded.inv.reference.get("conv1/conv2d.0") is not None
