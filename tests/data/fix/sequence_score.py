"""A language model scored per sequence: the summed token log-likelihood passes float16's range on long sequences.

`Scorer` takes the log-softmax over the vocabulary, picks each next token's log-probability and
sums them over the sequence: about -4 a token over 20,000 tokens is -83,000, past float16's
-65,504, so the score is -Inf in float16 while every input to the sum is small. Upcasting the
accumulations of `Scorer` (the sum, and the log-softmax) fixes it without touching the weights.
"""

from __future__ import annotations

import torch
from torch import nn


class Scorer(nn.Module):
    """Log-likelihood of each sequence under the logits."""

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logp = logits.log_softmax(-1)
        token = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return token.sum(dim=1)


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 64, width: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, vocab)
        self.score = Scorer()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.score(self.head(self.embed(ids)), ids.roll(-1, dims=1))


def build() -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    ids = torch.randint(0, 64, (2, 20000), generator=torch.Generator().manual_seed(1))
    return TinyLM().eval(), (ids,)
