"""Real investigations for the app tests: small torch models captured on the CPU, plus helpers to read the screen.

Findings the checks would make are added by hand only where a test is about the app's walk,
not about the check; the graphs, ids and statistics are always what capture recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ascend_tui.evidence import ChainLink, Finding, RootCause
from ascend_tui.investigation import Investigation

import torch  # in the test command (.[live,test]): a missing torch fails, never skips
nn = torch.nn


class NanChain(nn.Module):
    """`log(x - 10)` of small inputs is NaN; four more ops carry the NaN to the output."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x: Any) -> Any:
        shifted = x - 10.0
        bad = torch.log(shifted)
        scaled = bad * 2.0
        mixed = self.proj(scaled)
        return mixed.sum()


class EmbedShift(nn.Module):
    """Token ids shifted by an offset before an embedding lookup (kept in range so the CPU run completes)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(16, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, ids: Any) -> Any:
        return self.head(self.embed(ids + 3).mean(dim=1))


def captured(model: Any, inputs: tuple[Any, ...], dtype: str | None = None,
             checks: tuple[str, ...] = ()) -> Investigation:
    """Capture `model` on the CPU, with a float32 reference run when a check compares against one."""
    from ascend_tui.live.runner import investigate

    torch.manual_seed(0)
    return investigate(model, inputs, checks=checks, device="cpu", dtype=dtype, reference="cpu:float32",
                       target="tests")


def nan_investigation() -> Investigation:
    """NanChain captured in float32: the NaN appears at `log.0` and flows to `sum.0`."""
    torch.manual_seed(0)
    return captured(NanChain(), (torch.rand(4, 8),))


def mlp_investigation() -> Investigation:
    """A float16 MLP run by the overflow check against a float32 reference, plus a range finding on its first op."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))
    inv = captured(model, (torch.rand(4, 8) * 100,), dtype="float16", checks=("overflow",))
    first = next(n for n in inv.graph.execution_order() if inv.graph.node(n).module == "0")
    node = inv.graph.node(first)
    inv.add_findings([Finding("overflow", "overflow", "warning", first, node.op_type, node.module, node.index,
                              "output abs max leaves under one bit of float16 headroom")])
    return inv


def memory_investigation() -> tuple[Investigation, str, str]:
    """EmbedShift captured, with the out-of-bounds finding the sanitizer makes on its lookup.

    Returns the investigation, the embedding node and the node that produced the shifted ids.
    """
    torch.manual_seed(0)
    inv = captured(EmbedShift(), (torch.randint(0, 12, (2, 5)),))
    graph = inv.graph
    lookup = next(n for n in graph.execution_order() if graph.node(n).op_type.startswith("aten.embedding"))
    index_producer = graph.producer(lookup, 1)
    assert index_producer is not None
    node, cause = graph.node(lookup), graph.node(index_producer)
    root = RootCause(index_producer, cause.module, "produced the index tensor (ids + 3)",
                     (ChainLink(lookup, node.module, node.op_type, 17.0),
                      ChainLink(index_producer, cause.module, cause.op_type, 17.0)))
    inv.add_findings([Finding("memory", "out_of_bounds", "error", lookup, node.op_type, node.module, node.index,
                              "index 17 is out of range for 16 rows", root_cause=root,
                              metrics={"max_index": 17, "rows": 16})])
    inv.run.checks = ("memory",)
    return inv, lookup, index_producer


def screen_text(app: Any) -> str:
    """What the terminal shows right now, as lines of text."""
    update = app.screen._compositor.render_update(full=True)
    return "\n".join("".join(strip.text for strip in line) for line in update.strips)


def detail_text(app: Any) -> str:
    """The detail pane's full text (including lines scrolled out of view)."""
    from ascend_tui.app.widgets.detail import Detail

    return app.main.query_one(Detail).text


def saved(inv: Investigation, folder: Path, name: str = "run.atui.json") -> Path:
    """Save `inv` where `ascend-tui open` can read it."""
    path = folder / name
    inv.save(path)
    return path
