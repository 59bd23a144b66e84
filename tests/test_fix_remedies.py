"""The upcast remedy as a diff at its call sites, and the layout remedy that drops a permute+contiguous pair."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from ascend_tui.cli.main import main
from tests.test_fix import fix  # the one in-process `ascend-tui fix` runner both files use

pytestmark = pytest.mark.live
import torch  # noqa: E402 - a missing torch fails, never skips

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
DATA = ROOT / "tests" / "data" / "fix"


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


# -- the layout remedy ------------------------------------------------------------------------------------------

def test_layout_pairs_dropped_bit_identical_timed_and_the_patch_removes_the_copies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flags = ("--checks", "profile")
    work = tmp_path / "work"
    (work / "models").mkdir(parents=True)
    model = Path(shutil.copy(DATA / "nhwc_activation.py", work / "models" / "nhwc_activation.py"))
    monkeypatch.chdir(work)
    code, section, text, patch = fix(tmp_path, Path("models") / "nhwc_activation.py", *flags)
    assert code == 0 and section["verified"], text
    assert [(r["kind"], r["module"]) for r in section["chosen"]] == [("layout", "act1"), ("layout", "act2")]
    layout = section["layout"]
    assert layout["accepted"] and layout["bit_identical"] is True and layout["max_abs_difference"] == 0.0
    for key in ("step_before", "step_after"):
        t = layout[key]
        assert t["steps"] == 7 and 0 < t["min"] <= t["median"] <= t["max"]
    assert [(f["kind"], f["gone"]) for f in section["findings"]] == [("layout_conversion", True)]
    verdict = next(line for line in text.splitlines() if line.startswith("fix verified: "))
    assert "median of 7 steps each" in verdict and "(spread " in verdict and "outputs bit-identical" in verdict
    diff = section["patch"]["diff"]
    assert "-        x = x.permute(0, 2, 3, 1).contiguous()\n" in diff
    assert "+        x = x.permute(0, 2, 3, 1)  # ascend-tui fix: no copy, the next op reads the view\n" in diff
    assert "+        return x.permute(0, 3, 1, 2)  # ascend-tui fix" in diff and "keep_float32" not in diff
    assert check(model, *flags, "--fail-on", "warning").returncode == 1  # the layout warning
    patch_p1(patch, work)
    assert "        x = x.permute(0, 2, 3, 1)  # ascend-tui fix" in model.read_text()
    after = check(model, *flags, "--fail-on", "warning")
    assert after.returncode == 0, after.stdout + after.stderr


def test_layout_sample_says_when_the_outputs_are_not_bit_identical(tmp_path: Path) -> None:
    code, section, text, _ = fix(tmp_path, SAMPLES / "layout_detector.py", "--checks", "profile")
    layout = section["layout"]
    assert len(layout["remedies"]) == 13  # the stem's norm and the twelve blocks' norms
    # LayerNorm writes NHWC; the next convolution now reads it channels_last, and rounds differently
    assert layout["bit_identical"] is False and 0 < layout["max_abs_difference"] < 1e-4
    assert code == 0 and section["verified"] and "outputs not bit-identical: at most " in text
    assert "copies in 13 modules (`backbone.0.0.norm1`, `backbone.0.0.norm2`, +11 more) dropped" in text


def test_a_layout_copy_the_code_needs_is_not_dropped() -> None:
    from ascend_tui.live.device import select
    from ascend_tui.live.layout_fix import try_layout
    from ascend_tui.live.remedies import Remedy, Trial

    class Flatten(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.transpose(1, 2).contiguous().view(x.shape[0], -1)  # view needs the copy

    trial = Trial(Flatten(), (torch.randn(2, 3, 4),), select("cpu"), torch.float32)
    result = try_layout(trial, (), [Remedy("layout", "")], 0.999)
    assert not result.accepted and result.before is None
    assert "the code needs the contiguous tensor" in result.reason and "RuntimeError" in result.reason


def test_a_layout_remedy_that_changes_the_outputs_is_not_verified_and_the_story_says_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ascend_tui.live import layout_fix

    # layout_detector's outputs differ at rounding level (3e-6); here any difference counts as a change
    monkeypatch.setattr(layout_fix, "UNCHANGED_COSINE", 1.5)
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(["triage", str(SAMPLES / "layout_detector.py"), "--fix", "-q", "--fail-on", "unverified"])
    text = buf.getvalue()
    assert code == 1, text
    line = next(x for x in text.splitlines() if x.startswith("fail-on unverified: cause 1 (time: layout conversion"))
    assert "not verified: dropping the copies changes the outputs (at most 3." in line
    assert "\n     not verified: dropping the copies" in text  # the story's line under the cause


def test_an_upcast_with_no_call_site_in_the_file_is_a_note_not_an_empty_diff(tmp_path: Path) -> None:
    from ascend_tui.live.fix_patch import build_patch
    from ascend_tui.live.remedies import Remedy

    src = tmp_path / "m.py"
    src.write_text("import torch\n\n\ndef build():\n    return torch.nn.LayerNorm(4), (torch.ones(2, 4),)\n")
    p = build_patch(src, "build", [Remedy("upcast", "")])
    assert p.diff == "" and p.snippet == ""
    assert any("no call site of it was found in the model file" in n for n in p.notes)


def test_layout_copies_the_code_needs_are_kept_and_the_others_dropped() -> None:
    from ascend_tui.live.device import select
    from ascend_tui.live.layout_fix import try_layout
    from ascend_tui.live.remedies import Remedy, Trial

    class Heads(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:  # the attention idiom: view needs the copy
            return x.transpose(1, 2).contiguous().view(x.shape[0], x.shape[2], -1)

    class Act(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:  # elementwise: the view does as well
            return torch.relu(x.transpose(1, 2).contiguous() * 2).transpose(1, 2).contiguous()

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.act, self.heads = Act(), Heads()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.heads(self.act(x))

    trial = Trial(Net(), (torch.randn(2, 3, 4, 5),), select("cpu"), torch.float32)
    result = try_layout(trial, (), [Remedy("layout", "act"), Remedy("layout", "heads")], 0.999, steps=3)
    assert result.accepted and result.identical
    assert [r.module for r in result.remedies] == ["act"] and result.needed == ("heads",)
    assert "copies kept in 1 module(s) whose code needs them (`heads`)" in result.describe()


def test_a_layout_remedy_on_a_model_that_does_not_run_is_not_tried() -> None:
    from ascend_tui.live.device import select
    from ascend_tui.live.layout_fix import try_layout
    from ascend_tui.live.remedies import Remedy, Trial

    class Broken(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.embedding(x, torch.ones(4, 2)).permute(1, 0, 2).contiguous()

    trial = Trial(Broken(), (torch.tensor([[1, 9]]),), select("cpu"), torch.float32)  # 9 is past the table
    result = try_layout(trial, (), [Remedy("layout", "")], 0.999)
    assert not result.accepted and result.reason.startswith("not tried: the run it would be compared with fails")
