"""Affinity-API advice with msprof-analyze's schedule-advisor rules, on real timelines and made-up ones."""

from __future__ import annotations

import json
from pathlib import Path

from ascend_tui.checks.affinity_api import ATEN_RULES, OPTIMIZER_RULES, match_aten, pattern
from ascend_tui.offline.open import open_path
from tests.conftest import FIXTURES

LEVEL1 = FIXTURES / "peer/Ascend__msinsight/test/data/pytorch"


def _affinity(inv: object) -> dict[str, dict]:
    return {f.metrics["api"]: dict(f.metrics) for f in inv.findings if f.kind == "affinity_api"}  # type: ignore[attr-defined]


def test_level1_gets_what_msprof_analyze_advises(fixtures: Path) -> None:
    """msprof-analyze 26.2.0 `advisor schedule -d rank0_ascend_pt` (CANN 8.0.0 / torch 2.1.0 rules) finds one
    affinity API in this run, torch_npu.optim.NpuFusedSGD for Optimizer.step#SGD.step; the text and the db export
    of the run both say the same."""
    for export in ("text", "db"):
        found = _affinity(open_path(LEVEL1 / export / "level1/rank0_ascend_pt"))
        assert set(found) == {"torch_npu.optim.NpuFusedSGD"}, export
        assert found["torch_npu.optim.NpuFusedSGD"]["patterns"] == ["SGD.step"]
        assert "timeline_fusion_ops.yaml" in found["torch_npu.optim.NpuFusedSGD"]["source"]


def test_rule_set_is_the_advisors_default() -> None:
    assert sum(len(r) for r in ATEN_RULES.values()) == 34 and len(OPTIMIZER_RULES) == 9  # its "0/34" and "0/9" scans
    assert OPTIMIZER_RULES["Adam.step"] == "torch_npu.optim.NpuFusedAdam"
    # the advisor's own translation of a rule with groups into a regex over -name- tokens
    assert pattern("(chunk)-neg-cat-(mul){0,2}-add") == ("(-chunk-)(-neg-)(-cat-)(-mul-){0,2}(-add-)", True)
    assert pattern("add-reciprocal-mul") == ("add-reciprocal-mul", False)


def _event(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def test_made_up_timeline_with_rotary_rmsnorm_and_adam(tmp_path: Path) -> None:
    seq = ["aten::slice", "aten::neg", "aten::cat", "aten::mul", "aten::mul", "aten::add",  # rotary embedding
           "aten::pow", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul",  # RMSNorm by hand
           "aten::neg", "aten::relu"]  # a neg without cat: nothing
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "Python"}}]
    t = 0.0
    for name in seq:
        events.append(_event(name, t, 10))
        events.append(_event("aten::empty", t + 1, 2))  # nested: not a first-level op, never part of a pattern
        t += 20
    events.append(_event("Optimizer.step#Adam.step", t, 50))
    events.append(_event("aten::add_", t + 1, 5))  # inside the step: not first-level either
    events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 2, "tid": 1, "ts": 5, "dur": 3})
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    found = _affinity(open_path(path))
    # the rotary's mul-mul-add is also the advisor's torch.addmm rule: it says both, and so do we
    assert set(found) == {"torch_npu.npu_rotary_mul", "torch_npu.npu_rms_norm", "torch_npu.optim.NpuFusedAdam",
                          "torch.addmm"}
    assert found["torch_npu.npu_rotary_mul"]["patterns"] == ["(slice)-neg-cat-(mul){0,2}-add"]
    assert found["torch_npu.npu_rms_norm"]["count"] == 1


def test_plain_rules_match_exact_runs() -> None:
    assert [m.api for m in match_aten(["add", "reciprocal", "mul"])] == ["optimizer.clip_grad_norm_fused_"]
    assert match_aten(["add", "reciprocal", "div"]) == []
    assert [m.count for m in match_aten(["gelu", "relu", "gelu"]) if m.api == "torch_npu.fast_gelu"] == [2]


def test_side_by_side_with_the_advisor(fixtures: Path, tmp_path: Path) -> None:
    """The level1 rank with a made-up stretch of timeline appended (a rotary embedding, an RMSNorm by hand, an
    Adam step): msprof-analyze 26.2.0 `advisor schedule` on this folder lists 5 affinity APIs, exactly these."""
    import shutil

    run = tmp_path / "rank0_ascend_pt"
    shutil.copytree(LEVEL1 / "text/level1/rank0_ascend_pt", run)
    trace = run / "ASCEND_PROFILER_OUTPUT/trace_view.json"
    trace.chmod(0o644)
    events = json.loads(trace.read_text())
    cpu = next(e for e in events if e.get("cat") == "cpu_op")
    t = max(float(e["ts"]) + float(e.get("dur", 0)) for e in events if "ts" in e) + 1000
    for name in ("aten::slice", "aten::neg", "aten::cat", "aten::mul", "aten::mul", "aten::add", "aten::pow",
                 "aten::mean", "aten::add", "aten::rsqrt", "aten::mul", "aten::neg", "aten::relu"):
        for n, ts, dur in ((name, t, 10), ("aten::empty", t + 1, 2)):
            events.append({"ph": "X", "cat": "cpu_op", "name": n, "pid": cpu["pid"], "tid": cpu["tid"],
                           "ts": f"{ts:.3f}", "dur": dur, "args": {}})
        t += 20
    events.append({"ph": "X", "cat": "cpu_op", "name": "Optimizer.step#Adam.step", "pid": cpu["pid"],
                   "tid": cpu["tid"], "ts": f"{t:.3f}", "dur": 50, "args": {}})
    trace.write_text(json.dumps(events))
    assert set(_affinity(open_path(run))) == {"torch.addmm", "torch_npu.npu_rms_norm", "torch_npu.npu_rotary_mul",
                                               "torch_npu.optim.NpuFusedAdam", "torch_npu.optim.NpuFusedSGD"}
