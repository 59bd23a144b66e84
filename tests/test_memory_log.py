"""Sanitizer events on a live-captured graph: kernel names to operators, the index's cause, pool false positives."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ascend_tui.checks.memory_log import findings_from_events, mark_pool_reuse, match_kernel, prepare_events
from ascend_tui.evidence import MemoryEvent
from ascend_tui.offline.memory import investigation_from_log
from ascend_tui.readers.sanitizer.log import parse_file, parse_lines

INDEX_SELECT = ("void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, "
                "true>(at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<float, "
                "unsigned int>, at::cuda::detail::TensorInfo<long, unsigned int>, int, int, unsigned int, unsigned "
                "int, long)")
CUDA_ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
MATMUL = "MatMulV2_9a8f1c2d3e4f5a6b7c8d9e0f1a2b3c4d_0"


@pytest.mark.parametrize(("kernel", "first", "confidence"), [
    (INDEX_SELECT, "index_select", 0.9),
    (CUDA_ADD, "add", 0.8),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, std::array<char*, 3ul> >"
     "(int, at::native::AddFunctor<float>, std::array<char*, 3ul>)", "add", 0.8),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)"
     "::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >", "sigmoid", 0.7),
    ("ampere_sgemm_32x32_sliced1x4_tn", "addmm", 0.6),
    (MATMUL, "addmm", 0.85),
    ("AddCustom_ab1b6750d7f510985325b603cb06dc8b_0", "add", 0.6),
    ("add_custom_kernel", "add", 0.6),
    ("GatherV2_5f3e2a1b0c9d8e7f_3", "index_select", 0.85),
    ("ConcatD", "cat", 0.85),
    ("triton_poi_fused_add_mul_0", "add", 0.4),
])
def test_kernel_names_point_to_operators(kernel: str, first: str, confidence: float) -> None:
    match = match_kernel(kernel)
    assert match is not None and match.op_types[0] == first and match.confidence == confidence


def test_kernel_names_that_say_nothing() -> None:
    assert match_kernel("kernel_float") is None
    assert match_kernel("scaleArray(float *, float)") is None


@pytest.fixture(scope="module")
def graph() -> Any:
    """A tiny model whose embedding index is shifted by an offset, then a linear layer and a residual add."""
    import torch
    from ascend_tui.live.recording import capture

    class Shifted(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(16, 8)
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, ids: Any, x: Any) -> Any:
            return self.proj(self.emb(ids + 3)) + x

    torch.manual_seed(0)
    return capture(Shifted(), (torch.tensor([[1, 2, 3, 4]]), torch.randn(1, 4, 8))).graph


def _cs_log(fixtures: Path, kernel: str, alloc_size: int) -> list[str]:
    """The real compute-sanitizer out-of-bounds report with another kernel and allocation size."""
    text = (fixtures / "sanitizer" / "compute_sanitizer_memcheck_real.log").read_text()
    return text.replace("scaleArray(float *, float)", kernel).replace("4,092 bytes", f"{alloc_size} bytes").splitlines()


def _ms_log(fixtures: Path, kernel: str) -> list[str]:
    text = (fixtures / "sanitizer" / "mssanitizer_memcheck_doc_examples.log").read_text()
    return text.replace("add_custom_kernel", kernel).splitlines()


def test_cuda_index_select_lands_on_the_embedding_with_the_offset_as_cause(fixtures: Path, graph: Any) -> None:
    log = parse_lines(_cs_log(fixtures, INDEX_SELECT, 16 * 8 * 4), "cs.log")
    oob = [f for f in findings_from_events(graph, log.events) if f.kind == "out_of_bounds"]
    assert len(oob) == 1
    f = oob[0]
    assert (f.node, f.module, f.op_type, f.severity) == ("emb/embedding.0", "emb", "aten.embedding", "error")
    assert f.metrics["confidence"] == 0.9 and f.metrics["candidates"] == 1
    assert f.root_cause is not None and f.root_cause.node == "add.0"
    assert [c.node for c in f.root_cause.chain] == ["emb/embedding.0", "add.0"]
    assert "add.0" in (f.hint or "")


def test_cuda_add_is_told_apart_by_the_allocation_size(fixtures: Path, graph: Any) -> None:
    residual = graph.node("add.1").outputs[0]
    assert residual is not None and residual.shape == (1, 4, 8)
    log = parse_lines(_cs_log(fixtures, CUDA_ADD, 1 * 4 * 8 * 4), "cs.log")
    ev = prepare_events(graph, log.events)[0]
    assert ev.node == "add.1" and ev.confidence == 0.9
    assert "tensor of 128 bytes" in ev.extra["mapping"]


def test_ascend_kernels_map_with_their_confidence(fixtures: Path, graph: Any) -> None:
    mm = prepare_events(graph, parse_lines(_ms_log(fixtures, MATMUL), "ms.log").events)[0]
    assert (mm.node, mm.confidence) == ("proj/addmm.0", 0.85)
    add = prepare_events(graph, parse_lines(_ms_log(fixtures, "add_custom_kernel"), "ms.log").events)[0]
    # 0.3: a guess, not a fact: the event stays unmapped with its candidates, in the finding and its JSON too
    assert add.node is None and add.confidence == 0.3 and add.extra["unmapped"] is True
    assert add.extra["candidate_nodes"] == ["add.0", "add.1"]
    (f,) = [f for f in findings_from_events(graph, [add]) if f.kind == "illegal_access"]
    assert f.node == "" and f.severity == "error"
    assert "not placed on an operator: the best guess `add.0` has confidence 0.30" in f.message
    assert f.metrics["unmapped"] is True and f.metrics["candidate_nodes"] == ["add.0", "add.1"]


def test_events_without_an_operator_stay_unplaced(fixtures: Path, graph: Any) -> None:
    log = parse_file(fixtures / "sanitizer" / "mssanitizer_racecheck_doc_examples.log")
    findings = findings_from_events(graph, log.events)
    assert [(f.kind, f.node, f.index) for f in findings][0] == ("race", "", -1)
    assert findings[0].metrics["kernel"] == "kernel_float" and "names no operator" in findings[0].metrics["mapping"]


def test_log_on_a_live_graph_investigation(fixtures: Path, graph: Any) -> None:
    from ascend_tui.investigation import Investigation

    inv = investigation_from_log(parse_lines(_cs_log(fixtures, INDEX_SELECT, 512), "cs.log"), Investigation(graph))
    assert inv.run.checks == ("memory",)
    first = inv.first_finding("memory")
    assert first is not None and first.node == "emb/embedding.0"
    assert inv.trace_root_cause("emb/embedding.0").node == "add.0"


REUSE_LOG = """\
====== ERROR: illegal read of size 64
======    at 0x124080013040 on GM in add_custom_kernel
======    in block aiv(0) on device 0
======    code in pc current 0x77c (serialNo:10)
======    #0 add_custom.cpp:18:5
====== ERROR: LeakCheck: detected memory leaks
======    Direct leak of 1000 byte(s)
======      at 0x124080013000 on GM allocated in add_custom.cpp:15 (serialNo:55)
======    Direct leak of 4194304 byte(s)
======      at 0x124080200000 on GM allocated in add_custom.cpp:21 (serialNo:56)
====== SUMMARY: 4195304 byte(s) leaked in 2 allocation(s)
"""


def test_address_reuse_by_the_pool_is_a_likely_false_positive() -> None:
    events = mark_pool_reuse(parse_lines(REUSE_LOG.splitlines(), "reuse.log").events)
    read, small, segments = events
    assert read.likely_false_positive and read.extra["severity"] == "warning"
    assert "inside the block of 1000 bytes at 0x124080013000" in read.extra["false_positive_reason"]
    assert not small.likely_false_positive
    assert segments.likely_false_positive and "2 MiB segments" in segments.extra["false_positive_reason"]
    kept = mark_pool_reuse(parse_lines(REUSE_LOG.splitlines(), "reuse.log").events, pool_enabled=False)
    assert [e.likely_false_positive for e in kept] == [True, False, False]


def test_false_positive_findings_are_warnings_that_say_why() -> None:
    from ascend_tui.graph.opgraph import OpGraph

    findings = findings_from_events(OpGraph(), parse_lines(REUSE_LOG.splitlines(), "reuse.log").events)
    read = findings[0]
    assert read.severity == "warning" and read.metrics["likely_false_positive"] is True
    assert "likely a false positive" in read.message and "PYTORCH_NO_NPU_MEMORY_CACHING=1" in (read.hint or "")
    assert [f.severity for f in findings] == ["warning", "error", "warning"]


def test_real_out_of_bounds_next_to_a_later_leak_is_not_excused(fixtures: Path) -> None:
    log = parse_file(fixtures / "sanitizer" / "compute_sanitizer_memcheck_leakcheck_real.log")
    assert not any(e.likely_false_positive for e in mark_pool_reuse(log.events))
    stomp = parse_file(fixtures / "sanitizer" / "mssanitizer_memcheck_doc_examples.log").events[1]
    later = MemoryEvent(kind="leak", tool="mssanitizer", message="", size=1 << 20, address=0x12C0C0015000, line_no=99)
    assert not mark_pool_reuse([stomp, later], pool_enabled=False)[0].likely_false_positive


def test_unprinted_errors_become_an_info_finding(fixtures: Path) -> None:
    inv = investigation_from_log(parse_file(fixtures / "sanitizer" / "compute_sanitizer_initcheck_real.log"))
    info = [f for f in inv.findings if f.kind == "unprinted_errors"]
    assert len(info) == 1 and info[0].severity == "info"
    assert (info[0].metrics["counted"], info[0].metrics["printed"]) == (38361, 1)


def test_core_modules_import_without_torch_or_textual() -> None:
    code = ("import sys, ascend_tui.checks.memory_log, ascend_tui.readers.sanitizer.log, "
            "ascend_tui.readers.profiler.memory, ascend_tui.cli.sanitize; "
            "bad = [m for m in ('torch', 'textual') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
