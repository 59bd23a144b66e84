"""Which stack frames are the user's, and the source location of the current call in the user's code.

Locations point at the user's model, never at the machinery around it: frames in torch,
ascend_tui, textual, the standard library (threading, concurrent.futures, runpy, ...) and
installed entry scripts (`ascend-tui`) are left out, and the walk ends at the function that
called the model (`stop_at`). Capture asks on every aten call, so
each code object is classified once and each distinct call stack is turned into a
`SourceLocation` once.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from threading import get_ident
from types import CodeType, FrameType
from typing import Any

from ascend_tui.evidence import SourceLocation

STACK_DEPTH = 8
_LIBRARY, _USER, _STOP, _WRAP = 0, 1, 2, 3  # _WRAP: a recording's module wrapper (a library frame to other walks)
_PREFIXES: tuple[str, ...] | None = None
_SITE = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
# Keyed by id(code): hashing a code object hashes its constants, nested code objects included,
# on every lookup (~15 us for a script's module code). `_KEEP` holds each code object, so an id
# is never reused while it is a key.
_USER_CODE: dict[int, int] = {}  # id(code) -> _LIBRARY, _USER or _STOP
_KEEP: list[CodeType] = []
_LOCATIONS: dict[tuple[int, ...], SourceLocation] = {}


def _package_dir(name: str) -> str | None:
    spec = importlib.util.find_spec(name)
    origin = spec.origin if spec is not None else None
    return os.path.dirname(os.path.abspath(origin)) + os.sep if origin else None


def _library_prefixes() -> tuple[str, ...]:
    """Directories whose files are never the user's (computed once; finds packages without importing them)."""
    global _PREFIXES
    if _PREFIXES is None:
        found = [os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep]  # ascend_tui
        for name in ("torch", "textual"):
            try:
                path = _package_dir(name)
            except (ImportError, ValueError):
                path = None
            if path:
                found.append(path)
        for key in ("scripts",):  # console-script launchers such as the `ascend-tui` entry script
            path = sysconfig.get_paths().get(key)
            if path:
                found.append(os.path.abspath(path) + os.sep)
        _PREFIXES = tuple(found)
    return _PREFIXES


def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({os.path.abspath(paths[k]) + os.sep for k in ("stdlib", "platstdlib") if paths.get(k)})


_STDLIB = _stdlib_dirs()


def is_user_file(filename: str) -> bool:
    """Whether a frame in `filename` is the user's code (not torch, ascend_tui, textual, the stdlib or a launcher)."""
    if not filename or filename.startswith("<"):
        return False
    path = filename if os.path.isabs(filename) else os.path.abspath(filename)
    if path.startswith(_library_prefixes()):
        return False
    if path.startswith(_STDLIB) and not any(s in path for s in _SITE):
        return False
    return True


def stop_at(function: Any) -> None:
    """Make `function`'s frame the outer end of every source stack: what called the model is not the model.

    Capture calls the model through one function; the frames above it (the CLI, the app's
    worker thread, a script calling `investigate`) say where the run was started, not where an
    operator was called, and the walk up the stack ends there.
    """
    code = function.__code__
    _KEEP.append(code)
    _USER_CODE[id(code)] = _STOP


def wrapper_code(code: CodeType) -> None:
    """Mark `code` as a recording's module wrapper (`SourceStack.wrap`): its walks stop there, others pass it."""
    _KEEP.append(code)
    _USER_CODE[id(code)] = _WRAP


def _classify(code: CodeType) -> int:
    found = _USER_CODE.get(id(code))
    if found is None:
        if len(_KEEP) > 65536:  # generated code (exec per call) could grow it without bound
            stops = {k: v for k, v in _USER_CODE.items() if v == _STOP}  # (wrappers then walk as library frames)
            kept = [c for c in _KEEP if id(c) in stops]
            _USER_CODE.clear()
            _USER_CODE.update(stops)
            _KEEP[:] = kept
            _LOCATIONS.clear()
        _KEEP.append(code)
        found = _USER_CODE[id(code)] = _USER if is_user_file(code.co_filename) else _LIBRARY
    return found


def _walk(frame: FrameType | None, wrap: int = 0) -> tuple[list[int], FrameType | None]:
    """The (code id, instruction offset) pairs of the user frames from `frame` outwards, up to `STACK_DEPTH` of them
    or a stop frame, and the frame of the wrapper code `wrap` the walk stopped at (None where it stopped otherwise)."""
    key: list[int] = []
    get = _USER_CODE.get
    left = STACK_DEPTH  # (a count, not `len(key)`: one call fewer per user frame)
    while frame is not None:
        code = id(frame.f_code)
        kind = get(code)
        if kind is None:
            kind = _classify(frame.f_code)
        if kind:  # (most frames are library frames: nothing but the step to the next)
            if kind == _USER:
                key += (code, frame.f_lasti)
                left -= 1
                if not left:
                    break
            elif kind == _STOP:
                break
            elif code == wrap:
                return key, frame
        frame = frame.f_back
    return key, None


def _found(key: list[int], skip: int) -> SourceLocation | None:
    """The location cached for the walk's `key`, made from the frames `skip` levels above the calling `user_source`."""
    if not key:
        return None
    k = tuple(key[:2 * STACK_DEPTH])
    found = _LOCATIONS.get(k)
    if found is None:
        found = _LOCATIONS[k] = _location(sys._getframe(skip + 1), len(k) // 2)
    return found


def user_source(skip: int = 2) -> SourceLocation | None:
    """The innermost frames of the user's code that led to the current call (cached per distinct call stack).

    The walk keeps only (code id, instruction offset) pairs, the cache key; the frames themselves
    are walked again only for a stack not seen before.
    """
    return _found(_walk(sys._getframe(skip))[0], skip)


class SourceStack:
    """`user_source` for one recording, with the user frames above each running module call walked once per call.

    The recorder's module wrapper (`wrapper`: a code object of this recording's own) pushes an
    entry on `outer` when a module call starts and pops it when it ends; the frames above a
    running call are suspended, so their (code, offset) pairs hold until it returns. An op's
    walk then stops at the innermost wrapper frame and takes that call's cached pairs, walked
    once (on its first op) up to the next wrapper and joined to that one's: a few frames an op
    instead of every frame up to the model's call. Off the recording thread the walk is whole.
    """

    __slots__ = ("wrap", "outer", "thread", "lead")

    def __init__(self) -> None:
        self.wrap = 0  # id of the wrapper's code object (0 until the recorder shadows the modules)
        self.outer: list[tuple[int, ...] | None] = []  # per running module call, innermost last
        self.thread = 0  # the recording thread (the wrapper pushes only there)
        # The code objects of the library frames a walk began with, learned from one op (and again when an op's
        # differ, or when `lead` is emptied): the dispatch machinery, and in the backward the autograd engine's
        # callers. An op's walk steps over the frames that match them by identity, with no lookup.
        self.lead: tuple[CodeType, ...] = ()

    def _learn(self, frame: FrameType | None) -> FrameType | None:
        """Set `lead` to the codes of the library frames from `frame` outwards; the first frame past them."""
        lead: list[CodeType] = []
        while frame is not None:
            code = frame.f_code
            kind = _USER_CODE.get(id(code))
            if kind is None:
                kind = _classify(code)
            if kind != _LIBRARY:
                break
            lead.append(code)
            frame = frame.f_back
        self.lead = tuple(lead)
        return frame

    def _above(self, frame: FrameType, level: int) -> tuple[int, ...]:
        """The cache key pairs of the user frames above the wrapper `frame` of running call `level`."""
        found = self.outer[level]
        if found is not None:
            return found
        key, wrapper = _walk(frame.f_back, self.wrap if level > 0 else 0)
        if wrapper is not None:
            key += self._above(wrapper, level - 1)
        found = self.outer[level] = tuple(key[:2 * STACK_DEPTH])
        return found

    def user_source(self, skip: int = 2) -> SourceLocation | None:
        """`user_source(skip)` (the same location), walking only up to the innermost running module call.

        Capture asks once per op: the walk starts past the library frames `lead` names, and
        `_found` is inlined.
        """
        outer = self.outer
        wrap = self.wrap if outer and get_ident() == self.thread else 0
        frame: FrameType | None = sys._getframe(skip)
        lead = self.lead
        for code in lead:  # frames known to be library frames: stepped over
            if frame is None or frame.f_code is not code:
                frame = self._learn(sys._getframe(skip))
                break
            frame = frame.f_back
        else:
            if not lead:
                frame = self._learn(frame)
        key, wrapper = _walk(frame, wrap)
        if wrapper is not None:  # (`_above`'s cached case inline: the frames above the innermost running call)
            key += outer[-1] or self._above(wrapper, len(outer) - 1)
        if not key:
            return None
        k = tuple(key) if len(key) <= 2 * STACK_DEPTH else tuple(key[:2 * STACK_DEPTH])
        found = _LOCATIONS.get(k)
        if found is None:
            found = _LOCATIONS[k] = _location(sys._getframe(skip), len(k) // 2)
        return found


def _location(frame: FrameType | None, count: int) -> SourceLocation:
    """The `SourceLocation` of the first `count` user frames from `frame` outwards."""
    users: list[FrameType] = []
    while frame is not None and len(users) < count:
        if _USER_CODE.get(id(frame.f_code)) == _USER:
            users.append(frame)
        frame = frame.f_back
    lines = tuple(f"{f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}" for f in users)
    first = users[0]
    return SourceLocation(first.f_code.co_filename, first.f_lineno, first.f_code.co_name, lines)
