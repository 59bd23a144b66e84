"""Hand-built msprobe tensor dumps (dump.json, construct.json, stack.json, .pt files) for precision tests.

Each case runs a few torch calls twice, in float32 (golden) and the way the target runs them,
and writes what msprobe 26.2.0 would: records in call order, statistics, one .pt per tensor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F


class Dump:
    """Records of one run, written as a `task: tensor` dump under `root/step0/rank0`."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "step0" / "rank0"
        (self.dir / "dump_tensor_data").mkdir(parents=True)
        self.data: dict[str, Any] = {}
        self.construct: dict[str, str | None] = {}
        self.counts: dict[str, int] = {}

    def leaf(self, name: str, t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return {"type": type(t).__name__, "value": t}
        t = t.detach()
        torch.save(t.clone(), self.dir / "dump_tensor_data" / f"{name}.pt")
        x = t.float()
        return {"type": "torch.Tensor", "dtype": str(t.dtype), "shape": list(t.shape), "Max": x.max().item(),
                "Min": x.min().item(), "Mean": x.mean().item(), "Norm": x.norm().item(),
                "requires_grad": False, "data_name": f"{name}.pt"}

    def call(self, prefix: str, api: str, fn: Callable[..., Any], *args: Any, module: str | None = None) -> Any:
        k = self.counts.get(f"{prefix}.{api}", 0)
        self.counts[f"{prefix}.{api}"] = k + 1
        name = f"{prefix}.{api}.{k}.forward"
        out = fn(*args)
        self.data[name] = {"input_args": [self.leaf(f"{name}.input.{i}", a) for i, a in enumerate(args)],
                           "input_kwargs": {}, "output": [self.leaf(f"{name}.output.0", out)]}
        self.construct[name] = module
        return out

    def module(self, path: str, cls: str, inputs: list[Any], params: dict[str, Any], out: Any) -> None:
        name = f"Module.{path}.{cls}.forward.0"
        self.data[name] = {"input_args": [self.leaf(f"{name}.input.{i}", a) for i, a in enumerate(inputs)],
                           "input_kwargs": {},
                           "parameters": {k: self.leaf(f"{name}.parameters.{k}", v) for k, v in params.items()},
                           "output": [self.leaf(f"{name}.output.0", out)]}
        self.construct[name] = None

    def write(self) -> Path:
        head = {"task": "tensor", "level": "mix", "framework": "pytorch",
                "dump_data_dir": str(self.dir / "dump_tensor_data"), "data": self.data}
        (self.dir / "dump.json").write_text(json.dumps(head))
        (self.dir / "construct.json").write_text(json.dumps(self.construct))
        (self.dir / "stack.json").write_text("{}")
        return self.dir.parent.parent


def _data(seed: int, *shape: int, mean: float = 0.0) -> Any:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) + mean


def cancellation(root: Path, dtype: torch.dtype) -> Path:
    """Variance as E[x^2] - E[x]^2 of data with a large mean: the subtraction cancels catastrophically."""
    d = Dump(root)
    x = _data(0, 64, 256, mean=300.0).to(dtype)
    sq = d.call("Tensor", "__mul__", torch.Tensor.__mul__, x, x)
    m2 = d.call("Torch", "mean", torch.mean, sq, 1)
    m = d.call("Torch", "mean", torch.mean, x, 1)
    mm = d.call("Tensor", "__mul__", torch.Tensor.__mul__, m, m)
    d.call("Tensor", "__sub__", torch.Tensor.__sub__, m2, mm)
    return d.write()


def steep_activation(root: Path, dtype: torch.dtype) -> Path:
    """A matmul in `dtype` adds a small error; exp (run in float32, as autocast does) only amplifies it."""
    d = Dump(root)
    x = _data(1, 32, 64)
    w = _data(2, 64, 64) * 0.3
    y = d.call("Functional", "linear", lambda a, b: F.linear(a.to(dtype), b.to(dtype)), x, w)
    z = d.call("Tensor", "float", torch.Tensor.float, y)
    s = d.call("Tensor", "__mul__", torch.Tensor.__mul__, z, 4.0)
    d.call("Torch", "exp", torch.exp, s)
    return d.write()


def perturbed_weight(root: Path, perturb: bool) -> Path:
    """A Linear module whose weight differs on one side; everything else runs in float32."""
    d = Dump(root)
    x = _data(3, 16, 32)
    w = _data(4, 8, 32) * 0.2
    if perturb:
        w = w + 0.05 * _data(5, 8, 32)
    b = _data(6, 8) * 0.1
    y = d.call("Functional", "linear", F.linear, x, w, b, module="Module.fc.Linear.forward.0")
    d.module("fc", "Linear", [x], {"weight": w, "bias": b}, y)
    r = d.call("Functional", "relu", F.relu, y)
    d.call("Torch", "sum", torch.sum, r, 1)
    return d.write()
