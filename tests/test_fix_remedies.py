"""The upcast remedy as a diff at its call sites, and the layout remedy that drops a permute+contiguous pair."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from ascend_tui.cli.main import main

pytestmark = pytest.mark.live
import torch  # noqa: E402 - a missing torch fails, never skips

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
DATA = ROOT / "tests" / "data" / "fix"


def fix(tmp_path: Path, target: Path | str, *flags: str) -> tuple[int, dict[str, Any], str, Path]:
    out, patch = tmp_path / "fix.json", tmp_path / "fix.patch"
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(["fix", str(target), "-q", "--json", str(out), "--patch", str(patch), *flags])
    report = json.loads(out.read_text()) if out.exists() else {}
    return code, report.get("fix", {}), buf.getvalue(), patch


def check(model: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ascend_tui", "check", str(model), "-q", *flags], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def patch_p1(patch: Path, cwd: Path) -> None:
    if shutil.which("patch") is None:
        pytest.fail("the `patch` program is needed to test that the diff applies", pytrace=False)
    subprocess.run(["patch", "-p1", "-i", str(patch)], cwd=cwd, check=True, capture_output=True)


def test_upcast_is_a_diff_at_the_call_sites_and_the_patched_model_passes_the_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flags = ("--dtype", "float16", "--checks", "overflow")
    work = tmp_path / "work"
    (work / "models").mkdir(parents=True)
    model = Path(shutil.copy(DATA / "sequence_score.py", work / "models" / "sequence_score.py"))
    monkeypatch.chdir(work)
    code, section, text, patch = fix(tmp_path, Path("models") / "sequence_score.py", *flags)
    assert code == 0 and section["verified"], text
    # the sum's result (-8.7e4) does not fit float16: upcasting the accumulations of `score` is enough, and is
    # chosen over keeping the whole module in float32
    assert [(r["kind"], r["module"]) for r in section["chosen"]] == [("upcast", "score")]
    diff = section["patch"]["diff"]
    assert "-        logp = logits.log_softmax(-1)\n" in diff
    # the log-softmax fits float16 again, so it is cast back; the sum stays float32 (as the remedy left it)
    assert "+        logp = logits.float().log_softmax(-1).to(logits.dtype)  # ascend-tui fix" in diff
    assert "+        return token.float().sum(dim=1)  # ascend-tui fix" in diff
    assert "keep_float32" not in diff and not section["patch"]["notes"]
    before = check(model, *flags)
    assert before.returncode == 1 and "overflow/inf at score/sum.0" in before.stdout
    patch_p1(patch, work)
    after = check(model, *flags)
    assert after.returncode == 0, after.stdout + after.stderr
    assert "0 errors" in after.stdout


def test_upcast_rewrites_function_and_method_forms(tmp_path: Path) -> None:
    from ascend_tui.evidence import SourceLocation
    from ascend_tui.graph.opgraph import OpGraph, OpNode
    from ascend_tui.live.fix_patch import build_patch
    from ascend_tui.live.remedies import Remedy

    src = tmp_path / "m.py"
    src.write_text("import torch\nimport torch.nn.functional as F\n\n\ndef f(x, y):\n"
                   "    a = F.softmax(x + y, dim=-1)\n"
                   "    return a, torch.sum(x, 1), sum([1, 2]), (x * y).sum(-1), x.sum(dtype=torch.float32)\n")
    g = OpGraph("m")
    for i, (op, line) in enumerate([("aten._softmax.default", 6), ("aten.sum.dim_IntList", 7)]):
        g.add_node(OpNode(f"blk/op.{i}", op, "blk", i, source=SourceLocation(str(src), line)))
    p = build_patch(src, "f", [Remedy("upcast", "blk")], g, fits={"blk/op.1": False}, dtype="bfloat16")
    assert "+    a = F.softmax((x + y).float(), dim=-1).to(torch.bfloat16)  # ascend-tui fix" in p.diff
    # sums that do not fit stay float32; the builtin sum and a sum that already names its dtype are left alone
    assert ("+    return a, torch.sum(x.float(), 1), sum([1, 2]), ((x * y).float()).sum(-1), "
            "x.sum(dtype=torch.float32)  # ascend-tui fix") in p.diff
