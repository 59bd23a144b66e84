"""The app's `X`: fix the cause of a finding or a story cause in the job worker, show the result and copy the patch."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from app_fixtures import overflow_investigation
from live_investigations import nan_investigation, saved, screen_text

from textual.worker import WorkerFailed

from ascend_tui.app.app import InvestigatorApp
from ascend_tui.app.screens.fix import FixScreen
from ascend_tui.app.screens.story import StoryScreen
from ascend_tui.live.options import RunOptions

pytestmark = pytest.mark.live
import torch  # noqa: E402,F401 - a missing torch fails, never skips

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "samples" / "demo.py"


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))


class Copying(InvestigatorApp):
    """The app, keeping what it sent to the clipboard (OSC 52 goes to a terminal the test does not have)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.copied: list[str] = []
        super().__init__(*args, **kwargs)

    def copy_to_clipboard(self, text: str) -> None:
        self.copied.append(text)
        super().copy_to_clipboard(text)


async def settle(app: InvestigatorApp, pilot: Any) -> None:
    try:
        await app.workers.wait_for_complete()
    except WorkerFailed:
        pass
    await pilot.pause()


def demo_app(tmp_path: Path) -> Copying:
    return Copying([str(DEMO)], theme="textual-dark", export_dir=tmp_path,
                   live=RunOptions(checks=("overflow", "memory"), dtype="float16"))


async def test_x_on_a_finding_fixes_its_cause_and_y_copies_the_patch(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("f")  # the first finding: the out-of-range index into `embed`
        node = app.main.ops.current
        assert node is not None and app.inv is not None and app.inv.findings_for(node)
        await pilot.press("X")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FixScreen)
        await settle(app, pilot)
        assert screen.fixed is not None and not screen.running, (str(screen.query_one("#fix-body").content),
                                                                 [n.message for n in app._notifications])
        section = screen.fixed.section
        assert section["verified"] is True
        text = str(screen.query_one("#fix-body").content)
        assert "  before: " in text and "fix verified: " in text and "runs in all" in text
        assert "patch (apply with `patch -p1`):" in text and "clamp_index(" in text
        assert "verified; y copies the patch" in screen_text(app)
        await pilot.press("y")
        await pilot.pause()
        diff = section["patch"]["diff"]
        assert app.copied == [diff]
        written = tmp_path / "ascend-tui-fix.patch"
        assert written.read_text() == diff
        notes = [n.message for n in app._notifications]
        assert any("OSC 52" in n and str(written) in n for n in notes)
        await pilot.press("y")  # a second copy never writes over the first
        await pilot.pause()
        assert (tmp_path / "ascend-tui-fix-2.patch").read_text() == diff
        await pilot.press("escape")
        assert app.screen is app.main


async def test_x_on_a_story_cause_fixes_that_cause(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("S")
        await pilot.pause()
        story = app.screen
        assert isinstance(story, StoryScreen)
        first = story.causes[0]
        assert first.check == "overflow"
        await pilot.press("X")
        await pilot.pause()
        assert isinstance(app.screen, FixScreen) and app.screen.cause_title == first.title
        await settle(app, pilot)
        fixed = app.screen.fixed
        assert fixed is not None and fixed.section["verified"]
        chosen = {(r["kind"], r["module"]) for r in fixed.section["chosen"]}
        assert ("float32", "pool") in chosen  # the overflow's own remedy; the clamp keeps the run going
        assert {f["check"] for f in fixed.section["findings"]} == {"overflow"}  # only this cause's findings
        await pilot.press("escape")
        assert isinstance(app.screen, StoryScreen)


async def test_a_fix_that_is_not_verified_says_why_and_offers_no_patch(tmp_path: Path) -> None:
    model = ROOT / "tests" / "data" / "fix" / "overflows_in_float32.py"
    app = Copying([str(model)], theme="textual-dark", export_dir=tmp_path,
                  live=RunOptions(checks=("overflow",), dtype="float16"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("f", "X")
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, FixScreen) and screen.fixed is not None
        assert screen.fixed.section["verified"] is False
        text = str(screen.query_one("#fix-body").content)
        assert "not verified: no remedy is claimed: the float32 reference itself has" in text
        assert "patch (apply" not in text and "— not verified; esc back" in screen_text(app)
        await pilot.press("y")
        await pilot.pause()
        assert app.copied == [] and not list(tmp_path.glob("*.patch"))
        assert any(n.message.startswith("no patch to copy: not verified") for n in app._notifications)


ENTERED, GATE = threading.Event(), threading.Event()  # module-level: the fix deep-copies the model


class Gated(torch.nn.Module):
    """A model whose forward waits at a gate, so the test can press Escape while the fix is re-running it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ENTERED.set()
        GATE.wait(30)
        return x * 2


async def test_escape_cancels_a_running_fix(tmp_path: Path) -> None:
    import types

    from ascend_tui.live.targets import Target

    ENTERED.clear()
    GATE.clear()
    app = Copying(overflow_investigation(), theme="textual-dark", export_dir=tmp_path, live=RunOptions(checks=()))
    async with app.run_test(size=(80, 24)) as pilot:
        app.target = Target("gated.py", tmp_path / "gated.py", "build", types.ModuleType("gated"), Gated(),
                            (torch.ones(2),))
        await pilot.press("f", "X")
        assert await asyncio.to_thread(ENTERED.wait, 30), [n.message for n in app._notifications]
        await pilot.pause()
        assert isinstance(app.screen, FixScreen) and app.busy
        assert "esc cancels" in screen_text(app)
        await pilot.press("escape")
        GATE.set()
        await settle(app, pilot)
        assert app.screen is app.main and not app.busy
        assert any("fixing: cancelled" in n.message for n in app._notifications)
        assert not any(isinstance(s, FixScreen) for s in app.screen_stack)


async def test_x_on_offline_evidence_says_why_not_and_what_to_run(tmp_path: Path) -> None:
    path = saved(nan_investigation(), tmp_path)
    app = Copying([str(path)], theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("f", "X")
        await pilot.pause()
        assert app.screen is app.main
        note = next(n.message for n in app._notifications if "offline evidence" in n.message)
        assert "ascend-tui fix path/to/model.py" in note
        assert not app.busy


async def test_the_fix_key_is_in_the_help(tmp_path: Path) -> None:
    app = Copying(nan_investigation(), theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        await asyncio.sleep(0)
        from ascend_tui.app.screens.help import collect_keys

        keys = {k.id: k for k in collect_keys(app.screen_stack[-2])}
        assert keys["app.fix"].keys == ("X",) and "verify it and show the patch" in keys["app.fix"].description
