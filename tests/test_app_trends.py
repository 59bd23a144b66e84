"""Steps and ranks: the picker over a real three-step msprobe dump, per-step trends and their charts."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from ascend_tui.checks.trends import earliest, judge
from ascend_tui.graph.profile import Profile, StepTime
from ascend_tui.investigation import Investigation, RunInfo
from ascend_tui.graph.opgraph import OpGraph
from ascend_tui.offline.trends import picks_of, points_of, step_time_series, summaries, trend_series
from ascend_tui.readers.msprobe import dump

DATA = Path(__file__).resolve().parent / "data"
STEPS = DATA / "msprobe_steps"  # made by tests/data/msprobe_steps/make_dump.py with msprobe 26.2.0
RANK = "proc28589"


@pytest.fixture(autouse=True)
def _fixed_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def test_every_step_and_rank_of_a_dump_root_is_found_from_any_folder_in_it() -> None:
    points = dump.dump_points(STEPS)
    assert [p.label for p in points] == [f"step{k}/{RANK}" for k in range(3)]
    assert [p.step for p in points] == [0, 1, 2]
    assert dump.dump_points(STEPS / "step1" / RANK / "dump.json") == points
    assert dump.dump_root(STEPS / "step2") == STEPS
    ranks = dump.dump_points(DATA / "msprobe_ranks" / "step0" / "rank2")
    assert [p.label for p in ranks] == [f"step0/rank{r}" for r in range(4)]
    inv = dump.load(STEPS / "step2" / RANK)
    assert inv.run.extra["point"] == f"step2/{RANK}" and inv.run.extra["steps"] == 3


def test_the_picker_lines_name_the_first_bad_op_of_the_nan_step() -> None:
    inv = dump.load(STEPS)
    lines = summaries(inv, picks_of(inv))
    assert [s.current for s in lines] == [True, False, False]
    assert [s.bad for s in lines] == [False, False, True]
    assert lines[2].text.startswith("first NaN: Functional.linear.1.forward")
    assert "loss 0.9766" in lines[0].text and "grad norm" in lines[0].text


def test_the_dump_trend_marks_the_planted_nan_at_step_2() -> None:
    series, notes = trend_series(dump.load(STEPS))
    by = {s.name: s for s in series}
    assert notes == []
    assert {"loss", "gradient norm", "non-finite outputs", "fc1 max-abs", "fc2 max-abs", "fc2 norm"} <= set(by)
    assert by["loss"].steps == (0, 1, 2) and by["loss"].values[0] == pytest.approx(0.97656, rel=1e-4)
    assert math.isnan(by["fc2 max-abs"].values[2]) and math.isfinite(by["fc1 max-abs"].values[2])
    assert by["non-finite outputs"].values == (0.0, 0.0, 1.0)
    verdicts = {v.series.name: v.anomaly for v in judge(series)}
    assert verdicts["fc2 max-abs"].step == 2 and verdicts["loss"].step == 2 and verdicts["fc1 max-abs"] is None
    assert earliest(judge(series)).anomaly.step == 2


def test_a_mask_whose_mean_overflowed_is_not_a_nan_step() -> None:
    """The real LLM dump's attention mask holds finfo.min: msprobe's Mean is -Inf, its values are finite."""
    inv = dump.load(DATA / "llm_dumps" / "fp32_steps")
    lines = summaries(inv, picks_of(inv))
    assert len(lines) == 2 and not any(s.bad for s in lines), [s.text for s in lines]
    series, _ = trend_series(inv)
    assert [v.series.name for v in judge(series) if v.anomaly is not None] == []
    assert any(s.name == "model.layers.0.self_attn.q_proj max-abs" for s in series)


def _profile_inv(rows: list[StepTime]) -> Investigation:
    return Investigation(OpGraph("p"), profile=Profile("ascend_pt", steps=tuple(rows)), run=RunInfo(source="profile"))


def test_step_time_comes_from_the_step_trace_per_rank() -> None:
    one = [StepTime(k, 100.0 + (400 if k == 6 else 0), 10.0, 0.0, 10.0, 5.0, 0.0, 0.0) for k in range(8)]
    (s,) = step_time_series(_profile_inv(one))
    assert s.steps == tuple(range(8)) and s.values[0] == 115.0 and s.unit == "µs"
    assert judge([s])[0].anomaly.step == 6
    two = [StepTime(k, 100.0 * (r + 1), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, rank=r) for r in range(2) for k in range(3)]
    assert [x.name for x in step_time_series(_profile_inv(two))] == ["step time rank 1", "step time rank 0"]
    assert step_time_series(_profile_inv(one[:1])) == []


def app_for(inv: Investigation, tmp_path: Path) -> Any:
    from ascend_tui.app.app import InvestigatorApp

    return InvestigatorApp(inv, theme="ascend-dark", export_dir=tmp_path)


async def _settle(app: Any, pilot: Any) -> None:
    for _ in range(3):
        await pilot.pause()
        await app.workers.wait_for_complete()
        for screen in app.screen_stack:
            await screen.workers.wait_for_complete()
    await pilot.pause()


async def test_the_picker_lists_the_steps_and_reopens_the_chosen_one(tmp_path: Path) -> None:
    from ascend_tui.app.screens.dialogs import PointPicker
    from ascend_tui.app.screens.row_table import RowTable

    app = app_for(dump.load(STEPS), tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await _settle(app, pilot)
        assert "step0" in app.sub_title
        await pilot.press("i")
        await _settle(app, pilot)
        assert isinstance(app.screen, PointPicker)
        rows = app.screen.query_one(RowTable).rows
        assert [r.cells[1] for r in rows] == [f"step{k}/{RANK}" for k in range(3)]
        assert rows[0].cells[0] == "●" and rows[2].tone == "error"
        assert rows[2].cells[2].startswith("first NaN: Functional.linear.1.forward")
        await pilot.press("j", "j", "enter")
        await _settle(app, pilot)
        assert not isinstance(app.screen, PointPicker)
        assert app.inv.run.extra["point"] == f"step2/{RANK}"
        assert "step2" in app.sub_title and app.inv.summary()["errors"] >= 1


async def test_the_picker_says_why_when_there_is_one_step(tmp_path: Path) -> None:
    from ascend_tui.app.screens.dialogs import PointPicker

    app = app_for(Investigation(OpGraph("g"), run=RunInfo(source="msprobe")), tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("i")
        await pilot.pause()
        assert not isinstance(app.screen, PointPicker)
        assert any("nothing to pick" in str(n.message) for n in app._notifications)


async def test_the_trends_view_charts_the_series_and_toggles_them(tmp_path: Path) -> None:
    from ascend_tui.app.screens.trends import TrendsScreen
    from ascend_tui.app.widgets.step_chart import StepChart

    app = app_for(dump.load(STEPS), tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("I")
        await _settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, TrendsScreen)
        charts = list(screen.query(StepChart))
        assert charts and all(c.anomaly is not None and c.anomaly.step == 2 for c in charts
                              if c.series.kind in ("loss", "grad_norm", "nonfinite"))
        summary = str(screen.query_one("#trend-summary").render())
        assert "over 3 steps" in summary and "first anomaly step 2" in summary
        shown = len(charts)
        await pilot.press("enter")  # the first series (flagged, shown) is hidden
        await pilot.pause()
        assert len(list(screen.query(StepChart))) == shown - 1
        await pilot.press("a")
        await pilot.pause()
        assert len(list(screen.query(StepChart))) == shown
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, TrendsScreen)


async def test_the_trends_key_says_how_to_get_steps_when_there_are_none(tmp_path: Path) -> None:
    from ascend_tui.app.screens.trends import TrendsScreen

    app = app_for(Investigation(OpGraph("g"), run=RunInfo(source="msprobe")), tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("I")
        await pilot.pause()
        assert not isinstance(app.screen, TrendsScreen)
        assert any("watch()" in str(n.message) for n in app._notifications)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("keys", [["I"], ["i"]], ids=["trends", "picker"])
def test_snapshot(snap_compare: Any, tmp_path: Path, size: tuple[int, int], keys: list[str]) -> None:
    async def run_before(pilot: Any) -> None:
        await pilot.press(*keys)
        await _settle(pilot.app, pilot)

    assert snap_compare(app_for(dump.load(STEPS), tmp_path), terminal_size=size, run_before=run_before)


def test_a_cluster_profile_offers_its_rank_folders_with_their_step_times(tmp_path: Path, fixtures: Path) -> None:
    from synthetic_cluster import make_cluster

    from ascend_tui.offline.profile_cluster import load_cluster

    inv = load_cluster(make_cluster(tmp_path / "job", n=4, slow_rank=2), workers=1)
    points = points_of(inv)
    assert [p.rank for p in points] == [0, 1, 2, 3] and all(p.folder.is_dir() for p in points)
    lines = summaries(inv, picks_of(inv))
    assert [s.bad for s in lines] == [False, False, True, False]
    assert lines[2].text.startswith("slow rank · mean step ") and lines[2].current
    assert points[2].label == points[2].folder.name


async def test_a_watch_trend_and_a_step_trace_open_the_trends_view(tmp_path: Path) -> None:
    from ascend_tui.app.screens.trends import TrendsScreen, has_trend
    from ascend_tui.app.widgets.step_chart import StepChart, use_log
    from ascend_tui.evidence import StepSeries

    inv = Investigation(OpGraph("w"), run=RunInfo(source="watch"))
    loss = StepSeries("loss", "loss", tuple(range(8)), (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 5.0, math.nan))
    peak = StepSeries("module-output max-abs", "max_abs", tuple(range(8)), (1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7))
    inv.sections["trend"] = [loss.to_json(), peak.to_json()]
    assert has_trend(inv) and not has_trend(Investigation(OpGraph("g"), run=RunInfo(source="msprobe")))
    assert has_trend(_profile_inv([StepTime(k, 1.0, 0, 0, 0, 0, 0, 0) for k in range(3)]))
    assert use_log(list(peak.values)) and not use_log(list(loss.values))
    app = app_for(inv, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("I")
        await _settle(app, pilot)
        assert isinstance(app.screen, TrendsScreen)
        charts = {c.series.name: c for c in app.screen.query(StepChart)}
        assert charts["loss"].anomaly.step == 6 and charts["loss"].anomaly.kind == "jump"
        text = str(charts["module-output max-abs"].render())
        assert "log" in text and "1e7" in text and "1e0" in text


def three_step_profile(root: Path, fixtures: Path) -> Path:
    """The real Level1 profile with its 20 kernels spread over steps 50, 51, 52 and a step-trace row for each
    (step 52 three times slower): a profile of several steps, made from a real one."""
    import csv
    import shutil

    out = root / "prof_ascend_pt"
    shutil.copytree(fixtures / "profiler" / "level1_2025-01", out)
    tables = out / "ASCEND_PROFILER_OUTPUT"
    kd = tables / "kernel_details.csv"
    with kd.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    for i, row in enumerate(rows[1:]):
        row[0] = str(50 + i % 3)
    with kd.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)
    st = tables / "step_trace_time.csv"
    head, first = st.read_text().splitlines()[:2]
    cells = first.split(",")
    lines = [head]
    for k, scale in ((50, 1.0), (51, 1.0), (52, 3.0)):
        lines.append(",".join([str(k)] + [f"{float(c) * scale}" for c in cells[1:]]))
    st.write_text("\n".join(lines) + "\n")
    return out


async def test_the_picker_opens_one_step_of_a_profile_and_lists_them_again(tmp_path: Path, fixtures: Path) -> None:
    from ascend_tui.app.screens.dialogs import PointPicker
    from ascend_tui.app.screens.row_table import RowTable
    from ascend_tui.offline.open import open_path

    whole = open_path(three_step_profile(tmp_path, fixtures))
    picks = picks_of(whole)
    assert [p.label for p in picks] == ["step 50", "step 51", "step 52"]
    lines = summaries(whole, picks)
    assert "slowest" in lines[2].text and "7 kernels" in lines[0].text and "6 kernels" in lines[2].text
    (series,) = trend_series(whole)[0]
    assert series.steps == (50, 51, 52) and series.values[2] == pytest.approx(3 * series.values[0])
    app = app_for(whole, tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("i")
        await _settle(app, pilot)
        assert isinstance(app.screen, PointPicker)
        await pilot.press("G", "enter")
        await _settle(app, pilot)
        step = app.inv
        assert step.run.extra["point"] == "step 52" and step.profile.kernels.n == 6
        assert [s.step for s in step.profile.steps] == [52] and "step 52" in app.sub_title
        await pilot.press("i")  # the steps of the whole profile again, this one marked
        await _settle(app, pilot)
        rows = app.screen.query_one(RowTable).rows
        assert [r.cells[1] for r in rows] == ["step 50", "step 51", "step 52"] and rows[2].cells[0] == "●"
        await pilot.press("g", "enter")  # step 50: the profile is read again from its folder
        await _settle(app, pilot)
        assert app.inv.run.extra["point"] == "step 50" and app.inv.profile.kernels.n == 7
