"""Investigation walks (step-through, producers, findings order) and its save/load round trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_tui.errors import InputError
from ascend_tui.evidence import ChainLink, Finding, MemoryEvent, MemorySample, RootCause, StatsTable, TensorStats
from ascend_tui.navigation import Navigator
from ascend_tui.investigation import Investigation, RunInfo
from ascend_tui.report import build_report
from test_graph import diamond


def finding(node: str, index: int, severity: str = "error", check: str = "overflow") -> Finding:
    chain = (ChainLink(node, "", "aten.x", 7e4), ChainLink("input:0", "", "input", 800.0))
    return Finding(check, "inf", severity, node, "aten.x", "", index, f"Inf at {node}",  # type: ignore[arg-type]
                   attribution="introduced", metrics={"abs_max": float("inf")},
                   root_cause=RootCause("input:0", "", "un-normalized input", chain))


def make() -> Investigation:
    stats = StatsTable()
    stats.add("add.0", 0, TensorStats(-1.0, float("inf"), float("nan"), float("inf"), float("inf"), 0, 3, 0, 32))
    inv = Investigation(diamond(), stats=stats, run=RunInfo(target="m.py", checks=("overflow",)))
    inv.add_findings([finding("mul.0", 4, "warning"), finding("add.0", 3), finding("mul.0", 4)])
    return inv


def test_findings_are_ordered_and_indexed() -> None:
    inv = make()
    assert [(f.node, f.severity) for f in inv.findings] == [("add.0", "error"), ("mul.0", "error"), ("mul.0", "warning")]
    assert inv.first_finding().node == "add.0"
    assert inv.badges("mul.0") == {"overflow": "error"}
    assert inv.summary() == {"errors": 2, "warnings": 1}
    assert inv.next_finding("add.0").node == "mul.0"
    assert inv.next_finding("mul.0").node == "add.0", "wraps around"
    assert inv.next_finding("mul.0", -1).node == "add.0"
    assert inv.next_finding("enc/relu.0").node == "add.0"


def test_step_through_and_back() -> None:
    inv, nav = make(), Navigator()
    nav.focus(inv.first_finding().node)
    assert nav.focus(inv.next(nav.focused)) == "mul.0"
    assert inv.next(nav.focused) == "mul.0", "stays on the last op"
    assert nav.focus(inv.previous(nav.focused)) == "add.0"
    assert nav.focus(inv.step_into_producer(1, nav.focused)) == "enc.inner/tanh.0"
    assert nav.focus(inv.step_into_producer(0, nav.focused)) == "enc/relu.0"
    assert inv.step_into_producer(0, nav.focused) == "input:0"
    assert nav.back() == "enc.inner/tanh.0"
    assert nav.back() == "add.0"
    assert inv.trace_root_cause("add.0").node == "input:0"
    assert inv.step(1, "input:0") == "enc/relu.0"


def test_navigator_survives_a_newer_investigation_of_the_same_model() -> None:
    """Partial results and re-runs replace the investigation; the user's place and way back stay."""
    nav = Navigator()
    for node in ("add.0", "mul.0", "enc/relu.0"):
        nav.focus(node)
    nav.rebase(make())
    assert nav.focused == "enc/relu.0" and nav.back() == "mul.0" and nav.back() == "add.0"
    nav.focus("gone/op.0")
    nav.rebase(make())
    assert nav.focused == "add.0", "a focus the new graph lacks falls back to where the user came from"


def test_save_and_load_keep_everything(tmp_path: Path) -> None:
    inv = make()
    inv.memory_events.append(MemoryEvent("leak", "live", "12 KiB kept", size=12288, frames=("m.py:3",)))
    inv.memory_samples.append(MemorySample(1.0, 2048.0, 4096.0, "iteration 1"))
    path = tmp_path / "x.atui.json"
    inv.save(path)
    back = Investigation.load(path)
    assert back.findings == inv.findings
    assert back.stats.get("add.0") .inf_count == 3
    assert back.memory_events == inv.memory_events and back.memory_samples == inv.memory_samples
    assert build_report(back) == build_report(inv)


def test_report_schema_names() -> None:
    report = build_report(make())
    f = report["findings"][0]
    assert set(f) >= {"check", "kind", "severity", "node", "op_type", "module", "index", "message",
                      "attribution", "metrics", "root_cause"}
    assert set(f["root_cause"]) == {"node", "module", "reason", "chain"}
    assert set(f["root_cause"]["chain"][0]) == {"node", "module", "op_type", "value"}
    assert f["metrics"]["abs_max"] == "Infinity"


def test_load_rejects_other_files(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"schema": "ascend-tui.report/1"}')
    with pytest.raises(InputError, match="not an ascend-tui investigation"):
        Investigation.load(path)
    path.write_text('{"schema": "ascend-tui.investigation/1", "graph": 3}')
    with pytest.raises(InputError, match=str(path)):
        Investigation.load(path)


def test_reference_histograms_survive_save_and_load(tmp_path: Path) -> None:
    import numpy as np

    from ascend_tui.evidence import HIST_BINS, HistogramTable

    inv = make()
    row = np.zeros((1, HIST_BINS + 1), dtype=np.int64)
    row[0, 3], row[0, HIST_BINS] = 5, 5
    inv.reference_histograms = HistogramTable([("add.0", 0)], row)
    path = tmp_path / "h.atui.json"
    inv.save(path)
    back = Investigation.load(path)
    assert back.reference_histograms is not None and back.reference_histograms.get("add.0", 0)[1] == 5
    assert make().snapshot().reference_histograms is None


def test_stats_table_appends_new_keys_at_once_and_overwrites_known_ones() -> None:
    """`add_many` into a table that has rows: new keys are appended in order (one slice), a batch that names a key
    again (or twice) goes row by row, the later row winning at the key's first place, as it always did."""
    import numpy as np

    from ascend_tui.evidence import STAT_FIELDS

    def row(x: float) -> np.ndarray:
        return np.full(len(STAT_FIELDS), x)

    t = StatsTable()
    t.add_many([("a", 0), ("b", 0)], np.stack([row(1), row(2)]))
    t.add_many([("c", 0), ("c", 1)], np.stack([row(3), row(4)]))  # all new: appended
    assert t.keys() == [("a", 0), ("b", 0), ("c", 0), ("c", 1)] and len(t) == 4
    assert t.column("min").tolist() == [1, 2, 3, 4]
    t.add_many([("d", 0), ("a", 0)], np.stack([row(5), row(6)]))  # one known: overwritten in place
    t.add_many([("e", 0), ("e", 0)], np.stack([row(7), row(8)]))  # the same key twice: the later wins
    assert t.keys() == [("a", 0), ("b", 0), ("c", 0), ("c", 1), ("d", 0), ("e", 0)]
    assert t.column("min").tolist() == [6, 2, 3, 4, 5, 8]
    assert t.get("c", 1) is not None and t.get("c", 1).min == 4
    for n in range(70):  # past the first allocation (64 rows): grown, earlier rows kept
        t.add_many([(f"g{n}", 0)], row(n)[None])
    assert len(t) == 76 and t.column("min")[:6].tolist() == [6, 2, 3, 4, 5, 8] and t.column("min")[-1] == 69
