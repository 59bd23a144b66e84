"""A plant-sensor regression MLP fed raw readings: its float16 MatMul overflows.

The model stands for one trained on standardized readings (its weights are larger than a
fresh initialisation, as trained weights are), deployed behind a pipeline that forgot the
normalization: temperatures in kelvin, pressures in hPa and fan speeds in the hundreds go
straight in. Every layer grows the values a little, and in float16 the `head` MatMul
passes 65504 and turns into Inf. Try:

    ascend-tui check samples/overflow_mlp.py --dtype float16 --checks overflow
"""

from __future__ import annotations

import math

import torch
from torch import nn

SENSORS = 32


class SensorMLP(nn.Module):
    """Readings -> embed -> mix -> head -> out, ReLU between: a plain regression MLP."""

    def __init__(self, sensors: int = SENSORS, hidden: int = 256) -> None:
        super().__init__()
        self.embed = nn.Linear(sensors, hidden)
        self.mix = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, 64)
        self.out = nn.Linear(64, 1)
        self.act = nn.ReLU()

    def forward(self, readings: torch.Tensor) -> torch.Tensor:
        h = self.act(self.embed(readings))
        h = self.act(self.mix(h))
        return self.out(self.act(self.head(h)))


def readings(batch: int = 64, sensors: int = SENSORS, seed: int = 1) -> torch.Tensor:
    """Raw readings: each sensor around its own operating point between 150 and 950, with 5% noise."""
    g = torch.Generator().manual_seed(seed)
    level = torch.linspace(150.0, 950.0, sensors)
    return level + 0.05 * level * torch.randn(batch, sensors, generator=g)


def build() -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(1)
    model = SensorMLP()
    with torch.no_grad():
        for layer in (model.embed, model.mix, model.head, model.out):
            layer.weight.normal_(0.0, 5.0 / math.sqrt(layer.in_features))
            layer.bias.normal_(0.0, 0.1)
    return model.eval(), (readings(),)


def loss(outputs: torch.Tensor) -> torch.Tensor:
    """Mean squared error against a zero target: enough for `--backward` to check the gradients."""
    return (outputs.float() ** 2).mean()
