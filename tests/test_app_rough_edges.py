"""The app's rough edges a new user hit (issue 22), each as the user met it."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_fixtures import overflow_investigation

from ascend_tui.app.app import InvestigatorApp


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))


async def test_C_and_T_without_their_evidence_say_why_and_how_to_get_it(tmp_path: Path) -> None:
    app = InvestigatorApp(overflow_investigation(), theme="ascend-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("C")
        await pilot.pause()
        await pilot.press("T")
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert app.screen is app.main
        assert any("no precision evidence" in m and "msprobe dump" in m for m in messages), messages
        assert any("no profile evidence" in m and "profiler folder" in m for m in messages), messages


async def test_the_list_after_plus_follows_the_terminal_when_it_is_widened(tmp_path: Path) -> None:
    app = InvestigatorApp(overflow_investigation(), theme="ascend-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        pane = app.main.query_one("#list-pane")
        before = pane.size.height
        await pilot.press("plus")
        await pilot.pause()
        assert pane.size.height == before + 2
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        await pilot.pause()
        body = app.main.query_one("#body")
        assert not app.main.has_class("-narrow")
        assert pane.size.height == body.size.height  # side by side: the list is as tall as the body
        await pilot.resize_terminal(80, 48)  # stacked again, twice as tall: the list gets its rows back
        await pilot.pause()
        await pilot.pause()
        assert pane.size.height >= before
        await pilot.press("plus")
        await pilot.pause()
        grown = pane.size.height
        await pilot.resize_terminal(90, 60)
        await pilot.pause()
        await pilot.pause()
        assert pane.size.height > grown  # a share of the body, so it grows with it


async def test_r_on_the_root_cause_names_the_op_the_cursor_moves_to(tmp_path: Path) -> None:
    from app_fixtures import attention_investigation

    app = InvestigatorApp(attention_investigation(), theme="ascend-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.main.ops.current == "attn/bmm.0"  # the root cause itself
        await pilot.press("r")
        await pilot.pause()
        moved = app.main.ops.current
        assert moved != "attn/bmm.0"
        toast = next(n.message for n in app._notifications if "root cause" in n.message)
        assert toast.startswith("attn/bmm.0 is the root cause") and f"upstream to {moved}" in toast


async def test_step_mode_numbers_the_op_as_its_row_does(tmp_path: Path) -> None:
    from ascend_tui.app.widgets.breadcrumb import Breadcrumb

    inv = overflow_investigation()
    app = InvestigatorApp(inv, theme="ascend-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("s", "right")
        await pilot.pause()
        node = inv.graph.node(app.main.ops.current)
        crumb = str(app.main.query_one(Breadcrumb).content)
        assert f"STEP #{node.index} of {len(inv.graph.execution_order())}" in crumb, crumb


def test_the_time_charts_two_x_labels_never_run_together() -> None:
    from ascend_tui.app.widgets.charts import x_labels

    assert x_labels("step 1", "step 3", 4, 30, 60) == "    step 1" + " " * 18 + "step 3"
    first = "live: before the first iteration (bytes of surviving tensors)"
    last = "live: after iteration 3 (bytes of surviving tensors)"
    lines = x_labels(first, last, 9, 32, 50).splitlines()
    assert len(lines) == 2 and lines[0].startswith(" " * 9 + "from live: before")
    assert lines[1].startswith(" " * 9 + "to   live: after iteration 3")
    assert all(len(line) <= 9 + 50 for line in lines) and lines[0].endswith("…")


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 48)])
async def test_the_run_form_shows_every_check_the_device_used_and_marks_on_and_off(
        tmp_path: Path, size: tuple[int, int]) -> None:
    from textual.widgets import Input

    from app_fixtures import attention_investigation
    from ascend_tui.app.screens.run_settings import Mark
    from ascend_tui.app.workers import available_checks

    model = tmp_path / "attention.py"
    model.write_text("")
    inv = attention_investigation()
    inv.run.target = str(model)
    inv.run.device = {"backend": "cpu", "name": "cpu", "inf_nan_mode": True}
    app = InvestigatorApp(inv, theme="ascend-dark", export_dir=tmp_path)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("x")
        await pilot.pause()
        form = app.screen
        assert form.query_one("#device", Input).value == "cpu"  # what ran, not the `auto` that chose it
        marks = list(form.query(Mark))
        assert len(marks) == len(available_checks()) + 1
        for mark in marks:  # each label fully on screen, inside the form
            region = mark.region
            box = mark.parent.region  # the row the mark sits in: nothing of it may fall outside
            assert region.width >= len(str(mark.label)) + 4 and box.contains_region(region), (mark.label, region, box)
            assert str(mark.render()).startswith(("▐✓▌", "▐ ▌"))
        on = next(m for m in marks if m.value)
        off = next(m for m in marks if not m.value)
        assert "✓" in str(on.render()) and "✓" not in str(off.render())


def _screen_text(app: InvestigatorApp) -> str:
    strips = app.screen._compositor.render_update(full=True).strips
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 48)])
async def test_the_export_prompt_is_shown_whole(tmp_path: Path, size: tuple[int, int]) -> None:
    app = InvestigatorApp(overflow_investigation(), theme="ascend-dark", export_dir=tmp_path)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        text = _screen_text(app)
        assert "export the JSON and Markdown reports" in text and "(.json and .md) to:" in text.replace("\n", " ")
        assert "enter writes · esc cancels" in text


async def test_a_narrow_table_cuts_names_not_numbers_and_space_shows_cells_whole_at_words() -> None:
    from textual.app import App, ComposeResult

    from ascend_tui.app.screens.row_table import Column, Row, RowTable

    columns = [Column("level"), Column("api"), Column("cosine", align="right"), Column("max abs", align="right"),
               Column("message")]
    rows = [Row(("warning", "Module.encoder.layers.11.attention.Functional.conv2d.0.forward.output.0", "0.999871", "159.25",
                 "the relative error is over the threshold in several elements of this output"), key="a")]

    class Host(App[None]):
        def get_theme_variable_defaults(self) -> dict[str, str]:
            from ascend_tui.app.config import variable_defaults

            return variable_defaults(self.current_theme)

        def compose(self) -> ComposeResult:
            yield RowTable(columns, rows)

    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(RowTable)
        table.focus()
        await pilot.pause()
        line = "".join(seg.text for seg in table.render_line(1))
        assert "0.999871" in line and "159.25" in line and "warning" in line  # numbers and short words whole
        assert "…" in line  # the long name and message are what gave way
        await pilot.press("space")
        await pilot.pause()
        extra = ["".join(seg.text for seg in table.render_line(y)).strip() for y in range(2, 2 + len(table._extra))]
        joined = " ".join(extra)
        assert "api: Module.encoder.layers.11.attention.Functional.conv2d.0.forward.output.0" in joined
        assert "message: the relative error is over the threshold" in joined.replace("  ", " ")
        words = set(rows[0].cells[4].split()) | {"message:"}
        for piece in extra:  # every piece of a wrapped message is a whole word
            if piece.startswith("message:") or not piece.startswith("api:"):
                assert set(piece.split()) <= words | set(rows[0].cells[1].split()) | {"api:"}, piece


def test_metrics_read_as_words() -> None:
    from ascend_tui.app.widgets.detail import metric_items

    text = metric_items({"error": 0.35, "input_error": 0.01, "replay_error": float("nan"), "evidence": "ratio"})
    assert text == "error: 0.35 · input error: 0.01 · replay error: not measured · evidence: ratio"
    assert "=" not in text and "nan" not in text


def test_memory_sample_times_read_as_counts_do() -> None:
    from ascend_tui.app.screens.memory import time_label
    from ascend_tui.fmt import count

    assert time_label(1619.4) == time_label(1619) == count(1619) == "1,619"
    assert time_label(12.5) == "12.5" and time_label(float("nan")) == "nan"
