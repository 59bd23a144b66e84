"""Loading a million-row kernel_details.csv: ours (read + per-type summary) vs pandas read_csv + groupby, same run.

Run: python benchmarks/profile_load.py [--rows 1000000] [--reps 2] [--keep PATH] [--pandas-python PY] [--phases]
The file replicates the real rows of the Level1 fixture (46 columns, CRLF, a TAB after each start
time, `\"\"\"32,3,224,224\"\"\"` shapes, `N/A` cells), with start times moved on so every row is distinct.
Each side runs in a fresh child process, alternating, so each one's peak RSS is its own; prints
the median wall and CPU times (ours splits and decodes blocks on a few threads, so its CPU time
can exceed its wall time), the ratios, and peak memory against the file size. Goal: faster than pandas,
memory at most 2x the file size. pandas is needed here only, never by the package. The user-facing
`ascend-tui profile kernel_details.csv` is timed end to end too, its start-up (the same command on
the fixture's small CSV) subtracted, against the same pandas run; `--phases` adds its CPU time phase by phase
(imports, the read, the advice, the summary and its text) from one more run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT.parent / "shared" / "fixtures" / "profiler" / "level1_2025-01" / "ASCEND_PROFILER_OUTPUT" / \
    "kernel_details.csv"

OURS = """
import json, resource, sys, time
r0 = resource.getrusage(resource.RUSAGE_SELF)
before = r0.ru_maxrss
t0 = time.perf_counter()
from pathlib import Path
from typing import Any
from ascend_tui.readers.profiler.csv_tables import read_kernels
from ascend_tui.readers.parse.skipped import Skipped
from ascend_tui.checks.profile import summarize
table = read_kernels(Path(sys.argv[1]), skipped=Skipped(sys.argv[1]))  # as the folder reader reads: bad rows skipped
groups = summarize(table, "type")
dt = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
print(json.dumps({"s": dt, "cpu": cpu, "rows": table.n, "groups": len(groups), "top": groups[0].key,
                  "top_us": groups[0].total_us, "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "base_kb": before}))
"""

PANDAS = """
import json, resource, sys, time
r0 = resource.getrusage(resource.RUSAGE_SELF)
before = r0.ru_maxrss
t0 = time.perf_counter()
import pandas as pd
df = pd.read_csv(sys.argv[1])
g = df.groupby("Type")["Duration(us)"].agg(["count", "sum", "mean", "max"]).sort_values("sum", ascending=False)
dt = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
print(json.dumps({"s": dt, "cpu": cpu, "rows": len(df), "groups": len(g), "top": str(g.index[0]), "top_us": float(g["sum"].iloc[0]),
                  "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "base_kb": before}))
"""

# `ascend-tui profile -q FILE` in one process, the CPU seconds of each phase: where the command's time goes
PHASES = """
import io, json, sys, time
import ascend_tui.cli.profile as cli
import ascend_tui.offline.profile as advice
import ascend_tui.readers.profiler.csv_tables as tables
from ascend_tui.cli.main import main
marks = [("imports", time.process_time())]
def timed(mod, name, phase):
    f = getattr(mod, name)
    def g(*a, **k):
        marks.append(("before " + phase, time.process_time()))
        out = f(*a, **k)
        marks.append((phase, time.process_time()))
        return out
    setattr(mod, name, g)
timed(tables, "read_kernels", "read_kernels"); timed(advice, "advise_profile", "advice"); timed(cli, "print_summary", "summary + text")
sys.stdout = io.StringIO()
main(["profile", "-q", sys.argv[1]])
sys.stdout = sys.__stdout__
marks.append(("end", time.process_time()))
print(json.dumps([(k, b - a) for (_, a), (k, b) in zip(marks, marks[1:])]))
"""


def write_file(path: Path, rows: int) -> int:
    """A kernel_details.csv of `rows` rows made of the fixture's rows; returns its size in bytes."""
    raw = FIXTURE.read_bytes()
    lines = raw.split(b"\r\n")
    header, body = lines[0], [ln for ln in lines[1:] if ln]
    stamp = re.compile(rb"(\d{16})\.(\d{3})\t")
    with path.open("wb") as fh:
        fh.write(header + b"\r\n")
        done, shift = 0, 0
        while done < rows:
            chunk = []
            for line in body[: rows - done]:
                chunk.append(stamp.sub(lambda m: b"%d.%s\t" % (int(m.group(1)) + shift, m.group(2)), line, count=1))
            fh.write(b"\r\n".join(chunk) + b"\r\n")
            done += len(chunk)
            shift += 2000
    return path.stat().st_size


def run(code: str, path: Path, python: str = sys.executable) -> Any:
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "PATH": "/usr/bin:/bin"}
    out = subprocess.run([python, "-c", code, str(path)], capture_output=True, text=True, env=env)
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def command(args: list[str]) -> tuple[float, float, int]:
    """Wall and CPU seconds and peak RSS (bytes) of `ascend-tui ARGS` in a fresh process."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ascend_tui", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"ascend-tui {' '.join(args)} exited {proc.returncode}")
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--keep", type=Path, default=None, help="write the CSV here and keep it")
    ap.add_argument("--pandas-python", default=sys.executable,
                    help="an interpreter that has pandas (e.g. /work/venv-msprof/bin/python)")
    ap.add_argument("--phases", action="store_true", help="also the command's CPU time phase by phase (one run)")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    path = args.keep or Path(tmp.name) / "kernel_details.csv"
    size = write_file(path, args.rows)
    print(f"{path}: {args.rows:,} rows, {size / 2**20:.0f} MiB; load average {_load()}")
    ours, theirs, cli = [], [], []
    startup = min(command(["profile", "-q", str(FIXTURE)])[:2] for _ in range(2))
    for _ in range(args.reps):
        ours.append(run(OURS, path))
        theirs.append(run(PANDAS, path, args.pandas_python))
        cli.append(command(["profile", "-q", str(path)]))
    a, b = ours[-1], theirs[-1]
    assert a["rows"] == b["rows"] == args.rows, (a["rows"], b["rows"])
    assert a["top"] == b["top"] and abs(a["top_us"] - b["top_us"]) < 1e-3 * b["top_us"], (a, b)
    t_ours = statistics.median(r["s"] for r in ours)
    t_pd = statistics.median(r["s"] for r in theirs)
    cpu_ours = statistics.median(r["cpu"] for r in ours)
    cpu_pd = statistics.median(r["cpu"] for r in theirs)
    mem = max((r["rss_kb"] - r["base_kb"]) * 1024 for r in ours)
    mem_pd = max((r["rss_kb"] - r["base_kb"]) * 1024 for r in theirs)
    runs = lambda rs: ", ".join(f"{r['s']:.2f} (cpu {r['cpu']:.2f})" for r in rs)  # noqa: E731
    print(f"ours   (read_kernels + summarize by type): {t_ours:6.2f} s (cpu {cpu_ours:5.2f} s)   "
          f"peak +{mem / 2**20:5.0f} MiB = {mem / size:.2f}x the file   [runs: {runs(ours)}]")
    print(f"pandas (read_csv + groupby Type):          {t_pd:6.2f} s (cpu {cpu_pd:5.2f} s)   "
          f"peak +{mem_pd / 2**20:5.0f} MiB = {mem_pd / size:.2f}x the file   [runs: {runs(theirs)}]")
    print(f"ratio ours/pandas: {t_ours / t_pd:.2f} wall, {cpu_ours / cpu_pd:.2f} cpu (goal < 1); "
          f"memory goal: <= 2x the file")
    print(f"ascend-tui start-up (profile on the {FIXTURE.stat().st_size // 1000} KB fixture): {startup[0]:.2f} s wall, "
          f"{startup[1]:.2f} s cpu")
    for wall, cpu, rss in cli:
        print(f"ascend-tui profile kernel_details.csv: {wall - startup[0]:6.2f} s beyond start-up (cpu "
              f"{cpu - startup[1]:5.2f} s), peak {rss / 2**20:5.0f} MiB = {rss / size:.2f}x the file; "
              f"{(wall - startup[0]) / t_pd:.2f}x pandas wall, {(cpu - startup[1]) / cpu_pd:.2f}x cpu")
    if args.phases:
        phases = run(PHASES, path)
        print("ascend-tui profile, CPU a phase (one run, in process): "
              + ", ".join(f"{k} {v:.2f} s" for k, v in phases if v >= 0.005))
    print(f"load average at the end: {_load()} (the machine's other work slows both sides; compare within a run)")


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
