"""`ascend-tui open PATHS...`: the app on model files, investigations, dumps or logs."""

from __future__ import annotations

import argparse
from typing import Any

from ascend_tui.cli.settings import add_run_settings, run_options
from ascend_tui.errors import InputError


def add_parser(sub: Any) -> None:
    op = sub.add_parser("open")
    op.add_argument("paths", nargs="*", help="model.py, *.atui.json, an msprobe dump folder, a sanitizer log")
    op.add_argument("--theme", default=None, help="theme name: dark, light, high-contrast, ansi-dark, ansi-light, ...")
    op.add_argument("--follow", action="store_true",
                    help="keep reading a growing sanitizer log or watch() output folder, adding findings as they come")
    add_run_settings(op, checks="all")


def run(args: argparse.Namespace) -> int:
    from ascend_tui.app.config import resolve_theme
    from ascend_tui.app.launch import run_app

    theme = resolve_theme(args.theme)
    if args.follow and len(args.paths) != 1:
        raise InputError("--follow", "follows exactly one path: a sanitizer log or a watch() output folder")
    return run_app(list(args.paths), theme=theme, live=run_options(args), follow=args.follow)
