"""Command line: `ascend-tui check|triage|compare|open|graph|demo|serve|sanitize|devices`; exit 0 clean, 1 errors, 2 bad input."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence, TextIO

from ascend_tui import __version__
from ascend_tui.errors import AscendTuiError, Cancelled, InputError, TargetError
from ascend_tui.cli.profile import add_parser as add_profile_parser
from ascend_tui.fmt import plural

EXIT_CLEAN, EXIT_FINDINGS, EXIT_INPUT = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit code 2."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise InputError("", f"{self.prog}: {message}")


class ProgressLine:
    """A progress line on stderr: rewritten in place on a terminal, one line per phase elsewhere."""

    def __init__(self, stream: TextIO, quiet: bool = False) -> None:
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty()
        self._phase = ""
        self._last = 0.0
        self._lock = threading.Lock()

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        if self.quiet:
            return
        with self._lock:
            text = f"{phase} {done}/{total} ops" if total else (f"{phase} {done} ops" if done else phase)
            if self.tty:
                now = time.monotonic()
                if phase == self._phase and now - self._last < 0.1 and (total is None or done < total - 1):
                    return
                self._last = now
                self.stream.write("\r\x1b[2K" + text)
                self.stream.flush()
            elif phase != self._phase:
                self.stream.write(text + "\n")
                self.stream.flush()
            self._phase = phase

    def done(self) -> None:
        if self.tty and not self.quiet and self._phase:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ascend-tui", description="Investigate a model's NaNs, wrong numbers, "
                     "memory errors and slowness on Ascend NPUs, CUDA or the CPU.")
    parser.add_argument("--version", action="version", version=f"ascend-tui {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    check = sub.add_parser("check", help="run a model file under capture and checks; write a report")
    check.add_argument("target", help="path/to/model.py[:factory] (the factory returns (model, inputs)), or an "
                       "artifact to report on offline: msprobe dump folder, sanitizer log, saved investigation")
    _add_run_settings(check, checks="overflow")
    check.add_argument("--json", metavar="PATH", help="write the report (schema ascend-tui.report/1)")
    check.add_argument("--junit", metavar="PATH", help="write JUnit XML, one failure per error finding")
    check.add_argument("--save", metavar="PATH", help="save the investigation for `ascend-tui open`")
    check.add_argument("--markdown", metavar="PATH", help="write the Markdown report (what the app's export writes)")
    _gate_options(check)
    check.add_argument("-q", "--quiet", action="store_true", help="no progress line")

    tri = sub.add_parser("triage", help="every check that applies, in order, and one story from symptom to cause")
    tri.add_argument("targets", nargs="+", help="a model file (path/to/model.py[:factory]), or artifacts: msprobe "
                     "dumps, sanitizer logs, profiler folders, graphs, saved runs (the first one's graph carries the rest)")
    tri.add_argument("--device", default="auto", help="auto|cpu|cuda|npu")
    tri.add_argument("--dtype", choices=("float16", "bfloat16", "float32"), default=None)
    tri.add_argument("--reference", default="cpu:float32", help="the reference run, or 'none'")
    tri.add_argument("--iterations", type=int, default=2, help="forward passes (leaks need > 1; default 2)")
    tri.add_argument("--backward", action="store_true", help="also run backward")
    tri.add_argument("--json", metavar="PATH", help="write the report, with its story")
    tri.add_argument("--junit", metavar="PATH", help="write JUnit XML")
    tri.add_argument("--markdown", metavar="PATH", help="write the Markdown report")
    tri.add_argument("--save", metavar="PATH", help="save the investigation for `ascend-tui open`")
    tri.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    _gate_options(tri)

    op = sub.add_parser("open", help="open model files, investigations, dumps or logs in the app")
    op.add_argument("paths", nargs="*", help="model.py, *.atui.json, an msprobe dump folder, a sanitizer log")
    op.add_argument("--theme", default=None, help="theme name: dark, light, high-contrast, ansi-dark, ansi-light, ...")
    op.add_argument("--follow", action="store_true",
                    help="keep reading a growing sanitizer log or watch() output folder, adding findings as they come")
    _add_run_settings(op, checks="all")

    demo = sub.add_parser("demo", help="open the app on a bundled sample with findings in every view")
    demo.add_argument("--theme", default=None)

    serve = sub.add_parser("serve", help="the same app in a browser via textual-serve, on localhost")
    serve.add_argument("paths", nargs="*")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--host", default="localhost")

    san = sub.add_parser("sanitize", help="turn a msSanitizer / compute-sanitizer log into a report, "
                         "or run a command under the sanitizer")
    san.add_argument("--log", metavar="PATH", help="an existing sanitizer log")
    san.add_argument("--graph", metavar="PATH", help="an investigation or graph file to map events onto")
    san.add_argument("--json", metavar="PATH", help="write the report")
    san.add_argument("--save", metavar="PATH", help="save the investigation for `ascend-tui open`")
    san.add_argument("--tool", choices=("auto", "mssanitizer", "compute-sanitizer"), default="auto")
    san.add_argument("cmd", nargs=argparse.REMAINDER, help="-- command to run under the sanitizer")

    graph = sub.add_parser("graph", help="summarize a graph file (ONNX, .pt2, GE dump, MindSpore IR, msprobe "
                           "dump or .vis.db) and export it as node-link JSON, without torch")
    graph.add_argument("path", help="the graph source")
    graph.add_argument("evidence", nargs="*", help="dumps, profiles or sanitizer logs to lay on it by operator name")
    graph.add_argument("--json", metavar="PATH", help="write the graph as node-link JSON")
    graph.add_argument("-q", "--quiet", action="store_true", help="no progress line")

    sub.add_parser("devices", help="which device backends work on this machine")
    _add_compare_parser(sub)
    add_profile_parser(sub)
    return parser


def _add_run_settings(parser: argparse.ArgumentParser, checks: str) -> None:
    """The settings of a live run, the same for `check` and `open` (the app's `x` form edits them too)."""
    parser.add_argument("--checks", default=checks,
                        help="comma-separated: overflow,precision,memory,profile; all; or none (graph only)")
    parser.add_argument("--device", default="auto", help="auto|cpu|cuda|npu (npu:1 for another card)")
    parser.add_argument("--dtype", choices=("float16", "bfloat16", "float32"), default=None,
                        help="cast the model and floating inputs to this dtype on the device")
    parser.add_argument("--reference", default="cpu:float32",
                        help="second run the range checks compare against, or 'none'")
    parser.add_argument("--iterations", type=int, default=1, help="forward passes (leak detection needs > 1)")
    parser.add_argument("--backward", action="store_true", help="also run backward and check the gradients")
    parser.add_argument("--detail", choices=("module", "full"), default="module",
                        help="module: module-level evidence, operators recorded only around the first bad module "
                             "(a replay of the step); full: every operator of the step")


def run_options(args: argparse.Namespace) -> Any:
    """`RunOptions` from the run-settings flags; bad values are `InputError`s (exit 2)."""
    from ascend_tui.live.options import RunOptions
    from ascend_tui.live.runner import parse_checks

    if args.iterations < 1:
        raise InputError("--iterations", "must be at least 1")
    return RunOptions(checks=parse_checks(args.checks), device=args.device, dtype=args.dtype,
                      reference=None if args.reference == "none" else args.reference, iterations=args.iterations,
                      backward=args.backward, detail=getattr(args, "detail", "module"))


def _gate_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fail-on", choices=("error", "warning"), default="error",
                        help="exit 1 when a finding of this severity or worse is found (default: error)")
    parser.add_argument("--baseline", metavar="REPORT_OR_PROFILE",
                        help="an earlier --json report or saved run (only findings it did not have fail), or a "
                             "profile (a step slower than --max-slowdown fails)")
    parser.add_argument("--max-slowdown", default="5%", metavar="SHARE",
                        help="with a profile --baseline: how much slower a step may get (default 5%%)")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        command = args.command or "open"
        if args.command is None:
            args = build_parser().parse_args(["open"])
        return int(_COMMANDS[command](args))
    except TargetError as exc:
        print(f"ascend-tui: error: {exc.line()}", file=sys.stderr)
        if exc.user_traceback:
            print(_indent(exc.user_traceback), file=sys.stderr)
        return EXIT_INPUT
    except (AscendTuiError, InputError) as exc:
        if isinstance(exc, Cancelled):
            print("ascend-tui: cancelled", file=sys.stderr)
            return EXIT_INPUT
        print(f"ascend-tui: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("ascend-tui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `ascend-tui triage ... | head`: the reader left; say nothing more
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_CLEAN


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def _check_output_paths(args: argparse.Namespace, inputs: Sequence[str]) -> None:
    """Refuse, before any work, every output option that would land on or inside what we were asked to read."""
    from ascend_tui.outputs import check_output_path

    for flag in ("json", "junit", "save", "csv", "markdown"):
        out = getattr(args, flag, None)
        if out:
            check_output_path(out, inputs, option=f"--{flag}")


def _write_outputs(inv: Any, args: argparse.Namespace) -> None:
    from ascend_tui.report import write_json, write_junit

    if getattr(args, "json", None):
        write_json(inv, args.json)
    if getattr(args, "junit", None):
        write_junit(inv, args.junit)
    if getattr(args, "save", None):
        inv.save(args.save)
    if getattr(args, "markdown", None):
        from ascend_tui.export import write_export

        write_export(inv, args.markdown, "markdown")


def _finish(inv: Any, args: argparse.Namespace) -> int:
    from ascend_tui.fmt import plural
    from ascend_tui.gate import apply_baseline, gate, parse_share
    from ascend_tui.report import format_findings

    known = apply_baseline(inv, args.baseline, parse_share(getattr(args, "max_slowdown", "5%"))) \
        if getattr(args, "baseline", None) else None
    result = gate(inv, getattr(args, "fail_on", "error"), known)
    _write_outputs(inv, args)
    summary = inv.summary()
    for line in format_findings(inv):
        print(line)
    print(f"{plural(len(inv.graph), 'node')}, {plural(inv.graph.edge_count(), 'edge')}; "
          f"{plural(summary['errors'], 'error')}, {plural(summary['warnings'], 'warning')}")
    if known is not None:
        print(f"baseline: {plural(len(result.failing), 'new finding')} at {result.threshold} or worse, "
              f"{result.known} known")
    return EXIT_CLEAN if result.passed else EXIT_FINDINGS


def _cmd_check(args: argparse.Namespace) -> int:
    from ascend_tui.live.runner import parse_checks

    checks = parse_checks(args.checks)
    if args.iterations < 1:
        raise InputError("--iterations", "must be at least 1")
    target_path = args.target.rpartition(":")[0] if args.target.count(":") and not Path(args.target).exists() \
        else args.target
    _check_output_paths(args, [args.target, target_path])
    offline = Path(args.target)
    if offline.exists() and (offline.is_dir() or offline.suffix != ".py"):
        return _check_offline(offline, args)
    from ascend_tui.live.options import RunOptions
    from ascend_tui.live.runner import run_live
    from ascend_tui.live.targets import load_target

    progress = ProgressLine(sys.stderr, args.quiet)
    progress(f"loading {args.target}", 0, None)
    target = load_target(args.target)
    options = RunOptions(checks=checks, device=args.device, dtype=args.dtype,
                         reference=None if args.reference == "none" else args.reference, iterations=args.iterations,
                         backward=args.backward, loss=target.loss, target=args.target,
                         detail=getattr(args, "detail", "module"))
    try:
        inv = run_live(target.model, target.inputs, options, progress=progress)
    finally:
        progress.done()
    return _finish(inv, args)


def _check_offline(path: Path, args: argparse.Namespace) -> int:
    """Report on an artifact the real tools wrote (msprobe dump, sanitizer log, saved run) without torch."""
    from ascend_tui.offline.open import open_path

    progress = ProgressLine(sys.stderr, args.quiet)
    progress(f"reading {path}", 0, None)
    try:
        inv = open_path(path, progress=progress)
    finally:
        progress.done()
    return _finish(inv, args)


def _cmd_triage(args: argparse.Namespace) -> int:
    from ascend_tui.live.options import RunOptions
    from ascend_tui.live.targets import split_spec
    from ascend_tui.triage import format_story, story_of, triage_artifacts, triage_model

    if args.iterations < 1:
        raise InputError("--iterations", "must be at least 1")
    first = args.targets[0]
    model = split_spec(first)[0].suffix == ".py" and len(args.targets) == 1
    _check_output_paths(args, [str(split_spec(first)[0]) if model else p for p in args.targets])
    progress = ProgressLine(sys.stderr, args.quiet)
    try:
        if model:
            options = RunOptions(device=args.device, dtype=args.dtype, iterations=args.iterations,
                                 reference=None if args.reference == "none" else args.reference,
                                 backward=args.backward)
            inv = triage_model(first, options, progress)
        else:
            inv = triage_artifacts(args.targets, progress)
    finally:
        progress.done()
    for line in format_story(story_of(inv)):
        print(line)
    return _finish(inv, args)


def _cmd_open(args: argparse.Namespace) -> int:
    from ascend_tui.app.config import resolve_theme
    from ascend_tui.app.launch import run_app

    theme = resolve_theme(args.theme)
    if args.follow and len(args.paths) != 1:
        raise InputError("--follow", "follows exactly one path: a sanitizer log or a watch() output folder")
    return run_app(list(args.paths), theme=theme, live=run_options(args), follow=args.follow)


def _cmd_demo(args: argparse.Namespace) -> int:
    from ascend_tui.app.config import resolve_theme
    from ascend_tui.app.launch import run_demo

    return run_demo(theme=resolve_theme(args.theme))


def _cmd_serve(args: argparse.Namespace) -> int:
    from ascend_tui.app.launch import serve

    return serve(list(args.paths), host=args.host, port=args.port)


def _cmd_sanitize(args: argparse.Namespace) -> int:
    from ascend_tui.cli.sanitize import run_sanitize

    inputs = [p for p in (args.log, args.graph) if p]
    _check_output_paths(args, inputs)
    inv = run_sanitize(args, progress=ProgressLine(sys.stderr))
    return _finish(inv, args)


def _cmd_graph(args: argparse.Namespace) -> int:
    from ascend_tui.cli.graph import run_graph

    _check_output_paths(args, [args.path, *args.evidence])
    progress = ProgressLine(sys.stderr, args.quiet)
    try:
        return run_graph(args, sys.stdout, progress)
    finally:
        progress.done()


def _cmd_devices(_args: argparse.Namespace) -> int:
    from ascend_tui.live.device import describe_all

    for backend, state in describe_all().items():
        print(f"{backend:5} {state}")
    return EXIT_CLEAN


def _add_compare_parser(sub: Any) -> None:
    from ascend_tui.cli.compare import add_parser

    add_parser(sub)


def _cmd_compare(args: argparse.Namespace) -> int:
    from ascend_tui.cli.compare import run_compare

    _check_output_paths(args, [args.target, args.golden])
    progress = ProgressLine(sys.stderr, args.quiet)
    try:
        inv, lines = run_compare(args, progress)
    finally:
        progress.done()
    for line in lines:
        print(line)
    return EXIT_FINDINGS if inv.summary()["errors"] else EXIT_CLEAN


def _cmd_profile(args: argparse.Namespace) -> int:
    from ascend_tui.cli.profile import run_profile

    _check_output_paths(args, [p for p in (args.target, args.baseline, args.graph) if p])
    return run_profile(args, ProgressLine(sys.stderr, args.quiet), _finish)


_COMMANDS = {
    "check": _cmd_check, "triage": _cmd_triage, "compare": _cmd_compare, "open": _cmd_open, "graph": _cmd_graph,
    "demo": _cmd_demo, "serve": _cmd_serve, "sanitize": _cmd_sanitize, "devices": _cmd_devices,
    "profile": _cmd_profile,
}
