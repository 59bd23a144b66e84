"""Text a person takes away: the Markdown report, an operator's summary, export files.

No Textual here: the CLI (`check --markdown`), the app (`e`, `c`) and the tests use the same functions.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from ascend_tui.errors import InputError
from ascend_tui.outputs import check_output_path
from ascend_tui.evidence import Finding, TensorStats
from ascend_tui.fmt import magnitude

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

FORMATS: dict[str, str] = {"json": "json", "markdown": "md", "md": "md"}
MAX_TABLE_ROWS = 200
_SEVERITY_TITLES = {"error": "Errors", "warning": "Warnings", "info": "Notes"}
_SUMMARY_STATS = ("min", "max", "mean", "abs_max", "l2norm", "nan_count", "inf_count", "zero_count")


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _code(text: str) -> str:
    """Inline code that survives backticks inside operator names."""
    if not text:
        return ""
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if fence == "`" else f"{fence} {text} {fence}"


def report_markdown(inv: Investigation) -> str:
    """A Markdown report to paste into an issue: run, summary, findings by severity with causes and hints."""
    run = inv.run
    device = dict(run.device)
    title = run.target or inv.graph.name or "investigation"
    lines = [f"# ascend-tui report: {_cell(title)}", "", "| | |", "|---|---|"]
    rows = [
        ("target", _code(run.target) if run.target else "—"),
        ("device", _cell(" ".join(str(device.get(k, "")) for k in ("backend", "name")).strip() or "—")),
        ("dtype", run.dtype),
        ("reference", _cell(run.reference or "none")),
        ("checks", _cell(", ".join(run.checks) or "—")),
        ("iterations", str(run.iterations)),
        ("source", _cell(run.source)),
        ("graph", f"{len(inv.graph)} nodes, {inv.graph.edge_count()} edges"),
    ]
    lines += [f"| {k} | {v} |" for k, v in rows]
    lines += ["", "## Summary", "", _summary_line(inv.findings)]
    by_check = Counter(f.check for f in inv.findings)
    if by_check:
        lines.append("")
        for check, n in sorted(by_check.items()):
            errs = sum(1 for f in inv.findings if f.check == check and f.severity == "error")
            lines.append(f"- {check}: {n} finding{'s' * (n != 1)} ({errs} error{'s' * (errs != 1)})")
    for severity in ("error", "warning", "info"):
        found = [f for f in inv.findings if f.severity == severity]
        if found:
            lines += ["", *_severity_section(severity, found)]
    if inv.memory_events:
        lines += ["", *_memory_section(inv)]
    return "\n".join(lines) + "\n"


def _summary_line(findings: list[Finding]) -> str:
    if not findings:
        return "No findings."
    counts = Counter(f.severity for f in findings)
    ops = len({f.node for f in findings})
    names = {"error": "error", "warning": "warning", "info": "note"}
    parts = [f"**{counts[s]} {names[s]}{'s' * (counts[s] != 1)}**" for s in names if counts[s]]
    return f"{', '.join(parts)} on {ops} operator{'s' * (ops != 1)}."


def _severity_section(severity: str, found: list[Finding]) -> list[str]:
    lines = [f"## {_SEVERITY_TITLES[severity]} ({len(found)})", "",
             "| # | check / kind | operator | op type | module | attribution | message |",
             "|---|---|---|---|---|---|---|"]
    shown = found[:MAX_TABLE_ROWS]
    for i, f in enumerate(shown, 1):
        lines.append(f"| {i} | {_cell(f.check)} / {_cell(f.kind)} | {_code(_cell(f.node))} | {_cell(f.op_type)} | "
                     f"{_cell(f.module) or 'root'} | {_cell(f.attribution or '—')} | {_cell(f.message)} |")
    if len(found) > len(shown):
        lines.append(f"\n… and {len(found) - len(shown)} more (export JSON for all of them)")
    details = [(i, f) for i, f in enumerate(shown, 1) if f.root_cause is not None or f.hint]
    if details:
        lines += ["", "### Root causes and hints"]
    for i, f in details:
        lines += ["", f"**{i}. {_code(f.node)}** — {f.check}/{f.kind}"]
        rc = f.root_cause
        if rc is not None:
            reason = f" — {rc.reason}" if rc.reason else ""
            lines.append(f"- root cause: {_code(rc.node)}{reason}")
            if rc.chain:
                hops = " → ".join(f"{_code(c.node)} ({magnitude(c.value)})" for c in reversed(rc.chain))
                lines.append(f"- chain, source first: {hops}")
        if f.hint:
            lines.append(f"- hint: {f.hint}")
    return lines


def _memory_section(inv: Investigation) -> list[str]:
    events = inv.memory_events
    lines = [f"## Memory events ({len(events)})", "", "| kind | tool | operator | confidence | message |",
             "|---|---|---|---|---|"]
    for e in events[:MAX_TABLE_ROWS]:
        conf = magnitude(e.confidence) if e.confidence is not None else "—"
        if e.likely_false_positive:
            conf += " (likely false positive)"
        lines.append(f"| {_cell(e.kind)} | {_cell(e.tool)} | {_code(_cell(e.node)) if e.node else '—'} | "
                     f"{conf} | {_cell(e.message)} |")
    if len(events) > MAX_TABLE_ROWS:
        lines.append(f"\n… and {len(events) - MAX_TABLE_ROWS} more")
    return lines


def op_summary(inv: Investigation, node_id: str) -> str:
    """The focused operator as plain text for the clipboard: identity, shapes, target vs reference, findings."""
    node = inv.graph.node(node_id)
    module = node.module or "(root)"
    if node.module_class:
        module += f" ({node.module_class})"
    lines = [
        f"operator   {node.id}",
        f"op type    {node.op_type}",
        f"module     {module}",
        f"index      {node.index} ({node.phase})" if node.index >= 0 else f"kind       {node.kind}",
    ]
    if node.source is not None:
        where = f"{node.source.file}:{node.source.line}"
        lines.append(f"source     {where}" + (f" in {node.source.function}" if node.source.function else ""))
    lines.append(f"inputs     {_metas(node.inputs)}")
    lines.append(f"outputs    {_metas(node.outputs)}")
    slots = max(len(node.outputs), len(inv.stats.outputs(node.id)), 1)
    for slot in range(slots):
        target, reference = inv.stats_for(node.id, slot)
        if target is None and reference is None:
            continue
        lines.append("")
        lines += _stats_block(slot, target, reference, inv.run.dtype)
    found = inv.findings_for(node.id)
    lines += ["", f"findings   {len(found) or 'none'}"]
    for f in found:
        lines.append(f"  {f.severity.upper()} {f.check}/{f.kind}: {f.message}")
        if f.root_cause is not None:
            reason = f" ({f.root_cause.reason})" if f.root_cause.reason else ""
            lines.append(f"    root cause: {f.root_cause.node}{reason}")
        if f.metrics:
            lines.append("    metrics: " + ", ".join(f"{k}={magnitude(v)}" for k, v in f.metrics.items()))
        if f.hint:
            lines.append(f"    hint: {f.hint}")
    return "\n".join(lines) + "\n"


def _metas(metas: Iterable[Any]) -> str:
    parts = [m.describe() if m is not None else "—" for m in metas]
    return ", ".join(parts) if parts else "—"


def _stats_block(slot: int, target: TensorStats | None, reference: TensorStats | None, dtype: str) -> list[str]:
    right = "reference" if reference is not None else ""
    lines = [f"output {slot}   {'target (' + dtype + ')':>16} {right:>16}".rstrip()]
    for name in _SUMMARY_STATS:
        t = magnitude(getattr(target, name)) if target is not None else "—"
        r = magnitude(getattr(reference, name)) if reference is not None else ""
        lines.append(f"  {name:<10} {t:>16} {r:>16}".rstrip())
    return lines


def input_paths(inv: Investigation, extra: Iterable[str | Path] = ()) -> list[Path]:
    """Files and folders this investigation was read from: exports must never land on or inside them."""
    found: list[Path] = []
    candidates: list[Any] = [inv.run.target, *extra]
    for key in ("inputs", "paths", "baseline"):
        value = inv.run.extra.get(key)
        candidates += value if isinstance(value, (list, tuple)) else [value]
    for item in candidates:
        if not item:
            continue
        text = str(item)
        path = Path(text)
        if not path.exists() and ":" in text:
            path = Path(text.rsplit(":", 1)[0])  # model.py:factory
        if path.exists():
            found.append(path.resolve())
    return found


def write_export(inv: Investigation, path: str | Path, fmt: str, *, inputs: Iterable[str | Path] = ()) -> Path:
    """Write the report as JSON or Markdown atomically; refuses to touch the investigation's input files."""
    kind = FORMATS.get(fmt.lower())
    if kind is None:
        raise InputError(path, f"unknown export format {fmt!r} (expected json or markdown)")
    out = Path(path)
    resolved = check_output_path(out, input_paths(inv, inputs), option="the export")
    from ascend_tui.report import build_report

    text = (json.dumps(_plain(build_report(inv)), indent=2, allow_nan=False) + "\n") if kind == "json" \
        else report_markdown(inv)
    tmp = resolved.with_name(f".{resolved.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, resolved)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(out, exc.strerror or str(exc)) from None
    return out


def _plain(value: Any) -> Any:
    """JSON-safe copy: numpy scalars become numbers, non-finite floats the strings the report schema uses."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def default_export_path(fmt: str, folder: str | Path = ".") -> Path:
    """`ascend-tui-report.<ext>` in `folder`, numbered so an earlier export is never replaced."""
    kind = FORMATS.get(fmt.lower(), "json")
    base = Path(folder)
    stem = "ascend-tui-report"
    candidate = base / f"{stem}.{kind}"
    n = 1
    while candidate.exists():
        candidate = base / f"{stem}-{n}.{kind}"
        n += 1
    return candidate


def default_export_stem(folder: str | Path = ".", formats: Iterable[str] = ("json", "markdown")) -> Path:
    """`ascend-tui-report` in `folder` (no suffix), numbered so no file of any of `formats` would be replaced."""
    kinds = [FORMATS.get(f.lower(), "json") for f in formats]
    base = Path(folder)
    stem, n = "ascend-tui-report", 0
    while True:
        name = stem if n == 0 else f"{stem}-{n}"
        if not any((base / f"{name}.{k}").exists() for k in kinds):
            return base / name
        n += 1
