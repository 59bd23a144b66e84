"""The profilers' SQLite exports read like their text exports, and no reader writes beside its input."""

from __future__ import annotations

import csv
import hashlib
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ascend_tui.checks.profile import summarize
from ascend_tui.errors import InputError
from ascend_tui.offline.open import kind_of, open_path
from ascend_tui.readers.parse import sqlite_ro
from ascend_tui.readers.profiler.ascend_pt import read_profile
from tests.conftest import FIXTURES

INSIGHT = FIXTURES / "peer" / "Ascend__msinsight"
LEVEL1_DB = INSIGHT / "test/data/pytorch/db/level1"
LEVEL1_TEXT = INSIGHT / "test/data/pytorch/text/level1"
FULL_DB = INSIGHT / "server/src/test/test_data/full_db/msprof_0.db"
# The pair is one script profiled twice, 28 minutes apart (the start times differ): kernels, types, names and
# shapes are the same, durations only as close as two runs of one step are. Per kernel type the time agrees
# to within 10% where the type takes over 1% of the step; in all, the kernel time and the step split to 5%.
RUN_TO_RUN = 0.05


def _text_kernels(rank: int) -> list[dict[str, str]]:
    path = LEVEL1_TEXT / f"rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("rank", [0, 1])
def test_db_export_reads_as_its_text_export(fixtures: Path, rank: int) -> None:
    db = read_profile(LEVEL1_DB / f"rank{rank}_ascend_pt")
    text = read_profile(LEVEL1_TEXT / f"rank{rank}_ascend_pt")
    assert db is not None and text is not None and db.extra["export"] == "db" and db.extra["rank"] == rank
    assert db.kernels.n == text.kernels.n == len(_text_kernels(rank)) == 191
    # the same kernels with the same types, cores, shapes and dtypes (streams interleave differently run to run)
    def kernels(p: object) -> Counter[tuple[str, ...]]:
        t = p.kernels  # type: ignore[attr-defined]
        cols = ("name", "type", "core", "input_shapes", "input_dtypes", "output_shapes", "output_formats", "module")
        # collectives carry the run's own op index (hcom_allReduce__210_0_1 / __586_0_1)
        return Counter(tuple(t.label(c, i).split("__")[0] if c == "name" else t.label(c, i) for c in cols)
                       for i in range(t.n))

    assert kernels(db) == kernels(text)  # module paths too: the db's links equal the trace's flows
    assert sum(1 for i in range(db.kernels.n) if db.kernels.label("module", i)) >= 50
    on_stream = [db.kernels.label("name", i) for i in np.flatnonzero(db.kernels.ints["stream"] == 2)]
    assert on_stream == [text.kernels.label("name", i) for i in np.flatnonzero(text.kernels.ints["stream"] == 2)]
    assert set(db.kernels.ints["step"].tolist()) == set(text.kernels.ints["step"].tolist()) == {50}
    # time per type: the same counts, totals within run-to-run noise
    by_db = {g.key: g for g in summarize(db.kernels, "type")}
    by_text = {g.key: g for g in summarize(text.kernels, "type")}
    assert {k: g.count for k, g in by_db.items()} == {k: g.count for k, g in by_text.items()}
    whole = text.kernels.total_us()
    assert db.kernels.total_us() == pytest.approx(whole, rel=RUN_TO_RUN)
    for key, g in by_text.items():
        if g.total_us > 0.01 * whole:
            assert by_db[key].total_us == pytest.approx(g.total_us, rel=2 * RUN_TO_RUN), key
    assert [g.key for g in summarize(db.kernels, "type")[:5]] == [g.key for g in summarize(text.kernels, "type")[:5]]
    # op_statistic: the db's per-type sums are its kernel rows' (the text file's are its own rows')
    assert {(s.op_type, s.core): s.count for s in db.op_stats} == {(s.op_type, s.core): s.count for s in text.op_stats}
    # counters from TASK_PMU_INFO land under the CSV's column names (µs, ratios)
    assert set(text.kernels.metrics) >= {"aicore_time(us)", "aiv_time(us)", "aiv_vec_ratio"}
    assert {"aicore_time(us)", "aiv_time(us)", "aiv_vec_ratio", "aic_mac_ratio"} <= set(db.kernels.metrics)
    busy = db.kernels.metrics["aiv_time(us)"]
    ok = np.isfinite(busy) & (busy > 0)
    assert ok.sum() > 50 and (busy[ok] <= db.kernels.dur_us[ok] * 1.01).all()  # busy time within the kernel's time
    # steps: analysis.db's StepTraceTime, and the same split as step_trace_time.csv to run-to-run noise
    (ds,), (ts,) = db.steps, text.steps
    assert (ds.step, ds.rank) == (ts.step, rank) == (50, rank)
    for field in ("computing", "communication", "free"):
        assert getattr(ds, field) == pytest.approx(getattr(ts, field), rel=RUN_TO_RUN), field
    # host ops: the framework ops operator_details.csv lists, with the syncs the advice counts
    db_ops = {h.name: h for h in db.host_ops}
    text_ops = {h.name: h for h in text.host_ops}
    assert set(text_ops) <= set(db_ops)
    for name in ("aten::_local_scalar_dense", "aten::convolution", "aten::addmm"):
        assert db_ops[name].count == text_ops[name].count, name
    assert db_ops["aten::convolution"].device_total_us == pytest.approx(text_ops["aten::convolution"].device_total_us,
                                                                        rel=2 * RUN_TO_RUN)


def test_db_steps_from_overlap_analysis_equal_analysis_db(fixtures: Path) -> None:
    """Without analysis.db the step split comes from OVERLAP_ANALYSIS, as torch_npu computes step_trace_time."""
    from ascend_tui.readers.profiler import db

    folder = LEVEL1_DB / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT"
    with_analysis = db.read(folder / "ascend_pytorch_profiler_0.db", folder / "analysis.db")[0].steps
    alone = db.read(folder / "ascend_pytorch_profiler_0.db")[0].steps
    for a, b in zip(with_analysis, alone, strict=True):
        for field in ("step", "computing", "communication_not_overlapped", "overlapped", "communication", "free"):
            assert getattr(a, field) == pytest.approx(getattr(b, field), abs=1e-3), field


def test_db_memory_equals_text_memory(fixtures: Path) -> None:
    db = open_path(LEVEL1_DB / "rank0_ascend_pt")
    text = open_path(LEVEL1_TEXT / "rank0_ascend_pt")
    assert len(db.memory_events) == len(text.memory_events) == 184
    assert Counter(s.label for s in db.memory_samples) == Counter(s.label for s in text.memory_samples)

    def peak(inv: object, label: str) -> float:
        return max(s.reserved_bytes for s in inv.memory_samples if s.label == label)  # type: ignore[attr-defined]

    for label in ("APP", "PTA", "PTA+GE"):  # bytes in the db, MB in the CSV: the same numbers to run-to-run noise
        assert peak(db, label) == pytest.approx(peak(text, label), rel=RUN_TO_RUN), label
    assert Counter(e.extra["op"] for e in db.memory_events) == Counter(e.extra["op"] for e in text.memory_events)


def test_db_only_folder_gets_kernels_steps_and_advice(fixtures: Path) -> None:
    folder = LEVEL1_DB / "rank0_ascend_pt"
    assert kind_of(folder) == "profiler"
    inv = open_path(folder)
    assert inv.profile is not None and inv.profile.kernels.n == 191 and len(inv.profile.steps) == 1
    kinds = {f.kind for f in inv.findings}
    assert {"exposed_communication", "sync"} <= kinds  # exposed allreduce and the .item() syncs, as from the text export
    assert inv.run.source == "ascend_pt profiler (db)"


def test_msprof_db_file_reads(fixtures: Path) -> None:
    assert kind_of(FULL_DB) == "profiler" and kind_of(FULL_DB.parent) == "profiler"
    inv = open_path(FULL_DB)
    p = inv.profile
    assert p is not None and p.kind == "msprof" and p.kernels.n == 11
    assert Counter(p.kernels.label("type", i) for i in range(p.kernels.n))["Less"] == 2
    assert p.kernels.label("name", 0) == "aclnnInplaceZero_ZerosLikeAiCore_ZerosLike"
    assert p.kernels.dur_us[0] == pytest.approx(612.092)


def test_cluster_of_db_only_ranks(fixtures: Path) -> None:
    assert kind_of(LEVEL1_DB) == "cluster profile"
    inv = open_path(LEVEL1_DB)
    c = inv.profile.extra["cluster"]
    assert [r["rank"] for r in c["ranks"]] == [0, 1] and c["kernels"] == 382
    assert c["slow_rank"] == -1  # 35.0 vs 35.1 ms of own time: no rank holds the other back


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


def _inputs(root: Path) -> list[Path]:
    """Every file and folder under `root` some reader takes."""
    return [p for p in sorted(root.rglob("*")) if kind_of(p) is not None]


def test_no_reader_writes_beside_its_input(fixtures: Path, tmp_path: Path) -> None:
    """Every fixture a reader takes is opened from a writable copy: the copy stays byte-identical (no -shm/-wal)."""
    copy = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, copy)
    before = _tree(copy)
    opened = 0
    for path in _inputs(copy):
        try:
            open_path(path)
            opened += 1
        except InputError:
            pass
    assert opened > 60
    assert _tree(copy) == before


def test_vis_db_in_wal_mode_leaves_no_side_files(fixtures: Path, tmp_path: Path) -> None:
    src = next((FIXTURES / "msprobe/msprobe_output/vis").glob("compare_*.vis.db"))
    shutil.copyfile(src, tmp_path / src.name)
    with sqlite3.connect(tmp_path / src.name) as conn:
        assert conn.execute("pragma journal_mode").fetchone()[0] == "wal"
    conn.close()
    for side in tmp_path.glob("*.vis.db-*"):
        side.unlink()
    open_path(tmp_path / src.name)
    assert [p.name for p in tmp_path.iterdir()] == [src.name]


def test_db_being_written_is_copied_and_read(tmp_path: Path) -> None:
    """A WAL database with a writer still holding it: what was committed is read, nothing is written beside."""
    path = tmp_path / "live.db"
    writer = sqlite3.connect(path)
    writer.execute("pragma journal_mode=wal")
    writer.execute("create table STEP_TIME (id integer, startNs integer, endNs integer)")
    writer.execute("insert into STEP_TIME values (7, 1, 2)")
    writer.commit()
    try:
        side = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
        assert (tmp_path / "live.db-wal").stat().st_size > 0
        with sqlite_ro.connect(path) as conn:
            assert conn.execute("select id from STEP_TIME").fetchall() == [(7,)]
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == side
    finally:
        writer.close()


def test_bad_sqlite_files_are_one_line_errors(tmp_path: Path) -> None:
    not_db = tmp_path / "ascend_pytorch_profiler_0.db"
    not_db.write_text("Step Id,Name\n")
    with pytest.raises(InputError, match="not an SQLite database"):
        with sqlite_ro.connect(not_db):
            pass
    whole = FULL_DB.read_bytes()
    cut = tmp_path / "msprof_0.db"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(InputError, match="truncated SQLite database"):
        open_path(cut)
    empty = tmp_path / "msprof_1.db"
    sqlite3.connect(empty).execute("create table other (x)").connection.close()
    with pytest.raises(InputError, match="without profiler tables"):
        open_path(empty)


def test_msprof_db_inside_prof_folders(fixtures: Path, tmp_path: Path) -> None:
    prof = tmp_path / "run" / "PROF_000001_20231025081133337_QCMJMHKCPRKMNQHC"
    prof.mkdir(parents=True)
    shutil.copyfile(FULL_DB, prof / "msprof_20231025081240.db")
    for path in (prof, prof.parent):
        assert kind_of(path) == "profiler"
        inv = open_path(path)
        assert inv.profile.kind == "msprof" and inv.profile.kernels.n == 11


def test_msprof_prof_folders_as_a_cluster(fixtures: Path, tmp_path: Path) -> None:
    """Two PROF_* folders of msprof db exports (one a device): a cluster, ranks numbered loudly (no rank ids in them)."""
    for k in range(2):
        prof = tmp_path / "job" / f"PROF_00000{k}_2023102508113333{k}_QCMJMHKCPRKMNQHC"
        prof.mkdir(parents=True)
        shutil.copyfile(FULL_DB, prof / f"msprof_2023102508124{k}.db")
    assert kind_of(tmp_path / "job") == "cluster profile"
    inv = open_path(tmp_path / "job")  # this export has no steps: the kernels, and a note saying so
    c = inv.profile.extra["cluster"]
    assert c["kernels"] == 22 and inv.profile.kernels.n == 11 and c["slow_rank"] == -1
    assert any("no step times in any of the 2 ranks" in n for n in inv.run.extra["notes"])
    assert any("repeat rank ids" in n for n in inv.run.extra["notes"])
