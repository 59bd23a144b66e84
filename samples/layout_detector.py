"""A small detection-style network that converts NCHW <-> NHWC around every normalisation.

Each block is a convolution (NCHW), then `permute(0, 2, 3, 1).contiguous()` into NHWC for a
LayerNorm over channels, then `permute(0, 3, 1, 2).contiguous()` back for the next convolution —
the pattern ported ConvNeXt/DETR code is full of. The copies move every activation twice per
block, so in a profile the layout category is as large as the convolutions themselves. Try:

    ascend-tui profile samples/layout_detector.py --steps 3
    ascend-tui check samples/layout_detector.py --checks profile
"""

from __future__ import annotations

import torch
from torch import nn


class ChannelsLastNorm(nn.Module):
    """LayerNorm over channels, done the costly way: to NHWC, normalise, back to NCHW (two copies)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1).contiguous()  # NCHW -> NHWC
        x = self.norm(x)
        return x.permute(0, 3, 1, 2).contiguous()  # NHWC -> NCHW


class Block(nn.Module):
    """Conv 3x3 -> channels-last norm -> GELU -> conv 1x1 -> channels-last norm, with a residual."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm1 = ChannelsLastNorm(channels)
        self.act = nn.GELU()
        self.proj = nn.Conv2d(channels, channels, 1)
        self.norm2 = ChannelsLastNorm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.norm2(self.proj(self.act(self.norm1(self.conv(x)))))


class Detector(nn.Module):
    """Stem, three stages of blocks with stride-2 downsampling, and box / class heads per location."""

    def __init__(self, width: int = 32, classes: int = 8) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 4, stride=4)
        self.stem_norm = ChannelsLastNorm(width)
        stages = []
        for i in range(3):
            c = width * 2 ** i
            stages.append(nn.Sequential(Block(c), Block(c)))
            if i < 2:
                stages.append(nn.Conv2d(c, 2 * c, 2, stride=2))
        self.backbone = nn.Sequential(*stages)
        top = width * 4
        self.box_head = nn.Conv2d(top, 4, 1)
        self.cls_head = nn.Conv2d(top, classes, 1)

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.backbone(self.stem_norm(self.stem(images)))
        return self.box_head(features), self.cls_head(features)


def build() -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return Detector().eval(), (torch.randn(2, 3, 128, 128),)
