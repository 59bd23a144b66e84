"""`ascend-tui compare TARGET GOLDEN`: the offline msprobe precision compare, its CSV, report and summary."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ascend_tui.errors import InputError
from ascend_tui.progress import Progress


def add_parser(sub: Any) -> None:
    """Register the `compare` subcommand on the CLI's subparsers."""
    cmp = sub.add_parser("compare", help="compare two msprobe dumps (target vs golden) as `msprobe compare` "
                         "does, and say which operator introduces the error")
    cmp.add_argument("target", help="msprobe dump of the run under test (root, step folder, rank folder, dump.json)")
    cmp.add_argument("golden", help="msprobe dump of the reference run, same layout")
    cmp.add_argument("--csv", metavar="PATH", help="write msprobe's compare CSV columns plus Attribution "
                     "(one file per rank, PATH_rankN.csv, when there are several)")
    cmp.add_argument("--json", metavar="PATH", help="write the report (schema ascend-tui.report/1) with the "
                     "cross-rank summary")
    cmp.add_argument("--save", metavar="PATH", help="save the investigation for `ascend-tui open`")
    cmp.add_argument("--fuzzy", action="store_true", help="match names without call index, in call order (-fm)")
    cmp.add_argument("--workers", type=int, default=None, help="local processes (default: one per core)")
    cmp.add_argument("--scheduler", metavar="ADDRESS", default=None,
                     help="run on an existing dask.distributed scheduler (or set ASCEND_TUI_SCHEDULER); "
                     "the workers must see the dump paths")
    cmp.add_argument("--threshold", action="append", default=[], metavar="NAME=VALUE",
                     help="override a threshold: cosine_warning, cosine_error, max_abs_warning, max_abs_error, "
                     "amplification")
    cmp.add_argument("--no-replay", action="store_true", help="attribute without re-running ops in isolation")
    cmp.add_argument("-q", "--quiet", action="store_true", help="no progress line")


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


def run_compare(args: argparse.Namespace, progress: Progress) -> tuple[Any, list[str]]:
    """Compare, write the requested files; returns the investigation to report on and lines to print."""
    from ascend_tui.offline.compare_rows import write_csv
    from ascend_tui.offline.compare import compare
    from ascend_tui.report import build_report
    from ascend_tui.graph.opgraph import write_json_atomic

    for p in (args.target, args.golden):
        if not Path(p).exists():
            raise InputError(p, "no such file or folder")
    if args.workers is not None and args.workers < 1:
        raise InputError("--workers", "must be at least 1")
    result = compare(Path(args.target), Path(args.golden), fuzzy=args.fuzzy, thresholds=thresholds(args.threshold),
                     workers=args.workers, scheduler=args.scheduler, replay=not args.no_replay, progress=progress)
    lines = list(result.summary.get("notes", []))
    if args.csv:
        for rank, path in zip(result.ranks, csv_paths(Path(args.csv), [r.rank for r in result.ranks])):
            write_csv(path, rank.rows, rank.mode, rank.stacks)
    inv = result.investigation
    if args.json:
        report = build_report(inv)
        report["ranks"] = {**result.summary, "per_rank": [_rank_json(r) for r in result.ranks]}
        write_json_atomic(Path(args.json), report)
    if args.save:
        inv.save(args.save)
    from ascend_tui.report import format_findings

    lines.extend(format_findings(inv))
    lines.extend(summary_lines(result))
    return inv, lines


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

