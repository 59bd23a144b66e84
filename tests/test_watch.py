"""`ascend_tui.watch`: low-cost detection inside a user's loop, and the re-run of the first bad step."""

from __future__ import annotations

from pathlib import Path

import pytest

import torch  # in the test command (.[live,test]): a missing torch fails, never skips
from torch import nn  # noqa: E402

import ascend_tui  # noqa: E402
from ascend_tui.offline.open import open_path  # noqa: E402

pytestmark = pytest.mark.live


class Net(nn.Module):
    """An exp that overflows once the inputs grow, beside BatchNorm (state) and dropout (randomness)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.bn = nn.BatchNorm1d(8)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(torch.exp(self.fc(x) * 10.0))) + self.bn(x).mean(dim=1, keepdim=True)


def batches(n: int, bad_from: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(16, 8, generator=g) * (0.1 if i < bad_from else 100.0) for i in range(n)]


def train(model: nn.Module, xs: list[torch.Tensor], w: object) -> list[list]:
    opt = torch.optim.SGD(model.parameters(), lr=1e-5)
    per_step = []
    for x in xs:
        model(x).sum().backward()
        found = w.step()  # type: ignore[attr-defined]
        per_step.append(found)
        if not found:
            opt.step()
        opt.zero_grad()
    return per_step


def test_clean_loop_has_no_findings(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Net().train()
    with ascend_tui.watch(model, save=tmp_path / "w.atui.json") as w:
        per_step = train(model, batches(3, bad_from=99), w)
    assert per_step == [[], [], []] and w.bad_steps == [] and w.findings == [] and w.saved is None
    assert not any(m._forward_hooks for m in model.modules()), "hooks are removed on exit"


def test_first_bad_step_is_reported_rerun_and_saved(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Net().train()
    with ascend_tui.watch(model, save=tmp_path / "step{step}.atui.json") as w:
        train(model, batches(4, bad_from=1), w)
    assert w.bad_steps == [1, 2, 3]
    first = next(f for f in w.findings if f.severity == "error")
    assert first.metrics["step"] == 1 and first.kind in ("inf", "nan")
    assert w.saved == tmp_path / "step1.atui.json" and w.saved.exists()
    inv = open_path(w.saved)
    err = inv.first_finding("overflow")
    assert err is not None and err.node == "exp.0" and err.root_cause.node == "exp.0"
    assert "subtract the max" in err.hint
    assert inv.run.extra["step"] == 1 and inv.run.source == "watch"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step1.atui.json"], "only the first bad step is re-run"


def test_rerun_leaves_buffers_and_rng_alone(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Net().train()
    x = batches(1, bad_from=0)[0]
    with ascend_tui.watch(model, save=tmp_path / "w.atui.json") as w:
        model(x).sum().backward()
        buffers = [b.clone() for b in model.buffers()]
        rng = torch.get_rng_state()
        w.step()
        assert w.saved is not None
        assert all(torch.equal(a, b) for a, b in zip(buffers, model.buffers()))
        assert torch.equal(rng, torch.get_rng_state())
        assert all(p.grad is not None for p in model.parameters())


def test_gradient_only_nan_is_reported() -> None:
    class SqrtNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.fc(x)
            return torch.sqrt(h - h).sum(dim=1)  # 0 forward; backward Inf - Inf through d sqrt(0) = Inf

    torch.manual_seed(0)
    model = SqrtNet()
    with ascend_tui.watch(model, save=False) as w:
        model(torch.randn(8, 4)).sum().backward()
        found = w.step()
    (err,) = [f for f in found if f.severity == "error"]
    assert err.node.startswith("grad:fc.") and "the forward was finite" in err.message
    assert w.bad_steps == [0] and w.saved is None


def test_explicit_inputs_and_keyword_calls(tmp_path: Path) -> None:
    class KwNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, *, x: torch.Tensor) -> torch.Tensor:
            return torch.exp(self.fc(x) * 1e3)

    torch.manual_seed(0)
    model = KwNet()
    x = torch.randn(2, 4)
    with ascend_tui.watch(model, save=tmp_path / "kw.atui.json") as w:
        with torch.no_grad():
            model(x=x)
        w.step({"x": x})
    assert w.saved is not None and open_path(w.saved).first_finding().node == "exp.0"


def test_exit_without_step_checks_once_and_float16_headroom_warns_once() -> None:
    class Big(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 4.0

    model = Big()
    with ascend_tui.watch(model, save=False) as w:
        for _ in range(3):
            model(torch.full((4,), 12000.0, dtype=torch.float16))
            assert w.step() == [], "a warning does not make a step bad"
        model(torch.full((4,), 1.0, dtype=torch.float16))
    (warn,) = w.findings
    assert warn.kind == "overflow" and warn.severity == "warning" and warn.metrics["step"] == 0
    assert "float16" in warn.message and w.bad_steps == [] and w.steps == 4


class Wide(nn.Module):
    """A linear layer whose float16 output overflows for large inputs, plus a keyword input."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(64, 64)

    def forward(self, x: torch.Tensor, scale: torch.Tensor | None = None) -> torch.Tensor:
        h = self.fc(x)
        return h * scale if scale is not None else h


def test_rerun_under_autocast_keeps_autocast_grad_and_train_mode(tmp_path: Path) -> None:
    """The saved re-run of a bad step under torch.autocast runs in float16 again, not in float32."""
    torch.manual_seed(0)
    model = Wide().eval()
    with torch.no_grad():
        model.fc.weight.mul_(10000.0)  # fine in float32 (peaks near 2e5), Inf in float16
    x = torch.randn(8, 64) * 10.0
    with ascend_tui.watch(model, save=tmp_path / "w{step}.atui.json", grads=False) as w:
        with torch.autocast("cpu", dtype=torch.float16), torch.no_grad():
            model(x, scale=torch.ones(64))  # positional and keyword inputs together
        found = w.step()
    assert found and w.bad_steps == [0] and w.saved is not None
    inv = w.investigation
    dtypes = [m.dtype for n in inv.graph for m in n.outputs if m is not None and n.kind == "op"]
    assert dtypes.count("float16") > 0, dtypes
    assert "autocast float16, grad off, eval mode" == inv.run.extra["modes"]
    assert {"input:0", "input:scale"} <= {n.id for n in inv.graph if n.kind == "input"}
    assert not model.training and not torch.is_autocast_enabled("cpu")


class Regression(nn.Module):
    """A two-layer regression whose forward returns the loss (a 0-d tensor): watch() takes it for the trend."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(self.fc2(torch.relu(self.fc1(x))), y)


def regression_loop(tmp_path: Path, **options: object) -> object:
    """Five passing steps on one batch, then one whose fc2 weight holds a NaN (planted before the forward), then one
    more."""
    torch.manual_seed(0)
    model = Regression().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(4, 8, generator=g), torch.randn(4, 1, generator=g)
    losses = []
    with ascend_tui.watch(model, save=tmp_path / "w{step}.atui.json", **options) as w:
        for i in range(7):
            if i == 5:
                with torch.no_grad():
                    model.fc2.weight[0, 3] = float("nan")
            loss = model(x, y)
            losses.append(loss.item())
            loss.backward()
            if w.step():
                opt.zero_grad()
                continue
            opt.step()
            opt.zero_grad()
    w.losses = losses  # type: ignore[attr-defined]
    return w


def test_trend_keeps_the_passing_steps_and_marks_the_bad_one(tmp_path: Path) -> None:
    from ascend_tui.checks.trends import earliest, judge
    from ascend_tui.offline.trends import trend_series

    w = regression_loop(tmp_path)
    assert w.bad_steps == [5, 6]
    series = {s.name: s for s in w.trend}
    assert {"module-output max-abs", "loss", "gradient norm", "gradient max-abs", "step time", "fc2 max-abs"} \
        <= set(series)
    loss = series["loss"]
    assert loss.steps == tuple(range(7)) and loss.values[:5] == pytest.approx(w.losses[:5])
    assert loss.values[5] != loss.values[5], "the bad step's loss is NaN"
    time = series["step time"]
    assert time.steps == tuple(range(7)) and all(v > 0 for v in time.values) and time.unit == "µs"
    assert all(0 < v < 1e3 for v in series["fc2 max-abs"].values[:5])
    assert earliest(judge(w.trend)).anomaly.step == 5
    inv = open_path(w.saved)  # the saved re-run carries the trend up to the bad step, for the trend view
    saved, _notes = trend_series(inv)
    assert [s.steps for s in saved if s.name == "loss"] == [tuple(range(6))]
    assert inv.run.extra["capture"]["detail"] == "module", "the re-run is coarse-to-fine by default"


def test_trend_ring_is_bounded_and_step_loss_wins(tmp_path: Path) -> None:
    model = nn.Linear(4, 2)
    with ascend_tui.watch(model, save=False, trend_steps=3) as w:
        for i in range(5):
            model(torch.ones(1, 4)).sum().backward()
            w.step(loss=torch.tensor(float(i)))
    loss = next(s for s in w.trend if s.name == "loss")
    assert loss.steps == (2, 3, 4) and loss.values == (2.0, 3.0, 4.0)
    with ascend_tui.watch(model, save=False) as w:  # a plain number is taken as it is
        model(torch.ones(1, 4)).sum().backward()
        w.step(loss=0.25)
    assert next(s for s in w.trend if s.name == "loss").values == (0.25,)


def test_detail_full_keeps_every_operator_in_the_rerun(tmp_path: Path) -> None:
    w = regression_loop(tmp_path, detail="full")
    inv = w.investigation
    assert "capture" not in inv.run.extra
    assert not any((n.attrs or {}).get("detail") == "module" for n in inv.graph)
    err = inv.first_finding("overflow")
    assert err is not None and err.module == "fc2"
    with pytest.raises(ValueError):
        ascend_tui.watch(nn.Linear(2, 2), detail="everything")
