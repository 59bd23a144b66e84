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

DEFAULT = "default"  # the value of --api-mapping/--cell-mapping given without a file (msprobe's rules alone)


def add_parser(sub: Any) -> None:
    """Register the `compare` subcommand on the CLI's subparsers."""
    cmp = sub.add_parser("compare")
    cmp.add_argument("target", help="msprobe dump of the run under test (root, step folder, rank folder, dump.json)")
    cmp.add_argument("golden", nargs="?", default=None,
                     help="msprobe dump of the reference run, same layout; without it, a reference-free check of a "
                     "tensor dump: every API replayed on the CPU in float64 and in its dtype")
    add_outputs(cmp, csv="write msprobe's compare CSV (its columns, its Result rules) plus ours: Verdict, "
                "Verdict_message, Band_units, Attribution (one file per rank, PATH_rankN.csv, when there are several)",
                json="write the report (schema ascend-tui.report/1) with the cross-rank summary",
                junit="write JUnit XML, one failure per error finding",
                save="save the investigation for `ascend-tui open`",
                markdown="write the Markdown report")
    add_gate_options(cmp)
    cmp.add_argument("--fuzzy", action="store_true", help="match names without call index, in call order (-fm)")
    cmp.add_argument("--data-mapping", metavar="YAML", help="msprobe's -dm file: 'target tensor name: golden "
                     "tensor name' lines (pairs whatever the dtypes)")
    cmp.add_argument("--layer-mapping", metavar="YAML", help="msprobe's -lm file: per layer class, "
                     "'target layer name: golden layer name' (MindSpore Cells to PyTorch modules and their APIs)")
    cmp.add_argument("--api-mapping", metavar="YAML", nargs="?", const=DEFAULT, help="msprobe's -am: Mint.* to "
                     "Torch.*, MintFunctional.* to Functional.* and msprobe's API table when it is installed (else the "
                     "golden API of the same name); a "
                     "file adds ms_api/pt_api entries with argument and output index lists")
    cmp.add_argument("--cell-mapping", metavar="YAML", nargs="?", const=DEFAULT, help="msprobe's -cm: Cell.* to "
                     "Module.*; a file maps 'cell.Class: module.Class' or substrings")
    cmp.add_argument("--workers", type=int, default=None, help="local processes (default: one per core)")
    cmp.add_argument("--scheduler", metavar="ADDRESS", default=None,
                     help="run on an existing dask.distributed scheduler (or set ASCEND_TUI_SCHEDULER); "
                     "the workers must see the dump paths")
    cmp.add_argument("--threshold", action="append", default=[], metavar="NAME=VALUE",
                     help="override a threshold: cosine_warning, cosine_error, max_abs_warning, max_abs_error, "
                     "amplification, norm_rel_warning, norm_rel_error, op_band (roundings of the run's dtype an op "
                     "may add when the dtypes differ; default 8)")
    cmp.add_argument("--no-replay", action="store_true", help="attribute without re-running ops in isolation")
    add_quiet(cmp)


def run(args: argparse.Namespace) -> int:
    """Compare, then the one finish: the cross-rank summary rides on the investigation into the report."""
    check_outputs(args, [p for p in (args.target, args.golden) if p is not None])
    if args.golden is None:
        return _reference_free(args)
    progress = ProgressLine(sys.stderr, args.quiet)
    try:
        result = run_compare(args, progress)
    finally:
        progress.done()
    inv = result.investigation  # carries the cross-rank summary as its `ranks` section

    def write_csv(base: Path) -> None:
        from ascend_tui.offline.msprobe_result import write_csv as write_rows

        for rank, path in zip(result.ranks, csv_paths(base, [r.rank for r in result.ranks])):
            write_rows(path, rank.rows, rank.mode, rank.stacks)

    return finish(inv, args, before=[*result.summary.get("notes", []), *unmatched_lead(result)],
                  totals=summary_lines(result), csv=write_csv)


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


def mapping_options(args: argparse.Namespace) -> Any:
    """The --*-mapping flags as `MappingOptions`; a named file that does not exist is an InputError."""
    from ascend_tui.readers.msprobe.mapping import MappingOptions

    values: dict[str, Any] = {}
    for key in ("data", "layer", "api", "cell"):
        v = getattr(args, f"{key}_mapping", None)
        if v is not None and v != DEFAULT:
            if Path(v).is_dir():
                raise InputError(v, f"--{key}-mapping takes a YAML file, not a folder (give the flag after "
                                    "TARGET GOLDEN when it has no file)")
            if not Path(v).is_file():
                raise InputError(v, f"--{key}-mapping: no such file")
            v = Path(v)
        values[key] = v
    return MappingOptions(**values)


def run_compare(args: argparse.Namespace, progress: Progress) -> Any:
    """The compare the arguments ask for (every step folder both roots have, one by one)."""
    from ascend_tui.offline.compare import compare_steps as compare

    for p in (args.target, args.golden):
        if not Path(p).exists():
            raise InputError(p, "no such file or folder")
    if args.workers is not None and args.workers < 1:
        raise InputError("--workers", "must be at least 1")
    result = compare(Path(args.target), Path(args.golden), fuzzy=args.fuzzy, thresholds=thresholds(args.threshold),
                     workers=args.workers, scheduler=args.scheduler, replay=not args.no_replay, progress=progress,
                     mappings=mapping_options(args))
    return result


def _reference_free(args: argparse.Namespace) -> int:
    """`compare TARGET` alone: rank the dump's APIs by error against float64, in units of their dtype's roundoff."""
    from ascend_tui.offline.reference_free import investigate

    if not Path(args.target).exists():
        raise InputError(args.target, "no such file or folder")
    if getattr(args, "csv", None):
        raise InputError("--csv", "the msprobe compare CSV needs a golden dump; without one there is no CSV")
    inv, rows, skipped = investigate(Path(args.target))
    lines = [f"reference-free: {len(rows)} APIs replayed against float64 on the CPU, {skipped} not replayable"]
    for r in rows[:10]:
        lines.append(f"  {r.entry:<40} {r.dtype:<9} {r.units:10.3g}u from float64 (CPU kernel in {r.dtype}: "
                     f"{r.kernel_units:.3g}u){'  <- less precise than its dtype allows' if r.imprecise else ''}")
    return finish(inv, args, totals=lines)


def _units(x: Any) -> str:
    """An error in units of u: one decimal, or the text a NaN/Inf is kept as."""
    return f"{x:.1f}" if isinstance(x, (int, float)) else str(x)


def unmatched_lead(result: Any) -> list[str]:
    """The lines a compare leads with when over a tenth of either side is unmatched, one per such rank."""
    from ascend_tui.offline.compare import UNMATCHED_SHARE

    out = []
    for r in result.ranks:
        um = r.unmatched
        if um is not None and um.share > UNMATCHED_SHARE:
            out.append(f"UNMATCHED {r.rank}: {um.target_unmatched} of {um.target_rows} target rows and "
                       f"{um.golden_unmatched} of {um.golden_rows} golden rows have nothing to compare with; "
                       "no verdict on them (precision/unmatched below names them)")
    return out


def summary_lines(result: Any) -> list[str]:
    """What a person reads after the findings: rows compared per rank and where it first diverges."""
    from ascend_tui import fmt

    from ascend_tui.offline.compare import UNMATCHED_SHARE
    from ascend_tui.offline.compare_band import row_counts

    s = result.summary
    u = s.get("unmatched") or {}
    t_rows, t_left = u.get("target_rows", 0), u.get("target_unmatched", 0)
    g_rows, g_left = u.get("golden_rows", 0), u.get("golden_unmatched", 0)
    paired = t_rows - t_left
    bad = sum(1 for r in result.ranks for x in r.rows if x.result == "error")
    per_rank = [row_counts(r.rows) for r in result.ranks]
    c = {k: sum(pc[k] for pc in per_rank) for k in row_counts([])}
    out = [f"{fmt.plural(len(result.ranks), 'rank')}, {fmt.count(paired)} of {fmt.count(t_rows)} target rows "
           f"compared ({fmt.count(t_left)} unmatched; golden: {fmt.count(g_left)} of {fmt.count(g_rows)} "
           f"unmatched): {fmt.count(c['tensor_pairs'])} tensor pairs (the precision view's rows), "
           f"{fmt.count(c['values'])} scalar or None values; {fmt.plural(bad, 'row')} in error"]
    g = next((r.growth for r in result.ranks if r.growth), None)
    if g:
        out.append(f"dtypes differ: judged against {g['dtype']} rounding (u = {g['u']:.3g}); "
                   f"{fmt.count(c['within_band'])} tensors within the rounding band, {fmt.count(c['beyond_band'])} "
                   f"beyond it (accumulated or introduced)")
        for phase in ("forward", "backward"):
            mods = [m for m in g["modules"] if m["phase"] == phase]
            if mods:
                out.append(f"error growth, {phase} (peak per block, units of u): " +
                           " > ".join(f"{m['module']} {_units(m['units'])}" for m in mods[:12]) +
                           (" ..." if len(mods) > 12 else ""))
        top = g.get("growth_ranking", [])[:3]
        if top:
            out.append("largest growth beyond what inputs carried (units of u, op band "
                       f"{g['op_band_units']:g}): " +
                       ", ".join(f"{p['node']} {_units(p['growth_units'])}" +
                                 (f" ({p['verdict']})" if p["verdict"] else "") for p in top))
    for st in s.get("steps", []):
        out.append(f"{st['step']}: " + (f"diverges at {st['first_node']} ({st['first_module'] or st['first_kind']})"
                                         if st["diverges"] else "within the rounding band / thresholds") +
                   f", {fmt.plural(st['errors'], 'row')} in error")
    if s.get("steps"):
        out.append(f"first step to diverge: {s['first_step']}" if s.get("first_step") else
                   "no step diverges")
    if s.get("first_node"):
        where = f"{s['first_module']}, " if s.get("first_module") else ""
        out.append(f"first divergence: {s['first_rank']} at {s['first_node']} ({where}{s['first_severity']})")
    elif s.get("unmatched_share", 0.0) > UNMATCHED_SHARE or not paired:
        out.append(f"no verdict: {fmt.count(t_left)} target and {fmt.count(g_left)} golden rows had nothing to "
                   "compare with; among the rows compared, no operator introduces an error" if paired else
                   "no verdict: no row of the target found its golden counterpart")
    else:
        out.append("no operator introduces an error over the thresholds in the rows compared")
    for o in s.get("outliers", [])[:5]:
        out.append(f"{o['rank']} disagrees with its peers at {o['node']} (error {o['error']:.3g}, "
                   f"peers' median {o['median']:.3g})")
    return out

