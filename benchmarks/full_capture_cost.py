"""What a full capture (`--detail full`) costs on top of a plain step, split into its parts, against a bare dispatch mode.

Run: python benchmarks/full_capture_cost.py [--reps 5] [--clock cpu|wall] [--threads 1]

The 16-layer Llama training step of `capture_vs_msprobe.py --llama` (random weights from a
transformers config, forward and backward), timed in one process, variants alternated each
round: plain; under a bare `TorchDispatchMode`; recorded with neither statistics nor source
locations (`record`); with source locations (`+source`); with statistics too (`capture`: the
full capture); and the whole `investigate(..., detail="full")` (`full`). Each variant's fixed
cost is its time minus the plain step's in the same round, printed as a multiple of the bare
mode's fixed cost (issue 24's goal for `full`: <= 3x) and per aten op. Every round is printed.

Beside the times, a count that does not drift with the machine's load: the Python calls (functions
and builtins, as `sys.setprofile` sees them) each variant makes per aten op, counted in one extra
run after the timed rounds; a variant's calls over the plain step's, as a multiple of the bare
mode's, is the fixed cost counted instead of timed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from capture_vs_msprobe import bare_mode, llama, llama_loss  # noqa: E402


def calls_per_op(fn: Callable[[], Any], ops: int) -> float:
    """Python calls (function and builtin calls, `sys.setprofile`'s "call" and "c_call" events) per aten op of one run."""
    count = [0]

    def profile(_frame: Any, event: str, _arg: Any) -> None:
        if event == "call" or event == "c_call":
            count[0] += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count[0] / ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    from ascend_tui import investigate
    from ascend_tui.live.recording import capture

    model = llama()
    inputs = {"input_ids": torch.randint(3, 512, (2, 64), generator=torch.Generator().manual_seed(0))}
    bare = bare_mode()

    def step() -> None:
        for p in model.parameters():
            p.grad = None
        llama_loss(model(**inputs)).backward()

    def bare_step() -> None:
        with bare():
            step()

    def recorded(**kw: Any) -> Callable[[], Any]:
        return lambda: capture(model, inputs, backward=True, loss=llama_loss, **kw)

    variants: dict[str, Callable[[], Any]] = {
        "plain": step, "bare": bare_step, "record": recorded(stats=False, source=False),
        "+source": recorded(stats=False), "capture": recorded(),
        "full": lambda: investigate(model, inputs, checks=("overflow",), reference=None, backward=True,
                                    loss=llama_loss, device="cpu", detail="full"),
    }
    ops = capture(model, inputs, backward=True, loss=llama_loss, stats=False, source=False).op_count
    for fn in variants.values():
        fn()  # warm-up
    runs: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.reps):
        for name, fn in variants.items():
            t0 = clock()
            fn()
            runs[name].append(clock() - t0)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, {args.threads} threads, {args.reps} rounds ({args.clock} clock), "
          f"llama-16 step: {ops} operators recorded; load average {load:.2f} at the end")
    for name, times in runs.items():
        print(f"  {name:8} " + " ".join(f"{t:6.3f}" for t in times) + " s")
    calls = {name: calls_per_op(fn, ops) for name, fn in variants.items()}
    print("  Python calls per op (deterministic): " + ", ".join(f"{k} {v:.1f}" for k, v in calls.items()))
    bare_fixed = [b - p for b, p in zip(runs["bare"], runs["plain"])]

    def ratio_calls(name: str) -> float:
        return (calls[name] - calls["plain"]) / (calls["bare"] - calls["plain"])

    for name in ("record", "+source", "capture", "full"):
        ratio = [(x - p) / b if b > 0 else float("nan") for x, p, b in zip(runs[name], runs["plain"], bare_fixed)]
        per_op = [(x - y) / ops * 1e6 for x, y in zip(runs[name], runs["bare"])]
        median = sorted(ratio)[len(ratio) // 2]
        print(f"  {name:8} fixed/bare fixed " + " ".join(f"{r:5.2f}" for r in ratio) + f"  median {median:5.2f}x"
              + ("  (goal <= 3x)" if name == "full" else "") + "; us per op over bare "
              + " ".join(f"{u:5.1f}" for u in per_op)
              + f"; Python calls per op over plain {calls[name] - calls['plain']:.1f} ({ratio_calls(name):.1f}x bare's)")


if __name__ == "__main__":
    main()
