"""The per-check views, the help screen and the command palette, driven with the keys a user presses."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from app_fixtures import memory_investigation, overflow_investigation, wide_investigation
from textual.app import App
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import TabbedContent

from ascend_tui.app.config import load_themes, variable_defaults
from ascend_tui.app.screens.help import HelpScreen
from ascend_tui.app.screens.memory import MemoryScreen, leak_trend, memory_items, memory_series
from ascend_tui.fmt import nbytes
from ascend_tui.app.screens.overflow import OverflowScreen, amplification_chains, dtype_max, headroom
from ascend_tui.app.screens.row_table import RowTable
from ascend_tui.app.app import InvestigatorApp
from ascend_tui.investigation import Investigation


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))


class Host(App[None]):
    """A bare app that opens one view, the way the investigator app does, and records what it dismissed with."""

    def __init__(self, make: Any) -> None:
        super().__init__()
        self.make = make
        self.results: list[str | None] = []

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return variable_defaults(self.current_theme)

    def on_mount(self) -> None:
        for theme in load_themes():
            self.register_theme(theme)
        self.theme = "ascend-dark"
        self.push_screen(self.make(), self.results.append)


def lines(table: RowTable) -> list[str]:
    """What the table shows on screen, header first, trailing blanks dropped."""
    out = [table.render_line(y).text.rstrip() for y in range(table.scrollable_content_region.height)]
    while out and not out[-1]:
        out.pop()
    return out


def status(app: App[Any]) -> str:
    return str(app.screen.query_one("#overflow-status, #memory-status").render())


# -- overflow ---------------------------------------------------------------------------------


def test_headroom_is_least_first_from_reference_and_skips_integer_outputs() -> None:
    h = headroom(overflow_investigation())
    assert h.source == "reference"
    assert h.nodes[:2] == ["attn[0]/sum.0", "attn[0]/exp.0"]
    assert h.bits[1] == pytest.approx(math.log2(65504 / 162754.79))
    assert "argmax.0" not in h.nodes and len(h) == 7
    assert h.past_range() == 2


def test_headroom_without_reference_uses_target_stats_and_marks_overflowed_ops() -> None:
    inv = overflow_investigation()
    inv.reference = None
    h = headroom(inv)
    assert h.source == "target"
    assert h.nodes[:4] == ["attn[0]/exp.0", "attn[0]/sum.0", "attn[0]/div.0", "add.0"]  # Inf and NaN: none left
    assert list(h.bits[:4]) == [-math.inf] * 4
    assert h.nodes[-1] == "norm/rsqrt.0"


def test_dtype_max_reads_the_spellings_tools_use() -> None:
    assert dtype_max("torch.float16") == dtype_max("fp16") == 65504.0
    assert dtype_max("bf16") == pytest.approx(3.3895e38, rel=1e-4)
    assert dtype_max("int64") is None


def test_amplification_chain_runs_from_the_input_to_the_origin_with_growth() -> None:
    chains = amplification_chains(overflow_investigation())
    assert len(chains) == 1  # inherited findings only point at their origin
    finding, hops = chains[0]
    assert finding.node == "attn[0]/exp.0"
    assert [h.node for h in hops] == ["input:0", "proj/mm.0", "scale/mul.0", "attn[0]/exp.0"]
    assert hops[1].growth == pytest.approx(16.0)
    assert hops[3].growth == pytest.approx(162754.79 / 12.0)
    assert hops[3].target_abs_max == math.inf


async def test_overflow_view_lists_origins_before_propagating_and_enter_focuses_the_op() -> None:
    app = Host(lambda: OverflowScreen(overflow_investigation()))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        shown = lines(app.screen.query_one("#findings-table", RowTable))
        assert shown[1].strip() == "origins (introduced here): 2"
        assert "attn[0]/exp.0" in shown[2] and shown[2].split()[:2] == ["error", "inf"]
        assert shown[4].strip() == "propagating (inherited): 2"
        assert status(app).startswith("row 1 of 4")
        await pilot.press("down")
        assert status(app).startswith("row 2 of 4")
        await pilot.press("down")  # skips the heading
        assert status(app).startswith("row 3 of 4")
        await pilot.press("enter")
        await pilot.pause()
        assert app.results == ["attn[0]/sum.0"]


async def test_overflow_view_chains_and_headroom_tabs() -> None:
    app = Host(lambda: OverflowScreen(overflow_investigation()))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2")
        await pilot.pause()
        assert app.screen.query_one(TabbedContent).active == "chains"
        chain = lines(app.screen.query_one("#chains-table", RowTable))
        assert chain[1].strip().startswith("inf at attn[0]/exp.0: exp overflows float16")
        hop = chain[5].split()
        assert hop[:3] == ["4", "162,755", "x13,563"] and hop[4] == "inf"
        assert "┃" in hop[3]  # the bar crosses the float16 max line
        assert "│" in chain[2] and "┃" not in chain[2]  # input:0 stays well under it
        await pilot.press("3")
        await pilot.pause()
        table = app.screen.query_one("#headroom-table", RowTable)
        assert table.has_focus
        shown = lines(table)
        assert shown[1].split()[:4] == ["-3.3", "651,019", "float16", "attn[0]/sum.0"]
        await pilot.press("escape")
        await pilot.pause()
        assert app.results == [None]


async def test_overflow_view_scrolls_a_long_headroom_list() -> None:
    app = Host(lambda: OverflowScreen(wide_investigation(20_000)))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        assert status(app).startswith("row 1 of 20000")
        await pilot.press("end")
        await pilot.pause()
        assert status(app).startswith("row 20000 of 20000")
        shown = lines(app.screen.query_one("#headroom-table", RowTable))
        assert shown[-1].split()[3] == "layers.0/add.0"  # 1.0 is the smallest value: the most headroom
        await pilot.press("enter")
        await pilot.pause()
        assert app.results == ["layers.0/add.0"]


async def test_overflow_view_of_a_clean_run_says_so() -> None:
    inv = overflow_investigation()
    inv.replace_findings("overflow", [])
    app = Host(lambda: OverflowScreen(inv))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert lines(app.screen.query_one("#findings-table", RowTable))[1].strip() == "no overflow findings"
        assert status(app).startswith("nothing to focus here")
        await pilot.press("enter", "2")
        await pilot.pause()
        assert lines(app.screen.query_one("#chains-table", RowTable))[1].strip() == "no amplification chains"
        assert app.results == []


async def test_operator_names_are_shown_as_written_never_as_markup() -> None:
    from dataclasses import replace

    from ascend_tui.graph.opgraph import OpGraph

    inv = overflow_investigation()
    graph = OpGraph("markup")
    for node in inv.graph:
        graph.add_node(replace(node, id="[b]x[/b]" + node.id) if node.id == "attn[0]/exp.0" else node)
    for edge in inv.graph.edges():
        rename = {"attn[0]/exp.0": "[b]x[/b]attn[0]/exp.0"}
        graph.add_edge(rename.get(edge.src, edge.src), rename.get(edge.dst, edge.dst), edge.out_slot, edge.in_slot)
    finding = replace(inv.findings[0], node="[b]x[/b]attn[0]/exp.0", message="[red]3 Inf[/red]", root_cause=None)
    shown_inv = Investigation(graph, stats=inv.stats, findings=[finding], run=inv.run)
    app = Host(lambda: OverflowScreen(shown_inv))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        row = lines(app.screen.query_one("#findings-table", RowTable))[2]
        assert "[b]x[/b]attn[0]/exp.0" in row and "[red]3 Inf[/red]" in row


# -- memory -----------------------------------------------------------------------------------


def test_a_finding_and_the_event_it_was_made_from_are_one_report() -> None:
    items = memory_items(memory_investigation())
    oob = [i for i in items if i.kind == "out_of_bounds"]
    assert len(oob) == 1 and oob[0].finding is not None and oob[0].event is not None
    assert oob[0].severity == "error" and oob[0].confidence == 1.0
    assert len(items) == 5  # oob, illegal read, uninitialized read, live leak, log leak


def test_leak_trend_and_sizes() -> None:
    trend = leak_trend(memory_investigation().memory_samples)
    assert trend is not None
    assert (trend.per_step, trend.grew, trend.steps) == (pytest.approx(1024 * 1024), 5, 5)
    assert nbytes(1536) == "1.5 KiB" and nbytes(-512) == "-512 B" and nbytes(-0.2) == "0 B"
    assert leak_trend([]) is None


async def test_memory_view_groups_by_kind_and_r_reaches_the_index_producer() -> None:
    app = Host(lambda: MemoryScreen(memory_investigation()))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#events-table", RowTable)
        shown = lines(table)
        assert shown[1].strip() == "out_of_bounds: 1"
        assert shown[2].split()[:4] == ["error", "100%", "live", "embed/embedding.0"]
        assert table.rows[1].cells[-1].endswith("(root cause add.0)")
        assert "r its root cause" in status(app)
        await pilot.press("r")
        await pilot.pause()
        assert app.results == ["add.0"]


async def test_memory_view_enter_focuses_the_op_and_unattributed_rows_stay() -> None:
    app = Host(lambda: MemoryScreen(memory_investigation()))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#events-table", RowTable)
        leak = next(i for i, r in enumerate(table.rows) if r.key is None and r.tone != "section")
        table.move_to(leak)
        await pilot.pause()
        assert "not on an operator" in status(app)
        await pilot.press("enter")
        await pilot.press("r")
        await pilot.pause()
        assert app.results == [] and isinstance(app.screen, MemoryScreen)
        assert [n.message for n in app._notifications] == ["this event is not attributed to an operator",
                                                          "no root cause recorded for this row"]
        table.move_to(0)
        await pilot.press("enter")
        await pilot.pause()
        assert app.results == ["embed/embedding.0"]


async def test_memory_view_trend_and_operator_tabs() -> None:
    app = Host(lambda: MemoryScreen(memory_investigation()))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2")
        await pilot.pause()
        trend = lines(app.screen.query_one("#trend-table", RowTable))
        assert trend[1].split()[:3] == ["iteration", "0", "100.0"]
        assert "+1.0 MiB" in trend[2]
        assert trend[6].count("█") > trend[1].count("█")
        await pilot.press("3")
        await pilot.pause()
        ops = lines(app.screen.query_one("#operators-table", RowTable))
        assert ops[1].split()[:3] == ["2", "error", "embed/embedding.0"]
        assert "(likely false positive)" not in ops[2]  # the matmul also has a real leak report
        await pilot.press("enter")
        await pilot.pause()
        assert app.results == ["embed/embedding.0"]


async def test_memory_view_with_only_a_log_shows_events_and_no_trend() -> None:
    inv = memory_investigation()
    inv.memory_samples = []
    inv.replace_findings("memory", [])
    app = Host(lambda: MemoryScreen(inv))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert not app.screen.query("TimeChart")
        await pilot.press("2")
        await pilot.pause()
        assert "no memory samples" in lines(app.screen.query_one("#trend-table", RowTable))[1]


def test_profiler_components_are_separate_series() -> None:
    from ascend_tui.evidence import MemorySample

    samples = [MemorySample(float(t), 100.0 + t * (label == "APP"), 0.0, label)
               for t in range(4) for label in ("APP", "PTA")]
    series = memory_series(samples)
    assert list(series) == ["APP", "PTA"] and all(len(v) == 4 for v in series.values())
    assert leak_trend(series["APP"]).grew == 3 and leak_trend(series["PTA"]).grew == 0  # type: ignore[union-attr]
    assert list(memory_series(memory_investigation().memory_samples)) == [""]  # one label per iteration


async def test_memory_view_of_a_real_profiler_folder(fixtures: Path) -> None:
    from ascend_tui.offline.open import open_path

    inv = open_path(fixtures / "profiler" / "level2_2025-11" / "ASCEND_PROFILER_OUTPUT")
    app = Host(lambda: MemoryScreen(inv))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2")
        await pilot.pause()
        table = app.screen.query_one("#trend-table", RowTable)
        headings = [r.cells[0] for r in table.rows if r.tone == "section"]
        assert len(headings) >= 2 and any(h.startswith("APP: ") for h in headings)
        assert lines(table)[0].split()[:3] == ["time", "(µs)", "allocated"]


async def test_memory_view_of_a_real_sanitizer_log(fixtures: Path) -> None:
    from ascend_tui.offline.open import open_path

    inv = open_path(fixtures / "sanitizer" / "compute_sanitizer_memcheck_real.log")
    app = Host(lambda: MemoryScreen(inv))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#events-table", RowTable)
        oob = next(r for r in table.rows if r.tone != "section" and "out-of-bounds read" in r.cells[-1])
        assert oob.key in inv.graph and oob.cells[1] == "compute-sanitizer"
        table.move_to(table.rows.index(oob))
        await pilot.press("enter")
        await pilot.pause()
        assert app.results == [oob.key]


# -- help -------------------------------------------------------------------------------------


class KeyedScreen(Screen[None]):
    BINDINGS = [Binding("p", "producer", "producer", id="graph.producer"),
                Binding("j,down", "down", "down", id="list.down"),
                Binding("z", "nothing", "does nothing now", id="graph.nothing")]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return None if action == "nothing" else True

    def action_producer(self) -> None:
        pass


async def test_help_lists_active_keys_grouped_with_ids_and_follows_the_keymap() -> None:
    class HelpHost(App[None]):
        BINDINGS = [Binding("question_mark", "show_help", "help", id="app.help")]

        def get_theme_variable_defaults(self) -> dict[str, str]:
            return variable_defaults(self.current_theme)

        def on_mount(self) -> None:
            self.set_keymap({"graph.producer": "u"})
            self.push_screen(KeyedScreen())

        def action_show_help(self) -> None:
            self.push_screen(HelpScreen())

    app = HelpHost()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        shown = lines(app.screen.query_one(RowTable))
        assert shown[0].split() == ["key", "binding", "id", "does"]
        rows = {r.cells[1]: " ".join(r.cells) for r in app.screen.query_one(RowTable).rows if len(r.cells) == 3}
        assert rows["graph.producer"].split()[0] == "u"
        assert rows["list.down"].split()[:3] == ["j", "/", "↓"]
        assert "app.help" in rows
        assert [line.strip() for line in shown if len(line.split()) == 1][:2] == ["graph", "list"]
        nothing = app.screen.query_one(RowTable).rows
        assert next(r for r in nothing if r.cells[1:2] == ("graph.nothing",)).tone == "muted"
        remap = str(app.screen.query_one("#help-remap").render())
        assert "cfg/ascend-tui/keymap.toml" in remap
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, KeyedScreen)


# -- the investigator app ---------------------------------------------------------------------


def investigator(inv: Investigation, tmp_path: Path) -> Any:
    from ascend_tui.app.app import InvestigatorApp

    return InvestigatorApp(inv, theme="ascend-dark", export_dir=tmp_path)


async def test_enter_in_the_overflow_view_focuses_the_origin_on_the_graph(tmp_path: Path) -> None:
    app = investigator(overflow_investigation(), tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.main.go("add.0")
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, OverflowScreen)
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is app.main
        assert app.main.ops.current == "attn[0]/exp.0"


async def test_memory_view_r_walks_to_the_producer_of_the_out_of_range_index(tmp_path: Path) -> None:
    app = investigator(memory_investigation(), tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("m")
        await pilot.pause()
        assert isinstance(app.screen, MemoryScreen)
        await pilot.press("r")
        await pilot.pause()
        assert app.screen is app.main
        assert app.main.ops.current == "add.0"


async def test_palette_commands_read_area_verb_object_and_run_app_actions(tmp_path: Path) -> None:
    from ascend_tui.app.commands import InvestigatorCommands

    app = investigator(overflow_investigation(), tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        provider = InvestigatorCommands(app.main)
        texts = [text for text, _help, _cb in provider.commands()]
        assert all(": " in t for t in texts)
        assert {"graph: go to first finding", "graph: show flagged only", "overflow: open view",
                "report: export JSON", "report: export Markdown", "operator: copy summary",
                "theme: switch to ascend-light", "theme: switch to ansi-dark"} <= set(texts)
        assert "memory: open view" not in texts  # no memory evidence in this investigation
        assert "theme: switch to ascend-dark" not in texts  # already on it
        assert "check: run overflow" in texts
        discovered = [hit.text async for hit in provider.discover()]
        assert discovered == texts and discovered[0] == "graph: go to first finding"
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"export markdown")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("enter")  # the export dialog shows the path; enter writes there
        await pilot.pause()
        assert (tmp_path / "ascend-tui-report.md").read_text().startswith("# ascend-tui report: demo:overflow")


async def test_palette_switches_theme_and_runs_graph_walks(tmp_path: Path) -> None:
    from ascend_tui.app.commands import InvestigatorCommands

    app = investigator(overflow_investigation(), tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.main.go("argmax.0")
        commands = {text: cb for text, _help, cb in InvestigatorCommands(app.main).commands()}
        await commands["graph: go to first finding"]()
        await pilot.pause()
        assert app.main.ops.current == "attn[0]/exp.0"
        commands["theme: switch to ansi-light"]()
        await pilot.pause()
        assert app.theme == "ansi-light"
        await pilot.press("o")  # our variables still resolve under a theme that lacks them
        await pilot.pause()
        assert isinstance(app.screen, OverflowScreen)


async def test_help_screen_in_the_app_shows_the_graph_keys(tmp_path: Path) -> None:
    app = investigator(overflow_investigation(), tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        ids = {r.cells[1] for r in app.screen.query_one(RowTable).rows if len(r.cells) == 3}
        assert {"graph.producer", "graph.root-cause", "app.export", "view.overflow", "list.down"} <= ids
        await pilot.press("escape", "o", "question_mark")
        await pilot.pause()
        ids = {r.cells[1] for r in app.screen.query_one(RowTable).rows if len(r.cells) == 3}
        assert {"overflow.chains", "view.close", "view.focus-op", "list.down", "app.help"} <= ids
        assert "graph.producer" not in ids  # the graph's keys do nothing in the overflow view


async def test_q_closes_a_view_instead_of_quitting_the_app() -> None:
    """In a pushed view `q` means back, as in most terminal tools; only the graph view quits."""
    inv = overflow_investigation()
    for make in (lambda: OverflowScreen(inv), lambda: MemoryScreen(memory_investigation())):
        app = Host(make)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            await pilot.press("q")
            await pilot.pause()
            assert app.is_running and app.results == [None]


async def test_story_view_opens_each_cause_onto_its_evidence_and_jumps(tmp_path: Path) -> None:
    from ascend_tui.app.screens.story import StoryScreen
    from ascend_tui.app.screens.row_table import RowTable

    inv = overflow_investigation()
    app = InvestigatorApp(inv, theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("S")
        await pilot.pause()
        story = app.screen
        assert isinstance(story, StoryScreen) and story.causes
        table = story.query_one(RowTable)
        first_cause_rows = [r for r in table.rows if r.data == story.causes[0].id]
        assert first_cause_rows and len(table.rows) > len(story.causes), "the first cause opens onto its evidence"
        await pilot.press("left")
        assert len(table.rows) == len(story.causes), "left closes it"
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is app.main and app.main.ops.current == story.causes[0].node


async def test_from_a_finding_R_lands_on_its_cause_in_the_story(tmp_path: Path) -> None:
    from ascend_tui.app.screens.story import StoryScreen
    from ascend_tui.app.screens.row_table import RowTable

    inv = overflow_investigation()
    inherited = next(f for f in inv.findings if f.attribution == "inherited")
    app = InvestigatorApp(inv, theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.main.go(inherited.node)
        await pilot.press("R")
        await pilot.pause()
        story = app.screen
        assert isinstance(story, StoryScreen)
        row = story.query_one(RowTable).current
        assert row is not None and row.data.startswith("cause-")
        cause = next(c for c in story.causes if c.id == row.data)
        assert any(fid.endswith("@" + inherited.node) for fid in cause.explains)


async def test_memory_view_lists_a_low_confidence_mapping_as_unmapped_with_its_guess(fixtures: Path,
                                                                                     tmp_path: Path) -> None:
    """A kernel that only might be `add.0` is not shown at `add.0`: the row says unmapped and names the guess."""
    from ascend_tui.checks.memory_log import findings_from_events, prepare_events
    from ascend_tui.readers.sanitizer.log import parse_file
    from ascend_tui.graph.opgraph import OpGraph, OpNode

    graph = OpGraph()
    for i, nid in enumerate(("add.0", "blocks.0/add.0")):
        graph.add_node(OpNode(nid, "aten.add", nid.rpartition("/")[0], i))
    log = parse_file(fixtures / "sanitizer" / "mssanitizer_memcheck_doc_examples.log")
    events = prepare_events(graph, log.events)
    inv = Investigation(graph)
    inv.memory_events = list(events)
    inv.add_findings(findings_from_events(graph, events))
    assert not inv.findings_for("add.0"), "a guess never becomes an error at that operator"
    app = Host(lambda: MemoryScreen(inv))
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#events-table", RowTable)
        row = next(r for r in table.rows if r.tone != "section" and "add_custom_kernel" in r.cells[2])
        assert row.key is None and "unmapped; guess add.0, 2 candidates" in row.cells[2]


async def test_launched_from_the_cli_the_app_opens_on_the_story(tmp_path: Path) -> None:
    from ascend_tui.app.screens.story import StoryScreen

    app = InvestigatorApp(overflow_investigation(), theme="textual-dark", export_dir=tmp_path, story=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, StoryScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.main


async def test_overflow_view_shows_the_measured_effect_on_the_outputs(tmp_path: Path) -> None:
    inv = overflow_investigation()
    inv.run.extra["output_effect"] = {"dtype": "float16", "output": "output 0", "cosine": 0.5234, "rel_l2": 0.71,
                                      "rows_zeroed": 17, "rows": 32, "nonfinite": 0, "damaged": True}
    app = InvestigatorApp(inv, theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(140, 36)) as pilot:
        await pilot.pause()
        await pilot.press("o")
        await pilot.pause()
        summary = str(app.screen.query_one("#overflow-summary").render())
        assert "effect on the outputs: cosine 0.5234, relative L2 error 71.0% against float32" in summary
        assert "17 of 32 rows became 0" in summary and "beyond the float16 thresholds" in summary
