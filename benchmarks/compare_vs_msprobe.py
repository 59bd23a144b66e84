"""`ascend-tui compare` against `msprobe compare` on two ~1 GB tensor dumps of the same CNN, timed in one run.

Makes both dumps with real msprobe (`pip install mindstudio-probe==26.2.0`; one side has a
perturbed conv weight), runs `msprobe compare` and `ascend-tui compare` on them as subprocesses,
checks that every metric column agrees (to 1e-6), prints both times and the ratio, and deletes
the dumps. Run: `python benchmarks/compare_vs_msprobe.py [--batch 88] [--keep DIR]`.

`--case llm`: a random-weight Llama training step (forward and backward), `task: statistics`, in bfloat16
against float32, dumped by tests/data/llm_dumps/make_dumps.py (`--layers` sets the depth). There both
CSVs must agree on the statistics columns and on msprobe's `Result` and `Err_message` in every row, and
the times are also given with each tool's start-up (its `--help`) subtracted. Ours is timed twice: as run
from this checkout (where PYTHONDONTWRITEBYTECODE, if set, makes Python compile every module on every run) and
as `pip install` leaves it, its modules byte-compiled (msprobe's are, in its site-packages); the .pyc files
made for that are deleted afterwards.
"""

from __future__ import annotations

import argparse
import compileall
import csv
import glob
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METRICS = ["Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
           "Five Thousandths Err Ratio"]

DUMP_SCRIPT = r'''
import json, sys
import torch, torch.nn as nn, torch.nn.functional as F
from msprobe.pytorch import PrecisionDebugger, seed_all

out, variant, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfg = {"task": "tensor", "dump_path": out, "rank": [], "step": [], "level": "mix", "async_dump": False,
       "tensor": {"scope": [], "list": [], "data_mode": ["all"]}}
cfg_path = out + ".json"
json.dump(cfg, open(cfg_path, "w"))
seed_all(seed=1234, mode=True)
debugger = PrecisionDebugger(config_path=cfg_path)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.conv3 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 8 * 8, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.conv3(x))
        x = F.adaptive_avg_pool2d(x, 8)
        return self.fc(torch.flatten(x, 1))


torch.manual_seed(0)
model = CNN()
if variant == "perturb":
    with torch.no_grad():
        model.conv2.weight.add_(1e-2 * torch.randn_like(model.conv2.weight))
torch.manual_seed(1)
x = torch.randn(batch, 3, 64, 64)
model.eval()
debugger.start(model=model)
with torch.no_grad():
    model(x)
debugger.stop()
debugger.step()
'''


def run(cmd: list[str], **kw: object) -> tuple[float, float]:
    """(wall seconds, CPU seconds of it and its children) `cmd` took; its output is shown only if it fails.

    CPU time is printed too because the machine is shared: wall time depends on the neighbours' load.
    """
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    took = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd[:3])} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return took, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def dump_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*.pt"))


def rows(path: Path) -> dict[str, dict[str, str]]:
    with path.open(newline="") as fh:
        return {r["NPU Name"]: r for r in csv.DictReader(fh)}


def agree(theirs: dict[str, dict[str, str]], ours: dict[str, dict[str, str]]) -> tuple[int, float]:
    """(metric cells compared, largest absolute difference); exits on a missing row or differing marker."""
    if list(theirs) != list(ours):
        sys.exit("the two CSVs list different rows")
    n, worst = 0, 0.0
    for name, a in theirs.items():
        b = ours[name]
        for col in METRICS:
            try:
                want = float(a[col])
            except ValueError:
                if a[col].strip() != b[col].strip():
                    sys.exit(f"{name} {col}: msprobe {a[col]!r}, ours {b[col]!r}")
                continue
            worst = max(worst, abs(float(b[col]) - want))
            n += 1
    return n, worst


STATS = ["Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr",
         "NormRelativeErr"]


def _same(a: str, b: str) -> bool:
    """Two CSV cells agree: equal text, or numbers (percentages too) within 1e-6 relative."""
    a, b = a.strip(), b.strip()
    if a == b:
        return True
    try:
        x, y = float(a.rstrip("%")), float(b.rstrip("%"))
    except ValueError:
        return False
    return abs(x - y) <= 1e-6 * max(1.0, abs(x))


def run_compiled(cmd: list[str], **kw: object) -> tuple[float, float]:
    """`run(cmd)` with our package byte-compiled first, as an installed package is; the .pyc made here are removed."""
    pkg = ROOT / "ascend_tui"
    made = [d / "__pycache__" for d in [pkg, *pkg.rglob("*")] if d.is_dir() and d.name != "__pycache__"
            and any(d.glob("*.py")) and not (d / "__pycache__").exists()]
    compileall.compile_dir(pkg, quiet=1)  # writes even under PYTHONDONTWRITEBYTECODE, which only stops imports
    try:
        return run(cmd, **kw)
    finally:
        for d in made:
            shutil.rmtree(d, ignore_errors=True)


def both_compares(msprobe: str, t_rank: Path, g_rank: Path, work: Path, env: dict[str, str]
                  ) -> tuple[float, float, float, float, Path, Path]:
    """`msprobe compare` and `ascend-tui compare --csv` of one dump pair: their wall and CPU times and both CSVs."""
    out = work / "msprobe_out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    t_ms, cpu_ms = run([msprobe, "compare", "-tp", str(t_rank / "dump.json"), "-gp", str(g_rank / "dump.json"),
                        "-o", str(out)], cwd=work)
    ours_csv = work / "ours.csv"
    t_ours, cpu_ours = run([sys.executable, "-m", "ascend_tui", "compare", str(t_rank), str(g_rank), "--csv",
                            str(ours_csv), "-q"], cwd=work, env=env)
    theirs_csv = sorted(out.glob("compare_result*.csv"))
    if not theirs_csv:
        sys.exit(f"msprobe wrote no CSV in {out}: {sorted(p.name for p in out.iterdir())}")
    return t_ms, cpu_ms, t_ours, cpu_ours, theirs_csv[-1], ours_csv


def llm_case(args: argparse.Namespace, work: Path, msprobe: str, env: dict[str, str]) -> None:
    """bf16 vs fp32 statistics dumps of a Llama training step: msprobe compare against ours, rules and times."""
    make = ROOT / "tests" / "data" / "llm_dumps" / "make_dumps.py"
    denv = {**env, "LLM_DUMP_LAYERS": str(args.layers), "LLM_DUMP_HIDDEN": str(args.hidden)}
    if not (work / "bf16").exists():
        run([sys.executable, str(make), str(work), "bf16", "fp32"], cwd=work, env=denv)
    t_rank = Path(glob.glob(str(work / "bf16" / "step0" / "*"))[0])
    g_rank = Path(glob.glob(str(work / "fp32" / "step0" / "*"))[0])
    print(f"dumps: Llama {args.layers} layers, hidden {args.hidden}; dump.json "
          f"{(t_rank / 'dump.json').stat().st_size / 2**20:.1f} MiB each")
    load0 = " ".join(f"{x:.1f}" for x in os.getloadavg())
    start_ms, scpu_ms = run([msprobe, "-h"], cwd=work)
    start_ours, scpu_ours = run([sys.executable, "-m", "ascend_tui", "compare", "-h"], cwd=work, env=env)
    t_ms, cpu_ms, t_ours, cpu_ours, theirs_csv, ours_csv = both_compares(msprobe, t_rank, g_rank, work, env)
    t_inst, cpu_inst = run_compiled([sys.executable, "-m", "ascend_tui", "compare", str(t_rank), str(g_rank),
                                     "--csv", str(ours_csv), "-q"], cwd=work, env=env)
    theirs, ours = rows(theirs_csv), rows(ours_csv)
    if list(theirs) != list(ours):
        sys.exit(f"the two CSVs list different rows ({len(theirs)} vs {len(ours)})")
    cells = 0
    for name, a in theirs.items():
        for col in STATS + ["Result", "Err_message"]:
            if not _same(a[col], ours[name][col]):
                sys.exit(f"{name} {col}: msprobe {a[col]!r}, ours {ours[name][col]!r}")
            cells += 1
    errors = sum(r["Result"] == "error" for r in theirs.values())
    verdict_errors = sum(r["Verdict"] == "error" for r in ours.values())
    print(f"load average before: {load0}")
    print(f"msprobe compare:    {t_ms:7.2f} s wall, {cpu_ms:7.2f} s CPU (its -h: {start_ms:.2f} s wall, "
          f"{scpu_ms:.2f} s CPU)")
    print(f"ascend-tui compare: {t_ours:7.2f} s wall, {cpu_ours:7.2f} s CPU (its -h: {start_ours:.2f} s wall, "
          f"{scpu_ours:.2f} s CPU)")
    print(f"ratio: x{t_ms / t_ours:.1f} by wall time, x{cpu_ms / cpu_ours:.1f} by CPU time end to end; with start-up "
          f"subtracted x{(t_ms - start_ms) / max(t_ours - start_ours, 1e-3):.1f} wall, "
          f"x{(cpu_ms - scpu_ms) / max(cpu_ours - scpu_ours, 1e-3):.1f} CPU; {cells} cells agree "
          f"(statistics, Result, Err_message) over {len(theirs)} rows")
    print(f"ascend-tui compare, byte-compiled as installed: {t_inst:7.2f} s wall, {cpu_inst:7.2f} s CPU; ratio "
          f"x{t_ms / t_inst:.1f} by wall time, x{cpu_ms / cpu_inst:.1f} by CPU time end to end "
          f"(PYTHONDONTWRITEBYTECODE {'set' if env.get('PYTHONDONTWRITEBYTECODE') else 'not set'} here)")
    print(f"msprobe's Result: {errors} rows error (dtype inconsistent); our Verdict: {verdict_errors} rows error")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--case", choices=("cnn", "llm"), default="cnn", help="which dumps (default: the CNN)")
    ap.add_argument("--batch", type=int, default=88, help="CNN batch size (88 makes about 1 GB per dump)")
    ap.add_argument("--layers", type=int, default=8, help="Llama layers of the llm case")
    ap.add_argument("--hidden", type=int, default=128, help="Llama hidden size of the llm case")
    ap.add_argument("--keep", metavar="DIR", help="make the dumps in DIR and keep them")
    args = ap.parse_args()
    bindir = Path(sys.executable).parent
    msprobe = shutil.which("msprobe", path=str(bindir)) or shutil.which("msprobe")
    if msprobe is None:
        sys.exit("msprobe not found: pip install mindstudio-probe==26.2.0")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="cmp_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        if args.case == "llm":
            llm_case(args, work, msprobe, env)
            return
        script = work / "dump_cnn.py"
        script.write_text(DUMP_SCRIPT)
        for name, variant in (("golden", "fp32"), ("target", "perturb")):
            if not (work / name).exists():
                run([sys.executable, str(script), str(work / name), variant, str(args.batch)], cwd=work)
        t_rank = Path(glob.glob(str(work / "target" / "step0" / "*"))[0])
        g_rank = Path(glob.glob(str(work / "golden" / "step0" / "*"))[0])
        size = dump_size(t_rank) + dump_size(g_rank)
        print(f"dumps: {size / 2**30:.2f} GiB in all ({dump_size(t_rank) / 2**30:.2f} GiB target)")
        load0 = " ".join(f"{x:.1f}" for x in os.getloadavg())
        t_ms, cpu_ms, t_ours, cpu_ours, theirs_csv, ours_csv = both_compares(msprobe, t_rank, g_rank, work, env)
        n, worst = agree(rows(theirs_csv), rows(ours_csv))
        print(f"load average before: {load0}")
        print(f"msprobe compare:    {t_ms:7.2f} s wall, {cpu_ms:7.2f} s CPU  ({size / 2**30 / t_ms:.2f} GiB/s)")
        print(f"ascend-tui compare: {t_ours:7.2f} s wall, {cpu_ours:7.2f} s CPU  ({size / 2**30 / t_ours:.2f} GiB/s)")
        print(f"ratio: ascend-tui is x{t_ms / t_ours:.1f} faster by wall time, x{cpu_ms / cpu_ours:.1f} by CPU time; "
              f"{n} metric cells agree, largest difference {worst:.2e}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
