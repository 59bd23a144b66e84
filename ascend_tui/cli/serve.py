"""`ascend-tui serve PATHS...`: the same app in a browser via textual-serve, on localhost."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    serve = sub.add_parser("serve", description="Serve the app (what `ascend-tui open PATHS` shows) to a browser "
                           "through textual-serve, on this machine only; reach it from elsewhere with "
                           "`ssh -L 8000:localhost:8000 <server>`.")
    serve.add_argument("paths", nargs="*", metavar="PATH",
                       help="what `open` takes: model files, saved runs, dumps, logs, profiler folders")
    serve.add_argument("--port", type=int, default=8000, help="TCP port to listen on (default 8000)")
    serve.add_argument("--host", default="localhost",
                       help="a loopback address to listen on (default localhost; others are refused)")


def run(args: argparse.Namespace) -> int:
    from ascend_tui.app.launch import serve

    return serve(list(args.paths), host=args.host, port=args.port)
