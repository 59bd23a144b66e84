"""The numpy kernel-table reader on the cells profilers write: exact numbers, quoting, ragged rows, lazy columns."""

from __future__ import annotations

import math
import random
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from ascend_tui import threads
from ascend_tui.errors import InputError
from ascend_tui.readers.parse import fast_csv
from ascend_tui.readers.profiler import csv_tables as profiler_csv
from ascend_tui.readers.profiler.csv_tables import read_kernels
from ascend_tui.graph.profile import NO_INT, NO_START


def _write(tmp_path: Path, text: str, name: str = "kernel_details.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


def _refuse(*args: object) -> None:
    raise AssertionError("these records should split with numpy, not fall back to the csv module")


def _number(cell: str) -> float:
    c = cell.strip().strip('"')
    return math.nan if c in ("", "N/A", "NA", "-") else float(c)


def test_numbers_read_exactly_as_float_reads_them(tmp_path: Path) -> None:
    """Short decimals take the 8-bytes-at-a-time path, the rest numpy's; both must equal Python's float()."""
    rng = random.Random(7)
    cells = ["0.186", "0", "0.0", ".5", "5.", "12345678", "1234567.8", "99999.999", "123456789.25", "-1.5", "1e-05",
             "2.5E+3", " 7.25 ", '"3.5"', "N/A", "NA", "", "-", "0000.010"]
    for _ in range(3000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 9)))
        at = rng.randint(0, len(digits))
        cells.append(digits[:at] + "." + digits[at:] if rng.random() < 0.7 else digits)
    body = "".join(f"op{i},{c}\r\n" for i, c in enumerate(cells))
    t = read_kernels(_write(tmp_path, "Name,Duration(us)\r\n" + body))
    want = np.array([_number(c) for c in cells])
    got = t.dur_us
    assert t.n == len(cells)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~np.isnan(want)], want[~np.isnan(want)])  # bit for bit, not approximately
    assert got[0] == 0.186 and got[8] == 123456789.25 and got[9] == -1.5 and got[11] == 2500.0 and got[13] == 3.5


def test_start_times_read_exactly_as_to_ns_reads_them(tmp_path: Path) -> None:
    """µs start times take the word path when their dot sits where the first one's does, else the digit matrix:
    every cell must give `to_ns`'s exact ns (the decimals past the third cut), `N/A` NO_START."""
    rng = random.Random(11)
    cells = ["1736408883704643.212\t", "1736408883704643.2\t", "1736408883704643.\t", "1736408883704643.2125\t",
             "1736408883704643.212 ", "1736408883704643.212\r", "1736408883704643.212", "1736408883704643.21234567",
             "N/A", "", "12.5", "9223372036854775.807", " 1736408883704643.212", "1736408883704643.212\t\t",
             "0000000000000001.001\t", "1736408883704643"]
    for _ in range(3000):
        width = rng.choice([16, 16, 16, rng.randint(1, 15)])  # 16 digits under 9.2e15: the ns fit an int64
        whole = rng.choice("12345678") + "".join(rng.choice("0123456789") for _ in range(width - 1))
        frac = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 7)))
        cells.append(whole + ("." + frac if rng.random() < 0.95 else "") + rng.choice(["\t", "", " ", "\t"]))
    body = "".join(f"op{i},{c},1\r\n" for i, c in enumerate(cells))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(profiler_csv, "_csv_tables", _refuse)
        t = read_kernels(_write(tmp_path, "Name,Start Time(us),Duration(us)\r\n" + body))
    assert t.start_ns.tolist() == [profiler_csv.to_ns(c) for c in cells]


def test_quoted_separators_crlf_tabs_and_missing_cells(tmp_path: Path) -> None:
    header = "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Block Dim,Input Shapes,aic_mac_ratio\r\n"
    rows = ['50,"Mat,Mul_1",MatMul,AI_CORE,1736408883704643.212\t,53.741,4294967295,"""32,3,224,224""",0.519\r\n',
            '50,trans_1,TransData,AI_VECTOR_CORE,1736408883704801.156\t,6.54,N/A,"""4,8;\n16""",N/A\r\n',
            '51,"say ""hi""",NA,AI_CPU,N/A,0,8,,NA\r\n']
    path = _write(tmp_path, header + "".join(rows))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(profiler_csv, "_csv_tables", _refuse)
        t = read_kernels(path)
    assert t.n == 3
    assert [t.label("name", i) for i in range(3)] == ["Mat,Mul_1", "trans_1", 'say "hi"']
    assert t.label("input_shapes", 0) == '"32,3,224,224"' and t.label("input_shapes", 1) == '"4,8;\n16"'
    assert t.label("core", 2) == "AI_CPU" and t.label("input_shapes", 2) == ""
    assert list(t.start_ns) == [1736408883704643212, 1736408883704801156, NO_START]
    assert list(t.ints["block_dim"]) == [NO_INT, NO_INT, 8] and list(t.ints["step"]) == [50, 50, 51]
    assert t.dur_us.tolist() == [53.741, 6.54, 0.0]
    mac = t.metrics["aic_mac_ratio"]
    assert mac[0] == np.float32(0.519) and np.isnan(mac[1]) and np.isnan(mac[2])


def test_ragged_rows_keep_their_cells_or_name_the_short_record(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    header = "Name,Type,Duration(us),Block Dim,aic_mac_ratio\n"
    # one record with an extra cell (a trailing comma), one without its last cell
    body = "a,Add,1.5,8,0.25,\nb,Mul,2.5,16\nc,Add,3.5,32,0.75\n"
    with monkeypatch.context() as m:  # the odd records are read by numpy, not the csv module
        m.setattr(profiler_csv, "_csv_tables", _refuse)
        t = read_kernels(_write(tmp_path, header + body))
    assert [t.label("name", i) for i in range(3)] == ["a", "b", "c"]
    assert t.dur_us.tolist() == [1.5, 2.5, 3.5] and list(t.ints["block_dim"]) == [8, 16, 32]
    mac = t.metrics["aic_mac_ratio"]
    assert mac[0] == 0.25 and np.isnan(mac[1]) and mac[2] == 0.75
    with pytest.raises(InputError, match=r"record 3 has 2 cells, the header 5 \(truncated file\?\)"):
        read_kernels(_write(tmp_path, header + "a,Add,1.5,8,0.25\nb,Mul\n", "short.csv"))


def test_columns_are_decoded_when_first_read_and_junk_is_named_then(tmp_path: Path) -> None:
    header = "Name,Type,Duration(us),aic_mac_ratio,aiv_vec_ratio\n"
    path = _write(tmp_path, header + "a,Add,1.5,0.5,0.25\nb,Mul,2.5,soon,0.5\n")
    t = read_kernels(path)
    assert not t.metrics.is_ready("aic_mac_ratio") and not t.text.is_ready("name")
    assert t.metrics["aiv_vec_ratio"].tolist() == [0.25, 0.5] and t.metrics.is_ready("aiv_vec_ratio")
    assert not t.metrics.is_ready("aic_mac_ratio")  # reading one column decodes that one only
    with pytest.raises(InputError, match=r"record 3: column 'aic_mac_ratio': 'soon' is not a number"):
        t.metrics["aic_mac_ratio"]


def test_rows_of_an_unread_column_decode_alone_across_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fast_csv, "BLOCK", 256)  # many blocks
    header = "Name,Type,Duration(us),Input Shapes,aic_mac_ratio\n"
    body = "".join(f'op{i},T{i % 7},{i}.5,"""{i % 5},3""",0.{i % 10}\n' for i in range(300))
    path = _write(tmp_path, header + body)
    rows = np.array([299, 3, 150, 3, 42, 0, 211])
    sub = read_kernels(path).take(rows)
    assert [sub.label("input_shapes", k) for k in range(len(rows))] == [f'"{i % 5},3"' for i in rows]
    assert [sub.label("type", k) for k in range(len(rows))] == [f"T{i % 7}" for i in rows]
    assert sub.dur_us.tolist() == [i + 0.5 for i in rows]
    assert sub.metrics["aic_mac_ratio"].tolist() == [np.float32(f"0.{i % 10}") for i in rows]
    assert read_kernels(path).take(np.zeros(0, np.int64)).text["input_shapes"].values == []


def test_a_strict_read_lets_the_bytes_go_and_reads_them_again_for_another_column(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder reader decodes what the summaries read with the split and drops each block's bytes; a column
    asked for later (formats, wait times, other counters) reads its blocks again from the file, the same as
    the csv module reads it; a file changed in between is refused, not misread."""
    monkeypatch.setattr(fast_csv, "BLOCK", 300)
    released = []
    real = fast_csv.Split.release
    monkeypatch.setattr(fast_csv.Split, "release", lambda self, source: (released.append(self), real(self, source)))
    header = "Name,Type,Start Time(us),Duration(us),Wait Time(us),Input Formats,aic_mac_ratio,aicore_time(us)\r\n"
    body = "".join(f'k{i % 13},"T,{i % 3}",17364088837{i:05d}.{i % 1000:03d}\t,{i % 97}.25,{i % 5}.5,'
                   f'"ND;{i % 4}",0.{i % 9},{i}.{i % 7}\r\n' for i in range(400))
    path = _write(tmp_path, header + body)
    from ascend_tui.readers.parse.skipped import Skipped

    t = read_kernels(path, skipped=Skipped(str(path)))
    assert len(released) > 20 and all(s._buf is None for s in released)  # every whole block let its bytes go
    rows = range(400)
    assert t.dur_us.tolist() == [i % 97 + 0.25 for i in rows] and [t.label("type", i) for i in rows] == \
        [f"T,{i % 3}" for i in rows]
    assert t.start_ns.tolist() == [profiler_csv.to_ns(f"17364088837{i:05d}.{i % 1000:03d}") for i in rows]
    assert t.metrics["aic_mac_ratio"].tolist() == [np.float32(f"0.{i % 9}") for i in rows]
    assert [t.label("input_formats", i) for i in rows] == [f"ND;{i % 4}" for i in rows]  # read again
    assert t.floats["wait_us"].tolist() == [i % 5 + 0.5 for i in rows]
    assert t.metrics["aicore_time(us)"].tolist() == [np.float32(f"{i}.{i % 7}") for i in rows]
    again = read_kernels(path, skipped=Skipped(str(path)))
    path.write_bytes(path.read_bytes().replace(b"ND;", b"NC;"))
    with pytest.raises(InputError, match="changed while it was being read"):
        again.text["input_formats"]


def test_shapes_of_the_kernels_without_counters_are_at_hand_and_the_others_read_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The roofline reads shapes and dtypes of the rows no pipe counter covers: those are decoded with the split
    (no block read again); any other row, or the whole column, reads its blocks again, with the same text."""
    from ascend_tui.checks.profile import PMU_PIPES
    from ascend_tui.readers.parse.skipped import Skipped

    assert sorted(profiler_csv.PIPE_RATIOS) == sorted(c for cols in PMU_PIPES.values() for c in cols)
    monkeypatch.setattr(fast_csv, "BLOCK", 400)
    again = []
    real = fast_csv.Split._reread
    monkeypatch.setattr(fast_csv.Split, "_reread", lambda self: (again.append(self), real(self))[1])
    header = "Name,Type,Duration(us),Input Shapes,Input Data Types,aic_mac_ratio,aiv_vec_ratio\n"
    body = "".join(f'k{i},T{i % 3},{i}.5,"""{i},3""",FLOAT{i % 2},{"N/A" if i % 3 else "0.5"},'
                   f'{"0" if i % 3 else "N/A"}\n' for i in range(300))
    path = _write(tmp_path, header + body)
    t = read_kernels(path, skipped=Skipped(str(path)))
    bare = np.array([i for i in range(300) if i % 3])
    sub = t.take(bare)
    assert [sub.label("input_shapes", k) for k in range(len(bare))] == [f'"{i},3"' for i in bare]
    assert [sub.label("input_dtypes", k) for k in range(len(bare))] == [f"FLOAT{i % 2}" for i in bare]
    assert again == []
    assert t.take(np.array([0, 3, 4])).text["input_shapes"].values == ['"0,3"', '"3,3"', '"4,3"']
    assert again and [t.label("input_shapes", i) for i in range(300)] == [f'"{i},3"' for i in range(300)]


def test_hash_collisions_fall_back_to_the_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With every word multiplier zero all cells of a length share a hash: the byte check must catch it."""
    monkeypatch.setattr(fast_csv, "_MIX", np.zeros_like(fast_csv._MIX))
    names = ["abcdefgh1", "abcdefgh2", "zzzzzzzz1", "abcdefgh1", "x", "y", "x"]
    body = "".join(f"{n},T,1\n" for n in names)
    t = read_kernels(_write(tmp_path, "Name,Type,Duration(us)\n" + body))
    assert [t.label("name", i) for i in range(len(names))] == names
    assert t.names("name") == ["abcdefgh1", "abcdefgh2", "zzzzzzzz1", "x", "y"]  # in order of first appearance


def test_one_thread_and_several_read_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fast_csv, "BLOCK", 512)
    header = "Name,Type,Start Time(us),Duration(us),aiv_vec_ratio\r\n"
    body = "".join(f'k{i % 13},"T,{i % 3}",17364088837{i:05d}.{i % 1000:03d}\t,{i % 97}.25,0.{i % 9}\r\n'
                   for i in range(2000))
    path = _write(tmp_path, header + body)
    monkeypatch.setattr(threads, "WORKERS", 1)
    one = read_kernels(path)
    cols = (one.text["name"].values, one.text["type"].codes.tolist(), one.start_ns.tolist(), one.dur_us.tolist(),
            one.metrics["aiv_vec_ratio"].tolist())
    monkeypatch.setattr(threads, "WORKERS", 2)
    two = read_kernels(path)
    assert (two.text["name"].values, two.text["type"].codes.tolist(), two.start_ns.tolist(), two.dur_us.tolist(),
            two.metrics["aiv_vec_ratio"].tolist()) == cols
    assert two.n == 2000 and two.label("type", 1) == "T,1"
    assert two.start_ns[1234] == int(Decimal("1736408883701234.234") * 1000)


def test_threads_run_in_order_and_raise_the_first_error() -> None:
    assert threads.run_all([lambda i=i: i * i for i in range(9)]) == [i * i for i in range(9)]
    assert list(threads.ordered(iter([lambda i=i: i for i in range(20)]), ahead=3)) == list(range(20))

    def boom() -> int:
        raise ValueError("bad block")

    with pytest.raises(ValueError, match="bad block"):
        threads.run_all([lambda: 1, boom, lambda: 3])


def _read_in_a_child(path: Path, out: object) -> None:
    t = read_kernels(path)
    out.put((t.n, float(t.dur_us.sum())))  # type: ignore[attr-defined]


def test_a_forked_process_pool_worker_gets_threads_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cluster.py reads ranks in a fork-started process pool: the parent's pool threads do not exist there."""
    import multiprocessing

    monkeypatch.setattr(fast_csv, "BLOCK", 256)
    monkeypatch.setattr(threads, "WORKERS", 2)
    path = _write(tmp_path, "Name,Duration(us)\n" + "".join(f"k{i},{i}.5\n" for i in range(400)))
    assert read_kernels(path).n == 400  # the parent's pool is up
    fork = multiprocessing.get_context("fork")
    out = fork.Queue()
    child = fork.Process(target=_read_in_a_child, args=(path, out))
    child.start()
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
        pytest.fail("reading in a forked child hung (it waited on the parent's threads)")
    assert out.get(timeout=5) == (400, sum(i + 0.5 for i in range(400)))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_load_stops_at_the_next_block_when_cancelled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       workers: int) -> None:
    import threading

    from ascend_tui.errors import Cancelled

    monkeypatch.setattr(fast_csv, "BLOCK", 1024)
    monkeypatch.setattr(threads, "WORKERS", workers)
    path = _write(tmp_path, "Name,Duration(us)\n" + "".join(f"k{i},{i}.5\n" for i in range(3000)))
    cancel = threading.Event()
    seen: list[int] = []

    def progress(text: str, done: int, total: int | None) -> None:
        seen.append(done)
        cancel.set()  # the user presses escape after the first block

    with pytest.raises(Cancelled):
        read_kernels(path, cancel=cancel, progress=progress)
    assert len(seen) == 1 and 0 < seen[0] < 3000
