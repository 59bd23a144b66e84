"""The command line's rough edges a new user hit (issue 22): README, --help, progress in logs, exit codes, outputs."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_tui.cli.main import SUBCOMMANDS, main
from ascend_tui.cli.progress import ProgressLine
from conftest import FIXTURES, ROOT, SAMPLES

VIS = FIXTURES / "msprobe" / "msprobe_output" / "vis"
GE = FIXTURES / "graphs" / "ge_proto_sample_afterUBMatch_excerpt.txt"


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ascend_tui", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=300)


def test_readme_lists_every_subcommand_and_one_precision_key() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in SUBCOMMANDS:
        assert re.search(rf"ascend-tui {name}\b", readme), name
    assert "P: precision" not in readme and "`C` precision view" in readme


@pytest.mark.parametrize("name", ["serve", "demo"])
def test_serve_and_demo_help_explain_every_option(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([name, "--help"])
    text = capsys.readouterr().out
    options = text.split("options:", 1)[1]
    lines = [ln for ln in options.splitlines() if ln.strip().startswith("--")]
    assert lines, text
    for line in lines:  # each option line carries its help text (argparse puts it after two spaces)
        assert re.search(r"\S\s{2,}\S", line.strip()), line
    assert len(text.split("options:")[0].strip().splitlines()) > 2  # a description under the usage


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_in_a_log_never_freezes_at_zero_and_never_counts_past_the_total() -> None:
    stream, clock = io.StringIO(), _Clock()
    line = ProgressLine(stream, clock=clock, log_interval=5.0)
    line("reading model", 0, None)
    for done in range(0, 1001, 10):  # 100 s of work, a call every second
        line("building graph", done, 1000)
        clock.now += 1.0
    line("building graph", 1200, 1000)  # a reader's estimate that was low
    lines = stream.getvalue().splitlines()
    assert lines[0] == "reading model"
    assert lines[1] == "building graph (1,000 ops)"  # its size, not a frozen 0/1,000
    counts = [ln for ln in lines[2:]]
    assert 15 <= len(counts) <= 22  # about one line every 5 s, not one per call, not one per phase
    assert counts[-1] == "building graph 1,000/1,000 ops"
    assert not any("1,200" in ln for ln in lines)


def test_progress_on_a_terminal_rewrites_one_line() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    line = ProgressLine(stream, clock=_Clock())
    line("building graph", 5, 3)
    line.done()
    assert "\r\x1b[2Kbuilding graph 3/3 ops" in stream.getvalue() and "5/3" not in stream.getvalue()


def test_onnx_progress_counts_operators_out_of_the_operators() -> None:
    from ascend_tui.readers.graphs.onnx_model import load

    calls: list[tuple[str, int, int | None]] = []
    load(ROOT / "tests" / "data" / "block_dynamo_export.onnx", progress=lambda *a: calls.append(a))
    counted = [(done, total) for phase, done, total in calls if total]
    assert counted and all(done <= total for done, total in counted)
    assert counted[-1][0] == counted[-1][1] == 18


def test_graph_exits_1_when_it_reports_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph", str(VIS / "compare_20261130002202.vis.db"), "-q"]) == 1
    assert "findings: 16 errors" in capsys.readouterr().out
    assert main(["graph", str(GE), "-q"]) == 0
    dump = FIXTURES / "msprobe" / "dump_ovf"
    assert main(["graph", str(VIS / "build_20261130002230.vis.db"), str(dump), "-q"]) == 1
    assert main(["graph", str(VIS / "build_20261130002230.vis.db"), str(dump), "-q", "--fail-on", "warning"]) == 1


def test_an_unwritable_output_is_refused_before_the_work_naming_the_option(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph", str(GE), "--json", "/proc/no/graph.json"]) == 2
    assert main(["graph", str(GE), "--json", "/proc/graph.json"]) == 2  # the folder exists; nothing can be made there
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before the summary was printed
    err = captured.err.strip().splitlines()
    assert err[-1].startswith("ascend-tui: error: /proc/graph.json: --json: cannot write here")
    assert main(["compare", str(FIXTURES / "msprobe" / "dump_bf16"), str(FIXTURES / "msprobe" / "dump_fp32"),
                 "--junit", "/proc/cmp.xml", "-q"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "--junit: cannot write here" in captured.err


def test_the_readme_pattern_on_the_demo_saves_a_run(tmp_path: Path) -> None:
    """`check samples/demo.py --save run.atui.json`: the demo's bad index crashes a run without the memory
    check; with the default checks the run is repeated with it, and the crash becomes the finding."""
    proc = run_cli("check", str(SAMPLES / "demo.py"), "--save", "run.atui.json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "running again with the memory check" in proc.stderr
    assert "memory/out_of_bounds at embed/embedding.0" in proc.stdout
    from ascend_tui.investigation import Investigation

    inv = Investigation.load(tmp_path / "run.atui.json")
    assert any(f.check == "memory" for f in inv.findings)


def test_devices_answers_without_importing_a_cpu_only_torch() -> None:
    code = ("import importlib.metadata as m, sys\n"
            "real = m.version\n"
            "m.version = lambda name: '2.13.0+cpu' if name == 'torch' else real(name)\n"
            "from ascend_tui.cli.main import main\n"
            "rc = main(['devices'])\n"
            "print('torch imported' if 'torch' in sys.modules else 'no torch', rc)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "cuda  no CUDA device: torch 2.13.0+cpu is a CPU-only build" in proc.stdout
    assert "cpu   available" in proc.stdout
    assert proc.stdout.strip().endswith("no torch 0")
