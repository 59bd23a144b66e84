"""Isolated replay of dumped API calls: re-run one op on the golden inputs cast to the target dtype.

If the op alone, fed exact inputs, reproduces the error, it introduced it; if not, its inputs
carried it. Only `Functional.*`, `Torch.*` and `Tensor.*` forward records whose call can be
rebuilt from dump.json and the golden tensor files are replayed (on the CPU, with torch).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ascend_tui.checks.precision import TensorMetrics, tensor_metrics
from ascend_tui.errors import InputError
from ascend_tui.readers.msprobe.graph import API_NAME
from ascend_tui.readers.msprobe.tensors import load_tensor

_MAX_REPLAYS = 256


def resolve(entry: str) -> Any:
    """The torch callable an API record names, or None when it is not one we replay."""
    import torch
    import torch.nn.functional as F

    m = API_NAME.match(entry)
    if m is None or m["dir"] != "forward":
        return None
    prefix, api = m["prefix"], m["api"]
    if api.startswith("_") and not (api.startswith("__") and api.endswith("__")):
        return None
    space = {"Functional": F, "Torch": torch, "Tensor": torch.Tensor}.get(prefix)
    fn = getattr(space, api, None) if space is not None else None
    return fn if callable(fn) else None


def record_value(v: Any, data_dir: Path, dtype: Any) -> Any:
    """Rebuild one argument from its dump.json record: tensors from the golden files, cast to `dtype`."""
    import torch

    if v is None:
        return None
    if isinstance(v, list):
        return [record_value(x, data_dir, dtype) for x in v]
    if not isinstance(v, dict):
        raise ValueError("unknown record")
    if "dtype" in v and "shape" in v:
        name = v.get("data_name")
        if not name:
            raise ValueError("tensor without data")
        t = load_tensor(str(data_dir / str(name))).clone()
        return t.to(dtype) if t.is_floating_point() and dtype is not None else t
    if "value" in v:
        val = v["value"]
        if v.get("type") == "slice" and isinstance(val, list) and len(val) == 3:
            return slice(*val)
        if v.get("type") == "torch.dtype" and isinstance(val, str):
            return getattr(torch, val.removeprefix("torch."))
        return val
    if "type" in v or "class_type" in v:
        raise ValueError("value not recorded")
    return {k: record_value(x, data_dir, dtype) for k, x in v.items()}


def _tensors(x: Any) -> list[Any]:
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for item in x for t in _tensors(item)]
    return []


def golden_outputs(record: Mapping[str, Any], data_dir: Path) -> list[Any]:
    out: list[Any] = []

    def walk(v: Any) -> None:
        if isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict) and "dtype" in v and "shape" in v and v.get("data_name"):
            out.append(load_tensor(str(data_dir / str(v["data_name"]))))

    walk(record.get("output"))
    return out


def replay_one(entry: str, golden: Mapping[str, Any], golden_dir: Path, dtype_name: str) -> TensorMetrics | None:
    """Metrics of the op re-run on the golden inputs in `dtype_name` against the golden output (None: not replayable)."""
    import torch

    fn = resolve(entry)
    record = golden.get(entry)
    if fn is None or not isinstance(record, dict):
        return None
    dtype = getattr(torch, dtype_name, None) if dtype_name in ("float16", "bfloat16", "float32", "float64") else None
    data_dir = golden_dir / "dump_tensor_data"
    try:
        args = [record_value(v, data_dir, dtype) for v in record.get("input_args") or ()]
        kwargs = {k: record_value(v, data_dir, dtype) for k, v in (record.get("input_kwargs") or {}).items()}
        with torch.no_grad():
            out = _tensors(fn(*args, **kwargs))
        want = golden_outputs(record, data_dir)
    except (ValueError, TypeError, RuntimeError, InputError, IndexError, AttributeError):
        return None
    if not out or len(out) != len(want):
        return None
    worst: TensorMetrics | None = None
    for got, gold in zip(out, want):
        m = tensor_metrics(_np(got), _np(gold))
        if worst is None or _cos(m) < _cos(worst):
            worst = m
    return worst


def _np(t: Any) -> np.ndarray:
    import torch

    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def _cos(m: TensorMetrics) -> float:
    c = m.value("cosine")
    return 1.0 if math.isnan(c) else c


def replayer(golden_dir: Path, target: Mapping[str, Any], golden: Mapping[str, Any],
             ids: Mapping[str, str]) -> Callable[[str], TensorMetrics | None]:
    """A function node id -> metrics of that op replayed on the golden inputs (None: not replayable)."""
    entry_of = {nid: name for name, nid in ids.items()}
    budget = [_MAX_REPLAYS]

    def run(node: str) -> TensorMetrics | None:
        entry = entry_of.get(node, "")
        if budget[0] <= 0 or entry not in golden:
            return None
        budget[0] -= 1
        return replay_one(entry, golden, golden_dir, _out_dtype(target.get(entry)))

    return run


def _out_dtype(record: Any) -> str:
    """The dtype of the first tensor output of a target record (what the target ran the op in)."""
    stack = [record.get("output") if isinstance(record, dict) else None]
    while stack:
        v = stack.pop(0)
        if isinstance(v, list):
            stack[:0] = v
        elif isinstance(v, dict) and "dtype" in v:
            return str(v["dtype"]).removeprefix("torch.")
    return ""
