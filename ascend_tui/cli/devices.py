"""`ascend-tui devices`: which device backends work on this machine."""

from __future__ import annotations

import argparse
from typing import Any

from ascend_tui.cli.exits import EXIT_CLEAN


def add_parser(sub: Any) -> None:
    sub.add_parser("devices")


def run(_args: argparse.Namespace) -> int:
    from ascend_tui.live.device import describe_all

    for backend, state in describe_all().items():
        print(f"{backend:5} {state}")
    return EXIT_CLEAN
