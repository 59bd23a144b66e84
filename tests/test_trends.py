"""The trend check: the first step a per-step series turns non-finite or jumps out of its robust band."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ascend_tui.checks.trends import band, earliest, first_anomaly, judge
from ascend_tui.evidence import StepSeries


def test_a_nan_is_the_anomaly_from_the_first_step_on() -> None:
    a = first_anomaly([1.0, math.nan, 1.0], [10, 11, 12])
    assert a is not None and (a.position, a.step, a.kind) == (1, 11, "nonfinite")
    assert a.describe() == "step 11: NaN"
    assert first_anomaly([math.inf]).describe() == "step 0: +Inf"


def test_a_jump_beyond_the_band_of_the_earlier_steps_is_found_and_described() -> None:
    values = [1.0, 1.1, 0.9, 1.05, 0.95, 40.0, 1.0]
    a = first_anomaly(values)
    assert a is not None and (a.position, a.kind, a.value) == (5, "jump", 40.0)
    assert a.high < 40.0 and "above the band" in a.describe()
    assert first_anomaly([5.0, 5.1, 4.9, 5.0, 5.05, 0.0]).describe().split(",")[1].strip().startswith("below")


def test_steady_noise_a_slow_decline_and_a_flat_series_are_not_anomalies() -> None:
    rng = np.random.default_rng(0)
    assert first_anomaly(1.0 + 0.05 * rng.standard_normal(200)) is None
    assert first_anomaly(np.linspace(3.0, 1.0, 50)) is None  # a loss going down as it should
    assert first_anomaly([2.0] * 20 + [2.0 * (1 + 1e-9)]) is None  # flat: MAD 0, the floor keeps rounding out


def test_the_warmup_steps_are_never_a_jump() -> None:
    assert first_anomaly([1.0, 1.0, 1.0, 1.0, 100.0, 1.0]) is None
    assert first_anomaly([1.0, 100.0, 1.0], warmup=1).position == 1


def test_the_band_is_the_median_plus_k_scaled_mads() -> None:
    low, high = band(np.array([1.0, 2.0, 3.0, 4.0, 100.0]), k=2.0, floor=0.0)
    assert (low, high) == pytest.approx((3 - 2 * 1.4826, 3 + 2 * 1.4826))


def test_a_count_series_is_bad_at_its_first_nonzero_step_and_the_earliest_verdict_wins() -> None:
    loss = StepSeries("loss", "loss", (0, 1, 2, 3), (1.0, 0.9, 0.8, math.nan))
    bad = StepSeries("non-finite outputs", "nonfinite", (0, 1, 2, 3), (0.0, 0.0, 2.0, 5.0))
    fine = StepSeries("fc1 max-abs", "max_abs", (0, 1, 2, 3), (1.0, 1.0, 1.0, 1.0))
    verdicts = judge([loss, bad, fine])
    assert [v.anomaly.step if v.anomaly else None for v in verdicts] == [3, 2, None]
    assert verdicts[1].anomaly.describe() == "step 2: 2 non-finite"
    assert earliest(verdicts).series is bad
    assert earliest(judge([fine])) is None


def test_mismatched_steps_are_refused() -> None:
    with pytest.raises(ValueError):
        first_anomaly([1.0, 2.0], [0])


def test_a_series_round_trips_through_json_with_its_nan() -> None:
    s = StepSeries("fc2 max-abs", "max_abs", (0, 1, 2), (1.0, 2.0, math.nan), "")
    back = StepSeries.from_json(s.to_json())
    assert back.steps == s.steps and back.values[:2] == s.values[:2] and math.isnan(back.values[2])


def test_series_names_fit_the_list_by_shortening_the_path_first() -> None:
    from ascend_tui.app.screens.trends import tail

    assert tail("loss", 10) == "loss"
    assert tail("model.layers.0.self_attn.q_proj max-abs", 30) == "m.l.0.self_attn.q_proj max-abs"
    assert tail("model.layers.0.self_attn.q_proj max-abs", 22) == "m.l.0.s.q_proj max-abs"
    assert tail("model.layers.0.self_attn.q_proj max-abs", 12) == "…roj max-abs"
