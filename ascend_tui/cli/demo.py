"""`ascend-tui demo`: the app on a bundled sample with findings in every view."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    demo = sub.add_parser("demo")
    demo.add_argument("--theme", default=None)


def run(args: argparse.Namespace) -> int:
    from ascend_tui.app.config import resolve_theme
    from ascend_tui.app.launch import run_demo

    return run_demo(theme=resolve_theme(args.theme))
