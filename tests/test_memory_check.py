"""checks/memory on hand-built graphs: index root causes, uninitialized reads, leaks and the memory trend."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ascend_tui.fmt import nbytes
from ascend_tui.checks.memory import (
    IndexViolation,
    LeakRecord,
    UninitRead,
    dedupe,
    growth_per_iteration,
    index_root_cause,
    leak_findings,
    memory_event,
    out_of_bounds_finding,
    place,
    uninitialized_finding,
    write_kind,
)
from ascend_tui.evidence import MemorySample, SourceLocation, StatsTable, TensorMeta, TensorStats
from ascend_tui.graph.opgraph import OpGraph, OpNode


def _stats(lo: float, hi: float, numel: int = 24) -> TensorStats:
    return TensorStats(lo, hi, (lo + hi) / 2, 1.0, max(abs(lo), abs(hi)), 0, 0, 0, numel)


class _Builder:
    """A graph and its statistics, one call per node."""

    def __init__(self) -> None:
        self.graph = OpGraph()
        self.stats = StatsTable()
        self.index = 0

    def node(self, nid: str, op: str, dtype: str, rng: tuple[float, float] | None, inputs: tuple[str, ...] = (),
             kind: str = "op", module: str = "", shape: tuple[int, ...] = (2, 12)) -> str:
        index = -1 if kind != "op" else self.index
        if kind == "op":
            self.index += 1
        metas = tuple(self.graph.node(i).outputs[0] for i in inputs)
        source = SourceLocation("/models/model.py", 20 + self.index, "forward") if kind == "op" else None
        self.graph.add_node(OpNode(nid, op, module, index, kind=kind, inputs=metas,  # type: ignore[arg-type]
                                   outputs=(TensorMeta(shape, dtype),), source=source))
        for slot, src in enumerate(inputs):
            self.graph.add_edge(src, nid, 0, slot)
        if rng is not None:
            self.stats.add(nid, 0, _stats(*rng))
        return nid


def _shifted(input_max: float = 511) -> _Builder:
    """ids -> add(+1) -> view -> embedding(weight with 512 rows): the shifted-index bug."""
    b = _Builder()
    b.node("input:0", "input", "int64", (0, input_max), kind="input")
    b.node("add.0", "aten.add", "int64", (1, input_max + 1), ("input:0",))
    b.node("view.0", "aten.view", "int64", (1, input_max + 1), ("add.0",))
    b.node("param:embed.weight", "param", "float32", (-3, 3), kind="param", module="embed", shape=(512, 32))
    b.node("embed/embedding.0", "aten.embedding", "float32", (-3, 3), ("param:embed.weight", "view.0"),
           module="embed", shape=(2, 12, 32))
    return b


def _violation(**changes: object) -> IndexViolation:
    base = dict(node="embed/embedding.0", slot=1, arg="indices", value=512, low=0, high=512, bad_count=2, numel=24,
                bad_min=512, bad_max=512, indexed="float32[512,32]", dim=0, mode="rows", indexed_slot=0)
    base.update(changes)
    return IndexViolation(**base)  # type: ignore[arg-type]


def test_root_cause_walks_through_views_to_the_offset_add() -> None:
    b = _shifted()
    root = index_root_cause(b.graph, "embed/embedding.0", 1, 0, 512, b.stats, value=512)
    assert root is not None
    assert root.node == "add.0"
    assert [c.node for c in root.chain] == ["embed/embedding.0", "view.0", "add.0"]
    assert "offset" in root.reason and "511" in root.reason and "512" in root.reason
    assert "model.py" in root.reason


def test_root_cause_is_the_input_when_it_already_holds_bad_ids() -> None:
    b = _shifted(input_max=600)
    root = index_root_cause(b.graph, "embed/embedding.0", 1, 0, 512, b.stats)
    assert root is not None and root.node == "input:0"
    assert "model's input" in root.reason and "0..600" in root.reason


def test_root_cause_ignores_float_producers_except_through_conversions() -> None:
    b = _Builder()
    b.node("arange.0", "aten.arange", "int64", (0, 4))
    b.node("const:0", "const", "float32", (0, 1000), kind="const")
    b.node("add.0", "aten.add", "int64", (3, 7), ("arange.0", "const:0"))
    b.node("input:0", "input", "float32", (0, 1), kind="input")
    b.node("mul.0", "aten.mul", "float32", (0, 119.6), ("input:0",))
    b.node("_to_copy.0", "aten._to_copy", "int64", (0, 119), ("mul.0",))
    b.node("input:1", "input", "float32", (0, 1), kind="input", shape=(6, 3))
    b.node("index.0", "aten.index", "float32", (0, 1), ("input:1", "add.0"))
    b.node("emb.0", "aten.embedding", "float32", (0, 1), ("input:1", "_to_copy.0"))
    via_add = index_root_cause(b.graph, "index.0", 1, -6, 6, b.stats)
    assert via_add is not None and via_add.node == "add.0"
    via_cast = index_root_cause(b.graph, "emb.0", 1, 0, 100, b.stats)
    assert via_cast is not None and via_cast.node == "mul.0"
    assert "scales" in via_cast.reason


def test_root_cause_below_the_start_follows_the_minimum() -> None:
    b = _Builder()
    b.node("input:0", "input", "int64", (1, 9), kind="input")
    b.node("sub.0", "aten.sub", "int64", (-2, 6), ("input:0",))
    b.node("param:w", "param", "float32", (0, 1), kind="param", shape=(10, 4))
    b.node("embedding.0", "aten.embedding", "float32", (0, 1), ("param:w", "sub.0"))
    root = index_root_cause(b.graph, "embedding.0", 1, 0, 10, b.stats, above=False)
    assert root is not None and root.node == "sub.0"
    assert "below the start" in root.reason and "subtracts" in root.reason


def test_root_cause_without_statistics_names_the_direct_producer() -> None:
    b = _shifted()
    root = index_root_cause(b.graph, "embed/embedding.0", 1, 0, 512, None)
    assert root is not None and root.node == "view.0"


def test_out_of_bounds_finding_says_what_where_and_why() -> None:
    b = _shifted()
    f = out_of_bounds_finding(b.graph, _violation(), b.stats)
    assert (f.check, f.kind, f.severity, f.node, f.module) == ("memory", "out_of_bounds", "error",
                                                               "embed/embedding.0", "embed")
    assert "row 512" in f.message and "param:embed.weight float32[512,32]" in f.message
    assert "[0, 512)" in f.message and "2 of 24" in f.message and "clamped" in f.message
    assert f.root_cause is not None and f.root_cause.node == "add.0"
    assert f.attribution == "introduced", "the access is where it first goes wrong; add.0 is the root cause"
    assert f.hint is not None and "add.0" in f.hint and "513" in f.hint
    assert f.metrics["valid_high"] == 512 and f.metrics["bad_max"] == 512 and f.metrics["dim"] == 0


def test_out_of_bounds_target_message_names_the_classes_and_ignore_index() -> None:
    b = _Builder()
    b.node("input:0", "input", "float32", (-2, 2), kind="input", shape=(4, 5))
    b.node("input:1", "input", "int64", (-100, 4), kind="input", shape=(4,))
    b.node("add.0", "aten.add", "int64", (-99, 5), ("input:1",), shape=(4,))
    b.node("nll_loss_forward.0", "aten.nll_loss_forward", "float32", (1, 1), ("input:0", "add.0"), shape=())
    v = _violation(node="nll_loss_forward.0", arg="target", value=5, high=5, bad_min=5, bad_max=5, numel=4,
                   bad_count=1, indexed="float32[4,5]", dim=1, mode="target", ignore_index=-100)
    f = out_of_bounds_finding(b.graph, v, b.stats)
    assert "target class 5" in f.message and "5 classes" in f.message and "ignore_index -100" in f.message
    assert f.root_cause is not None and f.root_cause.node == "add.0"


def test_uninitialized_finding_blames_the_allocation() -> None:
    b = _Builder()
    b.node("empty.0", "aten.empty", "float32", None, module="pool", shape=(8, 16))
    b.node("sum.0", "aten.sum", "float32", (0, 0), ("empty.0",), module="head", shape=(16,))
    u = UninitRead("sum.0", 0, "empty.0", "aten.empty", "float32[8,16]", 64, 128, 128, 64, (4, 0), (7, 15))
    f = uninitialized_finding(b.graph, u)
    assert (f.kind, f.severity, f.node, f.module) == ("uninitialized_read", "error", "sum.0", "head")
    assert "64 never-written elements of float32[8,16]" in f.message and "[4, 0]" in f.message
    assert f.root_cause is not None and f.root_cause.node == "empty.0" and f.root_cause.module == "pool"
    assert "64 of 128" in f.root_cause.reason


def _leak_graph() -> OpGraph:
    b = _Builder()
    b.node("input:0", "input", "float32", (0, 1), kind="input")
    b.node("encoder.0/addmm.0", "aten.addmm", "float32", (0, 1), ("input:0",), module="encoder.0")
    b.node("encoder.1/relu.0", "aten.relu", "float32", (0, 1), ("encoder.0/addmm.0",), module="encoder.1")
    return b.graph


def _leak(iterations: tuple[int, ...], node: str = "encoder.1/relu.0") -> LeakRecord:
    return LeakRecord(node, "encoder.1", "aten.relu", "float32[2,8,32]", iterations, tuple(2048 for _ in iterations),
                      ("StreamingEncoder.cache",))


def test_leak_from_every_iteration_is_an_error_with_bytes_per_iteration() -> None:
    (f,) = leak_findings(_leak_graph(), [_leak((0, 1, 2))], 3, counter="cpu")
    assert (f.kind, f.severity, f.node, f.module) == ("leak", "error", "encoder.1/relu.0", "encoder.1")
    assert f.metrics["bytes_per_iteration"] == 2048 and f.metrics["total_bytes"] == 6144
    assert f.metrics["retained_in"] == [1, 2, 3]
    assert "held by StreamingEncoder.cache" in f.message and "2.0 KiB per iteration" in f.message


def test_two_iterations_are_a_warning_and_one_is_only_info() -> None:
    (two,) = leak_findings(_leak_graph(), [_leak((0, 1))], 2, counter="cpu")
    assert two.severity == "warning"
    (one,) = leak_findings(_leak_graph(), [_leak((0,))], 1, counter="cpu")
    assert one.severity == "info" and "--iterations" in one.message


def test_a_window_of_recent_calls_or_state_made_once_is_not_a_leak() -> None:
    assert leak_findings(_leak_graph(), [_leak((2, 3))], 4, counter="cpu") == []
    assert leak_findings(_leak_graph(), [_leak((0,))], 3, counter="cpu") == []


def test_leak_on_an_op_the_first_iteration_did_not_run_lands_in_its_module() -> None:
    (f,) = leak_findings(_leak_graph(), [_leak((0, 1, 2), node="encoder.1/relu.7")], 3, counter="cpu")
    assert f.node == "encoder.1/relu.0"
    assert place(_leak_graph(), "nowhere/relu.0", "nowhere", "aten.relu") is None


def _samples(values: list[float]) -> list[MemorySample]:
    return [MemorySample(float(i), v, v, f"after iteration {i}") for i, v in enumerate(values)]


def test_device_counter_growth_without_surviving_tensors_is_a_warning() -> None:
    growing = _samples([0, 4e6, 5e6, 6e6, 7e6])
    (f,) = leak_findings(_leak_graph(), [], 4, growing, counter="device.memory_allocated")
    assert f.kind == "leak" and f.severity == "warning" and "per iteration" in f.message
    assert leak_findings(_leak_graph(), [], 4, growing, counter="cpu") == []
    flat = _samples([0, 4e6, 4e6, 4e6, 4e6])
    assert leak_findings(_leak_graph(), [], 4, flat, counter="device.memory_allocated") == []


def test_growth_per_iteration_is_the_slope() -> None:
    assert growth_per_iteration(_samples([0, 1024, 2048, 3072])) == pytest.approx(1024)
    assert growth_per_iteration(_samples([5.0])) == 0.0


@pytest.mark.parametrize(("op", "flags", "kind"), [
    ("copy_", {}, "full"),
    ("fill_", {}, "full"),
    ("baddbmm_", {"beta": 0}, "full"),
    ("baddbmm_", {"beta": 1}, "rmw"),
    ("index_put_", {"accumulate": False}, "partial"),
    ("index_put_", {"accumulate": True}, "accumulate"),
    ("scatter_", {"reduce": None}, "partial"),
    ("scatter_", {"reduce": "add"}, "accumulate"),
    ("scatter_reduce_", {"include_self": False}, "partial"),
    ("scatter_add_", {}, "accumulate"),
    ("masked_fill_", {}, "partial"),
    ("add_", {}, "rmw"),
])
def test_write_kind(op: str, flags: dict[str, object], kind: str) -> None:
    assert write_kind(op, flags) == kind


def test_events_dedupe_and_sizes() -> None:
    b = _shifted()
    f = out_of_bounds_finding(b.graph, _violation(), b.stats)
    later = out_of_bounds_finding(b.graph, _violation(iteration=2), b.stats)
    assert dedupe([f, later]) == [f]
    event = memory_event(f)
    assert (event.tool, event.kind, event.node, event.kernel) == ("live", "out_of_bounds", "embed/embedding.0",
                                                                   "aten.embedding")
    assert event.extra["valid_high"] == 512
    assert nbytes(512) == "512 B" and nbytes(3 * 1024 * 1024) == "3.0 MiB"


def test_memory_check_needs_no_torch() -> None:
    code = "import sys, ascend_tui.checks.memory\nprint('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
