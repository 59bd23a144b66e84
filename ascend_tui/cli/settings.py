"""The settings of a live run: the flags `check`, `open` and `triage` share, and the one place `RunOptions` is built."""

from __future__ import annotations

import argparse
from typing import Any

from ascend_tui.errors import InputError

DTYPE_CHOICES = ("float16", "bfloat16", "float32")


def add_run_settings(parser: argparse.ArgumentParser, checks: str | None, iterations: int = 1) -> None:
    """The settings of a live run (the app's `x` form edits them too); `checks=None` leaves out --checks."""
    if checks is not None:
        parser.add_argument("--checks", default=checks,
                            help="comma-separated: overflow,precision,memory,profile; all; or none (graph only)")
    parser.add_argument("--device", default="auto", help="auto|cpu|cuda|npu (npu:1 for another card)")
    parser.add_argument("--dtype", choices=DTYPE_CHOICES, default=None,
                        help="cast the model and floating inputs to this dtype on the device")
    parser.add_argument("--reference", default="cpu:float32",
                        help="second run the range checks compare against, or 'none'")
    parser.add_argument("--iterations", type=int, default=iterations,
                        help="forward passes (leak detection needs > 1)" + (f"; default {iterations}"
                                                                              if iterations != 1 else ""))
    parser.add_argument("--backward", action="store_true", help="also run backward and check the gradients")
    parser.add_argument("--detail", choices=("module", "full"), default="module",
                        help="module: module-level evidence, operators recorded only around the first bad module, "
                             "or the module whose time (profile) or memory stands out (a replay of the step); "
                             "full: every operator of the step")


def run_options(args: argparse.Namespace, **fields: Any) -> Any:
    """`RunOptions` from the run-settings flags (and `fields` such as the target's loss); bad values exit 2."""
    from ascend_tui.live.options import RunOptions

    checks: dict[str, Any] = {}
    if getattr(args, "checks", None) is not None:
        from ascend_tui.live.runner import parse_checks

        checks["checks"] = parse_checks(args.checks)
    if args.iterations < 1:
        raise InputError("--iterations", "must be at least 1")
    return RunOptions(**checks, device=args.device, dtype=args.dtype,
                      reference=None if args.reference == "none" else args.reference, iterations=args.iterations,
                      backward=args.backward, detail=getattr(args, "detail", "module"), **fields)


def check_settings(args: argparse.Namespace) -> None:
    """Refuse bad --checks and --iterations without importing the live runner (an offline report needs neither)."""
    from ascend_tui.investigation import CHECK_NAMES

    names = [n.strip() for n in str(getattr(args, "checks", "") or "").split(",") if n.strip()]
    if any(name not in (*CHECK_NAMES, "all", "none") for name in names):
        from ascend_tui.live.runner import parse_checks

        parse_checks(args.checks)  # a name we do not know may be a plug-in's; the runner knows, or says it is unknown
    if args.iterations < 1:
        raise InputError("--iterations", "must be at least 1")
