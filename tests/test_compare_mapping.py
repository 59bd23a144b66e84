"""Cross-framework compare on msprobe's own MindSpore/PyTorch pair: dtypes, the four mappings, fuzzy, unmatched."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from ascend_tui.cli.main import main
from ascend_tui.errors import InputError
from ascend_tui.offline.compare import compare
from ascend_tui.readers.msprobe.mapping import MappingOptions, canonical_dtype, layer_pairs
from ascend_tui.readers.msprobe.yaml_subset import parse_yaml
from conftest import FIXTURES

PAIR = FIXTURES / "peer" / "Ascend__msprobe" / "test" / "msprobe_test" / "mindspore_ut" / "compare" / "dump_file"
MS, PT = PAIR / "mindspore_data", PAIR / "pytorch_data"

# msprobe's own test (test_layer_mapping.py) expects exactly these record pairs with the pair's layer_mapping.yaml.
MSPROBE_LAYER_PAIRS = {
    "Tensor.__add__.0.forward": None,
    "Tensor.__bool__.1.forward": None,
    "Tensor.__add__.1.forward": "Tensor.__add__.0.forward",
    "Mint.logical_or.0.forward": "Tensor.__or__.0.forward",
    "Distributed.all_reduce.0.forward": "Distributed.all_reduce.0.forward",
    "Cell.network_with_loss.module.language_model.embedding.word_embeddings.VocabParallelEmbedding.forward.0":
        "Module.module.module.language_model.embedding.word_embeddings.VocabParallelEmbedding.forward.0",
    "Primitive.norm.RmsNorm.0.forward": "NPU.npu_rms_norm.0.forward",
    "Cell.network_with_loss.module.language_model.encoder.layers.0.ParallelTransformerLayer.forward.0":
        "Module.module.module.language_model.encoder.layers.0.ParallelTransformerLayer.forward.0",
    "Cell.network_with_loss.module.language_model.encoder.layers.0.input_norm.FusedRMSNorm.backward.0": None,
    "Cell.network_with_loss.module.language_model.encoder.layers.0.attention.ParallelAttention.forward.0":
        "Module.module.module.language_model.encoder.layers.0.self_attention.ParallelAttention.forward.0",
    "Mint.cos.0.forward": "Torch.cos.0.forward",
    "Functional.flash_attention_score.0.forward": "NPU.npu_fusion_attention.0.forward",
    "Functional.flash_attention_score.0.backward": "NPU.npu_fusion_attention.0.backward",
}


def _pair() -> None:
    assert (MS / "dump.json").is_file() and (PT / "dump.json").is_file(), \
        f"msprobe's cross-framework pair missing at {PAIR}"


def _csv(path: Path) -> dict[str, dict[str, str]]:
    with path.open(newline="") as fh:
        return {r["NPU Name"]: r for r in csv.DictReader(fh)}


def _paired(opts: MappingOptions | None = None, fuzzy: bool = False) -> dict[str, str]:
    rank = compare(MS, PT, mappings=opts, fuzzy=fuzzy, replay=False).ranks[0]
    return {r.target.name: r.golden.name for r in rank.rows if r.golden is not None}


def test_dtype_spellings_of_every_framework_meet() -> None:
    assert {canonical_dtype(d) for d in ("BFloat16", "torch.bfloat16", "bfloat16", "mindspore.bfloat16")} \
        == {"bfloat16"}
    assert canonical_dtype("Float32") == canonical_dtype("torch.float32") == canonical_dtype("torch.float") == "float32"
    assert canonical_dtype("Int64") == canonical_dtype("torch.int64") == "int64"
    assert canonical_dtype("UInt8") == "uint8" and canonical_dtype("Bool") == "bool"


def test_mindspore_vs_pytorch_pairs_all_reduce_reports_the_rest_and_gives_no_all_clear(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _pair()
    out, report = tmp_path / "cmp.csv", tmp_path / "cmp.json"
    code = main(["compare", str(MS), str(PT), "--csv", str(out), "--json", str(report), "-q", "--no-replay"])
    printed = capsys.readouterr().out
    rows = _csv(out)
    ar = rows["Distributed.all_reduce.0.forward.output.0"]
    assert ar["Bench Name"] == "Distributed.all_reduce.0.forward.output.0"
    assert (ar["NPU Dtype"], ar["Bench Dtype"]) == ("BFloat16", "torch.bfloat16")  # each side's own spelling
    assert rows["Distributed.all_reduce.0.forward.input.0"]["Bench Name"] != "N/A"
    # what msprobe 26.2 pairs on this pair without a mapping: 8 rows of 3 records
    assert sum(r["Bench Name"] != "N/A" for r in rows.values()) == 8
    assert "no operator introduces an error" not in printed
    lines = printed.splitlines()
    assert lines[0].startswith("UNMATCHED mindspore_data: 36 of 44 target rows and 63 of 71 golden rows")
    assert "precision/unmatched" in printed and "Tensor.__bool__.1.forward" in printed and "--layer-mapping" in printed
    assert "8 of 44 target rows compared (36 unmatched; golden: 63 of 71 unmatched)" in printed
    data = json.loads(report.read_text())
    um = data["ranks"]["per_rank"][0]["unmatched"]
    assert (um["target"]["rows"], um["target"]["unmatched"], um["golden"]["rows"], um["golden"]["unmatched"]) \
        == (44, 36, 71, 63)
    assert any(f["kind"] == "unmatched" and f["severity"] == "warning" for f in data["findings"])
    assert code == 1


def test_layer_mapping_pairs_what_msprobes_own_test_expects(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _pair()
    assert layer_pairs(PAIR / "layer_mapping.yaml", MS, PT) == MSPROBE_LAYER_PAIRS
    paired = _paired(MappingOptions(layer=PAIR / "layer_mapping.yaml"))
    assert len(paired) == 32  # msprobe 26.2's compare -lm on this pair: 32 rows of 10 records
    assert paired["Primitive.norm.RmsNorm.0.forward.output.1"] == "NPU.npu_rms_norm.0.forward.output.1"
    # the layer-mapped compare has no error, but a third of the target is still unmatched: --fail-on warning fails
    args = ["compare", str(MS), str(PT), "--layer-mapping", str(PAIR / "layer_mapping.yaml"), "-q", "--no-replay"]
    assert main(args) == 0
    assert "no verdict: 12 target and 39 golden rows had nothing to compare with; among the rows compared, no " \
        "operator introduces an error" in capsys.readouterr().out
    assert main([*args, "--fail-on", "warning"]) == 1
    inv = compare(MS, PT, mappings=MappingOptions(layer=PAIR / "layer_mapping.yaml"), replay=False).investigation
    warn = inv.first_finding()
    assert warn is not None and warn.kind == "unmatched"  # the only finding: it sits on an op the app can go to
    assert warn.node == "add.0" and not inv.graph.node(warn.node).is_placeholder


def test_api_mapping_maps_mint_by_rule_and_user_entries_by_argument_index(tmp_path: Path) -> None:
    _pair()
    paired = _paired(MappingOptions(api="default"))
    assert paired["Mint.cos.0.forward.output.0"] == "Torch.cos.0.forward.output.0"
    assert len(paired) == 10  # msprobe 26.2's compare -am on this pair: 10 rows
    mapping = tmp_path / "api.yaml"
    mapping.write_text("- ms_api: Functional.flash_attention_score\n  pt_api: NPU.npu_fusion_attention\n"
                       "  ms_args:\n  - 0\n  - 1\n  pt_args:\n  - 1\n  - 0\n  ms_outputs:\n  - 0\n  pt_outputs:\n"
                       "  - 0\n- ms_api: Mint.logical_or\n  pt_api: Tensor.__or__\n  ms_args: [] # none\n"
                       "  pt_args: []\n  ms_outputs:\n  - 0\n  pt_outputs:\n  - 0\n")
    paired = _paired(MappingOptions(api=mapping))
    assert paired["Functional.flash_attention_score.0.forward.input.0"] == "NPU.npu_fusion_attention.0.forward.input.1"
    assert paired["Functional.flash_attention_score.0.forward.output.0"] == \
        "NPU.npu_fusion_attention.0.forward.output.0"
    assert "Functional.flash_attention_score.0.forward.input.2" not in paired  # not listed: abandoned
    assert paired["Mint.logical_or.0.forward.output.0"] == "Tensor.__or__.0.forward.output.0"
    assert paired["Mint.cos.0.forward.output.0"] == "Torch.cos.0.forward.output.0"  # the rule still applies
    # msprobe 26.2's code reads ms_output/pt_output where its docs say ms_outputs/pt_outputs: either works here
    code_spelling = tmp_path / "api_code.yaml"
    code_spelling.write_text(mapping.read_text().replace("_outputs:", "_output:"))
    assert _paired(MappingOptions(api=code_spelling)) == paired


def test_cell_mapping_by_whole_name_and_by_substring(tmp_path: Path) -> None:
    _pair()
    emb = "Cell.network_with_loss.module.language_model.embedding.word_embeddings.VocabParallelEmbedding.forward.0"
    assert f"{emb}.output.0" not in _paired(MappingOptions(cell="default"))  # Cell -> Module alone: paths differ
    whole = tmp_path / "cells.yaml"
    whole.write_text("network_with_loss.module.language_model.embedding.word_embeddings.VocabParallelEmbedding: "
                     "module.module.language_model.embedding.word_embeddings.VocabParallelEmbedding\n")
    paired = _paired(MappingOptions(cell=whole))
    assert paired[f"{emb}.output.0"] == emb.replace("Cell.network_with_loss", "Module.module") + ".output.0"
    sub = tmp_path / "substr.yaml"
    sub.write_text("# the MindSpore wrapper is called module in PyTorch\nnetwork_with_loss: module\n")
    paired = _paired(MappingOptions(cell=sub))
    layer = "Cell.network_with_loss.module.language_model.encoder.layers.0.ParallelTransformerLayer.forward.0"
    assert paired[f"{emb}.input.0"].startswith("Module.module.module.language_model.embedding")
    assert paired[f"{layer}.input.0"] == layer.replace("Cell.network_with_loss", "Module.module") + ".input.0"


def test_data_mapping_pairs_named_tensors_whatever_their_dtype(tmp_path: Path) -> None:
    _pair()
    mapping = tmp_path / "data.yaml"
    mapping.write_text("Mint.cos.0.forward.input.0: Torch.cos.0.forward.input.0\n"
                       "'Tensor.__add__.0.forward.output.0': \"Tensor.__add__.1.forward.output.0\"\n")
    paired = _paired(MappingOptions(data=mapping))
    assert paired["Mint.cos.0.forward.input.0"] == "Torch.cos.0.forward.input.0"
    assert paired["Tensor.__add__.0.forward.output.0"] == "Tensor.__add__.1.forward.output.0"
    assert paired["Distributed.all_reduce.0.forward.output.0"] == "Distributed.all_reduce.0.forward.output.0"


def test_fuzzy_pairs_real_records_whose_call_indices_moved(tmp_path: Path) -> None:
    _pair()
    shifted = tmp_path / "pt"
    shutil.copytree(PT, shifted)
    raw = json.loads((PT / "dump.json").read_text())
    renamed = {k.replace("Torch.cos.0.", "Torch.cos.7.").replace("Distributed.all_reduce.0.",
                                                                 "Distributed.all_reduce.3."): v
               for k, v in raw["data"].items()}
    (shifted / "dump.json").write_text(json.dumps({**raw, "data": renamed}))
    exact = compare(MS, shifted, replay=False).ranks[0]
    assert not any(r.golden is not None and "all_reduce" in r.target.name for r in exact.rows)
    paired = _paired(MappingOptions(api="default"), fuzzy=False)
    assert paired["Mint.cos.0.forward.output.0"] == "Torch.cos.0.forward.output.0"
    fuzzy = compare(MS, shifted, fuzzy=True, replay=False).ranks[0]
    got = {r.target.name: r.golden.name for r in fuzzy.rows if r.golden is not None}
    assert got["Distributed.all_reduce.0.forward.output.0"] == "Distributed.all_reduce.3.forward.output.0"
    assert fuzzy.unmatched is not None and fuzzy.unmatched.target_unmatched == 36


def test_mapping_yaml_is_read_strictly(tmp_path: Path) -> None:
    assert parse_yaml("A:\n  b.c: d  # note\n  'e': \"f\"\nG:\n") == {"A": {"b.c": "d", "e": "f"}, "G": None}
    assert parse_yaml("ms_api: X\nms_args:\n- 0\n- 2\n") == {"ms_api": "X", "ms_args": [0, 2]}
    assert parse_yaml("ms_args: [0, 2]\nx: [0, \"t, u\"]\nrtol: 1.0e-6\nok: true\n") == \
        {"ms_args": [0, 2], "x": [0, "t, u"], "rtol": 1e-6, "ok": True}
    for bad, where in (("a: {b: c}\n", "line 1"), ("a: b\n   c: d\n", "line 2"), ("a: &x b\n", "line 1"),
                       ("a:\n  - [0, [1]]\n", "line 2"), ("a: [0, ]\n", "line 1")):
        with pytest.raises(InputError, match=where):
            parse_yaml(bad, "m.yaml")
    bad = tmp_path / "lm.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(InputError, match="not an msprobe layer mapping"):
        compare(MS, PT, mappings=MappingOptions(layer=bad), replay=False)
    assert main(["compare", str(MS), str(PT), "--data-mapping", str(tmp_path / "missing.yaml"), "-q"]) == 2


async def test_precision_view_states_unmatched_counts_and_lists_the_unmatched_rows() -> None:
    from test_app_views import Host, lines

    from ascend_tui.app.screens.precision import PrecisionScreen
    from ascend_tui.app.screens.row_table import RowTable

    _pair()
    inv = compare(MS, PT, replay=False).investigation
    app = Host(lambda: PrecisionScreen(inv))
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        summary = str(app.screen.query_one("#precision-summary").render())
        assert "unmatched: 36 of 44 target rows, 63 of 71 golden" in summary
        await pilot.press("u")
        await pilot.pause()
        rows = app.screen.query_one(RowTable).rows
        assert len(rows) == 36 + 63
        assert rows[0].data["side"] == "target" and rows[0].data["name"] == "Tensor.__add__.0.forward.input.1"
        assert any(r.data["side"] == "golden" and r.data["name"].startswith("NPU.npu_rms_norm") for r in rows)
        assert "unmatched tensor" in lines(app.screen.query_one(RowTable))[0]
        await pilot.press("u")
        await pilot.pause()
        assert len(app.screen.query_one(RowTable).rows) < 36


# -- msprobe's compare result as an input ------------------------------------------------------------

DATA = Path(__file__).resolve().parent / "data" / "msprobe_compare"
MSPROBE_CSV = FIXTURES / "msprobe" / "msprobe_output" / "compare_tensor_bf16_vs_fp32.csv"


def test_msprobe_compare_results_open_without_the_dumps_as_the_graph_the_dump_gives() -> None:
    from ascend_tui.offline.open import kind_of, open_path

    assert MSPROBE_CSV.is_file(), f"msprobe's compare CSV missing at {MSPROBE_CSV}"
    dump = open_path(FIXTURES / "msprobe" / "dump_bf16")
    for path in (MSPROBE_CSV, DATA / "compare_result_tensor_bf16_vs_fp32.xlsx"):
        assert kind_of(path) == "msprobe compare result"
        inv = open_path(path)
        assert len(inv.graph) == len(dump.graph) and inv.graph.edge_count() == dump.graph.edge_count()
        rows = inv.run.extra["precision"]["rows"]
        assert len(rows) == 140 and rows[0][0] == "Functional.conv2d.0.forward.input.0"
        flagged = {f.node for f in inv.findings if f.kind == "msprobe-result"}
        assert "backward:conv2d.0" in flagged and all(n in inv.graph for n in flagged)
        row = next(r for r in rows if r[0] == "Functional.conv2d.0.backward.output.2")
        assert row[1] == "backward:conv2d.0" and abs(row[3] - 0.354399) < 1e-6  # msprobe's cosine, on the op
    stats = open_path(DATA / "compare_result_statistics.csv")
    assert stats.run.extra["mode"] == "statistics" and len(stats.reference) > 0
    md5 = open_path(DATA / "compare_result_md5.csv")
    assert md5.run.extra["mode"] == "md5" and not [f for f in md5.findings if f.severity != "info"]


def test_a_compare_result_with_unmatched_rows_and_a_short_row_says_so(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    from ascend_tui.offline.open import open_path

    cross = open_path(DATA / "compare_result_ms_vs_pt_layer_mapping.csv")
    warn = next(f for f in cross.findings if f.kind == "unmatched")
    assert warn.severity == "warning" and "12 of 44 rows" in warn.message and "Tensor.__add__.0.forward" in warn.message
    assert main(["check", str(DATA / "compare_result_ms_vs_pt_layer_mapping.csv"), "-q"]) == 1
    lines = MSPROBE_CSV.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = tmp_path / "compare_result_cut.csv"
    cut.write_text("".join(lines[:3]) + "Functional.conv2d.0.forward.input.9,too,short\n" + "".join(lines[3:]))
    inv = open_path(cut)
    assert inv.run.extra["skipped_rows"] == 1 and inv.run.extra["first_skipped_row"] == 4
    assert any("1 rows of the wrong length were skipped (first at row 4)" in n for n in inv.run.extra["notes"])
    bad = tmp_path / "compare_result_bad.csv"
    bad.write_text("NPU Name,Bench Name,x\n")
    with pytest.raises(InputError, match="not an msprobe compare result"):
        open_path(bad)


async def test_a_compare_csv_opened_in_the_app_shows_its_rows_and_a_flagged_op(tmp_path: Path) -> None:
    from live_investigations import detail_text
    from test_app_jobs import settle

    from ascend_tui.app.app import InvestigatorApp
    from ascend_tui.app.screens.precision import PrecisionScreen
    from ascend_tui.app.screens.row_table import RowTable

    app = InvestigatorApp([str(MSPROBE_CSV)], theme="textual-dark", export_dir=tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(app, pilot)
        assert app.inv is not None and app.inv.run.source == "msprobe compare result"
        await pilot.press("f")  # the first finding: an op msprobe flagged
        await pilot.pause()
        focused = app.main.nav.focused
        assert focused is not None and any(f.node == focused and f.kind == "msprobe-result" for f in app.inv.findings)
        assert "msprobe marks" in detail_text(app)
        await pilot.press("C")
        await pilot.pause()
        assert isinstance(app.screen, PrecisionScreen)
        rows = app.screen.query_one(RowTable).rows
        assert len(rows) == 140 and rows[0].data["name"] == "Functional.conv2d.0.forward.input.0"
        assert any(r.data["result"] == "error" for r in rows)


def test_a_mindspore_npy_tensor_compares_with_a_torch_pt_tensor(tmp_path: Path) -> None:
    import numpy as np
    import torch

    from ascend_tui.offline.compare_tensors import compare_pair

    a = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    np.save(tmp_path / "Mint.cos.0.forward.output.0.npy", a)
    torch.save(torch.from_numpy(a * 1.5), tmp_path / "Torch.cos.0.forward.output.0.pt")
    m = compare_pair(str(tmp_path / "Mint.cos.0.forward.output.0.npy"),
                     str(tmp_path / "Torch.cos.0.forward.output.0.pt"))
    assert m.cosine == pytest.approx(1.0) and m.max_abs == pytest.approx(float(np.abs(a * 0.5).max()), rel=1e-6)
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY junk")
    with pytest.raises(InputError, match="not a readable .npy"):
        compare_pair(str(tmp_path / "bad.npy"), str(tmp_path / "Torch.cos.0.forward.output.0.pt"))


def test_an_older_compare_csv_with_accuracy_reached_or_not_reads_its_verdicts(tmp_path: Path) -> None:
    from ascend_tui.offline.open import open_path

    rows = list(csv.reader(MSPROBE_CSV.open(newline="", encoding="utf-8")))
    head = rows[0]
    i = head.index("Result")
    head[i] = "Accuracy Reached or Not"
    for r in rows[1:]:
        r[i] = {"pass": "Yes", "error": "No", "warning": "Yes"}[r[i]]
    old = tmp_path / "compare_result_old.csv"
    with old.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)
    inv = open_path(old)
    assert sum(1 for r in inv.run.extra["precision"]["rows"] if r[8] == "error") == 50
    assert "backward:conv2d.0" in {f.node for f in inv.findings if f.kind == "msprobe-result"}


def test_an_xlsx_saved_with_shared_strings_reads_like_msprobes_inline_one(tmp_path: Path) -> None:
    """Excel re-saves a workbook with shared strings and numeric cells: the same rows come back."""
    import zipfile
    from xml.sax.saxutils import escape

    from ascend_tui.offline.open import open_path
    from ascend_tui.readers.msprobe.compare_result import read_table

    header, rows, _s, _f = read_table(MSPROBE_CSV)
    strings: list[str] = []

    def cell(ref: str, text: str) -> str:
        try:
            float(text)
            return f'<c r="{ref}"><v>{text}</v></c>'
        except ValueError:
            strings.append(text)
            return f'<c r="{ref}" t="s"><v>{len(strings) - 1}</v></c>'

    def col(i: int) -> str:
        return chr(65 + i) if i < 26 else "A" + chr(65 + i - 26)

    body = []
    for n, values in enumerate([header, *[[r[h] for h in header] for r in rows]], 1):
        body.append(f'<row r="{n}">' + "".join(cell(f"{col(i)}{n}", v) for i, v in enumerate(values) if v != "")
                    + "</row>")
    ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    book = tmp_path / "compare_result_resaved.xlsx"
    with zipfile.ZipFile(book, "w") as z:
        z.writestr("xl/workbook.xml", f'<workbook {ns} xmlns:r="http://schemas.openxmlformats.org/'
                   'officeDocument/2006/relationships"><sheets><sheet name="r" sheetId="1" r:id="rId1"/></sheets>'
                   '</workbook>')
        z.writestr("xl/_rels/workbook.xml.rels", '<Relationships xmlns="http://schemas.openxmlformats.org/package/'
                   '2006/relationships"><Relationship Id="rId1" Type="worksheet" Target="worksheets/data.xml"/>'
                   '</Relationships>')
        z.writestr("xl/worksheets/data.xml", f"<worksheet {ns}><sheetData>{''.join(body)}</sheetData></worksheet>")
        z.writestr("xl/sharedStrings.xml", f"<sst {ns}>" + "".join(f"<si><t>{escape(s)}</t></si>" for s in strings)
                   + "</sst>")
    again = read_table(book)[1]
    assert [r["NPU Name"] for r in again] == [r["NPU Name"] for r in rows]
    assert again[5]["Cosine"] == rows[5]["Cosine"] and again[5]["NPU_Stack_Info"] == rows[5]["NPU_Stack_Info"]
    inv = open_path(book)
    assert len(inv.run.extra["precision"]["rows"]) == 140
    assert "backward:conv2d.0" in {f.node for f in inv.findings if f.kind == "msprobe-result"}


def test_megatron_construct_json_with_micro_steps_reads_and_layer_maps(tmp_path: Path) -> None:
    """msprobe writes `{node: [parent, micro step], "megatron_micro_step_number": n}` under Megatron."""
    from ascend_tui.offline.open import open_path

    _pair()
    ms = tmp_path / "ms"
    shutil.copytree(MS, ms)
    construct = json.loads((MS / "construct.json").read_text())
    (ms / "construct.json").write_text(json.dumps({**{k: [v, 0] for k, v in construct.items()},
                                                   "megatron_micro_step_number": 1}))
    assert len(open_path(ms).graph) == len(open_path(MS).graph)
    assert layer_pairs(PAIR / "layer_mapping.yaml", ms, PT) == MSPROBE_LAYER_PAIRS


def test_every_ranks_unmatched_share_reaches_the_investigation_the_cli_gates(tmp_path: Path) -> None:
    _pair()
    for side, src in (("t", MS), ("g", PT)):
        for rank in ("rank0", "rank1"):
            shutil.copytree(src, tmp_path / side / "step0" / rank)
    result = compare(tmp_path / "t" / "step0", tmp_path / "g" / "step0", replay=False)
    assert [r.rank for r in result.ranks] == ["rank0", "rank1"]
    warns = [f for f in result.investigation.findings if f.kind == "unmatched"]
    assert sorted(f.message.split(":")[0] for f in warns) == ["rank0", "rank1"]
    assert result.summary["unmatched"] == {"target_rows": 88, "target_unmatched": 72, "golden_rows": 142,
                                           "golden_unmatched": 126}


def test_our_own_compare_csv_reopens_with_its_attribution(tmp_path: Path) -> None:
    from ascend_tui.offline.open import open_path

    # a pair with a real divergence (the CNN bf16 pair differs only by rounding: no row has an attribution)
    llm = Path(__file__).parent / "data" / "llm_dumps"
    out = tmp_path / "ours.csv"
    assert main(["compare", str(llm / "bf16_noise"), str(llm / "fp32"), "--csv", str(out), "-q",
                 "--workers", "1"]) in (0, 1)
    written = {r["NPU Name"]: r["Attribution"] for r in _csv(out).values()}
    inv = open_path(out)
    rows = inv.run.extra["precision"]["rows"]
    assert len(rows) == len(written) and all(r[9] == written[r[0]] for r in rows)
    assert any(r[9] == "introduced" for r in rows)
    # our Verdict is what reopening reads, not msprobe's Result (which calls every dtype difference an error)
    assert sum(1 for r in _csv(out).values() if r["Result"] == "error") > 100
    assert sum(1 for f in inv.findings if f.severity == "error") <= 2


def test_without_msprobes_api_table_an_api_pairs_with_the_golden_api_of_the_same_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ascend_tui.readers.msprobe import mapping
    from ascend_tui.offline.compare_rows import items_of, match

    leaf = {"type": "mindspore.Tensor", "dtype": "Float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
            "Norm": 1.0}
    t = items_of({"Functional.relu.0.forward": {"input_args": [leaf], "output": [leaf]},
                  "Mint.cos.0.forward": {"input_args": [leaf], "output": [leaf]}}, Path("ms.json"))
    gl = {**leaf, "type": "torch.Tensor", "dtype": "torch.float32"}
    g = items_of({"Torch.relu.0.forward": {"input_args": [gl], "output": [gl]},
                  "Torch.cos.0.forward": {"input_args": [gl], "output": [gl]}}, Path("pt.json"))
    golden = list(dict.fromkeys(i.entry for i in g))
    monkeypatch.setattr(mapping, "builtin_api_table", lambda: {})
    rows = match(t, g, rename=mapping._api_renamer(None, golden), cross=True)
    assert {r.target.name: r.golden.name for r in rows if r.golden} == {
        "Functional.relu.0.forward.input.0": "Torch.relu.0.forward.input.0",
        "Functional.relu.0.forward.output.0": "Torch.relu.0.forward.output.0",
        "Mint.cos.0.forward.input.0": "Torch.cos.0.forward.input.0",
        "Mint.cos.0.forward.output.0": "Torch.cos.0.forward.output.0"}
    monkeypatch.setattr(mapping, "builtin_api_table", lambda: {"Functional.relu": "Functional.relu"})
    rows = match(t, g, rename=mapping._api_renamer(None, golden), cross=True)  # msprobe's table decides
    assert not any(r.golden for r in rows if r.target.entry.startswith("Functional.relu"))


def test_name_and_dtype_rules_agree_with_msprobes_own_unit_cases() -> None:
    """The cases msprobe's test_acc_compare.py states for process_cell_mapping and the cross-frame dtype groups."""
    from ascend_tui.readers.msprobe.mapping import compatible_dtypes, dtype_family, map_cell

    assert map_cell("MintFunctional.embedding.0.input.0", {}) is None
    assert map_cell("Cell.network_with_loss.module.GPTModel.forward.1.input.0", {}) == \
        "Module.network_with_loss.module.GPTModel.forward.1.input.0"
    assert map_cell("Cell.fc1.Dense.forward.0.input.0", {"fc1.Dense": "module.name"}) == \
        "Module.module.name.forward.0.input.0"
    assert [dtype_family(canonical_dtype(d)) for d in ("Int8", "Float16", "torch.bool", "Complex64", "unknown")] \
        == ["int", "float", "bool", "complex", "unknown"]
    assert compatible_dtypes(canonical_dtype("Float16"), canonical_dtype("Float32"), cross=True)
    assert compatible_dtypes(canonical_dtype("torch.float32"), canonical_dtype("torch.bfloat16"), cross=False)
    assert not compatible_dtypes("int32", "int64", cross=False) and compatible_dtypes("int32", "int64", cross=True)


def test_msprobes_data_mapping_case_pairs_flash_attention_across_frameworks(tmp_path: Path) -> None:
    """msprobe's test_ms_compare.py case: MindSpore flash_attention_score vs torch_npu's npu_fusion_attention."""
    def leaf(ms: bool, mean: float, norm: float) -> dict[str, object]:
        return {"type": "mindspore.Tensor" if ms else "torch.Tensor", "dtype": "BFloat16" if ms else "torch.bfloat16",
                "shape": [4096, 1, 2048], "Max": 4.1875, "Min": -4.4375, "Mean": mean, "Norm": norm,
                "data_name": "", "md5": ""}
    for side, name, ms, mean, norm in (("ms", "Functional.flash_attention_score.4.forward", True,
                                        -4.550282028503716e-05, 2316.379150390625),
                                       ("pt", "NPU.npu_fusion_attention.4.forward", False,
                                        -4.553794860839844e-05, 2320.0)):
        (tmp_path / side).mkdir()
        record = {"input_args": [leaf(ms, mean, norm)], "output": [leaf(ms, mean, norm)]}
        (tmp_path / side / "dump.json").write_text(json.dumps(
            {"task": "statistics", "level": "L1", "framework": "mindspore" if ms else "pytorch", "dump_data_dir": "",
             "data": {name: record}}))
    mapping = tmp_path / "dm.yaml"
    mapping.write_text("Functional.flash_attention_score.4.forward.input.0: NPU.npu_fusion_attention.4.forward.input.0\n"
                       "Functional.flash_attention_score.4.forward.output.0: "
                       "NPU.npu_fusion_attention.4.forward.output.0\n")
    rank = compare(tmp_path / "ms", tmp_path / "pt", mappings=MappingOptions(data=mapping), replay=False).ranks[0]
    assert {r.target.name: r.golden.name for r in rank.rows if r.golden} == {
        "Functional.flash_attention_score.4.forward.input.0": "NPU.npu_fusion_attention.4.forward.input.0",
        "Functional.flash_attention_score.4.forward.output.0": "NPU.npu_fusion_attention.4.forward.output.0"}
    assert rank.unmatched is not None and rank.unmatched.share == 0.0
