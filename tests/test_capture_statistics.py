"""Every statistics route (host batch, chunked CPU pass, on-device rows) gives the same exact answers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import torch  # in the test command (.[live,test]): a missing torch fails, never skips

from ascend_tui.live.statistics import (  # noqa: E402
    CHUNK,
    SMALL,
    HostBatch,
    cpu_stats_chunked,
    histogram_row,
    raw_histogram,
    raw_view,
    tensor_stats_row,
)


def reference(t: torch.Tensor) -> tuple[float, float, float, float, int, int, int]:
    """min, max, sum, norm, nan, inf, zeros of `t`'s float32 values, the obvious way."""
    x = t.detach().float().reshape(-1).double()
    has_nan = bool(torch.isnan(x).any())
    mn = float("nan") if has_nan else float(x.min())
    mx = float("nan") if has_nan else float(x.max())
    return (mn, mx, float(x.sum()), float(x.square().sum().sqrt()), int(torch.isnan(x).sum()),
            int(torch.isinf(x).sum()), int((x == 0).sum()))


def patterned(n: int, kind: str, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=g)
    if kind == "relu":
        x = x.relu()
    elif kind == "negative":
        x = -x.abs()
        x[:: 7] = 0.0
    elif kind == "mixed":
        x[:: 11] = 0.0
        x[1] = -0.0
    elif kind == "nonfinite":
        x[3] = float("nan")
        x[-2] = float("inf")
        x[:: 13] = 0.0
    if dtype == torch.bool:
        return x > 0
    if not dtype.is_floating_point:
        return (x * 10).to(dtype)
    return x.to(dtype)


def assert_row(got: np.ndarray, t: torch.Tensor) -> None:
    want = reference(t)
    np.testing.assert_array_equal(got[[0, 1, 4, 5, 6]], np.array(want, dtype=np.float64)[[0, 1, 4, 5, 6]])
    assert got[2] == pytest.approx(want[2], rel=1e-5, abs=1e-3, nan_ok=True)
    assert got[3] == pytest.approx(want[3], rel=1e-5, nan_ok=True)


SIZES = [5, 3000, SMALL, SMALL + 1, 2 * CHUNK + 17]
KINDS = ["relu", "negative", "mixed", "nonfinite"]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", KINDS)
def test_float32_routes_are_exact(n: int, kind: str) -> None:
    t = patterned(n, kind, torch.float32)
    if n <= SMALL:
        batch = HostBatch(torch)
        slot = batch.add(t, True)
        values, hists = batch.finish()
        assert_row(values[slot], t)
        np.testing.assert_array_equal(hists[slot], histogram_row(torch, t))
    else:
        assert_row(cpu_stats_chunked(torch, t), t)
        np.testing.assert_array_equal(raw_histogram(raw_view(t)), histogram_row(torch, t))
    values, counts = tensor_stats_row(torch, t)  # the accelerator route, run on the CPU
    assert_row(np.concatenate([values.double().numpy(), counts.double().numpy()]), t)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32,
                                   torch.uint8, torch.bool])
@pytest.mark.parametrize("n", [7, 5000, CHUNK + 3])
def test_other_dtypes_are_measured_in_float32_like_every_route(dtype: torch.dtype, n: int) -> None:
    t = patterned(n, "mixed" if dtype != torch.uint8 else "relu", dtype)
    if n <= SMALL:
        batch = HostBatch(torch)
        slot = batch.add(t, t.is_floating_point())
        values, hists = batch.finish()
        assert_row(values[slot], t)
        if t.is_floating_point():
            np.testing.assert_array_equal(hists[slot], histogram_row(torch, t))
    else:
        assert_row(cpu_stats_chunked(torch, t), t)


def test_reading_a_tensor_in_place_leaves_it_resizable_and_a_negated_one_is_not_read_raw() -> None:
    t = patterned(3 * SMALL, "mixed", torch.float32)
    assert_row(cpu_stats_chunked(torch, t), t)
    t.resize_(4 * CHUNK)  # .numpy() would have made the storage refuse this
    assert raw_view(torch._neg_view(t)) is None


def test_values_past_float32_squares_keep_a_finite_norm_and_sum() -> None:
    t = torch.full((SMALL + 5,), 3e37)
    t[::2] = -3e37
    t[-1] = 2e38
    assert_row(cpu_stats_chunked(torch, t), t)
    x = t.double()
    assert cpu_stats_chunked(torch, t)[3] == pytest.approx(float(x.square().sum().sqrt()), rel=1e-6)


@pytest.mark.parametrize("scale", [4e17, 6e17, 1e19, 3e36])
@pytest.mark.parametrize("n", [SMALL + 1, 2 * CHUNK + 17])
def test_values_either_side_of_the_overflow_guard_are_exact_and_warn_nothing(scale: float, n: int) -> None:
    t = patterned(n, "mixed", torch.float32) * scale
    t[::3] = scale  # columns of same-signed huge values: their float32 partial sums overflow past the guard
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "overflow encountered" would be one
        row = cpu_stats_chunked(torch, t)
    assert_row(row, t)
    x = t.double()
    assert row[2] == pytest.approx(float(x.sum()), rel=1e-5, abs=scale * 1e-3)
    assert row[3] == pytest.approx(float(x.square().sum().sqrt()), rel=1e-5)


def test_many_tensors_in_one_batch_keep_their_own_rows() -> None:
    batch = HostBatch(torch)
    tensors = [patterned(n, kind, torch.float32) for n in (5, 64, 4095, 4096, 4097, 8000) for kind in KINDS]
    slots = [batch.add(t, True) for t in tensors]
    values, hists = batch.finish()
    for slot, t in zip(slots, tensors):
        assert_row(values[slot], t)
        np.testing.assert_array_equal(hists[slot], histogram_row(torch, t))


def test_a_full_batch_is_reduced_and_reused_without_losing_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    import ascend_tui.live.statistics as statistics

    monkeypatch.setattr(statistics, "BATCH_BYTES", 64 * 1024)  # a few tensors per batch
    batch = HostBatch(torch)
    tensors = [patterned(5000, KINDS[i % 4], torch.float32) for i in range(12)]
    slots = [batch.add(t, True) for t in tensors]
    values, hists = batch.finish()
    for slot, t in zip(slots, tensors):
        assert_row(values[slot], t)
        np.testing.assert_array_equal(hists[slot], histogram_row(torch, t))


def test_a_negated_view_is_measured_by_its_values_not_its_memory() -> None:
    from ascend_tui.live.recording import capture

    class Neg(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch._neg_view(x * 1)

    r = capture(Neg(), (torch.tensor([1.0, 2.0, 3.0]),))
    node = next(n.id for n in r.graph if n.op_type == "aten._neg_view")
    assert (r.stats.get(node).min, r.stats.get(node).max) == (-3.0, -1.0)


def test_underflow_evidence_is_the_same_from_the_host_batch_and_from_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    import ascend_tui.live.overflow as overflow_live
    from ascend_tui.live.overflow import EvidenceObserver
    from ascend_tui.live.recording import capture

    class Tiny(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x * 1e-6  # many values below float16's smallest subnormal (~6e-8) once scaled
            z = y.view(-1).reshape(x.shape)
            return torch.cat([z, torch.zeros(2, x.shape[1]), x.double() * 1e-30], 0)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 50, generator=g)
    x[0, 0] = float("nan")

    def evidence() -> dict:
        observer = EvidenceObserver(flush_below=2.0**-24, dtype="float16")
        capture(Tiny(), (x,), observers=[observer])
        return observer.result()

    batched = evidence()
    monkeypatch.setattr(overflow_live, "SMALL", 0)  # every tensor through the torch route
    direct = evidence()
    assert batched.keys() == direct.keys() and len(batched) >= 5
    for key in direct:
        a, b = batched[key], direct[key]
        assert (a.flushed, a.nonzero) == (b.flushed, b.nonzero), key
        assert a.min_abs == pytest.approx(b.min_abs, nan_ok=True), key
    assert any(e.flushed > 0 for e in direct.values())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_host_batch_flush_count_is_what_the_cast_really_flushes(dtype: str) -> None:
    """Subnormals and ties included: numpy's count equals `x.to(dtype) == 0` on log-uniform magnitudes."""
    from ascend_tui.live.statistics import flushed_by_cast

    g = torch.Generator().manual_seed(1)
    low = -50.0 if dtype == "bfloat16" else -20.0
    x = torch.exp(torch.empty(20000).uniform_(low * 6.0, -12.0, generator=g))
    x[:4] = torch.tensor([2.0**-25, 2.0**-25 * 1.0000001, 2.0**-134, 2.0**-133])  # float16 and bfloat16 ties
    expect = (x.to(getattr(torch, dtype)) == 0)
    got = flushed_by_cast(x.numpy(), dtype, 0.0)
    assert got.sum() == int(expect.sum()) and (got == expect.numpy()).all()


def test_an_expand_takes_its_inputs_row_k_times_over_and_a_view_of_it_the_same() -> None:
    """`expand` repeats each input value k times: its row is derived (sums, counts, numel k times, norm sqrt(k)
    times), equal to torch's float64 statistics of the expanded tensor; a view of it takes that row."""
    import math

    import torch

    from ascend_tui.live.recording import capture

    class Net(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x * 2  # measured: zeros, a NaN and an Inf among ordinary values
            z = y.expand(3, *y.shape)  # each value 3 times
            return z.reshape(3, -1).t()  # a view of the repeat

    x = torch.randn(4, 5)
    x[0, 0], x[1, 1], x[2, 2] = 0.0, math.nan, math.inf
    result = capture(Net(), (x,))
    node = {n.op_type: n.id for n in result.graph.nodes}
    expanded = (x * 2).expand(3, 4, 5).double()
    for op in ("aten.expand", "aten.t"):
        got = result.stats.get(node[op], 0)
        assert got is not None, op
        assert got.numel == 60 and got.zero_count == 3 and got.nan_count == 3 and got.inf_count == 3
        assert math.isnan(got.mean) or math.isinf(got.mean)
        assert got.l2norm != got.l2norm or math.isinf(got.l2norm)  # NaN/Inf reach the norm as torch's do
    clean = torch.randn(4, 5)
    result = capture(Net(), (clean,))
    node = {n.op_type: n.id for n in result.graph.nodes}
    want = (clean * 2).expand(3, 4, 5).double()
    for op in ("aten.expand", "aten.t"):
        got = result.stats.get(node[op], 0)
        assert got.numel == 60 and got.min == float(want.min()) and got.max == float(want.max())
        assert got.mean == pytest.approx(float(want.mean()), rel=1e-6, abs=1e-9)
        assert got.l2norm == pytest.approx(float(torch.linalg.vector_norm(want)), rel=1e-6)
    assert result.histograms.get(node["aten.expand"], 0) is None  # a repeat is not contiguous: no sample, as before


def test_an_expand_of_a_tensor_without_a_row_here_is_measured_itself() -> None:
    import torch

    from ascend_tui.live.capture import Recorder
    from ascend_tui.live.recording import recording

    rec = Recorder(torch.nn.Identity(), ())
    base = torch.randn(5)
    with recording(torch.nn.Identity(), rec):
        y = base * 1
        rec.stat_rows.has.clear()  # as if y's row lived elsewhere (a module pass's table)
        out = y.expand(4, 5) + 0  # noqa: F841
    assert not rec.stat_rows.repeat(("nowhere", 0), ("nothing", 0), 4)
    table = rec.finish_stats()
    expand = next(n.id for n in rec.graph.nodes if n.op_type == "aten.expand")
    got = table.get(expand, 0)
    assert got is not None and got.numel == 20 and got.max == float(base.max())
    assert not any(k for k, _, times in rec.stat_rows.derived if times != 1)  # measured, not derived


@pytest.mark.parametrize("fraction", [0.0, 0.001, 0.5])
def test_the_host_batch_counts_each_segments_zeros_with_none_few_or_many(fraction: float) -> None:
    from ascend_tui.live.statistics import _zeros_by_segment

    rng = np.random.default_rng(0)
    a = rng.standard_normal(50000).astype(np.float32)
    a[rng.random(a.size) < fraction] = 0
    a[7] = np.nan  # NaN is not a zero
    starts = np.concatenate([[0], np.sort(rng.choice(np.arange(1, a.size), 30, replace=False))])
    got = _zeros_by_segment(a, starts)
    want = [int((a[s:e] == 0).sum()) for s, e in zip(starts, [*starts[1:], a.size])]
    assert got.tolist() == want and got.dtype == np.int64


@pytest.mark.parametrize("budget", [None, 3 * 4096])
def test_mid_sized_outputs_get_exact_rows_and_the_histogram_every_route_bins(
        budget: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lean route (a row at once, samples binned together at the end, or whenever `SAMPLE_BUDGET` values are
    kept) gives the reference row and `histogram_row`'s histogram; a non-contiguous output gets none, as before."""
    import ascend_tui.live.batch_stats as batch_stats
    from ascend_tui.live.stat_rows import StatRows

    if budget is not None:
        monkeypatch.setattr(batch_stats, "SAMPLE_BUDGET", budget)
    tensors = [patterned(n, kind, dtype) for n in (SMALL + 1, 20000, CHUNK) for kind in KINDS
               for dtype in (torch.float32, torch.float16, torch.bfloat16)]
    tensors += [torch._neg_view(patterned(20000, "mixed", torch.float32)),
                patterned(20000, "nonfinite", torch.float32).reshape(100, 200).t()]
    rows = StatRows(torch)
    for i, t in enumerate(tensors):
        rows.take((f"n{i}", 0), t)
    assert len(rows.lean) == len(tensors)  # every one took the lean route
    assert (len(rows.lean._binned) > 3) == (budget is not None)  # binned whenever the budget filled
    table, hists = rows.finish_stats(), rows.finish_histograms()
    for i, t in enumerate(tensors):
        got = table.get(f"n{i}", 0)
        want = reference(t)
        assert got.numel == t.numel()
        assert (got.nan_count, got.inf_count, got.zero_count) == want[4:], i
        assert (got.min, got.max) == pytest.approx(want[:2], rel=0, abs=0, nan_ok=True), i
        assert got.mean * t.numel() == pytest.approx(want[2], rel=1e-5, abs=1e-3, nan_ok=True), i
        assert got.l2norm == pytest.approx(want[3], rel=1e-5, nan_ok=True), i
        hist = hists.get(f"n{i}", 0)
        if t.is_contiguous():
            assert hist is not None, i
            np.testing.assert_array_equal(np.append(*hist), histogram_row(torch, t))
        else:
            assert hist is None, i


def test_an_expand_that_repeats_nothing_takes_its_inputs_row_and_histogram() -> None:
    """`expand` of size-1 dims to 1 (matmul's broadcast of a 4-d operand) holds its input's values in its layout:
    the input's row and histogram, not a second read; they equal the expanded tensor's own."""
    from ascend_tui.live.recording import capture

    class Net(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x * 2
            return y.expand(1, *y.shape[1:]) + 0, y[0].t().expand(1, 100, 100)

    x = torch.randn(1, 100, 100)
    x[0, 0, :7] = 0.0
    result = capture(Net(), (x,))
    expands = [n.id for n in result.graph.nodes if n.op_type == "aten.expand"]
    assert len(expands) == 2
    copied = {key for key, _ in result.recorder.stat_rows.copies}
    assert all((e, 0) in copied for e in expands)  # rows taken from the input's, not measured
    y = (x * 2).double()
    for node in expands:
        got = result.stats.get(node, 0)
        assert (got.numel, got.zero_count, got.min, got.max) == (10000, 7, float(y.min()), float(y.max()))
        assert got.l2norm == pytest.approx(float(torch.linalg.vector_norm(y)), rel=1e-6)
    mul = next(n.id for n in result.graph.nodes if n.op_type == "aten.mul")
    np.testing.assert_array_equal(np.append(*result.histograms.get(expands[0], 0)), histogram_row(torch, x * 2))
    np.testing.assert_array_equal(np.append(*result.histograms.get(expands[0], 0)),
                                  np.append(*result.histograms.get(mul, 0)))
    select = next(n.id for n in result.graph.nodes if n.op_type == "aten.select")  # a view of a view: the row and
    np.testing.assert_array_equal(np.append(*result.histograms.get(expands[1], 0)),  # sample of what it views
                                  np.append(*result.histograms.get(select, 0)))


def test_a_mid_sized_output_changed_in_place_keeps_the_values_it_was_made_with() -> None:
    """The lean route measures an output (and copies its histogram sample) when it is made: a later in-place write
    reaches neither its row nor its histogram, only the writer's."""
    from ascend_tui.live.recording import capture

    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x * 2
            y.mul_(0)  # every value zero afterwards
            return y

    x = torch.randn(200, 100) + 5
    r = capture(M(), (x,))
    mul, mul_ = r.stats.get("mul.0"), r.stats.get("mul_.0")
    want = (x * 2).double()
    assert (mul.min, mul.max, mul.zero_count) == (float(want.min()), float(want.max()), 0)
    assert (mul_.min, mul_.max, mul_.zero_count) == (0.0, 0.0, 20000)
    np.testing.assert_array_equal(np.append(*r.histograms.get("mul.0")), histogram_row(torch, x * 2))
    assert r.histograms.get("mul_.0")[1] == 0  # zeros are left out of a histogram
