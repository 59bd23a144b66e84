"""The live memory check coarse-to-fine: each module call's bytes in pass 1, the sanitizer's operators recorded
only in the suspect, and a bad index or an uninitialised read found wherever it is.

Real architectures from `transformers` configs (random weights, 4 layers): one layer made to allocate far more
than its peers; an out-of-range index and a read of never-written memory planted away from it; each compared with
the full capture (`--detail full`).
"""

from __future__ import annotations

from typing import Any

import pytest

import torch  # in the test command (.[live,test]): a missing torch fails, never skips

import ascend_tui
from ascend_tui.live.coarse import MODULE
from test_coarse_profile import ARCHS, inputs
from test_npu_api import fake_npu  # noqa: F401 - the fake torch_npu fixture
from test_real_models import inputs as real_inputs
from test_real_models import model

pytestmark = pytest.mark.live
HUNGRY = 1  # the layer that allocates far more than its peers


def net_of(arch: str) -> Any:
    torch.manual_seed(0)
    return ARCHS[arch][0]().eval()


def layer(net: Any, arch: str, k: int) -> tuple[Any, str]:
    path = f"{ARCHS[arch][1]}.{k}"
    return net.get_submodule(path), path


def wrap(mod: Any, before: Any) -> None:
    """`before(hidden_states)` runs inside the module's call, ahead of its forward (a hook: it survives the copy
    a run in another dtype makes)."""
    def pre(_m: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if args:
            return (before(args[0]), *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": before(kwargs["hidden_states"])}

    mod.register_forward_pre_hook(pre, with_kwargs=True)


def hungry(net: Any, arch: str) -> str:
    """Layer `HUNGRY` makes (and drops) 8 MiB of scratch before its own forward."""
    mod, path = layer(net, arch, HUNGRY)
    wrap(mod, lambda h: h + 0 * torch.ones(1024, 2048).sum())
    return path


def module_level(node: Any) -> bool:
    return bool(node.attrs) and node.attrs.get("detail") == MODULE


def recorded_modules(inv: Any) -> set[str]:
    return {n.module for n in inv.graph.nodes if n.kind == "op" and not module_level(n)}


def investigate(net: Any, **kw: Any) -> Any:
    return ascend_tui.investigate(net, inputs(), checks=("memory",), device="cpu", **kw)


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_the_layer_that_allocates_most_is_the_suspect(arch: str) -> None:
    net = net_of(arch)
    path = hungry(net, arch)
    inv = investigate(net)
    cap = inv.run.extra["capture"]
    assert cap["window"]["suspect"] == path and cap["passes"] == 2
    (why,) = cap["window"]["why"]
    assert why["measure"] == "memory" and why["outlier"] and why["value"] >= 8 * 2 ** 20 > 3 * why["peer_median"]
    assert "storages" in cap["module_level"]["bytes"], "the report says what the CPU's bytes are"
    assert all(m == path or m.startswith(path + ".") for m in recorded_modules(inv))
    assert [f for f in inv.findings if f.severity == "error"] == []


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_an_index_out_of_range_away_from_the_suspect_is_found_at_its_operator(arch: str) -> None:
    def planted() -> tuple[Any, str]:
        net = net_of(arch)
        hungry(net, arch)
        mod, path = layer(net, arch, 3)
        wrap(mod, lambda h: h + 0 * h.index_select(-1, torch.tensor([0, 64, 2])).sum())  # 64 columns: 0..63
        return net, path

    net, path = planted()
    coarse = investigate(net)
    full = investigate(planted()[0], detail="full")
    f, c = ([x for x in inv.findings if x.severity == "error"] for inv in (full, coarse))
    assert [(x.kind, x.module, x.op_type) for x in c] == [(x.kind, x.module, x.op_type) for x in f]
    assert c[0].kind == "out_of_bounds" and c[0].module == path and c[0].op_type.startswith("aten.index_select")
    assert not module_level(coarse.graph.node(c[0].node)), "found again operator by operator"
    assert coarse.run.extra["capture"]["window"]["why"][0]["text"].startswith("the sanitizer's module pass found")


def test_an_uninitialised_read_is_found_and_its_allocation_placed_at_its_module_call() -> None:
    """Layer 0 allocates a buffer with `empty` and writes half of it; layer 2 reads all of it."""
    net = net_of("llama")
    store: dict[str, Any] = {}

    def alloc(h: Any) -> Any:
        buf = torch.empty(4, 8)
        buf[:2] = 1.0
        store["buf"] = buf
        return h

    def read(h: Any) -> Any:
        return h + 0 * store.pop("buf").sum()

    wrap(layer(net, "llama", 0)[0], alloc)
    wrap(layer(net, "llama", 2)[0], read)
    inv = investigate(net)
    (err,) = [f for f in inv.findings if f.severity == "error"]
    assert err.kind == "uninitialized_read" and err.module == "layers.2" and not module_level(inv.graph.node(err.node))
    assert err.metrics["unwritten_read"] == 16
    alloc_node = inv.graph.node(err.metrics["alloc_node"])
    assert module_level(alloc_node) and alloc_node.module == "layers.0", "the allocation, at its module call"


def test_an_index_out_of_range_outside_the_window_is_reported_at_module_level() -> None:
    """Two bad indices: the first becomes the window, the second is reported on its module call's node."""
    net = net_of("llama")
    for k, col in ((1, 70), (3, 90)):
        wrap(layer(net, "llama", k)[0], lambda h, col=col: h + 0 * h.index_select(-1, torch.tensor([col])).sum())
    inv = investigate(net)
    errors = sorted((f for f in inv.findings if f.kind == "out_of_bounds"), key=lambda f: f.index)
    assert [f.module for f in errors] == ["layers.1", "layers.3"]
    assert not module_level(inv.graph.node(errors[0].node))
    assert module_level(inv.graph.node(errors[1].node)) and "module level" in errors[1].message
    assert "90" in errors[1].message


def test_tensors_that_outlive_the_step_are_reported_in_every_layer_as_the_full_capture_does() -> None:
    """Llama's key/value cache outlives the call: the full capture names each layer's attention; so does the module
    pass (followed by the guard mode), at the module call where the operators were not recorded."""
    full, coarse = (investigate(net_of("llama"), detail=d) for d in ("full", "module"))
    kept = [{f.module for f in inv.findings if f.kind == "leak"} for inv in (full, coarse)]
    assert kept[0] and kept[1] == kept[0]
    assert all(f.severity == "info" for f in coarse.findings if f.kind == "leak")


def test_an_overflow_outranks_the_layer_that_allocates_most() -> None:
    """With the overflow check beside it, the window goes to the overflow's origin, not to the hungry layer."""
    def planted() -> Any:
        net = net_of("llama")
        hungry(net, "llama")
        with torch.no_grad():
            net.get_submodule("layers.3.mlp.up_proj").weight.mul_(4e5)
        return net

    kw = dict(checks=("overflow", "memory"), device="cpu", dtype="float16")
    full = ascend_tui.investigate(planted(), inputs(), detail="full", **kw)
    coarse = ascend_tui.investigate(planted(), inputs(), **kw)
    f, c = (next(x for x in inv.findings if x.severity == "error") for inv in (full, coarse))
    assert (c.module, c.op_type, c.kind) == (f.module, f.op_type, f.kind) and c.module.startswith("layers.3.mlp")
    assert not module_level(coarse.graph.node(c.node))
    assert coarse.run.extra["capture"]["window"]["suspect"].startswith("layers.3")
    assert "why" not in coarse.run.extra["capture"]["window"], "no outlier was asked for"


def test_on_the_fake_npu_the_memory_and_profile_checks_run_coarse_to_fine(fake_npu: Any) -> None:
    """The device path: module times with the device synchronised, bytes from the allocator's counter, the guard
    mode clamping the bad token on the 'NPU' as on the CPU."""
    inv = ascend_tui.investigate(model("llama"), real_inputs(bad_token=True), checks=("memory", "profile"),
                                 device="npu", profile_steps=1, profile_warmup=0, settings={"profile_coarse": True})
    assert inv.run.device["backend"] == "npu"
    cap = inv.run.extra["capture"]
    assert sorted(cap["module_level"]["measured"]) == ["memory", "time"] and "allocator" in cap["module_level"]["bytes"]
    (err,) = [f for f in inv.findings if f.severity == "error"]
    assert err.kind == "out_of_bounds" and err.op_type == "aten.embedding"
    assert not module_level(inv.graph.node(err.node))
