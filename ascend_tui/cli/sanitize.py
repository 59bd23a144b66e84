"""`ascend-tui sanitize`: a sanitizer log into the report, or a command run under msSanitizer / compute-sanitizer.

The command's output is streamed through the same parser as a saved log: report lines become
memory events, every other line is the program's own output and is echoed as it arrives.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TextIO

from ascend_tui.cli.finish import check_outputs, finish
from ascend_tui.cli.parser import add_gate_options, add_outputs
from ascend_tui.cli.progress import ProgressLine
from ascend_tui.errors import InputError

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation
    from ascend_tui.progress import Progress

TOOLS = ("mssanitizer", "compute-sanitizer")
# Memcheck plus the leak check, as each tool's manual spells it; the command follows.
TOOL_FLAGS: dict[str, tuple[str, ...]] = {
    "mssanitizer": ("--tool=memcheck", "--leak-check=yes", "--"),
    "compute-sanitizer": ("--tool", "memcheck", "--leak-check", "full"),
}
# The framework's caching allocator hands out pieces of large segments the tool cannot see; turn it off.
CACHING_OFF: dict[str, dict[str, str]] = {
    "mssanitizer": {"PYTORCH_NO_NPU_MEMORY_CACHING": "1"},
    "compute-sanitizer": {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
}
LIVE_HINT = "to check a model without one, run the live sanitizer: ascend-tui check MODEL.py --checks memory"


def add_parser(sub: Any) -> None:
    san = sub.add_parser("sanitize")
    san.add_argument("--log", metavar="PATH", help="an existing sanitizer log")
    san.add_argument("--graph", metavar="PATH", help="an investigation or graph file to map events onto")
    add_outputs(san, "json", "save", "junit", "markdown", json="write the report")
    add_gate_options(san)
    san.add_argument("--tool", choices=("auto", "mssanitizer", "compute-sanitizer"), default="auto")
    san.add_argument("cmd", nargs=argparse.REMAINDER, help="-- command to run under the sanitizer")


def run(args: argparse.Namespace) -> int:
    check_outputs(args, [args.log, args.graph])
    return finish(run_sanitize(args, progress=ProgressLine(sys.stderr)), args)


def run_sanitize(args: Any, progress: Progress | None = None) -> Investigation:
    """`--log PATH` or `-- COMMAND`, optionally mapped onto `--graph PATH`; the investigation to report."""
    import shlex

    from ascend_tui.offline.memory import investigation_from_log
    from ascend_tui.readers.sanitizer.log import parse_file

    cmd = list(getattr(args, "cmd", None) or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if args.log and cmd:
        raise InputError("", "give either --log PATH or -- COMMAND, not both")
    if not args.log and not cmd:
        raise InputError("", "give --log PATH (an existing sanitizer log) or -- COMMAND (to run under the sanitizer)")
    if not args.log:
        find_tool(args.tool or "auto")
    try:
        base = load_graph(args.graph, progress) if args.graph else None
        if args.log and base is not None:
            from ascend_tui.offline.overlay import lay_path

            lay_path(base, args.log, progress)  # by operator name first, as the app's `open GRAPH LOG`
            return base
        if args.log:
            return investigation_from_log(parse_file(args.log, progress), base, target=args.log)
    finally:
        getattr(progress, "done", lambda: None)()
    print(f"ascend-tui: running under {find_tool(args.tool or 'auto')[0]}: {shlex.join(cmd)}", file=sys.stderr)
    inv, code = run_command(cmd, tool=args.tool or "auto", base=base)
    if code:
        print(f"ascend-tui: note: the command exited with status {code}", file=sys.stderr)
    return inv


def load_graph(path: str, progress: Progress | None = None) -> Investigation:
    """An investigation or graph file (or any artifact with a graph) to map the events onto."""
    from ascend_tui.offline.open import kind_of, open_path

    if kind_of(path) == "sanitizer log":
        raise InputError(path, "--graph expects a graph or investigation file, not a sanitizer log")
    inv = open_path(path, progress=progress)
    if not inv.graph.execution_order():
        raise InputError(path, "the graph holds no operators to map the events onto")
    return inv


def find_tool(choice: str = "auto", env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(tool name, executable) of the sanitizer to run: msSanitizer first (NPU hosts), then compute-sanitizer."""
    import shutil

    env = os.environ if env is None else env
    names = TOOLS if choice == "auto" else (choice,)
    for name in names:
        dirs = [env.get("PATH", "")]
        if name == "compute-sanitizer":
            dirs += [str(Path(env[v]) / "bin") for v in ("CUDA_HOME", "CUDA_PATH") if env.get(v)]
        found = shutil.which(name, path=os.pathsep.join(d for d in dirs if d))
        if found:
            return name, found
    if choice == "auto":
        raise InputError("", f"neither mssanitizer (CANN) nor compute-sanitizer (CUDA) is installed here; {LIVE_HINT}")
    raise InputError("--tool", f"{choice} is not installed here (not on PATH); {LIVE_HINT}")


def run_command(
    cmd: Sequence[str],
    *,
    tool: str = "auto",
    base: Investigation | None = None,
    progress: Progress | None = None,
    echo: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[Investigation, int]:
    """Run `cmd` under the sanitizer with the caching allocator off; (investigation, exit status)."""
    import shlex
    import subprocess

    from ascend_tui.offline.memory import investigation_from_log
    from ascend_tui.readers.sanitizer.log import SanitizerParser

    name, exe = find_tool(tool, env)
    echo = sys.stdout if echo is None else echo
    argv = [exe, *TOOL_FLAGS[name], *cmd]
    child_env = {**(os.environ if env is None else env), **CACHING_OFF[name]}
    target = shlex.join(cmd)
    if progress is not None:
        progress(f"running under {name}: {target}", 0, None)
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=child_env, text=True, encoding="utf-8", errors="replace", bufsize=1)
    except OSError as exc:
        raise InputError(exe, f"cannot start {name}: {exc.strerror or exc}") from None
    parser = SanitizerParser(f"output of {name} {target}")
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if not parser.feed(line):
                echo.write(line)
                echo.flush()
        code = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    inv = investigation_from_log(parser.finish(), base, pool_enabled=False, target=target)
    inv.run.extra.update(exit_code=code, command=list(cmd), tool=name,
                         environment={k: v for k, v in CACHING_OFF[name].items()})
    return inv, code
