"""msSanitizer and compute-sanitizer logs: every real fixture parsed into the right events, bad logs refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ascend_tui.errors import InputError
from ascend_tui.offline.open import kind_of, open_path
from ascend_tui.readers.sanitizer.log import CSAN, MSSAN, SanitizerParser, parse_file, parse_lines, sniff
from ascend_tui.investigation import Investigation

# Counted by reading each file: the kinds of its reports, in file order.
EXPECTED: dict[str, list[str]] = {
    "compute_sanitizer_doc_examples.log": [
        "misaligned", "illegal_free", "leak", "leak", "api_error", "race", "race", "uninitialized_read",
        "unused_memory", "unused_memory", "sync"],
    "compute_sanitizer_initcheck_real.log": ["uninitialized_read", "api_error"],
    "compute_sanitizer_memcheck_leakcheck_real.log": ["out_of_bounds", "api_error", "leak"],
    "compute_sanitizer_memcheck_real.log": ["out_of_bounds", "api_error"],
    "compute_sanitizer_racecheck_real.log": ["race"],
    "mssanitizer_initcheck_doc_example.log": ["uninitialized_read"],
    "mssanitizer_leakcheck_doc_example.log": ["leak", "leak"],
    "mssanitizer_memcheck_doc_examples.log": [
        "illegal_access", "out_of_bounds", "misaligned", "illegal_free", "unused_memory", "illegal_access",
        "out_of_bounds"],
    "mssanitizer_quickstart_real_paths.log": ["out_of_bounds", "race", "uninitialized_read"],
    "mssanitizer_racecheck_doc_examples.log": ["race", "race"],
    "mssanitizer_synccheck_doc_example.log": ["sync"],
    "mssanitizer_triton_session.log": ["illegal_access"],
}


@pytest.fixture
def logs(fixtures: Path) -> Path:
    return fixtures / "sanitizer"


def test_every_fixture_log_is_counted(logs: Path) -> None:
    assert sorted(p.name for p in logs.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_events_have_the_right_kinds_and_counts(logs: Path, name: str) -> None:
    log = parse_file(logs / name)
    assert [e.kind for e in log.events] == EXPECTED[name]
    assert log.tools == [CSAN if name.startswith("compute") else MSSAN]
    assert log.unrecognized == []
    for e in log.events:
        assert e.message and e.line_no is not None and e.extra["severity"] in ("error", "warning")


def test_compute_sanitizer_out_of_bounds_read(logs: Path) -> None:
    log = parse_file(logs / "compute_sanitizer_memcheck_leakcheck_real.log")
    oob, api, leak = log.events
    assert (oob.size, oob.address, oob.memory_space) == (4, 0x7B95B4000FFC, "global")
    assert (oob.kernel, oob.thread, oob.block) == ("scaleArray(float *, float)", "(255,0,0)", "(3,0,0)")
    assert oob.frames[0] == "writeValidMem.cu:6"
    assert oob.extra["allocation"] == {"distance": 1, "relation": "after", "address": "0x7b95b4000000", "size": 4092}
    assert "1 bytes after the allocation at 0x7b95b4000000 of 4,092 bytes" in oob.message
    assert api.extra["error"] == "cudaErrorLaunchFailure" and api.extra["api"] == "cudaDeviceSynchronize"
    assert (leak.size, leak.address) == (4092, 0x7B95B4000000)
    assert [(s.kind, s.count, s.bytes) for s in log.summaries] == [("leaks", 1, 4092), ("errors", 3, None)]
    assert log.program_lines == 3


def test_compute_sanitizer_summaries_per_run(logs: Path) -> None:
    log = parse_file(logs / "compute_sanitizer_initcheck_real.log")
    assert [(s.session, s.count) for s in log.summaries if s.kind == "errors"] == [(1, 38361), (2, 0), (3, 1)]
    assert log.hidden_errors() == [(1, 6, 38361, 1)]
    assert log.events[1].extra["severity"] == "warning"
    race = parse_file(logs / "compute_sanitizer_racecheck_real.log")
    assert race.events[0].extra["hazards"] == 36 and len(race.events[0].extra["accesses"]) == 3
    assert [(s.kind, s.count, s.errors) for s in race.summaries] == [("errors", 0, None), ("hazards", 1, 1)]


def test_compute_sanitizer_doc_examples_details(logs: Path) -> None:
    ev = parse_file(logs / "compute_sanitizer_doc_examples.log").events
    assert ev[0].extra["verdict"] == "is misaligned" and ev[0].kernel == "unaligned_kernel()"
    assert ev[1].extra["problem"] == "Double free" and ev[1].address == 0x400AFF920
    assert [(e.size, e.memory_space) for e in ev[2:4]] == [(64, "global"), (16, "device heap")]
    assert ev[4].extra["error"] == "invalid copy direction for memcpy" and ev[4].extra["code"] == 21
    assert ev[5].extra["severity"] == "warning" and ev[5].extra["hazards"] == 4
    assert ev[6].extra["hazard"] == "WAW" and [a["thread"] for a in ev[6].extra["accesses"]] == ["(0,0,0)", "(1,0,0)"]
    assert (ev[9].address, ev[9].size) == (0x7FED9F400000, 100)
    assert ev[10].kernel == "ThreadDivergence(int *, int)" and ev[10].thread == "(37,0,0)"


def test_mssanitizer_memcheck_details(logs: Path) -> None:
    ev = parse_file(logs / "mssanitizer_memcheck_doc_examples.log").events
    read = ev[0]
    assert (read.size, read.address, read.memory_space, read.kernel) == (224, 0x12C0C0015000, "GM", "add_custom_kernel")
    assert read.block == "aiv(0)" and read.extra["device"] == 0 and read.extra["serial_no"] == 10
    assert len(read.frames) == 4 and read.message.endswith("illegal_read_and_write/add_custom.cpp:18:5)")
    assert ev[1].extra["stomping"] and ev[1].extra["severity"] == "warning" and ev[1].block == "aiv(9)"
    assert (ev[2].memory_space, ev[2].address, ev[2].size) == ("UB", 6, 13)
    assert ev[3].frames == ("add_custom.cpp:84",) and ev[3].address == 0x124080013000
    assert ev[4].address == 0x1240C0016000 and ev[4].extra["severity"] == "warning"
    assert (ev[5].thread, ev[5].block) == ("(1,0,0)", "aiv(0-1)")
    assert "another thread" in ev[6].message


def test_mssanitizer_leaks_races_sync(logs: Path) -> None:
    leaks = parse_file(logs / "mssanitizer_leakcheck_doc_example.log")
    assert [(e.size, e.address, e.frames) for e in leaks.events] == [
        (100, 0x124080013000, ("add_custom.cpp:14",)), (1000, 0x124080014000, ("add_custom.cpp:15",))]
    assert [(s.kind, s.count, s.bytes) for s in leaks.summaries] == [("leaks", 2, 1100)]
    raw, waw = parse_file(logs / "mssanitizer_racecheck_doc_examples.log").events
    assert raw.extra["hazard"] == "RAW" and raw.kernel == "kernel_float" and raw.memory_space == "GM"
    assert [(a["pipe"], a["access"]) for a in raw.extra["accesses"]] == [("PIPE_MTE2", "write"), ("PIPE_MTE3", "read")]
    assert [a["thread"] for a in waw.extra["accesses"]] == ["(0,0,0)", "(0,0,1)"]
    sync = parse_file(logs / "mssanitizer_synccheck_doc_example.log").events[0]
    assert (sync.extra["src_pipe"], sync.extra["dst_pipe"], sync.extra["device"]) == ("PIPE_S", "PIPE_MTE3", 1)
    triton = parse_file(logs / "mssanitizer_triton_session.log")
    assert triton.log_files == ["./mindstudio_sanitizer_log/mssanitizer_20250522093805_922880.log"]
    assert triton.events[0].kernel == "triton_add" and triton.events[0].frames == ("sample.py:18:45",)


def _key(log_events: list) -> list[tuple]:
    return [(e.kind, e.size, e.address, e.memory_space, e.kernel, e.block, e.thread, e.frames) for e in log_events]


@pytest.mark.parametrize("name", ["mssanitizer_memcheck_doc_examples.log", "mssanitizer_racecheck_doc_examples.log",
                                  "compute_sanitizer_memcheck_leakcheck_real.log"])
def test_whitespace_between_versions_does_not_matter(logs: Path, name: str) -> None:
    text = (logs / name).read_text()
    tight = re.sub(r"^(=+)[ \t]+", r"\1 ", text, flags=re.MULTILINE)
    wide = re.sub(r"^(=+)[ \t]+", r"\1\t    ", text, flags=re.MULTILINE).replace("byte(s)", " byte(s)")
    glued = re.sub(r"^(=+)[ \t]+", r"\1", text, flags=re.MULTILINE)
    base = _key(parse_lines(text.splitlines()).events)
    assert _key(parse_lines(tight.splitlines()).events) == base
    assert _key(parse_lines(glued.splitlines()).events) == base
    assert _key(parse_lines(wide.splitlines()).events) == base


def test_program_output_interleaved_and_streamed(logs: Path) -> None:
    lines = (logs / "mssanitizer_quickstart_real_paths.log").read_text().splitlines()
    mixed = []
    for i, line in enumerate(lines):
        mixed += [line, f"step {i}: loss=0.{i} [rank0] ====== not a report"]
    parser = SanitizerParser("stream")
    flags = [parser.feed(line) for line in iter(mixed)]
    log = parser.finish()
    assert [e.kind for e in log.events] == EXPECTED["mssanitizer_quickstart_real_paths.log"]
    assert flags.count(False) == log.program_lines == len(lines) + 5
    assert [e.line_no for e in log.events] == [3, 27, 47]


def test_sniff_looks_at_the_first_kbs_only(logs: Path, tmp_path: Path) -> None:
    assert all(sniff(p) for p in logs.iterdir())
    setext = tmp_path / "notes.md"
    setext.write_text("Title\n=========\n\n====== not yet\n")
    assert not sniff(setext)
    late = tmp_path / "late.log"
    late.write_text("x" * 100 + "\n" * 1 + ("training step\n" * 6000) + (logs / "mssanitizer_triton_session.log").read_text())
    assert not sniff(late)
    assert [e.kind for e in parse_file(late).events] == ["illegal_access"]


def _one_line_error(path: Path) -> str:
    with pytest.raises(InputError) as info:
        parse_file(path)
    text = str(info.value)
    assert "\n" not in text and str(path) in text
    return text


def test_bad_logs_give_one_clear_error(logs: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    assert "empty file" in _one_line_error(empty)
    junk = tmp_path / "junk.log"
    junk.write_bytes(b"====== ERROR: illegal read of size 4\n" + bytes(range(256)) * 8)
    assert f"{junk}:2: binary data" in _one_line_error(junk)
    plain = tmp_path / "plain.log"
    plain.write_text("epoch 1 loss 0.3\n==========\n======> 80%\nepoch 2 loss 0.2\n")
    assert "no msSanitizer" in _one_line_error(plain) and "in its 4 lines" in _one_line_error(plain)  # all 4, not the 2 of program output
    cut = tmp_path / "cut.log"
    cut.write_text("".join((logs / "mssanitizer_memcheck_doc_examples.log").read_text().splitlines(True)[:10]))
    assert f"{cut}:10: msSanitizer out_of_bounds report is cut off" in _one_line_error(cut)
    leak = tmp_path / "leak.log"
    leak.write_text("====== ERROR: LeakCheck: detected memory leaks\n")
    assert f"{leak}:1: msSanitizer leak report is cut off" in _one_line_error(leak)
    cs = tmp_path / "cs.log"
    cs.write_text("========= COMPUTE-SANITIZER\n========= Invalid __global__ write of size 4 bytes\n")
    assert f"{cs}:2: compute-sanitizer illegal_access report is cut off" in _one_line_error(cs)
    assert "is a folder" in _one_line_error(tmp_path)


def test_open_builds_a_graph_of_kernels(logs: Path, tmp_path: Path) -> None:
    path = logs / "mssanitizer_memcheck_doc_examples.log"
    assert kind_of(path) == "sanitizer log"
    inv = open_path(path)
    assert [n.id for n in inv.graph] == ["add_custom_kernel", "host", "vec_add"]
    assert inv.graph.node("add_custom_kernel").attrs == {"tool": MSSAN, "likely_op": "aten.add",
                                                         "likely_op_confidence": 0.6}
    assert len(inv.memory_events) == 7 and all(e.node in inv.graph and e.confidence == 1.0 for e in inv.memory_events)
    assert {f.check for f in inv.findings} == {"memory"}
    assert inv.summary() == {"errors": 4, "warnings": 3}
    assert [f.kind for f in inv.findings_for("host")] == ["illegal_free", "unused_memory"]
    inv.save(tmp_path / "inv.json")
    back = Investigation.load(tmp_path / "inv.json")
    assert [(e.kind, e.address, e.node) for e in back.memory_events] == [
        (e.kind, e.address, e.node) for e in inv.memory_events]
