"""`ascend-tui check TARGET`: a model file run under capture and checks, or an artifact reported on offline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ascend_tui.cli.finish import check_outputs, finish
from ascend_tui.cli.parser import add_gate_options, add_outputs, add_quiet
from ascend_tui.cli.progress import ProgressLine
from ascend_tui.cli.settings import add_run_settings, check_settings, run_options


def add_parser(sub: Any) -> None:
    check = sub.add_parser("check")
    check.add_argument("target", help="path/to/model.py[:factory] (the factory returns (model, inputs)), or an "
                       "artifact to report on offline: msprobe dump folder, sanitizer log, saved investigation")
    add_run_settings(check, checks="overflow")
    add_outputs(check, "json", "junit", "save", "markdown")
    add_gate_options(check)
    add_quiet(check)


def run(args: argparse.Namespace) -> int:
    offline = Path(args.target)
    is_offline = offline.exists() and (offline.is_dir() or offline.suffix != ".py")
    # bad --checks or --iterations exit 2 before anything; an offline report needs no live runner for that
    options = None if is_offline else run_options(args, target=args.target)
    if is_offline:
        check_settings(args)
    target_path = args.target.rpartition(":")[0] if args.target.count(":") and not offline.exists() else args.target
    check_outputs(args, [args.target, target_path])
    progress = ProgressLine(sys.stderr, args.quiet)
    if is_offline:
        # an artifact the real tools wrote (msprobe dump, sanitizer log, saved run): reported without torch
        from ascend_tui.offline.open import open_path

        progress(f"reading {offline}", 0, None)
        try:
            inv = open_path(offline, progress=progress)
        finally:
            progress.done()
        return finish(inv, args)
    from ascend_tui.live.runner import run_live
    from ascend_tui.live.targets import load_target

    progress(f"loading {args.target}", 0, None)
    target = load_target(args.target)
    try:
        assert options is not None
        inv = run_live(target.model, target.inputs, options.but(loss=target.loss), progress=progress)
    finally:
        progress.done()
    return finish(inv, args)
