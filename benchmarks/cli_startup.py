"""Wall time of `import ascend_tui.readers`, `ascend-tui --help`, `ascend-tui check DUMP --json OUT` and the
start-up of `graph` and `profile` (on a small ONNX model and a small kernel CSV), this checkout against another.

    PYTHONPATH=. python benchmarks/cli_startup.py --before /tmp/before-checkout [--runs 5] [--dump DIR]

Runs alternate (before, after, before, ...) so load on the machine hits both alike; every run is
printed, then the medians and their ratio (after / before), and the bare interpreter's start-up
(`python -c pass`) that every number includes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _time(checkout: Path, argv: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *argv], env=env, cwd=checkout,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{checkout}: python {' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True, help="the checkout to compare against")
    ap.add_argument("--runs", type=int, default=5)
    fixtures = ROOT.parent / "shared" / "fixtures"
    ap.add_argument("--dump", type=Path, default=fixtures / "msprobe" / "dump_ovf")
    ap.add_argument("--onnx", type=Path, default=ROOT / "tests" / "data" / "block_dynamo_export.onnx")
    ap.add_argument("--kernels", type=Path,
                    default=fixtures / "profiler" / "level1_2025-01" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="cli_startup_")) / "x.json"
    bare = [_time(ROOT, ["-c", "pass"]) for _ in range(args.runs)]
    print("python -c pass " + " ".join(f"{v:.3f}" for v in bare) + f"  median {statistics.median(bare):.3f} s")
    commands = {"readers": ["-c", "import ascend_tui.readers"], "--help": ["-m", "ascend_tui", "--help"],
                "check": ["-m", "ascend_tui", "check", str(args.dump), "-q", "--json", str(out)],
                "graph": ["-m", "ascend_tui", "graph", str(args.onnx), "-q"],
                "profile": ["-m", "ascend_tui", "profile", str(args.kernels), "-q"]}
    for name, argv in commands.items():
        times: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.runs):
            for side, checkout in (("before", args.before), ("after", ROOT)):
                times[side].append(_time(checkout, argv))
        for side, values in times.items():
            print(f"{name:7} {side:6} " + " ".join(f"{v:.3f}" for v in values) + f"  median {statistics.median(values):.3f} s")
        print(f"{name:7} ratio after/before (medians) {statistics.median(times['after']) / statistics.median(times['before']):.3f}")
    out.unlink(missing_ok=True)
    out.parent.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
