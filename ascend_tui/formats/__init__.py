"""Readers of what the real tools wrote; `open_path` picks the reader for a path.

Each entry is (name, "module:sniff", "module:load"): `sniff(path) -> bool` looks at a few
bytes or file names only; `load(path, progress=None, cancel=None) -> Investigation` reads it
and raises `InputError` naming the file and the problem. Modules import lazily.
"""

from __future__ import annotations

import importlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ascend_tui.errors import InputError

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

READERS: list[tuple[str, str, str]] = [
    ("investigation", "ascend_tui.formats.native:sniff_investigation", "ascend_tui.formats.native:load_investigation"),
    ("graph", "ascend_tui.formats.native:sniff_graph", "ascend_tui.formats.native:load_graph"),
    ("msprobe dump", "ascend_tui.formats.msprobe:sniff", "ascend_tui.formats.msprobe:load"),
    ("msprobe overflow_check", "ascend_tui.formats.msprobe_overflow:sniff", "ascend_tui.formats.msprobe_overflow:load"),
    ("sanitizer log", "ascend_tui.formats.sanitizer:sniff", "ascend_tui.formats.sanitizer:load"),
    ("profiler memory", "ascend_tui.formats.profiler_memory:sniff", "ascend_tui.formats.profiler_memory:load"),
]


def _resolve(ref: str) -> Callable[..., Any] | None:
    module, _, func = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), func)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None
        raise


def kind_of(path: str | Path) -> str | None:
    """Which reader would open `path`, or None."""
    p = Path(path)
    for name, sniff, _load in READERS:
        fn = _resolve(sniff)
        if fn is not None and fn(p):
            return name
    return None


def open_path(
    path: str | Path,
    progress: Callable[[str, int, int | None], None] | None = None,
    cancel: threading.Event | None = None,
) -> Investigation:
    """Read any artifact the project understands into an `Investigation`."""
    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file or folder")
    for name, sniff, load in READERS:
        sniff_fn = _resolve(sniff)
        if sniff_fn is None or not sniff_fn(p):
            continue
        load_fn = _resolve(load)
        assert load_fn is not None
        return load_fn(p, progress=progress, cancel=cancel)
    raise InputError(p, "not a format ascend-tui reads (expected an investigation or graph .json, "
                        "an msprobe dump folder, msprobe overflow_check output or a sanitizer log)")
