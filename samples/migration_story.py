"""A model migrated to float16 with three planted problems that interact, for `ascend-tui triage`.

1. An unscaled sensor input (raw counts in the thousands) goes straight into a float16
   matmul (`sensor_proj`): the sums pass 65504 and the output is Inf.
2. The same unscaled counts are centred in float16 (`drift`: x - mean(x)) before a small
   correction head: at a magnitude of ~3000 float16 keeps steps of 2, so the small variations
   that carry the signal are lost — a precision loss with no overflow anywhere upstream of it.
3. Every image block converts NCHW -> NHWC and back around each of its two LayerNorms
   (`permute(...).contiguous()` twice each), so layout conversions take a large share of the time.

    ascend-tui triage samples/migration_story.py --dtype float16 --device cpu

names exactly these three causes, in this order: the overflow (its root cause the unscaled
input), the precision lost in the centring, and the layout conversions in the blocks.
"""

from __future__ import annotations

import torch
from torch import nn


class ChannelsLastNorm(nn.Module):
    """LayerNorm over channels the costly way: to NHWC, normalise, back to NCHW (two copies)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1).contiguous()
        x = self.norm(x)
        return x.permute(0, 3, 1, 2).contiguous()


class Block(nn.Module):
    """Channels-last norm -> ReLU -> channels-last norm, with a residual (convolutions elided: on a CPU in
    float16 they would dwarf everything else the profile should show)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = ChannelsLastNorm(channels)
        self.act = nn.ReLU()
        self.post = ChannelsLastNorm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.post(self.act(self.norm(x)))


class Drift(nn.Module):
    """Centres the raw counts (x - mean) and scales them: harmless in float32, lossy in float16."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - x.mean(dim=-1, keepdim=True)) * 0.5


class MigrationStory(nn.Module):
    """Image blocks, a sensor projection and a drift correction, joined in a small head."""

    def __init__(self, width: int = 32, sensors: int = 64) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 1)
        self.blocks = nn.Sequential(*(Block(width) for _ in range(3)))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.sensor_proj = nn.Linear(sensors, 32)
        self.drift = Drift()
        self.head = nn.Linear(width, 4)

    def forward(self, image: torch.Tensor, sensor: torch.Tensor) -> tuple[torch.Tensor, ...]:
        feat = self.pool(self.blocks(self.stem(image))).flatten(1)
        return self.head(feat), self.sensor_proj(sensor), self.drift(sensor)


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = MigrationStory().eval()
    with torch.no_grad():
        model.sensor_proj.weight.abs_().mul_(8.0)  # counts are positive and add up: the projection sums them
    image = torch.randn(2, 3, 64, 64)
    sensor = 3000.0 + torch.rand(4, 64) * 3.0  # raw counts, never normalised
    return model, (image, sensor)
