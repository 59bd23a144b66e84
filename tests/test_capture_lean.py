"""The lean full capture records the same evidence as the plain one it replaced, on real architectures.

Gradient ops learn their forward op from the autograd node the engine is running
(`torch._C._current_autograd_node`) instead of a pre and a post hook on every node; the oracle
here is the hook-based recorder it replaced. Statistics are checked against torch in float64
on copies of the very tensors the recorder measured; source locations never name the caller of
the capture.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytest
import torch
import transformers  # a declared test dependency: missing, this tier fails instead of skipping
from torch import nn

from ascend_tui.live.recording import GradRecorder, Watcher, capture

pytestmark = pytest.mark.live
SMALL = dict(vocab_size=128, bos_token_id=1, eos_token_id=2, pad_token_id=0, attn_implementation="eager")


def gpt2() -> Any:
    return transformers.GPT2Model(transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64, **SMALL))


def llama() -> Any:
    return transformers.LlamaModel(transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                                            num_key_value_heads=2, intermediate_size=128,
                                                            max_position_embeddings=64, **SMALL))


def bert() -> Any:
    return transformers.BertModel(transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                                          intermediate_size=128, max_position_embeddings=64, **SMALL))


ARCHS: dict[str, Callable[[], Any]] = {"gpt2": gpt2, "llama": llama, "bert": bert}


def inputs() -> dict[str, torch.Tensor]:
    ids = torch.randint(3, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 10:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def loss(out: Any) -> Any:
    return out.last_hidden_state.float().pow(2).mean()


class HookedGradRecorder(GradRecorder):
    """The attribution the lean recorder replaced: a pre and a post hook on every mapped autograd node."""

    def hook_backward(self, root: Any = None) -> None:
        nodes = self.mapped_nodes()
        for fn, owner in nodes.items():
            self._hooks.append(fn.register_prehook(self._pre(owner)))
            self._hooks.append(fn.register_hook(self._post))

    def _pre(self, owner: tuple[str, str]) -> Callable[..., None]:
        def pre(_grad_outputs: Any) -> None:
            self.current = owner
            self.module_stack[:] = [owner[1]] if owner[1] else []
        return pre

    def _post(self, _grad_inputs: Any, _grad_outputs: Any) -> None:
        self.current = None
        self.module_stack.clear()


class Copies(Watcher):
    """Keeps a float64 copy of every tensor the recorder measures (a copy: holding the tensor would change autograd)."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, int], torch.Tensor] = {}

    def output(self, node: str, slot: int, tensor: Any) -> None:
        if tensor.layout == torch.strided and not tensor.is_complex():
            self.values[(node, slot)] = tensor.detach().to(torch.float64, copy=True)


def graph_rows(graph: Any) -> tuple[list[tuple[Any, ...]], list[tuple[str, str, int, int]]]:
    nodes = [(n.id, n.op_type, n.module, n.index, n.kind, n.inputs, n.outputs, n.phase, n.module_class,
              dict(n.attrs or {})) for n in graph.nodes]
    return nodes, sorted((e.src, e.dst, e.out_slot, e.in_slot) for e in graph.edges())


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_a_training_step_records_the_graph_the_hooked_recorder_recorded(arch: str) -> None:
    torch.manual_seed(0)
    model = ARCHS[arch]().train()  # dropout on: the RNG is reset before each capture
    torch.manual_seed(1)
    lean = capture(model, inputs(), backward=True, loss=loss, source=False)
    torch.manual_seed(1)
    hooked = capture(model, inputs(), backward=True, loss=loss, source=False, recorder_class=HookedGradRecorder)
    nodes, edges = graph_rows(lean.graph)
    old_nodes, old_edges = graph_rows(hooked.graph)
    assert nodes == old_nodes
    assert edges == old_edges
    backward = [n for n in lean.graph.nodes if n.phase == "backward" and n.kind == "op"]
    owned = [n for n in backward if (n.attrs or {}).get("forward")]
    assert len(owned) > 0.8 * len(backward)  # most gradient ops belong to a forward op ...
    accumulating = [n for n in backward if not (n.attrs or {}).get("forward") and n.op_type == "aten.add"]
    assert accumulating and all(not n.module for n in accumulating)  # ... the engine's adds belong to none
    assert lean.stats.keys() == hooked.stats.keys()
    np.testing.assert_array_equal(np.array([lean.stats.get(*k).to_row() for k in lean.stats.keys()], dtype=float),
                                  np.array([hooked.stats.get(*k).to_row() for k in hooked.stats.keys()], dtype=float))


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_every_measured_output_has_torchs_float64_statistics_and_its_histogram(arch: str) -> None:
    torch.manual_seed(0)
    model = ARCHS[arch]().train()
    copies = Copies()
    torch.manual_seed(1)
    result = capture(model, inputs(), backward=True, loss=loss, observers=[copies])
    assert len(copies.values) > 200
    checked = 0
    for key, x in copies.values.items():
        got = result.stats.get(*key)
        if x.numel() == 0:
            continue
        assert got is not None, key
        finite = x[torch.isfinite(x)]
        assert got.numel == x.numel()
        assert got.nan_count == int(torch.isnan(x).sum()) and got.inf_count == int(torch.isinf(x).sum())
        assert got.zero_count == int((x == 0).sum()), key
        x32 = x.float().double()  # statistics are of the float32 values
        if finite.numel() == x.numel():
            assert math.isclose(got.min, float(x32.min()), rel_tol=0, abs_tol=0), key
            assert math.isclose(got.max, float(x32.max()), rel_tol=0, abs_tol=0), key
            scale = float(x32.abs().sum()) / x.numel()
            assert abs(got.mean - float(x32.mean())) <= 1e-6 * scale + 1e-30, key
            assert math.isclose(got.l2norm, float(torch.linalg.vector_norm(x32)), rel_tol=1e-6), key
        checked += 1
        hist = result.histograms.get(*key) if result.histograms is not None else None
        if hist is not None:  # the bins count the sample's non-zero, non-NaN values, Inf in the top bin
            counts, binned = hist
            assert int(counts.sum()) == binned <= x.numel() - got.nan_count
    assert checked > 200


class Twice(torch.autograd.Function):
    """A user-defined autograd function: its backward is the user's code."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * 2  # the user's backward line


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return Twice.apply(self.fc(x))


def square_loss(out: torch.Tensor) -> torch.Tensor:
    return out.pow(2).sum()  # the loss's line


def test_gradient_ops_never_name_the_code_that_started_the_capture() -> None:
    torch.manual_seed(0)
    result = capture(Net(), (torch.randn(2, 4),), backward=True, loss=square_loss)
    here = __file__
    nodes = [n for n in result.graph.nodes if n.kind == "op"]
    assert all(n.source is None or n.source.function != "test_gradient_ops_never_name_the_code_that_started_the_capture"
               for n in nodes)
    loss_ops = [n for n in nodes if n.source is not None and n.source.function == "square_loss"]
    assert loss_ops and all(n.source.file == here for n in loss_ops)
    user_backward = [n for n in nodes if n.phase == "backward" and n.source is not None]
    assert user_backward and {n.source.function for n in user_backward} == {"backward"}  # Twice.backward
    assert all(n.source.file == here for n in user_backward)
    assert any(n.phase == "backward" and n.source is None for n in nodes)  # the engine's own gradient ops


def test_a_host_batch_of_many_blocks_gives_every_tensor_its_own_row_histogram_and_evidence() -> None:
    from ascend_tui.live.statistics import CHUNK, HostBatch, histogram_row

    g = torch.Generator().manual_seed(3)
    tensors = []
    for i in range(300):  # ~1.2M values: several blocks of CHUNK, tensors of every size the batch takes
        t = torch.randn(int(torch.randint(1, 8193, (1,), generator=g)), generator=g) * 10.0 ** (i % 7 - 3)
        if i % 5 == 0:
            t = t.relu()
        if i % 17 == 0:
            t[0] = float("nan")
        if i % 23 == 0:
            t[-1] = float("-inf")
        tensors.append(t)
    assert sum(t.numel() for t in tensors) > 3 * CHUNK
    batch = HostBatch(torch, flush_below=2.0**-24, flush_dtype="float16")
    slots = [batch.add(t, True) for t in tensors]
    values, hists = batch.finish()
    evidence = batch.evidence()
    for slot, t in zip(slots, tensors):
        x = t.double()
        finite = bool(torch.isfinite(x).all())
        assert values[slot][4:].tolist() == [int(torch.isnan(x).sum()), int(torch.isinf(x).sum()), int((x == 0).sum())]
        if not bool(torch.isnan(x).any()):
            assert values[slot][:2].tolist() == [float(x.min()), float(x.max())]
        if finite:
            assert values[slot][2] == pytest.approx(float(x.sum()), rel=1e-9, abs=1e-9)
            assert values[slot][3] == pytest.approx(float(torch.linalg.vector_norm(x)), rel=1e-9)
        np.testing.assert_array_equal(hists[slot], histogram_row(torch, t))
        nonzero = x != 0
        assert evidence[slot][1] == int(nonzero.sum())
        assert evidence[slot][0] == int((nonzero & (t.half() == 0)).sum())


class RootlessGradRecorder(GradRecorder):
    """The lean recorder when the loss's graph is not known: a post hook on every mapped node."""

    def hook_backward(self, root: Any = None) -> None:
        super().hook_backward(None)


def test_without_the_loss_graph_every_node_gets_the_post_hook_and_the_graph_is_the_same() -> None:
    torch.manual_seed(0)
    model = gpt2().train()
    torch.manual_seed(1)
    lean = capture(model, inputs(), backward=True, loss=loss, source=False)
    torch.manual_seed(1)
    rootless = capture(model, inputs(), backward=True, loss=loss, source=False, recorder_class=RootlessGradRecorder)
    assert graph_rows(lean.graph) == graph_rows(rootless.graph)


class CheckpointedBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


class Checkpointed(nn.Module):
    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.blk, self.out, self.reentrant = CheckpointedBlock(), nn.Linear(8, 1), reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint

        return self.out(checkpoint(self.blk, x, use_reentrant=self.reentrant))


@pytest.mark.parametrize("reentrant", [False, True])
def test_a_checkpointed_block_recomputed_in_backward_is_recorded_as_the_hooked_recorder_did(reentrant: bool) -> None:
    # Its recomputation calls modules inside a gradient node (their pushes must survive), and a reentrant one
    # runs a backward of its own inside that node.
    def run(recorder_class: Any = None) -> Any:
        torch.manual_seed(0)
        model = Checkpointed(reentrant)
        x = torch.randn(4, 8, requires_grad=True)
        return capture(model, (x,), backward=True, source=False, recorder_class=recorder_class)

    lean, hooked = run(), run(HookedGradRecorder)
    assert graph_rows(lean.graph) == graph_rows(hooked.graph)
    recomputed = [n for n in lean.graph.nodes if n.phase == "backward" and n.module.startswith("blk.")]
    assert recomputed


class Hooked(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.a(x))
        h.register_hook(lambda g: g * 0.5)  # the user's own hook on a gradient
        return self.b(h)


def test_an_op_of_a_users_gradient_hook_belongs_to_the_backward_that_consumes_the_gradient() -> None:
    # (The hook-based recorder gave it no forward op: a tensor hook runs before the node's pre hook.)
    torch.manual_seed(0)
    result = capture(Hooked(), (torch.randn(2, 4),), backward=True, source=False)
    scaled = result.graph.node("backward:mul.0")
    assert (scaled.attrs or {}).get("forward") == "relu.0"


def test_a_node_added_with_its_inputs_is_the_graph_add_node_and_add_edge_build() -> None:
    from ascend_tui.graph.opgraph import OpGraph, OpNode

    def nodes() -> list[OpNode]:
        return [OpNode("x", "input", "", -1, kind="input"), OpNode("y", "input", "", -1, kind="input"),
                OpNode("add.0", "aten.add", "", 0), OpNode("mul.0", "aten.mul", "", 1)]

    plain, fed = OpGraph(), OpGraph()
    x, y, add, mul = nodes()
    for n in (x, y, add, mul):
        plain.add_node(n)
    for src, dst, out_slot, in_slot in (("x", "add.0", 0, 0), ("x", "add.0", 0, 1), ("add.0", "mul.0", 0, 0),
                                        ("y", "mul.0", 0, 1)):
        plain.add_edge(src, dst, out_slot, in_slot)
    x, y, add, mul = nodes()
    fed.add_fed(x, [])
    fed.add_fed(y, [])
    fed.add_fed(add, [("x", 0), ("x", 0)])  # add(x, x): two edges, one per input slot
    fed.add_fed(mul, [("add.0", 0), ("y", 0)])
    assert fed.to_json() == plain.to_json()
    assert fed.edge_count() == plain.edge_count() == 4
    with pytest.raises(KeyError):
        fed.add_fed(OpNode("neg.0", "aten.neg", "", 2), [("nowhere", 0)])
    with pytest.raises(ValueError):
        fed.add_fed(OpNode("mul.0", "aten.mul", "", 3), [])
    assert "neg.0" not in fed and len(fed) == 4  # a failed add leaves the graph as it was


def test_a_compiled_function_inside_the_model_is_recorded_op_by_op_as_its_eager_self() -> None:
    """Dynamo never traces the recorder: the mode keeps torch's dynamo-disable wrapper (without it, torch 2.13's
    dynamo traced into `__torch_dispatch__` and stopped at the source walk's `sys._getframe`)."""
    import warnings

    class Net(nn.Module):
        def __init__(self, compiled: bool) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
            body = lambda x: torch.relu(x) * 2  # noqa: E731
            self.body = torch.compile(body, backend="eager") if compiled else body

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.body(self.fc(x))

    torch.manual_seed(0)
    eager, compiled = Net(False), Net(True)
    compiled.load_state_dict(eager.state_dict())
    x = torch.randn(2, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ids = [[n.id for n in capture(m, (x,)).graph.nodes if n.kind == "op"] for m in (eager, compiled)]
    assert ids[0] == ids[1] == ["fc/t.0", "fc/addmm.0", "relu.0", "mul.0"]
    assert not [w for w in caught if "_getframe" in str(w.message)]


class WholeWalk(Watcher):
    """Walks the whole stack for every op (no cache) and keeps what it found, to compare with the recorded source."""

    def __init__(self) -> None:
        self.found: dict[str, Any] = {}
        self.pending: Any = None

    def before(self, call: Any) -> None:
        from ascend_tui.live.frames import user_source

        self.pending = user_source(2)  # from the mode (library frames are skipped, as in the recorder)

    def after(self, call: Any, node: str, out: Any) -> None:
        self.found[node] = self.pending


class CalledTwice(nn.Module):
    """One submodule called from two lines, and a checkpointed block recomputed in backward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.blk = nn.Sequential(nn.Linear(8, 8), nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint

        a = self.fc(x)
        b = self.fc(a.relu())
        return checkpoint(self.blk, a + b, use_reentrant=False)


@pytest.mark.parametrize("arch", ["llama", "twice"])
def test_every_ops_source_is_the_whole_walks_with_the_frames_above_each_module_call_cached(arch: str) -> None:
    torch.manual_seed(0)
    model, args = (ARCHS["llama"](), inputs()) if arch == "llama" else (CalledTwice(), (torch.randn(4, 8),))
    walk = WholeWalk()
    result = capture(model, args, backward=True, loss=loss if arch == "llama" else None, observers=[walk])
    ops = [n for n in result.graph.nodes if n.kind == "op" and n.id in walk.found]
    assert len(ops) > 30
    assert all(n.source == walk.found[n.id] for n in ops), [n.id for n in ops if n.source != walk.found[n.id]][:5]
    assert sum(n.source is not None for n in ops) >= 8
    if arch == "twice":  # the same module from two lines: two locations, one per call
        lines = {n.source.stack for n in ops if n.module == "fc" and n.phase == "forward"}
        assert len(lines) == 2


def _meeting_feeders(root: Any) -> set[Any]:
    """The autograd nodes (reachable from `root`) that send a gradient into an input another node also sends one to."""
    senders: dict[tuple[Any, int], list[Any]] = {}
    seen, todo = {root}, [root]
    while todo:
        fn = todo.pop()
        for nxt, slot in getattr(fn, "next_functions", ()):
            if nxt is None:
                continue
            senders.setdefault((nxt, slot), []).append(fn)
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return {fn for fns in senders.values() if len(fns) > 1 for fn in fns}


def test_one_walk_from_the_loss_maps_the_nodes_and_finds_the_meeting_feeders_two_walks_did() -> None:
    from ascend_tui.live.recording import call_model, recording

    torch.manual_seed(0)
    model = ARCHS["llama"]().train()
    rec = GradRecorder(model, inputs())
    with recording(model, rec, grad=True):
        out = call_model(model, inputs())
        value = loss(out)
        nodes, feeders = rec._mapped_from(value.grad_fn)
        assert nodes == rec.mapped_nodes()
        assert feeders == _meeting_feeders(value.grad_fn) and len(feeders) > 10
        assert sum(1 for k in nodes.values() if k[0].startswith("param:")) > 5
