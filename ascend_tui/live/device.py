"""The device layer: the one place that knows whether we run on an NPU, a CUDA GPU or the CPU.

Backends: `npu` (torch_npu; SoC and HBM through CANN's `acl` where present), `cuda`, `cpu`.
Everything else asks a `Device` to move tensors, synchronize and read memory counters.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from ascend_tui.errors import DeviceError

BACKENDS = ("npu", "cuda", "cpu")
ACL_HBM_MEM = 1  # aclrtMemAttr: ACL_HBM_MEM


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What the report says about the device a run used."""

    backend: str
    name: str
    inf_nan_mode: bool
    index: int = 0
    soc: str | None = None
    memory_total: int | None = None
    memory_free: int | None = None
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"backend": self.backend, "name": self.name, "inf_nan_mode": self.inf_nan_mode}
        if self.soc:
            data["soc"] = self.soc
        if self.memory_total is not None:
            data["memory_total"] = self.memory_total
        if self.memory_free is not None:
            data["memory_free"] = self.memory_free
        if self.notes:
            data["notes"] = list(self.notes)
        return data


class Device:
    """A torch device of one backend, behind a small interface."""

    def __init__(self, backend: str, index: int = 0) -> None:
        self.backend = backend
        self.index = index
        self._torch = importlib.import_module("torch")
        self._npu: Any = None
        if backend == "npu":
            self._npu = importlib.import_module("torch_npu")

    @property
    def torch_device(self) -> Any:
        """The `torch.device` tensors are moved to."""
        if self.backend == "cpu":
            return self._torch.device("cpu")
        return self._torch.device(self.backend, self.index)

    @property
    def inf_nan_mode(self) -> bool:
        """True when overflow yields Inf/NaN; False on NPUs in saturation mode (910A, or INF_NAN off)."""
        if self.backend != "npu":
            return True
        return bool(self._npu.npu.utils.is_support_inf_nan())

    def synchronize(self) -> None:
        """Wait for queued device work (a no-op on the CPU)."""
        if self.backend == "cuda":
            self._torch.cuda.synchronize(self.index)
        elif self.backend == "npu":
            self._npu.npu.synchronize(self.index)

    def memory_allocated(self) -> int:
        """Bytes held by live tensors in the framework's allocator (0 on the CPU, which has no counter)."""
        if self.backend == "cuda":
            return int(self._torch.cuda.memory_allocated(self.index))
        if self.backend == "npu":
            return int(self._npu.npu.memory_allocated(self.index))
        return 0

    def memory_reserved(self) -> int:
        """Bytes the caching allocator holds from the device (0 on the CPU)."""
        if self.backend == "cuda":
            return int(self._torch.cuda.memory_reserved(self.index))
        if self.backend == "npu":
            return int(self._npu.npu.memory_reserved(self.index))
        return 0

    @property
    def has_memory_counters(self) -> bool:
        return self.backend != "cpu"

    def read_overflow_flag(self) -> bool | None:
        """The NPU float-status overflow flag (saturation mode only); None where there is no such flag."""
        if self.backend != "npu" or self.inf_nan_mode:
            return None
        return bool(self._npu.npu.utils.get_npu_overflow_flag())

    def clear_overflow_flag(self) -> None:
        """Reset the NPU float-status flag before the next operator (saturation mode only)."""
        if self.backend == "npu" and not self.inf_nan_mode:
            self._npu.npu.utils.clear_npu_overflow_flag()

    def rng_state(self) -> Any:
        """The generator states a replay must restore: torch's CPU generator and this device's (None on the CPU)."""
        t = self._torch
        if self.backend == "cuda":
            return t.get_rng_state(), t.cuda.get_rng_state(self.index)
        if self.backend == "npu":
            return t.get_rng_state(), self._npu.npu.get_rng_state(self.index)
        return t.get_rng_state(), None

    def set_rng_state(self, state: Any) -> None:
        """Put back what `rng_state` returned."""
        t = self._torch
        t.set_rng_state(state[0])
        if self.backend == "cuda":
            t.cuda.set_rng_state(state[1], self.index)
        elif self.backend == "npu":
            self._npu.npu.set_rng_state(state[1], self.index)

    def supports_dtype(self, dtype: Any) -> bool:
        """Whether a small matmul in `dtype` runs here (bf16 on old NPUs, fp16 on some CPUs do not)."""
        try:
            x = self._torch.ones(2, 2, dtype=dtype, device=self.torch_device)
            (x @ x).sum().item()
            return True
        except Exception:  # noqa: BLE001 - any failure means "not supported here"
            return False

    def info(self) -> DeviceInfo:
        """Name, mode and memory of this device, as far as the backend can tell."""
        t = self._torch
        if self.backend == "cpu":
            import platform

            name = platform.processor() or platform.machine() or "cpu"
            return DeviceInfo("cpu", name, True, self.index, notes=(f"torch {t.__version__}",))
        if self.backend == "cuda":
            props = t.cuda.get_device_properties(self.index)
            free, total = t.cuda.mem_get_info(self.index)
            return DeviceInfo("cuda", str(props.name), True, self.index,
                              memory_total=int(total), memory_free=int(free),
                              notes=(f"torch {t.__version__}", f"CUDA {t.version.cuda}"))
        npu = self._npu.npu
        name = str(npu.get_device_name(self.index))
        soc, total, free = _acl_soc_and_hbm()
        notes = [f"torch {t.__version__}", f"torch_npu {getattr(self._npu, '__version__', '?')}"]
        if total is None:
            free, total = (int(v) for v in npu.mem_get_info(self.index))
        if soc is None:
            notes.append("CANN acl module not importable: SoC name from torch_npu")
        return DeviceInfo("npu", name, self.inf_nan_mode, self.index, soc=soc or name,
                          memory_total=total, memory_free=free, notes=tuple(notes))


def _acl_soc_and_hbm() -> tuple[str | None, int | None, int | None]:
    """SoC name and HBM total/free through CANN's pyACL (`acl.get_soc_name`, `acl.rt.get_mem_info`)."""
    try:
        acl = importlib.import_module("acl")
    except ImportError:
        return None, None, None
    soc: str | None = None
    total = free = None
    try:
        soc = str(acl.get_soc_name())
    except Exception:  # noqa: BLE001 - older CANN lacks it
        soc = None
    try:
        free_b, total_b, ret = acl.rt.get_mem_info(ACL_HBM_MEM)
        if ret == 0:
            free, total = int(free_b), int(total_b)
    except Exception:  # noqa: BLE001 - needs a set device; torch_npu's counters are the fallback
        pass
    return soc, total, free


_NO_TORCH_NPU: list[str] = []


def probe(backend: str) -> str | None:
    """Why `backend` cannot be used here, or None when it can."""
    if backend not in BACKENDS:
        return f"unknown device {backend!r} (choose from auto, {', '.join(BACKENDS)})"
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return "torch is not installed (pip install 'ascend-tui[live]' torch==2.13.0)"
    if backend == "cpu":
        return None
    if backend == "cuda":
        if not torch.cuda.is_available():
            return "no CUDA device: torch.cuda.is_available() is False"
        return None
    if _NO_TORCH_NPU:
        return _NO_TORCH_NPU[0]
    try:
        torch_npu = importlib.import_module("torch_npu")
    except ImportError:
        # Remembered: a failed import searches every path entry again each time (~1 ms a run).
        _NO_TORCH_NPU.append("torch_npu is not installed on this machine, so there is no NPU backend")
        return _NO_TORCH_NPU[0]
    except Exception as exc:  # noqa: BLE001 - a broken CANN install raises all sorts
        return f"torch_npu failed to import: {exc}"
    if not torch_npu.npu.is_available():
        return "torch_npu is installed but no NPU is visible (torch_npu.npu.is_available() is False)"
    return None


def select(spec: str = "auto") -> Device:
    """The device for `spec` (`auto`, `npu`, `npu:1`, `cuda`, `cpu`); `auto` takes the first that works."""
    backend, _, idx = spec.partition(":")
    index = int(idx) if idx.isdigit() else 0
    if backend == "auto":
        reasons = []
        for candidate in BACKENDS:
            why = probe(candidate)
            if why is None:
                return Device(candidate, 0)
            reasons.append(f"{candidate}: {why}")
        raise DeviceError("no usable device: " + "; ".join(reasons))
    why = probe(backend)
    if why is not None:
        raise DeviceError(f"device {spec!r} is not usable: {why}")
    return Device(backend, index)


def describe_all() -> dict[str, str]:
    """Each backend and whether it is usable here — for `ascend-tui devices` and the app's status."""
    return {b: (probe(b) or "available") for b in BACKENDS}
