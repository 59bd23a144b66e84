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


# Every screen at 80x24 (SSH default) and 160x48, in a light and a dark theme: review the SVGs by eye
# when they change (tests/__snapshots__/test_app_snapshots/test_every_screen_*.svg).
SCREENS: dict[str, tuple[str, list[str]]] = {
    "graph": ("attention", []),
    "overflow-chains": ("overflow", ["o", "2"]),
    "memory": ("memory", ["m"]),
    "help": ("overflow", ["question_mark"]),
    "run-settings": ("attention", ["x"]),
}


@pytest.mark.parametrize("theme", ["ascend-light", "ascend-dark"])
@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("screen", list(SCREENS))
def test_every_screen(snap_compare: Any, tmp_path: Path, screen: str, size: tuple[int, int], theme: str) -> None:
    from app_fixtures import attention_investigation

    fixture, keys = SCREENS[screen]
    inv = {"attention": attention_investigation, "overflow": overflow_investigation,
           "memory": memory_investigation}[fixture]()
    if screen == "run-settings":
        (tmp_path / "attention.py").write_text("")
        inv.run.target = str(tmp_path / "attention.py")
    app = app_for(inv, tmp_path, theme=theme)
    assert snap_compare(app, press=keys, terminal_size=size)
