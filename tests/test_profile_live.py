"""Live CPU profiling of the layout sample: steps, module paths, graph nodes, and the layout advice."""

from __future__ import annotations

import pytest

from ascend_tui.checks.profile import categories, summarize
from ascend_tui.cli.main import main
from ascend_tui.investigation import Investigation
from ascend_tui.cli.profile import profile_target
from tests.conftest import SAMPLES

SAMPLE = str(SAMPLES / "layout_detector.py")


@pytest.fixture(scope="module")
def inv() -> Investigation:
    return profile_target(SAMPLE, device="cpu", steps=2, warmup=1)


def test_ops_carry_steps_modules_and_graph_nodes(inv: Investigation) -> None:
    t = inv.profile.kernels
    assert inv.profile.kind == "live" and "profile" in inv.run.checks
    assert set(t.ints["step"].tolist()) == {0, 1}
    assert inv.profile.unmatched == ()  # every op found its node (conv2d -> convolution, contiguous -> clone)
    nodes = [t.label("node", i) for i in range(t.n)]
    assert all(n in inv.graph for n in nodes)
    conv = [i for i in range(t.n) if t.label("name", i) == "aten::conv2d"]
    assert {t.label("module", i) for i in conv} >= {"stem", "backbone.0.0.conv", "box_head"}
    assert inv.graph.node(nodes[conv[0]]).op_type.startswith("aten.convolution")


def test_permute_contiguous_time_belongs_to_the_modules_that_convert(inv: Investigation) -> None:
    t = inv.profile.kernels
    cats = categories(t)
    layout = [i for i in range(t.n) if cats.at(i) == "layout"]
    assert {t.label("name", i) for i in layout} == {"aten::permute", "aten::contiguous"}
    # every conversion sits in a ChannelsLastNorm (stem_norm, norm1, norm2), none in a conv or a head
    assert all(t.label("module", i).split(".")[-1] in ("stem_norm", "norm1", "norm2") for i in layout)
    assert len(layout) == 13 * 4 * 2  # 13 norms x (2 permutes + 2 contiguous) x 2 steps
    finding = next(f for f in inv.findings if f.kind == "layout_conversion")
    assert "caused by" in finding.message and ("norm1" in finding.message or "norm2" in finding.message)
    share = {g.key: g.share for g in summarize(t, "category")}["layout"]
    assert share > 0  # measured time: only its presence is asserted, never its size


def test_profile_runs_through_check_and_profile_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", SAMPLE, "--device", "cpu", "--steps", "1", "--warmup", "0", "-q"]) == 0
    out = capsys.readouterr().out
    assert "live, " in out and "layout" in out and "aten::contiguous" in out


def test_a_model_that_only_runs_under_other_checks_guards_is_not_profiled() -> None:
    """The demo indexes out of range; the memory check clamps it during its passes, profiling runs it bare."""
    from ascend_tui.live.options import RunOptions
    from ascend_tui.live.runner import run_live
    from ascend_tui.live.targets import load_target

    demo = load_target(str(SAMPLES / "demo.py"))
    inv = run_live(demo.model, demo.inputs, RunOptions(checks=("memory", "profile"), device="cpu", reference=None))
    note = next(f for f in inv.findings if f.check == "profile")
    assert note.kind == "not_profiled" and "IndexError" in note.message and inv.profile is None
    assert any(f.check == "memory" for f in inv.findings)
