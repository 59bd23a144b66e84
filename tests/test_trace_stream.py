"""The streaming trace reader: equal to the json.load reader on every fixture, at any block size, plain or gzip,
with one-line errors naming the byte for bad files and a bounded peak memory."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from ascend_tui.errors import Cancelled, InputError
from ascend_tui.graph.profile import Profile
from ascend_tui.offline.open import open_path
from ascend_tui.readers.profiler import trace_columns
from ascend_tui.readers.profiler.trace import read_trace, sniff_json
from tests import trace_reference
from tests.conftest import FIXTURES, ROOT

PROF = FIXTURES / "profiler"
SMALL = [PROF / "level1_2025-01" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json",
         PROF / "older_2023-2024" / "trace_view_2024-01.json",
         PROF / "msprof" / "mindstudio_profiler_output" / "msprof_ut_expected.json",
         PROF / "torch" / "kineto_cupti_h100_after_fix_trace.json",
         PROF / "torch" / "pytorch_profiler_trace_excerpt_hta.json"]


def _all_traces() -> list[Path]:
    found = sorted(p for p in FIXTURES.rglob("*.json") if sniff_json(p))
    assert set(SMALL) <= set(found) and len(found) >= 7, found  # the peer tools' 2 MB traces too
    return found


def _view(p: Profile) -> dict[str, object]:
    """What the views read of a trace's profile: every kernel column row by row, host ops, spans, counts."""
    t, h = p.kernels, p.host_calls
    return {"kind": p.kind, "n": t.n,
            "text": {k: [t.label(k, i) for i in range(t.n)] for k in ("name", "type", "core", "module")},
            "start": t.start_ns.tolist(), "stream": t.ints["stream"].tolist(), "dur": t.dur_us.tolist(),
            "host": p.host_ops, "spans": p.spans, "extra": p.extra, "host_op": t.ints["host_op"].tolist(),
            "calls": {"name": [h.label("name", i) for i in range(h.n)], "thread": [h.label("thread", i) for i in range(h.n)],
                      "start": h.start_ns.tolist(), "dur": h.dur_us.tolist()}}


@pytest.mark.parametrize("fast", [True, False], ids=["msgspec", "json"])
def test_every_fixture_trace_reads_as_the_json_load_reader_did(fast: bool) -> None:
    attributed = flows = 0
    for path in _all_traces():
        want = _view(trace_reference.read_trace(path))
        for block in (1 << 23, 4096):
            got = _view(read_trace(path, block=block, fast=fast))
            assert got == want, (path, block)
        attributed += sum(1 for m in want["text"]["module"] if m)  # type: ignore[union-attr]
        flows += bool(want["host"]) + bool(want["spans"])
    assert attributed >= 100 and flows >= 8  # kernels attributed to modules through flows, host ops, spans


@pytest.mark.parametrize("block", [3, 7, 61, 509])
def test_block_boundaries_anywhere_in_the_fixtures(block: int) -> None:
    for path in SMALL:
        assert _view(read_trace(path, block=block)) == _view(trace_reference.read_trace(path)), path


def _tricky(tmp_path: Path) -> Path:
    """Events whose strings hold quotes, backslash runs, braces and `}, {`, and args with nested objects."""
    events = [{"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "Ascend Hardware"}},
              {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Python"}}]
    names = ['Mat"Mul}, {"ph": "X"', "back\\\\", 'q\\"}', "\\\\\\\"x", "uni\u00e9\u4e2d\U0001f600", "br]a[ce{s}"]
    for i in range(40):
        name = names[i % len(names)] + f"_{i}"
        events.append({"ph": "X", "name": "nn.Module: " + name, "cat": "python_function", "pid": 1, "tid": 1,
                       "ts": f"{1000 + i * 10}.000", "dur": 50})
        events.append({"ph": "X", "name": name, "cat": "cpu_op", "pid": 1, "tid": 1, "ts": f"{1001 + i * 10}.125",
                       "dur": 3.5, "args": {"Call stack": f'a.py(1): f;\r\n"{name}"', "Input Dims": [[1, 2], []],
                                            "nested": [{"k": "}, {"}, {"k": name}]}})
        events.append({"ph": "s", "id": i, "pid": 1, "tid": 1, "ts": f"{1002 + i * 10}.000", "cat": "async_npu"})
        events.append({"ph": "X", "name": f"aclnnMatmul_MatMulV3_{i}", "pid": 7, "tid": 2 + i % 3,
                       "ts": f"{1005 + i * 10}.5", "dur": 1.25, "args": {"Task Type": "AI_CORE", "Physic Stream Id": i % 3}})
        events.append({"ph": "f", "id": i, "pid": 7, "tid": 2 + i % 3, "ts": f"{1005 + i * 10}.5", "cat": "async_npu"})
    path = tmp_path / "tricky.json"
    path.write_text("[\n" + ",\n".join(json.dumps(e, ensure_ascii=i % 2 == 0) for i, e in enumerate(events)) + "\n]\n",
                    encoding="utf-8")
    return path


def test_cuts_inside_strings_escapes_and_nested_objects(tmp_path: Path) -> None:
    path = _tricky(tmp_path)
    want = _view(trace_reference.read_trace(path))
    assert want["n"] == 40 and sum(1 for m in want["text"]["module"] if m) == 40  # type: ignore[index]
    for block in (1, 2, 3, 5, 8, 13, 21, 97, 1000, 1 << 20):
        for fast in (True, False):
            assert _view(read_trace(path, block=block, fast=fast)) == want, (block, fast)


def test_gzip_reads_as_plain_and_kineto_gz_names_are_recognised(tmp_path: Path) -> None:
    for path in SMALL:
        gz = tmp_path / (path.stem + ".pt.trace.json.gz")
        gz.write_bytes(gzip.compress(path.read_bytes()))
        assert sniff_json(gz)
        assert _view(read_trace(gz, block=509)) == _view(read_trace(path)), path
    inv = open_path(tmp_path / "kineto_cupti_h100_after_fix_trace.pt.trace.json.gz")
    assert inv.profile is not None and inv.profile.kind == "kineto" and inv.profile.kernels.n == 1


def _error(path: Path, **kw: object) -> str:
    with pytest.raises(InputError) as info:
        read_trace(path, **kw)  # type: ignore[arg-type]
    line = str(info.value)
    assert "\n" not in line and str(path) in line and ":byte " in line, line
    return line


def test_bad_traces_give_one_line_naming_the_byte(tmp_path: Path) -> None:
    good = SMALL[0].read_bytes()
    first_end = good.index(b"}, {") + 1
    cases = {
        "cut.json": (good[:first_end - 20], "truncated"),
        "junk.json": (b"hello world", "not a Chrome trace"),
        "empty.json": (b"   ", "not a Chrome trace"),
        "object.json": (b'{"foo": [{"ph": "X"}]}', "traceEvents"),
        "numbers.json": (b"[1, 2, 3]", "not"),
        "garbage.json": (good[:first_end] + b", {\"ph\": \"X\", oops}, " + good[first_end + 2:], "not a valid trace"),
    }
    for name, (data, words) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        for block in (1 << 23, 64):
            assert words in _error(path, block=block), name
    bad = bytearray(good)
    at = good.index(b"empty_tensor") + 3
    bad[at] = 0xFF
    path = tmp_path / "latin.json"
    path.write_bytes(bytes(bad))
    for fast in (True, False):
        assert _error(path, fast=fast).startswith(f"{path}:byte {at}: not UTF-8")
    path.write_bytes(good[:first_end] + b", {\"ph\": \"X\", oops}" + good[first_end:])
    assert f":byte {first_end + 14}: not a valid trace" in _error(path)  # the `o` of oops


def test_a_trace_cut_mid_write_is_read_with_its_tail_counted(tmp_path: Path) -> None:
    good = SMALL[0].read_bytes()
    path = tmp_path / "cut.json"
    cut = len(good) // 2
    path.write_bytes(good[:cut])
    whole = json.loads(good)
    kept = json.loads(good[:good.rindex(b"}, {", 0, cut) + 1] + b"]")
    for block in (1 << 23, 100):
        p = read_trace(path, block=block)
        assert p.extra["trace_events"] == len(kept) < len(whole)
        assert 0 < p.extra["trace_cut"]["bad_bytes"] < 2000
        assert len(p.unmatched) == 1 and "skipped" in p.unmatched[0] and "byte" in p.unmatched[0]
    path.write_bytes(good[:good.rindex(b"}") + 1])  # every event whole, only the closing ']' missing
    p = read_trace(path)
    assert p.extra["trace_events"] == len(whole) and p.extra["trace_cut"]["bad_bytes"] == 0
    assert _view(read_trace(SMALL[0]))["n"] == p.kernels.n


def test_progress_per_block_and_cancel_within_one() -> None:
    path = SMALL[0]
    seen: list[tuple[str, int, int | None]] = []
    read_trace(path, progress=lambda *a: seen.append(a), block=8192)
    done = [d for _, d, _ in seen]
    assert len(seen) >= 10 and done == sorted(done) and done[-1] >= path.stat().st_size - 10
    assert seen[0][2] == path.stat().st_size
    cancel = threading.Event()

    def stop(*_: object) -> None:
        cancel.set()

    with pytest.raises(Cancelled):
        read_trace(path, cancel=cancel, progress=stop, block=8192)


def test_decoders_without_msgspec_read_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """The package must work where msgspec is not installed: the json path is the same reader."""
    want = _view(read_trace(SMALL[0]))
    monkeypatch.setattr(trace_columns, "msgspec", None)
    assert _view(read_trace(SMALL[0])) == want


# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec, so a child forked from a big test process
# would report the parent's peak
MEMORY = """
import sys
from pathlib import Path
from ascend_tui.readers.profiler.trace import read_trace
p = read_trace(Path(sys.argv[1]))
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(p.kernels.n, int(hwm.split()[1]) * 1024)
"""


@pytest.mark.slow
def test_peak_memory_of_a_200_mb_trace_stays_under_its_size(tmp_path: Path) -> None:
    from benchmarks.trace_load import generate

    path = tmp_path / "big.json"
    copies = generate(path, 200_000_000, SMALL[0])
    size = path.stat().st_size
    out = subprocess.run([sys.executable, "-c", MEMORY, str(path)], capture_output=True, text=True, check=True,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                             [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))).stdout.split()
    kernels, peak = int(out[0]), int(out[1])
    assert kernels == 16 * copies
    assert peak < size, f"peak RSS {peak / 1e6:.0f} MB for a {size / 1e6:.0f} MB trace"


def test_a_folder_with_both_exports_takes_its_timeline_from_the_db(tmp_path: Path) -> None:
    import shutil

    from ascend_tui.readers.profiler.ascend_pt import read_folder

    peer = FIXTURES / "peer" / "Ascend__msinsight" / "test" / "data" / "pytorch"
    folder = tmp_path / "rank0_ascend_pt"
    shutil.copytree(peer / "text" / "level1" / "rank0_ascend_pt", folder)
    out = folder / "ASCEND_PROFILER_OUTPUT"
    text_only = read_folder(out)
    assert "timeline" not in text_only.extra and text_only.spans
    for db in (peer / "db" / "level1" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT").glob("*.db"):
        shutil.copy(db, out / db.name)
    both = read_folder(out)
    assert "ascend_pytorch_profiler_0.db" in both.extra["timeline"] and "trace_view.json" in both.extra["timeline"]
    assert len(both.spans) > 300 and both.kernels.n == text_only.kernels.n  # the rows still from kernel_details.csv
    from ascend_tui.readers.profiler import db as profiler_db

    assert both.spans == profiler_db.read(*profiler_db.find(out))[0].spans != text_only.spans  # (two runs' exports)


def _launches(p: Profile) -> dict[tuple[str, str], int]:
    """(host op, kernel name) -> how many kernels that op launched, by the kernel table's host_op column."""
    from collections import Counter

    k, calls, host = p.kernels, p.host_calls, p.kernels.ints["host_op"]
    return dict(Counter((calls.label("name", int(h)), k.label("name", i)) for i, h in enumerate(host.tolist())
                        if h >= 0))


def test_kernels_lead_to_their_launching_host_op_in_trace_db_and_folder() -> None:
    from ascend_tui.readers.profiler import db
    from ascend_tui.readers.profiler.ascend_pt import read_profile

    insight = FIXTURES / "peer" / "Ascend__msinsight" / "test/data/pytorch"
    trace = read_trace(insight / "text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json")
    by_trace = _launches(trace)
    # torch_npu's async_npu flow starts where the innermost host op starts: Conv2D (not aten::conv2d) launches
    assert by_trace[("Conv2D", "trans_TransData_0")] >= 1 and ("aten::conv2d", "trans_TransData_0") not in by_trace
    assert sum(by_trace.values()) == 210 and trace.host_calls.n == 860
    calls = trace.host_calls
    assert (np.diff(calls.start_ns) >= 0).all() and set(calls.names("thread")) == {"Thread 3096504", "Thread 3105075"}
    # the db export of the same script (profiled again): its CONNECTION_IDS links are among the trace's flows
    by_db = _launches(db.read(insight / "db/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db")[0])
    assert sum(by_db.values()) >= 180 and all(by_trace.get(key, 0) >= n for key, n in by_db.items())
    # a folder's kernel_details rows take the trace's host op by (name, start), as they take its module
    folder = read_profile(insight / "text/level1/rank0_ascend_pt")
    assert folder.host_calls.n == 860 and sum(_launches(folder).values()) >= 180
    assert all(by_trace.get(key, 0) >= n for key, n in _launches(folder).items())


def test_kineto_kernels_lead_to_the_op_around_their_launch() -> None:
    p = read_trace(PROF / "torch" / "kineto_cupti_h100_after_fix_trace.json")
    assert p.kind == "kineto" and list(_launches(p).items()) == [(("op1", p.kernels.label("name", 0)), 1)]


def _random_flows_trace(path: Path, seed: int) -> Path:
    """Host ops nested, overlapping and sharing starts on two threads; flows starting inside, between and at the
    edges of them (ids reused, some ends on no kernel); kernels sharing starts on one stream."""
    import random

    rnd = random.Random(seed)
    ev: list[dict[str, object]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 11, "args": {"name": "Thread 11"}},
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "Ascend Hardware"}}]
    def ts(ns: int) -> str:
        return f"{ns // 1000}.{ns % 1000:03d}"

    for tid in (11, 12):
        t = 1_000_000
        for _ in range(60):
            t += rnd.choice([0, 0, 500, 2000])
            dur = rnd.choice([1000, 3000, 3000, 10000])
            ev.append({"ph": "X", "cat": "cpu_op", "name": f"op{rnd.randrange(5)}", "pid": 1, "tid": tid,
                       "ts": ts(t), "dur": dur / 1000})
    kernels = []
    for k in range(80):
        start = 1_000_000 + 3000 * (k // 2) + 7000  # pairs of kernels share a start
        kernels.append(start)
        ev.append({"ph": "X", "name": f"k{k % 7}", "pid": 2, "tid": 5, "ts": ts(start), "dur": 1.5,
                   "args": {"Task Type": "AI_CORE", "Physic Stream Id": 5}})
    for i in range(120):
        fid = rnd.randrange(90)  # ids repeat: the later flow wins, as for modules
        start = 1_000_000 + rnd.randrange(200_000)
        ev.append({"ph": "s", "cat": "async_npu", "id": fid, "pid": 1, "tid": rnd.choice([11, 12]), "ts": ts(start)})
        end = rnd.choice(kernels) if rnd.random() < 0.9 else 5  # some land on no kernel
        ev.append({"ph": "f", "cat": "async_npu", "id": fid, "pid": 2, "tid": 5, "ts": ts(end), "bp": "e"})
    rnd.shuffle(ev)
    path.write_text(json.dumps(ev))
    return path


@pytest.mark.parametrize("seed", range(6))
def test_host_op_of_each_kernel_equals_the_reference_on_random_nesting(tmp_path: Path, seed: int) -> None:
    path = _random_flows_trace(tmp_path / f"flows{seed}.json", seed)
    want = _view(trace_reference.read_trace(path))
    assert sum(1 for h in want["host_op"] if h >= 0) >= 20  # type: ignore[union-attr]
    for block in (257, 1 << 20):
        assert _view(read_trace(path, block=block)) == want


def test_phases_outside_the_format_read_as_the_json_load_reader_did(tmp_path: Path) -> None:
    """msgspec decodes `ph` as one of the format's phases; a piece with another (or none, or a number) goes through
    the json fallback and must read the same."""
    events = json.loads(SMALL[0].read_bytes())
    odd = [{"ph": "Z", "name": "odd", "pid": 1, "tid": 1, "ts": "1.000"}, {"ph": 5, "name": "num"},
           {"name": "no phase", "ts": "2.000"}, {"ph": None, "name": "null phase"}]
    mixed = events[:200] + odd + events[200:]
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(mixed))
    want = _view(trace_reference.read_trace(path))
    assert want["n"] > 0
    for block in (1 << 21, 4096):
        assert _view(read_trace(path, block=block)) == want, block
    assert _view(read_trace(path))["extra"]["trace_events"] == len(mixed)  # type: ignore[index]
