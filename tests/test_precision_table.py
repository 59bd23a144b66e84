"""The precision view's full compare table (columns, sort, filters) and its tensor-pair drill-down, on real msprobe data."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES
from test_app_views import Host, lines

from ascend_tui.app import config
from ascend_tui.app.screens.column_chooser import ColumnChooser
from ascend_tui.app.screens.precision import PrecisionScreen
from ascend_tui.app.screens.precision_rows import PrecisionRows, number
from ascend_tui.app.screens.row_table import RowTable
from ascend_tui.app.screens.tensor_pair import HOW_TO_DUMP, TensorPairScreen, tensor_files
from ascend_tui.investigation import Investigation
from ascend_tui.offline.compare import compare
from ascend_tui.readers.msprobe.compare_result import load as load_compare_result

MSPROBE = FIXTURES / "msprobe"
MSPROBE_CSV = MSPROBE / "msprobe_output" / "compare_tensor_bf16_vs_fp32.csv"  # msprobe 26.2.0's own output
LLM = Path(__file__).parent / "data" / "llm_dumps"


@pytest.fixture(autouse=True)
def _own_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))


@pytest.fixture(scope="module")
def cnn() -> Investigation:
    """msprobe `task: tensor` dumps of the CNN in bfloat16 and float32 (.pt files beside dump.json)."""
    assert (MSPROBE / "dump_bf16" / "step0").is_dir(), f"real msprobe fixtures missing at {MSPROBE}"
    inv = compare(MSPROBE / "dump_bf16", MSPROBE / "dump_fp32", workers=1).investigation
    inv.run.reference = "dump_fp32"  # no machine path on screen
    return inv


@pytest.fixture(scope="module")
def msprobe_csv() -> Investigation:
    assert MSPROBE_CSV.is_file(), f"msprobe's compare result missing at {MSPROBE_CSV}"
    return load_compare_result(MSPROBE_CSV)


def _table(app: Any) -> RowTable:
    return app.screen.query_one("#precision-table", RowTable)


def _status(app: Any) -> str:
    return str(app.screen.query_one("#precision-status").render())


def _column(app: Any, key: str) -> list[Any]:
    """The raw values of column `key` in the order the table shows its rows."""
    screen = app.screen
    return [screen.data.value(int(i), key) for i in screen.shown_idx]


async def test_every_msprobe_column_can_be_shown_and_the_choice_is_kept(cnn: Investigation, tmp_path: Path) -> None:
    app = Host(lambda: PrecisionScreen(cnn))
    async with app.run_test(size=(200, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        offered = [c.header for c in screen.data.available()]
        # msprobe's tensor-mode CSV columns, all of them, in its order
        for header in ("NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
                       "NPU Requires_grad", "Bench Requires_grad", "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr",
                       "One Thousandth Err Ratio", "Five Thousandths Err Ratio", "NPU max", "NPU min", "NPU mean",
                       "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm",
                       "Requires_grad Consistent", "Result", "Err_message", "NPU_Stack_Info", "Data_name"):
            assert header in offered, header
        assert "Max diff" not in offered and "NPU MD5" not in offered  # other modes' columns
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, ColumnChooser)
        keys = [k for k, _d in app.screen.columns]
        for key in ("npu_dtype", "npu_shape", "npu_max", "bench_max", "rmse"):
            app.screen.query_one("OptionList").highlighted = keys.index(key)
            await pilot.press("space")  # rmse was shown: it goes; the others come
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, PrecisionScreen)
        header = lines(_table(app))[0]
        assert "npu dtype" in header and "npu shape" in header and "npu max" in header and "bench max" in header
        assert "rmse" not in header
        first = lines(_table(app))[1]
        assert "torch.float32" in first and "[4, 3, 16, 16]" in first and "3.363" in first  # input.0's dtype, shape, max
        saved = config.load_view_choice("precision", "tensor")
        assert saved is not None and "npu_dtype" in saved and "rmse" not in saved
    again = Host(lambda: PrecisionScreen(cnn))  # a new view reads the choice back
    async with again.run_test(size=(200, 40)) as pilot:
        await pilot.pause()
        assert "npu dtype" in lines(again.screen.query_one(RowTable))[0]


async def test_sort_cycles_columns_numbers_numerically_and_markers_last(msprobe_csv: Investigation) -> None:
    app = Host(lambda: PrecisionScreen(msprobe_csv))
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        assert app.screen.shown_keys[:3] == ["name", "cosine", "max_abs"]
        await pilot.press("s")  # the name, a to z
        names = _column(app, "name")
        assert names == sorted(names)
        await pilot.press("s")  # cosine, worst (lowest) first; N/A (scalars) last
        cosine = [number(v) for v in _column(app, "cosine")]
        present = [c for c in cosine if not math.isnan(c)]
        assert present == sorted(present) and present[0] < 0.99
        assert all(math.isnan(c) for c in cosine[len(present):]) and len(present) < len(cosine)
        assert "cosine▲" in lines(_table(app))[0]
        await pilot.press("s")  # max abs error, largest first, numerically (1e-05 sorts below 0.5)
        errors = [number(v) for v in _column(app, "max_abs")]
        present = [e for e in errors if not math.isnan(e)]
        assert present == sorted(present, reverse=True) and "max abs err▼" in lines(_table(app))[0]
        assert all(math.isnan(e) for e in errors[len(present):])
        await pilot.press("S")  # flipped: smallest first, markers still last
        errors = [number(v) for v in _column(app, "max_abs")]
        assert [e for e in errors if not math.isnan(e)] == sorted(present) and math.isnan(errors[-1])
        assert "sorted by max abs err" in _status(app)


async def test_result_and_name_filters_on_msprobes_own_compare_result(msprobe_csv: Investigation) -> None:
    app = Host(lambda: PrecisionScreen(msprobe_csv))
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        total = len(app.screen.shown_idx)
        await pilot.press("f")
        assert set(_column(app, "result")) == {"error"} and len(app.screen.shown_idx) == 50
        assert "result error" in _status(app) and "row 1 of 50" in _status(app)
        await pilot.press("f")
        assert _column(app, "result") == ["warning"]
        await pilot.press("f")
        assert set(_column(app, "result")) == {"pass"} and len(app.screen.shown_idx) == 89
        await pilot.press("f")  # no unmatched rows in this result: back to all
        assert len(app.screen.shown_idx) == total == 140
        await pilot.press("slash", *"BATCH_norm.0.backward")
        await pilot.pause()
        names = _column(app, "name")
        assert names and all("batch_norm.0.backward" in n for n in names)
        assert "name ~ 'BATCH_norm.0.backward'" in _status(app)
        await pilot.press("enter")  # keeps the filter, back to the table
        assert _table(app).has_focus and len(app.screen.shown_idx) == len(names)
        await pilot.press("f")  # both filters at once
        assert all(r == "error" and "batch_norm.0.backward" in n
                   for r, n in zip(_column(app, "result"), _column(app, "name")))
        await pilot.press("slash", "escape")  # esc in the box clears the name
        await pilot.pause()
        assert set(_column(app, "result")) == {"error"} and len(app.screen.shown_idx) == 50


async def test_unmatched_rows_are_a_result_of_their_own(tmp_path: Path) -> None:
    pair = FIXTURES / "peer" / "Ascend__msprobe" / "test" / "msprobe_test" / "mindspore_ut" / "compare" / "dump_file"
    assert (pair / "mindspore_data" / "dump.json").is_file(), f"msprobe's cross-framework pair missing at {pair}"
    inv = compare(pair / "mindspore_data", pair / "pytorch_data", replay=False).investigation
    app = Host(lambda: PrecisionScreen(inv))
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        assert "99 unmatched (f)" in _status(app)
        await pilot.press("f", "f", "f", "f")
        assert set(_column(app, "result")) == {"unmatched"} and len(app.screen.shown_idx) == 36 + 63
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, TensorPairScreen)
        assert "no counterpart" in str(app.screen.query_one("#pair-note").render())


async def test_enter_opens_the_tensor_pair_with_histograms_worst_elements_and_statistics(cnn: Investigation) -> None:
    app = Host(lambda: PrecisionScreen(cnn))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("s", "s", "s")  # max abs error, largest first
        record = _table(app).current.data
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, TensorPairScreen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        d = screen.detail
        assert d is not None and d.numel == math.prod(eval(record["npu_shape"]))
        assert d.max_abs == pytest.approx(record["max_abs"], rel=1e-6)  # the same number msprobe's metric gives
        assert str(screen.query_one("#pair-abs").render()).count("\n") >= 5  # bars, an axis and its labels
        assert "1e-" in str(screen.query_one("#pair-abs").render())
        await pilot.press("2")
        worst = lines(screen.query_one("#pair-worst", RowTable))
        top = d.worst[0]
        assert worst[1].split()[1] == ",".join(map(str, top.index))
        # the index is where the two files differ most: check against the tensors themselves
        import torch

        t_path, g_path = tensor_files(cnn, record)
        t = torch.load(t_path, weights_only=True).float().numpy()
        g = torch.load(g_path, weights_only=True).float().numpy()
        assert abs(float(t[top.index]) - float(g[top.index])) == pytest.approx(float(np.abs(t - g).max()), rel=1e-6)
        await pilot.press("3")
        stats = "\n".join(lines(screen.query_one("#pair-stats", RowTable)))
        assert "from the tensor files" in stats and "as the compare recorded them" in stats and "l2norm" in stats
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, PrecisionScreen)


async def test_without_tensor_files_the_pair_says_why_and_how_to_dump_them(msprobe_csv: Investigation) -> None:
    stats = compare(MSPROBE / "dump_statistics_fp32", MSPROBE / "dump_fp32", workers=1, replay=False).investigation
    for inv, expected in ((stats, "task: statistics"), (msprobe_csv, "but not the dump folders")):
        app = Host(lambda inv=inv: PrecisionScreen(inv))
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
            await pilot.press("f")  # an error row
            await pilot.press("enter") if len(app.screen.shown_idx) else await pilot.press("f", "f", "f", "enter")
            await pilot.pause()
            assert isinstance(app.screen, TensorPairScreen)
            note = str(app.screen.query_one("#pair-note").render())
            assert expected in note, note
            assert "ascend-tui open NPU_DUMP BENCH_DUMP" in note
            await pilot.press("3")  # the statistics the compare kept are still there
            rows = "\n".join(lines(app.screen.query_one("#pair-stats", RowTable)))
            assert "as the compare recorded them" in rows and "max" in rows
    assert "task: tensor" in HOW_TO_DUMP


def test_the_model_sorts_and_filters_a_hundred_thousand_rows_as_index_arrays(cnn: Investigation) -> None:
    raw = cnn.run.extra["precision"]
    rows = [list(r) for r in raw["rows"]] * 901  # ~100k rows of real compare cells
    data = PrecisionRows(raw["columns"], rows, [], "tensor")
    assert len(data) == len(raw["rows"]) * 901 > 100_000
    idx = data.select("all")
    order = data.sort(idx, "max_rel", True)
    vals = data.numbers("max_rel")[order]
    finite = vals[~np.isnan(vals)]
    assert (np.diff(finite) <= 0).all() and np.isnan(vals[len(finite):]).all()
    assert len(data.select("all", needle="conv2d")) == 901 * sum("conv2d" in r[0].lower() for r in raw["rows"])


# -- snapshots (update with pytest --snapshot-update) ------------------------------------------------

SNAPSHOTS = {
    "table": [],
    "columns": ["c"],
    "pair-errors": ["s", "s", "s", "enter"],  # the row with the largest max abs error, then its tensor pair
    "pair-worst": ["s", "s", "s", "enter", "2"],
}


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("shot", list(SNAPSHOTS))
def test_snapshot(snap_compare: Any, cnn: Investigation, shot: str, size: tuple[int, int]) -> None:
    async def keys(pilot: Any) -> None:
        await pilot.pause()
        for key in SNAPSHOTS[shot]:
            await pilot.press(key)
            await pilot.pause()
            await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(Host(lambda: PrecisionScreen(cnn)), terminal_size=size, run_before=keys)


async def test_a_tensor_file_that_is_gone_is_named_on_the_pair_screen(cnn: Investigation, tmp_path: Path) -> None:
    import copy

    moved = copy.copy(cnn)
    moved.run = copy.copy(cnn.run)
    moved.run.extra = {**cnn.run.extra, "precision": {**cnn.run.extra["precision"],
                                                      "tensor_dirs": [str(tmp_path), str(tmp_path)]}}
    app = Host(lambda: PrecisionScreen(moved))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        note = str(app.screen.query_one("#pair-note").render())
        assert "could not be read" in note and str(tmp_path) in note and "missing" in note


async def test_a_real_dump_with_nan_on_one_side_shows_the_mismatches_first() -> None:
    # made by tests/data/msprobe_nan_tensor/make_dump.py with msprobe 26.2.0: the target's sqrt meets negatives
    data = Path(__file__).parent / "data" / "msprobe_nan_tensor"
    inv = compare(data / "target", data / "golden", workers=1).investigation
    app = Host(lambda: PrecisionScreen(inv))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"sqrt.0.forward.output", "enter")
        await pilot.pause()
        assert _column(app, "name") == ["Torch.sqrt.0.forward.output.0"]
        await pilot.press("enter")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        d = app.screen.detail
        import torch

        t_path, g_path = tensor_files(inv, _table_record(app))
        t = torch.load(t_path, weights_only=True).float().numpy()
        g = torch.load(g_path, weights_only=True).float().numpy()
        one_sided = int((np.isnan(t) & ~np.isnan(g)).sum())
        assert one_sided > 0 and d.nonfinite_mismatch == one_sided and d.target.nan == one_sided
        assert math.isnan(d.worst[0].target) and np.isnan(t[d.worst[0].index]) and not np.isnan(g[d.worst[0].index])
        assert "NaN/Inf on one side only, first at" in str(app.screen.query_one("#pair-note").render())
        assert f"{one_sided} NaN/Inf on one side only" in str(app.screen.query_one("#pair-abs").render())
        await pilot.press("3")
        stats = lines(app.screen.query_one("#pair-stats", RowTable))
        nan_row = next(line for line in stats if line.split()[:1] == ["NaN"])
        assert nan_row.split()[1:3] == [str(one_sided), "0"]


def _table_record(app: Any) -> dict[str, Any]:
    return app.screen.record


def test_view_choices_round_trip_keep_other_entries_and_replace_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "views.toml"
    assert config.load_view_choice("precision", "tensor", path=path) is None
    config.save_view_choice("precision", "tensor", ["name", "cosine"], path=path)
    config.save_view_choice("precision", "statistics", ["name", 'odd "key"'], path=path)
    config.save_view_choice("other view", "x", ["1"], path=path)
    assert config.load_view_choice("precision", "tensor", path=path) == ["name", "cosine"]
    assert config.load_view_choice("precision", "statistics", path=path) == ["name", 'odd "key"']
    assert config.load_view_choice("other view", "x", path=path) == ["1"]
    path.write_text("[precision\ntensor = ")
    assert config.load_view_choice("precision", "tensor", path=path) is None  # warned, not raised
    config.save_view_choice("precision", "tensor", ["name"], path=path)
    assert config.load_view_choice("precision", "tensor", path=path) == ["name"]
