"""The device layer is honest about what this machine has."""

from __future__ import annotations

import pytest


from ascend_tui.errors import DeviceError  # noqa: E402
from ascend_tui.live import device  # noqa: E402


def test_cpu_always_works_and_reports_inf_nan_mode() -> None:
    dev = device.select("cpu")
    info = dev.info()
    assert info.backend == "cpu" and info.inf_nan_mode is True
    assert dev.read_overflow_flag() is None
    assert dev.memory_allocated() == 0 and not dev.has_memory_counters
    dev.synchronize()


def test_auto_picks_the_first_backend_that_works() -> None:
    states = device.describe_all()
    expected = next(b for b in device.BACKENDS if states[b] == "available")
    assert device.select("auto").backend == expected


def test_missing_npu_says_why() -> None:
    why = device.probe("npu")
    try:
        import torch_npu  # noqa: F401
    except ImportError:
        assert why is not None and "torch_npu is not installed" in why
        with pytest.raises(DeviceError, match="torch_npu is not installed"):
            device.select("npu")


def test_unknown_backend() -> None:
    with pytest.raises(DeviceError, match="unknown device 'tpu'"):
        device.select("tpu")
