"""The live memory sanitizer on real CPU torch: bad indices, half-written buffers and growing caches, found at the
right op and module with their upstream cause, and no reports on clean CNN and transformer runs."""

from __future__ import annotations

import json
import threading
from collections import deque
from pathlib import Path
from typing import Any, Callable

import pytest

import torch  # in the test command (.[live,test]): a missing torch fails, never skips
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from ascend_tui import cli, investigate  # noqa: E402
from ascend_tui.errors import Cancelled  # noqa: E402
from ascend_tui.evidence import Finding  # noqa: E402
from ascend_tui.live.recording import capture  # noqa: E402
from ascend_tui.live.memory import SanitizedCapture, capture_sanitized  # noqa: E402
from ascend_tui.live.targets import load_target  # noqa: E402

pytestmark = pytest.mark.live
SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def _sample(name: str) -> tuple[Any, Any]:
    target = load_target(str(SAMPLES / name))
    return target.model, target.inputs


def _kinds(cap: SanitizedCapture) -> list[tuple[str, str]]:
    return [(f.kind, f.node) for f in cap.findings]


class _Fn(nn.Module):
    """A module around a function, so small cases need no class of their own."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


# -- out of bounds -----------------------------------------------------------------------------


def test_shifted_index_found_at_the_embedding_with_the_offset_as_cause() -> None:
    model, inputs = _sample("shifted_index.py")
    with pytest.raises(IndexError):
        capture(model, inputs)  # plain capture: the aten op itself raises on the CPU
    cap = capture_sanitized(model, inputs)
    (f,) = cap.findings
    assert (f.check, f.kind, f.severity, f.node, f.module) == ("memory", "out_of_bounds", "error",
                                                               "embed/embedding.0", "embed")
    assert f.metrics["index_value"] == 512 and f.metrics["valid_high"] == 512 and f.metrics["bad_count"] == 2
    assert "param:embed.weight float32[512,32]" in f.message and "clamped" in f.message
    assert f.root_cause is not None and f.root_cause.node == "add.0"
    assert "shifted_index.py" in f.root_cause.reason and "offset" in f.root_cause.reason
    assert "head/addmm.0" in cap.graph  # the run went on past the bad lookup
    assert cap.events[0].tool == "live" and cap.events[0].node == "embed/embedding.0"


@pytest.mark.parametrize(("fn", "inputs", "node", "cause", "value"), [
    (lambda x: x[torch.arange(5) + 3], (torch.randn(6, 3),), "index.0", "add.0", 6),
    (lambda x: x.index_select(1, torch.arange(4) * 2), (torch.randn(2, 6),), "index_select.0", "mul.0", 6),
    (lambda x: x.gather(1, x.argmax(1, keepdim=True) + 6), (torch.randn(4, 6),), "gather.0", "add.0", None),
    (lambda x: torch.zeros(2, 6).scatter_add_(1, torch.full((2, 1), 3) * 3, x[:, :1]), (torch.randn(2, 6),),
     "scatter_add_.0", "mul.0", 9),
    (lambda x: x.take(torch.arange(3) - 20), (torch.randn(3, 4),), "take.0", "sub.0", -20),
    (lambda x, t: F.cross_entropy(x, t + 1), (torch.randn(3, 5), torch.tensor([0, 4, 2])), "nll_loss_forward.0",
     "add.0", 5),
])
def test_indexing_ops_report_value_range_and_cause(fn: Callable[..., Any], inputs: tuple[Any, ...], node: str,
                                                    cause: str, value: int | None) -> None:
    cap = capture_sanitized(_Fn(fn), inputs)
    (f,) = cap.findings
    assert (f.kind, f.node) == ("out_of_bounds", node)
    assert f.root_cause is not None and f.root_cause.node == cause
    if value is not None:
        assert f.metrics["index_value"] == value


def test_valid_negative_indices_and_ignored_targets_are_not_reported() -> None:
    def fn(x: Any, t: Any) -> Any:
        return x[torch.tensor([-1, 0])].sum() + x.take(torch.tensor([-12])).sum() + \
            F.cross_entropy(x, t, ignore_index=-100) + x.index_fill(1, torch.tensor([-1]), 0.0).sum()
    cap = capture_sanitized(_Fn(fn), (torch.randn(3, 4), torch.tensor([0, -100, 3])))
    assert cap.findings == []


def test_index_that_goes_bad_only_in_a_later_iteration() -> None:
    class Positions(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pos = nn.Embedding(8, 4)
            self.register_buffer("step", torch.zeros((), dtype=torch.long))

        def forward(self, x: Any) -> Any:
            p = self.pos(torch.arange(x.shape[1]) + self.step * 3)
            self.step.add_(1)
            return x + p

    cap = capture_sanitized(Positions(), (torch.randn(1, 4, 4),), iterations=3)
    (f,) = cap.findings
    assert (f.kind, f.node, f.module) == ("out_of_bounds", "pos/embedding.0", "pos")
    assert f.metrics["iteration"] == 3 and f.root_cause is not None and f.root_cause.node == "add.0"


# -- uninitialized reads ------------------------------------------------------------------------


class HalfFilled(nn.Module):
    """Fills only the first half of a `torch.empty` buffer, then reads all of it."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x: Any) -> Any:
        buf = torch.empty(8, 16)
        buf[:4] = self.proj(x[:4])
        return self.head(buf)


def test_half_filled_empty_buffer_read_is_reported_with_the_allocation() -> None:
    cap = capture_sanitized(HalfFilled(), (torch.randn(8, 16),), iterations=2)
    (f,) = cap.findings
    assert (f.kind, f.severity, f.module) == ("uninitialized_read", "error", "head")
    assert cap.graph.node(f.node).op_type == "aten.addmm"
    assert f.root_cause is not None and f.root_cause.node == "empty.0"
    assert f.metrics["unwritten_read"] == 64 and f.metrics["written"] == 64
    assert f.metrics["first_unwritten"] == [4, 0]


@pytest.mark.parametrize(("name", "fn", "reader"), [
    ("index_put half", lambda x: torch.empty(4, 3).index_put_((torch.tensor([0, 1]),), x[:2]).sum(), "sum.0"),
    ("scatter one row", lambda x: torch.empty(4, 3).scatter_(0, torch.zeros(1, 3, dtype=torch.long), 1.0).sum(),
     "sum.0"),
    ("masked fill", lambda x: torch.empty(4, 3).masked_fill_(x > 0, 1.0).sum(), "sum.0"),
    ("accumulate into garbage", lambda x: torch.empty(4, 3).add_(x), "add_.0"),
    ("new_empty", lambda x: x.new_empty(2, 3).exp(), "exp.0"),
    ("resize grows", lambda x: x.clone().resize_(5, 3).sum(), "sum.0"),
])
def test_partial_writes_leave_the_rest_unwritten(name: str, fn: Callable[..., Any], reader: str) -> None:
    cap = capture_sanitized(_Fn(fn), (torch.randn(4, 3),))
    f = cap.findings[0]
    assert (f.kind, f.node) == ("uninitialized_read", reader), name
    assert f.metrics["written"] < f.metrics["alloc_numel"]  # counted before the reading op wrote anything


@pytest.mark.parametrize(("name", "fn"), [
    ("copy_", lambda x: torch.empty(4, 3).copy_(x).sum()),
    ("uniform_", lambda x: torch.empty(4, 3).uniform_().sum()),
    ("rows one by one", lambda x: (lambda b: ([b[i].copy_(x[i]) for i in range(4)], b.sum())[1])(torch.empty(4, 3))),
    ("transposed write", lambda x: (lambda b: (b.t().copy_(x.t()), b.sum())[1])(torch.empty(4, 3))),
    ("out=", lambda x: torch.add(x, 1, out=torch.empty(0)).sum()),
    ("baddbmm beta=0", lambda x: torch.baddbmm(torch.empty(1, 4, 4), x[None], x.t()[None], beta=0).sum()),
    ("index_put all rows", lambda x: torch.empty(4, 3).index_put_((torch.arange(4),), x).sum()),
    ("two complementary masks", lambda x: torch.empty(4, 3).masked_fill_(x > 0, 1.0).masked_fill_(x <= 0, 2.0).sum()),
    ("only the written part read", lambda x: (lambda b: (b[:, :2].copy_(x[:2]), b[:, :2].sum())[1])(
        torch.empty(3, 4, 3))),
])
def test_fully_written_buffers_are_not_reported(name: str, fn: Callable[..., Any]) -> None:
    cap = capture_sanitized(_Fn(fn), (torch.randn(4, 3),))
    assert cap.findings == [], name


# -- leaks --------------------------------------------------------------------------------------


def test_growing_cache_is_a_leak_at_the_op_that_made_it() -> None:
    model, inputs = _sample("leaky_cache.py")
    cap = capture_sanitized(model, inputs, iterations=3)
    (f,) = cap.findings
    assert (f.kind, f.severity, f.node, f.module) == ("leak", "error", "encoder.1/relu.0", "encoder.1")
    assert f.metrics["bytes_per_iteration"] == 2 * 8 * 32 * 4 and f.metrics["iterations_retained"] == 3
    assert "StreamingEncoder.cache" in f.message
    assert "cpu has no allocated-memory counter" in f.metrics["counter"]
    trend = [s.allocated_bytes for s in cap.samples]
    assert trend == [0.0, 2048.0, 4096.0, 6144.0]
    assert any(e.kind == "leak" and e.size == 2048 for e in cap.events)


def test_one_iteration_only_says_the_cache_outlived_the_call() -> None:
    model, inputs = _sample("leaky_cache.py")
    cap = capture_sanitized(model, inputs, iterations=1)
    assert [(f.kind, f.severity) for f in cap.findings] == [("leak", "info")]


@pytest.mark.parametrize(("name", "make"), [
    ("last call kept", lambda: _Keeps(lambda self, y: setattr(self, "last", y))),
    ("window of two", lambda: _Keeps(lambda self, y: self.window.append(y))),
    ("returned output", lambda: _Keeps(lambda self, y: None)),
])
def test_state_that_does_not_grow_is_not_a_leak(name: str, make: Callable[[], nn.Module]) -> None:
    cap = capture_sanitized(make(), (torch.randn(2, 4),), iterations=4)
    assert cap.findings == [], name


class _Keeps(nn.Module):
    def __init__(self, keep: Callable[[Any, Any], None]) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.keep = keep
        self.last: Any = None
        self.window: deque[Any] = deque(maxlen=2)

    def forward(self, x: Any) -> Any:
        y = self.lin(x).relu()
        self.keep(self, y)
        return y * 2


# -- clean models -------------------------------------------------------------------------------


class _Residual(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: Any) -> Any:
        y = F.relu(self.bn1(self.conv1(x)), inplace=True)
        y = self.bn2(self.conv2(y))
        y += x
        return y.relu_()


class ResNetish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.layer1 = nn.Sequential(_Residual(8), _Residual(8))
        self.fc = nn.Linear(8, 10)

    def forward(self, x: Any) -> Any:
        x = self.layer1(self.pool(F.relu(self.stem(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class TransformerBlock(nn.Module):
    """Embedding with valid ids, pre-norm attention with views and softmax, in-place residuals, a KV buffer."""

    def __init__(self, vocab: int = 50, d: int = 16) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.enc = nn.TransformerEncoderLayer(d, 2, 32, batch_first=True, dropout=0.0)

    def forward(self, ids: Any, targets: Any) -> Any:
        x = self.tok(ids)
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, dim=-1)
        kv = torch.empty(b, 2 * t, d)
        kv[:, :t] = k
        att = (q @ kv[:, :t].transpose(1, 2) / d ** 0.5).softmax(-1)
        x = x + att @ v
        x += self.mlp(x)
        x = self.enc(x)
        logits = x @ self.tok.weight.t()
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100) + x[:, -1].sum()


@pytest.mark.parametrize("train", [False, True])
def test_clean_cnn_has_no_memory_findings(train: bool) -> None:
    cap = capture_sanitized(ResNetish().train(train), (torch.randn(2, 3, 16, 16),), iterations=2)
    assert cap.findings == []


def test_clean_transformer_runs_have_no_memory_findings() -> None:
    torch.manual_seed(0)
    ids = torch.randint(0, 50, (2, 6))
    targets = ids.roll(-1, 1)
    targets[:, -1] = -100
    cap = capture_sanitized(TransformerBlock().eval(), (ids, targets), iterations=2)
    assert cap.findings == []
    model, inputs = _sample("tiny_gpt.py")
    gpt = capture_sanitized(model, inputs, iterations=2)
    assert gpt.findings == []
    assert len(gpt.graph) == len(capture(model, inputs).graph)  # same graph as the plain capture


# -- plumbing ------------------------------------------------------------------------------------


def test_investigate_puts_findings_events_and_trend_on_the_investigation() -> None:
    model, inputs = _sample("leaky_cache.py")
    inv = investigate(model, inputs, checks=("memory",), device="cpu", iterations=3)
    leaks = [f for f in inv.findings if f.check == "memory"]
    assert [(f.kind, f.node) for f in leaks] == [("leak", "encoder.1/relu.0")]
    assert [e.tool for e in inv.memory_events] == ["live"]
    assert [s.allocated_bytes for s in inv.memory_samples] == [0.0, 2048.0, 4096.0, 6144.0]
    assert inv.memory_samples[-1].label.startswith("live: after iteration 3")


def test_cli_reports_the_shifted_index_with_the_offset_as_root_cause(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "out.json"
    code = cli.main(["check", str(SAMPLES / "shifted_index.py"), "--checks", "memory", "--json", str(out),
                     "--device", "cpu", "-q"])
    assert code == 1
    report = json.loads(out.read_text())
    (f,) = [Finding.from_json(d) for d in report["findings"] if d["check"] == "memory"]
    assert (f.kind, f.node, f.module) == ("out_of_bounds", "embed/embedding.0", "embed")
    assert f.root_cause is not None and f.root_cause.node == "add.0"
    assert [c.op_type for c in f.root_cause.chain][-1] == "aten.add"
    assert "embed/embedding.0" in capsys.readouterr().out


def test_cancel_stops_the_sanitized_run() -> None:
    model, inputs = _sample("tiny_gpt.py")
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        capture_sanitized(model, inputs, cancel=cancel)


def test_reference_run_is_sanitized_too_when_memory_is_checked() -> None:
    """A float16 target needs a float32 reference; with a bad index neither run may crash."""
    import importlib.util

    from conftest import SAMPLES

    spec = importlib.util.spec_from_file_location("shifted_index_ref", SAMPLES / "shifted_index.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, inputs = module.build()
    import ascend_tui

    inv = ascend_tui.investigate(model, inputs, checks=("overflow", "memory"), device="cpu", dtype="bfloat16")
    assert inv.reference is not None and inv.reference is not inv.stats
    assert any(f.kind == "out_of_bounds" and f.severity == "error" for f in inv.findings)
