"""A convolution stack that turns each activation into NHWC for a per-channel scale and ReLU, then back.

`ChannelsLastAct` does `permute(0, 2, 3, 1).contiguous()`, an elementwise per-channel affine and
ReLU (the channel is the last dimension, so the parameters broadcast), then
`permute(0, 3, 1, 2).contiguous()`. Both copies are redundant: elementwise ops read the permuted view
as it is, and the result permuted back is the NCHW tensor the next convolution wants, bit for bit.
"""

from __future__ import annotations

import torch
from torch import nn


class ChannelsLastAct(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, channels))
        self.shift = nn.Parameter(torch.linspace(-0.1, 0.1, channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1).contiguous()
        x = torch.relu(x * self.scale + self.shift)
        return x.permute(0, 3, 1, 2).contiguous()


class Net(nn.Module):
    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.act1 = ChannelsLastAct(width)
        self.conv = nn.Conv2d(width, width, 3, padding=1)
        self.act2 = ChannelsLastAct(width)
        self.head = nn.Conv2d(width, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.act2(self.conv(self.act1(self.stem(x)))))


def build() -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1)),)
