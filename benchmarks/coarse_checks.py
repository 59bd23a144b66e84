"""The memory and profile checks on the 16-layer Llama training step: wall and CPU time against the plain step.

Run: python benchmarks/coarse_checks.py [--reps 3] [--checks memory,profile] [--details module,full] [--forward]
The model is `capture_vs_msprobe.llama()` (transformers config, random weights, forward and
backward). Each round times the plain step and `investigate(model, inputs, checks=(name,))` for
every check and detail asked (`full`: every operator recorded, what these checks always did
before issue 24's coarse memory/profile), alternated, in one process; every round is printed,
then the medians and the ratios to the plain step and to `full` (the VM's speed cancels).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from benchmarks.capture_vs_msprobe import llama, llama_loss  # noqa: E402


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one call."""
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--checks", default="memory,profile")
    ap.add_argument("--details", default="module,full")
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--forward", action="store_true",
                    help="the forward only: `investigate(model, inputs, checks=(name,))` as called by default")
    args = ap.parse_args(argv)
    from ascend_tui import investigate

    model = llama(args.layers)
    inputs = {"input_ids": torch.randint(3, 512, (2, 64), generator=torch.Generator().manual_seed(0))}

    def plain() -> None:
        if args.forward:
            model(**inputs)
            return
        for p in model.parameters():
            p.grad = None
        llama_loss(model(**inputs)).backward()

    def check(variant: str) -> Callable[[], Any]:
        name, _, detail = variant.partition("/")
        step = {} if args.forward else {"backward": True, "loss": llama_loss}
        return lambda: investigate(model, inputs, checks=(name,), reference=None, device="cpu", detail=detail,
                                   profile_steps=1, profile_warmup=0, settings={"profile_coarse": True}, **step)

    names = [f"{c}/{d}" for c in args.checks.split(",") if c for d in args.details.split(",") if d]
    plain()  # warm-up
    for name in names:
        inv = check(name)()
        cap = inv.run.extra.get("capture", {"detail": "full"})
        why = [w.get("text") for w in cap.get("window", {}).get("why", [])]
        ops = cap.get("operators", sum(1 for n in inv.graph.nodes if n.kind == "op"))
        print(f"{name}: {cap.get('passes', 1)} passes, {ops} operators recorded; {len(inv.findings)} findings; "
              f"suspect {cap.get('window', {}).get('suspect')}: {why}")
    rows: dict[str, list[tuple[float, float]]] = {"plain": [], **{n: [] for n in names}}
    for r in range(args.reps):
        rows["plain"].append(timed(plain))
        for name in names:
            rows[name].append(timed(check(name)))
        base = rows["plain"][-1][0]
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1][0]:.3f}s wall / {v[-1][1]:.3f}s cpu ({v[-1][0] / base:.1f}x)"
                                             for k, v in rows.items()))
    base = statistics.median(w for w, _ in rows["plain"])
    for k, v in rows.items():
        w = statistics.median(x for x, _ in v)
        c = statistics.median(x for _, x in v)
        full = k.rpartition("/")[0] + "/full"
        vs = f", {w / statistics.median(x for x, _ in rows[full]):.2f}x {full}" if full in rows and full != k else ""
        print(f"median {k}: {w:.3f}s wall, {c:.3f}s cpu, {w / base:.1f}x plain{vs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
