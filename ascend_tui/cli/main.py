"""Command line: `ascend-tui check|triage|compare|open|graph|demo|serve|sanitize|devices|profile`; exit 0 clean,
1 findings at --fail-on, 2 bad input.

The parser is built from one module per subcommand, each with `add_parser(subparsers)` and
`run(args)`; `exits.guarded` maps errors to exit codes and `finish.finish` ends every report.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from ascend_tui import __version__
from ascend_tui.cli.exits import EXIT_CLEAN, EXIT_FINDINGS, EXIT_INPUT, guarded
from ascend_tui.cli.parser import ArgParser

__all__ = ["EXIT_CLEAN", "EXIT_FINDINGS", "EXIT_INPUT", "SUBCOMMANDS", "build_parser", "main"]

# In the order `--help` lists them; each is `ascend_tui.cli.<module>`.
SUBCOMMANDS = {"check": "check", "triage": "triage", "open": "open", "demo": "demo", "serve": "serve",
               "sanitize": "sanitize", "graph": "graph", "devices": "devices", "compare": "compare",
               "profile": "profile"}


def _module(command: str):  # type: ignore[no-untyped-def]
    return importlib.import_module(f"ascend_tui.cli.{SUBCOMMANDS[command]}")


def build_parser() -> argparse.ArgumentParser:
    parser = ArgParser(prog="ascend-tui", description="Investigate a model's NaNs, wrong numbers, "
                       "memory errors and slowness on Ascend NPUs, CUDA or the CPU.")
    parser.add_argument("--version", action="version", version=f"ascend-tui {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=ArgParser)
    for command in SUBCOMMANDS:
        _module(command).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)

    def run() -> int:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            args = parser.parse_args(["open"])
        return int(_module(args.command).run(args))

    return guarded(run)
