"""A cluster made from the real level2 profile: N copies as ranks, one rank's kernels slowed, one link slowed.

Each rank is the real torch_npu folder with its files edited the way a slow rank shows in real data:
the slow rank computes `factor` times longer (its step's Computing, and in kernel_details.csv — an
excerpt of the step's kernels — its `slow_types` kernels), and its collectives wait for nobody;
every other rank's Communication (and the wait of its largest collective) grows by the same amount,
because it waits for the slow one. The matrix becomes
a ring of HCCS links between global ranks, one of them `slow_link`, at a quarter of the others' speed.
Used by the tests and by benchmarks/cluster_scale.py.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from tests.conftest import FIXTURES

LEVEL2 = FIXTURES / "profiler" / "level2_2025-11"
OUT = "ASCEND_PROFILER_OUTPUT"
RING_MB, RING_GBS = 125.82912, 19.0


def _scale_kernels(path: Path, types: tuple[str, ...], factor: float) -> float:
    """Multiply the durations of `types` kernels in kernel_details.csv; the µs added."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    head = rows[0]
    t, d = head.index("Type"), head.index("Duration(us)")
    added = 0.0
    for row in rows[1:]:
        if row[t] in types:
            old = float(row[d])
            row[d] = f"{old * factor:.3f}"
            added += old * (factor - 1)
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)
    return added


def _edit_steps(path: Path, computing: float, communication: float) -> None:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    head = rows[0]
    for row in rows[1:]:
        for col, add in (("Computing", computing), ("Communication(Not Overlapped)", communication),
                         ("Communication", communication),
                         ("Communication(Not Overlapped and Exclude Receive)", communication)):
            i = head.index(col)
            row[i] = repr(float(row[i]) + add)
        i = head.index("Stage")
        row[i] = repr(float(row[i]) + computing + communication)
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)


def _edit_communication(path: Path, slow: bool, wait_ms: float) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    for step in data.values():
        for group in step.values():
            for name, op in group.items():
                info = op["Communication Time Info"]
                if slow:  # it arrives last: nothing to wait for
                    info["Idle Time(ms)"] += info["Wait Time(ms)"]
                    info["Wait Time(ms)"] = info["Synchronization Time(ms)"] = 0.0
                    info["Wait Time Ratio"] = info["Synchronization Time Ratio"] = 0.0
                elif name.startswith("hcom_allReduce__170"):
                    info["Wait Time(ms)"] += wait_ms
                    info["Elapse Time(ms)"] += wait_ms
    path.write_text(json.dumps(data), encoding="utf-8")


def _ring_matrix(path: Path, rank: int, n: int, slow_link: tuple[int, int] | None) -> None:
    dst = (rank + 1) % n
    gbs = RING_GBS / 4 if slow_link == (rank, dst) else RING_GBS + 0.1 * rank
    links = {f"{rank}-{rank}": {"Transport Type": "LOCAL", "Transit Size(MB)": RING_MB, "Transit Time(ms)": 0.4,
                                "Bandwidth(GB/s)": RING_MB / 1024 / 0.0004},
             f"{rank}-{dst}": {"Transport Type": "HCCS", "Transit Size(MB)": RING_MB,
                               "Transit Time(ms)": RING_MB / 1024 / gbs * 1000, "Bandwidth(GB/s)": gbs}}
    data = json.loads(path.read_text(encoding="utf-8"))
    data["step13"]["collective"] = {"allreduce-total@5862276093215481612": links}
    path.write_text(json.dumps(data), encoding="utf-8")


def make_cluster(root: Path, n: int = 8, *, slow_rank: int | None = 3, factor: float = 2.5,
                 slow_types: tuple[str, ...] = ("FlashAttentionScore", "MatMulV3"),
                 slow_link: tuple[int, int] | None = None) -> Path:
    """`n` rank folders under `root` (rank<r>_ascend_pt), with the planted slow rank and slow link."""
    root.mkdir(parents=True, exist_ok=True)
    template = root / ".template"
    shutil.copytree(LEVEL2, template, ignore=shutil.ignore_patterns("*mem*.csv", "memory_record.csv"))
    for p in template.rglob("*"):
        p.chmod(0o644 if p.is_file() else 0o755)
    template.chmod(0o755)
    slow_dir = root / ".slow"
    shutil.copytree(template, slow_dir)
    if slow_rank is not None:
        _scale_kernels(slow_dir / OUT / "kernel_details.csv", slow_types, factor)
    with (template / OUT / "step_trace_time.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    added = (factor - 1) * float(rows[0]["Computing"]) if slow_rank is not None else 0.0
    for r in range(n):
        folder = root / f"rank{r}_ascend_pt"
        shutil.copytree(slow_dir if r == slow_rank else template, folder)
        info = folder / "profiler_info_0.json"
        data = json.loads(info.read_text(encoding="utf-8"))
        data["rank_id"] = r
        info.unlink()
        (folder / f"profiler_info_{r}.json").write_text(json.dumps(data), encoding="utf-8")
        out = folder / OUT
        is_slow = r == slow_rank
        if slow_rank is not None:
            _edit_steps(out / "step_trace_time.csv", added if is_slow else 0.0, 0.0 if is_slow else added)
            _edit_communication(out / "communication.json", is_slow, added / 1000)
        _ring_matrix(out / "communication_matrix.json", r, n, slow_link)
    shutil.rmtree(template)
    shutil.rmtree(slow_dir)
    return root
