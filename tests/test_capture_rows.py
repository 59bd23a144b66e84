"""How the recorder's graph grows: a graph read after every op (an observer's `after`) is the same graph as the one read
at the end (nodes, edge order, statistics); a placeholder whose id an op already took takes a suffix. Kept as the
guard for any recorder that builds nodes later than per op (issue 24's fifth round tried one and dropped it)."""

from __future__ import annotations

import torch  # in the test command (.[live,test]): a missing torch fails, never skips
from torch import nn

from ascend_tui.live.recording import Watcher, capture


class Net(nn.Module):
    """Views, an in-place op, a parameter used twice, a buffer and a constant: every kind of input an op reads."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.register_buffer("scale", torch.full((8,), 0.5))
        self.shift = torch.ones(8)  # neither parameter nor buffer: a constant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x).view(2, 2, 8).transpose(0, 1)
        h = h.contiguous().relu_()
        h = self.fc(self.norm(h.reshape(4, 8))) * self.scale
        return (h + self.shift).sum(-1)


class ReadsGraph(Watcher):
    """Reads the recorder's graph after every op, as an observer may: the rows made so far become nodes each time."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def after(self, call, node: str, out) -> None:
        graph = call.recorder.graph
        self.seen.append((node, len(graph)))
        assert graph.node(node).id == node  # the op just recorded is a node already


def layout(graph) -> tuple:
    nodes = [(n.id, n.op_type, n.module, n.index, n.kind, n.inputs, n.outputs, n.phase, n.module_class,
              dict(n.attrs or {})) for n in graph.nodes]
    edges = [(e.src, e.dst, e.out_slot, e.in_slot) for e in graph.edges()]
    ins = [[(e.src, e.out_slot, e.in_slot) for e in graph.producers(n.id)] for n in graph.nodes]
    outs = [[(e.dst, e.out_slot, e.in_slot) for e in graph.consumers(n.id)] for n in graph.nodes]
    return nodes, edges, ins, outs, graph.edge_count()


def test_a_graph_read_after_every_op_is_the_graph_built_at_the_end() -> None:
    torch.manual_seed(0)
    model, x = Net(), torch.randn(4, 8)
    at_end = capture(model, (x.clone().requires_grad_(),), backward=True)  # (a fresh input each: no `.grad` yet)
    watcher = ReadsGraph()
    every_op = capture(model, (x.clone().requires_grad_(),), backward=True, observers=[watcher])
    assert layout(at_end.graph) == layout(every_op.graph)
    assert at_end.stats.to_json() == every_op.stats.to_json()
    assert len(watcher.seen) == sum(1 for n in at_end.graph.nodes if n.kind == "op")
    assert all(b > a for (_, a), (_, b) in zip(watcher.seen, watcher.seen[1:]))  # the graph grew at every op
    g = at_end.graph
    relu = next(n for n in g.nodes if n.op_type == "aten.relu_")
    assert g.producer(relu.id, 0) == next(n.id for n in g.nodes if n.op_type == "aten.clone")
    assert [e.src for e in g.producers("fc/addmm.0")] == ["param:fc.bias", "input:0", "fc/t.0"]
    ids = [n.id for n in g.nodes]
    assert ids.index("param:fc.weight") < ids.index("fc/t.0")  # a placeholder just before its first reader
    assert {"buffer:scale", "const:0"} <= set(ids)


class Clash(nn.Module):
    """A submodule named `param:w` (its first op's id is `param:w/add.0`) and a parameter `0` of a submodule named
    `w/add` (whose placeholder id would be the same), read after the op: the placeholder takes a suffix, as it
    always did."""

    def __init__(self) -> None:
        super().__init__()
        self.add_module("param:w", Inner())
        holder = nn.Module()
        holder.register_parameter("0", nn.Parameter(torch.ones(3)))
        self.add_module("w/add", holder)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = getattr(self, "param:w")(x)
        return h * getattr(getattr(self, "w/add"), "0")


class Inner(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


def test_a_placeholder_id_an_op_took_is_renamed() -> None:
    r = capture(Clash(), (torch.randn(3),))
    ids = [n.id for n in r.graph.nodes]
    assert ids.count("param:w/add.0") == 1 and r.graph.node("param:w/add.0").kind == "op"
    renamed = [i for i in ids if i.startswith("param:w/add.0#")]
    assert len(renamed) == 1 and r.graph.node(renamed[0]).kind == "param"
    mul = next(n for n in r.graph.nodes if n.op_type == "aten.mul")
    assert [e.src for e in r.graph.producers(mul.id)] == ["param:w/add.0", renamed[0]]
