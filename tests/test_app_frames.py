"""The home screen's keys on a long list: the cursor, the panes and the scrollbar follow with no layout of the screen.

Each key used to lay the screen out once or twice and paint it three or four times (the list, then
the panes a frame later, then the scrollbar that came or went): 50-100 ms a key at 1M kernels. A
table's new rows lay it out only when its scrollbar comes or goes, and then once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from app_fixtures import to_home, wide_investigation
from rich.text import Text
from textual.app import App, ComposeResult

from ascend_tui.app.app import InvestigatorApp
from ascend_tui.app.config import variable_defaults
from ascend_tui.app.screens.row_table import Column, Row, RowTable
from ascend_tui.app.widgets.breadcrumb import Breadcrumb
from ascend_tui.app.widgets.detail import Detail, hanging
from ascend_tui.app.widgets.neighbours import Neighbours
from ascend_tui.evidence import Finding
from ascend_tui.investigation import Investigation

FLAGGED = (13, 82, 165, 246)  # ops with a finding, far apart


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))


def _long_investigation() -> Investigation:
    inv = wide_investigation(300)
    nodes = [f"layers.{i // 4}/add.{i % 4}" for i in FLAGGED]
    inv.add_findings([Finding("overflow", "near_max", "error" if k % 2 else "warning", nid, "aten.add.Tensor",
                              nid.split("/")[0], i, f"abs max of [{nid}] leaves little headroom",
                              hint="scale it down\nthen look again")
                      for k, (i, nid) in enumerate(zip(FLAGGED, nodes))])
    return inv


async def test_home_screen_keys_move_everything_without_laying_the_screen_out(tmp_path: Path) -> None:
    app = InvestigatorApp(_long_investigation(), theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await to_home(app, pilot)
        main, ops, detail = app.main, app.main.ops, app.main.query_one(Detail)
        await pilot.pause(0.2)
        layouts: list[object] = []
        main.screen_layout_refresh_signal.subscribe(main, layouts.append, immediate=True)
        seen: set[str] = set()
        for key in ("j", "pagedown", "pagedown", "n", "G", "n", "k", "F", "n", "F", "pageup", "home"):
            await pilot.press(key)
            await pilot.pause()
            assert layouts == [], f"{key} laid the screen out"
            here = ops.current
            assert here is not None
            seen.add(here)
            # the panes show the operator under the cursor, in the frame the list moved in
            assert detail.node_id == here and detail.text.startswith(here)
            assert main.query_one(Neighbours).node_id == here
            assert main.query_one(Breadcrumb).text.endswith(here)
            # the scrollbar has the list's length and the cursor's row is on screen
            bar, visible = ops.vertical_scrollbar, ops.scrollable_content_region.height
            assert bar.display and bar.window_virtual_size == len(ops.shown) and bar.window_size == visible
            assert ops.scroll_y <= ops.cursor < ops.scroll_y + visible and ops.scroll_y <= ops.max_scroll_y
            lines = detail.virtual_size.height
            assert detail.vertical_scrollbar.window_virtual_size == lines >= len(detail.text.splitlines())
            if key == "F" and ops.flagged_only:
                assert len(ops.shown) == len(FLAGGED) and "operators 4 of 300" in ops.title()
        assert len(seen) >= 6


async def test_a_new_text_in_the_detail_pane_is_cut_for_the_width_it_is_shown_at(tmp_path: Path) -> None:
    app = InvestigatorApp(_long_investigation(), theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        detail = app.main.query_one(Detail)
        app.main.go("layers.3/add.1")  # op 13, its finding's message and two-line hint
        await pilot.pause()
        message = "abs max of [layers.3/add.1] leaves little headroom"
        for size in ((160, 40), (90, 30)):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            width = detail.scrollable_content_region.width
            lines = [detail.render_line(y).text for y in range(detail.scrollable_content_region.height)]
            assert all(len(line) == width for line in lines)  # every line fills the pane, none runs under the bar
            assert message in " ".join(" ".join(lines).split())  # cut at words, hanging under its start
            assert detail.vertical_scrollbar.window_virtual_size == detail.virtual_size.height


class _TableApp(App[None]):
    """One `RowTable` on a screen, nothing else."""

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return variable_defaults(self.current_theme)  # the app's own variables, which the table's styles use

    def compose(self) -> ComposeResult:
        yield RowTable([Column("name"), Column("time", align="right")], _rows(200))


def _rows(n: int) -> list[Row]:
    return [Row((f"op [{i}]", f"{i * 1.5:.1f}")) for i in range(n)]


async def test_new_rows_lay_out_only_when_the_scrollbar_comes_or_goes_and_then_once() -> None:
    app = _TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        await pilot.pause()
        table = app.query_one(RowTable)
        assert table.show_vertical_scrollbar
        layouts: list[object] = []
        app.screen.screen_layout_refresh_signal.subscribe(app.screen, layouts.append, immediate=True)
        for n, bar, laid_out in ((150, True, 0), (5, False, 1), (8, False, 0), (300, True, 1)):
            layouts.clear()
            table.set_rows(_rows(n))
            await pilot.pause()
            await pilot.pause()
            assert len(layouts) == laid_out, f"{n} rows: {len(layouts)} layouts"
            assert table.show_vertical_scrollbar is bar and table.vertical_scrollbar.display is bar
            if bar:
                assert table.vertical_scrollbar.window_virtual_size == n + 1  # the header line too
            assert table.current is not None and table.current.cells[0] == "op [0]" and table.scroll_y == 0


async def test_the_next_operator_repaints_only_the_detail_lines_that_differ(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    app = InvestigatorApp(_long_investigation(), theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        detail = app.main.query_one(Detail)
        app.main.go("layers.30/add.1")
        await pilot.pause()
        painted: list[int] = []
        plain = Detail.render_line

        def counted(self: Detail, y: int) -> object:
            painted.append(y)
            return plain(self, y)

        monkeypatch.setattr(Detail, "render_line", counted)
        await pilot.press("j")  # layers.30/add.2: the same headings and layout, other names and numbers
        await pilot.pause()
        assert detail.node_id == "layers.30/add.2" and detail.text.startswith("layers.30/add.2")
        lines = detail.virtual_size.height
        assert 0 < len(set(painted)) < lines, f"{len(set(painted))} of {lines} lines painted"
        # every line, the ones kept and the ones painted again, is the new operator's (what a full repaint shows)
        width = detail.scrollable_content_region.width
        whole = hanging(Text(detail.text), width, app.console).plain.split("\n")
        assert [plain(detail, y).text.rstrip() for y in range(lines)] == [line.rstrip() for line in whole]


async def test_a_search_that_empties_the_list_lays_out_no_pane(tmp_path: Path) -> None:
    """Only the search box lays itself out on a letter: the neighbours pane keeps its height, blank, when no
    operator is left under the cursor (it laid the screen out twice on that letter, the slowest at 1M kernels)."""
    from textual.widget import Widget

    app = InvestigatorApp(_long_investigation(), theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await to_home(app, pilot)
        main, ops = app.main, app.main.ops
        neighbours = main.query_one(Neighbours)
        height = neighbours.size.height
        await pilot.press("slash")
        await pilot.pause()
        asked: list[str] = []
        refresh = Widget.refresh

        def counted(widget: Widget, *args: object, layout: bool = False, **kwargs: object) -> Widget:
            if layout:
                asked.append(type(widget).__name__)
            return refresh(widget, *args, layout=layout, **kwargs)

        Widget.refresh = counted  # type: ignore[method-assign]
        try:
            for letter in "layers.9zq":  # narrows to layers.9x ops, then to none
                asked.clear()
                await pilot.press(letter)
                await pilot.pause()
                assert set(asked) <= {"Input"}, f"{letter}: {asked}"
        finally:
            Widget.refresh = refresh  # type: ignore[method-assign]
        assert len(ops.shown) == 0 and ops.current is None
        assert neighbours.size.height == height and not neighbours.render().plain.strip()
        await pilot.press("escape")
        await pilot.pause()
        assert len(ops.shown) == 300 and neighbours.node_id == ops.current is not None
        assert "producers" in str(neighbours.render())
