"""Fake `torch_npu.npu.utils`: INF_NAN mode and the float-status overflow flag."""

from __future__ import annotations

from typing import Any


def _state() -> Any:
    import torch_npu

    return torch_npu._fake_state


def is_support_inf_nan() -> bool:
    return bool(_state().inf_nan)


def get_npu_overflow_flag() -> bool:
    state = _state()
    state.flag_reads += 1
    return bool(state.flag)


def clear_npu_overflow_flag() -> None:
    _state().flag = False
