"""`ascend-tui triage TARGETS...`: every check that applies, in order, and one story from symptom to cause."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ascend_tui.cli.finish import check_outputs, finish
from ascend_tui.cli.parser import add_gate_options, add_outputs, add_quiet
from ascend_tui.cli.progress import ProgressLine
from ascend_tui.cli.settings import add_run_settings, run_options


def add_parser(sub: Any) -> None:
    tri = sub.add_parser("triage")
    tri.add_argument("targets", nargs="+", help="a model file (path/to/model.py[:factory]), or artifacts: msprobe "
                     "dumps, sanitizer logs, profiler folders, graphs, saved runs (the first one's graph carries the rest)")
    add_run_settings(tri, checks=None, iterations=2)
    add_outputs(tri, json="write the report, with its story", junit="write JUnit XML",
                markdown="write the Markdown report", save="save the investigation for `ascend-tui open`")
    add_quiet(tri)
    add_gate_options(tri)


def run(args: argparse.Namespace) -> int:
    from ascend_tui.live.targets import split_spec
    from ascend_tui.triage import format_story, story_of, triage_artifacts, triage_model

    options = run_options(args)
    first = args.targets[0]
    model = split_spec(first)[0].suffix == ".py" and len(args.targets) == 1
    check_outputs(args, [str(split_spec(first)[0]) if model else p for p in args.targets])
    progress = ProgressLine(sys.stderr, args.quiet)
    try:
        inv = triage_model(first, options, progress) if model else triage_artifacts(args.targets, progress)
    finally:
        progress.done()
    return finish(inv, args, before=format_story(story_of(inv)))
