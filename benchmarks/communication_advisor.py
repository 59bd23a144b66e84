"""The level2 fixture's communication findings, ours beside msprof-analyze's advisor, both timed in the same run.

Run: python benchmarks/communication_advisor.py [--reps 3]
Each rep runs `msprof-analyze advisor all -d <copy> -l en` and `ascend-tui profile <copy> --json`,
alternating, as child processes timed end to end; ours has the start-up of `python -m ascend_tui
--version` subtracted, measured in the same run (the advisor's start-up is not subtracted: it has no
no-op command). Prints every run's seconds, then what each tool says about small packets (the
advisor's "Packet Analysis" line and our `small_packets` finding) and our wait/transit split, which
the advisor does not give for one rank. The advisor counts the `Total Op Info` aggregate rows as ops,
so its ratio is over 10 ops and ours over the 8 real ones; the small ops and their time must agree.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEVEL2 = ROOT.parent / "shared" / "fixtures" / "profiler" / "level2_2025-11"
ADVISOR = Path("/work/venv-msprof/bin/msprof-analyze")
PACKET = re.compile(r"In the SDMA communication, ([\d.]+)% of the communication data volume is less than ([\d.]+) MB, "
                    r"and the total time is ([\d.]+) ms")


def _timed(cmd: list[str], **kw: object) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    return time.perf_counter() - t0, done


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    with tempfile.TemporaryDirectory(prefix="comm_adv_") as tmp:
        work = Path(tmp) / "level2_2025-11"
        shutil.copytree(LEVEL2, work)
        for p in work.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        ours_s, adv_s, start_s = [], [], []
        adv_text, report = "", {}
        for rep in range(args.reps):
            s, _ = _timed([sys.executable, "-m", "ascend_tui", "--version"], env=env, cwd=ROOT)
            start_s.append(s)
            out = Path(tmp) / f"ours{rep}.json"
            s, done = _timed([sys.executable, "-m", "ascend_tui", "profile", str(work), "--json", str(out), "-q"],
                             env=env, cwd=ROOT)
            ours_s.append(s)
            report = json.loads(out.read_text())
            s, done = _timed([str(ADVISOR), "advisor", "all", "-d", str(work), "-o", str(Path(tmp) / f"adv{rep}"),
                              "-l", "en"], cwd=tmp)
            adv_s.append(s)
            adv_text = done.stdout + done.stderr
            print(f"rep {rep}: ours {ours_s[-1]:.2f} s (start-up {start_s[-1]:.2f} s), "
                  f"msprof-analyze advisor {adv_s[-1]:.2f} s (rc {done.returncode})")
        net = [o - s for o, s in zip(ours_s, start_s)]
        print("ours minus start-up, every run:", ", ".join(f"{x:.2f}" for x in net), "s")
        print("advisor, every run:", ", ".join(f"{x:.2f}" for x in adv_s), "s")
        print("ratio advisor / ours (per run):", ", ".join(f"{a / o:.1f}x" for a, o in zip(adv_s, net)))
        flat = " ".join(adv_text.split())
        m = PACKET.search(flat.replace("| |", " "))
        print("\nmsprof-analyze advisor, packet analysis:",
              f"SDMA {m[1]}% of ops under {m[2]} MB, {m[3]} ms" if m else "(not found in its output)")
        findings = {f["kind"]: f for f in report.get("findings", [])}
        small = findings.get("small_packets")
        if small:
            mt = small["metrics"]
            print(f"ascend-tui small_packets: {mt['transport']} {mt['small']} of {mt['count']} ops "
                  f"({mt['ratio']:.2%}) under {mt['min_mb']} MB, {mt['small_ms']:.4f} ms: {', '.join(mt['ops'])}")
        else:
            print("ascend-tui small_packets: (none)")
        wait = findings.get("comm_wait")
        print("ascend-tui comm_wait:", wait["message"] if wait else "(none)")
        exposed = findings.get("exposed_communication")
        print("ascend-tui exposed_communication:", exposed["message"] if exposed else "(none)")
        agree = bool(m and small and abs(float(m[3]) - small["metrics"]["small_ms"]) < 1e-3)
        print("small-packet time agrees:", agree)
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
