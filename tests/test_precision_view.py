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
LLM = Path(__file__).parent / "data" / "llm_dumps"
NOISE_AT = "model.layers.0/add.1"  # the residual add that reads the noisy MLP output first


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))


@pytest.fixture(scope="module")
def compared() -> Investigation:
    assert (MSPROBE / "dump_bf16").is_dir(), f"real msprobe fixtures missing at {MSPROBE}"
    return compare(MSPROBE / "dump_bf16", MSPROBE / "dump_fp32", workers=1).investigation


def _table(app: Any) -> RowTable:
    return app.screen.query_one(RowTable)


async def test_rows_sort_by_any_column_and_filter_to_introduced(compared: Investigation) -> None:
    # the CNN bf16 pair differs only by bf16 rounding: its old "introduced" conv1 bias gradient (cosine 0.35 on a
    # near-zero gradient) was a false error, so nothing is introduced and the one count is explained
    app = Host(lambda: PrecisionScreen(compared))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        summary = str(app.screen.query_one("#precision-summary").render())
        assert "0 introduced" in summary and "111 tensors compared (of 140 rows" in summary
        assert app.screen.query("#precision-growth")  # the error-growth chart with the bf16 band
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
        assert not _table(app).rows


async def test_an_introduced_error_filters_and_focuses_its_op_and_the_chart_shows_the_band() -> None:
    noisy = compare(LLM / "bf16_noise", LLM / "fp32", workers=1).investigation
    app = Host(lambda: PrecisionScreen(noisy))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        summary = str(app.screen.query_one("#precision-summary").render())
        assert "1 introduced" in summary and f"first introduced: {NOISE_AT}" in summary
        chart = str(app.screen.query_one("#precision-growth").render())
        assert "units of bfloat16's u" in chart and "┄" in chart
        await pilot.press("i")
        rows = _table(app).rows
        assert rows and all(r.data["attribution"] == "introduced" for r in rows)
        assert {r.key for r in rows} == {NOISE_AT}
        await pilot.press("enter")  # the tensor pair; Enter there focuses its op on the graph
        await pilot.pause()
        assert type(app.screen).__name__ == "TensorPairScreen"
        await app.workers.wait_for_complete()
        await pilot.press("enter")
        await pilot.pause()
    assert app.results == [NOISE_AT]


async def test_open_target_and_golden_dumps_shows_the_compare_on_the_graph(tmp_path: Path) -> None:
    # the LLM pair with noise after layer 0's MLP (the CNN pair has no real error any more: see the test above)
    app = InvestigatorApp([str(LLM / "bf16_noise"), str(LLM / "fp32")], theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        assert app.inv is not None and app.inv.run.source == "msprobe compare"
        await pilot.press("f")  # first finding: where the noise enters, the MLP's output
        await pilot.pause()
        assert app.main.nav.focused == NOISE_AT
        detail = detail_text(app)
        assert "introduced" in detail and "model.layers.0.mlp" in detail
        await pilot.press("C")
        await pilot.pause()
        assert isinstance(app.screen, PrecisionScreen)
