"""Profile findings that do not flip from run to run: the layout sample profiled live five times, the same findings.

The layout finding comes from the captured graph (permute+contiguous pairs and the bytes they copy), so
timing noise — one step's layout share was 2% and another's 29% on this machine — cannot turn it on or
off; the time is reported beside it as the median over the steps with its spread.
"""

from __future__ import annotations

from ascend_tui.checks.layout_pairs import pairs, step_shares
from ascend_tui.cli.profile import profile_target
from tests.conftest import SAMPLES

SAMPLE = str(SAMPLES / "layout_detector.py")


def test_five_live_profiles_give_the_same_findings() -> None:
    runs = [profile_target(SAMPLE, device="cpu", steps=3, warmup=1) for _ in range(5)]
    warnings = [sorted((f.kind, f.node) for f in inv.findings if f.severity in ("error", "warning")) for inv in runs]
    assert all(w == warnings[0] for w in warnings) and ("layout_conversion", "stem_norm/clone.0") in warnings[0]
    layouts = [next(f for f in inv.findings if f.kind == "layout_conversion") for inv in runs]
    assert len({(f.metrics["pairs"], f.metrics["bytes"], f.metrics["bytes_share"]) for f in layouts}) == 1
    for f, inv in zip(layouts, runs):
        assert f.metrics["pairs"] == 26 and f.metrics["steps"] == 3
        assert f.metrics["share_min"] <= f.metrics["share"] <= f.metrics["share_max"]
        assert "median of 3 steps" in f.message and "caused by norm1 (12), norm2 (12), stem_norm (2)" in f.message
        assert len(step_shares(inv.profile)) == 3


def test_pairs_are_read_from_the_graph() -> None:
    inv = profile_target(SAMPLE, device="cpu", steps=1, warmup=0)
    found = pairs(inv.graph)
    assert len(found) == 26 and all(inv.graph.node(p.view).op_type.startswith("aten.permute") for p in found)
    assert {p.module.rsplit(".", 1)[-1] for p in found} == {"stem_norm", "norm1", "norm2"}
    assert found[0].nbytes == 2 * 32 * 32 * 32 * 4  # stem_norm's NHWC copy of a (2, 32, 32, 32) float32 map
