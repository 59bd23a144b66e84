"""Walking the graph from the keyboard on real captured investigations, as a person triaging a NaN would."""

from __future__ import annotations

from pathlib import Path

import pytest
from live_investigations import detail_text, memory_investigation, mlp_investigation, nan_investigation, screen_text

from ascend_tui.app.app import InvestigatorApp
from ascend_tui.app.widgets.breadcrumb import Breadcrumb
from ascend_tui.app.widgets.neighbours import Neighbours

pytestmark = pytest.mark.live


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))


def _app(inv, tmp_path: Path) -> InvestigatorApp:  # type: ignore[no-untyped-def]
    return InvestigatorApp(inv, theme="textual-dark", export_dir=tmp_path)


def _nan_row(text: str) -> list[str]:
    """The target and reference values of the NaN row of the statistics table."""
    line = next(line for line in text.splitlines() if line.strip().startswith("NaN"))
    return line.split()[1:]


async def test_nan_origin_is_reached_from_the_last_op_by_walking_producers(tmp_path: Path) -> None:
    inv = nan_investigation()
    app = _app(inv, tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("G")
        assert app.main.ops.current == "sum.0"
        assert _nan_row(detail_text(app))[0] == "1"
        await pilot.press("p")
        assert app.main.ops.current == "proj/addmm.0"
        neighbours = str(app.main.query_one(Neighbours).content)
        assert "[1] ← mul.0" in neighbours and "[0] ← param:proj.bias" in neighbours
        await pilot.press("1", "p")  # the activation is input 1 of addmm (0 is the bias)
        assert app.main.ops.current == "mul.0"
        await pilot.press("p")
        assert app.main.ops.current == "log.0"
        assert _nan_row(detail_text(app))[0] == "32"
        await pilot.press("p")
        assert app.main.ops.current == "sub.0"
        assert _nan_row(detail_text(app))[0] == "0"  # inputs of log.0 were finite: log.0 is the origin
        await pilot.press("b")
        assert app.main.ops.current == "log.0"
        trail = app.main.query_one(Breadcrumb).text
        assert trail.endswith("sum.0 › proj/addmm.0 › mul.0 › log.0")


async def test_a_producer_that_is_a_parameter_says_so_instead_of_moving(tmp_path: Path) -> None:
    app = _app(nan_investigation(), tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        app.main.go("proj/addmm.0")
        await pilot.press("p")  # slot 0 is the bias
        assert app.main.ops.current == "proj/addmm.0"
        assert any("param:proj.bias is a param" in n.message for n in app._notifications)
        await pilot.press("7", "p")
        assert app.main.ops.current == "proj/addmm.0"
        assert any("it has 3 inputs" in n.message for n in app._notifications)


async def test_consumer_walks_downstream_and_back(tmp_path: Path) -> None:
    app = _app(nan_investigation(), tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        app.main.go("log.0")
        await pilot.press("c")
        assert app.main.ops.current == "mul.0"
        await pilot.press("c")
        assert app.main.ops.current == "proj/addmm.0"
        await pilot.press("backspace", "backspace")
        assert app.main.ops.current == "log.0"


async def test_out_of_range_index_producer_is_reached_from_the_memory_view(tmp_path: Path) -> None:
    from ascend_tui.app.screens.memory import MemoryScreen

    inv, lookup, producer = memory_investigation()
    app = _app(inv, tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("m")
        assert isinstance(app.screen, MemoryScreen)
        await pilot.press("enter")  # the out-of-bounds row
        assert app.screen is app.main
        assert app.main.ops.current == lookup
        assert "index 17 is out of range for 16 rows" in detail_text(app)
        await pilot.press("1", "p")  # input 1 of embedding is the index tensor
        assert app.main.ops.current == producer == "add.0"
        await pilot.press("b")
        assert app.main.ops.current == lookup
        await pilot.press("r")  # the finding's recorded root cause is the same op
        assert app.main.ops.current == producer


async def test_step_through_from_the_first_finding_forward_and_back_updates_the_statistics(tmp_path: Path) -> None:
    inv = mlp_investigation()
    order = inv.graph.execution_order()
    app = _app(inv, tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("G", "f")
        first = inv.first_finding()
        assert first is not None and app.main.ops.current == first.node
        await pilot.press("s")
        assert "STEP" in str(app.main.query_one(Breadcrumb).content)
        seen = []
        for _ in range(3):
            await pilot.press("right")
            node = app.main.ops.current
            assert node == order[order.index(first.node) + len(seen) + 1]
            target, ref = inv.stats_for(node)
            assert target is not None and ref is not None
            text = detail_text(app)
            assert text.splitlines()[0].startswith(node)
            abs_max = next(line for line in text.splitlines() if line.strip().startswith("abs max")).split()[2:]
            assert abs_max == [f"{target.abs_max:.4g}", f"{ref.abs_max:.4g}"]  # float16 target, float32 reference
            seen.append(node)
        await pilot.press("left", "left")
        assert app.main.ops.current == seen[0]
        await pilot.press("b")  # back leaves step mode's trail in one hop
        assert app.main.ops.current == first.node
        await pilot.press("s", "right")
        assert app.main.ops.current == first.node  # out of step mode, right does nothing


async def test_next_and_previous_finding_follow_execution_order_and_wrap(tmp_path: Path) -> None:
    inv = mlp_investigation()
    order = inv.graph.execution_order()
    flagged = sorted(inv.flagged_nodes() & set(order), key=order.index)
    app = _app(inv, tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("g")
        for node in flagged[1:] if order[0] == flagged[0] else flagged:
            await pilot.press("n")
            assert app.main.ops.current == node
        await pilot.press("n")  # past the last finding: back to the first
        assert app.main.ops.current == flagged[0]
        await pilot.press("N")
        assert app.main.ops.current == flagged[-1]


async def test_flagged_filter_and_search_show_n_of_m_and_keep_walks_working(tmp_path: Path) -> None:
    inv = nan_investigation()
    total = len(inv.graph.execution_order())
    app = _app(inv, tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("slash", *"addmm")
        assert app.main.ops.border_title == f'operators 1 of {total} · "addmm"'
        await pilot.press("enter")
        assert app.main.ops.current == "proj/addmm.0"
        await pilot.press("1", "p")  # a walk to a hidden op drops the filter
        assert app.main.ops.current == "mul.0"
        assert app.main.ops.border_title == f"operators {total} of {total}"
        await pilot.press("slash", *"[b]no such op")  # brackets are text, not markup
        assert app.main.ops.border_title.startswith(f"operators 0 of {total}")
        text = screen_text(app)
        assert "no operator matches" in text and '"[b]no such op"' in text
        await pilot.press("escape")
        assert app.main.ops.border_title == f"operators {total} of {total}"
        await pilot.press("F")
        assert app.main.ops.border_title == f"operators 0 of {total} · flagged"


async def test_module_tree_folds_the_list_to_one_module(tmp_path: Path) -> None:
    app = _app(nan_investigation(), tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("t")
        tree = app.main.query_one("#modules")
        assert tree.display and app.focused is tree
        await pilot.press("down", "enter")  # the first module under the root: proj
        assert app.main.ops.border_title.startswith("operators 2 of 6 · in proj")
        assert app.main.ops.current == "proj/t.0"
        await pilot.press("t")
        assert not tree.display
