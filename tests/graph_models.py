"""A small transformer block the graph-format tests export to ONNX and torch.export and capture live."""

from __future__ import annotations

from typing import Any


def block_and_input() -> tuple[Any, Any]:
    """(model, input): layer norm, attention with a fused qkv, an MLP in a Sequential, two residual adds."""
    import torch
    from torch import nn

    class Attn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(16, 48)
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            a = (q @ k.transpose(-2, -1) / 4).softmax(-1)
            return self.proj(a @ v)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(16)
            self.attn = Attn()
            self.mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(x)

    torch.manual_seed(0)
    return Block().eval(), torch.randn(2, 5, 16)


def live_modules(model: Any, x: Any) -> set[str]:
    """Module paths of the operators live capture records for `model(x)`."""
    from ascend_tui.live.runner import investigate

    inv = investigate(model, (x,), checks=(), device="cpu", reference=None)
    return {n.module for n in inv.graph if not n.is_placeholder}
