"""The graph view at 80x24 and at full size, under ansi themes, with a user keymap; export and copy; SVG snapshots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from live_investigations import detail_text, memory_investigation, mlp_investigation, nan_investigation, screen_text

from ascend_tui.app.app import InvestigatorApp
from ascend_tui.app.widgets.detail import Detail
from ascend_tui.app.widgets.op_list import OpList

pytestmark = pytest.mark.live


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    return tmp_path / "cfg" / "ascend-tui"


async def test_80x24_shows_list_detail_and_finding_without_overlap(tmp_path: Path) -> None:
    inv, lookup, _producer = memory_investigation()
    app = InvestigatorApp(inv, theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.main.has_class("-narrow")
        ops, detail = app.main.query_one(OpList), app.main.query_one(Detail)
        assert ops.region.height >= 8 and detail.region.height >= 8
        assert not ops.region.overlaps(detail.region)
        assert ops.region.right <= 80 and detail.region.bottom <= 23
        text = screen_text(app)
        lines = text.splitlines()
        assert len(lines) == 24 and all(len(line) <= 80 for line in lines)
        assert app.main.ops.current == lookup  # opens on the first finding
        assert "operators 5 of 5" in text
        assert "ERROR memory/out_of_bounds" in text and "index 17 is out of range for 16 rows" in text


async def test_wide_terminal_puts_neighbours_beside_the_list(tmp_path: Path) -> None:
    app = InvestigatorApp(nan_investigation(), theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        app.main.go("proj/addmm.0")
        await pilot.pause()
        assert not app.main.has_class("-narrow")
        ops, neighbours = app.main.query_one(OpList), app.main.query_one("#neighbours")
        assert neighbours.region.x > ops.region.right - 1 and neighbours.region.height > 0
        text = screen_text(app)
        assert "[1] ← mul.0" in text and "[0] → sum.0" in text


@pytest.mark.parametrize("theme", ["ansi-dark", "ansi-light"])
async def test_ansi_themes_follow_the_terminal_and_colour_badges_by_severity(theme: str, tmp_path: Path) -> None:
    app = InvestigatorApp(mlp_investigation(), theme=theme, export_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.theme == theme
        ops = app.main.query_one(OpList)
        error, warning, none = (ops.get_component_rich_style(f"op-list--{k}") for k in ("error", "warning", "none"))
        assert warning.color != none.color and error.color != warning.color
        flagged_row = ops.shown.tolist().index(ops.rows.row_of[app.main.ops.current])  # type: ignore[union-attr]
        ops.cursor = 0 if flagged_row else 1  # the cursor row takes the cursor's colours; look at the row off it
        await pilot.pause()
        strip = ops.render_line(flagged_row - int(ops.scroll_y))
        badge = [seg for seg in strip if seg.text == "O"]
        assert badge and badge[0].style is not None and badge[0].style.color == warning.color


async def test_unknown_theme_falls_back_with_a_warning(tmp_path: Path) -> None:
    app = InvestigatorApp(nan_investigation(), theme="no-such-theme", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme != "no-such-theme"
        assert any("unknown theme 'no-such-theme'" in n.message for n in app._notifications)


async def test_a_user_keymap_moves_a_walk_to_another_key(tmp_path: Path, _no_user_config: Path) -> None:
    _no_user_config.mkdir(parents=True)
    (_no_user_config / "keymap.toml").write_text('"graph.producer" = "u"\n"list.down" = ["j", "down", "ctrl+n"]\n')
    app = InvestigatorApp(nan_investigation(), theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        app.main.go("log.0")
        await pilot.press("p")
        assert app.main.ops.current == "log.0"
        await pilot.press("u")
        assert app.main.ops.current == "sub.0"
        await pilot.press("ctrl+n")
        assert app.main.ops.current == "log.0"


def test_every_binding_has_a_unique_id_and_a_key_that_survives_ssh() -> None:
    from ascend_tui.app.keys import APP_BINDINGS, LIST_BINDINGS
    from ascend_tui.app.screens.main import MainScreen

    bindings = [*APP_BINDINGS, *LIST_BINDINGS, *MainScreen.BINDINGS]
    ids = [b.id for b in bindings]  # type: ignore[union-attr]
    assert None not in ids and len(ids) == len(set(ids))
    assert {"view.overflow", "view.memory", "graph.producer", "graph.root-cause", "app.palette"} <= set(ids)
    for b in bindings:
        keys = b.key.split(",")  # type: ignore[union-attr]
        plain = [k for k in keys if "+" not in k and not (k[:1] == "f" and k[1:].isdigit())]
        assert plain, f"{b.id} has only keys that get lost over SSH: {keys}"  # type: ignore[union-attr]


async def test_export_writes_json_and_markdown_reports(tmp_path: Path) -> None:
    inv, lookup, _ = memory_investigation()
    app = InvestigatorApp(inv, theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("e")
        await pilot.pause()
        assert not list(tmp_path.iterdir()), "nothing is written before the path is shown and confirmed"
        field = app.screen.query_one("#path")
        assert field.value == str(tmp_path / "ascend-tui-report")
        await pilot.press("enter")
        await pilot.pause()
        report = json.loads((tmp_path / "ascend-tui-report.json").read_text())
        assert report["schema"] == "ascend-tui.report/1"
        assert [f["node"] for f in report["findings"]] == [lookup]
        markdown = (tmp_path / "ascend-tui-report.md").read_text()
        assert "index 17 is out of range for 16 rows" in markdown
        await pilot.press("e")  # a second export never replaces the first
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert (tmp_path / "ascend-tui-report-1.json").is_file()
        await pilot.press("e", "escape")  # esc writes nothing
        await pilot.pause()
        assert not (tmp_path / "ascend-tui-report-2.json").exists()


async def test_copy_puts_the_focused_operators_summary_on_the_clipboard(tmp_path: Path) -> None:
    app = InvestigatorApp(nan_investigation(), theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        app.main.go("log.0")
        await pilot.press("y")
        assert app.clipboard.startswith("operator   log.0")
        assert "nan_count" in app.clipboard


async def test_help_lists_the_walk_keys_with_their_ids(tmp_path: Path) -> None:
    app = InvestigatorApp(nan_investigation(), theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("question_mark")
        assert app.screen is not app.main
        text = screen_text(app)
        assert "graph.producer" in text and "graph.root-cause" in text


async def test_detail_shows_magnitudes_on_a_log_scale_not_an_invented_histogram(tmp_path: Path) -> None:
    inv = mlp_investigation()
    app = InvestigatorApp(inv, theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        text = detail_text(app)
        bar = next(line for line in text.splitlines() if "|x| log2" in line)
        assert "▲" in bar and "μ" in bar and "|" in bar.split("log2", 1)[1]  # abs max, |mean| and float16's max
        assert "headroom" in text and "float16 max" in text


def _snapshot_app(tmp_path: Path) -> Any:
    from ascend_tui.graph.opgraph import derive

    inv = nan_investigation()
    inv.run.target = "nan_chain.py"  # no paths on screen: they differ between machines
    inv.graph.with_nodes([derive(n, source=None) for n in inv.graph])
    return InvestigatorApp(inv, theme="textual-dark", export_dir=tmp_path)


def test_snapshot_graph_view_at_80x24(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(_snapshot_app(tmp_path), terminal_size=(80, 24), press=["G", "p"])


def test_snapshot_step_mode_wide(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(_snapshot_app(tmp_path), terminal_size=(120, 36), press=["g", "s", "right"])
