"""The precision view and `ascend-tui open TARGET GOLDEN`, driven with the keys a user presses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from live_investigations import detail_text, screen_text
from test_app_jobs import settle
from test_app_views import Host, lines
from conftest import FIXTURES

from ascend_tui.app.app import InvestigatorApp
from ascend_tui.app.screens.precision import PrecisionScreen
from ascend_tui.app.screens.row_table import RowTable
from ascend_tui.offline.compare import compare
from ascend_tui.investigation import Investigation

MSPROBE = FIXTURES / "msprobe"
CAUSE = "backward:conv1/conv2d.0"


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))


@pytest.fixture(scope="module")
def compared() -> Investigation:
    assert (MSPROBE / "dump_bf16").is_dir(), f"real msprobe fixtures missing at {MSPROBE}"
    return compare(MSPROBE / "dump_bf16", MSPROBE / "dump_fp32", workers=1).investigation


def _table(app: Any) -> RowTable:
    return app.screen.query_one(RowTable)


async def test_rows_sort_by_any_column_filter_to_introduced_and_enter_focuses_the_op(compared: Investigation) -> None:
    app = Host(lambda: PrecisionScreen(compared))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        summary = str(app.screen.query_one("#precision-summary").render())
        assert f"first introduced: {CAUSE}" in summary and "1 introduced" in summary
        shown = lines(_table(app))
        assert shown[0].split()[:2] == ["tensor", "cosine"]
        assert shown[1].strip().startswith("Functional.conv2d.0.forward.input.0")
        await pilot.press("2")  # sort by cosine, lowest first
        shown = lines(_table(app))
        assert "cosine▲" in shown[0]
        assert shown[1].strip().startswith("Functional.conv2d.0.backward.output.2") and "0.354399" in shown[1]
        await pilot.press("2")  # again: highest first
        assert "cosine▼" in lines(_table(app))[0]
        await pilot.press("i")
        rows = _table(app).rows
        assert rows and all(r.data["attribution"] == "introduced" for r in rows)
        assert {r.key for r in rows} == {CAUSE}
        await pilot.press("enter")
        await pilot.pause()
    assert app.results == [CAUSE]


async def test_open_target_and_golden_dumps_shows_the_compare_on_the_graph(tmp_path: Path) -> None:
    app = InvestigatorApp([str(MSPROBE / "dump_bf16"), str(MSPROBE / "dump_fp32")], theme="textual-dark",
                          export_dir=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        assert app.inv is not None and app.inv.run.source == "msprobe compare"
        await pilot.press("f")  # first finding: the op that introduces the error
        await pilot.pause()
        assert app.main.nav.focused == CAUSE
        text = screen_text(app)
        assert "P" in next(line for line in text.splitlines() if "conv2d" in line and "∇" in line)
        detail = detail_text(app)
        assert "reference" in detail and "introduced" in detail
        assert "vs reference  cosine 0.354399" in detail  # the bias gradient: bfloat16 cancels it
        await pilot.press("C")
        await pilot.pause()
        assert isinstance(app.screen, PrecisionScreen)
