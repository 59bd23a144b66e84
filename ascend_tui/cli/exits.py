"""The exit codes and the one mapping from errors to them: 0 clean, 1 findings at --fail-on, 2 bad input."""

from __future__ import annotations

import sys
from typing import Callable

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
