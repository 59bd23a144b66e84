"""The live profile check coarse-to-fine: every module call timed in pass 1, the one that stands out against its
peers recorded operator by operator, every other module call module level; the report says why.

Real architectures from `transformers` configs (random weights) with one decoder layer made slow by a loop of
heavy matmuls; the choice itself is unit-tested on fixed numbers (`checks.suspects.standout`), never on timing.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

import torch  # in the test command (.[live,test]): a missing torch fails, never skips
import transformers

import ascend_tui
from ascend_tui.checks.suspects import enclosing, standout
from ascend_tui.live.coarse import MODULE

pytestmark = pytest.mark.live
SMALL = dict(vocab_size=128, bos_token_id=1, eos_token_id=2, pad_token_id=0, attn_implementation="eager")


def gpt2() -> Any:
    return transformers.GPT2Model(transformers.GPT2Config(n_layer=4, n_embd=64, n_head=4, n_positions=64, **SMALL))


def bert() -> Any:
    return transformers.BertModel(transformers.BertConfig(num_hidden_layers=4, hidden_size=64, num_attention_heads=4,
                                                          intermediate_size=128, max_position_embeddings=64, **SMALL))


def llama() -> Any:
    return transformers.LlamaModel(transformers.LlamaConfig(num_hidden_layers=4, hidden_size=64, num_attention_heads=4,
                                                            num_key_value_heads=2, intermediate_size=128,
                                                            max_position_embeddings=64, **SMALL))


# name -> (builder, the decoder layers' path prefix)
ARCHS: dict[str, tuple[Callable[[], Any], str]] = {"gpt2": (gpt2, "h"), "bert": (bert, "encoder.layer"),
                                                   "llama": (llama, "layers")}
SLOW = 2  # the layer made slow


def inputs() -> dict[str, torch.Tensor]:
    return {"input_ids": torch.randint(3, 128, (2, 16), generator=torch.Generator().manual_seed(0))}


def slowed(arch: str) -> tuple[Any, str]:
    """The model with layer `SLOW` running 80 extra 256x256 matmuls before its own forward (tens of ms of CPU time,
    against well under a millisecond for a layer of this size)."""
    torch.manual_seed(0)
    net = ARCHS[arch][0]().eval()
    path = f"{ARCHS[arch][1]}.{SLOW}"
    layer = net.get_submodule(path)
    own = layer.forward
    heavy = torch.randn(256, 256, generator=torch.Generator().manual_seed(1)) / 16

    def forward(hidden: Any, *args: Any, **kwargs: Any) -> Any:
        y = heavy
        for _ in range(80):
            y = torch.tanh(y @ heavy)
        return own(hidden + 0 * y.mean(), *args, **kwargs)

    layer.forward = forward
    return net, path


def module_level(inv: Any, node: Any) -> bool:
    return bool(node.attrs) and node.attrs.get("detail") == MODULE


@pytest.fixture
def one_thread() -> Any:
    """torch on one thread for the test: with a pool, the calling thread's CPU time during a call includes its spin
    or sleep at a parallel region's end, which on a loaded machine can charge a fast layer more than the slow one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_the_slow_layer_is_the_suspect_and_only_its_operators_are_recorded(arch: str, one_thread: None) -> None:
    net, path = slowed(arch)
    inv = ascend_tui.investigate(net, inputs(), checks=("profile",), device="cpu", profile_steps=1, profile_warmup=0,
                                 settings={"profile_coarse": True})
    cap = inv.run.extra["capture"]
    assert cap["detail"] == "module" and cap["passes"] == 2
    window = cap["window"]
    assert window["suspect"] == path
    (why,) = window["why"]
    assert why["measure"] == "time" and why["outlier"] and why["module"] == path and why["peers"] == 3
    assert why["value"] >= 3 * why["peer_median"] and "peers" in why["text"] and path in why["text"]
    assert cap["module_level"]["measured"] == ["time"] and cap["module_level"]["calls"] > 10
    ops = [n for n in inv.graph.nodes if n.kind == "op" and not module_level(inv, n)]
    assert sum(1 for n in ops if n.module == path and n.op_type.startswith("aten.mm")) >= 80, "the loop, op by op"
    assert all(n.module == path or n.module.startswith(path + ".") for n in ops), "operators only in the suspect"
    others = [n for n in inv.graph.nodes if module_level(inv, n) and n.module.startswith(ARCHS[arch][1] + ".")
              and not n.module.startswith(path)]
    assert others and all(n.op_type.startswith("module.") for n in others), "the other layers are module level"
    # the profiled steps' rows: the suspect's on its operators, the rest on the module calls that ran them
    t = inv.profile.kernels
    nodes = [t.label("node", i) for i in range(t.n)]
    assert all(n in inv.graph for n in nodes if n)
    assert any(n and not module_level(inv, inv.graph.node(n)) and inv.graph.node(n).module == path for n in nodes)
    assert inv.profile.extra.get("module_level_rows", 0) > 0


def test_detail_full_keeps_every_operator() -> None:
    net, path = slowed("llama")
    inv = ascend_tui.investigate(net, inputs(), checks=("profile",), device="cpu", detail="full", profile_steps=1,
                                 profile_warmup=0)
    assert "capture" not in inv.run.extra
    assert not any(module_level(inv, n) for n in inv.graph.nodes)


# -- the choice on fixed numbers --------------------------------------------------------------------------------

def calls() -> tuple[list[str], list[int], list[int]]:
    """A model (event 12) of 3 layers (events 3, 7, 11), each an attention (2, 6, 10) with a projection inside
    (1, 5, 9) and an MLP: the layers' own events 0, 4, 8. Returns (class, entered_at, event index) in end order."""
    classes, entered, order = [], [], []
    for layer in range(3):
        base = 4 * layer
        classes += ["MLP", "Linear", "Attention", "Layer"]
        entered += [base, base + 1, base + 1, base]
        order += [base, base + 1, base + 2, base + 3]
    return classes + ["Model"], entered + [0], order + [12]


def test_enclosing_calls_follow_start_and_end() -> None:
    classes, entered, order = calls()
    parent = enclosing(entered, order)
    assert parent[12] == -1 and parent[3] == parent[7] == parent[11] == 12
    assert parent[1] == 2 and parent[2] == 3 and parent[0] == 3 and parent[9] == 10


def test_the_call_far_above_its_peers_is_chosen_and_narrowed_to_what_explains_it() -> None:
    classes, entered, order = calls()
    values = [1.0, 1.0, 3.0, 5.0] * 3 + [16.0]
    values[5], values[6], values[7] = 31.0, 33.0, 35.0  # layer 1's projection is slow: its attention, its layer too
    values[12] = sum(values[i] for i in (3, 7, 11))
    found = standout(values, classes, entered, order)
    assert found is not None and found.outlier and found.index == 5, "the projection, not its attention or layer"
    assert found.median == 1.0 and found.peers == 2


def test_nothing_standing_out_gives_the_largest_own_share() -> None:
    classes, entered, order = calls()
    values = [2.0, 1.0, 1.5, 4.0, 2.1, 1.0, 1.5, 4.0, 1.9, 1.0, 1.5, 4.0, 12.5]
    found = standout(values, classes, entered, order)
    assert found is not None and not found.outlier
    assert found.index == 4, "the MLP with the most time of its own"
    assert standout([], [], [], []) is None
