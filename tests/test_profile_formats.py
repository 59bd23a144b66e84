"""Every profiler fixture folder and file loads with the right rows, totals and quirks."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from ascend_tui.checks.profile import parse_shapes, summarize
from ascend_tui.errors import InputError
from ascend_tui.offline.open import kind_of, open_path
from ascend_tui.readers.profiler.csv_tables import read_kernels
from ascend_tui.investigation import Investigation
from tests.conftest import FIXTURES

PROF = FIXTURES / "profiler"
OUT = "ASCEND_PROFILER_OUTPUT"


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _total(rows: list[dict[str, str]], column: str) -> float:
    return float(sum(Decimal(r[column].strip()) for r in rows if r[column].strip() not in ("", "N/A")))


@pytest.mark.parametrize("folder", ["level0_2025-01", "level1_2025-01", "level2_2025-11"])
def test_torch_npu_folders_rows_and_totals(folder: str) -> None:
    rows = _csv(PROF / folder / OUT / "kernel_details.csv")
    inv = open_path(PROF / folder)
    t = inv.profile.kernels
    assert kind_of(PROF / folder) == "profiler" and inv.profile.kind == "ascend_pt"
    assert t.n == len(rows) == 20
    assert t.total_us() == pytest.approx(_total(rows, "Duration(us)"), abs=1e-6)
    first = rows[0]["Start Time(us)"].strip()
    assert t.start_ns[0] == int(Decimal(first) * 1000)  # ns exact; a float64 would lose the last digits
    assert inv.run.dtype != "float32" and "profile" in inv.run.checks
    assert all(name in inv.graph for name in t.names("name"))


@pytest.mark.parametrize("folder", ["level1_2025-01", "level2_2025-11"])
def test_op_statistic_ratio_agrees_with_computed_shares(folder: str) -> None:
    stats = open_path(PROF / folder).profile.op_stats
    assert len(stats) == 20
    total = sum(s.total_us for s in stats)
    ratio_sum = sum(s.ratio_pct for s in stats)  # the file was cut to 20 rows: ratios sum below 100
    for s in stats:
        assert s.total_us / total * ratio_sum == pytest.approx(s.ratio_pct, abs=0.01)


def test_level1_quirks_steps_host_ops_modules_memory() -> None:
    inv = open_path(PROF / "level1_2025-01")
    p, t = inv.profile, inv.profile.kernels
    conv = t.text["name"].code("Conv2D1")
    row = int(np.flatnonzero(t.text["name"].codes == conv)[0])
    assert parse_shapes(t.label("input_shapes", row)) == [(32, 1, 224, 224, 8), (121, 4, 16, 8), (64,)]
    assert t.label("input_formats", row) == "NC1HWC0;FRACTAL_Z;NCHW" and t.ints["block_dim"][row] == 16
    assert float(t.metrics["aic_mac_ratio"][row]) == pytest.approx(0.519)
    assert np.isnan(t.metrics["aic_mac_ratio"][0]) or t.metrics["aic_mac_ratio"][0] == 0
    assert t.label("module", row) == "AlexNet_0.Sequential_0.Conv2d_0"  # joined from trace_view.json's flows
    assert [(s.step, s.computing, s.free) for s in p.steps] == [(50, pytest.approx(8873.756), pytest.approx(25744.05))]
    assert len(p.spans) == 20 and {s.track for s in p.spans} == {"Overlap Analysis"}
    empty = next(h for h in p.host_ops if h.name == "aten::empty")
    assert empty.count == 2 and empty.call_stack.count("\n") >= 2  # a quoted multi-line Call Stack cell
    assert len(inv.memory_samples) == 20 and len(inv.memory_events) == 20
    assert all(e.node in inv.graph for e in inv.memory_events)
    # msprof-analyze's advisor on this folder reports dynamic-shape operators; so do we
    assert any(f.kind == "dynamic_shape" and "jit_compile=False" in (f.hint or "") for f in inv.findings)
    comm = summarize(t, "category")[0]
    assert comm.key == "communication" and comm.total_us == pytest.approx(105991.876)


def test_msprof_output_and_block_num_alias() -> None:
    folder = PROF / "msprof"
    inv = open_path(folder)
    assert inv.profile.kind == "msprof" and inv.profile.kernels.n == 2
    assert inv.profile.kernels.total_us() == pytest.approx(42399.12 + 42058.48)
    assert [s.ratio_pct for s in inv.profile.op_stats] == [100.0]
    assert any(f.kind == "sync" for f in inv.findings)  # 24 DeviceSynchronize in api_statistic
    ut = read_kernels(folder / "mindstudio_profiler_output" / "op_summary_msprof_ut_expected.csv")
    assert ut.n == 3 and list(ut.ints["block_dim"]) == [-1, -1, -1]  # `Block Num` 4294967295 = no value
    assert ut.start_ns[0] == 1717575960208020758


@pytest.mark.parametrize("name,rows,comm", [("kernel_details_2023-09_MemoryL0.csv", 15, 3),
                                            ("kernel_details_2023-11_ArithmeticUtilization.csv", 15, 3)])
def test_older_kernel_layouts(name: str, rows: int, comm: int) -> None:
    path = PROF / "older_2023-2024" / name
    inv = open_path(path)
    t = inv.profile.kernels
    assert t.n == rows and t.total_us() == pytest.approx(_total(_csv(path), "Duration(us)"))
    groups = {g.key: g for g in summarize(t, "category")}
    assert groups["communication"].count == comm
    assert any(f.kind == "aicpu" for f in inv.findings)


def test_traces_bare_array_and_kineto() -> None:
    tv = open_path(PROF / "level1_2025-01" / OUT / "trace_view.json").profile
    assert tv.kernels.n == 16 and tv.kernels.start_ns.min() == 1736408883704643212
    old = open_path(PROF / "older_2023-2024" / "trace_view_2024-01.json").profile
    assert old.kernels.n == 18 and old.host_ops
    kin = open_path(PROF / "torch" / "kineto_cupti_h100_after_fix_trace.json")
    assert kin.profile.kind == "kineto" and kin.run.device["backend"] == "cuda"
    hta = open_path(PROF / "torch" / "pytorch_profiler_trace_excerpt_hta.json").profile
    assert hta.kernels.n == 1 and summarize(hta.kernels, "category")[0].key == "compute"  # a cutlass gemm


def test_msprof_op_folders() -> None:
    inv = open_path(PROF / "msprof_op" / "OPPROF_example")
    t = inv.profile.kernels
    assert kind_of(PROF / "msprof_op") == "msprof op" and t.n == 1
    assert (t.label("core", 0), float(t.dur_us[0]), int(t.ints["mix_block_dim"][0])) == ("MIX_AIC", 7.98, 2)
    assert float(t.metrics["aiv_vec_ratio"][0]) == pytest.approx(0.044841, abs=1e-5)
    assert set(inv.profile.extra["cores"][0]["tables"]) >= {"PipeUtilization", "Memory", "L2Cache"}
    assert open_path(PROF / "msprof_op").profile.kernels.n == 2


def test_profile_survives_save_and_load(tmp_path: Path) -> None:
    inv = open_path(PROF / "level1_2025-01")
    inv.save(tmp_path / "p.atui.json")
    back = Investigation.load(tmp_path / "p.atui.json")
    assert back.profile is not None and back.profile.kernels.n == 20
    assert np.array_equal(back.profile.kernels.start_ns, inv.profile.kernels.start_ns)
    assert back.profile.kernels.label("module", 2) == inv.profile.kernels.label("module", 2)
    assert [f.kind for f in back.findings] == [f.kind for f in inv.findings]


def _error(path: Path) -> str:
    with pytest.raises(InputError) as info:
        open_path(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    return str(info.value)


def _skipped(path: Path) -> tuple[int, list[str], dict]:
    inv = open_path(path)
    (entry,) = inv.run.extra["skipped"]
    return inv.profile.kernels.n, inv.run.extra["notes"], entry


def test_bad_kernel_records_are_skipped_counted_and_said(tmp_path: Path) -> None:
    good = (PROF / "level1_2025-01" / OUT / "kernel_details.csv").read_bytes()
    whole = open_path(PROF / "level1_2025-01" / OUT / "kernel_details.csv").profile.kernels.n
    bad = tmp_path / "kernel_details.csv"
    bad.write_bytes(good[: len(good) // 2])  # cut mid-row: what a profiler that crashed mid-write leaves
    n, notes, entry = _skipped(bad)
    assert n == 8 and entry["skipped_records"] == 1 and entry["first_bad_record"].startswith("record 10: 15 cells")
    assert notes == ["kernel_details.csv: skipped 1 unreadable record (first: record 10: 15 cells, the header 46)"]
    bad.write_bytes(good.replace(b"53.741", b"soon!", 1))
    n, notes, entry = _skipped(bad)
    assert n == whole - 1 and entry["first_bad_record"] == "record 2: column 'Duration(us)': 'soon!' is not a number"
    bad.write_bytes(b"Name,Duration(us)\nx,1\n" + bytes(range(128, 256)) + b",2\ny,3\n")
    n, notes, entry = _skipped(bad)
    assert n == 2 and entry["first_bad_record"] == "record 3: bytes that are not UTF-8"
    bad.write_bytes(b"Name,Duration(us)\nx\ny\n")  # no usable record: refused, saying why
    assert "no usable record: all 2 skipped (first: record 2: 1 cells, the header 2)" in _error(bad)
    folder = tmp_path / "run_ascend_pt" / OUT
    folder.mkdir(parents=True)
    (folder / "kernel_details.csv").write_text("Foo,Bar\n1,2\n")
    with pytest.raises(InputError, match="not a kernel table: no Name/Op Name and Duration"):
        open_path(tmp_path / "run_ascend_pt")


def _csv_module_table(path: Path, skipped=None):  # the slow path, the reference for the numpy one
    from ascend_tui.readers.profiler import csv_tables as pc
    from ascend_tui.graph.profile import KernelTable

    _, header, fh = pc.open_csv(path)
    fh.close()
    cols = pc.kernel_columns(header)
    metrics = {h: i for i, h in enumerate(header) if pc._METRIC.match(h)}
    text = path.read_bytes().decode("utf-8-sig").split("\n", 1)[1]
    return KernelTable.concat(pc._csv_tables(path, header, cols, metrics, text, 0, skipped)[0])


def _same(a, b) -> None:
    assert a.n == b.n
    for k in a.text:
        assert [a.text[k].at(i) for i in range(a.n)] == [b.text[k].at(i) for i in range(b.n)], k
    for k in a.ints:
        assert np.array_equal(a.ints[k], b.ints[k]), k
    for k in (*a.floats, *a.metrics):
        x = a.floats.get(k, a.metrics.get(k))
        y = b.floats.get(k, b.metrics.get(k))
        assert np.allclose(x, y, equal_nan=True), k


@pytest.mark.parametrize("path", sorted(PROF.glob("**/kernel_details*.csv")) + sorted(PROF.glob("**/op_summary*.csv"))
                         + sorted(PROF.glob("**/task_time*.csv")), ids=lambda p: p.parent.name + "/" + p.name)
def test_numpy_split_matches_the_csv_module(path: Path) -> None:
    _same(read_kernels(path), _csv_module_table(path))


KERNEL_FILES = sorted(PROF.glob("**/kernel_details*.csv")) + sorted(PROF.glob("**/op_summary*.csv")) + \
    sorted(PROF.glob("**/task_time*.csv")) + sorted(FIXTURES.glob("peer/**/kernel_details*.csv"))


@pytest.mark.parametrize("block", [None, 700])
@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.parent.name + "/" + p.name)
def test_the_folder_reader_releasing_blocks_matches_the_csv_module(path: Path, block: int | None,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The strict read decodes the summaries' columns with the split and lets each block go; every column, read
    then or from the file again later (in blocks of a few rows too), equals the csv module's."""
    from ascend_tui.readers.parse import fast_csv
    from ascend_tui.readers.parse.skipped import Skipped

    if block:
        monkeypatch.setattr(fast_csv, "BLOCK", block)
    assert KERNEL_FILES
    skipped, want = Skipped(str(path)), Skipped(str(path))
    got = read_kernels(path, skipped=skipped)
    _same(got, _csv_module_table(path, want))
    assert (skipped.records, skipped.first, skipped.cells) == (want.records, want.first, want.cells)


def test_tiny_blocks_with_quoted_newlines_and_blank_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks cut anywhere: inside a quoted multi-line cell, between CRLFs, around blank lines."""
    header = "Name,Type,Start Time(us),Duration(us),Block Dim,Input Shapes\r\n"
    rows = []
    for i in range(60):
        shapes = '"""4,8;\n16"""' if i % 7 == 0 else '"""32,3,224,224"""'
        rows.append(f'op_{i},"Mat,Mul",1736408883704643.{i:03d}\t,{i * 1.5},{i % 5 or "N/A"},{shapes}\r\n')
        if i % 11 == 0:
            rows.append("\r\n")
    path = tmp_path / "kernel_details.csv"
    path.write_text(header + "".join(rows), newline="")
    want = _csv_module_table(path)
    for block in (7, 64, 333, 1 << 20):
        got = read_kernels(path, block=block)
        _same(got, want)
    from ascend_tui.readers.profiler import csv_tables as profiler_csv

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the whole file should split with numpy, not fall back to the csv module")

    monkeypatch.setattr(profiler_csv, "_csv_tables", refuse)
    _same(read_kernels(path), want)
    assert want.n == 60 and want.label("type", 0) == "Mat,Mul" and want.label("input_shapes", 0) == '"4,8;\n16"'
    assert want.start_ns[5] == 1736408883704643005 and want.ints["block_dim"][5] == -1


def test_a_large_folder_shows_its_first_block_before_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ascend_tui.readers.parse import fast_csv

    folder = tmp_path / "big_ascend_pt" / OUT
    folder.mkdir(parents=True)
    lines = (PROF / "level1_2025-01" / OUT / "kernel_details.csv").read_bytes().split(b"\r\n")
    body = [ln for ln in lines[1:] if ln]
    (folder / "kernel_details.csv").write_bytes(b"\r\n".join([lines[0], *(body * 100)]) + b"\r\n")
    monkeypatch.setattr(fast_csv, "BLOCK", 64 * 1024)  # ~9 blocks
    seen: list[Investigation] = []
    inv = open_path(tmp_path / "big_ascend_pt", on_partial=seen.append)
    # the first block, then the whole read before its advice is computed
    assert len(seen) == 2 and 0 < seen[0].profile.kernels.n < inv.profile.kernels.n == 2000
    assert seen[1].profile is inv.profile and not any(f.check == "profile" for f in seen[1].findings)
    assert seen[0].profile.extra["partial"] and seen[0].profile.op_stats == inv.profile.op_stats
    assert open_path(tmp_path / "big_ascend_pt").profile.kernels.n == 2000  # no callback, no partial work
    # the app's open worker hands its partial-results callback through, so the first screen shows early
    import threading

    from ascend_tui.app.workers import load_paths
    from ascend_tui.live.options import RunOptions

    seen.clear()
    loaded = load_paths([str(tmp_path / "big_ascend_pt")], RunOptions(), lambda *a: None, threading.Event(),
                        seen.append)
    assert len(seen) == 2 and loaded.inv.profile.kernels.n == 2000
