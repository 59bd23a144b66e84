"""The tensor-pair detail's numbers: log-binned error histograms, the worst elements with their indices, NaN/Inf."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ascend_tui.checks.tensor_pair import PairAccumulator, log_edges, pair_detail, unravel


def test_the_worst_elements_come_with_their_unravelled_index_and_both_values() -> None:
    g = np.zeros((3, 4, 5), np.float32)
    t = g.copy()
    t[1, 2, 3] = 0.5
    t[2, 0, 4] = -2.0
    t[0, 0, 1] = 1e-3
    d = pair_detail(t, g)
    assert [w.index for w in d.worst] == [(2, 0, 4), (1, 2, 3), (0, 0, 1)]  # exact zeros are not "worst"
    top = d.worst[0]
    assert (top.target, top.golden, top.abs_err) == (-2.0, 0.0, 2.0)
    assert top.flat == np.ravel_multi_index((2, 0, 4), g.shape)
    assert d.max_abs == 2.0 and d.numel == 60 and d.abs_hist.zeros == 57


def test_histogram_bins_are_decades_and_count_every_element_once() -> None:
    rng = np.random.default_rng(0)
    g = rng.standard_normal(10_000)
    err = 10.0 ** rng.uniform(-9, 1, g.size)
    t = g + err
    d = pair_detail(t, g)
    h = d.abs_hist
    assert h.total == g.size and h.nonfinite == 0
    edges = np.array(h.edges)
    # every count matches a direct recount of |t - g| in [edge_i, edge_i+1)
    e = np.abs(t - g)
    for i, c in enumerate(h.counts):
        assert c == np.count_nonzero((e >= edges[i]) & (e < edges[i + 1])), i
    trimmed = h.trimmed()
    assert trimmed.counts[0] and trimmed.counts[-1] and sum(trimmed.counts) == sum(h.counts)
    assert trimmed.edges[0] >= 1e-9 / 10 ** 0.5 and trimmed.edges[-1] <= 10 ** 1.5


def test_relative_error_divides_by_the_golden_value_and_by_eps_where_it_is_zero() -> None:
    g = np.array([2.0, 0.0, -4.0], np.float32)
    t = np.array([3.0, 1e-6, -4.0], np.float32)
    d = pair_detail(t, g)
    by_index = {w.index: w for w in d.worst}
    assert by_index[(0,)].rel_err == pytest.approx(0.5)
    eps = float(np.finfo(np.float32).eps)
    assert by_index[(1,)].rel_err == pytest.approx(float(np.float32(1e-6)) / eps)
    assert (2,) not in by_index and d.rel_hist.zeros == 1


def test_nan_and_inf_agree_at_the_same_place_and_rank_worst_where_they_do_not() -> None:
    g = np.array([1.0, np.nan, np.inf, 5.0, -np.inf, 2.0])
    t = np.array([1.5, np.nan, np.inf, np.nan, np.inf, 2.0])
    d = pair_detail(t, g)
    assert d.nonfinite_mismatch == 2 and d.first_mismatch == (3,)
    assert d.abs_hist.nonfinite == 2 and d.abs_hist.zeros == 3 and sum(d.abs_hist.counts) == 1
    assert [w.index for w in d.worst][:2] == [(3,), (4,)]  # mismatches first, by position
    assert math.isnan(d.worst[0].abs_err) and math.isnan(d.worst[0].target) and d.worst[0].golden == 5.0
    assert d.worst[2].index == (0,) and d.worst[2].abs_err == 0.5
    assert d.max_abs == 0.5  # over the comparable elements
    assert d.target.nan == 2 and d.target.posinf == 2 and d.golden.neginf == 1
    assert d.target.max == 2.0 and d.golden.max == 5.0  # statistics over finite values


def test_chunks_give_the_same_detail_as_one_pass() -> None:
    rng = np.random.default_rng(1)
    g = rng.standard_normal((64, 33)).astype(np.float32)
    t = (g + rng.standard_normal(g.shape).astype(np.float32) * 1e-3)
    t[5, 7] = np.nan
    whole = pair_detail(t, g, chunk=1 << 20)
    chunked = pair_detail(t, g, chunk=100)
    assert repr(whole.worst) == repr(chunked.worst)  # repr: NaN == NaN
    assert (whole.abs_hist, whole.rel_hist, whole.first_mismatch) == (chunked.abs_hist, chunked.rel_hist, (5, 7))
    assert whole.max_abs == chunked.max_abs and whole.mean_abs == pytest.approx(chunked.mean_abs)
    for a, b in ((whole.target, chunked.target), (whole.golden, chunked.golden)):
        assert (a.max, a.min, a.nan) == (b.max, b.min, b.nan)
        assert a.mean == pytest.approx(b.mean) and a.l2norm == pytest.approx(b.l2norm)  # summation order differs


def test_top_k_is_limited_and_ordered() -> None:
    g = np.zeros(1000)
    t = np.arange(1000, dtype=float)
    d = pair_detail(t, g, k=5)
    assert [w.flat for w in d.worst] == [999, 998, 997, 996, 995]


def test_side_statistics_match_numpy() -> None:
    rng = np.random.default_rng(2)
    g = rng.standard_normal(5000)
    t = g * 1.01
    d = pair_detail(t, g)
    for side, x in ((d.target, t), (d.golden, g)):
        assert side.max == pytest.approx(x.max()) and side.min == pytest.approx(x.min())
        assert side.mean == pytest.approx(x.mean()) and side.l2norm == pytest.approx(np.linalg.norm(x))
        assert side.finite == x.size and side.zeros == 0


def test_edge_cases() -> None:
    assert unravel(0, ()) == () and unravel(7, (2, 4)) == (1, 3)
    d = pair_detail(np.float32(3.0), np.float32(3.0))
    assert d.numel == 1 and d.worst == () and d.abs_hist.zeros == 1
    empty = pair_detail(np.zeros((0, 3)), np.zeros((0, 3)))
    assert empty.numel == 0 and math.isnan(empty.max_abs) and math.isnan(empty.target.mean)
    all_nan = pair_detail(np.full(4, np.nan), np.ones(4))
    assert all_nan.nonfinite_mismatch == 4 and math.isnan(all_nan.max_abs)
    with pytest.raises(ValueError):
        pair_detail(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError):
        PairAccumulator((3,)).feed(np.zeros(3), np.zeros(2))
    assert log_edges(-1, 1, 1).tolist() == [0.1, 1.0, 10.0]
    huge = pair_detail(np.array([1e20]), np.array([0.0]))
    assert huge.abs_hist.counts[-1] == 1  # past the last edge: the last bin


def test_the_detail_of_two_files_reads_npy_and_pt_and_refuses_different_shapes(tmp_path) -> None:
    import torch

    from ascend_tui.errors import InputError
    from ascend_tui.offline.tensor_detail import pair_detail_of_files

    g = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    t = g.copy()
    t[1, 2, 3] += 0.25
    np.save(tmp_path / "t.npy", t)  # a MindSpore dump's tensor
    torch.save(torch.from_numpy(g).to(torch.bfloat16), tmp_path / "g.pt")  # a PyTorch dump's, in bfloat16
    d = pair_detail_of_files(str(tmp_path / "t.npy"), str(tmp_path / "g.pt"), chunk=5)
    assert d.shape == (2, 3, 4) and d.worst[0].index == (1, 2, 3)
    assert d.worst[0].golden == float(torch.tensor(1.0).to(torch.bfloat16))
    np.save(tmp_path / "other.npy", np.zeros((4, 6), np.float32))
    with pytest.raises(InputError, match="differs from the target's"):
        pair_detail_of_files(str(tmp_path / "t.npy"), str(tmp_path / "other.npy"))
    with pytest.raises(InputError, match="missing"):
        pair_detail_of_files(str(tmp_path / "t.npy"), str(tmp_path / "gone.pt"))
