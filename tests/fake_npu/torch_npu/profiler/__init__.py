"""Fake `torch_npu.profiler`: the calls `live.profile` makes; the trace it hands back is a real *_ascend_pt folder."""

from __future__ import annotations

import enum
import shutil
from pathlib import Path
from typing import Any, Callable


class ProfilerActivity(enum.Enum):
    CPU = 0
    NPU = 1


class ProfilerLevel:
    Level0 = "Level0"
    Level1 = "Level1"


class AiCMetrics:
    PipeUtilization = "PipeUtilization"


class _ExperimentalConfig:
    def __init__(self, profiler_level: int = ProfilerLevel.Level0, aic_metrics: int = AiCMetrics.PipeUtilization,
                 l2_cache: bool = False, msprof_tx: bool = False, mstx: bool = False, data_simplification: bool = True,
                 record_op_args: bool = False, op_attr: bool = False, gc_detect_threshold: Any = None,
                 export_type: Any = "text", host_sys: Any = None, mstx_domain_include: Any = None,
                 mstx_domain_exclude: Any = None, sys_io: bool = False, sys_interconnection: bool = False) -> None:
        self.profiler_level, self.aic_metrics = profiler_level, aic_metrics


class schedule:  # noqa: N801 - torch_npu's name
    def __init__(self, wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0,
                 skip_first_wait: int = 0) -> None:
        self.active = active


def tensorboard_trace_handler(dir_name: Any = None, worker_name: Any = None, analyse_flag: bool = True,
                              async_mode: bool = False) -> Callable[[Any], None]:
    def ready(prof: Any) -> None:
        import torch_npu

        src = torch_npu._fake_state.trace_source
        if src is not None:
            shutil.copytree(src, Path(str(dir_name)) / "fake-host_1_20250101_ascend_pt")
    return ready


class profile:  # noqa: N801 - torch_npu's name
    def __init__(self, *, activities: Any = None, schedule: Any = None, on_trace_ready: Any = None,
                 record_shapes: bool = False, profile_memory: bool = False, with_stack: bool = False,
                 with_flops: bool = False, with_modules: bool = False, experimental_config: Any = None,
                 execution_trace_observer: Any = None, custom_trace_id_callback: Any = None,
                 use_cuda: Any = None) -> None:
        self.on_trace_ready, self.steps = on_trace_ready, 0

    def __enter__(self) -> profile:
        return self

    def step(self) -> None:
        self.steps += 1

    def __exit__(self, *exc: Any) -> None:
        if self.on_trace_ready is not None and exc[0] is None:
            self.on_trace_ready(self)
