"""The dispatch modes of a coarse-to-fine replay (`live.coarse_pass`): operators recorded only inside the window.

`window_mode(base)` lets operators outside the recorder's window run untouched (a backward window, replayed whole);
`lazy_window_mode(base)` is pushed only while the window is open (a forward window: outside it, no Python runs
between operators), and `WindowClosed` stops a replay where its window closes.
"""

from __future__ import annotations

from typing import Any


class WindowClosed(BaseException):
    """Raised at the end of a forward window when the replay stops there (not an `Exception`: a model's own
    `except Exception` must not swallow it)."""


def _window_mode(base: type) -> type:
    class WindowMode(base):  # type: ignore[misc, valid-type]
        """`RecordingMode` that lets operators outside the recorder's window run untouched."""

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            if not self.recorder.active:
                return func(*args, **(kwargs or {}))
            return super().__torch_dispatch__(func, types, args, kwargs)

    return WindowMode


_WINDOW_MODES: dict[Any, type] = {}


def window_mode(base: type) -> type:
    if base not in _WINDOW_MODES:
        _WINDOW_MODES[base] = _window_mode(base)
    return _WINDOW_MODES[base]


def lazy_window_mode(base: type) -> type:
    """`window_mode(base)` that `recording()` enters and leaves without pushing it: `push()` / `pop()` do, when the
    window opens and closes (outside it, operators run without any Python in between)."""
    key = ("lazy", base)
    if key not in _WINDOW_MODES:
        class LazyWindowMode(window_mode(base)):  # type: ignore[misc, valid-type]
            def __enter__(self) -> Any:
                return self

            def __exit__(self, *exc: Any) -> None:
                return None

            def push(self) -> None:
                super().__enter__()

            def pop(self) -> None:
                super().__exit__(None, None, None)

        _WINDOW_MODES[key] = LazyWindowMode
    return _WINDOW_MODES[key]
