"""A small ResNet whose precision drifts in bfloat16 at one identifiable layer: `layer2.0.norm`.

Every block normalizes with BatchNorm except `layer2.0`, which uses a hand-written "fast"
norm computing the variance as E[x^2] - E[x]^2. Its input carries a large offset (the block
adds a constant bias of 64 to its activations), so the two terms are huge and nearly equal:
in float32 the difference keeps the variance, in bfloat16 (8 bits of mantissa) it cancels
to noise and that block's output loses most of its accuracy. Everything before it matches
the float32 reference to 3-4 digits; everything after it inherits the damage.

`ascend-tui check samples/drifting_resnet.py --checks precision --dtype bfloat16` should name
`layer2.0.norm/sub.0` as the op that introduces the error.
"""

from __future__ import annotations

import torch
from torch import nn


class FastNorm(nn.Module):
    """Per-channel normalization with the one-pass variance E[x^2] - E[x]^2 (the bug)."""

    def __init__(self, channels: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=(0, 2, 3), keepdim=True)
        mean_sq = (x * x).mean(dim=(0, 2, 3), keepdim=True)
        var = mean_sq - mean * mean
        y = (x - mean) / torch.sqrt(var.clamp_min(0.0) + self.eps)
        return y * self.weight.view(1, -1, 1, 1) + self.bias.view(1, -1, 1, 1)


class Block(nn.Module):
    """conv-norm-relu-conv-norm plus the shortcut (a 1x1 conv when the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int = 1, fast_norm: bool = False, offset: float = 0.0) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.norm: nn.Module = FastNorm(cout) if fast_norm else nn.BatchNorm2d(cout)
        self.offset = offset
        self.shortcut = nn.Sequential() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn1(self.conv1(x)))
        h = self.conv2(h) + self.offset
        return torch.relu(self.norm(h) + self.shortcut(x))


class DriftingResNet(nn.Module):
    """stem, two stages of two blocks, pooling and a classifier; `layer2.0` has the fast norm."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.layer1 = nn.Sequential(Block(16, 16), Block(16, 16))
        self.layer2 = nn.Sequential(Block(16, 32, 2, fast_norm=True, offset=64.0), Block(32, 32))
        self.fc = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def build() -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    model = DriftingResNet().eval()
    x = torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    return model, (x,)
