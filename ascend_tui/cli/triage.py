"""`ascend-tui triage TARGETS...`: every check that applies, in order, and one story from symptom to cause."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ascend_tui.cli.finish import check_outputs, finish
from ascend_tui.cli.parser import add_gate_options, add_outputs, add_quiet
from ascend_tui.cli.progress import ProgressLine
from ascend_tui.cli.settings import add_run_settings, run_options
from ascend_tui.errors import InputError


def add_parser(sub: Any) -> None:
    tri = sub.add_parser("triage")
    tri.add_argument("targets", nargs="+", help="a model file (path/to/model.py[:factory]), or artifacts: msprobe "
                     "dumps, sanitizer logs, profiler folders, graphs, saved runs (the first one's graph carries the rest)")
    add_run_settings(tri, checks=None, iterations=2)
    add_outputs(tri, json="write the report, with its story", junit="write JUnit XML",
                markdown="write the Markdown report", save="save the investigation for `ascend-tui open`")
    add_quiet(tri)
    add_gate_options(tri, unverified="with --fix: exit 1 when any cause's fix is not verified (every error cause, "
                                 "and every cause the fix run judged), 0 when all are, whatever the findings")
    tri.add_argument("--fix", action="store_true", help="for a model file: try the causes' remedies and mark each "
                     "cause fix verified or not (as `ascend-tui fix` does)")
    from ascend_tui.cli.fix import add_fix_options

    add_fix_options(tri)


def run(args: argparse.Namespace) -> int:
    from ascend_tui.live.targets import split_spec
    from ascend_tui.triage import format_story, story_of, triage_artifacts, triage_model

    options = run_options(args)
    first = args.targets[0]
    model = split_spec(first)[0].suffix == ".py" and len(args.targets) == 1
    check_outputs(args, [str(split_spec(first)[0]) if model else p for p in args.targets])
    if args.fail_on == "unverified" and not args.fix:
        raise InputError("--fail-on", "unverified needs --fix (it gates on the fix verdicts)")
    if args.fix:
        from ascend_tui.cli.fix import check_fix_options

        if not model:
            raise InputError("--fix", "needs one model file (path/to/model.py[:factory]): artifacts cannot be re-run")
        check_fix_options(args, [first, str(split_spec(first)[0])])
    progress = ProgressLine(sys.stderr, args.quiet)
    verdicts = None
    try:
        inv = triage_model(first, options, progress) if model else triage_artifacts(args.targets, progress)
        if args.fix:
            from ascend_tui.checks.story import fix_verdicts
            from ascend_tui.cli.fix import write_patch
            from ascend_tui.live.fix_run import run_fix

            fixed = run_fix(first, options, tolerance=args.tolerance, search=not args.no_search, before=inv,
                            progress=progress)
            verdicts = fix_verdicts(story_of(inv), fixed.section)
            inv.sections["fix"] = {**fixed.section, "story": [{"cause": k, "verdict": v} for k, v in verdicts.items()]}
            write_patch(args, fixed)
    finally:
        progress.done()
    return finish(inv, args, before=format_story(story_of(inv), verdicts=verdicts))
