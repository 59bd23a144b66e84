"""msprobe readers on real dumps: graph shape, inferred edges, statistics, findings, layouts and bad input."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from ascend_tui.errors import InputError
from ascend_tui.offline.open import kind_of, open_path
from ascend_tui.readers.msprobe import dump as msprobe
from ascend_tui.readers.msprobe import overflow as msprobe_overflow
from ascend_tui.readers.msprobe.graph import API_NAME


def _dump(fixtures: Path, name: str) -> Path:
    return fixtures / "msprobe" / name


def _rank(fixtures: Path, name: str) -> Path:
    return next((fixtures / "msprobe" / name / "step0").iterdir())


def _records(rank_dir: Path) -> dict:
    return json.loads((rank_dir / "dump.json").read_text())["data"]


def _producers(inv, node: str) -> list[str]:
    return [e.src for e in inv.graph.producers(node)]


# -- graph from dump_ovf -----------------------------------------------------------------------------


def test_ovf_dump_graph_has_every_api_record_in_order(fixtures: Path) -> None:
    inv = msprobe.load(_dump(fixtures, "dump_ovf"))
    g = inv.graph
    assert g.execution_order() == [
        "fc/linear.0", "mul.0", "exp.0", "fc2/linear.0", "sum.0",
        "backward:sum.0", "backward:fc2/linear.0", "backward:exp.0", "backward:mul.0", "backward:fc/linear.0",
    ]
    api_records = [k for k in _records(_rank(fixtures, "dump_ovf")) if API_NAME.match(k)]
    assert sorted(g.node(n).attrs["msprobe"] for n in g.execution_order()) == sorted(api_records)
    assert g.modules() == ["fc", "fc2"]
    assert {n.id for n in g if n.kind == "param"} == {"param:fc.weight", "param:fc.bias", "param:fc2.weight",
                                                      "param:fc2.bias"}
    assert _producers(inv, "fc/linear.0") == ["input:0", "param:fc.weight", "param:fc.bias"]
    assert _producers(inv, "exp.0") == ["mul.0"]
    assert _producers(inv, "fc2/linear.0") == ["exp.0", "param:fc2.weight", "param:fc2.bias"]
    # the gradient comes from fc2's backward; autograd's saved tensors (exp's input and output) follow it
    assert _producers(inv, "backward:exp.0") == ["backward:fc2/linear.0", "mul.0", "exp.0"]
    assert g.node("backward:exp.0").attrs["edge_match"] == ["stats", "saved", "saved"]
    exp = g.node("exp.0")
    assert exp.op_type == "Torch.exp" and exp.module == "" and exp.phase == "forward"
    assert exp.source is not None and exp.source.short() == "ovf.py:9"
    assert g.node("mul.0").op_type == "Tensor.mul" and g.node("mul.0").attrs["scalars"] == {"input.1": 100.0}
    back = g.node("backward:exp.0")
    assert back.phase == "backward" and back.attrs["forward_node"] == "exp.0" and back.source == exp.source
    assert inv.run.source == "msprobe" and inv.run.dtype == "float32"
    assert inv.run.device["backend"] == "offline"


def test_ovf_statistics_carry_inf_and_nan_tokens(fixtures: Path) -> None:
    inv = msprobe.load(_dump(fixtures, "dump_ovf"))
    mul, exp, fc2 = (inv.stats.get(n) for n in ("mul.0", "exp.0", "fc2/linear.0"))
    assert mul.finite and mul.max == pytest.approx(169.8140869140625) and mul.numel == 32
    assert mul.abs_max == pytest.approx(169.8140869140625)
    assert exp.max == math.inf and exp.inf_count >= 1 and exp.nan_count == 0 and exp.min == 0.0
    assert fc2.nan_count >= 1 and not fc2.finite
    grad = inv.stats.get("backward:exp.0")
    assert grad.inf_count == 2 and grad.nan_count == 0  # +Inf and -Inf present; the NaN mean is inf - inf
    bias = inv.stats.get("param:fc2.bias")
    assert bias.zero_count == 0 and bias.numel == 1
    assert inv.stats.get("mul.0").zero_count == -1  # unknown from Max/Min alone


def test_ovf_overflow_origin_is_the_exp_not_the_later_linear(fixtures: Path) -> None:
    inv = open_path(_dump(fixtures, "dump_ovf"))
    first = inv.first_finding("overflow")
    assert first is not None and first.node == "exp.0" and first.kind == "inf"
    assert first.severity == "error" and first.attribution == "introduced"
    assert not [f for f in inv.findings_for("fc2/linear.0") if f.severity == "error"]
    # the backward pass's Inf comes from the forward overflow through autograd's saved tensors: one origin
    assert [f.node for f in inv.findings if f.severity == "error"] == ["exp.0"]
    assert inv.findings_for("backward:exp.0")[0].attribution == "inherited"
    assert "overflow" in inv.run.checks


# -- the tiny CNN in its four dump variants -----------------------------------------------------------


def test_tensor_dump_fp32_builds_the_cnn_with_backward_and_optimizer(fixtures: Path) -> None:
    inv = msprobe.load(_dump(fixtures, "dump_fp32"))
    g = inv.graph
    records = _records(_rank(fixtures, "dump_fp32"))
    assert len(g.execution_order()) == sum(1 for k in records if API_NAME.match(k))
    assert g.modules() == ["bn1", "conv1", "conv2", "fc"]
    chain = ["conv1/conv2d.0", "bn1/batch_norm.0", "relu.0", "max_pool2d.0", "conv2/conv2d.0", "relu.1",
             "max_pool2d.1", "fc/linear.0", "cross_entropy.0"]
    for src, dst in zip(chain, chain[1:]):
        assert g.producer(dst, 0) == src, dst
    assert g.node("fc/linear.0").attrs["edge_match"][0] == "view"  # torch.flatten is not in dump.json
    back = ["backward:max_pool2d.1", "backward:relu.1", "backward:conv2/conv2d.0", "backward:max_pool2d.0",
            "backward:relu.0", "backward:bn1/batch_norm.0", "backward:conv1/conv2d.0"]
    for src, dst in zip(back, back[1:]):
        assert g.producer(dst, 0) == src, dst
    bn = _producers(inv, "bn1/batch_norm.0")
    assert bn[3:] == ["param:bn1.weight", "param:bn1.bias"]
    assert bn[1].startswith("input:") and bn[2].startswith("input:")  # running stats are buffers, not params
    optim = [n for n in g if n.phase == "optimizer"]
    assert len(optim) == 8 and all(_producers(inv, n.id)[0].startswith("param:") for n in optim)
    conv = inv.stats.get("conv1/conv2d.0")
    out = records["Functional.conv2d.0.forward"]["output"][0]
    assert (conv.max, conv.min, conv.mean, conv.l2norm) == (out["Max"], out["Min"], out["Mean"], out["Norm"])
    assert conv.numel == 4 * 8 * 16 * 16
    assert g.node("conv1/conv2d.0").source.short() == "dump_cnn.py:22"


def test_task_and_summary_mode_do_not_change_the_forward_graph(fixtures: Path) -> None:
    def forward_edges(name: str) -> set[tuple[str, str, int, int]]:
        g = msprobe.load(_dump(fixtures, name)).graph
        return {(e.src, e.dst, e.out_slot, e.in_slot) for e in g.edges() if g.node(e.dst).phase == "forward"}

    tensor = forward_edges("dump_fp32")
    assert tensor == forward_edges("dump_statistics_fp32") == forward_edges("dump_md5_fp32")
    md5 = msprobe.load(_dump(fixtures, "dump_md5_fp32")).graph
    assert md5.node("relu.0").attrs["edge_confidence"] == [0.99]  # CRC-32 agreed as well as the statistics


def test_bf16_autocast_dump(fixtures: Path) -> None:
    inv = msprobe.load(_dump(fixtures, "dump_bf16"))
    g = inv.graph
    assert inv.run.dtype == "bfloat16"
    assert g.node("conv1/conv2d.0").outputs[0].dtype == "bfloat16"
    ce = g.node("cross_entropy.0")
    assert g.producer(ce.id, 0) == "fc/linear.0" and ce.attrs["edge_match"][0] == "cast"  # out.float()
    assert ce.inputs[0].dtype == "float32" and g.node("fc/linear.0").outputs[0].dtype == "bfloat16"


def test_resnet50_excerpt(fixtures: Path, tmp_path: Path) -> None:
    rank = tmp_path / "dump" / "step0" / "rank0"
    rank.mkdir(parents=True)
    for part in ("dump", "construct", "stack"):
        shutil.copy(fixtures / "graphs" / f"msprobe_{part}_sample.json", rank / f"{part}.json")
    inv = open_path(tmp_path / "dump")
    g = inv.graph
    assert g.execution_order() == ["conv1/conv2d.0", "bn1/batch_norm.0", "relu/relu.0", "cross_entropy.0"]
    assert g.node("relu/relu.0").module_class == "ReLU"
    assert g.producer("bn1/batch_norm.0", 0) == "conv1/conv2d.0" and g.producer("relu/relu.0", 0) == "bn1/batch_norm.0"
    assert _producers(inv, "conv1/conv2d.0")[1] == "param:conv1.weight"
    assert all(p.startswith("input:") for p in _producers(inv, "cross_entropy.0"))  # its producers are cut out
    assert g.node("conv1/conv2d.0").source.file.endswith("precision_sample.py")


def test_module_level_dump_makes_module_nodes(fixtures: Path, tmp_path: Path) -> None:
    rank = _rank(fixtures, "dump_fp32")
    dump = json.loads((rank / "dump.json").read_text())
    dump["level"] = "L0"
    dump["data"] = {k: v for k, v in dump["data"].items() if k.startswith("Module.")}
    construct = {k: v for k, v in json.loads((rank / "construct.json").read_text()).items() if k.startswith("Module.")}
    (tmp_path / "dump.json").write_text(json.dumps(dump))
    (tmp_path / "construct.json").write_text(json.dumps(construct))
    g = msprobe.load(tmp_path).graph
    assert g.execution_order() == ["conv1/Conv2d.0", "bn1/BatchNorm2d.0", "conv2/Conv2d.0", "fc/Linear.0",
                                   "backward:fc/Linear.0", "backward:conv2/Conv2d.0", "backward:bn1/BatchNorm2d.0",
                                   "backward:conv1/Conv2d.0"]
    bn = g.node("bn1/BatchNorm2d.0")
    assert bn.op_type == "Module.BatchNorm2d" and bn.module == "bn1" and bn.module_class == "BatchNorm2d"
    assert g.producer(bn.id, 0) == "conv1/Conv2d.0"
    assert {e.src for e in g.producers(bn.id)} == {"conv1/Conv2d.0", "param:bn1.weight", "param:bn1.bias"}


def test_progress_and_cancel(fixtures: Path) -> None:
    import threading

    from ascend_tui.errors import Cancelled

    seen: list[tuple[str, int, int | None]] = []
    msprobe.load(_dump(fixtures, "dump_fp32"), progress=lambda *a: seen.append(a))
    assert seen[0][0] == "reading dump.json" and seen[-1][1] == seen[-1][2] == 27
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        msprobe.load(_dump(fixtures, "dump_fp32"), cancel=cancel)


# -- layouts -------------------------------------------------------------------------------------------


def test_every_layout_opens_the_same_graph(fixtures: Path) -> None:
    rank = _rank(fixtures, "dump_ovf")
    ids = None
    for path in (rank.parent.parent, rank.parent, rank, rank / "dump.json"):
        assert kind_of(path) == "msprobe dump"
        got = [n.id for n in msprobe.load(path).graph]
        assert ids is None or got == ids
        ids = got


def test_several_ranks_and_steps_pick_the_first_with_a_note(fixtures: Path, tmp_path: Path) -> None:
    src = _rank(fixtures, "dump_ovf")
    for step, rank in (("step0", "rank10"), ("step0", "rank2"), ("step1", "rank0")):
        shutil.copytree(src, tmp_path / step / rank)
    inv = msprobe.load(tmp_path)
    notes = " ".join(inv.run.extra["notes"])
    assert inv.run.extra["rank_dir"].endswith("step0/rank2")
    assert "2 steps" in notes and "2 ranks" in notes


def test_old_stack_format(fixtures: Path, tmp_path: Path) -> None:
    shutil.copytree(_rank(fixtures, "dump_ovf"), tmp_path / "rank0")
    (tmp_path / "rank0" / "stack.json").write_text(json.dumps({
        "Torch.exp.0.forward": ["File /home/user/venv/lib/python3.11/site-packages/torch/x.py, line 3, in f, \n y",
                                "File /home/user/model.py, line 41, in forward, \n return torch.exp(x)"]}))
    g = msprobe.load(tmp_path / "rank0").graph
    assert g.node("exp.0").source.short() == "model.py:41" and g.node("exp.0").source.function == "forward"
    assert g.node("mul.0").source is None


def test_exact_counts_from_tensor_payloads(tmp_path: Path) -> None:
    import torch
    data_dir = tmp_path / "dump_tensor_data"
    data_dir.mkdir()
    x = torch.tensor([1.0, float("inf"), float("inf"), 0.0, float("nan"), 2.0])
    torch.save(x, data_dir / "Torch.exp.0.forward.output.0.pt")
    leaf = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [6], "Max": math.nan, "Min": math.nan,
            "Mean": math.nan, "Norm": math.nan, "requires_grad": False}
    dump = {"task": "tensor", "level": "L1", "framework": "pytorch", "dump_data_dir": "/elsewhere", "data": {
        "Torch.exp.0.forward": {"input_args": [dict(leaf, Max=1.0, Min=0.0, Mean=0.5, Norm=1.0)], "input_kwargs": {},
                                "output": [dict(leaf, data_name="Torch.exp.0.forward.output.0.pt")]}}}
    (tmp_path / "dump.json").write_text(json.dumps(dump))
    inv = msprobe.load(tmp_path)
    s = inv.stats.get("exp.0")
    assert (s.nan_count, s.inf_count, s.zero_count) == (1, 2, 1)
    assert inv.run.extra["exact_counts_from_payloads"] == 1


# -- bad input -----------------------------------------------------------------------------------------


@pytest.fixture
def broken(fixtures: Path, tmp_path: Path) -> Path:
    rank = tmp_path / "step0" / "rank0"
    shutil.copytree(_rank(fixtures, "dump_ovf"), rank)
    return rank


@pytest.mark.parametrize("content, expect", [
    (None, "invalid JSON"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe junk", "not a text file"),
    (b'{"task": "statistics", "data": [1, 2]}', "not an msprobe dump.json"),
    (b'[{"data": {}}]', "not an msprobe dump.json"),
    (b'{"data": {"Torch.exp.0.forward": {"input_args": [{"dtype": "torch.float32", "shape": "4x8"}]}}}',
     "Torch.exp.0.forward.input.0"),
    (b'{"data": {"Torch.exp.0.forward": [1]}}', "Torch.exp.0.forward"),
])
def test_bad_dump_json_is_one_input_error_naming_the_file(broken: Path, content: bytes | None, expect: str) -> None:
    dump = broken / "dump.json"
    text = dump.read_bytes()
    dump.write_bytes(text[: len(text) // 2] if content is None else content)
    with pytest.raises(InputError) as err:
        open_path(broken.parent.parent)
    assert str(dump) in str(err.value) and expect in str(err.value) and "\n" not in str(err.value)
    if content is None:
        assert err.value.where is not None  # line:column of the truncation


def test_bad_construct_and_stack_name_their_file(broken: Path) -> None:
    (broken / "construct.json").write_text('{"Torch.exp.0.forward": 5}')
    with pytest.raises(InputError, match="construct.json"):
        msprobe.load(broken)
    (broken / "construct.json").write_text("{}")
    (broken / "stack.json").write_text('{"0": "not a pair"}')
    with pytest.raises(InputError, match="stack.json"):
        msprobe.load(broken)


def test_empty_folder_is_an_input_error(tmp_path: Path) -> None:
    assert not msprobe.sniff(tmp_path) and kind_of(tmp_path) is None
    with pytest.raises(InputError, match=str(tmp_path)):
        msprobe.load(tmp_path)
    with pytest.raises(InputError, match=str(tmp_path)):
        open_path(tmp_path)


# -- overflow_check output -----------------------------------------------------------------------------


def _report(fixtures: Path) -> Path:
    return next((fixtures / "msprobe" / "msprobe_output" / "overflow_check").glob("anomaly_analyze_*.json"))


def test_overflow_check_alone_gives_the_flagged_op(fixtures: Path, tmp_path: Path) -> None:
    report = tmp_path / "a" / "b" / "out" / _report(fixtures).name  # no dump within three folders
    report.parent.mkdir(parents=True)
    shutil.copy(_report(fixtures), report)
    assert kind_of(report.parent) == "msprobe overflow_check"
    inv = open_path(report.parent)
    assert inv.graph.execution_order() == ["exp.0"]
    assert [n.kind for n in inv.graph if n.is_placeholder] == ["input"]
    errors = [f for f in inv.findings if f.severity == "error"]
    assert len(errors) == 1
    f = errors[0]
    assert (f.check, f.kind, f.node, f.attribution) == ("overflow", "inf", "exp.0", "introduced")
    assert f.metrics["input_abs_max"] == pytest.approx(169.8140869140625)
    assert "not found nearby" in " ".join(inv.run.extra["notes"])


def test_overflow_check_merges_onto_the_dump_it_analysed(fixtures: Path) -> None:
    inv = open_path(_report(fixtures))
    assert len(inv.graph.execution_order()) == 10  # the whole dump_ovf graph, found next to the result
    assert "merged onto the dump" in " ".join(inv.run.extra["notes"])
    errors = [f for f in inv.findings if f.severity == "error" and f.attribution == "introduced"
              and inv.graph.node(f.node).phase == "forward"]
    assert [f.node for f in errors] == ["exp.0"]
    assert any(f.metrics.get("source") == msprobe_overflow.SOURCE or f.metrics.get("confirmed_by")
               for f in inv.findings_for("exp.0"))


def test_overflow_check_with_an_explicit_dump(fixtures: Path, tmp_path: Path) -> None:
    shutil.copy(_report(fixtures), tmp_path)
    inv = msprobe_overflow.load(tmp_path, dump=_dump(fixtures, "dump_ovf"))
    assert "fc2/linear.0" in inv.graph and inv.first_finding("overflow").node == "exp.0"


def test_bad_overflow_check_result(tmp_path: Path) -> None:
    bad = tmp_path / "anomaly_analyze_1.json"
    bad.write_text('{"rank_0": [{"op_name": 3}]}')
    with pytest.raises(InputError, match="anomaly_analyze_1.json"):
        open_path(bad)


# -- offline agrees with live --------------------------------------------------------------------------


def test_offline_dump_and_live_capture_name_the_same_origin(fixtures: Path) -> None:
    import torch
    from ascend_tui import investigate
    from ascend_tui.checks.overflow import op_name

    class Ovf(torch.nn.Module):
        """The model of fixtures/msprobe/ovf.py."""

        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)
            self.fc2 = torch.nn.Linear(8, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc2(torch.exp(self.fc(x) * 100.0))

    torch.manual_seed(0)
    model, x = Ovf(), torch.randn(4, 8)
    live = investigate(model, (x,), checks=("overflow",), device="cpu", dtype="float32", reference=None)
    offline = open_path(_dump(fixtures, "dump_ovf"))
    origins = []
    for inv in (live, offline):
        f = inv.first_finding("overflow")
        assert f is not None and f.severity == "error" and f.attribution == "introduced"
        origins.append((f.module, op_name(f.op_type), f.kind))
    assert origins[0] == origins[1] == ("", "exp", "inf")


def test_reading_dumps_needs_neither_torch_nor_textual(fixtures: Path) -> None:
    import subprocess
    import sys

    code = ("import sys; from ascend_tui.offline.open import open_path; "
            f"open_path({str(_dump(fixtures, 'dump_fp32'))!r}); open_path({str(_report(fixtures))!r}); "
            "print(sorted(m for m in ('torch', 'textual') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
