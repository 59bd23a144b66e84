"""Memory timelines from Ascend PyTorch Profiler folders: both header variants, the real files' quirks, bad files."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from ascend_tui.errors import InputError
from ascend_tui.offline.open import kind_of, open_path
from ascend_tui.readers.profiler.memory import load_memory_timeline, top_holders

MiB = 1024 * 1024


@pytest.fixture
def profiler(fixtures: Path) -> Path:
    return fixtures / "profiler"


@pytest.fixture
def older(profiler: Path, tmp_path: Path) -> Path:
    """The 2023 layout (5-column memory_record, 10-column operator_memory) under the names the profiler writes."""
    shutil.copy(profiler / "older_2023-2024" / "memory_record_2023-09.csv", tmp_path / "memory_record.csv")
    shutil.copy(profiler / "older_2023-2024" / "operator_memory_2023-09.csv", tmp_path / "operator_memory.csv")
    return tmp_path


def test_2025_crlf_layout_samples_over_time(profiler: Path) -> None:
    samples, blocks = load_memory_timeline(profiler / "level1_2025-01")
    assert Counter(s.label for s in samples) == {"APP": 11, "PTA": 3, "PTA+GE": 3, "GE": 3}
    assert [s.time for s in samples] == sorted(s.time for s in samples) and samples[0].time == 0.0
    pta = [s for s in samples if s.label == "PTA"][0]
    assert pta.time == 120280.23
    assert (pta.allocated_bytes, pta.reserved_bytes) == (935.9951171875 * MiB, 1452.0 * MiB)
    app = samples[0]
    assert app.label == "APP" and app.allocated_bytes == app.reserved_bytes == 2109.6015625 * MiB
    ge = [s for s in samples if s.label == "GE"]
    assert [s.allocated_bytes / MiB for s in ge] == [49.125, 49.375, 73.0625]


def test_2025_operators_holding_the_largest_blocks(profiler: Path) -> None:
    _, blocks = load_memory_timeline(profiler / "level1_2025-01")
    assert len(blocks) == 20 and all(b.kind == "allocation" for b in blocks)
    assert [b.size for b in blocks] == sorted((b.size or 0 for b in blocks), reverse=True)
    biggest = blocks[0]
    assert (biggest.extra["op"], biggest.size, biggest.extra["component"]) == (
        "aten::max_pool2d_with_indices", 36864 * 1024, "PTA")
    unreleased = [b for b in blocks if b.extra["released_us"] is None]
    assert sorted(b.size for b in unreleased) == [512, int(18816.5 * 1024)]
    assert all("not released within the capture" in b.message for b in unreleased)
    holders = top_holders(blocks, 3)
    assert [(h.name, h.blocks) for h in holders] == [
        ("aten::max_pool2d_with_indices", 9), ("aten::_convolution", 5), ("aten::empty_strided", 2)]
    assert holders[2].unreleased == 2 and holders[2].longest_us is None
    conv = [b for b in blocks if b.size == int(25009.5 * 1024)][0]
    assert conv.extra["duration_us"] == 34058.24


def test_2025_lf_layout(profiler: Path) -> None:
    samples, blocks = load_memory_timeline(profiler / "level2_2025-11" / "ASCEND_PROFILER_OUTPUT")
    assert Counter(s.label for s in samples) == {"APP": 14, "PTA": 3, "PTA+GE": 3}
    assert len(blocks) == 20 and blocks[0].extra["op"] == "aten::matmul" and blocks[0].size == int(32768.5 * 1024)
    assert Counter(b.extra["op"] for b in blocks)["npu::npu_rms_norm"] == 5


def test_older_layout(older: Path) -> None:
    samples, blocks = load_memory_timeline(older / "memory_record.csv")
    assert Counter(s.label for s in samples) == {"APP": 2, "PTA": 3, "PTA+GE": 3}
    assert [s for s in samples if s.label == "PTA"][0].allocated_bytes == 4599.74072265625 * MiB
    assert len(blocks) == 8 and {b.extra["component"] for b in blocks} == {"GE"}
    assert (blocks[0].extra["op"], blocks[0].size) == ("cann::Graph_95", 81984 * 1024)
    assert blocks[0].extra["duration_us"] == 145.5
    assert [(h.name, h.blocks) for h in top_holders(blocks)] == [
        ("cann::Graph_95", 2), ("cann::Graph_22", 4), ("cann::Graph_70", 1), ("cann::Graph_89", 1)]


def test_profiler_folder_opens_as_a_memory_timeline(profiler: Path, tmp_path: Path) -> None:
    folder = profiler / "level1_2025-01"
    # the profiler folder reader owns the whole folder (time and memory); a lone memory file is still read here
    for path in (folder, folder / "ASCEND_PROFILER_OUTPUT"):
        assert kind_of(path) == "profiler"
    assert kind_of(folder / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv") == "profiler memory"
    inv = open_path(folder)
    assert len(inv.memory_samples) == 20 and len(inv.memory_events) == 20
    assert [n.id for n in inv.graph if n.id.startswith(("aten::", "npu::"))] == [
        "aten::empty_strided", "aten::_convolution", "aten::max_pool2d_with_indices",
        "aten::_adaptive_avg_pool2d", "npu::_npu_dropout"]
    assert inv.graph.node("aten::_convolution").op_type == "aten._convolution"
    assert all(e.node in inv.graph for e in inv.memory_events)
    assert not [f for f in inv.findings if f.check == "memory"] and inv.run.extra["memory_holders"][0]["op"] == "aten::max_pool2d_with_indices"
    inv.save(tmp_path / "timeline.json")
    assert len(open_path(tmp_path / "timeline.json").memory_samples) == 20


def _error(path: Path) -> str:
    with pytest.raises(InputError) as info:
        load_memory_timeline(path)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_bad_profiler_files(tmp_path: Path) -> None:
    assert "no memory_record.csv or operator_memory.csv" in _error(tmp_path)
    record = tmp_path / "memory_record.csv"
    record.write_text("Component,Timestamp(us),Total Reserved(MB),Device Type\nAPP,1.5,10.0,NPU:0\n")
    assert f"{record}:1: missing column 'Total Allocated'" in _error(tmp_path)
    record.write_text("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Device Type\n"
                      "PTA,1695115378714622.8,4599.7,8664.0,NPU:0\nPTA,soon,1.0,2.0,NPU:0\n")
    assert f"{record}:3: column 'Timestamp(us)': 'soon' is not a number" in _error(tmp_path)
    record.write_bytes(b"\x00\x01PK\x03\x04" + bytes(range(256)))
    assert str(record) in _error(tmp_path)
    record.write_bytes(b"")
    assert "empty file" in _error(tmp_path)
