"""A full capture with `--backward` is one recorded training step: every operator that ran, once, and nothing else."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import ascend_tui
from ascend_tui.live.recording import capture


CALLS: list[int] = []  # one entry per forward of any copy of the model


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(8, 16), nn.LayerNorm(16), nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        CALLS.append(1)
        return self.fc2(torch.nn.functional.gelu(self.norm(self.fc1(x))))


def loss(out: torch.Tensor) -> torch.Tensor:
    return out.float().pow(2).mean()


class Names(TorchDispatchMode):
    """Lists the aten ops of a plain step, holding no tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        self.names.append(f"aten.{func.overloadpacket.__name__}")
        return func(*args, **(kwargs or {}))


def test_the_full_capture_with_backward_runs_the_model_once_per_run() -> None:
    torch.manual_seed(0)
    net, x = Net(), torch.randn(4, 8)
    CALLS.clear()
    inv = ascend_tui.investigate(net, (x,), checks=("overflow",), detail="full", backward=True, reference=None)
    assert len(CALLS) == 1, "one recorded step: no forward-only capture thrown away"
    assert {n.phase for n in inv.graph.nodes if n.kind == "op"} == {"forward", "backward"}
    assert {f"grad:{name}" for name, _ in net.named_parameters()} <= {n.id for n in inv.graph.nodes}
    CALLS.clear()
    half = ascend_tui.investigate(net, (x,), checks=("overflow",), detail="full", backward=True, dtype="float16",
                                  reference="cpu:float32", device="cpu")
    assert len(CALLS) == 2, "the float16 step and the float32 reference step (which measures the underflow evidence)"
    assert {k for k in half.reference.keys() if k[0].startswith("backward:")}, "the reference has its gradients"


def test_a_recorded_step_holds_the_operators_a_plain_step_runs_in_order() -> None:
    torch.manual_seed(0)
    net, x = Net(), torch.randn(4, 8)
    names = Names()
    with names:
        loss(net(x)).backward()
    for p in net.parameters():
        p.grad = None
    result = capture(net, (x,), backward=True, loss=loss)
    ops = [n.op_type for n in sorted(result.graph.nodes, key=lambda n: n.index) if n.kind == "op"]
    assert ops == names.names, "holding an output between ops would make autograd detach/clone gradients it now steals"
    assert all(p.grad is None for p in net.parameters()), "the user's .grad are put back"
    grads = [n for n in result.graph.nodes if n.id.startswith("grad:")]
    assert grads and all(result.stats.get(n.id, 0) is not None for n in grads)
