"""What the streaming trace reader skips and how it matches: events no table reads are skipped once their process
is named (a late name that overturns a skip rereads the file), skipped events still anchor the spans, and the
sorted-key lookups and timestamp parsing equal the dicts and `to_ns` they replace."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ascend_tui.readers.profiler import trace_columns
from ascend_tui.readers.profiler.csv_tables import to_ns
from ascend_tui.readers.profiler.trace import KEEP, read_trace
from ascend_tui.readers.profiler.trace_links import last_match
from ascend_tui.readers.profiler.trace_columns import Columns, decode
from tests import trace_reference
from tests.test_trace_stream import SMALL, _view


def _events(late_name: str | None) -> list[dict[str, Any]]:
    """CANN API calls (earliest of all), plain Python calls, framework ops, kernels, flows and overlap spans;
    `late_name` renames the CANN process at the very end."""
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 5, "tid": 0, "args": {"name": "CANN"}},
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "process_name", "pid": 9, "tid": 0, "args": {"name": "Overlap Analysis"}},
        {"ph": "M", "name": "thread_name", "pid": 9, "tid": 1, "args": {"name": "Computing"}}]
    for i in range(30):
        t = 1000 + i * 20
        ev += [{"ph": "X", "name": "aclnnMatmul", "pid": 5, "tid": 3, "ts": f"{t - 900}.250", "dur": 4.0},
               {"ph": "X", "name": "tensor.py(12): add", "cat": "python_function", "pid": 1, "tid": 1,
                "ts": f"{t}.000", "dur": 9.0},
               {"ph": "X", "name": "nn.Module: Net_0", "cat": "python_function", "pid": 1, "tid": 1,
                "ts": f"{t}.100", "dur": 8.0},
               {"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": f"{t + 1}.000", "dur": 5.0,
                "args": {"Call stack": "net.py(3): forward"}},
               {"ph": "s", "id": i, "pid": 1, "tid": 1, "ts": f"{t + 2}.000", "cat": "async_npu"},
               {"ph": "X", "name": f"MatMul_{i}", "pid": 7, "tid": 2, "ts": f"{t + 5}.500", "dur": 1.5,
                "args": {"Task Type": "AI_CORE", "Physic Stream Id": 2}},
               {"ph": "f", "id": i, "pid": 7, "tid": 2, "ts": f"{t + 5}.500", "cat": "async_npu"},
               {"ph": "X", "name": "Computing", "pid": 9, "tid": 1, "ts": f"{t + 5}.500", "dur": 1.5}]
    if late_name is not None:
        ev.append({"ph": "M", "name": "process_name", "pid": 5, "tid": 0, "args": {"name": late_name}})
    return ev


def _columns(events: list[dict[str, Any]]) -> Columns:
    cols = Columns(KEEP)
    for i in range(0, len(events), 50):
        cols.add(decode(json.dumps(events[i:i + 50]).encode()))
    cols.finish()
    return cols


@pytest.mark.parametrize("late_name", [None, "CANN", "Ascend Hardware", "Overlap Analysis"])
def test_skipped_events_change_nothing_and_a_late_process_name_rereads(tmp_path: Path, late_name: str | None) -> None:
    events = _events(late_name)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    cols = _columns(events)
    # the CANN calls and the plain Python calls, not the module spans or framework ops (a name read in a piece
    # holds for that piece's events: the last piece's CANN calls are kept when they are renamed there)
    assert cols.skipped == (60 if late_name in (None, "CANN") else 55)
    assert cols.first == to_ns("100.250")  # the earliest start of all is a skipped CANN call
    assert cols.conflict() == (late_name in ("Ascend Hardware", "Overlap Analysis"))
    want = _view(trace_reference.read_trace(path))
    got = _view(read_trace(path, block=2048))
    assert got == want
    if late_name == "Ascend Hardware":  # the reread kept them: the CANN calls are kernels now
        assert got["n"] == 60
    spans = read_trace(path).spans
    if late_name in (None, "CANN"):  # the overlap spans start where the (skipped) CANN calls did
        assert spans[0].name == "Computing"
        assert spans[0].start_us == (to_ns("1005.500") - to_ns("100.250")) / 1000


def test_events_of_an_unnamed_process_are_kept() -> None:
    events = [e for e in _events(None) if e.get("pid") != 5 or e["ph"] != "M"]
    assert _columns(events).skipped == 30  # only the plain Python calls: pid 5 has no name yet


def test_the_level1_fixture_skips_events_without_a_reread() -> None:
    cols = _columns(json.loads(SMALL[0].read_bytes()))
    assert cols.skipped > 0 and not cols.conflict()


@pytest.mark.parametrize("seed", range(5))
def test_last_match_is_a_dict_of_the_keys(seed: int) -> None:
    rng = random.Random(seed)
    keys = np.array([rng.randrange(30) for _ in range(rng.randrange(1, 200))], np.int64)
    queries = np.array([rng.randrange(40) for _ in range(100)], np.int64)
    last = {k: i for i, k in enumerate(keys.tolist())}
    assert last_match(keys, queries).tolist() == [last.get(q, -1) for q in queries.tolist()]
    assert last_match(keys[:0], queries).tolist() == [-1] * 100


@pytest.mark.parametrize("values", [
    ["1736408883688177.930", "1736408883688178.001"],
    ["1.2", "34.56"],  # lengths differ but add up as if equal: each on its own
    ["100.5", "100.25", "7"],
    ["1736408883688177.930", 12.5],
    ["12.000", "1.5e+1"],  # one length, another layout
])
def test_timestamps_parse_as_to_ns(values: list[Any]) -> None:
    want = [to_ns(v) if isinstance(v, str) else round(v * 1000) for v in values]
    assert trace_columns._times(values).tolist() == want
