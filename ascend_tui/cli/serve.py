"""`ascend-tui serve PATHS...`: the same app in a browser via textual-serve, on localhost."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    serve = sub.add_parser("serve")
    serve.add_argument("paths", nargs="*")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--host", default="localhost")


def run(args: argparse.Namespace) -> int:
    from ascend_tui.app.launch import serve

    return serve(list(args.paths), host=args.host, port=args.port)
