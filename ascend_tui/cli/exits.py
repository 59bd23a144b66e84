"""The exit codes and the one mapping from errors to them: 0 clean, 1 findings at --fail-on, 2 bad input."""

from __future__ import annotations

import sys
from typing import Callable, NoReturn

from ascend_tui.errors import AscendTuiError, Cancelled, InputError, TargetError

EXIT_CLEAN, EXIT_FINDINGS, EXIT_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def guarded(run: Callable[[], int]) -> int:
    """Run a subcommand; the user's errors become one line on stderr and their exit code, never a traceback."""
    try:
        return int(run())
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
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `ascend-tui triage ... | head`: the reader left; say nothing more
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_CLEAN


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


# What a command built and its process leaves without freeing (`keep`, `leave`): filled only once `leaving()`
# said the process ends with this command (`python -m ascend_tui`, the console script), never in-process.
_KEPT: list[object] = []
_LEAVING: list[bool] = []


def leaving() -> None:
    """Say that this process ends when the command returns, so what it built need not be freed."""
    _LEAVING.append(True)


def keep(obj: object) -> None:
    """Hold `obj` until the process ends, when `leaving()` was said: `leave` then skips freeing it (a
    100k-node graph or a million-row profile takes 0.05-0.15 s to take apart); otherwise nothing."""
    if _LEAVING:
        _KEPT.append(obj)


def leave(code: int) -> NoReturn:
    """End the process with `code`: once its output is flushed and the exit handlers have run, without
    taking apart what it built, unless something may still be running (a thread that is not a daemon or
    one of the shared numpy threads, idle by now), when it exits the ordinary way."""
    import atexit
    import os
    import threading

    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    busy = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive()
            and not t.daemon and not t.name.startswith(_SHARED_THREADS)]
    if not _KEPT or busy or run_exitfuncs is None or not _flushed():
        raise SystemExit(code)
    run_exitfuncs()  # temporary folders, logging, process pools: what an ordinary exit runs
    if not _flushed():
        raise SystemExit(code)
    os._exit(code)


_SHARED_THREADS = "ascend-tui-numpy"  # threads.py's workers


def _flushed() -> bool:
    """Whether stdout and stderr took everything written to them."""
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return False
    return True
