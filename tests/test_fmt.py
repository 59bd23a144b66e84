"""The number formatter's one grouping rule: plain numbers from 1,000 on carry thousands separators, whichever function prints them."""

from __future__ import annotations

import math

import pytest

from ascend_tui import fmt


@pytest.mark.parametrize(("value", "text"), [
    (1619, "1,619"),
    (1619.0, "1,619"),
    (1619.4, "1,619"),  # the rough edge: a measured 1619.4 printed as `1619` beside a counted `1,619`
    (12345.678, "12,346"),
    (999.96, "1,000"),  # rounds up into the grouped range
    (-2500.5, "-2,500"),
    (999.4, "999.4"),
    (0.5, "0.5"),
    (1e6 + 0.5, "1.000e+06"),
    (5e-5, "5.000e-05"),
    (0, "0"),
    (math.nan, "nan"),
    (-math.inf, "-inf"),
    (None, "-"),
])
def test_magnitude_groups_from_one_thousand(value: float | None, text: str) -> None:
    assert fmt.magnitude(value) == text


def test_magnitude_keeps_its_significant_digits_when_grouping() -> None:
    assert fmt.magnitude(1619.4, 6) == "1,619.4"
    assert fmt.magnitude(12345.678, 6) == "12,345.7"
    assert fmt.magnitude(1619.0001, 6) == "1,619"


def test_a_count_and_a_magnitude_of_the_same_number_read_the_same() -> None:
    for n in (1000, 1619, 99_999, 123_456):
        assert fmt.magnitude(float(n) + 0.2) == fmt.count(n) == fmt.magnitude(n)


def test_every_other_formatter_groups_too() -> None:
    assert fmt.ratio(1234.5) == "x1,234"
    assert fmt.ratio(120) == "x120"
    assert fmt.nbytes(1023) == "1,023 B"
    assert fmt.nbytes(1023.9 * 1024) == "1,023.9 KiB"
    assert fmt.nbytes(1536) == "1.5 KiB"
    assert fmt.percent(12.5) == "1,250.0%"
    assert fmt.percent(0.125) == "12.5%"
    assert fmt.duration_us(999.7) == "1,000 us"
    assert fmt.duration_us(850) == "850 us"
    assert fmt.duration_us(4.2e6) == "4.2 s"
    assert fmt.duration_us(1234e6) == "1,234 s"  # was `1.23e+03 s`
    assert fmt.plural(1619, "op") == "1,619 ops"
