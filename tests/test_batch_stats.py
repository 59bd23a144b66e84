"""`live.batch_stats.BatchStats` gives the rows and histograms the per-output route (`StatRows`) gives."""

from __future__ import annotations

import math

import numpy as np
import pytest

import torch  # in the test command (.[live,test]): a missing torch fails, never skips

from ascend_tui.evidence import HIST_BINS
from ascend_tui.live.batch_stats import BatchStats
from ascend_tui.live.stat_rows import StatRows

pytestmark = pytest.mark.live


def tensors() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    big = torch.randn(3, 70_001, generator=g)
    with_nan = torch.randn(5000, generator=g)
    with_nan[7] = math.nan
    with_nan[9] = math.inf
    with_inf = torch.randn(300, generator=g)
    with_inf[[1, 2]] = torch.tensor([math.inf, -math.inf])
    relu = torch.relu(torch.randn(40_000, generator=g))  # many zeros, -0.0 among them
    relu[:10] = -0.0
    return [
        torch.randn(16, 128, generator=g),  # small
        big,  # many histogram runs, a tail past the 1024-value rows
        big.t(),  # not contiguous
        torch.randn(64, generator=g).neg(),  # plain, then a negated view
        torch.randn(64, generator=g)._neg_view(),
        with_nan,
        with_inf,
        relu,
        torch.full((2048,), 3e37),  # its sum and squares overflow float32 partial sums
        torch.randn(4096, generator=g).half() * 60000,  # float16, near its max
        torch.randn(513, generator=g).to(torch.bfloat16),
        torch.ones(5) + 1,  # no zeros: 0 is outside [min, max]
    ]


def reference(ts: list[torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
    rows = StatRows(torch)
    for i, t in enumerate(ts):
        rows.take((str(i), 0), t)
    table, hists = rows.finish_stats(), rows.finish_histograms()
    keys = [(str(i), 0) for i in range(len(ts))]
    return (np.array([table.get(*k).to_row() for k in keys]),
            [np.append(*h) if (h := hists.get(*k)) is not None else None for k in keys])


def measured(ts: list[torch.Tensor]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`ts` through one `BatchStats`: its rows, histogram rows and histograms, then the per-output route's rows and histograms."""
    from ascend_tui.live.stat_rows import finish_rows

    batch = BatchStats(torch)
    assert [batch.add(t) for t in ts] == list(range(len(ts)))
    raw, numel, hist_rows, hists = batch.finish()
    return (finish_rows(raw, numel), hist_rows, hists, *reference(ts))


def test_rows_and_histograms_match_the_per_output_route() -> None:
    ts = tensors()
    got, hist_rows, hists, want, want_hist = measured(ts)
    # min, max, abs max, counts and numel exactly; mean and norm to float32 summation order
    for col in (0, 1, 4, 5, 6, 7, 8):
        np.testing.assert_array_equal(got[:, col], want[:, col], err_msg=f"column {col}")
    np.testing.assert_allclose(got[:, 2:4], want[:, 2:4], rtol=2e-5, atol=1e-6)
    assert list(hist_rows) == list(range(len(ts)))
    assert hists.shape == (len(ts), HIST_BINS + 1)
    for i, t in enumerate(ts):
        if want_hist[i] is not None and t.dtype != torch.float64:
            np.testing.assert_array_equal(hists[i], want_hist[i], err_msg=f"histogram {i}")
        assert hists[i, HIST_BINS] == hists[i, :HIST_BINS].sum()


def test_float64_keeps_its_range() -> None:
    """Values beyond float32's range stay finite (the per-output route casts them to float32: Inf)."""
    t = torch.randn(7, 100, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 1e300
    batch = BatchStats(torch)
    batch.add(t)
    raw, *_ = batch.finish()
    a = t.numpy()
    assert (raw[0, 0], raw[0, 1], raw[0, 4], raw[0, 5]) == (a.min(), a.max(), 0, 0)
    assert math.isfinite(raw[0, 2])


def test_values_are_taken_when_added_not_when_finished() -> None:
    t = torch.ones(1000)
    batch = BatchStats(torch)
    batch.add(t)
    t.mul_(float("nan"))  # an in-place change after the hand-over (ReLU(inplace=True) on a module's output)
    raw, *_ = batch.finish()
    assert raw[0, 0] == raw[0, 1] == 1.0 and raw[0, 4] == 0


def test_nothing_to_measure_gives_no_row() -> None:
    batch = BatchStats(torch)
    assert batch.add(torch.zeros(0)) is None
    assert batch.add(torch.arange(5)) is None
    assert len(batch) == 0
    raw, numel, hist_rows, hists = batch.finish()
    assert raw.shape == (0, 7) and numel.shape == (0,) and hist_rows.shape == (0,)


def test_the_accelerator_route_queues_and_agrees() -> None:
    """The device route (forced on CPU tensors) gives the same rows as the numpy route."""
    ts = [t for t in tensors() if t.dtype == torch.float32]
    host = BatchStats(torch)
    dev = BatchStats(torch, host=False)
    for t in ts:
        host.add(t)
        dev.add(t)
    assert len(dev._device) == len(ts)
    a, b = host.finish()[0], dev.finish()[0]
    np.testing.assert_array_equal(a[:, [0, 1, 4, 5, 6]], b[:, [0, 1, 4, 5, 6]])
    summed = np.isfinite(a[:, 2]) & np.isfinite(b[:, 2])
    assert (np.isfinite(a[:, 2]) != summed).sum() == 1  # the device sums in float32: 2048 * 3e37 is Inf there
    np.testing.assert_allclose(a[summed, 2:4], b[summed, 2:4], rtol=2e-5, atol=1e-6)


def test_a_smaller_sample_bins_evenly_spaced_runs() -> None:
    """`sample=512`: eight runs of 64 values across the tensor, the same bins as the full sample's."""
    from ascend_tui.evidence import HIST_EDGES_LOG2

    t = torch.cat([torch.full((50_000,), 2.0 ** -30), torch.full((50_000,), 1000.0)])  # two bins, half each
    batch = BatchStats(torch, sample=512)
    batch.add(t)
    batch.add(torch.full((100,), 3.0))  # shorter than the sample: all of it
    _, _, rows, hists = batch.finish()
    assert list(rows) == [0, 1] and list(hists[:, HIST_BINS]) == [512, 100]
    low = 0  # (0, 2**-24): 2**-30
    high = next(i for i, e in enumerate(HIST_EDGES_LOG2) if 2.0 ** e > 1000.0)  # [2**8, 2**12)
    assert hists[0, low] == hists[0, high] == 256


def test_later_measures_at_the_flush_and_skips_what_changed_in_place() -> None:
    kept, changed = torch.full((1000,), 2.0), torch.ones(1000)
    batch = BatchStats(torch)
    assert batch.add(kept, later=True) == 0 and batch.add(changed, later=True) == 1
    assert id(changed) in batch.pending_ids
    changed.mul_(float("nan"))
    raw, numel, rows, _ = batch.finish()
    assert (raw[0, 0], raw[0, 1], raw[0, 4]) == (2.0, 2.0, 0) and list(numel) == [1000, 1000]
    assert batch.changed == [1] and np.isnan(raw[1]).all() and list(rows) == [0]  # no values, no histogram


def test_a_byte_budget_flushes() -> None:
    batch = BatchStats(torch, budget=10_000)
    for _ in range(5):
        batch.add(torch.ones(1000), later=True)  # 4000 bytes each: flushed every third
    assert len(batch._pending) == 2 and not batch.changed


def test_many_module_sized_tensors_match_the_per_output_route() -> None:
    """Hundreds of module-sized float32 tensors of lengths around the 1024-value rows, with NaN, Inf, huge values,
    zeros and -0.0 among them, and a float16 one: every row and histogram as the per-output route gives it."""
    g = torch.Generator().manual_seed(2)
    ts: list[torch.Tensor] = []
    for i in range(300):
        n = [1, 7, 1023, 1024, 1025, 4096, 5000, 16_384, 40_000][i % 9]
        t = torch.randn(n, generator=g) * 10.0 ** (i % 7 - 3)
        if i % 11 == 0:
            t = torch.relu(t)
        if i % 13 == 0:
            t[n // 2] = -0.0
        if i % 17 == 0:
            t[-1] = math.nan
        if i % 19 == 0:
            t[0] = -math.inf
        if i % 23 == 0:
            t[: max(1, n // 3)] = 3e37  # huge: float32 row sums of squares overflow
        ts.append(t)
    ts.append(torch.randn(3000, generator=g).half())
    got, hist_rows, hists, want, want_hist = measured(ts)
    for col in (0, 1, 4, 5, 6, 7, 8):
        np.testing.assert_array_equal(got[:, col], want[:, col], err_msg=f"column {col}")
    finite = np.isfinite(want[:, 2])
    np.testing.assert_array_equal(np.isfinite(got[:, 2]), finite)
    np.testing.assert_allclose(got[finite, 2:4], want[finite, 2:4], rtol=2e-5, atol=1e-6)
    assert list(hist_rows) == list(range(len(ts)))
    for i in range(len(ts)):
        np.testing.assert_array_equal(hists[i], want_hist[i], err_msg=f"histogram {i}")


def test_values_are_kept_when_the_tensor_is_changed_and_freed() -> None:
    """A tensor changed in place and freed after it was added keeps the values it was added with."""
    batch = BatchStats(torch)
    t = torch.full((3000,), 2.0)
    batch.add(t)
    t.fill_(math.nan)
    del t
    raw, *_ = batch.finish()
    assert (raw[0, 0], raw[0, 1], raw[0, 2], raw[0, 4]) == (2.0, 2.0, 6000.0, 0)


def test_the_strided_sample_is_the_per_output_routes_sample() -> None:
    """`_strided_sample` with `HIST_SAMPLE // 64` runs takes the values `statistics.sample_of` does (the per-output
    route's sample), and with fewer runs evenly spaced runs of 64 across the whole tensor, flat or as 1024-value rows."""
    from ascend_tui.evidence import HIST_SAMPLE
    from ascend_tui.live.batch_stats import _strided_sample
    from ascend_tui.live.statistics import sample_of

    for n in (1, 63, 511, 512, 513, 4096, 4097, 16_384, 70_001):
        a = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(_strided_sample(a, HIST_SAMPLE // 64).ravel(), sample_of(a).ravel(), err_msg=str(n))
        few = _strided_sample(a, 8).ravel()
        if n > 512:
            step = (n - 64) // 7
            np.testing.assert_array_equal(few, (np.arange(8)[:, None] * step + np.arange(64)).ravel(), err_msg=str(n))
            assert few[-1] <= n - 1 and few[-1] >= n - 1 - 7  # the last run ends at (or just before) the end
        else:
            np.testing.assert_array_equal(few, a)
        if n % 1024 == 0:
            np.testing.assert_array_equal(_strided_sample(a.reshape(-1, 1024), 8).ravel(), few)


def test_histograms_binned_in_groups_match_the_per_output_route() -> None:
    """More sample values than one group bins (`_BIN_VALUES`): every group's rows, zeros and NaN land where they belong."""
    from ascend_tui.live import batch_stats

    ts = tensors() * 12  # 12 * 12 tensors of up to 4096 sample values: several groups, zeros and NaN in many
    assert sum(min(t.numel(), 4096) for t in ts) > 3 * batch_stats._BIN_VALUES
    _, hist_rows, hists, _, want_hist = measured(ts)
    assert list(hist_rows) == list(range(len(ts)))
    for i, t in enumerate(ts):
        if want_hist[i] is not None and t.dtype != torch.float64:
            np.testing.assert_array_equal(hists[i], want_hist[i], err_msg=f"histogram {i}")


def test_whole_row_tensors_match_float64_reference() -> None:
    """Float32 tensors of whole 1024-value rows (read as [rows, 1024]): every row against numpy in float64, with the
    only zero a -0.0, zeros with no negative value, NaN, Inf, huge values and none at all among them."""
    g = torch.Generator().manual_seed(3)
    cases = []
    for n in (1024, 4096, 16_384, 32_768, 65_536):
        t = torch.randn(n, generator=g)
        only_negative_zero = t.clone()
        only_negative_zero[n // 3] = -0.0
        nonnegative = torch.relu(t)  # zeros at the low end of the range
        positive = t.abs() + 0.5  # no zeros: 0 is outside [min, max]
        with_nan, with_inf, huge = t.clone(), t.clone(), t.clone()
        with_nan[n - 1] = math.nan
        with_inf[0] = math.inf
        huge[: n // 2] = 4e37  # sums and squares overflow float32 partials
        cases += [t, only_negative_zero, nonnegative, positive, with_nan, with_inf, huge]
    batch = BatchStats(torch)
    for t in cases:
        batch.add(t)
    raw, numel, _, _ = batch.finish()
    for i, t in enumerate(cases):
        a = t.numpy().astype(np.float64)
        finite = a[np.isfinite(a)]
        nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
        assert tuple(raw[i, 4:]) == (nan, inf, int((a == 0).sum())), i
        assert numel[i] == a.size
        if nan:
            assert math.isnan(raw[i, 0]) and math.isnan(raw[i, 2])
            continue
        assert (raw[i, 0], raw[i, 1]) == (a.min(), a.max()), i
        if inf:
            assert math.isinf(raw[i, 3])
            continue
        np.testing.assert_allclose(raw[i, 2], finite.sum(), rtol=2e-5, atol=1e-3, err_msg=str(i))
        np.testing.assert_allclose(raw[i, 3], math.sqrt((finite ** 2).sum()), rtol=2e-5, err_msg=str(i))
