"""Categories, shares, bound-ness, advice, baseline diff and cluster summary on hand-built tables."""

from __future__ import annotations

import numpy as np
import pytest

from ascend_tui.checks.profile import (boundness, category_of, cluster_summary, diff, normalize, shares, summarize,
                                       attribute)
from ascend_tui.checks.profile_advice import advise
from ascend_tui.readers.profiler.csv_tables import read_step_trace
from ascend_tui.graph.profile import Codes, HostOp, KernelTable, Profile, StepTime
from tests.conftest import FIXTURES


def table(rows: list[dict], metrics: dict[str, list[float]] | None = None) -> KernelTable:
    """Kernel rows back to back on stream 0: dicts of name, type, core, dur and optional extras."""
    n = len(rows)
    starts, t = [], 1_736_408_883_704_643_212
    for r in rows:
        starts.append(t)
        t += int(r["dur"] * 1000) + int(r.get("gap", 1) * 1000)
    text = {k: Codes.of(str(r.get(k, "")) for r in rows) for k in ("name", "type", "core", "module", "input_shapes",
                                                                    "input_dtypes", "output_shapes", "output_dtypes")}
    ints = {"start_ns": np.array(starts), "stream": np.zeros(n, np.int64),
            "block_dim": np.array([r.get("block", -1) for r in rows])}
    return KernelTable(n, text, ints, {"dur_us": np.array([float(r["dur"]) for r in rows])}, metrics or {})


def k(name: str, typ: str, dur: float, core: str = "AI_VECTOR_CORE", **kw: object) -> dict:
    return {"name": name, "type": typ, "core": core, "dur": dur, **kw}


@pytest.mark.parametrize("typ,name,core,expected", [
    ("TransData", "trans_TransData_0", "AI_VECTOR_CORE", "layout"),
    ("TransposeD", "x", "AI_VECTOR_CORE", "layout"),
    ("", "aten::contiguous", "CPU", "layout"),
    ("MatMulV2", "m", "AI_CORE", "compute"),
    ("FlashAttentionScore", "f", "MIX_AIC", "compute"),
    ("hcom_allReduce_", "hcom_allReduce__586_0_1", "HCCL", "communication"),
    ("Cast", "trans_Cast_5", "AI_CPU", "aicpu"),
    ("MemcpyAsync", "MemcpyAsync", "", "memcpy"),
    ("Relu", "Relu", "AI_VECTOR_CORE", "vector"),
    ("aten::relu", "aten::relu", "CPU", "vector"),
    ("enumerate(DataLoader)", "enumerate(DataLoader)", "HOST", "host"),
])
def test_categories(typ: str, name: str, core: str, expected: str) -> None:
    assert category_of(typ, name, core) == expected


def seed_profile() -> KernelTable:
    """The issue's seed workflow: TransData around every conv/matmul, MatMul + BiasAdd + Relu unfused."""
    rows = []
    for i in range(10):
        rows += [k(f"trans_TransData_{2 * i}", "TransData", 30, module=f"backbone.block{i % 2}.norm"),
                 k(f"Conv2D{i}", "Conv2D", 21, "AI_CORE", module=f"backbone.block{i % 2}.conv", block=20),
                 k(f"trans_TransData_{2 * i + 1}", "TransData", 25, module=f"backbone.block{i % 2}.norm"),
                 k(f"MatMul{i}", "MatMulV2", 25, "AI_CORE", module="head.fc", block=24),
                 k(f"BiasAdd{i}", "BiasAdd", 8, module="head.fc"),
                 k(f"Relu{i}", "Relu", 7, module="head.act")]
    rows.append(k("Slow_AICPU", "NonZero", 40, "AI_CPU", input_dtypes="DOUBLE"))
    n = len(rows)
    mac = [0.9 if r["type"] == "MatMulV2" else (0.5 if r["type"] == "Conv2D" else np.nan) for r in rows]
    return table(rows, {"aic_mac_ratio": mac, "aic_mte2_ratio": [0.3 if r["core"] == "AI_CORE" else np.nan
                                                                  for r in rows],
                        "aiv_vec_ratio": [0.2 if r["core"] == "AI_VECTOR_CORE" else np.nan for r in rows]})


def test_shares_and_groups() -> None:
    t = seed_profile()
    s = shares(t, "category")
    assert sum(s.values()) == pytest.approx(1.0)
    assert s["layout"] == pytest.approx(550 / t.total_us())
    top = summarize(t, "type")[0]
    assert (top.key, top.count, top.category) == ("TransData", 20, "layout")
    mods = {g.key: g.total_us for g in summarize(t, "module")}
    assert mods["backbone.block0.norm"] == pytest.approx(275)


def test_boundness_from_pmu_and_roofline() -> None:
    t = seed_profile()
    b = boundness(t)
    labels = [b.at(i) for i in range(t.n)]
    assert labels[3] == "cube" and labels[1] == "unbound" and labels[0] == "unbound"
    no_pmu = table([k("mm", "MatMul", 100, "AI_CORE", input_shapes='"""4096,4096;4096,4096"""', input_dtypes="FLOAT16;FLOAT16",
                      output_shapes='"""4096,4096"""', output_dtypes="FLOAT16"),
                    k("add", "Add", 100, input_shapes='"""4096,4096;4096,4096"""', input_dtypes="FLOAT16;FLOAT16",
                      output_shapes='"""4096,4096"""', output_dtypes="FLOAT16")])
    est = boundness(no_pmu)
    assert (est.at(0), est.at(1)) == ("~compute", "~memory")


def test_fusion_matches_equal_a_regex_over_every_row() -> None:
    """The fusion rule searches only the rows whose type holds a pattern word; it finds what a search over the
    ';'-joined types of every row finds (types that hold a word mid-name, empty types, `;` in a type)."""
    import random
    import re

    from ascend_tui.checks.profile_advice import FUSIONS, _matches

    vocab = ["MatMulV2", "BatchMatMulV2", "aclnnMatMul", "Add", "AddV2", "BiasAdd", "Relu", "ReluGrad", "Gelu",
             "FastGeluV2", "Cast", "TransData", "", "Mul", "Muls", "Softmax", "SoftmaxV2", "Dropout", "DropOutDoMask",
             "Pow", "Square", "ReduceMeanD", "Sub", "Rsqrt", "Sqrt", "RealDiv", "Conv2D", "Relu6", "x-y", "Add;Add",
             "Adds", "Div"]
    rng = random.Random(5)
    found = 0
    for _ in range(150):
        values = rng.sample(vocab, rng.randint(1, len(vocab)))
        codes = np.array([rng.randrange(len(values)) for _ in range(rng.randint(1, 300))])
        starts = np.concatenate([[0], np.cumsum([len(values[c]) + 1 for c in codes])])
        text = ";".join(values[c] for c in codes)
        for _, pattern, _ in FUSIONS:
            spans = np.array([m.span() for m in re.finditer(pattern, text)], np.int64).reshape(-1, 2)
            first, stop = _matches(pattern, values, codes)
            assert first.tolist() == (np.searchsorted(starts, spans[:, 0], side="right") - 1).tolist()
            assert stop.tolist() == np.searchsorted(starts, spans[:, 1], side="left").tolist()
            found += len(first)
    assert found > 200  # the patterns did match


def test_advice_on_the_seed_workflow() -> None:
    t = seed_profile()
    findings = advise(Profile("test", t))
    found = {f.kind: f for f in reversed(findings)}  # the first of each kind
    layout = found["layout_conversion"]
    assert layout.severity == "warning" and "backbone.block0.norm" in layout.message
    assert layout.metrics["count"] == 20
    fusion = found["fusion"]
    assert "MatMul + bias + activation" in fusion.message and fusion.metrics["count"] == 10
    assert fusion.metrics["saved_us"] == pytest.approx(150)
    unbound = [f.op_type for f in findings if f.kind == "unbound"]
    assert unbound == ["TransData", "Conv2D"]  # Conv2D: 50% mac, 30% mte2, bound by nothing; MatMul 90% cube
    assert "DOUBLE" in found["aicpu"].message and found["aicpu"].node == "Slow_AICPU"
    assert "Conv2D launches on 20 blocks" in found["block_dim"].message
    assert found["hotspot"].op_type == "TransData"
    assert all(f.check == "profile" for f in found.values())


def test_host_bound_and_sync() -> None:
    gappy = table([k(f"Add{i}", "Add", 10, gap=40) for i in range(20)])
    kinds = {f.kind for f in advise(Profile("t", gappy))}
    assert "host_bound" in kinds
    dense = table([k(f"Add{i}", "Add", 10, gap=0) for i in range(20)])
    assert "host_bound" not in {f.kind for f in advise(Profile("t", dense))}
    sync = Profile("t", dense, host_ops=(HostOp("aten::item", 50, 1, 1, 0, 0),))
    assert "50 host-device synchronisations" in next(f.message for f in advise(sync) if f.kind == "sync")
    steps = Profile("t", dense, steps=(StepTime(1, 100, 50, 0, 50, 60, 210, 0),))
    assert {"host_bound", "communication"} <= {f.kind for f in advise(steps)}


def test_baseline_diff_regressions_first() -> None:
    before = table([k("a", "MatMul", 100, "AI_CORE"), k("b", "TransData", 10), k("c", "Relu", 50)])
    after = table([k("a", "MatMul", 90, "AI_CORE"), k("b", "TransData", 80), k("d", "Gelu", 5)])
    rows = diff(before, after, "type")
    assert [(r.key, r.delta_us) for r in rows] == [("TransData", 70), ("Gelu", 5), ("MatMul", -10), ("Relu", -50)]
    assert rows[0].ratio == pytest.approx(8.0)


def test_cluster_summary_names_the_slow_rank_and_stage() -> None:
    steps = read_step_trace(FIXTURES / "profiler" / "msprof_analyze" / "cluster_step_trace_time.csv")
    assert len(steps) == 16 and {s.rank for s in steps} == set(range(16))
    c = cluster_summary(steps)
    assert (c.slow_rank, c.slow_stage) == (13, "free")
    assert c.excess_us > 10_000


def test_attribution_by_name() -> None:
    got = attribute(["aten::addmm", "fc/addmm.0", "Softmax_3", "zzz"], ["fc/addmm.0", "softmax.0"],
                    {"fc/addmm.0": "aten.addmm", "softmax.0": "aten._softmax"})
    assert got == {"aten::addmm": "fc/addmm.0", "fc/addmm.0": "fc/addmm.0", "Softmax_3": "softmax.0"}
    assert normalize("aten.addmm.default") == normalize("aten::addmm") == "addmm"


def test_idle_time_in_chunks_equals_the_whole_sweep() -> None:
    """The host-bound rule's idle time, summed a chunk of rows at a time, equals one sweep over every row."""
    from ascend_tui.checks.profile_advice import _idle_ns

    rng = np.random.default_rng(4)
    start = np.sort(rng.integers(0, 10**12, 200_001))
    dur = rng.random(len(start)) * rng.choice([1.0, 1e3, 1e6], len(start))
    end = np.maximum.accumulate(start + (dur * 1000).astype(np.int64))
    whole = int(np.maximum(start[1:] - end[:-1], 0).sum())
    assert _idle_ns(start, dur, chunk=1000) == _idle_ns(start, dur) == (whole, int(end[-1]))


def test_block_dim_spares_mix_kernels_whose_vector_blocks_divide() -> None:
    rows = [k("mix_ok", "FlashAttention", 100, "MIX_AIC", block=20),
            k("mix_bad", "FlashAttentionGrad", 100, "MIX_AIC", block=20, mix=30),
            k("cpu", "Cast", 100, "AI_CPU", block=7)]
    t = table(rows)
    t = KernelTable(t.n, t.text, {**{c: t.ints[c] for c in t.ints}, "mix_block_dim": np.array([48, 30, -1])},
                    t.floats)
    found = [f for f in advise(Profile("test", t)) if f.kind == "block_dim"]
    assert [f.op_type for f in found] == ["FlashAttentionGrad"]
