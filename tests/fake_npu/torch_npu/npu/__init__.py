"""Fake `torch_npu.npu`: availability, device name and memory, synchronize, RNG (the CPU generator)."""

from __future__ import annotations

from typing import Any

from . import utils  # noqa: F401


def synchronize(device: Any = None) -> None:
    return None


def is_available() -> bool:
    return True


def get_device_name(device_name: Any = None) -> str:
    return "Ascend910B3 (fake)"


def mem_get_info(device: Any = None) -> tuple[int, int]:
    return 60 << 30, 64 << 30


def memory_allocated(device: Any = None) -> int:
    return 0


def memory_reserved(device: Any = None) -> int:
    return 0


def get_rng_state(device: Any = "npu") -> Any:
    import torch

    return torch.get_rng_state()


def set_rng_state(new_state: Any, device: Any = "npu") -> None:
    import torch

    torch.set_rng_state(new_state)
