"""Capture cost per operator, side by side with msprobe's statistics dump, in one process.

Run: python benchmarks/capture_vs_msprobe.py [--reps 5] [--threads N] [--clock wall|cpu] [--no-msprobe]

Three models defined here (nothing is downloaded): a 300-layer `Linear(16,16)+ReLU` net (900
tiny aten ops, where per-operator overhead is everything), an 8-block CNN and a 6-block
transformer stack. Each is timed plain (eager, no_grad), under a bare `TorchDispatchMode`
(the floor any operator-level tool pays), under our capture with the overflow check and no
reference run (`investigate(model, inputs, checks=("overflow",), reference=None)`), and, when
`mindstudio-probe` (msprobe) is installed, under its statistics dump (`task: statistics`,
`level: L1`, files written to a temporary directory). msprobe patches torch's API for the rest
of the process once started, so it is timed last. `ours` keeps unchanged weights' statistics
from run to run (`live/weights.py`), as an inference loop or a repeated investigation does;
`cold` clears them before every run, as if each were a training step. Times are the best of `--reps` runs (the
least disturbed by other load); per-operator figures divide by the aten operator count.
Goals: at most 30 us/op on the tiny net, and at most half of msprobe's time on all three.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's ascend_tui and benchmarks
from benchmarks.capture_overhead import TransformerBlock  # noqa: E402

TINY_GOAL_US = 30.0
ISSUE_BARE_US = 6.0  # what the issue measured a bare TorchDispatchMode at, on the machine the 30 us goal is from
MSPROBE_GOAL = 0.5


class ConvBlock(nn.Module):
    """3x3 conv, batch norm, ReLU, with a residual connection."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x))) + x


class CNN8(nn.Module):
    """A stem, eight residual conv blocks, pooling and a classifier."""

    def __init__(self, channels: int = 32, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = nn.Sequential(*(ConvBlock(channels) for _ in range(8)))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


class Transformer6(nn.Module):
    """Six pre-norm transformer blocks and a final norm."""

    def __init__(self, dim: int = 256, heads: int = 4) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*(TransformerBlock(dim, heads) for _ in range(6)))
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.blocks(x))


def models() -> list[tuple[str, nn.Module, tuple[torch.Tensor, ...]]]:
    torch.manual_seed(0)
    tiny = nn.Sequential(*(m for _ in range(300) for m in (nn.Linear(16, 16), nn.ReLU()))).eval()
    return [
        ("tiny-linear", tiny, (torch.randn(8, 16),)),
        ("cnn-8", CNN8().eval(), (torch.randn(4, 3, 32, 32),)),
        ("transformer-6", Transformer6().eval(), (torch.randn(4, 64, 256),)),
    ]


CLOCK: Callable[[], float] = time.perf_counter


def best(fn: Callable[[], Any], reps: int) -> float:
    """Best time (`CLOCK`) of `reps` calls after one warm-up."""
    fn()
    times = []
    for _ in range(reps):
        t0 = CLOCK()
        fn()
        times.append(CLOCK() - t0)
    return min(times)


def bare_mode() -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Bare(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    return Bare


def measure_ours(model: nn.Module, inputs: tuple[torch.Tensor, ...], reps: int) -> dict[str, float]:
    from ascend_tui import investigate
    from ascend_tui.live.recording import capture
    from ascend_tui.live.weights import WEIGHTS

    ops = capture(model, inputs, stats=False, source=False).op_count
    bare = bare_mode()

    def plain() -> None:
        with torch.no_grad():
            model(*inputs)

    def dispatch() -> None:
        with torch.no_grad(), bare():
            model(*inputs)

    def ours() -> None:
        investigate(model, inputs, checks=("overflow",), reference=None)

    def cold() -> None:  # as if every weight had changed since the last run (a training step)
        WEIGHTS.clear()
        investigate(model, inputs, checks=("overflow",), reference=None)

    # Interleaved, so drift (other load, thermal) hits every variant alike.
    runs: dict[str, list[float]] = {"plain": [], "bare": [], "ours": [], "cold": []}
    for _ in range(reps):
        runs["plain"].append(best(plain, 1))
        runs["bare"].append(best(dispatch, 1))
        runs["ours"].append(best(ours, 1))
        runs["cold"].append(best(cold, 1))
    return {"ops": ops, **{k: min(v) / ops * 1e6 for k, v in runs.items()}}


def msprobe_available() -> bool:
    try:
        import msprobe.pytorch  # noqa: F401
    except Exception:  # noqa: BLE001 - not installed, or fails to import on this machine
        return False
    return True


def measure_msprobe(entries: list[tuple[str, nn.Module, tuple[torch.Tensor, ...]]], ops: dict[str, int],
                    reps: int) -> dict[str, float]:
    """msprobe's statistics dump (L1: every torch API call) per operator, for each model."""
    import logging

    from msprobe.pytorch import PrecisionDebugger

    logging.disable(logging.INFO)
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        config = {"task": "statistics", "dump_path": os.path.join(tmp, "dump"), "rank": [], "step": [],
                  "level": "L1", "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                                "summary_mode": "statistics"}}
        path = os.path.join(tmp, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        PrecisionDebugger(config_path=path)
        for name, model, inputs in entries:
            def dumped(model: nn.Module = model, inputs: tuple[torch.Tensor, ...] = inputs) -> None:
                PrecisionDebugger.start(model)
                with torch.no_grad():
                    model(*inputs)
                PrecisionDebugger.stop()
                PrecisionDebugger.step()

            out[name] = best(dumped, reps) / ops[name] * 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--no-msprobe", action="store_true", help="skip msprobe even when it is installed")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall time, or this process's CPU time (steadier on a shared machine; with one "
                             "torch thread it is the work done)")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.threads:
        torch.set_num_threads(args.threads)
    entries = models()
    with_msprobe = not args.no_msprobe and msprobe_available()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, best of {args.reps} ({args.clock} clock); "
          f"msprobe: {'yes' if with_msprobe else 'not installed (pip install mindstudio-probe==26.2.0)'}")
    ours = {name: measure_ours(model, inputs, args.reps) for name, model, inputs in entries}
    ms = measure_msprobe(entries, {n: int(r["ops"]) for n, r in ours.items()}, args.reps) if with_msprobe else {}
    print(f"{'model':14} {'ops':>5} {'plain':>8} {'bare':>8} {'ours':>8} {'cold':>8} {'msprobe':>8}   "
          f"{'ours/plain':>10} {'ours-bare':>9} {'ours/msprobe':>12} {'cold/msprobe':>12}   (us per operator)")
    met = True
    for name, r in ours.items():
        m = ms.get(name)
        vs = r["ours"] / m if m else None
        cvs = f"{r['cold'] / m:11.2f}x" if m else ""
        print(f"{name:14} {int(r['ops']):5} {r['plain']:8.1f} {r['bare']:8.1f} {r['ours']:8.1f} {r['cold']:8.1f} "
              f"{m if m else float('nan'):8.1f}   {r['ours'] / r['plain']:9.2f}x {r['ours'] - r['bare']:9.1f} "
              f"{'' if vs is None else f'{vs:11.2f}x'} {cvs}")
        if vs is not None and vs > MSPROBE_GOAL:
            met = False
    tiny, bare = ours["tiny-linear"]["ours"], ours["tiny-linear"]["bare"]
    print(f"tiny net: {tiny:.1f} us/op (goal <= {TINY_GOAL_US:.0f}): {'met' if tiny <= TINY_GOAL_US else 'NOT met'}"
          f"; a bare dispatch mode costs {bare:.1f} us/op on this machine, so ours is {tiny / bare:.1f}x the bare "
          f"mode (the issue measured the bare mode at {ISSUE_BARE_US:.0f} us/op on its machine, where "
          f"{TINY_GOAL_US:.0f} us/op is {TINY_GOAL_US / ISSUE_BARE_US:.1f}x)")
    if ms:
        print(f"ours vs msprobe (goal <= {MSPROBE_GOAL:.1f}x on every model): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
