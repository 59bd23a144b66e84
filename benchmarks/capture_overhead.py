"""Capture overhead: plain eager forward vs forward under `live.capture` (statistics on), same process.

Run: python benchmarks/capture_overhead.py [--reps 5] [--threads N]
Prints per-model medians and the ratio capture/plain; capture keeps unchanged weights' statistics
between runs (`live/weights.py`), and a second figure measures every weight again each run. Goals on CPU: ResNet-18 at most 1.3x, the
transformer block at most 1.5x.
`make_cnn()` and `make_transformer()` are shared with the other benchmarks.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import torch
from torch import nn


class BasicBlock(nn.Module):
    """ResNet basic block: two 3x3 convs with batch norm and a residual (projection when shapes change)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.down is None else self.down(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + idt)


class ResNet18(nn.Module):
    """ResNet-18 layout (11.7M parameters), defined here so nothing is downloaded."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.pool = nn.MaxPool2d(3, 2, 1)
        layers = []
        cin = 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class TransformerBlock(nn.Module):
    """A pre-norm transformer encoder block: multi-head attention and a GELU MLP, both residual."""

    def __init__(self, dim: int = 512, heads: int = 8) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


def make_cnn(batch: int = 8) -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return ResNet18().eval(), (torch.randn(batch, 3, 224, 224),)


def make_transformer(batch: int = 8, seq: int = 256, dim: int = 512) -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return TransformerBlock(dim).eval(), (torch.randn(batch, seq, dim),)


def _median_time(fn: Callable[[], Any], reps: int) -> float:
    fn()  # warm-up: allocator, kernels, caches
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(name: str, model: nn.Module, inputs: tuple[torch.Tensor, ...], reps: int) -> float:
    from ascend_tui.live.recording import capture
    from ascend_tui.live.weights import WEIGHTS

    def plain() -> None:
        with torch.no_grad():
            model(*inputs)

    ops = {}

    def captured() -> None:
        ops["n"] = capture(model, inputs, stats=True).op_count

    def cold() -> None:  # every weight measured again, as after a training step
        WEIGHTS.clear()
        capture(model, inputs, stats=True)

    # Interleave so drift (thermal, other load) hits both sides alike.
    base, cap, cold_runs = [], [], []
    for _ in range(reps):
        base.append(_median_time(plain, 1))
        cap.append(_median_time(captured, 1))
        cold_runs.append(_median_time(cold, 1))
    b, c, k = statistics.median(base), statistics.median(cap), statistics.median(cold_runs)
    print(f"{name:12} plain {b * 1e3:8.1f} ms   capture {c * 1e3:8.1f} ms   ops {ops['n']:5}   ratio {c / b:5.2f}x"
          f"   (weights changed every run: {k * 1e3:.1f} ms, {k / b:.2f}x)")
    return c / b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.reps} repetitions (median)")
    goals = {"resnet18": 1.3, "transformer": 1.5}
    ratios = {"resnet18": measure("resnet18", *make_cnn(), args.reps),
              "transformer": measure("transformer", *make_transformer(), args.reps)}
    for name, goal in goals.items():
        print(f"{name}: {ratios[name]:.2f}x (goal <= {goal}x): {'met' if ratios[name] <= goal else 'NOT met'}")


if __name__ == "__main__":
    main()
