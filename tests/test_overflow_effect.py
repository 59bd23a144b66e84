"""Severity by effect: an absorbed overflow or an underflow is an error only when it measurably changes the outputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ascend_tui.checks.effect import OpStats, compare_outputs, divergence

import torch  # in the test command (.[live,test]): a missing torch fails, never skips
from torch import nn  # noqa: E402

import ascend_tui  # noqa: E402


def test_compare_outputs_names_zeroed_rows_cosine_and_error() -> None:
    ref = np.arange(1, 32 * 8 + 1, dtype=np.float64).reshape(32, 8) / 100
    damaged = ref.copy()
    damaged[::2] = 0
    eff = compare_outputs([damaged], [ref], "float16")
    assert eff is not None and eff.damaged and eff.rows_zeroed == 16 and eff.rows == 32
    assert "16 of 32 rows of output 0 became 0" in eff.describe()
    same = compare_outputs([ref * (1 + 1e-4)], [ref], "float16")
    assert same is not None and not same.damaged and "within float16 thresholds" in same.verdict()
    # non-finite values, empty and mismatched outputs never raise
    assert compare_outputs([np.full((2, 2), np.inf)], [np.ones((2, 2))], "float16").nonfinite == 4
    assert compare_outputs([np.zeros(0)], [np.zeros(0)], "float16") is None
    assert compare_outputs([np.zeros((2, 2))], [np.zeros((2, 2))], "float16").damaged is False
    assert divergence(OpStats(1.0, 17, 64), OpStats(1.0, 0, 64), "float16") == "17 zeros (float32: 0)"
    assert divergence(OpStats(math.nan, 0, 64), OpStats(1.0, 0, 64), "float16") is None


def test_an_all_nan_output_is_100_percent_error_with_an_undefined_cosine_never_cosine_1() -> None:
    ref = np.linspace(-1, 1, 32).reshape(4, 8)
    eff = compare_outputs([np.full((4, 8), np.nan)], [ref], "float16")
    assert eff is not None and eff.nonfinite == 32 and eff.damaged
    assert math.isnan(eff.cosine) and eff.rel_l2 == pytest.approx(1.0)
    text = eff.describe()
    assert "cosine undefined" in text and "100" in text and "cosine 1" not in text
    assert eff.to_json()["cosine"] is None  # JSON-safe: reports are written with allow_nan off
    half = ref.copy()
    half[::2] = np.inf  # half the rows lost: cosine well below 1, error well above 0
    part = compare_outputs([half], [ref], "float16")
    assert part is not None and part.cosine < 0.9 and part.rel_l2 > 0.5


class RMSNorm(nn.Module):
    """A hand-written RMSNorm that squares in the run's dtype."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6)


class Block(nn.Module):
    def __init__(self, guard: bool = False) -> None:
        super().__init__()
        self.proj = nn.Linear(64, 64)
        self.norm = RMSNorm(64)
        self.guard = guard

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        if self.guard:  # the Inf of the square is dropped by where: the output does not change
            sq = h * h
            return h + torch.where(torch.isinf(sq), torch.zeros_like(sq), torch.zeros_like(sq))
        return self.norm(h)


def rows(large: bool) -> torch.Tensor:
    torch.manual_seed(0)
    x = torch.randn(32, 64)
    if large:
        x[::2] *= 400  # half the token rows: their squares overflow float16
    return x


def test_float16_rmsnorm_that_zeroes_rows_is_an_error_naming_the_damage() -> None:
    torch.manual_seed(0)
    inv = ascend_tui.investigate(Block(), (rows(True),), checks=("overflow",), device="cpu", dtype="float16")
    (err,) = [f for f in inv.findings if f.severity == "error"]
    assert err.node == "norm/mul.1" and err.kind == "inf"
    assert "absorbed downstream, but not harmlessly" in err.message
    assert "16 of 32 rows of output 0 became 0" in err.message
    assert "zeros (float32: 0)" in err.message and "beyond float16 thresholds" in err.message
    assert inv.run.extra["output_effect"]["damaged"] is True


def test_absorbed_inf_that_changes_nothing_stays_a_warning_with_the_evidence() -> None:
    torch.manual_seed(0)
    coarse = ascend_tui.investigate(Block(guard=True), (rows(True),), checks=("overflow",), device="cpu",
                                    dtype="float16")
    assert not [f for f in coarse.findings if f.severity in ("error", "warning")], \
        "an Inf made and dropped inside one module call never shows at module level"
    inv = ascend_tui.investigate(Block(guard=True), (rows(True),), checks=("overflow",), device="cpu",
                                 dtype="float16", detail="full")
    assert not [f for f in inv.findings if f.severity == "error"]
    (warn,) = [f for f in inv.findings if f.severity == "warning" and f.kind == "inf"]
    assert "harmless as measured" in warn.message and "within float16 thresholds" in warn.message


class Scale(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 1.0


@pytest.mark.parametrize(("dtype", "lo", "hi"), [("float16", 1e-8, 3e-6), ("bfloat16", 1e-41, 1e-38)])
def test_underflow_share_is_what_the_cast_really_flushes(dtype: str, lo: float, hi: float) -> None:
    gen = torch.Generator().manual_seed(1)
    x = torch.exp(torch.empty(4096, dtype=torch.float64).uniform_(math.log(lo), math.log(hi), generator=gen)).float()
    truth = float(((x.to(getattr(torch, dtype)) == 0) & (x != 0)).sum()) / x.numel()
    inv = ascend_tui.investigate(Scale(), (x,), checks=("overflow",), device="cpu", dtype=dtype)
    (f,) = [f for f in inv.findings if f.kind == "underflow"]
    assert f.metrics["source"] == "measured"
    assert f.metrics["fraction"] == pytest.approx(truth, abs=1e-9)
    assert 0.05 < truth < 0.9  # the data straddles the flush threshold: a share, not all or nothing
