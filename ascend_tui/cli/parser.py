"""The argument parser and the option groups subcommands share (outputs, the CI gate, quiet)."""

from __future__ import annotations

import argparse
from typing import Any

from ascend_tui.errors import InputError

OUTPUTS = ("json", "junit", "save", "markdown", "csv")
DEFAULT_HELP = {
    "json": "write the report (schema ascend-tui.report/1)",
    "junit": "write JUnit XML, one failure per error finding",
    "save": "save the investigation for `ascend-tui open`",
    "markdown": "write the Markdown report (what the app's export writes)",
}
BASELINE_HELP = ("an earlier --json report or saved run (only findings it did not have fail), or a profile (a step "
                 "slower than --max-slowdown fails)")


class ArgParser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit code 2."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise InputError("", f"{self.prog}: {message}")


def add_outputs(parser: argparse.ArgumentParser, *names: str, **helps: str) -> None:
    """The output files the finish step writes, in the order given; `helps` words one for this subcommand."""
    for name in dict.fromkeys((*names, *helps)):
        if name not in OUTPUTS:
            raise ValueError(f"unknown output option {name!r}")
        parser.add_argument(f"--{name}", metavar="PATH", help=helps.get(name) or DEFAULT_HELP[name])


def add_gate_options(parser: argparse.ArgumentParser, baseline_help: str = BASELINE_HELP, *,
                     unverified: str = "") -> None:
    """--fail-on, --baseline and --max-slowdown: which findings fail the run (exit 1).

    `unverified` (the subcommands that run a fix) offers `--fail-on unverified`, worded by that help.
    """
    parser.add_argument("--fail-on", choices=("error", "warning", *(("unverified",) if unverified else ())),
                        default="error", help="exit 1 when a finding of this severity or worse is found (default: "
                        "error)" + (f"; unverified: {unverified}" if unverified else ""))
    parser.add_argument("--baseline", metavar="REPORT_OR_PROFILE", help=baseline_help)
    parser.add_argument("--max-slowdown", default="5%", metavar="SHARE",
                        help="with a profile --baseline: how much slower a step may get (default 5%%)")


def add_quiet(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress line")
