"""The shortcuts that make capture cheap (kept weight statistics, a frozen heap) never change what it reports."""

from __future__ import annotations

import pytest

import torch  # in the test command (.[live,test]): a missing torch fails, never skips

from ascend_tui.live.recording import capture  # noqa: E402
from ascend_tui.live.weights import WEIGHTS  # noqa: E402


def weight_row(model: torch.nn.Module, x: torch.Tensor) -> tuple[float, float, float, float]:
    r = capture(model, (x,))
    s = r.stats.get("param:weight")
    return s.min, s.max, s.mean, s.l2norm


def truth(w: torch.Tensor) -> tuple[float, float, float, float]:
    d = w.detach().double()
    return float(d.min()), float(d.max()), float(d.mean()), float(d.norm())


@pytest.fixture()
def model() -> torch.nn.Linear:
    torch.manual_seed(0)
    return torch.nn.Linear(128, 256, bias=False)  # 32768 weights: past the host batch, so cached


def assert_close(got: tuple[float, ...], want: tuple[float, ...]) -> None:
    assert got == pytest.approx(want, rel=1e-5, abs=1e-9)


def test_an_unchanged_weight_is_measured_once_and_gives_the_same_numbers(model: torch.nn.Linear) -> None:
    x = torch.randn(2, 128)
    first = weight_row(model, x)
    hits = WEIGHTS.hits
    assert weight_row(model, x) == first
    assert WEIGHTS.hits == hits + 1
    assert_close(first, truth(model.weight))


@pytest.mark.parametrize("change", ["in_place", "data_copy", "data_assign", "load_state_dict"])
def test_every_kind_of_weight_update_is_seen(model: torch.nn.Linear, change: str) -> None:
    x = torch.randn(2, 128)
    weight_row(model, x)
    new = torch.randn(256, 128) * 3 + 1
    with torch.no_grad():
        if change == "in_place":
            model.weight.mul_(2.0)
        elif change == "data_copy":  # through .data: the version counter does not move
            model.weight.data.copy_(new)
        elif change == "data_assign":
            model.weight.data = new.clone()
        else:
            model.load_state_dict({"weight": new})
    assert_close(weight_row(model, x), truth(model.weight))


def test_a_freed_weight_leaves_the_cache() -> None:
    import gc

    torch.manual_seed(1)
    lin = torch.nn.Linear(128, 256, bias=False)
    weight_row(lin, torch.randn(1, 128))
    gc.collect()  # weights of earlier tests' models still in garbage cycles leave now, not in the count below
    before = len(WEIGHTS)
    del lin
    gc.collect()
    assert len(WEIGHTS) == before - 1


def test_a_recorded_run_sets_the_existing_heap_aside_and_puts_it_back() -> None:
    import gc

    from ascend_tui.progress import frozen_gc

    seen: list[int] = []

    class Probe(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append(gc.get_freeze_count())
            return x + 1

    assert gc.get_freeze_count() == 0
    capture(Probe(), (torch.ones(3),))
    assert seen[0] > 0 and gc.get_freeze_count() == 0
    gc.freeze()  # a process that froze its own objects keeps them frozen
    try:
        frozen = gc.get_freeze_count()
        with frozen_gc():
            assert gc.get_freeze_count() == frozen
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
