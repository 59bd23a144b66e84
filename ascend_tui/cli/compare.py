"""`ascend-tui compare TARGET GOLDEN`: the offline msprobe precision compare, its CSV, report, gate and summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ascend_tui.cli.finish import check_outputs, finish
from ascend_tui.cli.parser import add_gate_options, add_outputs, add_quiet
from ascend_tui.cli.progress import ProgressLine
from ascend_tui.errors import InputError

if TYPE_CHECKING:
    from ascend_tui.progress import Progress


def add_parser(sub: Any) -> None:
    """Register the `compare` subcommand on the CLI's subparsers."""
    cmp = sub.add_parser("compare")
    cmp.add_argument("target", help="msprobe dump of the run under test (root, step folder, rank folder, dump.json)")
    cmp.add_argument("golden", help="msprobe dump of the reference run, same layout")
    add_outputs(cmp, csv="write msprobe's compare CSV columns plus Attribution (one file per rank, PATH_rankN.csv, "
                "when there are several)",
                json="write the report (schema ascend-tui.report/1) with the cross-rank summary",
                junit="write JUnit XML, one failure per error finding",
                save="save the investigation for `ascend-tui open`",
                markdown="write the Markdown report")
    add_gate_options(cmp)
    cmp.add_argument("--fuzzy", action="store_true", help="match names without call index, in call order (-fm)")
    cmp.add_argument("--workers", type=int, default=None, help="local processes (default: one per core)")
    cmp.add_argument("--scheduler", metavar="ADDRESS", default=None,
                     help="run on an existing dask.distributed scheduler (or set ASCEND_TUI_SCHEDULER); "
                     "the workers must see the dump paths")
    cmp.add_argument("--threshold", action="append", default=[], metavar="NAME=VALUE",
                     help="override a threshold: cosine_warning, cosine_error, max_abs_warning, max_abs_error, "
                     "amplification")
    cmp.add_argument("--no-replay", action="store_true", help="attribute without re-running ops in isolation")
    add_quiet(cmp)


def run(args: argparse.Namespace) -> int:
    """Compare, then the one finish: the cross-rank summary rides on the investigation into the report."""
    check_outputs(args, [args.target, args.golden])
    progress = ProgressLine(sys.stderr, args.quiet)
    try:
        result = run_compare(args, progress)
    finally:
        progress.done()
    inv = result.investigation
    inv.sections["ranks"] = {**result.summary, "per_rank": [_rank_json(r) for r in result.ranks]}

    def write_csv(base: Path) -> None:
        from ascend_tui.offline.compare_rows import write_csv as write_rows

        for rank, path in zip(result.ranks, csv_paths(base, [r.rank for r in result.ranks])):
            write_rows(path, rank.rows, rank.mode, rank.stacks)

    return finish(inv, args, before=list(result.summary.get("notes", [])), totals=summary_lines(result),
                  csv=write_csv)


def thresholds(pairs: list[str]) -> Any:
    """`Thresholds` from NAME=VALUE strings; a bad one is an InputError."""
    from ascend_tui.checks.precision import Thresholds

    values: dict[str, float] = {}
    for item in pairs:
        name, sep, value = item.partition("=")
        try:
            values[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise InputError("--threshold", f"{item!r} is not NAME=NUMBER")
    try:
        return Thresholds.from_mapping(values)
    except ValueError as exc:
        raise InputError("--threshold", str(exc)) from None


def csv_paths(base: Path, ranks: list[str]) -> list[Path]:
    """One CSV path per rank: `base` itself for one rank, `base_<rank>.csv` for several."""
    if len(ranks) == 1:
        return [base]
    return [base.with_name(f"{base.stem}_{r}{base.suffix or '.csv'}") for r in ranks]


def run_compare(args: argparse.Namespace, progress: Progress) -> Any:
    """The compare the arguments ask for (`run` leaves its cross-rank summary on the investigation as `ranks`)."""
    from ascend_tui.offline.compare import compare

    for p in (args.target, args.golden):
        if not Path(p).exists():
            raise InputError(p, "no such file or folder")
    if args.workers is not None and args.workers < 1:
        raise InputError("--workers", "must be at least 1")
    result = compare(Path(args.target), Path(args.golden), fuzzy=args.fuzzy, thresholds=thresholds(args.threshold),
                     workers=args.workers, scheduler=args.scheduler, replay=not args.no_replay, progress=progress)
    return result


def _rank_json(r: Any) -> dict[str, Any]:
    first = r.first_introduced()
    return {"rank": r.rank, "mode": r.mode, "rows": len(r.rows),
            "errors": sum(1 for x in r.rows if x.result == "error"),
            "warnings": sum(1 for x in r.rows if x.result == "warning"),
            "first_introduced": first.node if first else None}


def summary_lines(result: Any) -> list[str]:
    """What a person reads after the findings: rows compared per rank and where it first diverges."""
    from ascend_tui import fmt

    s = result.summary
    rows = sum(len(r.rows) for r in result.ranks)
    bad = sum(1 for r in result.ranks for x in r.rows if x.result == "error")
    out = [f"{fmt.plural(len(result.ranks), 'rank')}, {fmt.count(rows)} rows compared, "
           f"{fmt.plural(bad, 'row')} over the error threshold"]
    if s.get("first_node"):
        out.append(f"first divergence: {s['first_rank']} at {s['first_node']} ({s['first_severity']})")
    elif rows:
        out.append("no operator introduces an error over the thresholds")
    for o in s.get("outliers", [])[:5]:
        out.append(f"{o['rank']} disagrees with its peers at {o['node']} (error {o['error']:.3g}, "
                   f"peers' median {o['median']:.3g})")
    return out

