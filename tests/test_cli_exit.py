"""The program ends without taking apart what a command kept, with the same exit codes and every line written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ascend_tui.cli import exits
from ascend_tui.cli.main import main
from tests.conftest import ROOT

GRAPH_VIS = "msprobe/msprobe_output/vis/build_20261130002230.vis.db"  # findings at error: exit 1
KERNELS = "profiler/older_2023-2024/kernel_details_2023-11_ArithmeticUtilization.csv"


def _program(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return subprocess.run([sys.executable, "-m", "ascend_tui", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def _in_process(capsys: object, *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().out  # type: ignore[attr-defined]


def test_the_program_exits_as_main_returns_with_all_its_output(fixtures: Path, capsys: object) -> None:
    for args in (["graph", str(fixtures / GRAPH_VIS), "-q"], ["profile", str(fixtures / KERNELS), "-q"],
                 ["graph", str(fixtures / "graphs" / "mindspore_ir_sample_validate.ir"), "-q"]):
        code, out = _in_process(capsys, *args)
        proc = _program(*args)
        assert (proc.returncode, proc.stdout) == (code, out), (args, proc.stderr)
        assert out.strip(), args
    assert _in_process(capsys, "graph", str(fixtures / GRAPH_VIS), "-q")[0] == 1
    assert not exits._KEPT  # main() in-process keeps nothing: only the program ends after one command


def test_a_bad_input_still_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = _program("graph", str(tmp_path / "missing.onnx"), "-q")
    assert proc.returncode == 2 and proc.stderr.strip().endswith("missing.onnx: no such file or folder")


def _leave(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = f"""
import atexit, sys, threading, time
from pathlib import Path
from ascend_tui.cli import exits
out = Path({str(tmp_path)!r})
atexit.register(lambda: (out / "atexit").write_text("ran"))
exits.leaving()
exits.keep([object() for _ in range(10)])
print("written", end="")  # no newline: only a flush puts it out
{body}
exits.leave(3)
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)


def test_leave_flushes_runs_the_exit_handlers_and_keeps_the_code(tmp_path: Path) -> None:
    proc = _leave(tmp_path, "")
    assert (proc.returncode, proc.stdout) == (3, "written"), proc.stderr
    assert (tmp_path / "atexit").read_text() == "ran"


def test_leave_waits_for_a_thread_still_running(tmp_path: Path) -> None:
    body = ("t = threading.Thread(target=lambda: (time.sleep(0.5), (out / 'thread').write_text('done')))\n"
            "t.start()")
    proc = _leave(tmp_path, body)
    assert (proc.returncode, proc.stdout) == (3, "written"), proc.stderr
    assert (tmp_path / "thread").read_text() == "done" and (tmp_path / "atexit").read_text() == "ran"
