"""One bad row no longer refuses a profiler table: it is skipped, counted, and said (CLI, JSON, app notification)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascend_tui.cli.main import main
from ascend_tui.errors import InputError
from ascend_tui.offline.open import open_path
from ascend_tui.readers.parse.skipped import Skipped
from ascend_tui.readers.profiler import csv_tables
from ascend_tui.readers.profiler.csv_tables import read_kernels, read_op_statistic, read_step_trace
from ascend_tui.readers.profiler.memory import read_memory_record
from tests.conftest import FIXTURES

RANK_0 = FIXTURES / "peer/Ascend__msinsight/server/src/test/test_data/test_rank_0"
HEADER = "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim,Mix Block Dim," \
         "Input Shapes,aic_mac_ratio\n"


def _row(i: int) -> str:
    return f'1,k{i},Add,AI_CORE,{1736408883704643 + i}.212\t,{1 + i % 7}.5,0,8,0,"""4,{i}""",0.25\n'


def test_peer_rank_with_a_short_kernel_row_reads(fixtures: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """MindStudio Insight's own test rank: record 17 of kernel_details.csv has 31 cells for 32 columns."""
    inv = open_path(RANK_0)
    assert inv.profile is not None and inv.profile.kernels.n == 20
    (entry,) = inv.run.extra["skipped"]
    assert entry["skipped_records"] == 1 and entry["first_bad_record"] == "record 17: 31 cells, the header 32"
    out = tmp_path / "report.json"
    assert main(["profile", str(RANK_0), "-q", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "note: kernel_details.csv: skipped 1 unreadable record (first: record 17: 31 cells, the header 32)" in printed
    report = json.loads(out.read_text())
    assert report["profile"]["skipped"][0]["skipped_records"] == 1
    assert any("skipped 1 unreadable record" in n for n in report["run"]["notes"])


@pytest.mark.parametrize("block", [None, 4096])
def test_short_and_long_rows_in_the_middle_are_skipped(tmp_path: Path, block: int | None) -> None:
    rows = [_row(i) for i in range(3000)]
    rows[1500] = "1,short,Add,AI_CORE,1736408883706143.212\t,2.5,0,8\n"  # cut: fields missing at the end
    rows[2200] = _row(2200).rstrip("\n") + ",surplus\n"  # a cell more than the header, not empty
    rows[2500] = _row(2500).replace(",2.5,0,", ",N0PE,0,")  # a duration that is not a number
    path = tmp_path / "kernel_details.csv"
    path.write_text(HEADER + "".join(rows))
    skipped = Skipped(str(path))
    t = read_kernels(path, skipped=skipped, block=block)
    assert t.n == 2997 and skipped.records == 3
    assert skipped.first == "record 1502: 8 cells, the header 11"
    names = [t.label("name", i) for i in range(t.n)]
    assert "short" not in names and "k2200" not in names and "k2500" not in names and names[-1] == "k2999"
    assert t.label("input_shapes", 1600) == '"4,1601"'  # cells after the skipped records stay in their columns
    assert float(t.dur_us.sum()) == pytest.approx(sum(1 + i % 7 + 0.5 for i in range(3000) if i not in (1500, 2200, 2500)))


def test_a_trailing_comma_is_no_bad_row(tmp_path: Path) -> None:
    """msprof ends every line with a comma: that is one empty cell more, not a long row."""
    path = tmp_path / "op_summary_0.csv"
    path.write_text("Op Name,OP Type,Task Duration(us),\n" + "".join(f"op{i},Add,{i}.5,\n" for i in range(50)))
    skipped = Skipped(str(path))
    assert read_kernels(path, skipped=skipped).n == 50 and not skipped


def test_small_tables_skip_bad_rows(tmp_path: Path) -> None:
    stats = tmp_path / "op_statistic.csv"
    stats.write_text("OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
                     "Add,AI_CORE,3,30,5,10,15,60\nMul,AI_CORE,2\nCast,AI_CORE,x,20,5,10,15,40\n"
                     "Sub,AI_CORE,1,1,1,1,1,1\n")
    skipped = Skipped(str(stats))
    assert [s.op_type for s in read_op_statistic(stats, skipped)] == ["Add", "Sub"]
    assert skipped.records == 2 and skipped.first == "record 3: 3 cells, the header 8"
    steps = tmp_path / "step_trace_time.csv"
    steps.write_text("Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble\n"
                     "1,10,2,1,3,4,0,0\n2,10,2,1,3\n3,11,2,1,3,4,0,0\n")
    skipped = Skipped(str(steps))
    assert [s.step for s in read_step_trace(steps, skipped)] == [1, 3] and skipped.records == 1
    steps.write_text("Step,Computing,Free\n1,2\n")
    with pytest.raises(InputError, match="no usable record: all 1 skipped"):
        read_step_trace(steps, Skipped(str(steps)))
    with pytest.raises(InputError, match="'x' is not a number"):  # without a Skipped, the first bad row is an error
        read_op_statistic(stats)


def test_memory_record_skips_bad_rows(fixtures: Path, tmp_path: Path) -> None:
    good = (FIXTURES / "profiler/level1_2025-01/ASCEND_PROFILER_OUTPUT/memory_record.csv").read_text().splitlines()
    lines = good[:4] + [good[4].rsplit(",", 2)[0]] + good[5:]
    path = tmp_path / "memory_record.csv"
    path.write_text("\n".join(lines) + "\n")
    skipped = Skipped(str(path))
    assert len(read_memory_record(path, skipped=skipped)) == len(good) - 2 and skipped.records == 1
    assert skipped.first.startswith("record 5:")


def test_real_fixtures_skip_nothing(fixtures: Path) -> None:
    """The tools' own well-formed outputs read without one skipped record."""
    for folder in ("level0_2025-01", "level1_2025-01", "level2_2025-11", "msprof"):
        inv = open_path(FIXTURES / "profiler" / folder)
        assert not inv.run.extra.get("skipped"), folder


def test_fast_path_speed_is_kept_for_good_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file without bad records never goes through the csv module."""
    path = tmp_path / "kernel_details.csv"
    path.write_text(HEADER + "".join(_row(i) for i in range(2000)))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a good block went through the csv module")

    monkeypatch.setattr(csv_tables, "_csv_tables", refuse)
    skipped = Skipped(str(path))
    assert read_kernels(path, skipped=skipped, block=8192).n == 2000 and not skipped


def test_gzip_csvs_read_like_their_plain_twins(fixtures: Path, tmp_path: Path) -> None:
    """A profiler folder shipped compressed (by magic bytes: `.csv.gz`, or gzip under a `.csv` name) reads the same."""
    import gzip
    import shutil

    src = FIXTURES / "profiler/level1_2025-01"
    plain = open_path(src)
    copy = tmp_path / "run_ascend_pt"
    shutil.copytree(src, copy)
    out = copy / "ASCEND_PROFILER_OUTPUT"
    for name in ("kernel_details.csv", "op_statistic.csv", "memory_record.csv"):
        (out / f"{name}.gz").write_bytes(gzip.compress((out / name).read_bytes()))
        (out / name).unlink()
    data = (out / "step_trace_time.csv").read_bytes()
    (out / "step_trace_time.csv").write_bytes(gzip.compress(data))  # gzip under the plain name
    packed = open_path(copy)
    assert packed.profile.kernels.n == plain.profile.kernels.n
    assert packed.profile.kernels.total_us() == plain.profile.kernels.total_us()
    assert packed.profile.steps == plain.profile.steps and packed.profile.op_stats == plain.profile.op_stats
    assert len(packed.memory_samples) == len(plain.memory_samples)
    lone = open_path(out / "kernel_details.csv.gz")
    assert lone.profile.kernels.n == plain.profile.kernels.n
    (out / "broken.csv").write_bytes(gzip.compress(data)[:-12])
    with pytest.raises(InputError, match="damaged gzip file"):
        csv_tables.read_step_trace(out / "broken.csv")


async def test_skipped_rows_are_an_app_notification(fixtures: Path, tmp_path: Path) -> None:
    from textual.worker import WorkerFailed

    from ascend_tui.app.app import InvestigatorApp

    app = InvestigatorApp([str(RANK_0)], theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        try:
            await app.workers.wait_for_complete()
        except WorkerFailed:
            pass
        # The loaded investigation reaches the screen through a message the worker posted: on a loaded machine one
        # pause may come before it is handled, so wait for the notification (a bound only against a hang).
        told = "kernel_details.csv: skipped 1 unreadable record (first: record 17"
        said: list[str] = []
        for _ in range(600):
            await pilot.pause(0.05)
            said = [n.message for n in app._notifications]
            if app.inv is not None and any(told in m for m in said):
                break
        assert any(told in m for m in said), said
        assert app.inv is not None and app.inv.profile.kernels.n == 20


def test_memory_csvs_are_told_by_header_not_by_kernel_columns(fixtures: Path) -> None:
    """operator_memory.csv has Name and Duration(us) like a kernel table: it is the memory reader's, renamed or not."""
    from ascend_tui.offline.open import kind_of

    older = FIXTURES / "profiler/older_2023-2024"
    for path in (FIXTURES / "profiler/level1_2025-01/ASCEND_PROFILER_OUTPUT/operator_memory.csv",
                 older / "operator_memory_2023-09.csv", older / "memory_record_2023-09.csv"):
        assert kind_of(path) == "profiler memory", path
    inv = open_path(older / "operator_memory_2023-09.csv")
    assert inv.profile is None and len(inv.memory_events) > 0
    assert len(open_path(older / "memory_record_2023-09.csv").memory_samples) == 8
