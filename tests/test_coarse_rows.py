"""The module pass's short routes give what the general ones gave: `BatchStats.add`'s float32 path and the pass's
events."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import torch  # in the test command (.[live,test]): a missing torch fails, never skips

from ascend_tui.live.batch_stats import BatchStats
from ascend_tui.live.coarse_pass import Event
from ascend_tui.live.coarse_step import step_pass

pytestmark = pytest.mark.live


def float32_tensors() -> list[torch.Tensor]:
    """Contiguous float32 tensors of lengths on and off the 1024-value rows, with NaN, Inf, huge values, zeros and
    -0.0 among them."""
    g = torch.Generator().manual_seed(1)
    out = []
    for n in (1, 7, 1023, 1024, 1025, 4096, 16384, 16385, 70_000):
        t = torch.randn(n, generator=g)
        out.append(t)
        zeros = torch.relu(t)
        zeros[: max(1, n // 5)] = -0.0
        out.append(zeros)
        bad = t.clone()
        bad[0] = math.nan if n % 2 else math.inf
        out.append(bad)
        out.append(t * 3e37)  # float32 partial sums of squares would overflow
    return out


def test_the_float32_short_route_gives_the_rows_of_the_route_kept_for_later() -> None:
    """`add(t)` (read in place through one reused handle) and `add(t, later=True)` (measured at the flush through
    `_measure_host`) give bit-identical rows and histograms, tensor after tensor."""
    ts = float32_tensors()
    now, later = BatchStats(torch), BatchStats(torch)
    for t in ts:
        assert now.add(t) == later.add(t, later=True)
    a_raw, a_numel, a_rows, a_hist = now.finish()
    b_raw, b_numel, b_rows, b_hist = later.finish()
    assert not now.changed and not later.changed
    np.testing.assert_array_equal(a_raw, b_raw)  # NaN in the same places, every other value the same bits
    assert np.array_equal(np.signbit(a_raw), np.signbit(b_raw))  # -0.0 stays -0.0
    np.testing.assert_array_equal(a_numel, b_numel)
    np.testing.assert_array_equal(a_rows, b_rows)
    np.testing.assert_array_equal(a_hist, b_hist)
    zeros = [int(np.count_nonzero(t.numpy() == 0)) for t in ts]
    assert list(a_raw[:, 6].astype(int)) == zeros


def test_the_pass_makes_one_frozen_event_per_module_call_and_gradient() -> None:
    """A training step's pass: an `Event` per module call, then per gradient reaching one; hashable and frozen."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    rec = step_pass(model, torch.randn(3, 4), window=None, backward=True, loss=lambda out: out.sum())
    assert [e.phase for e in rec.events] == ["forward"] * 4 + ["backward"] * 3
    for e in rec.events:
        assert type(e) is Event
        assert e == Event(*(getattr(e, f.name) for f in dataclasses.fields(Event)))
        assert hash(e) == hash(dataclasses.replace(e))
        with pytest.raises(dataclasses.FrozenInstanceError):
            e.index = 0  # type: ignore[misc]
    assert [e.module for e in rec.events[:4]] == ["0", "1", "2", ""]


@pytest.mark.parametrize("bad", [None, "input", "weight", "grad"])
def test_first_bad_skips_the_event_map_only_when_no_row_is_bad(bad: str | None) -> None:
    """`first_bad` names the event `first_bad_event` over `event_rows` names: a clean step, a NaN in the input, a NaN
    weight, a huge loss scale (an Inf in a parameter's gradient, a row no event holds); and a table whose only bad
    row is the input's placeholder (no event) gives None, as the event rows do."""
    from ascend_tui.checks.suspects import first_bad_event
    from ascend_tui.evidence import STAT_FIELDS, StatsTable
    from ascend_tui.live.coarse_merge import event_rows, first_bad

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    x = torch.randn(3, 4)
    if bad == "input":
        x[0, 0] = math.nan
    elif bad == "weight":
        with torch.no_grad():
            model[2].weight[0, 0] = math.nan
    loss = (lambda out: out.sum() * 3e38) if bad == "grad" else (lambda out: out.sum())
    rec = step_pass(model, x, window=None, backward=True, loss=loss)
    stats = rec.finish_stats()
    want = first_bad_event(*event_rows(rec, stats), saturation_limit=None)
    assert first_bad(rec, stats, None) == want
    assert (want is None) == (bad in (None, "grad"))  # a parameter gradient's row belongs to no event
    if bad == "grad":
        assert not np.isfinite(stats.column("max")).all()  # a row is bad: the events' rows were mapped and judged
    keys = list(stats.keys())
    data = np.column_stack([stats.column(f) for f in STAT_FIELDS])
    event_keys = {k for k in keys if k[0] in {e.node for e in rec.events if e.node}}
    clean = StatsTable()
    rows = [i for i, k in enumerate(keys) if k in event_keys or k[0].startswith("input")]
    if bad is None:  # the input's row alone made bad: no event holds it
        data[[i for i in rows if keys[i][0].startswith("input")], 2] = math.nan
    clean.add_many([keys[i] for i in rows], data[rows])
    assert first_bad(rec, clean, None) == first_bad_event(*event_rows(rec, clean), saturation_limit=None)
