"""Real architectures: small random-weight GPT-2, BERT and Llama built from `transformers` configs (no downloads).

Clean runs in float32, float16 and bfloat16 must give no errors and no false warnings; an injected
query scale, a LayerNorm weight that overflows and an out-of-range token id must each be found at
the right operator with the right root cause, with the padded attention mask never in the way.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

import torch  # in the test command (.[live,test]): a missing torch fails, never skips
import transformers  # noqa: E402  - a declared test dependency: missing, this tier fails instead of skipping

import ascend_tui  # noqa: E402
from ascend_tui.evidence import Finding  # noqa: E402

pytestmark = pytest.mark.live
SMALL = dict(vocab_size=128, bos_token_id=1, eos_token_id=2, pad_token_id=0, attn_implementation="eager")


def gpt2() -> Any:
    return transformers.GPT2Model(transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64, **SMALL))


def bert() -> Any:
    return transformers.BertModel(transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                                          intermediate_size=128, max_position_embeddings=64, **SMALL))


def llama() -> Any:
    return transformers.LlamaModel(transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                                            num_key_value_heads=2, intermediate_size=128,
                                                            max_position_embeddings=64, **SMALL))


# name -> (builder, the query projection, a LayerNorm in the second half, the token embedding)
ARCHS: dict[str, tuple[Callable[[], Any], str, str, str]] = {
    "gpt2": (gpt2, "h.0.attn.c_attn", "h.1.ln_2", "wte"),
    "bert": (bert, "encoder.layer.0.attention.self.query", "encoder.layer.0.output.LayerNorm",
             "embeddings.word_embeddings"),
    "llama": (llama, "layers.0.self_attn.q_proj", "layers.1.post_attention_layernorm", "embed_tokens"),
}


def model(arch: str) -> Any:
    torch.manual_seed(0)
    return ARCHS[arch][0]().eval()


def inputs(bad_token: bool = False) -> dict[str, torch.Tensor]:
    """Two sequences of 16 tokens, the second padded after 10: the attention mask holds finfo.min."""
    ids = torch.randint(3, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    if bad_token:
        ids[0, 3] = 200  # past the 128-row embedding
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 10:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def loud(inv: Any) -> list[Finding]:
    return [f for f in inv.findings if f.severity in ("error", "warning")]


def is_mask(inv: Any, node: str) -> bool:
    return any(f.kind == "mask" and f.node == node for f in inv.findings) or \
        inv.graph.node(node).op_type.split(".")[-1] in ("scalar_tensor", "where", "full", "masked_fill")


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_clean_runs_have_no_errors_and_no_false_warnings(arch: str) -> None:
    net = model(arch)
    for dtype in ("float32", "float16", "bfloat16"):
        inv = ascend_tui.investigate(net, inputs(), checks=("overflow",), device="cpu", dtype=dtype)  # module level
        assert loud(inv) == [], (arch, dtype, [(f.severity, f.node, f.message) for f in loud(inv)])
        inv = ascend_tui.investigate(net, inputs(), checks=("overflow",), device="cpu", dtype=dtype, detail="full")
        assert loud(inv) == [], (arch, dtype, [(f.severity, f.node, f.message) for f in loud(inv)])
        assert [f.severity for f in inv.findings if f.kind == "mask"] == ["info"], "the padding mask is seen as one"


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_injected_query_scale_is_found_at_the_query_projection(arch: str) -> None:
    net = model(arch)
    query = net.get_submodule(ARCHS[arch][1])
    with torch.no_grad():
        (query.weight[:, :64] if arch == "gpt2" else query.weight).mul_(4e5)  # fits float16; its products do not
    # every operator, so the mask the Inf meets downstream is on the graph (tests/test_coarse.py: the default run)
    inv = ascend_tui.investigate(net, inputs(), checks=("overflow",), device="cpu", dtype="float16", detail="full")
    first = next(f for f in inv.findings if f.severity == "error")
    assert first.module == ARCHS[arch][1] and first.kind == "inf"
    assert first.root_cause.node == first.node and f"param:{ARCHS[arch][1]}.weight" in first.root_cause.reason
    assert not any(is_mask(inv, link.node) for f in inv.findings if f.root_cause for link in f.root_cause.chain)
    assert not any(is_mask(inv, f.node) for f in loud(inv)), "the mask is never an error"
    assert "meets the mask" in first.message


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_layernorm_weight_overflow_is_found_at_the_norm_with_the_mask_never_first(arch: str) -> None:
    net = model(arch)
    with torch.no_grad():
        net.get_submodule(ARCHS[arch][2]).weight.fill_(3e4)  # fits float16; normalized values times it do not
    inv = ascend_tui.investigate(net, inputs(), checks=("overflow",), device="cpu", dtype="float16")
    errors = [f for f in inv.findings if f.severity == "error"]
    assert errors and errors[0].module == ARCHS[arch][2] and errors[0].kind == "inf"
    assert errors[0].root_cause.node == errors[0].node
    assert f"param:{ARCHS[arch][2]}.weight" in errors[0].root_cause.reason
    assert not any(is_mask(inv, f.node) for f in errors)


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_out_of_range_token_id_is_found_at_the_embedding(arch: str) -> None:
    inv = ascend_tui.investigate(model(arch), inputs(bad_token=True), checks=("memory",), device="cpu")
    (err,) = [f for f in inv.findings if f.severity == "error"]
    assert err.kind == "out_of_bounds" and err.module == ARCHS[arch][3] and err.op_type == "aten.embedding"
    assert err.root_cause.node == "input:input_ids" and "200" in err.message
