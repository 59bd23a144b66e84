"""A cluster whose slow rank runs a kernel type the other ranks never run: its report is valid JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ascend_tui.checks.communication import slow_rank_kernels
from ascend_tui.cli.main import main


def test_a_kernel_type_only_the_slow_rank_runs_has_no_ratio_and_says_so() -> None:
    types = {0: [("MatMul", 4, 400.0)], 1: [("MatMul", 4, 410.0)], 2: [("MatMul", 4, 400.0), ("hcom_send_", 2, 900.0)]}
    named, total = slow_rank_kernels(2, types, {0: 1, 1: 1, 2: 1})
    send = next(r for r in named if r["type"] == "hcom_send_")
    assert send["ratio"] is None and send["median_us"] == 0.0 and send["excess_us"] == 900.0
    assert total == 900.0


def test_triage_json_of_the_real_profiler_folder_is_valid_json(fixtures: Path, tmp_path: Path) -> None:
    # The folder holds three profiler runs that all say rank 0, and the slow one's excess is in
    # hcom_batchSendRecv_, which the other two never run: the ratio to their median was inf, and the
    # report's JSON writer (allow_nan=False) raised a traceback instead of writing it.
    out = tmp_path / "r.json"
    code = main(["triage", str(fixtures / "profiler"), "-q", "--json", str(out)])
    assert code in (0, 1)
    report = json.loads(out.read_text())
    kernels = report["profile"]["cluster"]["slow_kernels"]
    assert any(k["type"] == "hcom_batchSendRecv_" and k["ratio"] is None for k in kernels), kernels
    assert all(k["ratio"] is None or math.isfinite(k["ratio"]) for k in kernels)
    slow = next(f for f in report["findings"] if f["kind"] == "slow_rank")
    assert "none on the median rank" in slow["message"] and "inf" not in slow["message"]
