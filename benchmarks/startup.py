"""Start-up time of the user-facing commands, against a bare interpreter and, optionally, an older checkout.

Run: python benchmarks/startup.py [--runs 5] [--against DIR]
Times, as fresh child processes, `python -c pass` (the interpreter alone), `import ascend_tui.readers`,
`ascend-tui --help` and `ascend-tui check` on the fp32 msprobe dump fixture. With `--against DIR`
(e.g. `git worktree add /tmp/old <commit>`) the same commands run from that tree too, alternating
with this one so both see the same machine load. Prints every run and the median of each, minus
the interpreter's start-up, and the ratio new/old.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DUMP = ROOT.parent / "shared" / "fixtures" / "msprobe" / "dump_fp32"
COMMANDS = {
    "import ascend_tui.readers": ["-c", "import ascend_tui.readers"],
    "ascend-tui --help": ["-m", "ascend_tui", "--help"],
    "ascend-tui check dump_fp32": ["-m", "ascend_tui", "check", str(DUMP)],
}


def timed(args: list[str], tree: Path) -> float:
    """Wall seconds of one run of the interpreter with `args`, importing the package from `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, check=False, timeout=300)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--against", type=Path, default=None, help="an older checkout to time the same commands in")
    args = ap.parse_args()
    if not DUMP.is_dir():
        sys.exit(f"{DUMP}: the fixture this benchmark opens is missing")
    trees = {"new": ROOT, **({"old": args.against.resolve()} if args.against else {})}
    bare = [timed(["-c", "pass"], ROOT) for _ in range(args.runs)]
    base = statistics.median(bare)
    print(f"python -c pass: {' '.join(f'{t:.3f}' for t in bare)} s (median {base:.3f})")
    for label, cmd in COMMANDS.items():
        runs: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(args.runs):
            for name, tree in trees.items():
                runs[name].append(timed(cmd, tree))
        med = {name: statistics.median(ts) - base for name, ts in runs.items()}
        for name, ts in runs.items():
            print(f"{label} [{name}]: {' '.join(f'{t:.3f}' for t in ts)} s; median - interpreter {med[name]:.3f} s")
        if "old" in med and med["old"] > 0:
            print(f"{label}: new/old {med['new'] / med['old']:.2f}")


if __name__ == "__main__":
    main()
