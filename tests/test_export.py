"""The Markdown report, the operator summary and export files: what a person pastes, copies and keeps."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from app_fixtures import memory_investigation, overflow_investigation

from ascend_tui.export import default_export_path, op_summary, report_markdown, write_export
from ascend_tui.errors import InputError
from ascend_tui.evidence import Finding
from ascend_tui.investigation import Investigation
from ascend_tui.report import REPORT_SCHEMA


def test_markdown_report_has_run_summary_findings_by_severity_causes_and_hints() -> None:
    md = report_markdown(overflow_investigation())
    assert md.startswith("# ascend-tui report: demo:overflow\n")
    assert "| dtype | float16 |" in md and "| reference | cpu:float32 |" in md
    assert "**1 error**, **1 warning**, **2 notes** on 4 operators." in md
    errors, warnings, notes = md.index("## Errors (1)"), md.index("## Warnings (1)"), md.index("## Notes (2)")
    assert errors < warnings < notes
    row = next(line for line in md.splitlines() if "`attn[0]/exp.0`" in line and line.startswith("| 1 |"))
    assert "overflow / inf" in row and "introduced" in row
    assert "- root cause: `attn[0]/exp.0` — exp overflows float16 for inputs above 11.09" in md
    # the chain reads from the graph input to the op that overflowed
    assert ("- chain, source first: `input:0` (3) → `proj/mm.0` (48) → `scale/mul.0` (12) → "
            "`attn[0]/exp.0` (162,755)") in md
    assert "- hint: exp of values above 11.1 overflows float16" in md


def test_markdown_table_cells_survive_pipes_and_newlines() -> None:
    inv = overflow_investigation()
    f = inv.findings[0]
    inv.replace_findings("overflow", [replace(f, message="a | b\nsecond line")])
    md = report_markdown(inv)
    row = next(line for line in md.splitlines() if line.startswith("| 1 |"))
    assert "a \\| b second line" in row
    assert row.count(" | ") == 6  # seven cells, the message's pipe escaped


def test_markdown_report_lists_memory_events_and_doubtful_ones() -> None:
    md = report_markdown(memory_investigation())
    assert "## Memory events (5)" in md
    assert "| illegal_read | mssanitizer | `embed/embedding.0` | 0.8 | illegal read of size 4 |" in md
    assert "0.3 (likely false positive)" in md
    assert "| leak | mssanitizer | — | — | Direct leak of 1024 byte(s) |" in md


def test_markdown_report_without_findings_says_so() -> None:
    inv = overflow_investigation()
    inv.replace_findings("overflow", [])
    md = report_markdown(inv)
    assert "No findings." in md and "## Errors" not in md


def test_operator_summary_has_identity_shapes_stats_side_by_side_and_findings() -> None:
    text = op_summary(overflow_investigation(), "attn[0]/exp.0")
    lines = text.splitlines()
    assert lines[:4] == ["operator   attn[0]/exp.0", "op type    aten.exp", "module     attn[0]",
                         "index      2 (forward)"]
    assert "inputs     float16[4,16]" in lines and "outputs    float16[4,16]" in lines
    header = next(line for line in lines if line.startswith("output 0"))
    assert "target (float16)" in header and "reference" in header
    abs_max = next(line for line in lines if line.strip().startswith("abs_max"))
    assert abs_max.split()[1:] == ["inf", "162,755"]
    assert "  ERROR overflow/inf: 3 Inf values in the output; every input was finite" in lines
    assert any(line.startswith("    hint: exp of values above 11.1") for line in lines)


def test_operator_summary_without_reference_or_findings() -> None:
    text = op_summary(memory_investigation(), "head/linear.0")
    assert "module     head (Linear)" in text
    assert "findings   none" in text and "output 0" not in text


def test_json_export_is_the_strict_json_report(tmp_path: Path) -> None:
    inv = overflow_investigation()
    inv.replace_findings("overflow", [*inv.findings, replace(inv.findings[0], node="add.0",
                                                               metrics={"abs_max": float("nan")})])
    out = write_export(inv, tmp_path / "r.json", "json")
    data = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"non-strict JSON token {c}"))
    assert data["schema"] == REPORT_SCHEMA
    assert data["summary"] == {"errors": 2, "warnings": 1}
    assert any(f["metrics"].get("abs_max") == "NaN" for f in data["findings"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no temp file left behind


def test_markdown_export_writes_the_report(tmp_path: Path) -> None:
    out = write_export(memory_investigation(), tmp_path / "r.md", "markdown")
    assert out.read_text().startswith("# ascend-tui report: demo:memory")


def test_export_never_writes_over_or_into_an_input(tmp_path: Path) -> None:
    log = tmp_path / "session.log"
    log.write_text("====== ERROR: illegal read of size 4\n")
    dump = tmp_path / "dump"
    dump.mkdir()
    inv = memory_investigation()
    inv.run.target = str(log)
    with pytest.raises(InputError, match="would overwrite an input file"):
        write_export(inv, log, "markdown")
    assert log.read_text() == "====== ERROR: illegal read of size 4\n"
    with pytest.raises(InputError, match="is inside the input folder"):
        write_export(inv, dump / "report.md", "markdown", inputs=[dump])
    model = tmp_path / "model.py"
    model.write_text("")
    inv.run.target = f"{model}:build"
    with pytest.raises(InputError, match="would overwrite an input file"):
        write_export(inv, model, "json")


def test_export_rejects_unknown_format_folders_and_missing_parents(tmp_path: Path) -> None:
    inv = overflow_investigation()
    with pytest.raises(InputError, match="unknown export format 'xml'"):
        write_export(inv, tmp_path / "r.xml", "xml")
    with pytest.raises(InputError, match="names a folder"):
        write_export(inv, tmp_path, "json")
    with pytest.raises(InputError, match="folder does not exist"):
        write_export(inv, tmp_path / "nope" / "r.json", "json")


def test_default_export_path_never_replaces_an_earlier_export(tmp_path: Path) -> None:
    first = default_export_path("markdown", tmp_path)
    assert first == tmp_path / "ascend-tui-report.md"
    first.write_text("earlier")
    assert default_export_path("md", tmp_path) == tmp_path / "ascend-tui-report-1.md"
    assert default_export_path("json", tmp_path) == tmp_path / "ascend-tui-report.json"


def test_export_module_does_not_import_textual() -> None:
    code = "import sys, ascend_tui.export; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_finding_without_node_is_reported_without_crashing() -> None:
    inv = memory_investigation()
    inv.add_findings([Finding("memory", "unprinted_errors", "info", "", "", "", -1, "3 more errors were not printed")])
    md = report_markdown(inv)
    assert "3 more errors were not printed" in md


def test_check_writes_the_same_markdown_the_app_exports(tmp_path: Path) -> None:
    """One export module: `check --markdown` and the app's `e` write the same report."""
    from ascend_tui import cli

    inv = overflow_investigation()
    saved = tmp_path / "run.atui.json"
    inv.save(saved)
    out = tmp_path / "report.md"
    code = cli.main(["check", str(saved), "--markdown", str(out), "-q"])
    assert code == 1, "the investigation holds an error"
    assert out.read_text() == report_markdown(Investigation.load(saved))
    assert cli.main(["check", str(saved), "--markdown", str(saved), "-q"]) == 2, "never over an input"
