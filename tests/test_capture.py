"""Live capture on real CPU torch: module paths, edges through views and in-place ops, stable ids, stats."""

from __future__ import annotations

import math

import numpy as np
import pytest

import torch  # in the test command (.[live,test]): a missing torch fails, never skips
from torch import nn  # noqa: E402

from ascend_tui.live.recording import capture  # noqa: E402


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.relu(self.bn1(self.conv1(x))))
        return self.fc(x.flatten(1))


class Block(nn.Module):
    """Residual transformer-ish block whose `proj` module is called twice (shared weights)."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.proj = nn.Linear(d, d)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(self.norm(x))
        h = self.proj(self.act(h))
        return x + h


def op_ids(result) -> list[str]:
    return result.graph.execution_order()


def test_cnn_module_paths_and_edges() -> None:
    torch.manual_seed(0)
    model = SmallCNN().eval()
    r = capture(model, (torch.randn(2, 3, 8, 8),))
    g = r.graph
    conv = g.node("conv1/convolution.0")
    assert conv.module == "conv1" and conv.module_class == "Conv2d" and conv.op_type == "aten.convolution"
    assert [e.src for e in g.producers(conv.id)] == ["input:0", "param:conv1.weight", "param:conv1.bias"]
    bn = next(n for n in g if n.module == "bn1" and "batch_norm" in n.op_type)
    assert g.producer(bn.id, 0) == conv.id
    assert "buffer:bn1.running_mean" in {e.src for e in g.producers(bn.id)}
    relu = g.node("relu/relu_.0")
    assert g.producer(relu.id, 0) == bn.id
    pool = next(n for n in g if n.module == "pool" and not n.is_placeholder)
    assert g.producer(pool.id, 0) == relu.id, "the in-place relu_ is what the pool reads"
    addmm = g.node("fc/addmm.0")
    assert addmm.outputs[0].shape == (2, 5)
    assert g.node("input:0").outputs[0].describe() == "float32[2,3,8,8]"
    # the whole graph is connected back to the input
    assert "input:0" in g.upstream(addmm.id)


def test_residual_and_shared_module_calls() -> None:
    torch.manual_seed(0)
    r = capture(Block().eval(), (torch.randn(2, 4, 16),))
    g = r.graph
    ids = op_ids(r)
    assert "proj/addmm.0" in ids and "proj/addmm.1" in ids, "a module called twice counts its ops on"
    assert ids.index("proj/addmm.0") < ids.index("act/gelu.0") < ids.index("proj/addmm.1")
    # both calls read the one shared weight placeholder
    weight_users = {e.dst for e in g.consumers("param:proj.weight")}
    assert {n.split("/")[1] for n in weight_users} >= {"t.0", "t.1"} or len(weight_users) == 2
    residual = g.node("add.0")
    assert residual.module == ""
    srcs = [e.src for e in g.producers("add.0")]
    assert srcs[0] == "input:0", "the skip connection reads the block's input"
    assert g.upstream(srcs[1], None) and "proj/addmm.1" in [srcs[1], *g.upstream(srcs[1])]


def test_inplace_and_views_route_edges_to_the_last_writer() -> None:
    class M(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x * 2
            v = y.view(-1)
            v.add_(1)          # writes y's storage through a view
            z = y + 0          # must read the add_, not the mul
            y.mul_(3)          # in place on y itself
            w = y.sum()        # reads the mul_
            return z, w

    r = capture(M(), (torch.ones(2, 3),))
    g = r.graph
    assert g.producer("view.0", 0) == "mul.0"
    assert g.producer("add_.0", 0) == "view.0"
    assert g.producer("add.0", 0) == "add_.0"
    assert g.producer("mul_.0", 0) == "add_.0"
    assert g.producer("sum.0", 0) == "mul_.0"
    z, w = r.outputs
    assert float(w) == pytest.approx(54.0)


def test_same_model_captured_twice_has_identical_ids_and_edges() -> None:
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(2, 4, 16)
    a = capture(model, (x,))
    b = capture(model, (x.clone(),))
    assert [n.id for n in a.graph] == [n.id for n in b.graph]
    assert sorted(map(str, a.graph.edges())) == sorted(map(str, b.graph.edges()))


def test_statistics_match_numpy_and_count_non_finite() -> None:
    class M(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.log(x)  # log(0) = -inf, log(-1) = nan

    x = torch.tensor([[1.0, math.e, 0.0], [-1.0, 4.0, 1.0]])
    r = capture(M(), (x,))
    s = r.stats.get("log.0")
    assert s is not None
    assert (s.nan_count, s.inf_count, s.zero_count, s.numel) == (1, 1, 2, 6)
    xs = r.stats.get("input:0")
    ref = x.numpy()
    assert xs.min == -1.0 and xs.max == 4.0 and xs.abs_max == 4.0
    assert xs.mean == pytest.approx(ref.mean())
    assert xs.l2norm == pytest.approx(float(np.linalg.norm(ref)), rel=1e-6)
    assert xs.finite and not s.finite


def test_float16_statistics_and_dict_inputs() -> None:
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
            return self.fc(x) * scale

    model = M().half()
    r = capture(model, {"x": torch.full((2, 4), 300.0).half(), "scale": torch.tensor(1000.0).half()})
    assert "input:x" in r.graph and "input:scale" in r.graph
    out = r.stats.get("mul.0")
    assert out is not None and out.inf_count > 0 or out.abs_max > 65504
    assert r.graph.node("mul.0").outputs[0].dtype == "float16"


def test_source_location_points_at_user_code() -> None:
    class M(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.exp()  # the line capture must name

    r = capture(M(), (torch.zeros(3),))
    src = r.graph.node("exp.0").source
    assert src is not None and src.file.endswith("test_capture.py") and src.function == "forward"
    assert "x.exp()" in open(src.file).read().splitlines()[src.line - 1]


class _Twice(torch.autograd.Function):
    """A custom autograd function: its backward is user code, so gradient ops there have user frames."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return x * 2

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return grad * 2  # a gradient op called from user code


class _Mixed(nn.Module):
    """Ops called from user code, from torch's Python (F.silu, F.layer_norm) and from a custom function, in turn."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = nn.functional.silu(self.fc(x))
        h = h * 3 + _Twice.apply(h)
        return self.norm(h).exp()


def test_stepping_over_learned_library_frames_names_the_same_sources(monkeypatch) -> None:
    """`SourceStack.lead` (library frames an op's walk steps over by identity, relearned when they differ) names the
    same source location for every node as a walk that classifies every frame: forward and backward ops, ops called
    from user code and from torch's Python, a custom autograd function's backward."""
    from ascend_tui.live.frames import SourceStack

    model = _Mixed()
    x = torch.randn(4, 8)
    learned = capture(model, (x,), backward=True)
    monkeypatch.setattr(SourceStack, "_learn", lambda self, frame: frame)  # no lead: every frame classified
    walked = capture(model, (x,), backward=True)
    sources = [(n.id, n.source) for n in learned.graph.nodes]
    assert sources == [(n.id, n.source) for n in walked.graph.nodes]
    named = {n.id: n.source for n in learned.graph.nodes if n.kind == "op"}
    assert any(s is not None and s.function == "backward" for s in named.values())  # the custom backward's line
    assert any(s is not None and s.function == "forward" for s in named.values())
    assert any(n.phase == "backward" and n.source is None for n in learned.graph.nodes if n.kind == "op")


def test_cancel_stops_the_run() -> None:
    import threading

    from ascend_tui.errors import Cancelled

    ev = threading.Event()
    ev.set()
    with pytest.raises(Cancelled):
        capture(Block(), (torch.randn(1, 2, 16),), cancel=ev)


def test_progress_reports_phase_and_totals() -> None:
    seen: list[tuple[str, int, int | None]] = []
    r = capture(SmallCNN().eval(), (torch.randn(1, 3, 8, 8),), progress=lambda *a: seen.append(a),
                phase_label="capturing target")
    assert seen[0][0] == "capturing target"
    assert seen[-1] == ("capturing target", r.op_count, r.op_count)


def test_input_first_seen_by_an_inplace_op_is_measured_before_the_write() -> None:
    class M(nn.Module):
        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            ids.add_(2)
            return ids * 1

    r = capture(M(), (torch.tensor([0, 8, 3]),))
    assert r.stats.get("input:0").max == 8.0
    assert r.stats.get("add_.0").max == 10.0
    assert r.graph.producer("add_.0", 0) == "input:0"


def test_float64_and_integer_models_are_measured() -> None:
    model = nn.Linear(3, 3).double()
    r = capture(model, (torch.ones(2, 3, dtype=torch.float64),))
    assert r.stats.get("addmm.0").numel == 6
    class Twice(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2

    r = capture(Twice(), (torch.arange(6),))
    assert r.stats.get("input:0").max == 5.0 and r.stats.get("mul.0").max == 10.0


@pytest.mark.parametrize("values", [
    [0.0, 0.0, 1.0, 2.0],          # ReLU-like: min is 0
    [-3.0, 0.0, 0.0, 5.0, -0.0],   # mixed signs with zeros (and a negative zero)
    [1.0, 2.0, 3.0],               # all positive: no zero possible
    [-1.0, -2.0],                  # all negative
    [0.0, float("inf"), float("nan"), -1.0],  # non-finite: counted too
])
def test_zero_nan_inf_counts_are_exact_on_every_route(values: list[float]) -> None:
    class Id(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 1

    x = torch.tensor(values)
    s = capture(Id(), (x,)).stats.get("mul.0")
    assert s.zero_count == int((x == 0).sum())
    assert s.nan_count == int(torch.isnan(x).sum()) and s.inf_count == int(torch.isinf(x).sum())


def test_histogram_of_log2_magnitudes_counts_a_strided_sample() -> None:
    from ascend_tui.evidence import HIST_EDGES_LOG2

    class Id(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 1

    x = torch.tensor([0.0, 1e-9, 1e-7, 1.0, 3.0, -2.0, 1e5, float("inf"), float("nan"), 7e4])
    counts, sampled = capture(Id(), (x,)).histograms.get("mul.0")
    assert sampled == 8, "zeros and NaN are left out"
    below, first = counts[0], counts[1]
    assert (below, first) == (1, 1)  # 1e-9 below float16's subnormals; 1e-7 in [2**-24, 2**-20)
    assert counts[HIST_EDGES_LOG2.index(0) + 1] == 3  # 1, 2, 3 in [2**0, 2**4)
    assert counts[-1] == 3  # 7e4, 1e5 and Inf: past float16's max
    big = capture(Id(), (torch.full((100_000,), 0.5),)).histograms.get("mul.0")
    assert big[1] == 4096 and big[0][HIST_EDGES_LOG2.index(0)] == 4096, "a fixed-size sample of a big tensor"


def test_capture_leaves_the_users_tensors_resizable() -> None:
    """Measuring must not tie a tensor's storage to numpy: resize_ would fail afterwards."""

    class Grow(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x * 2
            y.resize_(50, 3)
            return y

    r = capture(Grow(), (torch.ones(4, 3),))
    assert r.outputs.shape == (50, 3)


def test_views_and_copies_carry_their_inputs_statistics() -> None:
    class M(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.exp(x)
            z = y.t().contiguous().view(-1)  # t, clone (via contiguous), view: same values throughout
            y.mul_(0)                         # a later write must not reach the views' statistics
            return z[:3] + 0                  # a slice holds fewer values: measured on its own

    r = capture(M(), (torch.arange(6.0).view(2, 3),))
    exp = r.stats.get("exp.0")
    for node in ("t.0", "clone.0", "view.0"):
        assert r.stats.get(node) == exp, node
        assert r.histograms.get(node)[1] == r.histograms.get("exp.0")[1]
    assert r.stats.get("mul_.0").max == 0.0
    assert r.stats.get("slice.0").numel == 3


def _double_input(mod: nn.Module, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return (args[0] * 2,)


class Hooked(nn.Module):
    """A module whose own forward pre-hook runs an op (as the old weight_norm API does)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(4, 4)
        self.inner.register_forward_pre_hook(_double_input)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x).relu()


def test_ops_of_a_modules_own_hooks_belong_to_it_and_nothing_is_left_on_the_modules() -> None:
    model = Hooked()
    own = model.inner.__dict__.get("_call_impl")
    r = capture(model, (torch.randn(2, 4),))
    modules = {n.op_type: n.module for n in r.graph if n.kind == "op"}
    assert modules["aten.mul"] == "inner" and modules["aten.addmm"] == "inner" and modules["aten.relu"] == ""
    assert own is None and "_call_impl" not in model.inner.__dict__ and "_call_impl" not in model.__dict__
    import copy
    import pickle

    copy.deepcopy(model)
    pickle.dumps(model)


def test_a_model_that_raises_leaves_its_modules_as_they_were() -> None:
    class Boom(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("boom")

    model = nn.Sequential(nn.Linear(3, 3), Boom())
    marker = model[0]._call_impl
    model[0].__dict__["_call_impl"] = marker  # a module that already shadows its own call keeps it
    with pytest.raises(RuntimeError, match="boom"):
        capture(model, (torch.randn(1, 3),))
    assert model[0].__dict__["_call_impl"] is marker and "_call_impl" not in model[1].__dict__
    r = capture(nn.Sequential(model[0]), (torch.randn(1, 3),))
    assert {n.module for n in r.graph if n.kind == "op"} == {"0"}


def test_modules_called_from_another_thread_are_not_attributed_to_the_recording() -> None:
    import threading

    entered, go = threading.Event(), threading.Event()

    class Waits(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            entered.set()
            go.wait(10)
            return x

    class Spawner(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.other = Waits()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            t = threading.Thread(target=self.other, args=(x,))
            t.start()
            entered.wait(10)  # the other thread is inside `other` while this one runs `fc` and `relu`
            y = self.fc(x).relu()
            go.set()
            t.join()
            return y

    r = capture(Spawner(), (torch.randn(1, 4),))
    assert {n.op_type: n.module for n in r.graph if n.kind == "op"} == {"aten.t": "fc", "aten.addmm": "fc",
                                                                         "aten.relu": ""}
