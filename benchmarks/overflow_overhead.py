"""Watch overhead: the user's plain loop vs the same loop under `ascend_tui.watch`, same process.

Run: python benchmarks/overflow_overhead.py [--reps 5] [--steps 3] [--threads N]
Models are the capture benchmark's (a ResNet-18-sized CNN and a transformer block). Each
repetition times `steps` iterations of an inference loop (forward, then `w.step()`) and of a
training loop (forward, backward, `w.step()`, SGD update); prints medians and ratios.
Goal: at most 1.3x.

On glibc, activations of a few MB are mmap'd and returned to the system on every free, so a
CPU forward can pay page faults that dwarf the work (on a loaded 2-core machine here a
ResNet-18 forward took 1.1 s instead of 0.2 s), and any extra allocation shifts that cost at
random. The benchmark therefore raises glibc's mmap and trim thresholds (both loops alike)
unless `--default-malloc` is given; run both to see the spread.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.capture_overhead import make_cnn, make_transformer  # noqa: E402

import ascend_tui  # noqa: E402


def infer_loop(model: nn.Module, inputs: tuple[Any, ...], steps: int, w: Any) -> None:
    with torch.no_grad():
        for _ in range(steps):
            model(*inputs)
            if w is not None:
                w.step()


def train_loop(model: nn.Module, inputs: tuple[Any, ...], steps: int, w: Any) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    for _ in range(steps):
        model(*inputs).float().mean().backward()
        if w is None or not w.step():
            opt.step()
        opt.zero_grad(set_to_none=True)


def steady_malloc() -> bool:
    """Keep freed activations in the heap (glibc mallopt M_MMAP_THRESHOLD / M_TRIM_THRESHOLD)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(-3, 32 * 1024 * 1024)) and bool(libc.mallopt(-1, 1 << 30))


def timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(name: str, model: nn.Module, inputs: tuple[Any, ...], loop: Any, steps: int, reps: int) -> float:
    def plain() -> None:
        loop(model, inputs, steps, None)

    def watched() -> None:
        with ascend_tui.watch(model, save=False) as w:
            loop(model, inputs, steps, w)
        if w.findings:
            raise SystemExit(f"{name}: the benchmark model produced findings: {w.findings[0].message}")

    for _ in range(2):  # warm-up: allocator, kernels, caches
        plain()
        watched()
    base, watch = [], []
    for _ in range(reps):  # interleaved, so drift hits both sides alike
        base.append(timed(plain))
        watch.append(timed(watched))
    b, c = statistics.median(base), statistics.median(watch)
    print(f"{name:18} plain {b / steps * 1e3:8.1f} ms/step   watch {c / steps * 1e3:8.1f} ms/step   "
          f"ratio {c / b:5.2f}x (of the fastest repetitions {min(watch) / min(base):5.2f}x)")
    return c / b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--default-malloc", action="store_true", help="keep glibc's default mmap/trim thresholds")
    args = parser.parse_args()
    steady = not args.default_malloc and steady_malloc()
    if args.threads:
        torch.set_num_threads(args.threads)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.reps} repetitions of "
          f"{args.steps} steps (median); load average {load:.1f} on {os.cpu_count()} CPUs; "
          f"allocator: {'steady (mmap/trim thresholds raised)' if steady else 'default'}")
    ratios = []
    for label, make in (("resnet18", make_cnn), ("transformer", make_transformer)):
        model, inputs = make()
        ratios.append(measure(f"{label} infer", model, inputs, infer_loop, args.steps, args.reps))
        model.train()
        ratios.append(measure(f"{label} train", model, inputs, train_loop, args.steps, args.reps))
    worst = max(ratios)
    print(f"worst ratio {worst:.2f}x (goal <= 1.3x): {'met' if worst <= 1.3 else 'NOT met'}")


if __name__ == "__main__":
    main()
