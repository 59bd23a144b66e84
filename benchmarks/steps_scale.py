"""The step/rank picker and the trend over many steps, against opening one step, on a real dump repeated.

    PYTHONPATH=. python benchmarks/steps_scale.py [--steps 32] [--ranks 16] [--dump tests/data/llm_dumps/fp32_steps]

Builds STEPS x RANKS folders of hard links to one real msprobe step (no extra disk), then times, in
one process and each on a cold statistics cache: opening one point the way the app does (the reader
builds its graph: the baseline), the picker's summaries of every point, and the trend over every step
of one rank. Every run is printed, then the ratios per point against the baseline.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(src: Path, root: Path, steps: int, ranks: int) -> None:
    """`steps` x `ranks` rank folders of hard links to the first rank folder of `src`."""
    rank = next(p.parent for p in sorted(src.rglob("dump.json")))
    for s in range(steps):
        for r in range(ranks):
            out = root / f"step{s}" / f"rank{r}"
            out.mkdir(parents=True)
            for f in rank.iterdir():
                if f.is_file():
                    os.link(f, out / f.name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dump", type=Path, default=ROOT / "tests/data/llm_dumps/fp32_steps")
    args = ap.parse_args()
    from ascend_tui.offline import trends
    from ascend_tui.readers.msprobe import dump

    tmp = Path(tempfile.mkdtemp(prefix="steps_scale_"))
    try:
        build(args.dump, tmp, args.steps, args.ranks)
        n = args.steps * args.ranks
        base, picker, trend = [], [], []
        for run in range(args.runs):
            trends._CACHE.clear()
            t = time.perf_counter()
            inv = dump.load(tmp / "step0" / "rank0")
            base.append(time.perf_counter() - t)
            points = trends.points_of(inv)
            assert len(points) == n
            t = time.perf_counter()
            lines = trends.summaries(inv, points)
            picker.append(time.perf_counter() - t)
            trends._CACHE.clear()
            t = time.perf_counter()
            series, _ = trends.trend_series(inv)
            trend.append(time.perf_counter() - t)
            print(f"run {run + 1}: open one point {base[-1]:.3f} s · picker over {len(lines)} points "
                  f"{picker[-1]:.3f} s · trend over {args.steps} steps ({len(series)} series) {trend[-1]:.3f} s")
        b = statistics.median(base)
        print(f"median: open one point {b:.3f} s; picker {statistics.median(picker) / n / b:.2f}x of opening, "
              f"per point; trend {statistics.median(trend) / args.steps / b:.2f}x of opening, per step")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
