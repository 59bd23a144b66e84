"""`triage` and the CI gate: one story from a model file, `--fail-on`, and `--baseline` failing only on what is new."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import SAMPLES


from ascend_tui import cli  # noqa: E402

MODEL = """
import torch
from torch import nn

class Net(nn.Module):
    def forward(self, x):
        y = torch.log(x)            # x has negatives: NaN here
        {extra}
        return y

def build():
    torch.manual_seed(0)
    return Net(), (torch.linspace(-1.0, 1.0, 16),)
"""


def model(tmp_path: Path, name: str, extra: str = "") -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(MODEL.replace("{extra}", extra or "pass"))
    return path


def test_triage_of_the_demo_names_each_cause_once_in_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    code = cli.main(["triage", str(SAMPLES / "demo.py"), "--device", "cpu", "--dtype", "float16", "-q",
                     "--json", str(out)])
    assert code == 1
    story = json.loads(out.read_text())["story"]
    assert [(c["check"], c["kind"]) for c in story] == [("overflow", "inf"), ("memory", "out_of_bounds"),
                                                       ("memory", "leak")]
    assert story[0]["checks"] == ["overflow", "precision"], "the precision lost after the Inf is the overflow's"
    assert "overflow-explains-precision" in story[0]["rules"]
    ids = {f["id"] for f in json.loads(out.read_text())["findings"]}
    assert all(set(c["explains"]) <= ids for c in story)
    printed = capsys.readouterr().out
    assert printed.startswith("story: 3 causes") and "2. ERROR memory: out of bounds at `embed`" in printed


def test_baseline_passes_an_unchanged_run_and_fails_on_one_new_error(tmp_path: Path) -> None:
    before, after = model(tmp_path, "before"), model(tmp_path, "after", "y = y + torch.exp(x * 200.0)")
    base = tmp_path / "base.json"
    assert cli.main(["check", str(before), "--device", "cpu", "-q", "--json", str(base)]) == 1, "NaN from log"
    assert cli.main(["check", str(before), "--device", "cpu", "-q", "--baseline", str(base)]) == 0
    assert cli.main(["check", str(after), "--device", "cpu", "-q", "--baseline", str(base)]) == 1, "a new Inf"


def test_fail_on_warning_and_bad_baselines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = tmp_path / "clean.py"
    clean.write_text("import torch\nfrom torch import nn\n\ndef build():\n"
                     "    return nn.Sequential(nn.Linear(4, 4)), (torch.randn(2, 4) * 3e4,)\n")
    assert cli.main(["check", str(clean), "--device", "cpu", "--dtype", "float16", "-q"]) in (0, 1)
    assert cli.main(["check", str(clean), "--device", "cpu", "--dtype", "float16", "-q", "--fail-on", "warning"]) == 1
    junk = tmp_path / "junk.json"
    junk.write_bytes(b"\\x00\\x01 not json")
    assert cli.main(["check", str(clean), "--device", "cpu", "-q", "--baseline", str(junk)]) == 2
    assert "junk.json" in capsys.readouterr().err


def _slowed_profile(src: Path, dst: Path, factor: float) -> Path:
    """A copy of a real profiler folder whose kernels all take `factor` times as long."""
    import csv
    import io
    import shutil

    shutil.copytree(src, dst)
    path = dst / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    raw = path.read_bytes().decode("utf-8")
    rows = list(csv.reader(io.StringIO(raw, newline="")))
    col = next(i for i, h in enumerate(rows[0]) if h.strip().startswith("Duration"))
    for row in rows[1:]:
        if len(row) > col and row[col].strip() not in ("", "N/A"):
            row[col] = f"{float(row[col]) * factor:.3f}"
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\r\n").writerows(rows)
    path.write_bytes(out.getvalue().encode("utf-8"))
    return dst


def test_profile_baseline_fails_on_a_ten_percent_slowdown_only(fixtures: Path, tmp_path: Path) -> None:
    src = fixtures / "profiler" / "level1_2025-01"
    old = _slowed_profile(src, tmp_path / "old_ascend_pt", 1.0)
    same = _slowed_profile(src, tmp_path / "same_ascend_pt", 1.0)
    slow = _slowed_profile(src, tmp_path / "slow_ascend_pt", 1.10)
    out = tmp_path / "r.json"
    assert cli.main(["check", str(same), "-q", "--baseline", str(old), "--fail-on", "error"]) == 0
    assert cli.main(["check", str(slow), "-q", "--baseline", str(old), "--json", str(out)]) == 1
    regressions = [f for f in json.loads(out.read_text())["findings"] if f["kind"] == "regression"]
    assert regressions and regressions[0]["severity"] == "error"
    assert cli.main(["check", str(slow), "-q", "--baseline", str(old), "--max-slowdown", "15%"]) == 0
    assert cli.main(["check", str(slow), "-q", "--baseline", str(old), "--max-slowdown", "fast"]) == 2


def test_migration_story_names_its_three_planted_causes_in_order(tmp_path: Path) -> None:
    """The unscaled input's overflow (with the precision it breaks), the lossy centring, the layout conversions."""
    out = tmp_path / "r.json"
    code = cli.main(["triage", str(SAMPLES / "migration_story.py"), "--device", "cpu", "--dtype", "float16", "-q",
                     "--json", str(out)])
    assert code == 1
    story = json.loads(out.read_text())["story"]
    assert [(c["check"], c["kind"]) for c in story] == [("overflow", "inf"), ("precision", "precision-loss"),
                                                       ("profile", "layout_conversion")]
    overflow, precision, layout = story
    assert overflow["node"] == "input:1" and overflow["checks"] == ["overflow", "precision"]
    assert precision["node"] == "drift/sub.0" and precision["checks"] == ["precision"]
    assert layout["module"].startswith("blocks.") and layout["severity"] == "warning"
