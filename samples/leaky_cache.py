"""A streaming encoder that keeps every chunk's hidden states in `self.cache` as "context" and never trims it.

Each call appends its activations, so memory grows with every call. With `--iterations 3`,
`ascend-tui check samples/leaky_cache.py --checks memory --iterations 3` reports a `leak` at the
op that made the cached activations (`encoder.1/relu.0`), held by `StreamingEncoder.cache`.
"""

from __future__ import annotations

import torch
from torch import nn


class StreamingEncoder(nn.Module):
    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, dim), nn.ReLU())
        self.mix = nn.Linear(2 * dim, dim)
        self.cache: list[torch.Tensor] = []

    def forward(self, chunk: torch.Tensor) -> torch.Tensor:
        h = self.encoder(chunk)
        self.cache.append(h)  # the bug: kept forever instead of a fixed-size window
        context = torch.cat(self.cache, dim=1).mean(dim=1, keepdim=True).expand_as(h)
        return self.mix(torch.cat([h, context], dim=-1))


def build() -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    model = StreamingEncoder().eval()
    return model, (torch.randn(2, 8, 32),)
