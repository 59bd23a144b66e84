"""Coarse-to-fine capture (the default) names the same origin, chain and root cause as the full capture.

Real architectures from `transformers` configs with bugs injected in the first and the last layer, a NaN
born in backward, dropout in train mode replayed identically, BatchNorm's running statistics left alone,
and a bad value made by the caller's own code before an unrelated module (the window widens).
"""

from __future__ import annotations

from typing import Any

import pytest

import torch  # in the test command (.[live,test]): a missing torch fails, never skips

import ascend_tui
from ascend_tui.live.coarse import MODULE, coarse_capture
from ascend_tui.live.device import select
from test_npu_api import fake_npu  # noqa: F401 - the fake torch_npu fixture
from test_real_models import ARCHS, inputs, model

nn = torch.nn
pytestmark = pytest.mark.live

# name -> (a projection in the first layer, one in the last layer)
LAYERS = {"gpt2": ("h.0.attn.c_attn", "h.1.mlp.c_fc"),
          "bert": ("encoder.layer.0.attention.self.query", "encoder.layer.1.intermediate.dense"),
          "llama": ("layers.0.self_attn.q_proj", "layers.1.mlp.up_proj")}


def first_error(inv: Any) -> Any:
    return next(f for f in inv.findings if f.severity == "error")


def is_module_level(inv: Any, node: str) -> bool:
    attrs = inv.graph.node(node).attrs or {}
    return attrs.get("detail") == MODULE


def assert_same_story(full: Any, coarse: Any) -> None:
    """Same origin (module, op, kind), same root cause; the chain is the full one up to where module level begins."""
    f, c = first_error(full), first_error(coarse)
    assert (c.module, c.op_type, c.kind) == (f.module, f.op_type, f.kind)
    assert not is_module_level(coarse, c.node), "the origin is an operator, not a module"
    assert c.attribution == f.attribution == "introduced"
    assert c.root_cause.reason == f.root_cause.reason
    assert (c.root_cause.module, c.root_cause.node == c.node) == (f.root_cause.module, f.root_cause.node == f.node)
    fine = [(link.module, link.op_type) for link in c.root_cause.chain if not is_module_level(coarse, link.node)]
    assert fine and fine == [(link.module, link.op_type) for link in f.root_cause.chain][:len(fine)]
    rest = [link for link in c.root_cause.chain if is_module_level(coarse, link.node)]
    assert all(link.op_type.startswith("module.") for link in rest)
    assert "capture" in coarse.run.extra and "capture" not in full.run.extra
    assert coarse.run.extra["capture"]["window"]["suspect"] == c.module or c.module.startswith(
        coarse.run.extra["capture"]["window"]["suspect"])


def both(net_of: Any, data: Any, **kw: Any) -> tuple[Any, Any]:
    full = ascend_tui.investigate(net_of(), data, checks=("overflow",), device="cpu", detail="full", **kw)
    coarse = ascend_tui.investigate(net_of(), data, checks=("overflow",), device="cpu", **kw)
    return full, coarse


@pytest.mark.parametrize("where", [0, 1], ids=["first-layer", "last-layer"])
@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_scaled_projection_gives_the_same_origin_chain_and_root_cause(arch: str, where: int) -> None:
    def net_of() -> Any:
        net = model(arch)
        proj = net.get_submodule(LAYERS[arch][where])
        with torch.no_grad():
            (proj.weight[:, :64] if arch == "gpt2" and where == 0 else proj.weight).mul_(4e5)
        return net

    full, coarse = both(net_of, inputs(), dtype="float16")
    assert first_error(full).module == LAYERS[arch][where]
    assert_same_story(full, coarse)
    ops = [n for n in coarse.graph.nodes if n.kind == "op" and not is_module_level(coarse, n.id)]
    assert 0 < len(ops) < len([n for n in full.graph.nodes if n.kind == "op"]) / 4, "operators only in the window"
    downstream = [f for f in coarse.findings if f.attribution == "inherited" and is_module_level(coarse, f.node)]
    assert downstream, "what the bad values reach later is module-level evidence, inherited"


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_layernorm_weight_overflow_matches_the_full_capture(arch: str) -> None:
    def net_of() -> Any:
        net = model(arch)
        with torch.no_grad():
            net.get_submodule(ARCHS[arch][2]).weight.fill_(3e4)
        return net

    assert_same_story(*both(net_of, inputs(), dtype="float16"))


class SqrtHead(nn.Module):
    """Forward is finite (sqrt of zeros is 0); its gradient, 1 / (2 sqrt 0), is Inf: a NaN/Inf born in backward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.gate = nn.ReLU()
        self.root = Root()
        self.out = nn.Linear(8, 2)

    def forward(self, x: Any) -> Any:
        return self.out(self.root(self.gate(self.fc(x)) * 0.0))


class Root(nn.Module):
    def forward(self, x: Any) -> Any:
        return torch.sqrt(x)


def test_nan_born_in_backward_is_found_at_the_same_backward_operator() -> None:
    def net_of() -> Any:
        torch.manual_seed(0)
        return SqrtHead()

    full, coarse = both(net_of, (torch.rand(4, 8),), backward=True, reference=None)
    f, c = first_error(full), first_error(coarse)
    assert f.node.startswith("backward") or full.graph.node(f.node).phase == "backward"
    assert coarse.graph.node(c.node).phase == "backward" and not is_module_level(coarse, c.node)
    assert (c.op_type, c.kind, c.module) == (f.op_type, f.kind, f.module)
    assert coarse.run.extra["capture"]["window"]["phase"] == "backward"


def test_a_backward_windows_gradient_ops_never_name_the_code_that_started_the_investigation() -> None:
    torch.manual_seed(0)
    inv = ascend_tui.investigate(SqrtHead(), (torch.rand(4, 8),), checks=("overflow",), backward=True, reference=None)
    recorded = [n for n in inv.graph.nodes if n.phase == "backward" and not is_module_level(inv, n.id)
                and n.op_type not in ("const", "input")]
    assert recorded  # the window is in backward: its gradient ops are recorded one by one
    named = [n.id for n in recorded if n.source is not None and n.source.file == __file__]
    assert not named, f"gradient ops located at the test that called investigate: {named}"


class DropThenInvert(nn.Module):
    """Train-mode dropout zeroes half the values; the reciprocal makes Inf exactly where it dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.drop = nn.Dropout(0.5)
        self.inv = Invert()

    def forward(self, x: Any) -> Any:
        return self.inv(self.drop(self.fc(x).abs() + 1.0))


class Invert(nn.Module):
    def forward(self, x: Any) -> Any:
        return 1.0 / x


def test_dropout_in_train_mode_is_replayed_with_the_same_mask() -> None:
    torch.manual_seed(0)
    net = DropThenInvert().train()
    x = torch.rand(64, 16)
    torch.manual_seed(123)
    expected = int(torch.isinf(net(x)).sum())  # what the step does with the RNG as it stands
    torch.manual_seed(123)
    before = torch.get_rng_state()
    cap = coarse_capture(net, (x,), select("cpu"))
    assert torch.equal(torch.get_rng_state(), before), "the user's RNG is left as it was"
    assert cap.passes == 2 and cap.window is not None
    graph, stats = cap.result.graph, cap.result.stats
    recip = [n for n in graph.nodes if n.module == "inv" and not is_module_level_node(n)]
    assert recip, "the replay recorded the reciprocal"
    assert int(stats.get(recip[-1].id, 0).inf_count) == expected, "the replay dropped the same values as pass 1"
    drop = next(n for n in graph.nodes if n.module == "drop" and is_module_level_node(n))
    assert int(stats.get(drop.id, 0).zero_count) == expected


def is_module_level_node(node: Any) -> bool:
    return bool(node.attrs) and node.attrs.get("detail") == MODULE


class NormThenBlowUp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(8)
        self.fc = nn.Linear(8, 8)

    def forward(self, x: Any) -> Any:
        return self.fc(self.bn(x) * 1e39)


def test_batchnorm_running_stats_are_not_moved_by_the_two_passes() -> None:
    torch.manual_seed(0)
    net = NormThenBlowUp().train()
    mean, count = net.bn.running_mean.clone(), int(net.bn.num_batches_tracked)
    inv = ascend_tui.investigate(net, (torch.rand(16, 8),), checks=("overflow",), device="cpu", reference=None)
    assert inv.run.extra["capture"]["passes"] == 2
    assert torch.equal(net.bn.running_mean, mean) and int(net.bn.num_batches_tracked) == count
    assert first_error(inv).op_type == "aten.mul" and first_error(inv).module == ""


class CallerMadeIt(nn.Module):
    """The caller's own code overflows before an unrelated module runs: the window must widen to find it."""

    def __init__(self) -> None:
        super().__init__()
        self.side = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 8)

    def forward(self, x: Any) -> Any:
        bad = torch.exp(x * 200.0)  # Inf where x > 0.44
        clean = self.side(x)
        return self.fc(bad) + clean


def test_a_bad_value_made_before_an_unrelated_module_widens_the_window() -> None:
    def net_of() -> Any:
        torch.manual_seed(0)
        return CallerMadeIt()

    full, coarse = both(net_of, (torch.rand(4, 8),), reference=None)
    f, c = first_error(full), first_error(coarse)
    assert (c.module, c.op_type) == (f.module, f.op_type) == ("", "aten.exp")
    assert coarse.run.extra["capture"]["passes"] == 3


def test_full_detail_records_every_operator() -> None:
    net = model("llama")
    full = ascend_tui.investigate(net, inputs(), checks=("overflow",), device="cpu", detail="full")
    assert "capture" not in full.run.extra
    assert not any(is_module_level(full, n.id) for n in full.graph.nodes)
    clean = ascend_tui.investigate(net, inputs(), checks=("overflow",), device="cpu")
    assert clean.run.extra["capture"] == {"detail": "module", "passes": 1, "module_events": 30, "operators": 0,
                                          "module_histograms": False}
    assert all(is_module_level(clean, n.id) for n in clean.graph.nodes if n.kind == "op")


def test_module_level_nodes_are_marked_in_the_report_and_the_detail_pane() -> None:
    from rich.style import Style

    from ascend_tui.app.widgets.detail import describe
    from ascend_tui.report import build_report

    net = model("llama")
    with torch.no_grad():
        net.get_submodule("layers.0.self_attn.q_proj").weight.mul_(4e5)
    inv = ascend_tui.investigate(net, inputs(), checks=("overflow",), device="cpu", dtype="float16")
    report = build_report(inv)
    assert report["run"]["capture"]["window"]["suspect"] == "layers.0.self_attn.q_proj"
    marked = [f for f in report["findings"] if f.get("detail") == "module"]
    assert marked and all(is_module_level(inv, f["node"]) for f in marked)
    assert not any(f.get("detail") for f in report["findings"] if f["severity"] == "error")
    node = marked[0]["node"]
    assert "module-level evidence" in describe(inv, node, lambda _: Style()).plain
    op = next(f["node"] for f in report["findings"] if f["severity"] == "error")
    assert "module-level evidence" not in describe(inv, op, lambda _: Style()).plain


def test_first_bad_event_takes_nan_inf_saturation_and_the_flag() -> None:
    import numpy as np

    from ascend_tui.checks.suspects import first_bad_event

    ev = np.array([0, 1, 2, 2, 3])
    mn, mx = np.array([0.0, -1, -2, -3, -4]), np.array([1.0, 65504, 2, np.inf, 4])
    zero = np.zeros(5)
    assert first_bad_event(ev, mn, mx, zero, zero) == 2  # the Inf
    assert first_bad_event(ev, mn, mx, zero, zero, saturation_limit=65504.0) == 1  # clamped at the max
    assert first_bad_event(ev, mn, np.array([1.0, 2, 2, 3, 4]), np.array([0, 0, 0, 0, 1]), zero) == 3  # a NaN count
    assert first_bad_event(ev, mn, np.ones(5), zero, zero) is None
    assert first_bad_event(ev[:0], mn[:0], mx[:0], zero[:0], zero[:0], flagged=np.array([False, True])) == 1


def test_cancel_stops_the_module_pass() -> None:
    import threading

    from ascend_tui.errors import Cancelled

    stop = threading.Event()
    stop.set()
    with pytest.raises(Cancelled):
        coarse_capture(model("gpt2"), inputs(), select("cpu"), cancel=stop)


class LogThenRelu(nn.Module):
    """`log` of zeros is -Inf; the in-place ReLU after it turns the -Inf into 0 in the same tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.log = Log()
        self.relu = nn.ReLU(inplace=True)
        self.out = nn.Linear(8, 2)

    def forward(self, x: Any) -> Any:
        return self.out(self.relu(self.log(self.fc(x).relu())))


class Log(nn.Module):
    def forward(self, x: Any) -> Any:
        return torch.log(x)


def test_an_output_an_inplace_module_changes_is_measured_before_it_runs() -> None:
    """Module outputs are measured in batches; one handed to an in-place module is measured first, so the -Inf the
    ReLU overwrites is still seen, at the module that made it."""
    torch.manual_seed(0)
    cap = coarse_capture(LogThenRelu(), (torch.randn(16, 8),), select("cpu"), backward=True)
    assert cap.window is not None and cap.recorder.events[cap.window[1]].module == "log"
    assert not cap.notes


class DeepSqrtHead(nn.Module):
    """Forty layers, then the gradient of sqrt(0) in backward: Inf, which saturation mode clamps and a zero product
    hides from every module's gradient; only the overflow flag tells."""

    def __init__(self) -> None:
        super().__init__()
        self.pre = nn.Sequential(*(nn.Linear(8, 8) for _ in range(40)))
        self.head = SqrtHead()

    def forward(self, x: Any) -> Any:
        return self.head(self.pre(x))


def test_an_overflow_born_in_backward_is_found_by_the_flag_read_per_batch_of_modules(fake_npu: Any) -> None:
    """Fake NPU in saturation mode: the coarse path finds the backward operator the full capture names, reading the
    flag once per batch of module events (and per operator only inside the window), not after every module."""
    fake_npu._fake_state.inf_nan = False
    found = {}
    for detail in ("full", "module"):
        torch.manual_seed(0)
        model, x = DeepSqrtHead(), torch.rand(4, 8)
        fake_npu._fake_state.flag_reads = 0
        with fake_npu._fake_saturation():
            inv = ascend_tui.investigate(model, (x,), device="npu", dtype="float16", checks=("overflow",),
                                         detail=detail, backward=True, reference=None)
        err = first_error(inv)
        found[detail] = (err.node, err.kind, err.module, fake_npu._fake_state.flag_reads, inv.run.extra.get("capture"))
    assert found["full"][:3] == found["module"][:3] == ("backward:head.root/div.0", "saturation", "head.root")
    capture = found["module"][4]
    assert capture["passes"] == 3 and capture["window"]["phase"] == "backward"
    reads = found["module"][3]  # the passes' own, one per two events in the flag's pass, one per windowed op
    assert reads <= capture["module_events"] // 2 + capture["operators"] + 8 and reads < capture["module_events"]


def test_a_deep_sequential_gets_one_edge_per_layer_not_one_per_earlier_sibling() -> None:
    # each leaf's output is made inside the leaf (its ops are not recorded in the module pass): it reads its
    # input, not every sibling before it (that was 180k edges and 4.6 s of add_edge on 600 layers)
    torch.manual_seed(0)
    net = torch.nn.Sequential(*(m for _ in range(150) for m in (torch.nn.Linear(8, 8), torch.nn.ReLU()))).eval()
    inv = ascend_tui.investigate(net, (torch.randn(2, 8),), checks=("overflow",), reference=None)
    modules = [n for n in inv.graph.nodes if n.kind == "op" and is_module_level(inv, n.id)]
    assert len(modules) >= 300
    assert inv.graph.edge_count() < 3 * len(modules) + 10
    last = next(n for n in modules if n.module == "299")
    assert [e.src for e in inv.graph.producers(last.id)] == [next(n.id for n in modules if n.module == "298")]


def test_a_training_steps_investigation_is_freed_when_dropped() -> None:
    # the gradient hooks' closures hold the recorder, which holds the step's outputs, whose autograd graph holds the
    # hooks: a cycle through C++ the collector cannot break, so every investigation of a training step stayed alive
    import gc
    import weakref

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
    data = torch.randn(4, 8)
    cap = coarse_capture(net, (data,), select("cpu"), backward=True, loss=lambda out: out.float().pow(2).mean())
    rec = weakref.ref(cap.recorder)
    assert len(cap.recorder.events) > 3 and not cap.recorder.grad_hooks
    del cap
    gc.collect()
    assert rec() is None, "the module pass's recorder outlived its capture"


class Tiny(nn.Module):
    """Most of its output lies below float16's smallest subnormal (2**-24), beside a few values of 1."""

    def forward(self, x: Any) -> Any:
        return torch.where(x > 1.5, torch.ones_like(x), x.abs() * 1e-9 + 1e-10)


def test_module_histograms_are_sampled_only_when_the_check_reads_them() -> None:
    # the overflow check reads a module's histogram only to predict float16 underflow of a wider run; otherwise the
    # module pass does not sample them, and says so
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 64), Tiny(), nn.Linear(64, 4)).eval()
    data = (torch.randn(32, 64),)
    plain = ascend_tui.investigate(net, data, checks=("overflow",), reference=None)
    modules = [n.id for n in plain.graph.nodes if n.kind == "op" and is_module_level(plain, n.id)]
    assert modules and not any(plain.histograms.get(m, 0) for m in modules)
    assert plain.run.extra["capture"]["module_histograms"] is False
    predicted = ascend_tui.investigate(net, data, checks=("overflow",), reference=None, range_dtype="float16")
    assert all(predicted.histograms.get(m, 0) is not None for m in modules)
    assert "module_histograms" not in predicted.run.extra["capture"]
    under = [f for f in predicted.findings if f.kind == "underflow"]
    assert [(f.module, f.metrics["source"]) for f in under] == [("1", "histogram")]


def test_a_float16_window_merges_with_a_module_pass_that_sampled_no_histograms() -> None:
    # a float16 run samples no module histograms (no check reads them), so the window's operators bring the only ones
    net = model("llama")
    with torch.no_grad():
        net.get_submodule("layers.1.mlp.up_proj").weight.mul_(4e5)
    inv = ascend_tui.investigate(net, inputs(), checks=("overflow",), device="cpu", dtype="float16")
    assert inv.run.extra["capture"]["module_histograms"] is False and inv.run.extra["capture"]["passes"] == 2
    ops = [n.id for n in inv.graph.nodes if n.kind == "op" and not is_module_level(inv, n.id)]
    assert inv.histograms.get("layers.1.mlp.up_proj/mm.0") is not None, "the window's operators keep theirs"
    assert not any(inv.histograms.get(n.id) for n in inv.graph.nodes if is_module_level(inv, n.id))
