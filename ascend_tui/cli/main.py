"""Command line: `ascend-tui check|triage|compare|open|graph|demo|serve|sanitize|devices|profile|fix`; exit 0 clean,
1 findings at --fail-on, 2 bad input.

One module per subcommand (`ascend_tui.cli.<name>`), each with `add_parser(subparsers)` and
`run(args)`; the menu below holds each one's line in `--help`, so a run imports only the module
of the subcommand it names. `exits.guarded` maps errors to exit codes and `finish.finish` ends
every report.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType
from typing import Any, NoReturn, Sequence

from ascend_tui import __version__
from ascend_tui.cli.exits import EXIT_CLEAN, EXIT_FINDINGS, EXIT_INPUT, guarded, leave, leaving
from ascend_tui.cli.parser import ArgParser

__all__ = ["EXIT_CLEAN", "EXIT_FINDINGS", "EXIT_INPUT", "SUBCOMMANDS", "build_parser", "entry", "main"]

# subcommand -> its line in `ascend-tui --help`, in the order listed there; the module is ascend_tui.cli.<name>
SUBCOMMANDS: dict[str, str] = {
    "check": "run a model file under capture and checks; write a report",
    "triage": "every check that applies, in order, and one story from symptom to cause",
    "open": "open model files, investigations, dumps or logs in the app",
    "demo": "open the app on a bundled sample with findings in every view",
    "serve": "the same app in a browser via textual-serve, on localhost",
    "sanitize": "turn a msSanitizer / compute-sanitizer log into a report, or run a command under the sanitizer",
    "graph": "summarize a graph file (ONNX, .pt2, GE dump, MindSpore IR, msprobe dump or .vis.db) and export it "
             "as node-link JSON, without torch",
    "devices": "which device backends work on this machine",
    "compare": "compare two msprobe dumps (target vs golden) as `msprobe compare` does, and say which operator "
               "introduces the error",
    "profile": "where the time goes: a profiler folder, trace or kernel CSV offline, or a model file profiled live",
    "fix": "try the remedies a model file's findings name (float32, normalise, clamp), find the smallest float32 "
           "set, verify and print a patch",
}


def subcommand(name: str) -> ModuleType:
    """The module of one subcommand."""
    return importlib.import_module(f"ascend_tui.cli.{name}")


class _Menu:
    """The subparsers as a subcommand module sees them: `add_parser(name)` gets its help line from the menu."""

    def __init__(self, sub: Any) -> None:
        self._sub = sub

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        kwargs.setdefault("help", SUBCOMMANDS[name])
        return self._sub.add_parser(name, **kwargs)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `only`, that subcommand's arguments and just the help line of the others."""
    parser = ArgParser(prog="ascend-tui", description="Investigate a model's NaNs, wrong numbers, "
                       "memory errors and slowness on Ascend NPUs, CUDA or the CPU.")
    parser.add_argument("--version", action="version", version=f"ascend-tui {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=ArgParser)
    menu = _Menu(sub)
    for name in SUBCOMMANDS:
        if only is None or name == only:
            subcommand(name).add_parser(menu)
        else:
            menu.add_parser(name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)

    def run() -> int:
        named = argv[0] if argv else "open"  # no arguments: the app
        parser = build_parser(only=named if named in SUBCOMMANDS else "")
        args = parser.parse_args(argv)
        if args.command is None:
            args = parser.parse_args(["open"])
        return int(subcommand(args.command).run(args))

    return guarded(run)


def entry() -> NoReturn:
    """The program (`python -m ascend_tui`, the `ascend-tui` script): `main` on `sys.argv`, then the process
    ends without taking apart what the command kept (`exits.keep`); `main` itself, as tests call it, returns."""
    leaving()
    leave(main())
