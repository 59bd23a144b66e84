"""`ascend-tui demo`: the app on a bundled sample with findings in every view."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    demo = sub.add_parser("demo", description="Run samples/demo.py live on the CPU (float16 against a float32 "
                          "reference; overflow and memory checks; three iterations) and open the app on its story: "
                          "a float16 overflow, an out-of-range index and a leak. The same run by hand: `ascend-tui "
                          "check samples/demo.py --checks overflow,memory --dtype float16 --iterations 3`.")
    demo.add_argument("--theme", default=None, help="theme name: dark, light, high-contrast, ansi-dark, ansi-light, ...")


def run(args: argparse.Namespace) -> int:
    from ascend_tui.app.config import resolve_theme
    from ascend_tui.app.launch import run_demo

    return run_demo(theme=resolve_theme(args.theme))
