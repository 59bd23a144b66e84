"""`ascend-tui open GRAPH EVIDENCE...` in the app: an offline graph opens in a worker with evidence laid on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.worker import WorkerFailed

from ascend_tui.app.app import InvestigatorApp
from tests.conftest import FIXTURES

VIS = FIXTURES / "msprobe" / "msprobe_output" / "vis" / "compare_20261130002202.vis.db"
GE = FIXTURES / "graphs" / "ge_proto_sample_afterUBMatch_excerpt.txt"


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))


async def _settle(app: InvestigatorApp, pilot: object) -> None:
    try:
        await app.workers.wait_for_complete()
    except WorkerFailed:
        pass
    await pilot.pause()  # type: ignore[attr-defined]


async def _notes_about(app: InvestigatorApp, pilot: object, word: str) -> list[str]:
    """The notifications naming `word`, waiting for the message loop to deliver them (turns, not seconds)."""
    for _ in range(500):
        notes = [n.message for n in app._notifications if word in n.message]
        if notes:
            return notes
        await pilot.pause()  # type: ignore[attr-defined]
    return []


async def test_graph_with_evidence_opens_and_says_what_matched(tmp_path: Path) -> None:
    app = InvestigatorApp([str(VIS), str(FIXTURES / "msprobe" / "dump_fp32")], theme="textual-dark",
                          export_dir=tmp_path)
    async with app.run_test(size=(110, 30)) as pilot:
        await _settle(app, pilot)
        assert app.inv is not None and app.inv.run.source == "msprobe_vis"
        notes = await _notes_about(app, pilot, "dump_fp32")
        assert len(notes) == 1 and "as the reference" in notes[0] and "exact" in notes[0]
        assert not [n for n in app._notifications if n.severity == "error"]


async def test_ge_dump_opens_in_the_app(tmp_path: Path) -> None:
    app = InvestigatorApp([str(GE)], theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(110, 30)) as pilot:
        await _settle(app, pilot)
        assert app.inv is not None and app.inv.run.source == "ge_dump"
        assert "of 3" in str(app.main.ops.border_title)
        assert not [n for n in app._notifications if n.severity == "error"]
