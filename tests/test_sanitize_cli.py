"""`ascend-tui sanitize`: logs into the versioned report, and a command streamed through a (fake) sanitizer."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ascend_tui.cli.main import main
from ascend_tui.investigation import Investigation

FINDING_KEYS = {"check", "kind", "severity", "node", "op_type", "module", "index", "message", "attribution",
                "metrics", "root_cause"}


def validate_report(report: dict[str, Any]) -> None:
    """The names issue 2 fixes for `ascend-tui.report/1`, exactly."""
    assert set(report) == {"schema", "target", "device", "run", "graph", "findings", "summary", "story"}
    assert report["schema"] == "ascend-tui.report/1"
    assert set(report["device"]) == {"backend", "name", "inf_nan_mode"}
    assert set(report["run"]) == {"checks", "dtype", "reference", "iterations", "notes"}
    assert set(report["graph"]) == {"nodes", "edges"}
    assert set(report["summary"]) == {"errors", "warnings"}
    for f in report["findings"]:
        assert FINDING_KEYS <= set(f) <= FINDING_KEYS | {"hint", "id"}
        assert f["check"] == "memory" and f["severity"] in ("error", "warning", "info")
        assert isinstance(f["message"], str) and isinstance(f["index"], int)
    assert report["summary"]["errors"] == sum(f["severity"] == "error" for f in report["findings"])
    assert report["summary"]["warnings"] == sum(f["severity"] == "warning" for f in report["findings"])


def test_log_with_errors_exits_1_and_writes_a_valid_report(fixtures: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.json"
    log = fixtures / "sanitizer" / "mssanitizer_memcheck_doc_examples.log"
    assert main(["sanitize", "--log", str(log), "--json", str(out)]) == 1
    report = json.loads(out.read_text())
    validate_report(report)
    assert report["run"]["checks"] == ["memory"] and report["target"] == str(log)
    assert [f["kind"] for f in report["findings"]].count("illegal_access") == 2
    assert report["summary"] == {"errors": 4, "warnings": 3}
    assert report["graph"] == {"nodes": 3, "edges": 0}
    printed = capsys.readouterr().out
    assert "ERROR   memory/illegal_access at add_custom_kernel: illegal read of 224 bytes" in printed


def test_clean_log_exits_0(tmp_path: Path) -> None:
    clean = tmp_path / "clean.log"
    clean.write_text("========= COMPUTE-SANITIZER\nAll good\n========= ERROR SUMMARY: 0 errors\n")
    out = tmp_path / "r.json"
    assert main(["sanitize", "--log", str(clean), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    validate_report(report)
    assert report["findings"] == []


def test_log_mapped_onto_a_saved_graph(fixtures: Path, tmp_path: Path) -> None:
    import torch
    from ascend_tui.live.recording import capture

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    graph = capture(model, (torch.randn(3, 8),)).graph
    saved = tmp_path / "model.atui.json"
    Investigation(graph).save(saved)
    log = tmp_path / "ms.log"
    log.write_text((fixtures / "sanitizer" / "mssanitizer_memcheck_doc_examples.log").read_text()
                   .replace("add_custom_kernel", "MatMulV2_0f1e2d3c4b5a69788796a5b4c3d2e1f0_0"))
    out, inv_path = tmp_path / "r.json", tmp_path / "inv.json"
    assert main(["sanitize", "--log", str(log), "--graph", str(saved), "--json", str(out), "--save", str(inv_path)]) == 1
    report = json.loads(out.read_text())
    validate_report(report)
    assert report["graph"]["nodes"] == len(graph)
    first = report["findings"][0]
    # two matmuls share the kernel's confidence (0.425 each): a guess, listed as unmapped with its candidates
    assert first["node"] == "" and first["metrics"]["unmapped"] is True
    assert first["metrics"]["confidence"] == 0.425 and first["metrics"]["candidate_nodes"] == ["0/addmm.0", "2/addmm.0"]
    assert "not placed on an operator" in first["message"]
    reopened = Investigation.load(inv_path)
    assert len(reopened.memory_events) == 7 and reopened.graph.node("2/addmm.0").module == "2"


def test_bad_inputs_exit_2_with_one_line(fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = fixtures / "sanitizer" / "mssanitizer_triton_session.log"
    cases = [
        (["sanitize", "--log", str(tmp_path / "missing.log")], "missing.log: no such file"),
        (["sanitize", "--log", str(log), "--graph", str(log)], "--graph expects a graph or investigation file"),
        (["sanitize"], "give --log PATH"),
        (["sanitize", "--log", str(log), "--", "python", "-c", "pass"], "either --log PATH or -- COMMAND"),
        (["sanitize", "--log", str(log), "--json", str(log)], "would overwrite an input file"),
    ]
    for argv, expected in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0], (argv, err)


def _only_python_on_path(monkeypatch: pytest.MonkeyPatch, *first: Path) -> None:
    monkeypatch.setenv("PATH", os.pathsep.join([*map(str, first), str(Path(sys.executable).parent)]))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)


def test_without_any_sanitizer_it_says_so_and_suggests_the_live_one(monkeypatch: pytest.MonkeyPatch) -> None:
    _only_python_on_path(monkeypatch)
    run = subprocess.run([sys.executable, "-m", "ascend_tui", "sanitize", "--", "python", "-c", "pass"],
                         capture_output=True, text=True, env=dict(os.environ))
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "neither mssanitizer (CANN) nor compute-sanitizer (CUDA) is installed" in lines[0]
    assert "ascend-tui check MODEL.py --checks memory" in lines[0]
    assert main(["sanitize", "--tool", "mssanitizer", "--", "python", "-c", "pass"]) == 2


def _fake_tool(folder: Path, name: str, flags: tuple[str, ...], env_var: str, log: Path) -> None:
    """A stand-in sanitizer: checks the flags it was given, prints a real log and runs the command."""
    given = " ".join(f"${i}" for i in range(1, len(flags) + 1))
    script = folder / name
    script.write_text(
        "#!/bin/sh\n"
        f'echo "{name} saw caching=${env_var}"\n'
        f'[ "{given}" = "{" ".join(flags)}" ] || {{ echo "unexpected flags: $*"; exit 97; }}\n'
        f"shift {len(flags)}\n"
        f'{shutil.which("cat")} "{log}"\n'
        '"$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


CS_FLAGS = ("--tool", "memcheck", "--leak-check", "full")
MS_FLAGS = ("--tool=memcheck", "--leak-check=yes", "--")


def test_command_is_run_under_compute_sanitizer_and_streamed(fixtures: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_tool(bin_dir, "compute-sanitizer", CS_FLAGS, "PYTORCH_NO_CUDA_MEMORY_CACHING",
               fixtures / "sanitizer" / "compute_sanitizer_memcheck_leakcheck_real.log")
    _only_python_on_path(monkeypatch, bin_dir)
    out = tmp_path / "r.json"
    code = main(["sanitize", "--json", str(out), "--", "python", "-c", "print('hello from the program')"])
    captured = capsys.readouterr()
    assert code == 1, captured
    stdout = captured.out.splitlines()
    assert "compute-sanitizer saw caching=1" in stdout and "hello from the program" in stdout
    assert "Before: Array 0, 1 .. N-1: 1.000000 1.000000 1.000000" in stdout
    assert not any(line.startswith("=========") for line in stdout)
    assert "running under compute-sanitizer: python -c" in captured.err
    report = json.loads(out.read_text())
    validate_report(report)
    assert [f["kind"] for f in report["findings"]] == ["out_of_bounds", "api_error", "leak"]
    assert report["target"] == "python -c 'print('\"'\"'hello from the program'\"'\"')'"


def test_auto_prefers_mssanitizer_and_disables_the_npu_pool(fixtures: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_tool(bin_dir, "compute-sanitizer", CS_FLAGS, "PYTORCH_NO_CUDA_MEMORY_CACHING",
               fixtures / "sanitizer" / "compute_sanitizer_memcheck_real.log")
    _fake_tool(bin_dir, "mssanitizer", MS_FLAGS, "PYTORCH_NO_NPU_MEMORY_CACHING",
               fixtures / "sanitizer" / "mssanitizer_leakcheck_doc_example.log")
    _only_python_on_path(monkeypatch, bin_dir)
    out = tmp_path / "r.json"
    assert main(["sanitize", "--json", str(out), "--", "python", "-c", "pass"]) == 1
    assert "mssanitizer saw caching=1" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert [f["kind"] for f in report["findings"]] == ["leak", "leak"]
    assert all(f["metrics"]["likely_false_positive"] is False for f in report["findings"])


def test_cut_off_tool_output_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cut = tmp_path / "cut.log"
    cut.write_text("========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 4 bytes\n")
    _fake_tool(bin_dir, "compute-sanitizer", CS_FLAGS, "PYTORCH_NO_CUDA_MEMORY_CACHING", cut)
    _only_python_on_path(monkeypatch, bin_dir)
    assert main(["sanitize", "--", "python", "-c", "pass"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "output of compute-sanitizer python -c pass:3: compute-sanitizer illegal_access report is cut off" in err
