"""The live overflow check on real CPU torch: synthetic models whose true origin is known."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import torch  # in the test command (.[live,test]): a missing torch fails, never skips
from torch import nn  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import ascend_tui  # noqa: E402
from ascend_tui import cli  # noqa: E402
from ascend_tui.checks.overflow import analyze, op_name  # noqa: E402
from ascend_tui.investigation import Investigation  # noqa: E402
from ascend_tui.live import runner  # noqa: E402
from ascend_tui.live.device import Device  # noqa: E402

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[1]


def errors(inv: Investigation) -> list:
    return [f for f in inv.findings if f.severity == "error"]


def test_sample_check_exits_1_with_root_cause_and_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    code = cli.main(["check", str(ROOT / "samples" / "overflow_mlp.py"), "--dtype", "float16", "--checks",
                     "overflow", "--json", str(out), "-q", "--detail", "full"])
    assert code == 1
    report = json.loads(out.read_text())
    (err,) = [f for f in report["findings"] if f["severity"] == "error"]
    assert (err["node"], err["kind"], err["op_type"], err["module"]) == ("head/addmm.0", "inf", "aten.addmm", "head")
    assert err["root_cause"]["node"] == "input:0" and "un-normalized" in err["root_cause"]["reason"]
    chain = [c["node"] for c in err["root_cause"]["chain"]]
    assert chain[0] == "head/addmm.0" and chain[-1] == "input:0" and "mix/addmm.0" in chain
    assert err["metrics"]["reference_abs_max"] > 65504 > err["metrics"]["input_abs_max"]
    assert "keep `head` in float32" in err["message"]
    assert "Inf first appears at `head/addmm.0`" in capsys.readouterr().out
    keys = {"check", "kind", "severity", "node", "op_type", "module", "index", "message", "attribution", "metrics",
            "root_cause"}
    for f in report["findings"]:
        assert keys <= set(f) <= keys | {"hint", "id"}
        assert f["root_cause"] is None or set(f["root_cause"]) == {"node", "module", "reason", "chain"}
        assert all(set(c) == {"node", "module", "op_type", "value"} for c in (f["root_cause"] or {}).get("chain", []))


class Cancellation(nn.Module):
    """Centering values that overflowed: the NaN shows up at the subtraction, the Inf started at the scale."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        big = self.fc(x) * 1e5
        return big - big.mean(dim=-1, keepdim=True)


def test_cancellation_origin_is_the_scale_not_the_subtraction() -> None:
    torch.manual_seed(0)
    inv = ascend_tui.investigate(Cancellation(), (torch.randn(4, 16) * 2,), device="cpu", dtype="float16")
    (err,) = errors(inv)
    assert err.node == "mul.0" and err.kind == "inf"
    sub = [f for f in inv.findings if op_name(f.op_type) == "sub"]
    assert sub and all(f.attribution == "inherited" and f.kind == "nan" for f in sub)
    assert all(f.root_cause.node == "mul.0" for f in sub)


class ExpNet(nn.Module):
    """The msprobe fixture's model: exp(100 * fc(x)) overflows float32."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.exp(self.fc(x) * 100.0))


def test_exp_overflow_blames_exp_and_hints_max_subtraction() -> None:
    torch.manual_seed(0)
    model = ExpNet()
    inv = ascend_tui.investigate(model, (torch.randn(4, 8),), device="cpu", backward=True, detail="full")
    assert all(p.grad is None for p in model.parameters()), "the user's model keeps its (absent) gradients"
    (err,) = errors(inv)
    assert err.node == "exp.0" and err.root_cause.node == "exp.0"
    grads = [f for f in inv.findings if f.node.startswith("grad:")]
    assert {f.node for f in grads} >= {"grad:fc.weight", "grad:fc2.weight"}
    assert all(f.attribution == "inherited" and f.root_cause.node == "exp.0" for f in grads)
    assert "subtract the max" in err.hint and "normalize" not in err.hint
    assert [c.node for c in err.root_cause.chain][:3] == ["exp.0", "mul.0", "fc/addmm.0"]
    assert any(f.node == "fc2/addmm.0" and f.attribution == "inherited" for f in inv.findings)


def test_offline_dump_and_live_run_agree_on_the_origin(fixtures: Path) -> None:
    from ascend_tui.offline import open as formats

    dump = fixtures / "msprobe" / "dump_ovf"
    offline = formats.open_path(next(dump.rglob("dump.json")).parent)
    off = [f for f in offline.findings if f.check == "overflow" and f.severity == "error"
           and f.attribution == "introduced"]
    assert off, "the msprobe reader found no overflow origin in dump_ovf"
    torch.manual_seed(0)
    live = ascend_tui.investigate(ExpNet(), (torch.randn(4, 8),), device="cpu")
    assert op_name(off[0].op_type) == op_name(errors(live)[0].op_type) == "exp"


class Gained(nn.Module):
    """Normalized input, then a learned gain of 2e4 that the head's float16 matmul cannot hold."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(32)
        self.proj = nn.Linear(32, 64)
        self.gain = nn.Parameter(torch.full((64,), 20000.0))
        self.head = nn.Linear(64, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.proj(self.norm(x)) * self.gain))


def test_amplification_chain_names_the_gain() -> None:
    torch.manual_seed(0)
    model = Gained()
    with torch.no_grad():
        model.head.weight.fill_(0.25)
    inv = ascend_tui.investigate(model, (torch.randn(16, 32),), device="cpu", dtype="float16")
    (err,) = errors(inv)
    assert err.node == "head/addmm.0"
    assert err.root_cause.node == "mul.0" and "amplifies values x" in err.root_cause.reason
    assert "normalize" not in (err.hint or "")
    growth = err.metrics["max_growth"]
    assert growth > 100
    loaded = Investigation.from_json(json.loads(json.dumps(inv.to_json())))
    again = analyze(loaded.graph, loaded.stats, dtype="float16", reference=loaded.reference)
    assert [(f.node, f.root_cause.node) for f in again if f.severity == "error"] == [("head/addmm.0", "mul.0")]


class SaturatingNPU(TorchDispatchMode):
    """Emulates an NPU in saturation mode: float16 overflow clamps to ±65504, NaN becomes 0, a status flag is set."""

    def __init__(self) -> None:
        super().__init__()
        self.status = False

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(t, torch.Tensor) and t.dtype == torch.float16 and not torch.isfinite(t).all():
                self.status = True
                t.nan_to_num_(nan=0.0, posinf=65504.0, neginf=-65504.0)
        return out


class FlagDevice(Device):
    """A CPU device whose float-status flag is the emulator's."""

    def __init__(self, emulator: SaturatingNPU) -> None:
        super().__init__("cpu")
        self.emulator = emulator

    @property
    def inf_nan_mode(self) -> bool:
        return False

    def read_overflow_flag(self) -> bool | None:
        return self.emulator.status

    def clear_overflow_flag(self) -> None:
        self.emulator.status = False


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.fc(x) * 30000.0))


def test_saturation_by_clamped_values() -> None:
    torch.manual_seed(0)
    model, x = Scaled(), torch.randn(4, 8) * 10
    with SaturatingNPU():
        inv = ascend_tui.investigate(model, (x,), device="cpu", dtype="float16", settings={"inf_nan_mode": False})
    (err,) = errors(inv)
    assert (err.node, err.kind) == ("mul.0", "saturation") and "saturates at ±6.55e4" in err.message
    assert not any(f.kind in ("inf", "nan") for f in inv.findings)


def test_saturation_flag_read_per_op(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    emulator = SaturatingNPU()
    monkeypatch.setattr(runner, "select", lambda spec: FlagDevice(emulator))
    with emulator:
        inv = ascend_tui.investigate(Scaled(), (torch.randn(4, 8) * 10,), device="npu", dtype="float16")
    (err,) = errors(inv)
    assert (err.node, err.kind) == ("mul.0", "saturation") and "overflow flag is set after `mul.0`" in err.message
    flagged_later = [f for f in inv.findings if f.node == "out/addmm.0"]
    assert all(f.attribution == "inherited" for f in flagged_later)


def test_backward_gradients_join_the_graph_named_after_their_forward_op(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    code = cli.main(["check", str(ROOT / "samples" / "overflow_mlp.py"), "--dtype", "float16", "--backward",
                     "--json", str(out), "--save", str(tmp_path / "inv.atui.json"), "-q", "--detail", "full"])
    assert code == 1
    inv = Investigation.load(tmp_path / "inv.atui.json")
    bwd = [n for n in inv.graph if n.phase == "backward"]
    named = [n for n in bwd if (n.attrs or {}).get("forward")]
    assert len(named) >= len(bwd) - 2 and all(n.attrs["forward"] in inv.graph for n in named)
    grad = inv.graph.node("grad:head.weight")
    assert grad.attrs["forward"] == "param:head.weight" and inv.stats.get("grad:head.weight") is not None
    assert {n.attrs["forward"] for n in bwd if n.module == "head"} >= {"head/addmm.0"}
    report = json.loads(out.read_text())
    (err,) = [f for f in report["findings"] if f["severity"] == "error"]
    assert err["node"] == "head/addmm.0"
    gw = next(f for f in report["findings"] if f["node"] == "grad:head.weight")
    assert gw["attribution"] == "inherited" and "the gradient of `param:head.weight`" in gw["message"]


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.out = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.fc(x)))


def test_backward_underflow_in_float16_hints_loss_scaling() -> None:
    torch.manual_seed(0)
    inv = ascend_tui.investigate(Tiny(), (torch.randn(8, 16),), device="cpu", dtype="float16", backward=True,
                                 loss=lambda y: y.float().sum() * 1e-9)
    assert not errors(inv)
    under = [f for f in inv.findings if f.kind == "underflow"]
    assert under and all(inv.graph.node(f.node).phase == "backward" for f in under)
    assert all("GradScaler" in f.hint for f in under)
    assert any("the gradient of `" in f.message for f in under)
    assert not [f for f in inv.findings if f.kind == "underflow" and f.metrics["source"] != "measured"]


def test_clean_model_has_no_findings() -> None:
    torch.manual_seed(0)
    inv = ascend_tui.investigate(Tiny(), (torch.randn(8, 16),), device="cpu", dtype="float16", backward=True)
    assert [f for f in inv.findings if f.check == "overflow"] == []
    assert any(n.phase == "backward" for n in inv.graph)
    assert math.isfinite(inv.stats.get("grad:fc.weight").abs_max)


def test_masked_transformer_in_float16_has_no_false_alarms(tmp_path: Path) -> None:
    out = tmp_path / "gpt.json"
    code = cli.main(["check", str(ROOT / "samples" / "tiny_gpt.py"), "--dtype", "float16", "--json", str(out), "-q"])
    assert code == 0 and json.loads(out.read_text())["summary"] == {"errors": 0, "warnings": 0}  # coarse-to-fine
    code = cli.main(["check", str(ROOT / "samples" / "tiny_gpt.py"), "--dtype", "float16", "--json", str(out), "-q",
                     "--detail", "full"])
    report = json.loads(out.read_text())
    assert code == 0 and report["summary"] == {"errors": 0, "warnings": 0}
    masks = [f for f in report["findings"] if f["kind"] == "mask"]
    assert masks and all(f["severity"] == "info" and "an intended mask" in f["message"] for f in masks)
    assert not [f for f in report["findings"] if f["kind"] == "inf"], "a mask is never an Inf origin"


def test_underflow_is_measured_in_the_reference_run_without_another_forward() -> None:
    """float16 target + float32 reference: two forwards, and the reference run measures underflow too."""
    import ascend_tui

    class Tiny(nn.Module):
        calls = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            Tiny.calls += 1
            return x * 1e-9  # every value is far below float16's smallest subnormal (6e-8)

    inv = ascend_tui.investigate(Tiny(), (torch.rand(64) + 0.5,), checks=("overflow",), device="cpu",
                                 dtype="float16", detail="full")
    assert Tiny.calls == 2
    under = [f for f in inv.findings if f.kind == "underflow"]
    assert under and under[0].node == "mul.0" and under[0].metrics.get("source") == "measured"
    coarse = ascend_tui.investigate(Tiny(), (torch.rand(64) + 0.5,), checks=("overflow",), device="cpu",
                                    dtype="float16")  # nothing went bad: module level only, still two forwards
    assert Tiny.calls == 4
    under = [f for f in coarse.findings if f.kind == "underflow"]
    assert under and under[0].node == "module.0" and under[0].metrics.get("source") == "measured"
    assert coarse.graph.node("module.0").attrs["detail"] == "module"
