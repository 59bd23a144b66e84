"""Small hand-built investigations for the app tests: no clocks, no paths, names with brackets."""

from __future__ import annotations

import math

from ascend_tui.evidence import (
    ChainLink,
    Finding,
    MemoryEvent,
    MemorySample,
    RootCause,
    StatsTable,
    TensorMeta,
    TensorStats,
)
from ascend_tui.graph.opgraph import OpGraph, OpNode
from ascend_tui.investigation import Investigation, RunInfo

MIB = 1024 * 1024


def _stats(abs_max: float, *, nan: int = 0, inf: int = 0, numel: int = 64, zeros: int = 0) -> TensorStats:
    finite = math.isfinite(abs_max)
    return TensorStats(min=-abs_max if finite else -math.inf, max=abs_max, mean=abs_max / 4 if finite else math.nan,
                       l2norm=abs_max * 3 if finite else math.inf, abs_max=abs_max, nan_count=nan, inf_count=inf,
                       zero_count=zeros, numel=numel)


def _op(graph: OpGraph, nid: str, op_type: str, module: str, index: int, ins: list[str], dtype: str,
        shape: tuple[int, ...] = (4, 16), module_class: str = "") -> None:
    graph.add_node(OpNode(nid, op_type, module, index, inputs=tuple(TensorMeta(shape, dtype) for _ in ins),
                          outputs=(TensorMeta(shape, dtype),), module_class=module_class))
    for slot, src in enumerate(ins):
        graph.add_edge(src, nid, 0, slot)


def _finding(inv_graph: OpGraph, nid: str, kind: str, severity: str, message: str, **kw: object) -> Finding:
    node = inv_graph.node(nid)
    return Finding(check=str(kw.pop("check", "overflow")), kind=kind, severity=severity,  # type: ignore[arg-type]
                   node=nid, op_type=node.op_type, module=node.module, index=node.index, message=message,
                   **kw)  # type: ignore[arg-type]


def _link(graph: OpGraph, nid: str, value: float) -> ChainLink:
    node = graph.node(nid)
    return ChainLink(nid, node.module, node.op_type, value)


def overflow_investigation() -> Investigation:
    """A float16 run where `attn[0]/exp.0` overflows and the Inf turns into NaN downstream."""
    g = OpGraph("overflow-demo")
    g.add_node(OpNode("input:0", "input", "", -1, kind="input", outputs=(TensorMeta((4, 8), "float16"),)))
    g.add_node(OpNode("param:proj.weight", "param", "proj", -1, kind="param",
                      outputs=(TensorMeta((16, 8), "float16"),)))
    _op(g, "proj/mm.0", "aten.mm", "proj", 0, ["input:0", "param:proj.weight"], "float16", module_class="Linear")
    _op(g, "scale/mul.0", "aten.mul.Tensor", "scale", 1, ["proj/mm.0"], "float16")
    _op(g, "attn[0]/exp.0", "aten.exp", "attn[0]", 2, ["scale/mul.0"], "float16")
    _op(g, "attn[0]/sum.0", "aten.sum.dim_IntList", "attn[0]", 3, ["attn[0]/exp.0"], "float16")
    _op(g, "attn[0]/div.0", "aten.div.Tensor", "attn[0]", 4, ["attn[0]/exp.0", "attn[0]/sum.0"], "float16")
    _op(g, "norm/rsqrt.0", "aten.rsqrt", "norm", 5, ["proj/mm.0"], "float16")
    _op(g, "add.0", "aten.add.Tensor", "", 6, ["attn[0]/div.0", "norm/rsqrt.0"], "float16")
    _op(g, "argmax.0", "aten.argmax", "", 7, ["add.0"], "int64", shape=(4,))

    target = StatsTable()
    reference = StatsTable()
    values = {  # node: (target abs max, reference abs max)
        "proj/mm.0": (48.0, 48.0), "scale/mul.0": (12.0, 12.0), "attn[0]/exp.0": (math.inf, 162754.79),
        "attn[0]/sum.0": (math.inf, 651019.2), "attn[0]/div.0": (math.nan, 1.0),
        "norm/rsqrt.0": (3.0e-8, 3.0e-8), "add.0": (math.nan, 2.0), "argmax.0": (15.0, 15.0),
    }
    for nid, (t, r) in values.items():
        nan = 8 if math.isnan(t) else 0
        inf = 3 if math.isinf(t) else 0
        target.add(nid, 0, _stats(t if not math.isnan(t) else math.nan, nan=nan, inf=inf))
        reference.add(nid, 0, _stats(r))

    # As checks/overflow.py writes them: an origin's chain walks upstream along the largest input
    # (origin first, graph input last, reference magnitudes); an inherited finding links victim -> origin.
    chain = (_link(g, "attn[0]/exp.0", 162754.79), _link(g, "scale/mul.0", 12.0), _link(g, "proj/mm.0", 48.0),
             _link(g, "input:0", 3.0))
    origin = "exp overflows float16 for inputs above 11.09"
    findings = [
        _finding(g, "attn[0]/exp.0", "inf", "error", "3 Inf values in the output; every input was finite",
                 attribution="introduced", metrics={"inf_count": 3, "reference_abs_max": 162754.79},
                 root_cause=RootCause("attn[0]/exp.0", "attn[0]", origin, chain),
                 hint="exp of values above 11.1 overflows float16: subtract the row max first (softmax trick)"),
        _finding(g, "attn[0]/sum.0", "inf", "info", "Inf inherited from attn[0]/exp.0", attribution="inherited",
                 root_cause=RootCause("attn[0]/exp.0", "attn[0]", "Inf first appears at `attn[0]/exp.0`",
                                      (_link(g, "attn[0]/sum.0", 651019.2), chain[0]))),
        _finding(g, "attn[0]/div.0", "nan", "info", "8 NaN values (Inf / Inf) inherited from attn[0]/exp.0",
                 attribution="inherited",
                 root_cause=RootCause("attn[0]/exp.0", "attn[0]", "Inf first appears at `attn[0]/exp.0`",
                                      (_link(g, "attn[0]/div.0", 1.0), chain[0]))),
        _finding(g, "norm/rsqrt.0", "underflow", "warning", "every value at `norm/rsqrt.0` is below float16's "
                 "smallest subnormal 5.96e-08: the tensor flushes to zero", attribution="introduced",
                 metrics={"abs_max": 3.0e-8}),
    ]
    run = RunInfo(target="demo:overflow", device={"backend": "cpu", "name": "cpu"}, checks=("overflow",),
                  dtype="float16", reference="cpu:float32", source="live")
    return Investigation(g, stats=target, reference=reference, findings=findings, run=run)


def memory_investigation() -> Investigation:
    """A run whose embedding reads past its table (an index made by `add.0`), with sanitizer events and a leak."""
    g = OpGraph("memory-demo")
    g.add_node(OpNode("input:0", "input", "", -1, kind="input", outputs=(TensorMeta((2, 8), "int64"),)))
    g.add_node(OpNode("param:embed.weight", "param", "embed", -1, kind="param",
                      outputs=(TensorMeta((1024, 16), "float32"),)))
    _op(g, "add.0", "aten.add.Tensor", "", 0, ["input:0"], "int64", shape=(2, 8))
    _op(g, "embed/embedding.0", "aten.embedding", "embed", 1, ["param:embed.weight", "add.0"], "float32",
        module_class="Embedding")
    _op(g, "blocks[0]/matmul.0", "aten.matmul", "blocks[0]", 2, ["embed/embedding.0"], "float32")
    _op(g, "head/linear.0", "aten.linear", "head", 3, ["blocks[0]/matmul.0"], "float32", module_class="Linear")

    oob_cause = RootCause("add.0", "", "produced the index tensor (max 1030 >= 1024 rows)",
                          (_link(g, "embed/embedding.0", 1030.0), _link(g, "add.0", 1030.0)))
    findings = [
        _finding(g, "embed/embedding.0", "out_of_bounds", "error", "index 1030 is out of range for 1024 rows",
                 check="memory", root_cause=oob_cause, metrics={"max_index": 1030, "rows": 1024},
                 hint="the ids come from add.0: clamp them or check the vocabulary size"),
        _finding(g, "blocks[0]/matmul.0", "leak", "warning", "allocated memory grows 1 MiB per iteration",
                 check="memory", metrics={"growth_bytes_per_iteration": float(MIB)}),
    ]
    events = [
        MemoryEvent("out_of_bounds", "live", "index 1030 is out of range for 1024 rows",
                    node="embed/embedding.0", kernel="aten.embedding", confidence=1.0),
        MemoryEvent("illegal_read", "mssanitizer", "illegal read of size 4", size=4, address=0x12C0C0015000,
                    memory_space="GM", kernel="embedding_kernel[0]", node="embed/embedding.0", confidence=0.8),
        MemoryEvent("leak", "live", "allocated memory grows 1 MiB per iteration", node="blocks[0]/matmul.0",
                    kernel="aten.matmul", confidence=1.0),
        MemoryEvent("uninitialized_read", "compute-sanitizer", "Uninitialized __global__ memory read of size 4 bytes",
                    size=4, node="blocks[0]/matmul.0", confidence=0.3, likely_false_positive=True),
        MemoryEvent("leak", "mssanitizer", "Direct leak of 1024 byte(s)", size=1024),
    ]
    samples = [MemorySample(float(i), 100 * MIB + i * MIB, 128 * MIB, f"iteration {i}") for i in range(6)]
    run = RunInfo(target="demo:memory", device={"backend": "cpu", "name": "cpu"}, checks=("memory",),
                  dtype="float32", reference=None, iterations=6, source="live")
    return Investigation(g, findings=findings, memory_events=events, memory_samples=samples, run=run)


def wide_investigation(n: int) -> Investigation:
    """`n` chained float16 ops with growing values: enough rows to scroll, no findings."""
    g = OpGraph("wide")
    g.add_node(OpNode("input:0", "input", "", -1, kind="input", outputs=(TensorMeta((8,), "float16"),)))
    stats = StatsTable()
    prev = "input:0"
    keys = []
    for i in range(n):
        nid = f"layers.{i // 4}/add.{i % 4}"
        _op(g, nid, "aten.add.Tensor", f"layers.{i // 4}", i, [prev], "float16", shape=(8,))
        keys.append((nid, 0))
        prev = nid
    import numpy as np

    rows = np.zeros((n, 9))
    rows[:, 4] = np.linspace(1.0, 60000.0, n)
    rows[:, 8] = 8
    stats.add_many(keys, rows)
    return Investigation(g, stats=stats, run=RunInfo(target="demo:wide", dtype="float16", checks=("overflow",)))


def attention_investigation() -> Investigation:
    """Scores = q @ k^T where k passes through view, transpose and expand; the bmm overflows float16.

    The chain from the bmm to the key projection runs through ops that only move values, as in
    a real attention block, so `r` and `p` must step over them.
    """
    g = OpGraph("attention")
    g.add_node(OpNode("input:0", "input", "", -1, kind="input", outputs=(TensorMeta((2, 4, 8), "float16"),)))
    _op(g, "q/mm.0", "aten.mm", "q", 0, ["input:0"], "float16")
    _op(g, "k/mm.0", "aten.mm", "k", 1, ["input:0"], "float16")
    _op(g, "attn/view.0", "aten.view", "attn", 2, ["k/mm.0"], "float16")
    _op(g, "attn/transpose.0", "aten.transpose.int", "attn", 3, ["attn/view.0"], "float16")
    _op(g, "attn/expand.0", "aten.expand", "attn", 4, ["attn/transpose.0"], "float16")
    _op(g, "attn/_to_copy.0", "aten._to_copy", "attn", 5, ["attn/expand.0"], "float16")
    _op(g, "attn/bmm.0", "aten.bmm", "attn", 6, ["q/mm.0", "attn/_to_copy.0"], "float16")
    _op(g, "attn/softmax.0", "aten._softmax", "attn", 7, ["attn/bmm.0"], "float16")
    stats = StatsTable()
    for nid in ("q/mm.0", "k/mm.0", "attn/view.0", "attn/transpose.0", "attn/expand.0", "attn/_to_copy.0"):
        stats.add(nid, 0, _stats(300.0))
    stats.add("attn/bmm.0", 0, _stats(math.inf, inf=5))
    stats.add("attn/softmax.0", 0, _stats(math.nan, nan=64))
    chain = tuple(_link(g, n, v) for n, v in (("attn/bmm.0", 9.0e4), ("attn/_to_copy.0", 300.0),
                                               ("attn/expand.0", 300.0), ("attn/transpose.0", 300.0),
                                               ("attn/view.0", 300.0), ("k/mm.0", 300.0), ("input:0", 2.0)))
    findings = [_finding(g, "attn/bmm.0", "inf", "error", "5 Inf values in the output; every input was finite",
                         attribution="introduced",
                         root_cause=RootCause("attn/bmm.0", "attn", "bmm of unscaled keys overflows float16", chain))]
    run = RunInfo(target="attention.py", device={"backend": "cpu", "name": "cpu"}, checks=("overflow",),
                  dtype="float16", reference="cpu:float32", source="live")
    return Investigation(g, stats=stats, findings=findings, run=run)


async def to_home(app: object, pilot: object) -> None:
    """Wait for the app's start-up jobs, then close whatever opened over the home screen (the story, say)."""
    await app.workers.wait_for_complete()
    await pilot.pause()
    while app.screen is not app.main:
        app.pop_screen()
        await pilot.pause()
