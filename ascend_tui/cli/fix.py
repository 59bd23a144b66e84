"""`ascend-tui fix TARGET`: investigate a model file, try the remedies its findings name, verify, print a patch.

The remedies run without editing the user's code (`live.remedies`); when none alone brings the
outputs within the tolerance, `live.remedy_search` finds the smallest set of modules to keep in
float32. The chosen fix is verified twice (`live.fix_run`): its outputs against the float32
reference, and a second investigation with it applied, whose findings decide the exit code. The
report's `fix` section carries the numbers, the re-run count and the patch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ascend_tui.cli.finish import check_outputs, finish
from ascend_tui.cli.parser import add_gate_options, add_outputs, add_quiet
from ascend_tui.cli.progress import ProgressLine
from ascend_tui.cli.settings import add_run_settings, run_options
from ascend_tui.errors import InputError


def add_fix_options(parser: argparse.ArgumentParser) -> None:
    """--tolerance, --no-search and --patch: shared with `triage --fix`."""
    parser.add_argument("--tolerance", type=float, default=0.999,
                        help="output cosine against the float32 reference a fix must reach (default 0.999)")
    parser.add_argument("--no-search", action="store_true",
                        help="only try the findings' own remedies, not the search for the smallest float32 set")
    parser.add_argument("--patch", metavar="PATH", help="write the patch (a unified diff for `patch -p1`) here")


def check_fix_options(args: argparse.Namespace, inputs: list[Any]) -> None:
    """Refuse a bad --tolerance or --patch path before any work."""
    if not 0.0 < args.tolerance <= 1.0:
        raise InputError("--tolerance", f"must be a cosine in (0, 1], got {args.tolerance}")
    if args.patch:
        from ascend_tui.outputs import check_output_path

        check_output_path(args.patch, inputs, option="--patch")


def add_parser(sub: Any) -> None:
    fix = sub.add_parser("fix")
    fix.add_argument("target", help="path/to/model.py[:factory] (the factory returns (model, inputs))")
    add_run_settings(fix, checks="overflow,precision,memory")
    add_fix_options(fix)
    add_outputs(fix, json="write the report, with the fix section (before/after, re-runs, patch)", junit=None,
                save=None, markdown=None)
    add_gate_options(fix, unverified="exit 1 when the fix is not verified, 0 when it is (or there is nothing to "
                                 "fix), whatever the findings")
    add_quiet(fix)


def run(args: argparse.Namespace) -> int:
    from ascend_tui.live.fix_run import run_fix
    from ascend_tui.live.targets import split_spec

    options = run_options(args, target=args.target)
    path = split_spec(args.target)[0]
    check_outputs(args, [args.target, path])
    check_fix_options(args, [args.target, path])
    progress = ProgressLine(sys.stderr, args.quiet)
    try:
        fixed = run_fix(args.target, options, tolerance=args.tolerance, search=not args.no_search, progress=progress)
    finally:
        progress.done()
    inv = fixed.after if fixed.after is not None else fixed.before
    inv.sections["fix"] = fixed.section
    write_patch(args, fixed)
    return finish(inv, args, before=fix_lines(args.target, options, fixed))


def write_patch(args: argparse.Namespace, fixed: Any) -> None:
    if args.patch and fixed.patch is not None and fixed.section["verified"] and (fixed.patch.diff or
                                                                                 fixed.patch.snippet):
        Path(args.patch).write_text(fixed.patch.diff or fixed.patch.snippet, encoding="utf-8")


def fix_lines(target: str, options: Any, fixed: Any) -> list[str]:
    """What a fix run prints before the findings: each run, the search, the verdict and the patch."""
    from ascend_tui.live.fix_run import report_lines

    return report_lines(target, options.dtype, fixed)
