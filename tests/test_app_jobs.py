"""Background jobs: opening files and running models in thread workers, progress, cancel, and every failure as a message."""

from __future__ import annotations

import asyncio
import threading
import types
from pathlib import Path
from typing import Any

import pytest
from live_investigations import nan_investigation, saved, screen_text

from textual.worker import WorkerFailed

from ascend_tui.app.app import InvestigatorApp
from ascend_tui.app.messages import ChecksFinished, InvestigationLoaded, ProgressReported, ResultsArrived
from ascend_tui.app.screens.dialogs import ErrorDialog
from ascend_tui.app.widgets.progress import RunProgress
from ascend_tui.live.options import RunOptions

pytestmark = pytest.mark.live
import torch  # in the test command (.[live,test]): a missing torch fails, never skips

MODEL_FILE = """
import torch
from torch import nn

def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)), (torch.rand(3, 4),)
"""


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))


class Recording(InvestigatorApp):
    """The app, keeping every message the workers post (they post from their own threads)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.posted: list[Any] = []
        super().__init__(*args, **kwargs)

    def post_message(self, message: Any) -> bool:
        if isinstance(message, (ProgressReported, InvestigationLoaded, ChecksFinished, ResultsArrived)):
            self.posted.append(message)
        return super().post_message(message)


async def settle(app: InvestigatorApp, pilot: Any) -> None:
    """Wait for every worker to end (failures included: the app reports them itself), then for the UI."""
    try:
        await app.workers.wait_for_complete()
    except WorkerFailed:
        pass
    await pilot.pause()


def _errors(app: InvestigatorApp) -> list[str]:
    return [n.message for n in app._notifications if n.severity == "error"]


async def test_opening_a_saved_investigation_loads_it_in_a_worker(tmp_path: Path) -> None:
    path = saved(nan_investigation(), tmp_path)
    app = Recording([str(path)], theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        assert [type(m) for m in app.posted if not isinstance(m, ProgressReported)] == [InvestigationLoaded]
        assert app.main.ops.border_title == "operators 6 of 6"
        assert "6 ops" in app.sub_title
        assert not app.main.query_one(RunProgress).running


async def test_opening_a_model_file_runs_it_with_progress_and_shows_the_graph(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text(MODEL_FILE)
    app = Recording([str(model)], theme="textual-dark", export_dir=tmp_path, live=RunOptions(checks=()))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        phases = [m.text() for m in app.posted if isinstance(m, ProgressReported)]
        assert phases[0] == f"loading {model}"
        assert any(p.startswith("capturing target") for p in phases)
        assert app.main.ops.current is not None and app.main.ops.current.startswith("0/")
        assert app.target is not None and app.target.path == model
        await pilot.press("x", "ctrl+r")  # run again from the app: same graph, results replace the old ones
        await settle(app, pilot)
        assert isinstance(app.posted[-1], ChecksFinished)
        assert app.inv is app.posted[-1].inv
        assert not app.main.query_one(RunProgress).running


async def test_results_appear_as_each_check_finishes(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text(MODEL_FILE)
    app = Recording([str(model)], theme="textual-dark", export_dir=tmp_path,
                    live=RunOptions(checks=("overflow", "memory")))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        partial = [m for m in app.posted if isinstance(m, ResultsArrived)]
        final = next(m for m in app.posted if isinstance(m, InvestigationLoaded))
        assert len(partial) == 2, "after the capture, then after the overflow check"
        assert all(p.inv.graph is final.inv.graph for p in partial)
        assert app.posted.index(partial[0]) < app.posted.index(final)
        phases = [m.text() for m in app.posted if isinstance(m, ProgressReported)]
        assert "checking overflow (1 of 2)" in phases and "checking memory (2 of 2)" in phases


class Gated(torch.nn.Module):
    """A model whose forward waits at a gate, so a test can press Escape while the job is running."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.left = threading.Event()

    def forward(self, x: Any) -> Any:
        try:
            self.entered.set()
            self.gate.wait(30)
            for _ in range(20):
                x = x + 1
            return x
        finally:
            self.left.set()


async def test_escape_cancels_a_running_job_and_keeps_what_was_shown(tmp_path: Path) -> None:
    from ascend_tui.live.targets import Target

    inv = nan_investigation()
    model = Gated()
    app = Recording(inv, theme="textual-dark", export_dir=tmp_path, live=RunOptions(checks=()))
    async with app.run_test(size=(100, 30)) as pilot:
        app.target = Target("gated.py", tmp_path / "gated.py", "build", types.ModuleType("gated"), model,
                            (torch.zeros(2),))
        await pilot.press("x", "ctrl+r")
        assert await asyncio.to_thread(model.entered.wait, 30)
        await pilot.pause()
        bar = app.main.query_one(RunProgress)
        assert bar.running and "esc cancels" in screen_text(app)
        await pilot.press("escape")
        model.gate.set()
        assert await asyncio.to_thread(model.left.wait, 30)  # the capture stopped at the next op
        await settle(app, pilot)
        assert not bar.running
        assert any("cancelled" in n.message for n in app._notifications)
        assert not any(isinstance(m, ChecksFinished) for m in app.posted)
        assert app.inv is inv and app.main.ops.border_title == "operators 6 of 6"


async def test_a_corrupt_file_opened_from_the_app_is_a_notification(tmp_path: Path) -> None:
    broken = tmp_path / "broken.atui.json"
    broken.write_text('{"schema": "ascend-tui.investigation/1", "graph": {"nodes": [')
    app = InvestigatorApp(theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("O")
        await pilot.press(*str(broken), "enter")
        await settle(app, pilot)
        assert app.screen is app.main
        errors = _errors(app)
        assert len(errors) == 1 and errors[0].startswith(f"{broken}:") and "invalid JSON" in errors[0]
        assert app.inv is None and "Nothing open yet" in screen_text(app)


async def test_a_file_no_reader_understands_is_a_notification(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello [bold]world[/bold]\n")
    app = InvestigatorApp([str(other)], theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        errors = _errors(app)
        assert len(errors) == 1 and "not a format ascend-tui reads" in errors[0]


async def test_a_model_file_that_raises_names_its_own_line(tmp_path: Path) -> None:
    model = tmp_path / "bad_model.py"
    model.write_text("def build():\n    raise ValueError('no weights here')\n")
    app = InvestigatorApp([str(model)], theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        errors = _errors(app)
        assert len(errors) == 1
        assert errors[0].startswith(f"{model}: line 2: build() raised ValueError: no weights here")


async def test_an_unexpected_error_in_a_worker_opens_a_dialog_and_the_app_keeps_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ascend_tui.app import workers

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise ZeroDivisionError("a bug of ours")

    monkeypatch.setattr(workers, "load_paths", broken)
    app = InvestigatorApp(["whatever.json"], theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert isinstance(app.screen, ErrorDialog)
        assert "ZeroDivisionError: a bug of ours" in screen_text(app)
        await pilot.press("escape")
        assert app.screen is app.main


async def test_running_checks_without_a_model_says_how_to_get_one(tmp_path: Path) -> None:
    app = InvestigatorApp(nan_investigation(), theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("x")
        assert not app.busy
        assert any("open a model file" in n.message for n in app._notifications)


async def test_a_sanitizer_log_after_the_investigation_maps_its_events_onto_the_graph(
        tmp_path: Path, fixtures: Path) -> None:
    log = fixtures / "sanitizer" / "compute_sanitizer_memcheck_real.log"
    path = saved(nan_investigation(), tmp_path)
    app = InvestigatorApp([str(path), str(log)], theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        assert app.inv is not None and app.inv.memory_events
        notes = [n.message for n in app._notifications if log.name in n.message]
        assert len(notes) == 1 and f"{len(app.inv.memory_events)} memory events" in notes[0]
        assert app.main.ops.border_title == "operators 6 of 6"


async def test_walking_survives_a_rerun_of_the_checks(tmp_path: Path) -> None:
    """Navigation belongs to the interface: after walking up and a re-run, `b` still goes back the way we came."""
    model = tmp_path / "model.py"
    model.write_text(MODEL_FILE)
    app = Recording([str(model)], theme="textual-dark", export_dir=tmp_path, live=RunOptions(checks=("overflow",), detail="full"))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        last = app.inv.graph.execution_order()[-1]
        app.main.go(last)
        await pilot.press("1", "p", "p")  # addmm's input 1 is the activation (0 is the bias)
        walked = app.main.ops.current
        assert walked == "0/addmm.0"
        first = app.inv
        await pilot.press("x", "ctrl+r")
        await settle(app, pilot)
        assert app.inv is not first, "the re-run replaced the investigation"
        assert app.main.ops.current == walked, "the cursor stays where the user walked"
        await pilot.press("b")
        await pilot.pause()
        assert app.main.ops.current != walked
        await pilot.press("b")
        await pilot.pause()
        assert app.main.ops.current == last
        assert "nowhere to go back to" not in [n.message for n in app._notifications]
