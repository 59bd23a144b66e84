"""`ascend-tui graph PATH [EVIDENCE...] [--json OUT]`: what a graph file holds, and the graph as node-link JSON.

Any graph source the readers know (ONNX, .pt2, GE dump, MindSpore IR, msprobe dump or .vis.db,
saved graphs) is summarized without torch; evidence files given after it are laid on it by
operator name, and the line per file says what matched and what did not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ascend_tui.cli.exits import EXIT_CLEAN, EXIT_FINDINGS, keep
from ascend_tui.cli.finish import check_outputs
from ascend_tui.cli.parser import add_quiet
from ascend_tui.cli.progress import ProgressLine
from ascend_tui.errors import InputError

if TYPE_CHECKING:
    from ascend_tui.progress import Progress

_TOP_TYPES = 12


def add_parser(sub: Any) -> None:
    graph = sub.add_parser("graph")
    graph.add_argument("path", help="the graph source")
    graph.add_argument("evidence", nargs="*", help="dumps, profiles or sanitizer logs to lay on it by operator name")
    # not a report: the graph itself as node-link JSON (what `check --json` writes is the report)
    graph.add_argument("--json", metavar="PATH", help="write the graph as node-link JSON")
    graph.add_argument("--fail-on", choices=("error", "warning"), default="error",
                       help="exit 1 when the graph or its evidence holds a finding of this severity or worse "
                            "(default: error)")
    add_quiet(graph)


def run(args: argparse.Namespace) -> int:
    check_outputs(args, [args.path, *args.evidence])
    progress = ProgressLine(sys.stderr, args.quiet)
    try:
        return run_graph(args, sys.stdout, progress)
    finally:
        progress.done()


def run_graph(args: Any, out: TextIO, progress: Progress | None = None) -> int:
    """Open `args.path`, lay `args.evidence` on it, print the summary, write `args.json` when asked."""
    from ascend_tui.offline.open import open_path, reader_for
    from ascend_tui.graph.summary import summarize

    path = Path(args.path)
    inv = open_path(path, progress=progress)
    keep(inv)  # the process ends after this command: nothing gains from taking a 100k-node graph apart
    reader = reader_for(path)
    notes: list[str] = list(inv.run.extra.get("notes") or [])
    if args.evidence:
        from ascend_tui.graph.names import NameIndex
        from ascend_tui.offline.overlay import lay_path  # numpy and the evidence readers: only to lay evidence

        index = NameIndex(inv.graph)
        for evidence in args.evidence:
            notes.append(lay_path(inv, evidence, progress, None, index))
    summary = summarize(inv.graph)
    fmt = reader.name if reader is not None else inv.run.source
    lines = [f"{path}: {fmt}",
             f"  {summary.nodes:,} nodes ({summary.operators:,} operators"
             + "".join(f", {v:,} {k}" for k, v in summary.placeholders.items()) + f"), {summary.edges:,} edges",
             f"  {len(summary.op_types)} op types: "
             + ", ".join(f"{t} {c}" for t, c in summary.op_types[:_TOP_TYPES])
             + (", ..." if len(summary.op_types) > _TOP_TYPES else ""),
             f"  module tree: {summary.modules:,} modules, depth {summary.module_depth}",
             f"  inferred edges: {summary.inferred_edges:,}"
             + (f"; control edges: {summary.control_edges:,}" if summary.control_edges else "")
             + (f"; modules inferred from neighbours: {summary.inferred_modules:,}" if summary.inferred_modules
                else "")]
    if inv.findings:
        s = inv.summary()
        lines.append(f"  findings: {s['errors']} errors, {s['warnings']} warnings, {len(inv.findings)} in all")
    lines += [f"  note: {n}" for n in notes]
    print("\n".join(lines), file=out)
    if args.json:
        from ascend_tui.graph.summary import node_link_json

        meta = {"source": inv.run.source, "format": fmt, "path": str(path), "summary": summary.to_json(),
                "evidence": inv.run.extra.get("evidence", {}),
                "unmatched_evidence": inv.run.extra.get("unmatched_evidence", {})}
        try:
            target = Path(args.json)
            text = node_link_json(inv.graph, meta)  # what write_json_atomic(target, node_link(...)) writes
            tmp = target.with_name(target.name + ".tmp")  # written next to it and renamed over it, as that does
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(target)
        except OSError as exc:
            raise InputError(args.json, exc.strerror or str(exc)) from None
        except ValueError as exc:
            raise InputError(args.json, f"cannot write the graph as JSON: {exc}") from None
        print(f"  wrote {args.json}", file=out)
    from ascend_tui.gate import gate

    return EXIT_CLEAN if gate(inv, getattr(args, "fail_on", "error")).passed else EXIT_FINDINGS
