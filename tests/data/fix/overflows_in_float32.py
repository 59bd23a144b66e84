"""A model whose output overflows in float32 too: no precision remedy can fix it, and none may be claimed."""

from __future__ import annotations

import torch
from torch import nn


class Explodes(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.scale = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale(self.lin(x)) * 1e30 * 1e30


def build() -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return Explodes().eval(), (torch.randn(4, 8, generator=torch.Generator().manual_seed(1)) + 3.0,)
