"""Command line: `ascend-tui check|open|demo|serve|sanitize|devices`; exit 0 clean, 1 errors found, 2 bad input."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence, TextIO

from ascend_tui import __version__
from ascend_tui.errors import AscendTuiError, Cancelled, InputError, TargetError
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
    check.add_argument("-q", "--quiet", action="store_true", help="no progress line")

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

    sub.add_parser("devices", help="which device backends work on this machine")
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


def run_options(args: argparse.Namespace) -> Any:
    """`RunOptions` from the run-settings flags; bad values are `InputError`s (exit 2)."""
    from ascend_tui.live.options import RunOptions
    from ascend_tui.live.runner import parse_checks

    if args.iterations < 1:
        raise InputError("--iterations", "must be at least 1")
    return RunOptions(checks=parse_checks(args.checks), device=args.device, dtype=args.dtype,
                      reference=None if args.reference == "none" else args.reference, iterations=args.iterations,
                      backward=args.backward)


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


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def _check_output_paths(args: argparse.Namespace, inputs: Sequence[str]) -> None:
    """Refuse to write a report over one of the files we were asked to read."""
    sources = {Path(p).resolve() for p in inputs if p}
    for flag in ("json", "junit", "save", "markdown"):
        out = getattr(args, flag, None)
        if not out:
            continue
        path = Path(out)
        if path.resolve() in sources:
            raise InputError(out, f"--{flag} would overwrite an input file; choose another path")
        if path.is_dir():
            raise InputError(out, f"--{flag} names a folder; give a file path")
        if not path.parent.exists():
            raise InputError(out, f"--{flag}: folder {path.parent} does not exist")


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
    from ascend_tui.report import format_findings

    _write_outputs(inv, args)
    summary = inv.summary()
    for line in format_findings(inv):
        print(line)
    print(f"{plural(len(inv.graph), 'node')}, {plural(inv.graph.edge_count(), 'edge')}; "
          f"{plural(summary['errors'], 'error')}, {plural(summary['warnings'], 'warning')}")
    return EXIT_FINDINGS if summary["errors"] else EXIT_CLEAN


def _cmd_check(args: argparse.Namespace) -> int:
    from ascend_tui.live.runner import parse_checks

    checks = parse_checks(args.checks)
    if args.iterations < 1:
        raise InputError("--iterations", "must be at least 1")
    target_path = args.target.rpartition(":")[0] if args.target.count(":") and not Path(args.target).exists() \
        else args.target
    _check_output_paths(args, [target_path])
    offline = Path(args.target)
    if offline.exists() and (offline.is_dir() or offline.suffix != ".py"):
        return _check_offline(offline, args)
    from ascend_tui.live.options import RunOptions
    from ascend_tui.live.runner import run_live
    from ascend_tui.targets import load_target

    progress = ProgressLine(sys.stderr, args.quiet)
    progress(f"loading {args.target}", 0, None)
    target = load_target(args.target)
    options = RunOptions(checks=checks, device=args.device, dtype=args.dtype,
                         reference=None if args.reference == "none" else args.reference, iterations=args.iterations,
                         backward=args.backward, loss=target.loss, target=args.target)
    try:
        inv = run_live(target.model, target.inputs, options, progress=progress)
    finally:
        progress.done()
    return _finish(inv, args)


def _check_offline(path: Path, args: argparse.Namespace) -> int:
    """Report on an artifact the real tools wrote (msprobe dump, sanitizer log, saved run) without torch."""
    from ascend_tui.formats import open_path

    progress = ProgressLine(sys.stderr, args.quiet)
    progress(f"reading {path}", 0, None)
    try:
        inv = open_path(path, progress=progress)
    finally:
        progress.done()
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
    from ascend_tui.sanitize_cli import run_sanitize

    inputs = [p for p in (args.log, args.graph) if p]
    _check_output_paths(args, inputs)
    inv = run_sanitize(args, progress=ProgressLine(sys.stderr))
    return _finish(inv, args)


def _cmd_devices(_args: argparse.Namespace) -> int:
    from ascend_tui.live.device import describe_all

    for backend, state in describe_all().items():
        print(f"{backend:5} {state}")
    return EXIT_CLEAN


_COMMANDS = {
    "check": _cmd_check, "open": _cmd_open, "demo": _cmd_demo, "serve": _cmd_serve,
    "sanitize": _cmd_sanitize, "devices": _cmd_devices,
}
