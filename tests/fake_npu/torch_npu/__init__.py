"""A fake `torch_npu` for the CPU tests, built to `tests/data/torch_npu_api.json`: only the names ascend-tui calls,
with the signatures torch-npu 2.14.0 gives them, backed by CPU torch (`tests/test_npu_api.py` checks both).

Test controls (not torch_npu names, prefixed `_fake`): `_fake_state` (inf_nan mode, the float-status flag, what the
profiler hands back), `_fake_saturation()` (a dispatch mode that clamps float16 overflow to ±65504 and sets the flag,
as an NPU in saturation mode does).
"""

from __future__ import annotations

from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

from . import npu, profiler  # noqa: F401 - the submodules torch_npu has

__version__ = "2.14.0-fake"


class _fake_state_type:
    inf_nan = True
    flag = False
    flag_reads = 0
    trace_source: Any = None  # a real *_ascend_pt folder the fake profiler hands back


_fake_state = _fake_state_type()


class _fake_saturation(TorchDispatchMode):  # noqa: N801 - reads as a function at its call sites
    """Saturation mode: float16 overflow clamps to ±65504, NaN becomes 0, and the float-status flag is set."""

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        import torch

        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(t, torch.Tensor) and t.dtype == torch.float16 and not torch.isfinite(t).all():
                _fake_state.flag = True
                t.nan_to_num_(nan=0.0, posinf=65504.0, neginf=-65504.0)
        return out
