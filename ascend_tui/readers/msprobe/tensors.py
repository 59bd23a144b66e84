"""msprobe tensor files (`dump_tensor_data/*.pt`): opened memory-mapped, read in flat numpy chunks.

`torch_pt` reads the common files without torch; `torch.load(..., weights_only=True, mmap=True)`
takes the rest. The pair metrics over these chunks are `offline/compare_tensors.py`'s.
"""

from __future__ import annotations

from typing import Any, Iterator

from ascend_tui.errors import InputError
from ascend_tui.readers.parse import torch_pt

NO_TORCH = "this tensor file needs PyTorch to read (pip install torch)"


def torch_available() -> bool:
    """True when torch can be imported (without importing it)."""
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def load_tensor(path: str) -> Any:
    """The tensor in an msprobe `.pt` file, memory-mapped, on the CPU; anything else is an InputError."""
    import torch

    try:
        t = torch.load(path, weights_only=True, mmap=True, map_location="cpu")
    except FileNotFoundError:
        raise InputError(path, "tensor file named in dump.json is missing") from None
    except Exception as exc:  # noqa: BLE001 - torch raises many types for foreign or truncated files
        raise InputError(path, f"not a readable torch tensor file ({type(exc).__name__}: {str(exc)[:120]})") from None
    if not isinstance(t, torch.Tensor):
        raise InputError(path, f"holds a {type(t).__name__}, expected one tensor")
    return t.detach()


def _numpy_chunks(t: Any, size: int) -> Iterator[Any]:
    """Flattened chunks of `t` as numpy arrays in the dtype msprobe compares (bfloat16/float8 -> float32)."""
    import torch

    flat = t.reshape(-1)
    widen = flat.dtype == torch.bfloat16 or "float8" in str(flat.dtype)
    for start in range(0, flat.numel(), size):
        part = flat[start:start + size]
        yield (part.float() if widen else part).numpy()


def _np_dtype(t: Any) -> Any:
    import numpy as np
    import torch

    if t.dtype == torch.bfloat16 or "float8" in str(t.dtype):
        return np.dtype(np.float32)
    return torch.empty(0, dtype=t.dtype).numpy().dtype


def open_tensor(path: str) -> Any:
    """A tensor file as something with `numel`, `shape`, `compare_dtype` and `chunks(size)`.

    The torch-free memory-mapped reader first (`torch_pt`); `torch.load(weights_only=True, mmap=True)`
    for the files it does not handle.
    """
    if path.endswith(".npy"):
        return _NpyFlat(path)
    try:
        return torch_pt.open_tensor(path)
    except torch_pt.Unsupported:
        if not torch_available():
            raise InputError(path, NO_TORCH) from None
        return _TorchFlat(load_tensor(path))


class _NpyFlat:
    """A MindSpore dump's `.npy` tensor (numpy, memory-mapped, never unpickled), seen like `torch_pt.FlatTensor`."""

    def __init__(self, path: str) -> None:
        import numpy as np

        try:
            self.a = np.load(path, mmap_mode="r", allow_pickle=False)
        except FileNotFoundError:
            raise InputError(path, "tensor file named in dump.json is missing") from None
        except (OSError, ValueError) as exc:
            raise InputError(path, f"not a readable .npy tensor file ({exc})") from None
        self.shape = tuple(self.a.shape)
        self.numel = int(self.a.size)
        self.compare_dtype = self.a.dtype

    def chunks(self, size: int) -> Iterator[Any]:
        flat = self.a.reshape(-1)
        for start in range(0, self.numel, size):
            yield flat[start:start + size]


class _TorchFlat:
    """A tensor loaded by torch, seen through the same interface as `torch_pt.FlatTensor`."""

    def __init__(self, t: Any) -> None:
        self.t = t
        self.shape = tuple(t.shape)
        self.numel = t.numel()
        self.compare_dtype = _np_dtype(t)

    def chunks(self, size: int) -> Iterator[Any]:
        return _numpy_chunks(self.t, size)
