"""`ascend_tui.investigate` takes a `RunOptions`, keyword settings or a mapping of settings; anything else is a TypeError."""

from __future__ import annotations

from typing import Any

import pytest
import torch  # in the test command (.[live,test]): a missing torch fails, never skips
from torch import nn

import ascend_tui
from ascend_tui.live.options import RunOptions, as_run_options


class _Seen:
    """A live check that only records the options it was run with."""

    name = "seen"
    needs_reference = False

    def __init__(self) -> None:
        self.options: RunOptions | None = None

    def observers(self, ctx: Any, run: Any) -> list[Any]:
        return []

    def run(self, ctx: Any, inv: Any) -> None:
        self.options = ctx.options


def _investigate(options: Any = None, **settings: Any) -> RunOptions:
    seen = _Seen()
    ascend_tui.investigate(nn.Linear(4, 2), (torch.randn(3, 4),), options, checks=(seen,), device="cpu",
                           reference=None, **settings)
    assert seen.options is not None, "the check did not run"
    return seen.options


def test_a_mapping_of_settings_reaches_the_checks() -> None:
    opts = _investigate({"inf_nan_mode": False, "iterations": 2})
    assert opts.setting("inf_nan_mode") is False
    assert (opts.iterations, opts.device, opts.reference) == (2, "cpu", None)


def test_keyword_settings_and_fields_mix() -> None:
    opts = _investigate(headroom_bits=2.0)
    assert opts.setting("headroom_bits") == 2.0 and opts.iterations == 1


def test_a_run_options_passes_through_with_keywords_on_top() -> None:
    opts = _investigate(RunOptions(iterations=2, settings={"headroom_bits": 3.0}), underflow_fraction=0.1)
    assert opts.iterations == 2
    assert dict(opts.settings) == {"headroom_bits": 3.0, "underflow_fraction": 0.1}


def test_as_run_options_sorts_fields_from_knobs() -> None:
    opts = as_run_options({"dtype": "float16", "checks": ["overflow", "memory"], "inf_nan_mode": False},
                          backward=True, settings={"api_ids": True})
    assert (opts.dtype, opts.checks, opts.backward) == ("float16", ("overflow", "memory"), True)
    assert dict(opts.settings) == {"api_ids": True, "inf_nan_mode": False}
    assert as_run_options(None) == RunOptions()
    assert as_run_options(checks="memory").checks == ("memory",)


def test_a_misspelt_setting_is_a_type_error_but_a_custom_check_passes_its_own_knobs() -> None:
    with pytest.raises(TypeError, match="'inf_nan_mod'.*check setting"):
        as_run_options({"inf_nan_mod": False})
    with pytest.raises(TypeError, match="'no_such_option'"):
        as_run_options(no_such_option=1)
    assert as_run_options(settings={"my_knob": 1}).setting("my_knob") == 1


def test_known_settings_cover_every_setting_the_live_checks_read() -> None:
    import re
    from pathlib import Path

    from ascend_tui.live.options import KNOWN_SETTINGS

    live = Path(__file__).resolve().parents[1] / "ascend_tui" / "live"
    read = {m for p in live.glob("*.py") for m in re.findall(r'setting\("(\w+)"', p.read_text())}
    assert read and read <= KNOWN_SETTINGS, read - KNOWN_SETTINGS


@pytest.mark.parametrize("bad", [["overflow"], "overflow", 3, {1: True}])
def test_anything_else_is_a_type_error_that_says_what_it_takes(bad: Any) -> None:
    with pytest.raises(TypeError, match="RunOptions|setting names"):
        as_run_options(bad)
    with pytest.raises(TypeError, match="RunOptions|setting names"):
        ascend_tui.investigate(nn.Linear(4, 2), (torch.randn(3, 4),), bad)
