"""The demo behind `ascend-tui demo`: a small sensor model with three real bugs, one per view.

1. Raw, un-normalized sensor readings (values in the thousands) go through an MLP and a
   self-attention pooling step; in float16 the `scores = h @ h.T` matmul overflows (Inf),
   and the softmax after it turns the Inf into NaN.
2. Token ids are shifted by one to "reserve id 0 for padding", but the table was not grown:
   the largest id now reads one row past the end of the embedding table.
3. `self.history` keeps every call's activations "for debugging", so memory grows with each
   iteration: a leak.

Run it with `ascend-tui demo`, or by hand:
`ascend-tui check samples/demo.py --checks overflow,memory --dtype float16 --iterations 3 --reference none`
(no float32 reference: the float16 run shows the Inf by itself).
"""

from __future__ import annotations

import torch
from torch import nn

VOCAB = 32
FEATURES = 16
HIDDEN = 64
BATCH = 8
TOKENS = 4


class Pool(nn.Module):
    """Self-attention pooling over the batch: each row becomes a softmax-weighted mix of all rows."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        scores = h @ h.transpose(0, 1)
        return scores.softmax(dim=-1) @ h


class SensorModel(nn.Module):
    """Embed a few tokens, add raw sensor features, run an MLP and a pooling step, classify."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, FEATURES)
        self.mlp = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU())
        self.pool = Pool()
        self.head = nn.Linear(HIDDEN, 4)
        self.history: list[torch.Tensor] = []

    def forward(self, tokens: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        ids = tokens + 1  # bug 2: "reserve 0 for padding" without growing the table
        context = self.embed(ids).mean(dim=1)
        h = self.mlp(features + context)  # bug 1: features are never normalized
        self.history.append(h)  # bug 3: every call's activations stay alive
        return self.head(self.pool(h))


def build() -> tuple[nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    """The model and one batch: token ids that include the last valid id, and sensor readings up to ~4000."""
    torch.manual_seed(0)
    model = SensorModel().eval()
    tokens = torch.randint(0, VOCAB, (BATCH, TOKENS))
    tokens[0, 0] = VOCAB - 1
    features = torch.rand(BATCH, FEATURES) * 4000.0
    return model, (tokens, features)
