"""Two independent bfloat16 drifts: each `OffsetNorm` adds a large offset, then normalises with E[x^2] - E[x]^2.

In float32 the variance survives; in bfloat16 (spacing 2 at 256) it cancels to noise. Keeping one
norm in float32 leaves the other's error in the output: the fix needs both `norm_a` and `norm_b`.
"""

from __future__ import annotations

import torch
from torch import nn


class OffsetNorm(nn.Module):
    def __init__(self, offset: float = 256.0) -> None:
        super().__init__()
        self.offset = offset

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.offset
        mean = h.mean(dim=-1, keepdim=True)
        var = (h * h).mean(dim=-1, keepdim=True) - mean * mean
        return (h - mean) / torch.sqrt(var.clamp_min(0.0) + 1e-5)


class TwoDrifts(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.norm_a = OffsetNorm()
        self.mid = nn.Linear(32, 32)
        self.norm_b = OffsetNorm()
        self.out = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm_b(self.mid(self.norm_a(self.inp(x)))))


def build() -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return TwoDrifts().eval(), (torch.randn(8, 16, generator=torch.Generator().manual_seed(1)),)
