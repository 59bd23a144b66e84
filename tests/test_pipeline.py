"""The recording pipeline: typed live checks, one dispatch mode, one id minter, one path per input."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path
from typing import Any

import pytest

import torch  # noqa: E402  (live tests: torch is in the test install)
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from ascend_tui import investigate  # noqa: E402
from ascend_tui.evidence import Finding  # noqa: E402
from ascend_tui.investigation import Investigation  # noqa: E402
from ascend_tui.live.context import LiveContext, Run  # noqa: E402
from ascend_tui.live.options import RunOptions  # noqa: E402
from ascend_tui.live.recording import Call, Watcher, capture  # noqa: E402


class CountingObserver(Watcher):
    """Sees every op of one run; remembers the outputs' largest magnitude per node."""

    def __init__(self) -> None:
        self.calls = 0
        self.largest: dict[str, float] = {}

    def before(self, call: Call) -> None:
        self.calls += 1

    def output(self, node: str, slot: int, tensor: Any) -> None:
        if tensor.is_floating_point() and tensor.numel():
            self.largest[node] = max(self.largest.get(node, 0.0), float(tensor.detach().abs().max()))


class LargestValueCheck:
    """A check the runner has never heard of: flags outputs whose magnitude grew past a limit vs the reference."""

    name = "largest"
    needs_reference = True

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.seen: dict[str, CountingObserver] = {}

    def observers(self, ctx: LiveContext, run: Run) -> list[Watcher]:
        if run.role == "rerun":
            return []
        self.seen[run.role] = CountingObserver()
        return [self.seen[run.role]]

    def run(self, ctx: LiveContext, inv: Investigation) -> None:
        target, reference = self.seen["target"].largest, self.seen["reference"].largest
        found = []
        for node_id, value in target.items():
            if value > self.limit and node_id in inv.graph:
                n = inv.graph.node(node_id)
                found.append(Finding("largest", "large", "warning", node_id, n.op_type, n.module, n.index,
                                     f"|x| reaches {value:g} (reference {reference.get(node_id, 0.0):g})"))
        inv.replace_findings("largest", found)


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: Any) -> Any:
        return torch.relu(self.fc(x)) * 1000.0


def test_a_check_written_here_runs_through_investigate_unchanged() -> None:
    torch.manual_seed(0)
    check = LargestValueCheck(limit=10.0)
    inv = investigate(Scaled(), (torch.randn(4, 8),), checks=(check,), device="cpu", dtype="bfloat16")
    assert inv.run.checks == ("largest",)
    assert check.seen["target"].calls == check.seen["reference"].calls == len(inv.graph.execution_order())
    flagged = [f.node for f in inv.findings if f.check == "largest"]
    assert flagged == ["mul.0"], "only the op that scales by 1000 passes the limit"
    assert "reference" in inv.findings[0].message


def test_one_options_object_travels_and_keywords_override_it() -> None:
    opts = RunOptions(checks=(), device="cpu", settings={"headroom_bits": 2.0})
    inv = investigate(Scaled(), (torch.randn(2, 8),), opts, dtype="bfloat16")
    assert inv.run.checks == () and inv.run.dtype == "bfloat16"
    with pytest.raises(TypeError):
        investigate(Scaled(), (torch.randn(2, 8),), opts, no_such_option=1)


def test_observers_may_change_what_runs_but_the_graph_records_what_the_model_asked() -> None:
    """The sanitizer's clamping works this way: the op runs on fixed arguments, the node keeps the user's."""

    class Clamp(Watcher):
        def before(self, call: Call) -> None:
            if call.func.overloadpacket.__name__ == "embedding":
                idx = call.args[1].clamp(0, call.args[0].shape[0] - 1)
                call.run_args = (call.args[0], idx, *call.args[2:])

    emb = nn.Embedding(4, 3)
    cap = capture(emb, (torch.tensor([1, 9]),), observers=[Clamp()])
    assert cap.outputs.shape == (2, 3)
    assert "embedding.0" in cap.graph


class TinyCNN(nn.Module):
    """The model of `../shared/fixtures/msprobe/dump_cnn.py`."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x: Any) -> Any:
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        return self.fc(x)


def test_live_capture_and_msprobe_dump_name_the_same_calls_the_same(fixtures: Path) -> None:
    """Forward and backward: every op msprobe dumped has the same id as the live API call it came from."""
    from ascend_tui.offline.open import open_path
    from ascend_tui.live.overflow import GradRecorder, grad_capture

    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    model = TinyCNN()
    rec = GradRecorder(model, (x,), api_ids=True)
    grad_capture(rec, model, (x,), lambda out: F.cross_entropy(out.float(), y))
    live = {rec.graph.node(n).attrs.get("api") for n in rec.graph.execution_order() if rec.graph.node(n).attrs}
    dump = open_path(fixtures / "msprobe" / "dump_fp32")
    ids = [n for n in dump.graph.execution_order() if not n.startswith("optimizer:")]
    assert any(i.startswith("backward:") for i in ids) and len(ids) >= 18
    assert [i for i in ids if i not in live] == []
    forward = [n for n in rec.graph.execution_order() if rec.graph.node(n).phase == "forward"]
    conv = [n for n in forward if (rec.graph.node(n).attrs or {}).get("api") == "conv1/conv2d.0"]
    assert conv and rec.graph.node(conv[0]).module == "conv1"


SANITIZER_LOGS = sorted(p.name for p in (Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "sanitizer")
                        .glob("*.log"))


@pytest.mark.parametrize("log", SANITIZER_LOGS or ["(fixtures missing)"])
def test_app_and_cli_give_the_same_findings_for_every_sanitizer_log(log: str, fixtures: Path,
                                                                     tmp_path: Path) -> None:
    from ascend_tui.app.workers import load_paths
    from ascend_tui.offline.open import open_path
    from ascend_tui.cli.sanitize import run_sanitize

    path = fixtures / "sanitizer" / log
    graph_file = tmp_path / "run.atui.json"
    capture_inv = investigate(Scaled(), (torch.randn(2, 8),), checks=(), device="cpu")
    capture_inv.save(graph_file)

    def key(inv: Investigation) -> list[tuple[str, str, str, str]]:
        return sorted((f.kind, f.severity, f.node, f.message) for f in inv.findings)

    cli_alone = open_path(path)
    cli_mapped = run_sanitize(argparse.Namespace(log=str(path), graph=str(graph_file), cmd=[], tool="auto"))
    quiet = lambda *_: None  # noqa: E731
    app_alone = load_paths([str(path)], RunOptions(checks=()), quiet, threading.Event()).inv
    app_mapped = load_paths([str(graph_file), str(path)], RunOptions(checks=()), quiet, threading.Event()).inv
    assert cli_alone.findings, "every fixture log reports something"
    assert key(app_alone) == key(cli_alone)
    assert key(app_mapped) == key(cli_mapped)


def test_api_ids_are_asked_for_and_leave_fused_fast_paths_alone_otherwise() -> None:
    """Naming API calls takes a TorchFunctionMode, which would turn off nn.MultiheadAttention's fast path."""
    mha = nn.MultiheadAttention(16, 2, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    plain = capture(mha, (x, x, x))
    named = capture(mha, (x, x, x), api_ids=True)
    assert not any((n.attrs or {}).get("api") for n in plain.graph)
    assert any((n.attrs or {}).get("api") for n in named.graph)
    inv = investigate(mha, (x, x, x), checks=(), device="cpu", settings={"api_ids": True})
    assert any((n.attrs or {}).get("api") for n in inv.graph)


def test_the_reference_run_keeps_its_histograms_for_the_detail_pane() -> None:
    inv = investigate(Scaled(), (torch.randn(4, 8),), checks=("overflow",), device="cpu", dtype="bfloat16",
                      detail="full")
    assert inv.reference_histograms is not None
    target, reference = inv.histograms.get("mul.0", 0), inv.reference_histograms.get("mul.0", 0)
    assert target is not None and reference is not None and reference[1] == target[1]
