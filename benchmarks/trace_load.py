"""Reading a large trace_view.json: `json.load` of it vs our streaming reader vs `ascend-tui profile` end to end.

Run: `PYTHONPATH=. python benchmarks/trace_load.py [--mb 240] [--mb 2000] [--reps 1] [--dir /tmp/x] [--keep]`.
The trace replicates the events of the shared Level1 trace_view.json (AlexNet, 8 ranks, with stacks)
with timestamps moved on by one span per copy and flow ids made distinct, up to the size asked.
Each side runs in a fresh child process, alternating, so each one's peak RSS (`wait4`; Linux carries
the forking parent's peak over exec, and this parent stays under ~60 MB) is its own;
the readers are timed inside the child after its imports (wall and CPU: the machines these run on
are shared, so CPU time is the steadier of the two), the CLI end to end with its start-up (the same
command on the 129 KB fixture) subtracted.
Prints every run and the ratios against `json.load` measured in the same run. Goals (issue 21):
our reader's wall time at most 0.5x `json.load`'s, its peak RSS at most 1.0x the file size. The
generated files are deleted afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT.parent / "shared" / "fixtures" / "profiler" / "level1_2025-01" / "ASCEND_PROFILER_OUTPUT" / \
    "trace_view.json"

JSON_LOAD = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
with open(sys.argv[1], "rb") as fh:
    events = json.load(fh)
print(json.dumps({"s": time.perf_counter() - t0, "cpu": time.process_time() - c0, "events": len(events)}))
"""

OURS = """
import json, sys, time
from pathlib import Path
from ascend_tui.readers.profiler.trace import read_trace
t0, c0 = time.perf_counter(), time.process_time()
p = read_trace(Path(sys.argv[1]), fast=sys.argv[2] == "fast")
print(json.dumps({"s": time.perf_counter() - t0, "cpu": time.process_time() - c0, "events": p.extra["trace_events"],
                  "kernels": p.kernels.n, "host_ops": len(p.host_ops)}))
"""

PHASES = """
import json, sys, time
from pathlib import Path
from ascend_tui.progress import paused_gc
from ascend_tui.readers.parse.json_events import decoded_pieces
from ascend_tui.readers.profiler.trace import KEEP, profile_of_columns
from ascend_tui.readers.profiler.trace_columns import Columns, decode
cols, cut, add = Columns(KEEP), 0.0, 0.0
with paused_gc():
    pieces = decoded_pieces(Path(sys.argv[1]), decode)
    while True:
        c0 = time.process_time()
        events = next(pieces, None)
        c1 = time.process_time()
        cut += c1 - c0
        if events is None:
            break
        cols.add(events)
        del events
        add += time.process_time() - c1
c0 = time.process_time()
cols.finish()
profile_of_columns(cols)
print(json.dumps({"cut": cut, "add": add, "profile": time.process_time() - c0, "skipped": cols.skipped,
                  "events": cols.events}))
"""


def generate(path: Path, size: int, source: Path = FIXTURE) -> int:
    """Write a trace of about `size` bytes from `source`'s events; returns the number of copies."""
    events = json.loads(source.read_bytes())
    meta = [e for e in events if e.get("ph") == "M"]
    rest = [e for e in events if e.get("ph") != "M"]

    def ns(v: object) -> int:
        return int(Decimal(str(v)) * 1000)

    starts = [ns(e["ts"]) for e in rest if "ts" in e]
    span = max(starts) - min(starts) + 1000
    copies = 0
    with path.open("w", encoding="utf-8") as fh:
        fh.write("[" + ", ".join(json.dumps(e) for e in meta))
        while fh.tell() < size:
            parts = []
            for e in rest:
                e = dict(e)
                if "ts" in e:
                    v = ns(e["ts"]) + copies * span
                    e["ts"] = f"{v // 1000}.{v % 1000:03d}" if isinstance(e["ts"], str) else v / 1000
                if "id" in e:
                    e["id"] = e["id"] + copies * 10_000_000 if isinstance(e["id"], int) else f"{e['id']}_{copies}"
                parts.append(json.dumps(e))
            fh.write(", " + ", ".join(parts))
            copies += 1
        fh.write("]")
    return copies


def child(args: list[str]) -> tuple[float, int, str, float]:
    """Wall seconds, peak RSS (bytes), stdout and CPU seconds of one child process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, env=env)
        out = proc.stdout.read()  # type: ignore[union-attr]
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        proc.stdout.close()  # type: ignore[union-attr]
        if proc.returncode:
            err.seek(0)
            raise SystemExit(f"{args[:4]} failed: {err.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss * 1024, out.decode(), usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, action="append", help="trace size in MB (repeatable; default 240)")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--dir", type=Path, default=None, help="where the traces are written (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the generated traces")
    ap.add_argument("--no-cli", action="store_true", help="skip the end-to-end command")
    ap.add_argument("--json-fallback", action="store_true", help="also time our reader without msgspec")
    ap.add_argument("--phases", action="store_true",
                    help="also split our reader's CPU time: cut and decode (with freeing the last piece), columns, "
                         "profile")
    ap.add_argument("--json-load-limit", type=float, default=1000.0, metavar="MB",
                    help="skip json.load above this size (it holds ~5x the file in memory); the ratio is then "
                         "taken against the rate json.load had on the smaller sizes of this run, said as an estimate")
    args = ap.parse_args()
    py = sys.executable
    work = args.dir or Path(tempfile.mkdtemp(prefix="trace_load_"))
    work.mkdir(parents=True, exist_ok=True)
    cli = [py, "-m", "ascend_tui", "profile", "-q"]
    if not args.no_cli:
        runs = [child([*cli, str(FIXTURE)]) for _ in range(2)]
        startup, startup_cpu = min(r[0] for r in runs), min(r[3] for r in runs)
        print(f"CLI start-up (profile on the {FIXTURE.stat().st_size // 1000} KB fixture): {startup:.2f} s wall, "
              f"{startup_cpu:.2f} s CPU")
    print("wall and CPU seconds in the child after its imports (the machine is shared: CPU is the steadier measure)")
    rates: list[tuple[float, float]] = []  # json.load seconds per byte (wall, CPU) measured so far
    for mb in sorted(args.mb or [240.0]):
        path = work / f"trace_{int(mb)}mb.json"
        copies = generate(path, int(mb * 1e6))
        size = path.stat().st_size
        print(f"\n{path.name}: {size / 1e6:.0f} MB, {copies} copies of the fixture's events")
        try:
            for rep in range(args.reps):
                if mb <= args.json_load_limit or not rates:
                    _, rss_j, out, _ = child([py, "-c", JSON_LOAD, str(path)])
                    base = json.loads(out)
                    wall_j, cpu_j = base["s"], base["cpu"]
                    rates.append((wall_j / size, cpu_j / size))
                    print(f"  json.load          {wall_j:6.2f} s  cpu {cpu_j:6.2f} s   peak {rss_j / 1e6:6.0f} MB = "
                          f"{rss_j / size:.2f}x file")
                else:
                    wall_j, cpu_j = rates[-1][0] * size, rates[-1][1] * size
                    print(f"  json.load          not run (~5x the file in memory); ESTIMATE at this run's smaller-size "
                          f"rate: {wall_j:6.2f} s  cpu {cpu_j:6.2f} s")
                sides = [("ours (msgspec)", "fast")] + ([("ours (json)", "slow")] if args.json_fallback else [])
                for label, mode in sides:
                    _, rss, out, _ = child([py, "-c", OURS, str(path), mode])
                    r = json.loads(out)
                    wall, cpu = r["s"], r["cpu"]
                    print(f"  {label:18} {wall:6.2f} s  cpu {cpu:6.2f} s   peak {rss / 1e6:6.0f} MB = {rss / size:.2f}x "
                          f"file   {wall / wall_j:.2f}x json.load wall, {cpu / cpu_j:.2f}x CPU   ({r['events']} events, "
                          f"{r['kernels']} kernels, {r['host_ops']} host op names)")
                if args.phases:
                    r = json.loads(child([py, "-c", PHASES, str(path)])[2])
                    print(f"  ours, CPU by phase: cut+decode {r['cut']:.2f} s, columns {r['add']:.2f} s, profile "
                          f"{r['profile']:.2f} s; {r['skipped']} of {r['events']} events skipped (no table reads them)")
                if not args.no_cli:
                    wall, rss, _, cpu = child([*cli, str(path)])
                    wall, cpu = wall - startup, cpu - startup_cpu
                    print(f"  ascend-tui profile {wall:6.2f} s  cpu {cpu:6.2f} s   peak {rss / 1e6:6.0f} MB = "
                          f"{rss / size:.2f}x file   {wall / wall_j:.2f}x json.load wall, {cpu / cpu_j:.2f}x CPU "
                          f"(start-up subtracted)")
        finally:
            if not args.keep:
                path.unlink()
    if args.dir is None and not args.keep:
        work.rmdir()


if __name__ == "__main__":
    main()
