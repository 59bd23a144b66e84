"""Reading a large trace_view.json: `json.load` of it vs our streaming reader vs `ascend-tui profile` end to end.

Run: `PYTHONPATH=. python benchmarks/trace_load.py [--mb 240] [--mb 2000] [--reps 5] [--dir /tmp/x] [--keep]`.
The trace replicates the events of the shared Level1 trace_view.json (AlexNet, 8 ranks, with stacks)
with timestamps moved on by one span per copy and flow ids made distinct, up to the size asked.
Each side runs in a fresh child process, so each one's peak RSS (`wait4`; Linux carries the forking
parent's peak over exec, and this parent stays under ~60 MB) is its own; the readers are timed
inside the child after its imports (wall and CPU), the CLI end to end with its start-up (the same
command on the 129 KB fixture) subtracted.
The machines these run on are shared and their speed drifts within minutes, so `json.load` and our
reader run as pairs, one right after the other (which goes first alternates), `--reps` pairs per size;
every pair is printed with its ratio and the load average, then the median and the worst pair. Beside
the ratios, counts that do not drift: the events in the file, those our reader decoded into structs,
kept in its columns and skipped, and the bytes it handed to the decoder (a piece whose cut guess failed
is handed over twice). Goals (issue 21): our reader's wall time at most 0.5x `json.load`'s, its peak RSS
at most 1.0x the file size. The generated files are deleted afterwards unless --keep.
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
from ascend_tui.readers.profiler.trace import BLOCK, KEEP, profile_of_columns
from ascend_tui.readers.profiler.trace_columns import Columns, decode
cols, cut, add, handed, pieces_n = Columns(KEEP), 0.0, 0.0, 0, 0

def counted(piece):
    global handed, pieces_n
    handed += len(piece)
    pieces_n += 1
    return decode(piece)

with paused_gc():
    pieces = decoded_pieces(Path(sys.argv[1]), counted, block=BLOCK)
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
                  "events": cols.events, "x_rows": len(cols.x["ts"]), "flow_rows": len(cols.f["ts"]),
                  "handed": handed, "decodes": pieces_n}))
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


def _median(values: list[float]) -> float:
    v = sorted(values)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def _load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, action="append", help="trace size in MB (repeatable; default 240)")
    ap.add_argument("--reps", type=int, default=5, help="pairs of json.load and our reader per size (default 5)")
    ap.add_argument("--dir", type=Path, default=None, help="where the traces are written (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the generated traces")
    ap.add_argument("--reuse", action="store_true", help="read a trace kept in --dir by an earlier run (implies --keep)")
    ap.add_argument("--no-cli", action="store_true", help="skip the end-to-end command")
    ap.add_argument("--json-fallback", action="store_true", help="also time our reader without msgspec, once a size")
    ap.add_argument("--phases", action="store_true",
                    help="also split our reader's CPU time: cut and decode (with freeing the last piece), columns, "
                         "profile")
    ap.add_argument("--json-load-limit", type=float, default=1000.0, metavar="MB",
                    help="skip json.load above this size (it holds ~5x the file in memory); the ratio is then "
                         "taken against the median rate json.load had on the smaller sizes of this run, said as an "
                         "estimate")
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
    print("wall and CPU seconds in the child after its imports; pairs run back to back, alternating which goes first")
    rates: list[tuple[float, float]] = []  # json.load seconds per byte (wall, CPU) measured so far
    for mb in sorted(args.mb or [240.0]):
        path = work / f"trace_{int(mb)}mb.json"
        if args.reuse and path.exists():
            size = path.stat().st_size
            print(f"\n{path.name}: {size / 1e6:.0f} MB, generated by an earlier run")
        else:
            copies = generate(path, int(mb * 1e6))
            size = path.stat().st_size
            print(f"\n{path.name}: {size / 1e6:.0f} MB, {copies} copies of the fixture's events")
        counts = json.loads(child([py, "-c", PHASES, str(path)])[2])
        print(f"  deterministic: {counts['events']} events in the file, {counts['events']} decoded into structs, "
              f"{counts['x_rows']} complete events and {counts['flow_rows']} flow events kept in columns, "
              f"{counts['skipped']} skipped (no table reads them); {counts['handed'] / 1e6:.1f} MB handed to the "
              f"decoder in {counts['decodes']} pieces = {counts['handed'] / size:.3f}x the file")
        if args.phases:
            print(f"  ours, CPU by phase: cut+decode {counts['cut']:.2f} s, columns {counts['add']:.2f} s, profile "
                  f"{counts['profile']:.2f} s")
        measured = mb <= args.json_load_limit or not rates
        pairs: list[tuple[float, float, int]] = []  # (wall ratio, CPU ratio, our peak RSS)
        try:
            for rep in range(args.reps):
                def json_load() -> tuple[float, float, int]:
                    _, rss, out, _ = child([py, "-c", JSON_LOAD, str(path)])
                    base = json.loads(out)
                    return base["s"], base["cpu"], rss

                def ours() -> tuple[float, float, int, dict[str, int]]:
                    _, rss, out, _ = child([py, "-c", OURS, str(path), "fast"])
                    r = json.loads(out)
                    return r["s"], r["cpu"], rss, r

                if measured:
                    if rep % 2 == 0:
                        (wall_j, cpu_j, rss_j), (wall, cpu, rss, r) = json_load(), ours()
                    else:
                        (wall, cpu, rss, r), (wall_j, cpu_j, rss_j) = ours(), json_load()
                    rates.append((wall_j / size, cpu_j / size))
                    base = f"json.load {wall_j:6.2f} s cpu {cpu_j:6.2f} s peak {rss_j / size:.2f}x"
                else:
                    wall, cpu, rss, r = ours()
                    wall_j, cpu_j = (_median([w for w, _ in rates]) * size, _median([c for _, c in rates]) * size)
                    base = f"json.load ESTIMATE {wall_j:6.2f} s cpu {cpu_j:6.2f} s (not run: ~5x the file in memory)"
                pairs.append((wall / wall_j, cpu / cpu_j, rss))
                print(f"  pair {rep + 1}: {base} | ours {wall:6.2f} s cpu {cpu:6.2f} s peak {rss / 1e6:5.0f} MB = "
                      f"{rss / size:.2f}x file | {wall / wall_j:.2f}x json.load wall, {cpu / cpu_j:.2f}x CPU"
                      f"{'' if measured else ' (estimate)'}   [{_load()}; {r['kernels']} kernels, "
                      f"{r['host_ops']} host op names]")
            walls, cpus = [p[0] for p in pairs], [p[1] for p in pairs]
            met = sum(w <= 0.5 for w in walls)
            print(f"  ours / json.load over {len(pairs)} pairs: wall median {_median(walls):.2f}x, worst "
                  f"{max(walls):.2f}x (<= 0.5x in {met} of {len(pairs)}); CPU median {_median(cpus):.2f}x, worst "
                  f"{max(cpus):.2f}x; peak RSS worst {max(p[2] for p in pairs) / size:.2f}x the file"
                  f"{'' if measured else ' (against an estimated json.load)'}")
            if args.json_fallback:
                _, rss, out, _ = child([py, "-c", OURS, str(path), "slow"])
                r = json.loads(out)
                print(f"  ours (json)  {r['s']:6.2f} s  cpu {r['cpu']:6.2f} s   peak {rss / 1e6:6.0f} MB = "
                      f"{rss / size:.2f}x file")
            if not args.no_cli:
                wall, rss, _, cpu = child([*cli, str(path)])
                wall, cpu = wall - startup, cpu - startup_cpu
                print(f"  ascend-tui profile {wall:6.2f} s  cpu {cpu:6.2f} s   peak {rss / 1e6:6.0f} MB = "
                      f"{rss / size:.2f}x file (start-up subtracted)   [{_load()}]")
        finally:
            if not (args.keep or args.reuse):
                path.unlink()
    if args.dir is None and not (args.keep or args.reuse):
        work.rmdir()


if __name__ == "__main__":
    main()
