"""The graph view (`V`), driven with the keys a user presses: the list's walks, modules opened and closed,
the golden side of a real msprobe compare beside the target, and what it looks like at 80x24 and 160x48."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from app_fixtures import overflow_investigation
from conftest import FIXTURES
from live_investigations import screen_text

from ascend_tui.app.app import InvestigatorApp
from ascend_tui.app.screens.graph_view import GraphScreen
from ascend_tui.app.widgets.graph_canvas import GraphCanvas
from ascend_tui.graph.hierarchy import GOLDEN
from ascend_tui.investigation import Investigation
from ascend_tui.offline.compare import compare

LLM = Path(__file__).parent / "data" / "llm_dumps"
MSPROBE = FIXTURES / "msprobe"
NOISE_AT = "model.layers.0/add.1"  # where the bf16_noise dump's error is introduced
WALK_KEYS = ["f", "p", "p", "c", "r", "r", "b", "n", "n", "N", "1", "p", "b", "b"]


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ascend_tui.app.widgets import graph_canvas

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    graph_canvas._DRAWINGS.clear()  # the view keeps each investigation's drawing (golden side included) per app run


@pytest.fixture(scope="module")
def noisy() -> Investigation:
    assert (LLM / "bf16_noise").is_dir() and FIXTURES.is_dir(), "msprobe dumps missing"
    return compare(LLM / "bf16_noise", LLM / "fp32", workers=1).investigation


def _canvas(app: Any) -> GraphCanvas:
    return app.screen.query_one(GraphCanvas)


async def _walk(inv: Investigation, keys: list[str], graph: bool) -> list[str | None]:
    """The operator the app's cursor is on after each key, pressed in the list or in the graph view."""
    app = InvestigatorApp(inv, theme="ascend-dark")
    seen: list[str | None] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        if graph:
            await pilot.press("V")
            await pilot.pause()
            assert isinstance(app.screen, GraphScreen)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
            here = app.main.ops.current
            if graph:
                assert isinstance(app.screen, GraphScreen), key
                assert _canvas(app).cursor == here, f"after {key}: the drawing's cursor is not the list's"
            seen.append(here)
    return seen


@pytest.mark.parametrize("case", ["overflow", "msprobe"])
async def test_the_graph_views_walk_is_the_lists(case: str, noisy: Investigation) -> None:
    make = (lambda: overflow_investigation()) if case == "overflow" else (lambda: noisy)
    in_list = await _walk(make(), WALK_KEYS, graph=False)
    in_graph = await _walk(make(), WALK_KEYS, graph=True)
    assert in_graph == in_list
    assert len(set(in_list)) >= 3  # the keys really went somewhere


async def test_moving_in_the_drawing_moves_the_lists_cursor_and_back() -> None:
    app = InvestigatorApp(overflow_investigation(), theme="ascend-dark")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("j", "j")  # the list's cursor, before the view opens
        start = app.main.ops.current
        await pilot.press("V")
        await pilot.pause()
        canvas = _canvas(app)
        assert canvas.cursor == start  # the drawing opens on the list's operator, its modules open
        await pilot.press("j")
        await pilot.pause()
        below = canvas.box
        assert below is not None and below.key != start
        expect = below.key if below.kind == "op" else canvas.h.first_op(below.key)
        assert app.main.ops.current == expect
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.main and app.main.ops.current == expect


async def test_a_module_opens_with_enter_and_closes_with_minus() -> None:
    app = InvestigatorApp(overflow_investigation(), theme="ascend-dark")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("f", "V")  # the first finding, attn[0]/exp.0, inside module attn[0]
        await pilot.pause()
        canvas = _canvas(app)
        kinds = {b.key: b.kind for b in canvas.scene.boxes}
        assert canvas.cursor == "attn[0]/exp.0" and kinds["attn[0]"] == "frame"
        assert kinds["proj"] == "module" and "proj/mm.0" not in kinds  # modules the cursor is not in stay closed
        await pilot.press("minus")
        await pilot.pause()
        kinds = {b.key: b.kind for b in canvas.scene.boxes}
        assert canvas.cursor == "attn[0]" and kinds["attn[0]"] == "module"
        assert not any(k.startswith("attn[0]/") for k in kinds)
        assert "attn[0] · 3 ops · error inside" in str(app.screen.query_one("#graph-status").render())
        text = screen_text(app)
        assert "▸ attn[0] ·3 O" in text
        await pilot.press("enter")
        await pilot.pause()
        kinds = {b.key: b.kind for b in canvas.scene.boxes}
        assert kinds["attn[0]"] == "frame" and {"attn[0]/exp.0", "attn[0]/sum.0", "attn[0]/div.0"} <= set(kinds)
        assert canvas.cursor == "attn[0]/exp.0" and app.main.ops.current == "attn[0]/exp.0"
        await pilot.press("k")  # up to the module above, closed: enter opens it
        await pilot.pause()
        assert canvas.box is not None and canvas.box.kind == "module"
        opened = canvas.cursor
        await pilot.press("o")
        await pilot.pause()
        assert {b.key: b.kind for b in canvas.scene.boxes}[opened] == "frame"
        await pilot.press("minus", "minus")  # the model's top level: nothing more to close
        await pilot.pause()
        assert any("nothing to close" in n.message for n in app._notifications)
        await pilot.press("f", "enter")  # enter on an operator goes to it in the list
        await pilot.pause()
        assert app.screen is app.main and app.main.ops.current == "attn[0]/exp.0"


async def test_side_by_side_on_a_real_msprobe_pair_aligns_matched_ops_and_colours_differences(
        noisy: Investigation) -> None:
    app = InvestigatorApp(noisy, theme="ascend-dark")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("f", "V", "d")
        await app.workers.wait_for_complete()
        await pilot.pause()
        canvas = _canvas(app)
        assert canvas.side_by_side and canvas.pair is not None and canvas.cursor == NOISE_AT
        title = str(app.screen.query_one("#graph-title").render())
        assert "target ┃ golden" in title and "matched" in title
        # both panes draw the introduced error on the same row, in the error colour
        box = canvas.box
        assert box is not None
        row = box.y + 1 - canvas.y0
        canvas.cursor = None  # the cursor's colours would cover the box's
        strip = canvas.render_line(row)
        line = strip.text
        pane = (canvas.size.width - 1) // 2
        assert line[:pane].count("add.1 P") == 1 and line[pane + 1:].count("add.1 P") == 1
        error = canvas.get_component_rich_style("graph--error").color
        coloured = [seg for seg in strip if seg.text.strip() in ("│", "P") and seg.style and seg.style.color == error]
        assert len(coloured) >= 4  # border and letter, on each side
        canvas.place(NOISE_AT)
        # an edge only the golden graph has (the noise broke the target's value matching) is coloured there
        only = canvas.get_component_rich_style("graph--unmatched").color
        edges_only = [(y, x) for y, cells in canvas.scene.cells.items() for x, (t, g, _b) in cells.items() if g & ~t]
        assert edges_only, "the real pair's graphs differ by at least one edge"
        y, x = edges_only[0]
        canvas.y0, canvas.x0 = y, max(0, x - 5)
        canvas.rebuild()
        golden_half = list(canvas.render_line(0))
        cells = "".join(s.text for s in golden_half)
        assert cells[pane + 1 + 5] != " "
        assert any(s.style and s.style.color == only for s in golden_half)
        await pilot.press("d")  # back to the target alone
        await pilot.pause()
        assert not canvas.side_by_side and canvas.h is canvas.single


async def test_nodes_one_side_lacks_are_counted_and_outlined(noisy: Investigation, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    from ascend_tui.app.screens import graph_view
    from ascend_tui.offline.graph_pair import golden_graph

    def without_one(inv: Investigation) -> Any:
        real = golden_graph(inv)  # the real golden dump, one operator taken out
        from ascend_tui.graph.opgraph import OpGraph

        g = OpGraph("golden")
        keep = [n for n in real.nodes if n.id != NOISE_AT]
        g.add_bulk(keep, [(e.src, e.dst, e.out_slot, e.in_slot) for e in real.edges()
                          if NOISE_AT not in (e.src, e.dst)])
        return g

    monkeypatch.setattr(graph_view, "golden_graph", without_one)
    app = InvestigatorApp(noisy, theme="ascend-dark")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("f", "V", "d")
        await app.workers.wait_for_complete()
        await pilot.pause()
        canvas = _canvas(app)
        assert "1 target only" in str(app.screen.query_one("#graph-title").render())
        assert "target only" in str(app.screen.query_one("#graph-status").render())
        box = canvas.box
        assert box is not None and not box.sides & GOLDEN
        line = canvas.render_line(box.y - canvas.y0).text
        pane = (canvas.size.width - 1) // 2
        assert "╭" in line[:pane] and "╌" in line[pane + 1:]  # drawn on the left, a dashed outline on the right


async def test_d_without_a_golden_side_says_how_to_get_one() -> None:
    app = InvestigatorApp(overflow_investigation(), theme="ascend-dark")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("V", "d")
        await pilot.pause()
        assert not _canvas(app).side_by_side
        assert any("no golden side" in n.message and "GOLDEN_DUMP" in n.message for n in app._notifications)


# -- snapshots: review the SVGs by eye when they change ---------------------------------------------


def _app(inv: Investigation, tmp_path: Path, theme: str = "ascend-dark") -> InvestigatorApp:
    return InvestigatorApp(inv, theme=theme, export_dir=tmp_path)


@pytest.mark.parametrize("theme", ["ascend-dark", "ansi-light"])
@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_snapshot_graph_view(snap_compare: Any, tmp_path: Path, size: tuple[int, int], theme: str,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert snap_compare(_app(overflow_investigation(), tmp_path, theme), press=["f", "V"], terminal_size=size)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_snapshot_side_by_side(snap_compare: Any, tmp_path: Path, size: tuple[int, int], noisy: Investigation,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))

    async def run_before(pilot: Any) -> None:
        await pilot.press("f", "V", "d")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(_app(noisy, tmp_path), run_before=run_before, terminal_size=size)


async def test_a_click_puts_the_cursor_on_a_box_and_a_double_click_opens_it() -> None:
    app = InvestigatorApp(overflow_investigation(), theme="ascend-dark")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("V")
        await pilot.pause()
        canvas = _canvas(app)
        proj = canvas.scene.boxes[canvas.scene.box_of["proj"]]
        at = (proj.x - canvas.x0 + 2, proj.y - canvas.y0 + 1)
        assert canvas.box_at(*at) == "proj"
        await pilot.click(GraphCanvas, offset=at)
        await pilot.pause()
        assert canvas.cursor == "proj" and app.main.ops.current == "proj/mm.0"
        await pilot.click(GraphCanvas, offset=at, times=2)
        await pilot.pause()
        assert {b.key: b.kind for b in canvas.scene.boxes}["proj"] == "frame"


async def test_a_golden_dump_that_is_gone_is_one_message_naming_it(noisy: Investigation, tmp_path: Path) -> None:
    from ascend_tui.investigation import RunInfo

    run = RunInfo(target=noisy.run.target, source="msprobe compare", checks=("precision",),
                  reference=str(tmp_path / "moved_away"))
    inv = Investigation(noisy.graph, findings=noisy.findings, run=run)
    app = InvestigatorApp(inv, theme="ascend-dark")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("V", "d")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, GraphScreen) and not _canvas(app).side_by_side
        errors = [n.message for n in app._notifications if n.severity == "error"]
        assert len(errors) == 1 and "moved_away" in errors[0] and "no dump.json" in errors[0]


@pytest.mark.parametrize("theme", ["ascend-dark", "ansi-dark"])
async def test_the_cursor_box_is_painted_in_the_cursor_colours(theme: str) -> None:
    app = InvestigatorApp(overflow_investigation(), theme=theme)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("f", "V")
        await pilot.pause()
        canvas = _canvas(app)
        box = canvas.box
        assert box is not None and box.key == "attn[0]/exp.0"
        cursor = canvas.get_component_rich_style("graph--cursor").bgcolor
        strip = canvas.render_line(box.y + 1 - canvas.y0)
        x, inside = 0, ""
        for seg in strip:
            for ch in seg.text:
                if box.x - canvas.x0 <= x < box.x - canvas.x0 + box.w:
                    assert seg.style is not None and seg.style.bgcolor == cursor, (x, ch)
                    inside += ch
                x += 1
        assert "exp.0" in inside


async def test_a_newer_investigation_while_the_view_is_open_is_drawn() -> None:
    from ascend_tui.evidence import TensorMeta
    from ascend_tui.graph.opgraph import OpNode

    first = overflow_investigation()
    newer = overflow_investigation()
    newer.graph.add_node(OpNode("tail/relu.0", "aten.relu", "tail", 99, outputs=(TensorMeta((4,), "float16"),)))
    newer.graph.add_edge("argmax.0", "tail/relu.0", 0, 0)
    app = InvestigatorApp(first, theme="ascend-dark")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("V")
        await pilot.pause()
        assert "tail" not in _canvas(app).scene.box_of
        app._show(newer, app.main.ops.current)  # what partial results and follow mode do
        await pilot.press("j")
        await pilot.pause()
        canvas = _canvas(app)
        assert canvas.inv is newer and "tail" in canvas.scene.box_of


async def test_R_opens_the_story_on_the_cursor_ops_cause_and_its_choice_is_drawn() -> None:
    from ascend_tui.app.screens.story import StoryScreen

    app = InvestigatorApp(overflow_investigation(), theme="ascend-dark")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("f", "V", "n")  # a finding the cause explains, not the cause itself
        await pilot.pause()
        before = _canvas(app).cursor
        await pilot.press("R")
        await pilot.pause()
        assert isinstance(app.screen, StoryScreen)
        await pilot.press("enter")  # the cause's operator: the list goes there, and so does the drawing
        await pilot.pause()
        assert isinstance(app.screen, GraphScreen)
        chosen = app.main.ops.current
        assert chosen is not None and chosen != before and _canvas(app).cursor == chosen


async def test_the_cursor_boxs_edges_are_highlighted() -> None:
    app = InvestigatorApp(overflow_investigation(), theme="ascend-dark")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("f", "V", "j")  # attn[0]/sum.0: read from exp.0, read by div.0
        await pilot.pause()
        canvas = _canvas(app)
        assert canvas.cursor == "attn[0]/sum.0"
        hot = canvas.get_component_rich_style("graph--hot").color
        box = canvas.box
        assert box is not None
        above = canvas.render_line(box.y - 1 - canvas.y0)  # the edge that runs into the box from exp.0
        assert any(seg.style is not None and seg.style.color == hot and seg.text.strip() for seg in above)
        await pilot.press("k")  # exp.0: sum.0's edges are plain again where they are not exp.0's
        await pilot.pause()
        assert canvas.cursor == "attn[0]/exp.0"
