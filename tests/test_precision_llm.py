"""Real msprobe 26.2.0 statistics dumps of a random-weight 2-layer Llama training step (tests/data/llm_dumps).

Made by tests/data/llm_dumps/make_dumps.py: the same weights in float32, cast to bfloat16 and to float16;
a bf16 run with one weight scaled by 1.05, one with noise added after a module, backward-only dumps and a
two-step folder whose bf16 run scales that weight before step 1 only.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ascend_tui.cli.main import main
from ascend_tui.offline.compare import compare, compare_steps

LLM = Path(__file__).parent / "data" / "llm_dumps"
SCALED = "model.layers.1.self_attn.o_proj"


def _same(ours: str, theirs: str) -> bool:
    """Equal cells, or numbers (percentages too) within 1e-9 relative."""
    if ours.strip() == theirs.strip():
        return True
    try:
        x, y = float(ours.strip().rstrip("%")), float(theirs.strip().rstrip("%"))
    except ValueError:
        return False
    return abs(x - y) <= 1e-9 * max(1.0, abs(y))


def _errors(result) -> list:
    return [f for f in result.investigation.findings if f.severity in ("error", "warning")]


def test_the_clean_bf16_vs_fp32_training_step_gives_no_error_forward_and_backward() -> None:
    result = compare(LLM / "bf16", LLM / "fp32", workers=1)
    rank = result.ranks[0]
    assert rank.mode == "statistics" and len(rank.rows) > 600
    assert any(".backward." in r.target.name for r in rank.rows if r.band is not None)  # backward takes part
    assert any(r.target.section == "param_grad" and r.band is not None for r in rank.rows)  # parameter gradients
    assert not _errors(result) and "first_node" not in result.summary
    assert all(r.result == "pass" for r in rank.rows)
    # weights are the fp32 weights cast: every parameter is inside the bf16 band, said so
    params = [r for r in rank.rows if r.target.section == "parameters" and r.band is not None]
    assert params and all(r.band.within and "expected bfloat16 rounding" in r.messages[-1] for r in params)
    # the error's growth with depth is there, forward and backward, in units of bf16's u
    g = rank.growth
    assert g["dtype"] == "bfloat16" and {m["phase"] for m in g["modules"]} == {"forward", "backward"}
    assert [m["module"] for m in g["modules"] if m["phase"] == "forward"][:4] == \
        ["model.embed_tokens", "model.rotary_emb", "model.layers.0", "model.layers.1"]


def test_float16_vs_float32_gives_no_error() -> None:
    result = compare(LLM / "fp16", LLM / "fp32", workers=1)
    assert result.ranks[0].growth["dtype"] == "float16"
    assert not _errors(result)


def test_a_weight_scaled_by_5_percent_is_the_first_finding_and_names_its_module() -> None:
    result = compare(LLM / "bf16_scaled", LLM / "fp32", workers=1)
    first = result.investigation.first_finding("precision")
    assert first is not None and first.kind == "parameter-mismatch" and first.module == SCALED
    assert first.metrics["times_band"] > 10  # 5% against bf16's 0.39%
    assert result.summary["first_node"] == f"param:{SCALED}.weight"
    errors = _errors(result)
    assert [f.node for f in errors] == [f"param:{SCALED}.weight"]  # nothing else is introduced
    lin = next(f for f in result.investigation.findings if f.node == f"{SCALED}/linear.0")
    assert lin.attribution == "inherited" and lin.root_cause.node == f"param:{SCALED}.weight"


def test_noise_added_after_a_module_is_introduced_there_and_everything_after_inherits() -> None:
    result = compare(LLM / "bf16_noise", LLM / "fp32", workers=1)
    errors = _errors(result)
    assert len(errors) == 1
    first = errors[0]
    assert first.attribution == "introduced" and first.module == "model.layers.0.mlp" and first.severity == "error"
    after = [f for f in result.investigation.findings if f is not first]
    assert after and all(f.attribution == "inherited" and f.root_cause.node == first.node for f in after)
    assert any(f.node.startswith("backward:") for f in after)  # the backward pass inherits it too
    assert all(f.index >= first.index for f in after if not f.node.startswith("backward:"))
    top = result.ranks[0].growth["growth_ranking"][0]  # ranked by growth beyond what the inputs carried
    assert top["node"] == first.node and top["verdict"] == "introduced" and top["growth_units"] > 8


def test_backward_only_dumps_compare_with_the_band() -> None:
    result = compare(LLM / "bf16_backward", LLM / "fp32_backward", workers=1)
    rank = result.ranks[0]
    assert rank.rows and all(".forward" not in r.target.entry for r in rank.rows)
    assert sum(1 for r in rank.rows if r.band is not None) > 100
    assert not _errors(result)


def test_a_multi_step_folder_says_which_step_first_leaves_the_band(capsys) -> None:
    result = compare_steps(LLM / "bf16_steps_late", LLM / "fp32_steps", workers=1)
    steps = result.summary["steps"]
    assert [s["step"] for s in steps] == ["step0", "step1"]
    assert not steps[0]["diverges"] and steps[1]["diverges"]
    assert result.summary["first_step"] == "step1" and steps[1]["first_module"] == SCALED
    assert main(["compare", str(LLM / "bf16_steps_late"), str(LLM / "fp32_steps"), "-q", "--workers", "1"]) == 1
    out = capsys.readouterr().out
    assert "step0: within" in out and "first step to diverge: step1" in out


def test_statistics_csv_keeps_msprobes_result_and_adds_our_verdict(tmp_path: Path) -> None:
    out = tmp_path / "c.csv"
    assert main(["compare", str(LLM / "bf16"), str(LLM / "fp32"), "--csv", str(out), "-q"]) == 0
    rows = list(csv.DictReader(out.open()))
    # every column msprobe 26.2.0's own compare of this pair writes (its stack column aside) is equal, Result too
    theirs = list(csv.DictReader((LLM / "msprobe_compare_bf16_vs_fp32.csv").open(newline="")))
    assert [r["NPU Name"] for r in rows] == [r["NPU Name"] for r in theirs]
    for a, b in zip(theirs, rows):
        for col, want in a.items():
            if col in ("NPU Dtype", "Bench Dtype") and "class" in want:
                continue  # msprobe names a torch.dtype argument's type <class 'str'>: a pairing detail, see report
            assert _same(b[col], want), (a["NPU Name"], col, b[col], want)
    # msprobe's rules call every dtype difference an error; our Verdict says rounding
    assert sum(r["Result"] == "error" for r in rows) > 300
    assert all(r["Verdict"] in ("pass", "N/A") for r in rows)
    w = next(r for r in rows if r["NPU Name"].endswith(f"{SCALED}.Linear.forward.0.parameters.weight"))
    assert w["Result"] == "error" and "dtype" in w["Err_message"]
    assert "expected bfloat16 rounding" in w["Verdict_message"]


def test_reference_free_replay_names_the_deliberately_imprecise_gelu(capsys) -> None:
    from ascend_tui.offline.reference_free import investigate

    inv, rows, skipped = investigate(LLM / "imprecise_tensor")
    assert skipped == 0 and {r.entry for r in rows} >= {"Functional.gelu.0.forward", "Functional.linear.0.forward"}
    assert rows[0].entry == "Functional.gelu.0.forward" and rows[0].imprecise
    assert rows[0].units > 1000 and rows[0].kernel_units < 8  # float16 inside a float32 op: ~2^13 u off
    assert [r.entry for r in rows if r.imprecise] == ["Functional.gelu.0.forward"]  # linear, layer_norm are exact
    errors = [f for f in inv.findings if f.severity == "error"]
    assert [f.kind for f in errors] == ["imprecise-kernel"] and "gelu" in errors[0].node
    assert main(["compare", str(LLM / "imprecise_tensor"), "-q"]) == 1
    assert "less precise than its dtype allows" in capsys.readouterr().out


def test_reference_free_needs_a_tensor_dump(capsys) -> None:
    assert main(["compare", str(LLM / "bf16"), "-q"]) == 2
    assert "task: tensor" in capsys.readouterr().err


def _outputs_only(src: Path, dst: Path) -> Path:
    """A copy of a dump with every record's inputs dropped, as `data_mode: [output]` writes it."""
    import json
    import shutil

    shutil.copytree(src, dst)
    for p in dst.rglob("dump.json"):
        d = json.loads(p.read_text())
        for rec in d["data"].values():
            for key in ("input_args", "input"):
                if key in rec:
                    rec[key] = []
            if "input_kwargs" in rec:
                rec["input_kwargs"] = {}
        p.write_text(json.dumps(d))
    return dst


def test_output_only_dumps_stay_clean_and_still_find_the_scaled_weight(tmp_path: Path) -> None:
    gold = _outputs_only(LLM / "fp32", tmp_path / "fp32")
    assert not _errors(compare(_outputs_only(LLM / "bf16", tmp_path / "bf16"), gold, workers=1))
    scaled = compare(_outputs_only(LLM / "bf16_scaled", tmp_path / "scaled"), gold, workers=1)
    first = scaled.investigation.first_finding("precision")
    assert first is not None and first.kind == "parameter-mismatch" and first.module == SCALED


def test_nan_where_the_golden_is_finite_is_introduced_once_and_carried_after(tmp_path: Path) -> None:
    import json
    import shutil

    shutil.copytree(LLM / "bf16", tmp_path / "bf16")
    dump = next((tmp_path / "bf16").rglob("dump.json"))
    d = json.loads(dump.read_text())
    d["data"]["Tensor.__mul__.12.forward"]["output"][0].update(Max=float("nan"), Norm=float("nan"))
    d["data"]["Functional.linear.6.forward"]["input_args"][0]["Max"] = float("nan")  # what reads it
    d["data"]["Functional.linear.6.forward"]["output"][0]["Max"] = float("inf")
    dump.write_text(json.dumps(d))
    result = compare(tmp_path / "bf16", LLM / "fp32", workers=1)
    errors = _errors(result)
    assert [f.node for f in errors] == ["model.layers.0.mlp/mul.0"] and "NaN/Inf" in errors[0].message
    down = next(f for f in result.investigation.findings if f.node == "model.layers.0.mlp.down_proj/linear.0")
    assert down.attribution == "inherited" and down.root_cause.node == "model.layers.0.mlp/mul.0"
    assert main(["compare", str(tmp_path / "bf16"), str(LLM / "fp32"), "-q", "--json", str(tmp_path / "r.json")]) == 1
    assert json.loads((tmp_path / "r.json").read_text())["ranks"]["per_rank"][0]["growth"]["points"]
