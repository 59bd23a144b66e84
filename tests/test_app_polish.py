"""What a new user notices first: a visible cursor in every theme, and a screen that fits 80x24."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from app_fixtures import attention_investigation, overflow_investigation

from ascend_tui.app.app import InvestigatorApp
from ascend_tui.app.widgets.op_list import OpList

THEMES = ["ascend-dark", "ascend-light", "ascend-high-contrast", "ansi-dark", "ansi-light"]


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))


def _backgrounds(app: Any, y: int, x0: int, x1: int) -> set[str]:
    """The background colours the terminal would paint on screen row `y` between columns x0 and x1."""
    strips = app.screen._compositor.render_update(full=True).strips
    out: set[str] = set()
    x = 0
    for seg in (seg for strip in strips[y] for seg in strip):
        end = x + len(seg.text)
        if end > x0 and x < x1 and seg.style is not None:
            out.add(str(seg.style.bgcolor))
        x = end
    return out


@pytest.mark.parametrize("theme", THEMES)
async def test_the_cursor_row_has_its_own_background_focused_or_not(theme: str, tmp_path: Path) -> None:
    app = InvestigatorApp(overflow_investigation(), theme=theme, export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        ops = app.main.query_one(OpList)
        ops.cursor = 2
        await pilot.pause()
        region = ops.content_region
        y = region.y + ops.cursor - int(ops.scroll_y)
        x0, x1 = region.x, region.x + 20
        focused = _backgrounds(app, y, x0, x1)
        assert len(focused) == 1, focused  # one background across the row, not each cell's own
        assert focused.isdisjoint(_backgrounds(app, y - 1, x0, x1) | _backgrounds(app, y + 1, x0, x1))
        app.main.query_one("#detail").focus()
        await pilot.pause()
        blurred = _backgrounds(app, y, x0, x1)
        assert len(blurred) == 1 and blurred.isdisjoint(_backgrounds(app, y + 1, x0, x1)), blurred


async def test_r_and_p_step_over_views_to_the_op_that_computes_and_P_steps_every_op(tmp_path: Path) -> None:
    app = InvestigatorApp(attention_investigation(), theme="ascend-dark", export_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.main.ops.current == "attn/bmm.0"  # opens on the finding
        await pilot.press("r")  # the root cause is the bmm itself: r walks its chain
        await pilot.pause()
        assert app.main.ops.current == "k/mm.0"  # not attn/_to_copy.0, expand, transpose or view
        assert any("stepped over 4 ops" in n.message for n in app._notifications)
        await pilot.press("b", "1", "p")
        await pilot.pause()
        assert app.main.ops.current == "k/mm.0"
        await pilot.press("b", "1", "P")
        await pilot.pause()
        assert app.main.ops.current == "attn/_to_copy.0"  # every op, one at a time
        await pilot.press("P")
        await pilot.pause()
        assert app.main.ops.current == "attn/expand.0"


async def test_the_palette_finds_an_operator_by_fuzzy_name_and_jumps_to_it(tmp_path: Path) -> None:
    app = InvestigatorApp(attention_investigation(), theme="ascend-dark", export_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"softmx")  # fuzzy: a letter missing
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert app.screen is app.main and app.main.ops.current == "attn/softmax.0"
        await pilot.press("ctrl+p")
        await pilot.press(*"module: k")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert app.main.ops.module == "k" and app.main.ops.current == "k/mm.0"


MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at scale_kernel(float *, int)+0x70 in scale.cu:12
=========     by thread (3,0,0) in block (0,0,0)
=========     Address 0x7f0000000010 is out of bounds
=========
"""
MORE = """\
========= Invalid __global__ read of size 4 bytes
=========     at gather_kernel(float *, int *, int)+0x90 in gather.cu:30
=========     by thread (7,0,0) in block (1,0,0)
=========     Address 0x7f0000100040 is out of bounds
=========
========= ERROR SUMMARY: 2 errors
"""


async def test_follow_mode_adds_findings_as_lines_are_appended(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("program output before the tool says anything\n")
    app = InvestigatorApp([str(log)], theme="ascend-dark", export_dir=tmp_path, follow=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert "following" in app.sub_title and app.inv is None
        with log.open("a") as fh:
            fh.write(MEMCHECK)
        for _ in range(40):
            await pilot.pause(0.1)
            if app.inv is not None and app.inv.findings:
                break
        assert app.inv is not None and len(app.inv.memory_events) == 1
        with log.open("a") as fh:
            fh.write(MORE[:60])  # half a line: nothing new yet
            fh.flush()
            await pilot.pause(0.7)
            assert len(app.inv.memory_events) == 1
            fh.write(MORE[60:])
        for _ in range(40):
            await pilot.pause(0.1)
            if len(app.inv.memory_events) == 2:
                break
        assert len(app.inv.memory_events) == 2
        assert "following" in app.sub_title and "2 errors" in app.sub_title


def test_a_watch_folder_follower_reads_each_new_investigation_once(tmp_path: Path) -> None:
    from ascend_tui.app.follow import follower_for

    follower = follower_for(tmp_path)
    assert follower.poll() is None
    overflow_investigation().save(tmp_path / "ascend-tui-watch-step7.atui.json")
    inv = follower.poll()
    assert inv is not None and len(inv.findings) == 4
    assert follower.poll() is None


def test_open_takes_run_settings_and_theme_aliases_and_refuses_unknown_themes(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from ascend_tui import cli
    from ascend_tui.app import launch

    seen: dict[str, Any] = {}
    monkeypatch.setattr(launch, "run_app", lambda paths, **kw: seen.update(paths=paths, **kw) or 0)
    model = tmp_path / "model.py"
    model.write_text("")
    assert cli.main(["open", str(model), "--dtype", "float16", "--checks", "overflow", "--iterations", "3",
                     "--backward", "--device", "cpu", "--theme", "light"]) == 0
    live = seen["live"]
    assert (live.dtype, live.checks, live.iterations, live.backward, live.device) == \
        ("float16", ("overflow",), 3, True, "cpu")
    assert seen["theme"] == "ascend-light" and seen["follow"] is False
    assert cli.main(["open", str(model), "--theme", "solarized-nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown theme 'solarized-nope'" in err and "ascend-dark" in err and "ansi-light" in err
    assert cli.main(["open", "--follow", str(model), str(model)]) == 2


async def test_x_opens_the_run_settings_prefilled_and_reruns_with_what_was_chosen(tmp_path: Path) -> None:
    from textual.widgets import Checkbox, Input, Select

    from ascend_tui.app.screens.run_settings import RunSettingsDialog

    model = tmp_path / "attention.py"
    model.write_text("")
    inv = attention_investigation()
    inv.run.target = str(model)
    app = InvestigatorApp(inv, theme="ascend-dark", export_dir=tmp_path)
    runs: list[tuple[Any, ...]] = []
    app._checks_job = lambda target, spec, checks: runs.append((spec, checks, app.live))  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("x")
        await pilot.pause()
        form = app.screen
        assert isinstance(form, RunSettingsDialog)
        assert form.query_one("#dtype", Select).value == "float16"  # what made the run on screen
        assert form.query_one("#check-overflow", Checkbox).value
        form.query_one("#dtype", Select).value = "bfloat16"
        form.query_one("#iterations", Input).value = "0"
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.screen is form and "at least 1" in str(form.query_one("#error").render())
        form.query_one("#iterations", Input).value = "2"
        form.query_one("#backward", Checkbox).value = True
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.screen is app.main
        (spec, checks, live), = runs
        assert spec == str(model) and checks == ("overflow",)
        assert (live.dtype, live.iterations, live.backward) == ("bfloat16", 2, True)


async def test_the_open_dialog_completes_paths_with_tab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from textual.widgets import Input

    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "step7.atui.json").write_text("{}")
    (tmp_path / "runs" / "step8.atui.json").write_text("{}")
    (tmp_path / "model.py").write_text("")
    monkeypatch.chdir(tmp_path)
    app = InvestigatorApp(None, theme="ascend-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("O")
        await pilot.pause()
        box = app.screen.query_one("#path", Input)
        await pilot.press("r", "tab")
        assert box.value == "runs/"
        await pilot.press("tab")
        assert box.value == "runs/step"
        assert "step7.atui.json  step8.atui.json" in str(app.screen.query_one("#candidates").render())
        await pilot.press("8", "tab")
        assert box.value == "runs/step8.atui.json"


async def test_partial_results_move_to_the_first_finding_unless_the_user_moved(tmp_path: Path) -> None:
    from ascend_tui.investigation import Investigation

    full = attention_investigation()
    graph_only = Investigation(full.graph, stats=full.stats, run=full.run)
    app = InvestigatorApp(graph_only, theme="ascend-dark", export_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.main.ops.current == "q/mm.0"  # nothing found yet: the first op
        app._show(full, app.main.ops.current)  # as a partial result arrives
        await pilot.pause()
        assert app.main.ops.current == "attn/bmm.0"
        await pilot.press("g")  # the user moves: later results keep the place
        await pilot.pause()
        app._show(attention_investigation(), app.main.ops.current)
        await pilot.pause()
        assert app.main.ops.current == "q/mm.0"


async def test_detail_scrolls_on_its_own_keys_wraps_under_its_indent_and_panes_resize_and_maximise(
        tmp_path: Path) -> None:
    from live_investigations import screen_text

    from ascend_tui.app.widgets.detail import Detail

    app = InvestigatorApp(overflow_investigation(), theme="ascend-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        lines = screen_text(app).splitlines()
        hint = next(i for i, line in enumerate(lines) if "hint: exp of values" in line)
        assert lines[hint + 1].startswith(" " * 7) and "softmax trick" in lines[hint + 1]  # indented under it
        detail = app.main.query_one(Detail)
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert detail.scroll_y > 0 and app.main.ops.has_focus  # the list kept the focus
        pane = app.main.query_one("#list-pane")
        before = pane.size.height
        await pilot.press("plus")
        await pilot.pause()
        assert pane.size.height > before
        await pilot.press("z")
        await pilot.pause()
        assert app.main.maximized is app.main.ops and app.main.ops.size.height >= 18
        await pilot.press("z")
        await pilot.pause()
        assert app.main.maximized is None


@pytest.mark.parametrize("width", [40, 60, 80, 100, 160])
def test_the_header_fits_whole_words_and_keeps_errors_and_the_follow_marker(width: int) -> None:
    from ascend_tui.app.header import HEADER_CHROME, header_for

    inv = attention_investigation()
    inv.run.iterations, inv.run.checks = 3, ("overflow", "memory")
    title, subtitle = header_for(inv, width, following=True)
    assert len(title) + len(subtitle) <= width - HEADER_CHROME
    assert "…" not in subtitle and "1 err" in subtitle and subtitle.startswith("●")
    words = {"●", "following", "1", "error", "err", "0", "warnings", "warn", "float16", "vs", "float32", "reference",
             "f16/f32", "cpu", "overflow,memory", "ovf,mem", "3", "iterations", "it", "8", "ops", "·"}
    assert set(subtitle.split()) <= words
    if width >= 160:
        assert "float16 vs float32 reference" in subtitle and "3 iterations" in subtitle


def test_a_log_follower_waits_for_a_file_that_does_not_exist_yet_and_starts_over_when_it_is_truncated(
        tmp_path: Path) -> None:
    from ascend_tui.app.follow import follower_for

    log = tmp_path / "later.log"
    follower = follower_for(log)
    assert follower.poll() is None
    log.write_text(MEMCHECK + MORE)
    first = follower.poll()
    assert first is not None and len(first.memory_events) == 2
    log.write_text(MEMCHECK)  # a new run rewrote the log
    again = follower.poll()
    assert again is not None and len(again.memory_events) == 1
