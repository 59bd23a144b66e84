"""The `check` command end to end: a valid report, and one clear line with exit 2 for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SAMPLES


REPORT_KEYS = {"schema", "target", "device", "run", "graph", "findings", "summary", "story"}


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ascend_tui", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=300)


def test_graph_only_report_on_sample(tmp_path: Path) -> None:
    out, junit, saved = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "run.atui.json"
    proc = run_cli("check", str(SAMPLES / "tiny_gpt.py"), "--checks", "none", "--json", str(out),
                   "--junit", str(junit), "--save", str(saved), "-q")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert set(report) == REPORT_KEYS
    assert report["schema"] == "ascend-tui.report/1"
    assert report["device"]["backend"] == "cpu" and report["device"]["inf_nan_mode"] is True
    assert report["run"] == {"checks": [], "dtype": "float32", "reference": "cpu:float32", "iterations": 1,
                             "notes": []}
    assert report["graph"]["nodes"] > 100 and report["graph"]["edges"] > report["graph"]["nodes"] // 2
    assert report["findings"] == [] and report["summary"] == {"errors": 0, "warnings": 0}
    assert "<testsuites>" in junit.read_text()
    from ascend_tui.investigation import Investigation

    inv = Investigation.load(saved)
    assert len(inv.graph) == report["graph"]["nodes"]
    assert "blocks.1.attn.qkv/addmm.0" in inv.graph


def test_progress_line_goes_to_stderr(tmp_path: Path) -> None:
    proc = run_cli("check", str(SAMPLES / "tiny_gpt.py"), "--checks", "none")
    assert proc.returncode == 0
    assert "capturing target" in proc.stderr
    assert "nodes" in proc.stdout and "capturing" not in proc.stdout


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ascend-tui: error:")]
    assert len(lines) == 1, proc.stderr
    assert "Traceback (most recent call last)" not in proc.stderr
    return lines[0]


def test_missing_file(tmp_path: Path) -> None:
    line = one_line_error(run_cli("check", str(tmp_path / "absent.py")))
    assert "absent.py: no such file" in line


def test_file_without_build(tmp_path: Path) -> None:
    model = tmp_path / "nobuild.py"
    model.write_text("import torch\nmodel = torch.nn.Linear(2, 2)\n")
    line = one_line_error(run_cli("check", str(model)))
    assert "nobuild.py" in line and "defines no build()" in line


def test_build_that_raises_shows_the_users_frames(tmp_path: Path) -> None:
    model = tmp_path / "boom.py"
    model.write_text("def helper():\n    raise ValueError('weights missing')\n\ndef build():\n    return helper()\n")
    proc = run_cli("check", str(model))
    line = one_line_error(proc)
    assert "boom.py" in line and "ValueError: weights missing" in line and "line 2" in line
    assert 'boom.py", line 5, in build' in proc.stderr
    assert "ascend_tui" not in proc.stderr.replace("ascend-tui: error", "")


def test_forward_that_raises(tmp_path: Path) -> None:
    model = tmp_path / "badfwd.py"
    model.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x @ torch.ones(3, 3)\n"
        "def build():\n"
        "    return M(), (torch.ones(2, 2),)\n")
    proc = run_cli("check", str(model), "--checks", "none")
    line = one_line_error(proc)
    assert "badfwd.py" in line and "line 4" in line and "forward" in line
    assert "RuntimeError" in line


def test_syntax_error_and_binary_junk(tmp_path: Path) -> None:
    bad = tmp_path / "syntax.py"
    bad.write_text("def build(:\n")
    assert "SyntaxError" in one_line_error(run_cli("check", str(bad)))
    junk = tmp_path / "junk.py"
    junk.write_bytes(b"\x00\xff\x13garbage")
    assert "junk.py" in one_line_error(run_cli("check", str(junk)))


def test_named_factory_and_bad_options(tmp_path: Path) -> None:
    assert "defines no make()" in one_line_error(run_cli("check", f"{SAMPLES / 'tiny_gpt.py'}:make"))
    assert "unknown check 'speed'" in one_line_error(run_cli("check", str(SAMPLES / "tiny_gpt.py"), "--checks", "speed"))
    assert "does not exist" in one_line_error(
        run_cli("check", str(SAMPLES / "tiny_gpt.py"), "--json", str(tmp_path / "no" / "r.json")))
    assert "not usable" in one_line_error(run_cli("check", str(SAMPLES / "tiny_gpt.py"), "--device", "npu"))


def test_report_never_overwrites_the_model(tmp_path: Path) -> None:
    model = tmp_path / "m.py"
    text = (SAMPLES / "tiny_gpt.py").read_text()
    model.write_text(text)
    assert "overwrite" in one_line_error(run_cli("check", str(model), "--json", str(model)))
    assert model.read_text() == text


def test_devices_command() -> None:
    proc = run_cli("devices")
    assert proc.returncode == 0
    assert "cpu   available" in proc.stdout and "npu" in proc.stdout


def test_check_reports_on_an_msprobe_dump_offline(tmp_path: Path, fixtures: Path) -> None:
    out = tmp_path / "ovf.json"
    proc = run_cli("check", str(fixtures / "msprobe" / "dump_ovf"), "--json", str(out), "-q")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(out.read_text())
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert [(f["node"], f["kind"], f["attribution"]) for f in errors] == [("exp.0", "inf", "introduced")]
    assert report["summary"]["errors"] == 1


def test_check_on_junk_artifact(tmp_path: Path) -> None:
    junk = tmp_path / "thing.bin"
    junk.write_bytes(b"\x00\x01\x02")
    assert "not a format ascend-tui reads" in one_line_error(run_cli("check", str(junk)))


def test_an_out_of_range_index_crash_points_to_the_memory_check() -> None:
    line = one_line_error(run_cli("check", str(SAMPLES / "shifted_index.py"), "--checks", "overflow"))
    assert "IndexError" in line and "--checks memory" in line


def test_every_output_option_inside_an_input_folder_is_refused(tmp_path: Path, fixtures: Path) -> None:
    """`--json DUMP/step0/rank/dump.json` once replaced the dump with our report: every output option is refused."""
    import hashlib
    import shutil

    dump = tmp_path / "dump"
    shutil.copytree(fixtures / "msprobe" / "dump_ovf", dump)

    def digest() -> dict[str, str]:
        return {str(p.relative_to(dump)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(dump.rglob("*")) if p.is_file()}

    before = digest()
    inner = [p for p in dump.rglob("*.json")]
    assert inner
    for flag in ("--json", "--junit", "--save", "--markdown"):
        for out in (inner[0], inner[0].parent / "new-report.json"):
            proc = run_cli("check", str(dump), flag, str(out), "-q")
            assert proc.returncode == 2, (flag, out, proc.stdout)
            line = one_line_error(proc)
            assert flag in line and ("overwrite" in line or "inside the input folder" in line)
    # a file of a multi-file artifact given alone protects its folder too; any other file only itself
    from ascend_tui.errors import InputError
    from ascend_tui.outputs import check_output_path

    dump_json = next(dump.rglob("dump.json"))
    with pytest.raises(InputError, match="inside the input folder"):
        check_output_path(dump_json.parent / "construct.json", [dump_json], option="--junit")
    assert check_output_path(tmp_path / "report.json", [tmp_path / "run.log"]) == (tmp_path / "report.json").resolve()
    log = tmp_path / "run.log"
    shutil.copy(fixtures / "sanitizer" / "mssanitizer_memcheck_doc_examples.log", log)
    proc = run_cli("sanitize", "--log", str(log), "--json", str(log))
    assert proc.returncode == 2 and "overwrite" in one_line_error(proc)
    assert digest() == before and not (inner[0].parent / "new-report.json").exists()
    assert log.read_bytes() == (fixtures / "sanitizer" / "mssanitizer_memcheck_doc_examples.log").read_bytes()


def test_one_file_of_a_dump_or_profiler_folder_names_the_folder_to_open(fixtures: Path) -> None:
    # real files users point at: a dump's stack.json, a tensor of it, a profiler folder's communication.json
    dump = fixtures / "msprobe" / "dump_bf16" / "step0"
    proc_dir = next(dump.iterdir())
    cases = [(proc_dir / "stack.json", proc_dir, "msprobe dump"),
             (next((proc_dir / "dump_tensor_data").glob("*.pt")), proc_dir, "msprobe dump"),
             (fixtures / "profiler" / "level1_2025-01" / "ASCEND_PROFILER_OUTPUT" / "communication.json",
              fixtures / "profiler" / "level1_2025-01" / "ASCEND_PROFILER_OUTPUT", "profiler")]
    for path, folder, kind in cases:
        proc = run_cli("check", str(path))
        line = one_line_error(proc)
        assert proc.returncode == 2 and f"one file of a {kind} folder" in line and f"open {folder}" in line, line
