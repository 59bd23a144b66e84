"""The one progress callback type every long operation takes, and the cancel check that goes with it."""

from __future__ import annotations

import threading
from typing import Callable

from ascend_tui.errors import Cancelled

Progress = Callable[[str, int, "int | None"], None]
"""`progress(phase, done, total)`: what is happening, how far, and out of how much (None when unknown)."""


def check_cancel(cancel: threading.Event | None, what: str = "cancelled") -> None:
    """Raise `Cancelled` when the caller asked to stop."""
    if cancel is not None and cancel.is_set():
        raise Cancelled(what)
