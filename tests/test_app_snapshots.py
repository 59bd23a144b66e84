"""SVG snapshots of the main views at a fixed size and theme (update with `pytest --snapshot-update`).

The investigations are built by hand (tests/app_fixtures.py): no clocks, no paths on screen.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from app_fixtures import memory_investigation, overflow_investigation

from ascend_tui.investigation import Investigation

SIZE = (100, 30)


@pytest.fixture(autouse=True)
def _fixed_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user themes or keymap; the help screen's keymap path reads ~/.config/ascend-tui/keymap.toml."""
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def app_for(inv: Investigation, tmp_path: Path, theme: str = "ascend-dark") -> Any:
    from ascend_tui.app.app import InvestigatorApp

    return InvestigatorApp(inv, theme=theme, export_dir=tmp_path)


def test_main_graph_view(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(app_for(overflow_investigation(), tmp_path), terminal_size=SIZE)


def test_overflow_view_findings(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(app_for(overflow_investigation(), tmp_path), press=["o"], terminal_size=SIZE)


def test_overflow_view_chains_at_80x24(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(app_for(overflow_investigation(), tmp_path), press=["o", "2"], terminal_size=(80, 24))


def test_memory_view_events(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(app_for(memory_investigation(), tmp_path), press=["m"], terminal_size=SIZE)


def test_help_screen(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(app_for(overflow_investigation(), tmp_path), press=["question_mark"], terminal_size=SIZE)


def test_overflow_view_headroom_under_ansi_light(snap_compare: Any, tmp_path: Path) -> None:
    app = app_for(overflow_investigation(), tmp_path, theme="ansi-light")
    assert snap_compare(app, press=["o", "3"], terminal_size=SIZE)
