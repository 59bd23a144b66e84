"""The live precision check: target in bfloat16 against the float32 reference, attribution by isolated replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import SAMPLES
from torch import nn

from ascend_tui.app.screens.precision import PrecisionScreen, table
from ascend_tui.cli.main import main
from ascend_tui.live import runner
from ascend_tui.live.precision import PrecisionCheck
from ascend_tui.live.runner import investigate
from ascend_tui.live.targets import load_target


def test_drifting_resnet_sample_names_the_variance_subtraction_as_introduced() -> None:
    target = load_target(str(SAMPLES / "drifting_resnet.py"))
    coarse = investigate(target.model, target.inputs, checks=(PrecisionCheck(),), dtype="bfloat16", device="cpu")
    inv = investigate(target.model, target.inputs, checks=(PrecisionCheck(),), dtype="bfloat16", device="cpu",
                      detail="full")
    for run in (coarse, inv):  # coarse-to-fine (the default) finds the same origin, by the same replay
        first = run.first_finding("precision")
        assert first is not None and first.node == "layer2.0.norm/sub.0"
        assert first.attribution == "introduced" and first.metrics["evidence"] == "replay"
        assert not any(f.attribution == "introduced" and not f.module.startswith("layer2.0.norm")
                       for f in run.findings if f.severity != "info")
    assert coarse.run.extra["capture"]["window"]["suspect"] == "layer2.0.norm"
    later = next(f for f in coarse.findings if f.node == "layer2.1.conv1/module.0")  # module level downstream
    assert later.attribution == "inherited" and later.root_cause.module == "layer2.0.norm"
    downstream = next(f for f in inv.findings if f.node == "layer2.1.conv1/convolution.0")
    assert downstream.attribution == "inherited" and downstream.root_cause is not None
    assert downstream.root_cause.module == "layer2.0.norm"
    rows = table(inv)
    assert rows and {r["node"] for r in rows} >= {"layer2.0.norm/sub.0", "stem.0/convolution.0"}
    assert PrecisionScreen.available(inv)
    json.dumps(inv.to_json(), allow_nan=False)  # the saved investigation stays strict JSON


class SteepAfterMatmul(nn.Module):
    """A bfloat16 matmul adds a small error; exp of 4x, computed in float32, only amplifies it."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(64, 64, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(4.0 * self.proj(x).float())


def test_a_steep_activation_that_only_amplifies_its_input_is_inherited() -> None:
    torch.manual_seed(0)
    model = SteepAfterMatmul().eval()
    with torch.no_grad():
        model.proj.weight.mul_(2.0)
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(1))
    inv = investigate(model, (x,), checks=(PrecisionCheck(),), dtype="bfloat16", device="cpu")
    exp = next(f for f in inv.findings if f.op_type == "aten.exp")
    assert exp.attribution == "inherited" and exp.metrics["evidence"] == "replay"
    assert exp.root_cause is not None and exp.root_cause.node.startswith("proj/")
    assert not [f for f in inv.findings if f.severity != "info"]


def test_check_command_runs_the_precision_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    assert PrecisionCheck in runner.LIVE_CHECKS
    out = tmp_path / "r.json"
    code = main(["check", str(SAMPLES / "drifting_resnet.py"), "--checks", "precision", "--dtype", "bfloat16",
                 "--device", "cpu", "--json", str(out), "-q"])
    assert code == 1
    report = json.loads(out.read_text())
    first = next(f for f in report["findings"] if f["severity"] == "error")
    assert first["check"] == "precision" and first["node"] == "layer2.0.norm/sub.0"
    assert "layer2.0.norm/sub.0" in capsys.readouterr().out


def test_the_reference_runs_in_float64_on_request() -> None:
    target = load_target(str(SAMPLES / "drifting_resnet.py"))
    inv = investigate(target.model, target.inputs, checks=(PrecisionCheck(),), dtype="bfloat16", device="cpu",
                      reference="cpu:float64")
    assert inv.run.reference == "cpu:float64"
    first = inv.first_finding("precision")
    assert first is not None and first.node == "layer2.0.norm/sub.0"
    assert inv.reference is not None and inv.reference is not inv.stats
