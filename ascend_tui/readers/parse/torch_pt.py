"""A `torch.save` file holding one plain tensor, memory-mapped with numpy and read without importing torch.

msprobe writes every dumped tensor this way: a zip whose `data.pkl` rebuilds one contiguous
tensor from one stored (uncompressed) storage. The pickle is read by an unpickler that only
knows `_rebuild_tensor_v2`, the storage classes and `OrderedDict` (anything else is refused,
as `weights_only=True` refuses it), and the storage bytes are `np.memmap`-ed in place.
Importing torch costs about 1.8 s of CPU, a third of a 1 GB compare; files this cannot read
(views with strides, float8, big-endian) raise `Unsupported` and go to `torch.load`.
"""

from __future__ import annotations

import collections
import io
import math
import pickle
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ascend_tui.errors import InputError

_STORAGES: dict[str, Any] = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16, "BFloat16Storage": "bfloat16",
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16, "CharStorage": np.int8,
    "ByteStorage": np.uint8, "BoolStorage": np.bool_,
}
_LOCAL_HEADER = struct.Struct("<4s22xHH")


class Unsupported(Exception):
    """The file is a valid torch file this reader does not handle; use `torch.load`."""


@dataclass(frozen=True, slots=True)
class _Storage:
    kind: str
    key: str
    numel: int


@dataclass(frozen=True, slots=True)
class _Rebuilt:
    storage: _Storage
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]


def _rebuild(storage: Any, offset: Any, size: Any, stride: Any, *_rest: Any) -> _Rebuilt:
    if not isinstance(storage, _Storage):
        raise Unsupported("tensor without a storage")
    return _Rebuilt(storage, int(offset), tuple(int(s) for s in size), tuple(int(s) for s in stride))


class _Unpickler(pickle.Unpickler):
    """Knows exactly what a saved plain tensor needs; refuses every other global."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild
        if module == "torch" and name in _STORAGES:
            return name
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        raise Unsupported(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        if isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and pid[1] in _STORAGES:
            return _Storage(str(pid[1]), str(pid[2]), int(pid[4]))
        raise Unsupported(f"storage {pid!r}")


@dataclass(frozen=True, slots=True)
class FlatTensor:
    """One tensor file, memory-mapped and flattened; `chunks` yields it in the dtype msprobe compares."""

    path: str
    dtype: str
    shape: tuple[int, ...]
    data: np.ndarray

    @property
    def numel(self) -> int:
        return int(self.data.size)

    @property
    def compare_dtype(self) -> np.dtype:
        """bfloat16 is compared as float32 (msprobe widens it); every other dtype as stored."""
        return np.dtype(np.float32) if self.dtype == "bfloat16" else self.data.dtype

    def chunks(self, size: int) -> Iterator[np.ndarray]:
        for start in range(0, self.data.size, size):
            part = self.data[start:start + size]
            if self.dtype == "bfloat16":  # the high half of a float32: exact
                yield (part.astype(np.uint32) << 16).view(np.float32)
            else:
                yield part


def open_tensor(path: str | Path) -> FlatTensor:
    """The tensor in a `torch.save` file, memory-mapped; `Unsupported` if it needs torch, InputError if broken."""
    path = str(path)
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            pkl = next((n for n in names if n.endswith("/data.pkl") or n == "data.pkl"), None)
            if pkl is None:
                raise InputError(path, "not a torch tensor file (no data.pkl inside)")
            prefix = pkl[: -len("data.pkl")]
            order = prefix + "byteorder"
            if order in names and z.read(order).strip() != b"little":
                raise Unsupported("big-endian")
            try:
                obj = _Unpickler(io.BytesIO(z.read(pkl))).load()
            except Unsupported:
                raise
            except Exception as exc:  # noqa: BLE001 - a corrupt pickle is bad input
                raise InputError(path, f"torch tensor file is corrupt ({type(exc).__name__})") from None
            if not isinstance(obj, _Rebuilt):
                raise Unsupported(type(obj).__name__)
            info = z.getinfo(prefix + "data/" + obj.storage.key)
    except (zipfile.BadZipFile, OSError, KeyError, EOFError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise InputError(path, "tensor file named in dump.json is missing") from None
        raise InputError(path, f"not a readable torch tensor file ({type(exc).__name__})") from None
    if info.compress_type != zipfile.ZIP_STORED:
        raise Unsupported("compressed storage")
    size, stride = obj.size, obj.stride
    numel = math.prod(size)
    expect = tuple(math.prod(size[i + 1:]) for i in range(len(size)))
    if numel > 1 and any(s != e for s, e, n in zip(stride, expect, size) if n != 1):
        raise Unsupported("strided view")
    kind = _STORAGES[obj.storage.kind]
    raw = np.dtype(np.uint16) if kind == "bfloat16" else np.dtype(kind)
    dtype = "bfloat16" if kind == "bfloat16" else raw.name
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        sig, n_name, n_extra = _LOCAL_HEADER.unpack(fh.read(_LOCAL_HEADER.size))
    if sig != b"PK\x03\x04":
        raise InputError(path, "torch tensor file is corrupt (bad zip entry)")
    start = info.header_offset + _LOCAL_HEADER.size + n_name + n_extra + obj.offset * raw.itemsize
    if obj.offset + numel > obj.storage.numel or start + numel * raw.itemsize > Path(path).stat().st_size:
        raise InputError(path, "torch tensor file is truncated")
    data = np.memmap(path, dtype=raw, mode="r", offset=start, shape=(numel,)) if numel else np.empty(0, raw)
    return FlatTensor(path, dtype, size, data)
