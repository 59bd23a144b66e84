"""The pure overflow check on hand-built graphs and statistics (no torch): origins, chains, hints, schema."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from ascend_tui.checks.overflow import RangeEvidence, analyze, num, op_name, range_of
from ascend_tui.evidence import StatsTable, TensorMeta, TensorStats
from ascend_tui.graph.opgraph import OpGraph, OpNode
from ascend_tui.investigation import Investigation
from ascend_tui.report import build_report

INF, NAN = math.inf, math.nan


def stats(absmax: float, *, lo: float | None = None, hi: float | None = None, nan: int = 0, inf: int = 0,
          zeros: int = 0, numel: int = 64, rms: float | None = None) -> TensorStats:
    """Statistics as capture reports them: NaN reaches min/max, Inf reaches max (or min)."""
    lo = -absmax if lo is None else lo
    hi = absmax if hi is None else hi
    l2 = (absmax / 2 if rms is None else rms) * math.sqrt(numel)
    if nan:
        lo = hi = NAN
    am = NAN if nan else max(abs(lo), abs(hi))
    return TensorStats(lo, hi, 0.0, l2, am, nan, inf, zeros, numel)


class Builder:
    """A graph and its statistics, built one operator at a time."""

    def __init__(self, dtype: str = "float16") -> None:
        self.g = OpGraph()
        self.s = StatsTable()
        self.dtype = dtype
        self.n = 0

    def place(self, nid: str, st: TensorStats | None, kind: str = "input", dtype: str | None = None) -> str:
        module = nid.split(":", 1)[1].rsplit(".", 1)[0] if kind in ("param", "buffer") else ""
        self.g.add_node(OpNode(nid, kind, module, -1, kind=kind,  # type: ignore[arg-type]
                               outputs=(TensorMeta((8, 8), dtype or self.dtype),)))
        if st is not None:
            self.s.add(nid, 0, st)
        return nid

    def op(self, nid: str, op: str, ins: list[str], st: TensorStats | None, *, dtype: str | None = None,
           phase: str = "forward", forward: str | None = None) -> str:
        module = nid.rsplit("/", 1)[0] if "/" in nid else ""
        if phase != "forward":
            module = module.split(":", 1)[-1]
        self.g.add_node(OpNode(nid, f"aten.{op}", module, self.n, outputs=(TensorMeta((8, 8), dtype or self.dtype),),
                               phase=phase, attrs={"forward": forward} if forward else None))
        self.n += 1
        for slot, src in enumerate(ins):
            self.g.add_edge(src, nid, 0, slot)
        if st is not None:
            self.s.add(nid, 0, st)
        return nid

    def run(self, **kwargs: object) -> list:
        kwargs.setdefault("dtype", self.dtype)
        return analyze(self.g, self.s, **kwargs)  # type: ignore[arg-type]


def errors(findings: list) -> list:
    return [f for f in findings if f.severity == "error"]


def seed_case() -> Builder:
    """Raw input (max 800) -> proj (x3.9) -> gain (x15) -> head matmul overflows -> relu -> sub turns Inf into NaN."""
    b = Builder()
    b.place("input:0", stats(800, rms=450))
    b.place("param:proj.weight", stats(0.3), "param")
    b.op("proj/mm.0", "mm", ["input:0", "param:proj.weight"], stats(3100))
    b.op("gain/mul.0", "mul", ["proj/mm.0"], stats(46000))
    b.place("param:head.weight", stats(0.5), "param")
    b.op("head/mm.0", "mm", ["gain/mul.0", "param:head.weight"], stats(0, hi=INF, inf=3))
    b.op("relu.0", "relu", ["head/mm.0"], stats(0, hi=INF, inf=3))
    b.op("sub.0", "sub", ["relu.0", "relu.0"], stats(0, nan=5))
    return b


def test_seed_case_names_the_origin_and_walks_the_chain_to_the_raw_input() -> None:
    findings = seed_case().run()
    (err,) = errors(findings)
    assert (err.node, err.kind, err.attribution) == ("head/mm.0", "inf", "introduced")
    assert err.message.startswith("Inf first appears at `head/mm.0` (inputs max 4.6e4, float16 max 6.55e4)")
    assert "x15 at `gain/mul.0`" in err.message and "x3.9 at `proj/mm.0`" in err.message
    assert "from an input with max 800" in err.message
    rc = err.root_cause
    assert rc is not None and rc.node == "input:0" and "un-normalized" in rc.reason
    assert [c.node for c in rc.chain] == ["head/mm.0", "gain/mul.0", "proj/mm.0", "input:0"]
    assert [c.value for c in rc.chain[1:]] == [46000, 3100, 800]
    assert err.hint is not None and "normalize `input:0`" in err.hint and "float32" in err.hint
    # victims are not origins: they point back at the origin
    victims = {f.node: f for f in findings if f.attribution == "inherited"}
    assert set(victims) == {"relu.0", "sub.0"}
    assert all(f.severity == "info" and f.root_cause.node == "head/mm.0" for f in victims.values())
    assert "Inf turned into NaN" in victims["sub.0"].message and victims["sub.0"].kind == "nan"
    # the near-limit value that feeds the overflow is part of the story, not a separate warning
    assert not [f for f in findings if f.severity == "warning"]


def test_largest_growth_is_the_root_cause_when_the_input_is_normalized() -> None:
    b = Builder()
    b.place("input:0", stats(3.0, rms=1.0))
    b.op("enc/addmm.0", "addmm", ["input:0"], stats(6.0))
    b.op("scale/mul.0", "mul", ["enc/addmm.0"], stats(30000.0))
    b.op("out/addmm.0", "addmm", ["scale/mul.0"], stats(0, hi=INF, inf=1))
    (err,) = errors(b.run())
    assert err.root_cause.node == "scale/mul.0"
    assert "amplifies values x5e3" in err.root_cause.reason
    assert "normalize" not in (err.hint or "")


def test_cancellation_nan_is_inherited_from_the_square_that_overflowed() -> None:
    """Variance by hand, E[x^2] - E[x]^2, in float16: x^2 overflows and Inf - Inf gives NaN."""
    b = Builder()
    b.place("input:0", stats(300, rms=200))
    b.op("norm/pow.0", "pow", ["input:0"], stats(0, hi=INF, lo=0, inf=10))
    b.op("norm/mean.0", "mean", ["norm/pow.0"], stats(0, hi=INF, lo=0, inf=1))
    b.op("norm/mean.1", "mean", ["input:0"], stats(250))
    b.op("norm/mul.0", "mul", ["norm/mean.1", "norm/mean.1"], stats(62500))
    b.op("norm/sub.0", "sub", ["norm/mean.0", "norm/mul.0"], stats(0, nan=1))
    findings = b.run()
    (err,) = errors(findings)
    assert err.node == "norm/pow.0"
    sub = next(f for f in findings if f.node == "norm/sub.0")
    assert sub.attribution == "inherited" and sub.root_cause.node == "norm/pow.0"
    assert not [f for f in findings if f.node == "norm/sub.0" and f.severity == "error"]


def test_exp_overflow_blames_the_exp_and_hints_max_subtraction() -> None:
    b = Builder("float32")
    b.place("input:0", stats(2.6, rms=1.0), dtype="float32")
    b.op("fc/addmm.0", "addmm", ["input:0"], stats(1.7), dtype="float32")
    b.op("mul.0", "mul", ["fc/addmm.0"], stats(170.0), dtype="float32")
    b.op("exp.0", "exp", ["mul.0"], stats(0, lo=0, hi=INF, inf=5), dtype="float32")
    b.op("fc2/addmm.0", "addmm", ["exp.0"], stats(0, nan=4), dtype="float32")
    (err,) = errors(b.run(dtype="float32"))
    assert err.node == "exp.0"
    assert err.root_cause.node == "exp.0" and "exp of values up to 170" in err.root_cause.reason
    assert "subtract the max" in err.hint and "88.7" in err.hint
    assert "accumulat" not in err.hint and "normalize" not in err.hint
    assert "subtract the max before exp" in err.message


def test_hints_need_evidence() -> None:
    # a float32 matmul that overflows is not a float16 accumulation problem
    b = Builder("float32")
    b.place("input:0", stats(1e30, rms=1.0), dtype="float32")
    b.op("mm.0", "mm", ["input:0", "input:0"], stats(0, hi=INF, inf=1), dtype="float32")
    (err,) = errors(b.run(dtype="float32"))
    assert err.hint is None
    # a division whose divisor has zeros gets the epsilon hint; one without any evidence gets none
    for zeros, expect in ((3, True), (0, False)):
        b = Builder()
        b.place("input:0", stats(1.0, rms=0.5))
        b.op("var.0", "var", ["input:0"], stats(0.5, lo=0.0, zeros=zeros))
        b.op("div.0", "div", ["input:0", "var.0"], stats(0, hi=INF, inf=zeros or 1))
        (err,) = errors(b.run())
        assert (err.hint is not None and "epsilon" in err.hint) is expect
        assert (err.root_cause.node == "div.0" and "3 zeros" in err.root_cause.reason) is expect
    # a near-zero divisor measured on the device (smallest |d| 1e-9 for values up to 1) is evidence too
    b = Builder()
    b.place("input:0", stats(1.0, rms=0.5))
    b.op("std.0", "std", ["input:0"], stats(0.5))
    b.op("div.0", "div", ["input:0", "std.0"], stats(0, hi=INF, inf=1))
    (err,) = errors(b.run(evidence={("std.0", 0): RangeEvidence("float16", 0, 64, 1e-9)}))
    assert "values as small as 1e-9" in err.hint


def test_fp16_accumulation_hint_follows_the_float32_result() -> None:
    def case(ref_out: float) -> str:
        b = Builder()
        b.place("input:0", stats(2.0, rms=1.0))
        b.place("param:fc.weight", stats(1.0), "param")
        b.op("fc/mm.0", "mm", ["input:0", "param:fc.weight"], stats(0, hi=INF, inf=1))
        ref = StatsTable()
        for nid, v in (("input:0", 2.0), ("param:fc.weight", 1.0), ("fc/mm.0", ref_out)):
            ref.add(nid, 0, stats(v))
        (err,) = errors(b.run(reference=ref))
        return err.hint or ""

    assert "ASCEND_OP_SELECT_IMPL_MODE=high_precision" in case(40000.0)  # the sum fits: accumulate in float32
    assert "does not fit float16" in case(90000.0) and "exclude it from autocast" in case(90000.0)


def test_saturation_mode_flags_values_clamped_to_the_max() -> None:
    b = Builder()
    b.place("input:0", stats(4.0, rms=1.0))
    b.op("fc/addmm.0", "addmm", ["input:0"], stats(900.0))
    b.op("head/addmm.0", "addmm", ["fc/addmm.0"], stats(65504.0))  # clamped, not Inf
    b.op("relu.0", "relu", ["head/addmm.0"], stats(65504.0))  # carries the clamped value
    b.place("buffer:mask", stats(65504.0, hi=0.0), "buffer")
    b.op("masked_fill.0", "masked_fill", ["relu.0"], stats(65504.0))
    (err,) = errors(b.run(inf_nan_mode=False))
    assert (err.node, err.kind) == ("head/addmm.0", "saturation") and "saturates at ±6.55e4" in err.message
    assert not errors(b.run(inf_nan_mode=True)), "in INF_NAN mode an exact max is a deliberate constant"
    flagged = errors(b.run(inf_nan_mode=False, overflow_flags={"fc/addmm.0": True}))
    assert [f.node for f in flagged] == ["fc/addmm.0"] and "overflow flag" in flagged[0].message


def test_range_risk_predicted_from_a_float32_run() -> None:
    b = Builder("float32")
    b.place("input:0", stats(3.0, rms=1.0), dtype="float32")
    b.op("a/addmm.0", "addmm", ["input:0"], stats(40000.0), dtype="float32")  # 0.71 bits of headroom
    b.op("b/relu.0", "relu", ["a/addmm.0"], stats(40000.0), dtype="float32")
    b.op("c/addmm.0", "addmm", ["input:0"], stats(91234.0), dtype="float32")
    b.op("d/gelu.0", "gelu", ["c/addmm.0"], stats(91234.0), dtype="float32")
    b.op("mask/full.0", "full", [], stats(3.4028234663852886e38), dtype="float32")  # finfo.min mask
    findings = b.run(dtype="float16")
    (err,) = errors(findings)
    assert (err.node, err.kind) == ("c/addmm.0", "overflow") and "beyond the float16 max" in err.message
    assert err.metrics["headroom_bits"] == pytest.approx(math.log2(65504 / 91234))
    assert [f.node for f in findings if f.attribution == "inherited"] == ["d/gelu.0"]
    (warn,) = [f for f in findings if f.severity == "warning"]
    assert warn.node == "a/addmm.0" and warn.metrics["headroom_bits"] == pytest.approx(0.7115, abs=1e-3)
    assert not [f for f in b.run(dtype="float16", headroom_bits=0.5) if f.severity == "warning"]
    assert not errors(b.run(dtype="bfloat16")) and not errors(b.run(dtype="float32"))


def test_ops_kept_in_float32_inside_a_float16_run_are_checked_against_float32() -> None:
    b = Builder()
    b.place("input:0", stats(3.0, rms=1.0))
    b.op("to.0", "_to_copy", ["input:0"], stats(3.0), dtype="float32")
    b.op("softmax/exp.0", "exp", ["to.0"], stats(150000.0), dtype="float32")
    assert not [f for f in b.run() if f.severity != "info"]


def test_underflow_from_measured_counts_zero_counts_and_abs_max() -> None:
    b = Builder()
    b.place("input:0", stats(1.0, rms=0.5))
    b.op("a/mul.0", "mul", ["input:0"], stats(1e-3))
    b.op("b/mul.0", "mul", ["a/mul.0"], stats(1e-3))  # carries the same tiny values: not reported again
    ev = {(n, 0): RangeEvidence("float16", 40, 64, 1e-9) for n in ("a/mul.0", "b/mul.0")}
    (w,) = [f for f in b.run(evidence=ev) if f.kind == "underflow"]
    assert w.node == "a/mul.0" and w.severity == "warning" and w.metrics["fraction"] == pytest.approx(40 / 64)
    assert "62% of the non-zero values" in w.message and w.hint is None
    assert not [f for f in b.run(evidence=ev, underflow_fraction=0.7) if f.kind == "underflow"]
    # zeros the float16 run has and the float32 reference does not
    b = Builder()
    b.place("input:0", stats(1.0, rms=0.5))
    b.op("a/mul.0", "mul", ["input:0"], stats(1e-3, zeros=32))
    ref = StatsTable()
    ref.add("input:0", 0, stats(1.0))
    ref.add("a/mul.0", 0, stats(1e-3, zeros=0))
    (w,) = [f for f in b.run(reference=ref) if f.kind == "underflow"]
    assert w.metrics["source"] == "zeros" and w.metrics["fraction"] == 0.5
    # a float32 tensor entirely below float16's smallest subnormal
    b = Builder("float32")
    b.place("input:0", stats(1.0, rms=0.5), dtype="float32")
    b.op("tiny/mul.0", "mul", ["input:0"], stats(1e-9), dtype="float32")
    (w,) = [f for f in b.run(dtype="float16") if f.kind == "underflow"]
    assert w.metrics["fraction"] == 1.0 and "flushes to zero" in w.message


def test_backward_underflow_hints_loss_scaling_and_names_the_forward_op() -> None:
    b = Builder()
    b.place("input:0", stats(1.0, rms=0.5))
    b.op("fc/addmm.0", "addmm", ["input:0"], stats(2.0))
    b.op("backward:fc/mm.0", "mm", ["fc/addmm.0"], stats(1e-6), phase="backward", forward="fc/addmm.0")
    ev = {("backward:fc/mm.0", 0): RangeEvidence("float16", 60, 64, 1e-10)}
    (w,) = [f for f in b.run(evidence=ev, phase="backward")]
    assert "the gradient of `fc/addmm.0`" in w.message and "GradScaler" in w.hint


def test_backward_nan_is_inherited_from_a_forward_origin_and_phase_filters() -> None:
    b = seed_case()
    b.op("backward:head/mm.1", "mm", ["sub.0"], stats(0, nan=3), phase="backward", forward="head/mm.0")
    only_bwd = b.run(phase="backward")
    assert [f.node for f in only_bwd] == ["backward:head/mm.1"]
    assert only_bwd[0].attribution == "inherited" and only_bwd[0].root_cause.node == "head/mm.0"
    assert "in the gradient of `head/mm.0`" in only_bwd[0].message
    # dumps name gradient ops after their forward op (`backward:relu.0`) without saying so
    b.op("backward:relu.0", "relu", ["backward:head/mm.1"], stats(0, nan=3), phase="backward")
    (named,) = [f for f in b.run(phase="backward") if f.node == "backward:relu.0"]
    assert "NaN in the gradient of `relu.0` at `backward:relu.0`" in named.message


def test_mask_infinities_absorbed_by_softmax_are_not_errors() -> None:
    b = Builder()
    b.place("input:0", stats(3.0, rms=1.0))
    b.op("attn/bmm.0", "bmm", ["input:0", "input:0"], stats(9.0))
    b.op("attn/masked_fill.0", "masked_fill", ["attn/bmm.0"], stats(0, lo=-INF, hi=9.0, inf=20))
    b.op("attn/_softmax.0", "_softmax", ["attn/masked_fill.0"], stats(1.0, lo=0.0))
    b.op("attn/bmm.1", "bmm", ["attn/_softmax.0", "input:0"], stats(3.0))
    (f,) = [f for f in b.run() if f.check == "overflow"]
    assert (f.severity, f.kind, f.node, f.hint) == ("info", "mask", "attn/masked_fill.0", None)
    assert f.message.startswith("`attn/masked_fill.0` holds -Inf: an intended mask (a constant set by masked_fill)")
    # the mask added to data stays a mask, even where it reaches the outputs: never an origin error
    b.op("out/add.0", "add", ["attn/masked_fill.0", "attn/bmm.1"], stats(0, lo=-INF, hi=9, inf=20))
    assert errors(b.run()) == []


def masked_attention(scale: float) -> Builder:
    """A padded attention: mask = where(pad, 0, finfo.min) built first, scores = (q * scale) @ k, scores + mask."""
    b = Builder()
    fmin = -65504.0
    b.place("input:0", stats(3.0, rms=1.0))
    b.place("input:pad", stats(1.0, lo=0.0), dtype="bool")
    b.op("scalar_tensor.0", "scalar_tensor", [], stats(65504.0, lo=fmin, hi=fmin))
    b.op("where.0", "where", ["input:pad", "scalar_tensor.0"], stats(65504.0, lo=fmin, hi=0.0))
    b.op("attn/q/linear.0", "linear", ["input:0"], stats(4.0))
    b.op("attn/mul.0", "mul", ["attn/q/linear.0"], stats(4.0 * scale) if 4 * scale < 65504 else
         stats(0, hi=INF, inf=9))
    b.op("attn/k/linear.0", "linear", ["input:0"], stats(4.0))
    b.op("attn/matmul.0", "matmul", ["attn/mul.0", "attn/k/linear.0"], stats(0, lo=-INF, hi=INF, inf=30)
         if 4 * scale >= 65504 else stats(16 * scale))
    b.op("attn/add.0", "add", ["attn/matmul.0", "where.0"], stats(0, lo=-INF, hi=INF, inf=40) if 4 * scale >= 65504
         else stats(65504.0, lo=-INF, hi=16 * scale, inf=12))
    b.op("attn/softmax.0", "_softmax", ["attn/add.0"], stats(0, nan=30) if 4 * scale >= 65504 else stats(1.0, lo=0))
    b.op("out/linear.0", "linear", ["attn/softmax.0"], stats(0, nan=30) if 4 * scale >= 65504 else stats(2.0))
    # the reference (float32) holds the mask at float32's min and the real magnitudes
    b.s_ref = StatsTable()
    for nid in b.g.execution_order() + ["input:0", "input:pad"]:
        st = b.s.get(nid)
        if nid in ("scalar_tensor.0", "where.0"):
            st = stats(3.4028234663852886e38, lo=-3.4028234663852886e38, hi=0.0)
        elif nid == "attn/mul.0":
            st = stats(4.0 * scale)
        elif nid == "attn/matmul.0":
            st = stats(16.0 * scale)
        elif nid == "attn/add.0":
            st = stats(3.4028234663852886e38, lo=-3.4028234663852886e38, hi=16 * scale)
        elif nid in ("attn/softmax.0",):
            st = stats(1.0, lo=0.0)
        elif nid == "out/linear.0":
            st = stats(2.0)
        if st is not None:
            b.s_ref.add(nid, 0, st)
    return b


def test_a_padded_mask_is_never_the_origin_nor_a_hop_of_the_chain() -> None:
    clean = masked_attention(1.0)
    assert errors(clean.run(reference=clean.s_ref)) == []
    assert [f.kind for f in clean.run(reference=clean.s_ref) if f.severity == "warning"] == []
    bad = masked_attention(1e5)
    found = bad.run(reference=bad.s_ref)
    first = errors(found)[0]
    assert first.node == "attn/mul.0", "the scaled query overflowed, not the mask"
    chain = [link.node for link in first.root_cause.chain]
    assert "where.0" not in chain and "scalar_tensor.0" not in chain
    assert all(f.node not in ("where.0", "scalar_tensor.0", "attn/add.0") for f in errors(found))
    assert "meets the mask from `scalar_tensor.0` at `attn/add.0`" in first.message
    masks = [f for f in found if f.kind == "mask"]
    assert [f.node for f in masks] == ["scalar_tensor.0"] and masks[0].severity == "info"


def test_dumps_without_counts_or_edges() -> None:
    """msprobe statistics carry only Max/Min/Mean/Norm, and a dump may have no data-flow edges."""
    b = Builder("float32")
    b.op("Functional.linear.0.forward", "linear", [], TensorStats(-1.1, 1.7, 0.2, 3.7, 1.7, 0, 0, 0, 32),
         dtype="float32")
    b.op("Torch.exp.0.forward", "exp", [], TensorStats(0.0, INF, INF, INF, INF, 0, 0, 0, 32), dtype="float32")
    b.op("Functional.linear.1.forward", "linear", [], TensorStats(NAN, NAN, NAN, NAN, NAN, 0, 0, 0, 4), dtype="float32")
    findings = b.run(dtype="float32")
    assert [f.node for f in errors(findings)] == ["Torch.exp.0.forward"]
    (victim,) = [f for f in findings if f.attribution == "inherited"]
    assert victim.node == "Functional.linear.1.forward" and victim.kind == "nan"


def test_input_that_already_holds_nan_is_the_origin() -> None:
    b = Builder()
    b.place("input:0", stats(0, nan=2))
    b.op("fc/addmm.0", "addmm", ["input:0"], stats(0, nan=8))
    (err,) = errors(b.run())
    assert err.node == "input:0" and "already holds NaN before any op runs" in err.message


def test_independent_origins_are_each_errors() -> None:
    b = seed_case()
    b.place("input:1", stats(2.0, rms=1.0))
    b.op("other/exp.0", "exp", ["input:1"], stats(0, lo=0, hi=INF, inf=1))
    b.op("other/add.0", "add", ["other/exp.0", "sub.0"], stats(0, nan=1))
    errs = errors(b.run())
    assert [f.node for f in errs] == ["head/mm.0", "other/exp.0"]
    assert "also appears, independently," in errs[1].message


def test_step_through_from_the_first_finding_to_the_cause() -> None:
    b = seed_case()
    inv = Investigation(b.g, stats=b.s, findings=b.run())
    first = inv.first_finding("overflow")
    assert first is not None and first.node == "head/mm.0"
    assert inv.trace_root_cause("sub.0").node == "head/mm.0"  # from a victim to the origin
    assert inv.trace_root_cause("head/mm.0").node == "input:0"  # from the origin to the cause
    assert inv.step_into_producer(0, "head/mm.0") == "gain/mul.0"
    assert inv.next("head/mm.0") == "relu.0" and inv.previous("head/mm.0") == "gain/mul.0"
    assert inv.next_finding("head/mm.0").node == "relu.0"


REPORT_FINDING_KEYS = {"check", "kind", "severity", "node", "op_type", "module", "index", "message", "attribution",
                       "metrics", "root_cause"}


def test_report_findings_follow_the_report_schema() -> None:
    b = seed_case()
    b.op("tail/mul.0", "mul", ["input:0"], stats(45000.0))  # a warning without root cause hint
    inv = Investigation(b.g, stats=b.s, findings=b.run())
    report = json.loads(json.dumps(build_report(inv), allow_nan=False))
    assert report["schema"] == "ascend-tui.report/1"
    assert {f["severity"] for f in report["findings"]} == {"error", "warning", "info"}
    for f in report["findings"]:
        assert REPORT_FINDING_KEYS <= set(f) and set(f) - REPORT_FINDING_KEYS <= {"hint", "id"}
        assert f["check"] == "overflow" and f["kind"] in ("inf", "nan", "saturation", "overflow", "underflow")
        assert f["severity"] in ("error", "warning", "info") and f["attribution"] in ("introduced", "inherited", None)
        assert isinstance(f["index"], int) and isinstance(f["message"], str) and isinstance(f["metrics"], dict)
        assert f["node"] in b.g and f["op_type"] == b.g.node(f["node"]).op_type
        rc = f["root_cause"]
        if rc is not None:
            assert set(rc) == {"node", "module", "reason", "chain"}
            for link in rc["chain"]:
                assert set(link) == {"node", "module", "op_type", "value"}
                assert isinstance(link["value"], float) or link["value"] in ("Infinity", "-Infinity", "NaN")
    err = next(f for f in report["findings"] if f["severity"] == "error")
    assert err["root_cause"]["chain"][0] == {"node": "head/mm.0", "module": "head", "op_type": "aten.mm",
                                             "value": "Infinity"}
    assert report["summary"] == {"errors": 1, "warnings": 1}


def test_names_and_numbers() -> None:
    assert [op_name(t) for t in ("aten.exp", "Torch.exp.0.forward", "Tensor.__truediv__", "aten.exp_")] == \
        ["exp", "exp", "truediv", "exp"]
    assert range_of("torch.float16").max == 65504 and range_of("DT_BF16").name == "bfloat16"
    assert range_of("int64") is None
    assert [num(x) for x in (46000, 800, 3.9, 6e-8, INF)] == ["4.6e4", "800", "3.9", "6e-8", "Inf"]
    with pytest.raises(ValueError):
        analyze(OpGraph(), StatsTable(), dtype="int8")


def test_the_check_imports_neither_torch_nor_textual() -> None:
    code = ("import sys, ascend_tui.checks.overflow as o; "
            "print(any(m in sys.modules for m in ('torch', 'textual')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_metrics_mean_one_thing_and_reasons_stay_whole() -> None:
    # a float32 run checked as float16: the near-limit warning keeps the run's own abs max apart from the reference's
    b = Builder("float32")
    b.place("input:0", stats(1.0, rms=0.5), dtype="float32")
    b.op("mul.0", "mul", ["input:0"], stats(40000.0), dtype="float32")
    ref = StatsTable()
    ref.add("input:0", 0, stats(1.0, rms=0.5))
    ref.add("mul.0", 0, stats(50000.0))
    (warn,) = [f for f in b.run(dtype="float16", reference=ref) if f.severity == "warning"]
    assert warn.metrics["abs_max"] == 40000.0 and warn.metrics["reference_abs_max"] == 50000.0
    # a divisor whose id holds a ':' (a gradient op) survives whole in the reason
    b = Builder()
    b.place("input:0", stats(1.0, rms=0.5))
    b.op("backward:var.0", "var", ["input:0"], stats(0.5, lo=0.0, zeros=3), phase="backward")
    b.op("backward:div.0", "div", ["input:0", "backward:var.0"], stats(0, hi=INF, inf=3), phase="backward")
    (err,) = errors(b.run())
    assert err.root_cause.reason == "the divisor `backward:var.0` has 3 zeros"
    assert json.loads(json.dumps(err.to_json()))["root_cause"]["reason"] == err.root_cause.reason


def test_an_infinite_float32_reference_over_a_finite_target_does_not_crash() -> None:
    b = Builder("float32")
    b.place("input:0", stats(1.0, rms=0.5), dtype="float32")
    b.op("mul.0", "mul", ["input:0"], stats(3.0), dtype="float32")
    ref = StatsTable()
    ref.add("mul.0", 0, stats(0, hi=INF, inf=1))
    found = b.run(dtype="float16", reference=ref)
    assert [f.node for f in errors(found)] == ["mul.0"]


def test_saturation_that_changes_no_output_is_a_warning_with_the_evidence() -> None:
    from ascend_tui.checks.effect import OutputEffect

    b = Builder()
    b.place("input:0", stats(1.0, rms=0.5))
    b.op("mul.0", "mul", ["input:0"], stats(65504.0))
    b.op("clamp.0", "clamp", ["mul.0"], stats(3.0))
    ref = StatsTable()
    for nid, st in (("input:0", stats(1.0, rms=0.5)), ("mul.0", stats(9e4)), ("clamp.0", stats(3.0))):
        ref.add(nid, 0, st)
    fine = OutputEffect("float16", "output 0", 1.0, 0.001, 0, 8, 0, 1)
    (warn,) = [f for f in b.run(inf_nan_mode=False, reference=ref, effect=fine) if f.kind == "saturation"]
    assert warn.severity == "warning" and "harmless as measured" in warn.message
    broken = OutputEffect("float16", "output 0", 0.5, 0.7, 0, 8, 0, 1)
    (err,) = [f for f in b.run(inf_nan_mode=False, reference=ref, effect=broken) if f.kind == "saturation"]
    assert err.severity == "error"
