"""The profile browser driven with keys: sort, group, drill-down to the graph, advice, timeline, diff; snapshots."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from textual.app import App

from ascend_tui.app.config import load_themes, variable_defaults
from ascend_tui.app.screens.profile import ProfileScreen, module_tree, share_bar
from ascend_tui.app.screens.row_table import RowTable
from ascend_tui.app.widgets.timeline_strip import TimelineStrip
from ascend_tui.offline.open import open_path
from ascend_tui.investigation import Investigation
from ascend_tui.offline.profile_baseline import attach_baseline
from tests.conftest import FIXTURES
from app_fixtures import to_home

PROF = FIXTURES / "profiler"


@pytest.fixture(autouse=True)
def _fixed_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def profile_inv(baseline: bool = True) -> Investigation:
    inv = open_path(PROF / "level1_2025-01")
    if baseline:
        attach_baseline(inv, open_path(PROF / "level0_2025-01"))
    inv.run.target = "rank0_ascend_pt"  # no machine paths on screen
    return inv


class Host(App[None]):
    """Opens the profile view as the investigator app does and records what it dismissed with."""

    def __init__(self, inv: Investigation) -> None:
        super().__init__()
        self.inv = inv
        self.results: list[str | None] = []

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return variable_defaults(self.current_theme)

    def on_mount(self) -> None:
        for theme in load_themes():
            self.register_theme(theme)
        self.theme = "ascend-dark"
        self.push_screen(ProfileScreen(self.inv), self.results.append)


def table(app: App[Any], name: str) -> RowTable:
    return app.screen.query_one(f"#{name}", RowTable)


def first_cells(t: RowTable) -> list[str]:
    return [r.cells[0] for r in t.rows]


def status(app: App[Any]) -> str:
    return str(app.screen.query_one("#profile-status").render())


async def test_sort_by_any_column_with_one_key() -> None:
    app = Host(profile_inv())
    async with app.run_test(size=(120, 40)) as pilot:
        ops = table(app, "ops-table")
        assert first_cells(ops)[0] == "hcom_allReduce_" and ops.columns[2].label == "total ▼"
        totals = [r.data[2] for r in ops.rows]
        assert totals == sorted(totals, reverse=True)
        await pilot.press("s", "s")  # total -> share -> mean
        assert ops.columns[4].label == "mean ▼"
        means = [r.data[4] for r in ops.rows]
        assert means == sorted(means, reverse=True)
        await pilot.press("S")
        assert ops.columns[4].label == "mean ▲" and [r.data[4] for r in ops.rows] == sorted(means)
        await pilot.press("s", "s", "s", "s")  # max, category, bound, then the name column a to z
        assert ops.columns[0].label.endswith("▲")
        assert first_cells(ops) == sorted(first_cells(ops), key=str.lower)


async def test_group_by_op_module_and_category() -> None:
    app = Host(profile_inv())
    async with app.run_test(size=(120, 40)) as pilot:
        ops = table(app, "ops-table")
        await pilot.press("v")
        assert ops.columns[0].label == "op" and "trans_TransData_0" in first_cells(ops)
        await pilot.press("v")
        assert ops.columns[0].label == "module" and "AlexNet_0.Sequential_0.Conv2d_0" in first_cells(ops)
        await pilot.press("v")
        assert ops.columns[0].label == "category"
        assert set(first_cells(ops)) == {"communication", "compute", "vector", "layout"}
        assert "by category" in status(app)


async def test_drill_from_type_to_ops_to_graph_and_back() -> None:
    app = Host(profile_inv())
    async with app.run_test(size=(120, 40)) as pilot:
        ops = table(app, "ops-table")
        ops.move_to(first_cells(ops).index("TransData"))
        await pilot.press("enter")
        assert ops.columns[0].label == "op"
        assert sorted(first_cells(ops)) == ["aclnnMaxPool2dWithMask_TransDataSpecial_TransData", "trans_TransData_0",
                                            "trans_TransData_1", "trans_TransData_2"]
        assert "op type TransData" in status(app)
        await pilot.press("b")
        assert ops.columns[0].label.startswith("op type") and "TransData" in first_cells(ops)
        await pilot.press("enter")  # drill again, then choose the first op: back to the graph on its node
        name = ops.rows[ops.cursor].cells[0]
        await pilot.press("enter")
        assert app.results == [name] and name in app.inv.graph


async def test_advice_jumps_to_its_ops() -> None:
    app = Host(profile_inv())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4")
        advice = table(app, "advice-table")
        kinds = [r.cells[1] for r in advice.rows]
        assert kinds[0] == "regression" and "unbound" in kinds and "host_bound" in kinds
        advice.move_to(kinds.index("unbound"))
        op_type = advice.rows[advice.cursor].cells[2]
        await pilot.press("enter")
        ops = table(app, "ops-table")
        assert app.screen.tab == "ops"
        assert f"op type {op_type}" in status(app) and ops.columns[0].label == "op"


async def test_diff_regressions_first_with_coloured_deltas() -> None:
    app = Host(profile_inv())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("5")
        diff = table(app, "diff-table")
        deltas = [r.data[3] for r in diff.rows]
        assert deltas == sorted(deltas, reverse=True) and deltas[0] > 0 > deltas[-1]
        assert diff.rows[0].cell_tones[3] == "bad" and diff.rows[-1].cell_tones[3] == "good"
        assert diff.rows[0].cells[0] == "hcom_allReduce_" and diff.rows[0].cells[3].startswith("+")
        await pilot.press("v")
        assert diff.columns[0].label == "module"


async def test_timeline_strip_moves_with_the_keyboard() -> None:
    app = Host(profile_inv(baseline=False))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("3")
        strip = app.screen.query_one(TimelineStrip)
        assert strip.has_focus and strip.segments.source == "overlap track"
        kinds = strip.dominant()  # the fixture's trace window holds Computing and Free spans only
        assert {"compute", "free"} <= set(kinds) and "communication" not in kinds
        await pilot.press("l", "l", "L")
        assert strip.cursor == 12
        info = str(app.screen.query_one("#timeline-info").render())
        assert "overlap track" in info and " of " in info
        steps = table(app, "steps-table")
        assert steps.rows[0].cells[0] == "50" and steps.rows[0].cell_tones[4] == "warning"


def test_module_tree_and_bars() -> None:
    tree = module_tree(profile_inv(baseline=False).profile)
    assert tree[0][:2] == ("AlexNet_0", 0)
    assert ("AlexNet_0.Sequential_0.Conv2d_0", 2) in [(p, d) for p, d, _, _ in tree]
    assert share_bar(0.5, 8) == "████    " and share_bar(1 / 16, 8) == "▌       "


def test_view_is_offered_for_profiles_only() -> None:
    assert ProfileScreen.available(profile_inv(baseline=False))
    assert not ProfileScreen.available(open_path(PROF / "level1_2025-01" / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv"))


def test_home_screen_lights_t_for_hot_ops() -> None:
    inv = profile_inv(baseline=False)
    hot = [f.node for f in inv.findings if f.kind in ("hotspot", "hot_op")]
    assert "Conv2D1" in hot  # the longest single kernel after the allreduce
    assert hot and all(inv.badges(n).get("profile") for n in hot)


def _app(tmp_path: Path) -> Any:
    from ascend_tui.app.app import InvestigatorApp

    return InvestigatorApp(profile_inv(), theme="ascend-dark", export_dir=tmp_path)


def test_snapshot_profile_view_80x24(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(_app(tmp_path), press=["T"], terminal_size=(80, 24))


def test_snapshot_profile_view_built_ahead_80x24(snap_compare: Any, tmp_path: Path) -> None:
    """Composed ahead off screen, then opened: the same picture as `test_snapshot_profile_view_80x24`'s."""
    async def ahead(pilot: Any) -> None:
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        while pilot.app.screen is not pilot.app.main:
            pilot.app.pop_screen()
            await pilot.pause()
        assert pilot.app._kept.get("profile") is not None

    assert snap_compare(_app(tmp_path), press=["T"], terminal_size=(80, 24), run_before=ahead)


def test_snapshot_profile_view_ansi_dark_timeline_80x24(snap_compare: Any, tmp_path: Path) -> None:
    """Under an ANSI theme the tab labels are dim, the lit one bold (as Textual's tabs draw them)."""
    from ascend_tui.app.app import InvestigatorApp

    app = InvestigatorApp(profile_inv(), theme="ansi-dark", export_dir=tmp_path)
    assert snap_compare(app, press=["T", "3"], terminal_size=(80, 24))


def test_snapshot_profile_view_160x48(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(_app(tmp_path), press=["T", "5"], terminal_size=(160, 48))


async def test_module_tree_and_step_table_sort_too() -> None:
    app = Host(profile_inv(baseline=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        mods = table(app, "modules-table")
        assert mods.columns[0].label == "module (tree)" and mods.rows[0].cells[0] == "AlexNet_0"
        await pilot.press("s")  # the tree becomes a flat list of full paths, a to z
        paths = first_cells(mods)
        assert mods.columns[0].label == "module ▲" and paths == sorted(paths, key=str.lower)
        await pilot.press("s")
        shares = [r.data[1] for r in mods.rows]
        assert mods.columns[1].label == "share ▼" and shares == sorted(shares, reverse=True)
        await pilot.press("s", "s", "s")  # time, calls, then back to the tree
        assert mods.columns[0].label == "module (tree)"
    cluster = open_path(PROF / "msprof_analyze")
    cluster.run.target = "cluster"
    app = Host(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("3", "s", "s", "s")  # step -> rank -> computing -> comm (exposed)
        steps = table(app, "steps-table")
        comm = [r.data[3] for r in steps.rows]
        assert len(comm) == 16 and comm == sorted(comm, reverse=True)
        assert steps.columns[3].label == "comm (exposed) ▼" and steps.rows[0].cells[1] == "11"


async def test_advice_computing_then_filled_in_when_the_job_ends() -> None:
    """Opened while its findings are still computed, the view says so, then shows them when the job's newer
    investigation (the same profile) arrives."""
    import threading

    from textual import work

    done = inv_final = profile_inv(baseline=False)
    first = inv_final.snapshot()
    first.findings, first._by_node = [], {}
    release = threading.Event()

    class Opening(Host):
        def on_mount(self) -> None:
            self.inv = first
            self._job()
            super().on_mount()

        @work(thread=True, group="job")
        def _job(self) -> None:
            release.wait(10)
            self.call_from_thread(setattr, self, "inv", done)

    app = Opening(first)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProfileScreen) and screen.pending
        assert "advice: computing" in str(screen.query_one("#profile-summary").render())
        assert table(app, "advice-table").rows == [] and "computing" in table(app, "advice-table").empty
        release.set()
        await app.workers.wait_for_complete()
        await pilot.pause(0.5)
        assert not screen.pending and "computing" not in str(screen.query_one("#profile-summary").render())
        kinds = [r.data[1] for r in table(app, "advice-table").rows]
        assert kinds and set(kinds) == {f.kind for f in done.findings if f.check == "profile"}


def test_open_hands_over_what_was_read_before_the_findings() -> None:
    """The app's open job shows the profile first and computes the advice after (the same profile object)."""
    seen: list[Investigation] = []
    inv = open_path(PROF / "level1_2025-01", on_partial=seen.append)
    assert seen and not any(f.check == "profile" for f in seen[-1].findings)
    assert any(f.check == "profile" for f in inv.findings) and seen[-1].profile is inv.profile


def test_strip_shares_from_running_sums_equal_a_scan_of_every_interval() -> None:
    """The strip's per-cell time of each kind (running sums, two searchsorted a cell edge) is what a scan of every
    interval gives: overlapping intervals each count, windows before, across and after them, empty windows 0."""
    import numpy as np

    from ascend_tui.app.widgets.timeline_strip import Segments

    rng = np.random.default_rng(7)
    start = rng.uniform(0, 1000, 400)
    dur = rng.exponential(5, 400)
    kind = rng.integers(0, 3, 400)
    segments = Segments(start, dur, kind, "kernels")
    for lo, hi in [(0.0, 1.0), (-50.0, 2000.0), (500.0, 500.5), (990.0, 1100.0), (3000.0, 4000.0), (10.0, 10.0)]:
        scan = np.bincount(kind, weights=np.clip(np.minimum(start + dur, hi) - np.maximum(start, lo), 0, None),
                           minlength=3)
        assert np.allclose(segments.share(lo, hi), scan, rtol=1e-9, atol=1e-9)
    gap = Segments(np.array([0.0, 10.0]), np.array([1.0, 1.0]), np.array([0, 1]), "kernels")
    assert gap.share(2.0, 9.0).tolist() == [0.0, 0.0, 0.0] and gap.share(0.0, 11.0).tolist() == [1.0, 1.0, 0.0]
    assert gap.end_us == 11.0
    edges = np.linspace(0.0, 11.0, 12)
    cells = gap.shares(edges)
    assert cells.shape == (3, 11) and cells[:, 0].tolist() == [1.0, 0.0, 0.0] and not cells[:, 1:10].any()


async def test_view_data_made_once_per_profile_and_ahead() -> None:
    """The groupings' rows are made once per profile: prepared ahead, a regroup and a reopened view take the same
    rows; a tab switch between two tables does not recompose the footer (its keys are the same), nor one to the strip
    (its keys are some of a table's: the others are hidden)."""
    from ascend_tui.app.screens.profile_data import data_for
    from textual.widgets._footer import FooterKey

    from ascend_tui.app.widgets.footer import KeyFooter

    inv = profile_inv(baseline=False)
    ProfileScreen.prepare(inv, lambda: False)
    data = data_for(inv.profile)
    assert data is data_for(inv.profile)
    by_op = data.rows("name", (), inv.graph)
    app = Host(inv)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("v")
        ops = table(app, "ops-table")
        assert ops.columns[0].label == "op" and {id(r) for r in ops.rows} == {id(r) for r in by_op}
        footer = app.screen.query_one(KeyFooter)
        await pilot.press("4")
        keys, composed = footer.shown, footer._composed
        await pilot.press("1", "4")
        assert keys is not None and footer._composed is composed and footer.shown == keys, "same keys, no recompose"
        await pilot.press("3")  # the strip has fewer keys than a table: the others hidden, not recomposed
        assert footer.shown != keys and set(footer.shown or ()) < set(keys) and footer._composed is composed
        assert [w.key for w in footer.query(FooterKey) if w.display] == [p[0] for p in footer.shown or ()]
        assert "enter" not in [w.key for w in footer.query(FooterKey) if w.display]
        await pilot.press("4")
        assert footer.shown == keys and footer._composed is composed and table(app, "steps-table") is not None


async def test_a_tab_switch_rebuilds_no_tab() -> None:
    """Each tab's widgets are made the first time it is shown and kept: switching back and forth (keys and clicks on
    the bar) makes none again, and each table keeps its rows and cursor; one pane shows, its tab lit."""
    from textual.widgets import ContentSwitcher

    from ascend_tui.app.widgets.tab_bar import TabBar

    app = Host(profile_inv())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, ProfileScreen)
        ops = table(app, "ops-table")
        rows = ops.rows
        ops.move_to(3)
        made: list[str] = []
        pane = screen._pane
        screen._pane = lambda pane_id: made.append(pane_id) or pane(pane_id)  # type: ignore[method-assign]
        await pilot.press("2", "3", "4", "5", "1")
        assert made == ["modules", "timeline", "diff"]
        widgets = {w.id: w for w in screen.query("RowTable, TimelineStrip")}
        assert set(widgets) == {"ops-table", "modules-table", "timeline-strip", "steps-table", "advice-table",
                                "diff-table"}
        await pilot.press("3", "2", "5", "4", "1", "4", "3")
        bar = screen.query_one(TabBar)
        await pilot.click(TabBar, offset=(dict((t, lo) for t, lo, _ in bar.spans())["modules"] + 2, 0))
        assert screen.tab == "modules" and screen.focused is table(app, "modules-table") and bar.active == "modules"
        await pilot.click(TabBar, offset=(1, 0))
        assert made == ["modules", "timeline", "diff"], "no tab made twice"
        assert {w.id: w for w in screen.query("RowTable, TimelineStrip")} == widgets
        assert table(app, "ops-table") is ops and ops.rows is rows and ops.cursor == 3
        assert screen.tab == "ops" and bar.active == "ops" and screen.focused is ops and "row 4 of" in status(app)
        shown = [c.id for c in screen.query_one(ContentSwitcher).children if c.display]
        assert shown == ["ops-table"]


async def test_profile_view_kept_once_built_and_made_anew_for_another_investigation() -> None:
    """The profile view is composed ahead; `T` again shows the same screen (its tab as left); another investigation
    gets a new one."""
    from ascend_tui.app.app import InvestigatorApp

    app = InvestigatorApp(profile_inv())
    async with app.run_test(size=(120, 40)) as pilot:
        await to_home(app, pilot)  # the story screen it may open on
        built = app._kept.get("profile")  # composed ahead once the open job was done
        assert isinstance(built, ProfileScreen) and built.is_running and built.inv is app.inv
        await pilot.press("T")
        first = app.screen
        assert first is built
        await pilot.press("2", "escape")
        assert app.screen is app.main
        await pilot.press("T")
        assert app.screen is first and first.tab == "modules"
        assert app.screen.focused is first.query_one("#modules-table")
        await pilot.press("escape")
        app._show(profile_inv(baseline=False))  # another investigation on screen: the kept view is let go
        await pilot.pause()
        assert not app.is_screen_installed(first)
        await pilot.press("T")
        second = app.screen
        assert isinstance(second, ProfileScreen) and second is not first and second.inv is app.inv
        assert not app.is_screen_installed(first) and app.is_screen_installed(second)
        assert second.tab == "ops"
        await pilot.press("escape")
        assert app.screen is app.main


async def test_kept_profile_view_follows_a_theme_changed_while_it_was_hidden() -> None:
    """Shown again, the kept view skips restyling only when nothing it is styled by changed: after a theme change its
    tables take the new theme's colours."""
    from textual.color import Color

    from ascend_tui.app.app import InvestigatorApp

    app = InvestigatorApp(profile_inv(), theme="ascend-dark")
    async with app.run_test(size=(120, 40)) as pilot:
        await to_home(app, pilot)
        await pilot.press("T")
        screen = app.screen
        assert isinstance(screen, ProfileScreen)
        surface = Color.parse(app.get_css_variables()["surface"])
        assert screen.query_one("#ops-table").styles.background == surface
        await pilot.press("escape", "T", "escape")  # shown again with nothing changed: the same colours
        assert screen.query_one("#ops-table").styles.background == surface
        app.theme = "ascend-light"
        await pilot.pause()
        await pilot.press("T")
        light = Color.parse(app.get_css_variables()["surface"])
        assert app.screen is screen and light != surface
        assert screen.query_one("#ops-table").styles.background == light


async def test_opened_while_its_tabs_are_laid_out_ahead_it_shows_the_first_tab() -> None:
    """`T` as soon as the view is composed ahead, while its panes are still being made and laid out off screen: the
    ops tab shows, lit and focused, and stays so once that work would have gone on."""
    from textual.widgets import ContentSwitcher

    from ascend_tui.app.app import InvestigatorApp

    app = InvestigatorApp(profile_inv(baseline=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        while app.screen is not app.main:
            app.pop_screen()
        await pilot.press("T")
        screen = app.screen
        assert isinstance(screen, ProfileScreen)
        for _ in range(2):
            assert screen.tab == "ops" and screen.query_one(ContentSwitcher).current == "ops-table"
            assert screen.focused is screen.query_one("#ops-table")
            await pilot.pause(0.3)
        await pilot.press("3")
        assert screen.query_one(ContentSwitcher).current == "timeline" and screen.tab == "timeline"


async def test_regrouping_the_ops_table_lays_nothing_out_whether_or_not_its_rows_fit() -> None:
    """`v` from op types (9 rows here) to ops and back: the table's bar stays, so the view is not laid out again
    (at 1M kernels a bar that came or went cost a layout of the whole view, 50-95 ms)."""
    from ascend_tui.app.app import InvestigatorApp

    app = InvestigatorApp(profile_inv(baseline=False), theme="ascend-dark")
    async with app.run_test(size=(100, 22)) as pilot:
        await to_home(app, pilot)
        await pilot.press("T")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProfileScreen)
        table = screen.query_one("#ops-table", RowTable)
        layouts: list[object] = []
        screen.screen_layout_refresh_signal.subscribe(screen, layouts.append, immediate=True)
        fits = []
        for _ in range(4):  # op type -> op -> module -> category -> op type
            await pilot.press("v")
            await pilot.pause()
            await pilot.pause()
            fits.append(len(table.rows) + 1 <= table.scrollable_content_region.height)
            assert table.vertical_scrollbar.display
        assert True in fits and False in fits, fits  # some groupings fit the table's height, some do not
        assert layouts == [], f"{len(layouts)} layouts"


async def test_a_tab_switch_restyles_nothing_and_styles_each_widget_as_the_stylesheet_does() -> None:
    """Once each tab was shown, switching tabs moves the focus without restyling any widget from the stylesheet
    (Textual restyled the table losing the focus and the one gaining it, nine throwaway nodes each); every table and
    the strip still hold the styles a restyle from the stylesheet gives them, the focused cursor lit."""
    app = Host(profile_inv())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await pilot.press("2", "3", "4", "5", "1", "2", "3", "4", "5", "1")  # every pane made, focused and left once
        restyled: list[object] = []
        apply = app.stylesheet.apply
        app.stylesheet.apply = lambda node, **kw: restyled.append(node) or apply(node, **kw)  # type: ignore[method-assign]
        for key in "23451":
            await pilot.press(key)
            assert screen.focused is screen._focus_target(screen.tab)
        app.stylesheet.apply = apply  # type: ignore[method-assign]
        assert restyled == []
        widgets = list(screen.query("PaneTable, TimelineStrip"))
        assert len(widgets) == 6

        def styles() -> list[tuple[dict[str, object], dict[str, dict[str, object]]]]:
            return [(w.styles.base.get_rules(), {k: v.get_rules() for k, v in w._component_styles.items()})
                    for w in widgets]

        kept = styles()
        app.stylesheet.update_nodes(widgets)  # from the stylesheet, as Textual does on a focus change
        assert styles() == kept
        ops, modules = table(app, "ops-table"), table(app, "modules-table")
        assert screen.focused is ops
        assert ops.get_component_rich_style("row-table--cursor") != modules.get_component_rich_style("row-table--cursor")


async def test_a_tab_switch_paints_no_widget_the_pane_covers() -> None:
    """A tab switch paints the pane shown, the bar and the status line, not the switcher behind the pane (setting
    `ContentSwitcher.current` repainted all of it) nor a container around a table (each table is its own pane)."""
    from textual._styles_cache import StylesCache
    from textual.widgets import ContentSwitcher

    app = Host(profile_inv())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await pilot.press("2", "3", "4", "5", "1")
        painted: list[object] = []  # each widget that painted a line (not taken from its cache)
        render_widget, render_line = StylesCache.render_widget, StylesCache.render_line
        lines: list[int] = []

        def widget_painted(cache: StylesCache, widget: Any, crop: Any) -> Any:
            before = len(lines)
            strips = render_widget(cache, widget, crop)
            if len(lines) > before:
                painted.append(widget)
            return strips

        def line_painted(cache: StylesCache, *args: Any, **kwargs: Any) -> Any:
            lines.append(1)
            return render_line(cache, *args, **kwargs)

        StylesCache.render_widget, StylesCache.render_line = widget_painted, line_painted  # type: ignore[method-assign]
        try:
            await pilot.press("2", "4", "5", "1")
        finally:
            StylesCache.render_widget, StylesCache.render_line = render_widget, render_line  # type: ignore[method-assign]
        switcher = screen.query_one(ContentSwitcher)
        assert [type(c).__name__ for c in switcher.children if c.id != "timeline"] == ["PaneTable"] * 4
        assert {w.id for w in painted if isinstance(w, RowTable)} >= {"ops-table", "modules-table", "advice-table"}
        assert switcher not in painted and not [w for w in painted if w.parent is switcher and not isinstance(w, RowTable)]


async def test_moving_along_the_strip_lays_out_only_when_its_line_wraps() -> None:
    """h/l rewrite the line under the strip; while it fits one line nothing is laid out, and where it wraps (a
    narrow terminal) the line grows to show all of it."""
    for width, fits in ((120, True), (50, False)):
        app = Host(profile_inv(baseline=False))
        async with app.run_test(size=(width, 30)) as pilot:
            await pilot.press("3", "l")
            screen = app.screen
            info = screen.query_one("#timeline-info")
            layouts: list[object] = []
            screen.screen_layout_refresh_signal.subscribe(screen, layouts.append, immediate=True)
            before = str(info.render())
            await pilot.press("l")
            after = str(info.render())
            assert after != before and "overlap track" in after
            assert (layouts == []) is fits
            assert (info.size.height == 1) is fits


async def test_built_ahead_even_the_first_switch_to_each_tab_restyles_nothing() -> None:
    """Composed and laid out ahead, the view also focused each pane's widget off screen: opened, the first switch
    to every tab restyles no widget, and the tab shown is focused and lit."""
    from ascend_tui.app.app import InvestigatorApp

    app = InvestigatorApp(profile_inv())
    async with app.run_test(size=(120, 40)) as pilot:
        await to_home(app, pilot)
        built = app._kept.get("profile")
        assert isinstance(built, ProfileScreen)
        for _ in range(40):  # the panes laid out ahead, one a frame
            if not built._ahead:
                break
            await pilot.pause(0.05)
        assert not built._ahead
        await pilot.press("T")
        assert app.screen is built and built.focused is table(app, "ops-table")
        restyled: list[object] = []
        apply = app.stylesheet.apply
        app.stylesheet.apply = lambda node, **kw: restyled.append(node) or apply(node, **kw)  # type: ignore[method-assign]
        try:
            for key in "23451":
                await pilot.press(key)
                assert built.tab == built.query_one("TabBar").active and built.focused is built._focus_target(built.tab)
        finally:
            app.stylesheet.apply = apply  # type: ignore[method-assign]
        assert restyled == []


async def test_opened_while_another_pane_is_focused_ahead_it_focuses_the_tab_shown() -> None:
    """`T` just as laying out ahead showed and focused another tab's pane (off screen): the first tab shows, lit,
    its table focused, not the hidden pane's."""
    from textual.widgets import ContentSwitcher

    from ascend_tui.app.app import InvestigatorApp

    app = InvestigatorApp(profile_inv())
    async with app.run_test(size=(120, 40)) as pilot:
        await to_home(app, pilot)
        built = app._kept.get("profile")
        assert isinstance(built, ProfileScreen)
        for _ in range(40):
            if not built._ahead:
                break
            await pilot.pause(0.05)
        built._switch_to("modules")  # where `_lay_out_ahead` leaves a pane it shows ahead
        built.set_focus(built.query_one("#modules-table"), scroll_visible=False)
        await pilot.press("T")
        assert app.screen is built and built.tab == "ops"
        assert built.query_one(ContentSwitcher).current == "ops-table"
        assert built.focused is built.query_one("#ops-table")
        await pilot.pause()
        assert built.focused is built.query_one("#ops-table")
