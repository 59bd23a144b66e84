"""The one finish step of every subcommand that reports: baseline, gate, output files, the findings printed, the exit code.

Each subcommand registers the output and gate options it offers (`parser.add_outputs`,
`parser.add_gate_options`), checks the output paths before it does any work (`check_outputs`)
and ends in `finish`, so `--json`, `--junit`, `--save`, `--markdown`, `--csv`, `--fail-on` and
`--baseline` mean the same for all of them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence, TextIO

from ascend_tui.cli.exits import EXIT_CLEAN, EXIT_FINDINGS
from ascend_tui.cli.parser import OUTPUTS

if TYPE_CHECKING:
    from ascend_tui.evidence import Finding
    from ascend_tui.investigation import Investigation

Lines = Sequence[str] | Callable[[TextIO], None]


def check_outputs(args: argparse.Namespace, inputs: Iterable[str | Path | None]) -> None:
    """Refuse, before any work, every output option that would land on or inside what we were asked to read."""
    from ascend_tui.outputs import check_output_path

    inputs = [p for p in inputs if p]
    for flag in OUTPUTS:
        out = getattr(args, flag, None)
        if out:
            check_output_path(out, inputs, option=f"--{flag}")


def finish(inv: Investigation, args: argparse.Namespace, *, before: Lines = (), totals: Sequence[str] | None = None,
           csv: Callable[[Path], None] | None = None, baseline: Investigation | None = None) -> int:
    """Apply --baseline, gate at --fail-on, write the output files, print, and return the exit code.

    `before` is printed ahead of the findings (a story, the profile tables: lines, or a function of
    the stream, called once the baseline is applied); `totals` replaces the closing count line;
    `csv` writes the subcommand's --csv; `baseline` is the --baseline already opened.
    """
    from ascend_tui.fmt import plural
    from ascend_tui.gate import apply_baseline, gate, parse_share
    from ascend_tui.report import format_findings

    known = None
    if getattr(args, "baseline", None):
        known = apply_baseline(inv, args.baseline, parse_share(getattr(args, "max_slowdown", "5%")), baseline)
    result = gate(inv, getattr(args, "fail_on", "error"), known)
    write_outputs(inv, args, csv, failing=[f for _, f in result.failing])
    out = sys.stdout
    if callable(before):
        before(out)
    else:
        for line in before:
            print(line, file=out)
    for line in format_findings(inv):
        print(line, file=out)
    if totals is None:
        summary = inv.summary()
        totals = [f"{plural(len(inv.graph), 'node')}, {plural(inv.graph.edge_count(), 'edge')}; "
                  f"{plural(summary['errors'], 'error')}, {plural(summary['warnings'], 'warning')}"]
    for line in totals:
        print(line, file=out)
    for line in result.unverified:
        print(f"fail-on unverified: {line}", file=out)
    if known is not None:
        print(f"baseline: {plural(len(result.failing), 'new finding')} at {result.threshold} or worse, "
              f"{result.known} known", file=out)
    return EXIT_CLEAN if result.passed else EXIT_FINDINGS


def write_outputs(inv: Investigation, args: argparse.Namespace, csv: Callable[[Path], None] | None = None, *,
                  failing: Sequence[Finding] | None = None) -> None:
    """Every output file the options ask for; the JSON report is `report.build_report`'s, for every subcommand.

    `failing` (what the gate failed) are the JUnit failures, so the dashboard and the exit code agree.
    """
    from ascend_tui.report import write_json, write_junit

    if getattr(args, "csv", None):
        if csv is None:
            raise ValueError("--csv given to a subcommand that writes no CSV")
        csv(Path(args.csv))
    if getattr(args, "json", None):
        write_json(inv, args.json)
    if getattr(args, "junit", None):
        write_junit(inv, args.junit, failing)
    if getattr(args, "save", None):
        inv.save(args.save)
    if getattr(args, "markdown", None):
        from ascend_tui.export import write_export

        write_export(inv, args.markdown, "markdown")
