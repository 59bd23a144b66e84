"""A small token classifier whose ids are shifted by +1 to reserve row 0 for padding, but the table was not grown.

`ascend-tui check samples/shifted_index.py --checks memory` reports an `out_of_bounds` read in
`embed/embedding.0` (id 512 of a 512-row table) and walks back to the `add` that shifted the ids.
On a CPU the unchecked model raises "index out of range"; on an NPU it reads garbage.
"""

from __future__ import annotations

import torch
from torch import nn


class ShiftedTokenClassifier(nn.Module):
    def __init__(self, vocab: int = 512, dim: int = 32, classes: int = 4) -> None:
        super().__init__()
        self.pad_offset = 1  # row 0 is meant to be padding, so every id moves up by one...
        self.embed = nn.Embedding(vocab, dim)  # ...but the table still has `vocab` rows, not vocab + 1
        self.encoder = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.LayerNorm(dim))
        self.head = nn.Linear(dim, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        shifted = ids + self.pad_offset
        x = self.embed(shifted)
        x = x + self.encoder(x)
        return self.head(x.mean(dim=1))


def build() -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    model = ShiftedTokenClassifier().eval()
    ids = torch.randint(0, 512, (2, 12))
    ids[:, -1] = 511  # every sequence ends with the end-of-text id, the last row of the table
    return model, (ids,)
