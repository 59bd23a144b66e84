"""Precision compare: metrics equal msprobe's on real dumps, attribution on hand-built cases, CLI and bad input."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from ascend_tui.checks.precision import N_A, UNSUPPORTED, Accumulator, Thresholds, classify, tensor_metrics
from ascend_tui.cli.main import main
from ascend_tui.errors import InputError
from ascend_tui.offline.compare_rows import header
from ascend_tui.offline.compare import compare
from ascend_tui.offline.msprobe_result import OURS
import precision_dumps
from conftest import FIXTURES

MSPROBE = FIXTURES / "msprobe"
METRIC_COLUMNS = ["Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                  "Five Thousandths Err Ratio"]


def _need_fixtures() -> Path:
    assert (MSPROBE / "dump_bf16").is_dir(), f"real msprobe fixtures missing at {MSPROBE}"
    return MSPROBE


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


# -- metrics ---------------------------------------------------------------------------------------


def test_csv_metrics_equal_msprobes_own_compare_of_the_fixture_pair(tmp_path: Path) -> None:
    root = _need_fixtures()
    out = tmp_path / "cmp.csv"
    # exit 0: an autocast bf16 CNN against fp32 with nothing broken differs only by bf16 rounding
    assert main(["compare", str(root / "dump_bf16"), str(root / "dump_fp32"), "--csv", str(out), "-q",
                 "--workers", "1"]) == 0
    theirs = _rows(root / "msprobe_output" / "compare_tensor_bf16_vs_fp32.csv")
    ours = _rows(out)
    assert list(ours[0]) == header("tensor")[:-1] + OURS
    assert list(ours[0])[:len(theirs[0])] == list(theirs[0])
    assert [r["NPU Name"] for r in ours] == [r["NPU Name"] for r in theirs]
    compared = 0
    for a, b in zip(theirs, ours):
        for col in METRIC_COLUMNS:
            try:
                want = float(a[col])
            except ValueError:
                assert b[col].strip() == a[col].strip(), (a["NPU Name"], col)
                continue
            assert abs(float(b[col]) - want) <= 1e-6, (a["NPU Name"], col, b[col], a[col])
            compared += 1
        for col in ("NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "NPU max", "Bench l2norm", "Data_name"):
            assert a[col] == b[col], (a["NPU Name"], col)
    assert compared > 600
    # Result and Err_message are msprobe's own rules (a dtype difference is its error), so scripts read it right
    for a, b in zip(theirs, ours):
        assert (b["Result"], b["Err_message"]) == (a["Result"], a["Err_message"]), a["NPU Name"]
    by_name = {r["NPU Name"]: r for r in ours}
    assert by_name["Functional.conv2d.0.forward.output.0"]["Verdict"] == "pass"  # a dtype difference alone is fine
    # conv1's bias gradient (before BatchNorm: about 0 in float32, cosine 0.35) was our old false headline error;
    # judged by its absolute error against its incoming gradient's scale it is bf16 rounding
    bias = by_name["Functional.conv2d.0.backward.output.2"]
    assert bias["Result"] == "error" and "dtype" in bias["Err_message"]  # msprobe's verdict, kept
    assert bias["Verdict"] == "pass" and "rounding" in bias["Verdict_message"] and float(bias["Band_units"]) < 1
    assert all(r["Verdict"] in ("pass", "N/A") for r in ours)


def test_matching_inf_nan_positions_are_zeroed_and_different_positions_are_n_a() -> None:
    a = np.array([1.0, np.inf, 3.0, np.nan], dtype=np.float32)
    b = np.array([1.0, np.inf, 3.5, np.nan], dtype=np.float32)
    m = tensor_metrics(a, b)
    assert m.max_abs == 0.5 and m.one_thousandth == 0.75  # the zeroed Inf/NaN positions count as equal
    assert not math.isnan(m.value("cosine"))
    c = np.array([1.0, 2.0, np.inf, np.nan], dtype=np.float32)
    assert tensor_metrics(a, c).cosine == N_A


def test_relative_error_adds_machine_epsilon_where_golden_is_zero_and_scalars_are_unsupported() -> None:
    m = tensor_metrics(np.array([0.0, 1e-3], dtype=np.float32), np.array([0.0, 1e-3], dtype=np.float32))
    assert m.max_rel == 0.0 and m.cosine == 1.0
    one = tensor_metrics(np.array([2.0], dtype=np.float32), np.array([1.0], dtype=np.float32))
    assert one.cosine == UNSUPPORTED and one.max_abs == 1.0 and one.max_rel == 1.0


def test_chunked_metrics_equal_one_pass() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal(10_000).astype(np.float32)
    b = (a + 1e-3 * rng.standard_normal(10_000)).astype(np.float32)
    whole, chunked = tensor_metrics(a, b, chunk=1 << 20), tensor_metrics(a, b, chunk=777)
    for name in ("cosine", "max_abs", "max_rel", "one_thousandth", "five_thousandths"):
        assert abs(whole.value(name) - chunked.value(name)) < 1e-9
    assert abs(whole.value("euc_dist") - chunked.value("euc_dist")) < 1e-9


def test_thresholds_are_configurable_and_reject_unknown_names() -> None:
    m = tensor_metrics(np.linspace(1, 2, 100), np.linspace(1, 2, 100) + 0.05)
    assert classify(m, 2.0, Thresholds())[0] == "warning"
    assert classify(m, 2.0, Thresholds.from_mapping({"max_abs_warning": 0.5, "max_abs_error": 1.0}))[0] is None
    with pytest.raises(ValueError, match="cosine_warn"):
        Thresholds.from_mapping({"cosine_warn": 0.9})
    acc = Accumulator(np.float32, np.float32, 0)
    assert acc.result().cosine == UNSUPPORTED


# -- attribution on hand-built dumps ---------------------------------------------------------------


def _pair(tmp: Path, make, target_arg, golden_arg) -> tuple[Path, Path]:
    return make(tmp / "target", target_arg), make(tmp / "golden", golden_arg)


def test_catastrophic_cancellation_in_a_variance_is_introduced_by_the_subtraction(tmp_path: Path) -> None:
    t, g = _pair(tmp_path, precision_dumps.cancellation, torch.bfloat16, torch.float32)
    inv = compare(t, g, workers=1).investigation
    first = inv.first_finding("precision")
    assert first is not None and first.node == "sub.0" and first.attribution == "introduced"
    assert first.severity == "error"


def test_steep_activation_only_amplifies_upstream_error_so_it_is_inherited(tmp_path: Path) -> None:
    t, g = _pair(tmp_path, precision_dumps.steep_activation, torch.bfloat16, torch.float32)
    inv = compare(t, g, workers=1).investigation
    exp = [f for f in inv.findings if f.node == "exp.0"]
    assert exp and exp[0].attribution == "inherited" and exp[0].metrics["evidence"] == "replay"
    assert exp[0].root_cause is not None and exp[0].root_cause.node == "linear.0"
    assert all(f.severity == "info" for f in inv.findings)  # nothing over threshold is introduced


def test_perturbed_weight_is_a_parameter_finding_and_downstream_ops_inherit_it(tmp_path: Path) -> None:
    t, g = _pair(tmp_path, precision_dumps.perturbed_weight, True, False)
    inv = compare(t, g, workers=1).investigation
    first = inv.first_finding("precision")
    assert first is not None and first.kind == "parameter-mismatch" and first.module == "fc"
    assert first.node == "param:fc.weight"
    assert inv.findings[0] == first
    lin = next(f for f in inv.findings if f.node == "fc/linear.0")
    assert lin.attribution == "inherited" and lin.root_cause is not None
    assert lin.root_cause.node == "param:fc.weight"


# -- CLI, ranks, cluster, bad input ----------------------------------------------------------------


def test_compare_json_report_has_precision_findings_and_the_cross_rank_summary(tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture) -> None:
    root = _need_fixtures()
    out = tmp_path / "r.json"
    code = main(["compare", str(root / "dump_bf16"), str(root / "dump_fp32"), "--json", str(out), "-q",
                 "--workers", "1"])
    # the old first divergence, conv1's near-zero bias gradient, was bf16 rounding judged by cosine: now no error
    assert code == 0
    report = json.loads(out.read_text())
    assert all(f["check"] == "precision" and f["severity"] == "info" for f in report["findings"])
    assert "first_node" not in report["ranks"]
    per = report["ranks"]["per_rank"][0]
    assert per["counts"]["rows"] == 140 and per["counts"]["tensor_pairs"] == 111  # the app's 111 rows
    assert per["growth"]["dtype"] == "bfloat16" and per["growth"]["points"]
    printed = capsys.readouterr().out
    assert "no operator introduces" in printed and "140 of 140 target rows compared" in printed
    assert "111 tensor pairs (the precision view's rows)" in printed
    assert "judged against bfloat16 rounding" in printed and "error growth, forward" in printed


def _step_folder(tmp: Path, name: str, perturb_rank: int | None) -> Path:
    step = tmp / name / "step0"
    for r in range(3):
        made = precision_dumps.perturbed_weight(tmp / f"{name}_src{r}", r == perturb_rank)
        shutil.move(str(made / "step0" / "rank0"), str(step / f"rank{r}"))
    return step


def test_step_folders_with_many_ranks_name_the_rank_that_diverges(tmp_path: Path) -> None:
    target = _step_folder(tmp_path, "t", perturb_rank=1)
    golden = _step_folder(tmp_path, "g", perturb_rank=None)
    result = compare(target, golden, workers=2)
    assert [r.rank for r in result.ranks] == ["rank0", "rank1", "rank2"]
    assert result.summary["first_rank"] == "rank1"
    assert any(o["rank"] == "rank1" for o in result.summary["outliers"])
    assert not result.ranks[0].inv.findings and result.ranks[1].inv.findings


def test_dask_local_cluster_gives_the_same_results_as_local_processes(tmp_path: Path) -> None:
    import distributed  # in the test extra: the cluster path is always tested
    target = _step_folder(tmp_path, "t", perturb_rank=2)
    golden = _step_folder(tmp_path, "g", perturb_rank=None)
    local = compare(target, golden, workers=1)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        remote = compare(target, golden, scheduler=cluster.scheduler_address)
    assert [[(r.target.name, r.metrics, r.result, r.attribution) for r in rank.rows] for rank in local.ranks] == \
        [[(r.target.name, r.metrics, r.result, r.attribution) for r in rank.rows] for rank in remote.ranks]
    assert local.summary == remote.summary


def test_malformed_dumps_give_one_clear_error_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = _need_fixtures()
    bad = tmp_path / "bad"
    shutil.copytree(root / "dump_fp32", bad)
    dump = next(bad.glob("step0/*/dump.json"))
    dump.write_text(dump.read_text()[:500])
    assert main(["compare", str(root / "dump_bf16"), str(bad), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "dump.json" in err[0]

    junk = tmp_path / "junk"
    shutil.copytree(root / "dump_fp32", junk)
    pt = next(junk.glob("step0/*/dump_tensor_data/Functional.relu.0.forward.output.0.pt"))
    pt.write_bytes(b"\x00garbage" * 10)
    assert main(["compare", str(root / "dump_bf16"), str(junk), "-q", "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Functional.relu.0.forward.output.0.pt" in err[0]

    with pytest.raises(InputError, match="rank folders"):
        compare(_step_folder(tmp_path, "many", None), root / "dump_fp32")
    assert main(["compare", str(root / "dump_bf16"), str(root / "dump_fp32"), "--threshold", "cosine=x"]) == 2


def _leaf(v: float) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": v, "Min": v, "Mean": v,
            "Norm": v, "requires_grad": False, "data_name": "x.pt"}


def test_fuzzy_matching_pairs_calls_in_order_when_call_indices_differ() -> None:
    from ascend_tui.offline.compare_rows import items_of, match

    target = {"Functional.gelu.0.forward": {"input_args": [_leaf(1.0)], "output": [_leaf(2.0)]},
              "Functional.relu.3.forward": {"input_args": [_leaf(3.0)], "output": [_leaf(4.0)]},
              "Functional.relu.4.forward": {"input_args": [_leaf(5.0)], "output": [_leaf(6.0)]}}
    golden = {"Functional.relu.0.forward": {"input_args": [_leaf(3.0)], "output": [_leaf(4.0)]},
              "Functional.relu.1.forward": {"input_args": [_leaf(5.0)], "output": [_leaf(6.0)]}}
    t, g = items_of(target, Path("t.json")), items_of(golden, Path("g.json"))
    exact = match(t, g)
    assert all(r.golden is None for r in exact)
    fuzzy = {r.target.name: r.golden.name if r.golden else None for r in match(t, g, fuzzy=True)}
    assert fuzzy["Functional.relu.3.forward.output.0"] == "Functional.relu.0.forward.output.0"
    assert fuzzy["Functional.relu.4.forward.input.0"] == "Functional.relu.1.forward.input.0"
    assert fuzzy["Functional.gelu.0.forward.output.0"] is None


def test_statistics_and_md5_dumps_compare_from_dump_json_alone(tmp_path: Path) -> None:
    root = _need_fixtures()
    out = tmp_path / "stats.csv"
    assert main(["compare", str(root / "dump_statistics_fp32"), str(root / "dump_statistics_fp32"), "--csv",
                 str(out), "-q"]) == 0
    rows = _rows(out)
    assert list(rows[0]) == header("statistics")[:-1] + OURS
    conv = next(r for r in rows if r["NPU Name"] == "Functional.conv2d.0.forward.output.0")
    # equal statistics are '0' in both columns, as msprobe's calc_summary_diff writes them (was our '0.0', '0.0%')
    assert conv["Max diff"] == "0" and conv["NormRelativeErr"] == "0" and conv["Result"] == "pass"
    out = tmp_path / "md5.csv"
    assert main(["compare", str(root / "dump_md5_fp32"), str(root / "dump_md5_fp32"), "--csv", str(out), "-q"]) == 0
    rows = _rows(out)
    assert list(rows[0]) == header("md5")[:-1] + OURS and all(r["Result"] in ("pass", "N/A") for r in rows)
    assert rows[0]["NPU MD5"] == rows[0]["BENCH MD5"] != "N/A"


def test_a_perturbed_weight_is_found_from_statistics_alone(tmp_path: Path) -> None:
    t, g = _pair(tmp_path, precision_dumps.perturbed_weight, True, False)
    for root in (t, g):
        dump = root / "step0" / "rank0" / "dump.json"
        data = json.loads(dump.read_text())
        data["task"] = "statistics"
        dump.write_text(json.dumps(data))
        shutil.rmtree(root / "step0" / "rank0" / "dump_tensor_data")
    result = compare(t, g)
    assert result.ranks[0].mode == "statistics"
    first = result.investigation.first_finding("precision")
    assert first is not None and first.kind == "parameter-mismatch" and "L2 norm differs" in first.message


def test_dumps_of_different_models_are_shape_mismatches_not_a_clean_pass() -> None:
    root = _need_fixtures()
    inv = compare(root / "dump_bf16", root / "dump_ovf").investigation
    first = inv.first_finding("precision")
    assert first is not None and first.kind == "shape-mismatch" and first.node == "fc/linear.0"


def test_md5_dumps_name_the_first_op_whose_checksum_differs_with_no_claim_of_size(tmp_path: Path) -> None:
    root = _need_fixtures()
    target = tmp_path / "t"
    shutil.copytree(root / "dump_md5_fp32", target)
    dump = next(target.glob("step0/*/dump.json"))
    data = json.loads(dump.read_text())
    for name in ("Functional.relu.0.forward", "Functional.max_pool2d.0.forward"):  # relu differs, and what reads it
        rec = data["data"][name]
        (rec["output"] if name.startswith("Functional.relu") else rec["input_args"])[0]["md5"] = "deadbeef"
    dump.write_text(json.dumps(data))
    inv = compare(target, root / "dump_md5_fp32", workers=1).investigation
    first = [f for f in inv.findings if f.kind == "first-difference"]
    assert len(first) == 1 and first[0].node == "relu.0" and "cannot say by how much" in first[0].message
    out = tmp_path / "md5.csv"
    assert main(["compare", str(target), str(root / "dump_md5_fp32"), "--csv", str(out), "-q"]) == 1
    rows = {r["NPU Name"]: r for r in _rows(out)}
    relu = rows["Functional.relu.0.forward.output.0"]  # as msprobe 26.2.0's own compare of this pair writes it
    assert relu["Result"] == "error"
    assert relu["Err_message"] == '["error: The CRC-32 value of NPU differs from that of the bench."]'
