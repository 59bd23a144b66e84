"""A 64-rank cluster made from the real level2 profile (a planted slow rank and slow link), read three ways.

Run: python benchmarks/cluster_scale.py [--ranks 64] [--reps 2] [--keep DIR]
1. `ascend-tui profile DIR --json` with the per-rank reads on local processes (the default);
2. the same with `--scheduler` on a dask.distributed LocalCluster started by this script (its start-up
   timed apart: a real job reuses a running scheduler);
3. `msprof-analyze cluster -d DIR -m all`, the baseline, in the same run.
Ours runs through a wrapper that reports the parent process's own peak RSS (pool workers are apart);
`python -m ascend_tui --version`, timed in the same run, is subtracted from our wall times. Every
run's numbers are printed, then whether each of ours named the planted slow rank, its kernels and link.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MSPROF = Path("/work/venv-msprof/bin/msprof-analyze")

# The command ends its process itself (`cli.main.entry`: `os._exit` once the exit handlers have run), so
# the result is printed by an exit handler, not after `run_module` returns (it never does).
WRAP = """
import atexit, resource, runpy, sys, time
t0 = time.perf_counter()
sys.argv = ["ascend-tui", *sys.argv[1:]]
atexit.register(lambda: print("RESULT", time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                              resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr, flush=True))
runpy.run_module("ascend_tui", run_name="__main__", alter_sys=True)
"""


def _ours(args: list[str]) -> tuple[float, float, int, int]:
    """(wall s, in-process s, parent peak RSS KiB, largest child peak RSS KiB) of one wrapped CLI run."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", WRAP, *args], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    wall = time.perf_counter() - t0
    line = next((ln for ln in done.stderr.splitlines() if ln.startswith("RESULT")), None)
    if line is None:
        raise SystemExit(f"ascend-tui failed: {done.stderr[-2000:]}")
    _, inner, rss, child = line.split()
    return wall, float(inner), int(rss), int(child)


def _check(report: Path, slow_rank: int, slow_link: tuple[int, int]) -> str:
    found = {f["kind"]: f for f in json.loads(report.read_text())["findings"] if f["severity"] != "info"}
    s = found.get("slow_rank", {}).get("metrics", {})
    link = found.get("slow_link", {}).get("metrics", {})
    wait = found.get("comm_wait", {}).get("metrics", {})
    return (f"slow rank {s.get('rank')} (planted {slow_rank}), kernels "
            f"{[k['type'] for k in s.get('kernels', [])]}, slow link {link.get('src')}->{link.get('dst')} "
            f"(planted {slow_link[0]}->{slow_link[1]}), {len(wait.get('waiting_ranks', []))} ranks named as waiting "
            f"for rank {wait.get('held_by')}")


def main() -> int:
    from tests.synthetic_cluster import make_cluster

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2, help="dask LocalCluster worker processes")
    ap.add_argument("--keep", metavar="DIR", help="make the cluster here and leave it")
    args = ap.parse_args()
    slow_rank, slow_link = args.ranks // 2 + 1, (5, 6)
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="cluster_scale_"))
    root = tmp / "job"
    if not root.exists():
        make_cluster(root, args.ranks, slow_rank=slow_rank, slow_link=slow_link)
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    print(f"{args.ranks} ranks, {size / 2**20:.1f} MiB in {root}")
    try:
        from dask.distributed import LocalCluster

        t0 = time.perf_counter()
        lc = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None)
        print(f"dask LocalCluster ({args.workers} worker processes) started in {time.perf_counter() - t0:.2f} s")
        for rep in range(args.reps):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "ascend_tui", "--version"], capture_output=True, cwd=ROOT,
                           env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
            start = time.perf_counter() - t0
            for how, extra in (("local processes", []), ("dask LocalCluster", ["--scheduler", lc.scheduler_address])):
                report = tmp / f"r{rep}.json"
                wall, inner, rss, child = _ours(["profile", str(root), "--json", str(report), "-q", *extra])
                print(f"rep {rep} ours, {how}: {wall - start:.2f} s (wall {wall:.2f} - start-up {start:.2f}), "
                      f"parent peak RSS {rss / 1024:.0f} MiB, largest child {child / 1024:.0f} MiB; "
                      + _check(report, slow_rank, slow_link))
            if MSPROF.exists():
                out = tmp / f"msprof{rep}"
                t0 = time.perf_counter()
                done = subprocess.run([str(MSPROF), "cluster", "-d", str(root), "-m", "all", "-o", str(out)],
                                      capture_output=True, text=True)
                ms = time.perf_counter() - t0
                made = sorted(p.name for p in out.rglob("*") if p.is_file())[:6] if out.exists() else []
                print(f"rep {rep} msprof-analyze cluster -m all: {ms:.2f} s (rc {done.returncode}), wrote {made}")
                shutil.rmtree(out, ignore_errors=True)
        lc.close()
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
