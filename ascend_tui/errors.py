"""Typed errors the user interfaces map to one line (CLI) or a notification (app)."""

from __future__ import annotations


class AscendTuiError(Exception):
    """Base for errors that are the user's input or environment, never our bug."""


class InputError(AscendTuiError):
    """A file or argument the user gave cannot be used; names the file, the place and what was expected."""

    def __init__(self, path: object, problem: str, *, where: str | None = None) -> None:
        self.path = str(path) if path is not None else ""
        self.problem = problem
        self.where = where
        super().__init__(self.line())

    def line(self) -> str:
        """One line a person can act on: `path[:where]: problem`."""
        place = f"{self.path}:{self.where}" if self.where else self.path
        return f"{place}: {self.problem}" if place else self.problem


class TargetError(InputError):
    """The user's model file failed to load or run; carries its own traceback frames, not ours."""

    def __init__(self, path: object, problem: str, *, user_traceback: str = "", memory_symptom: bool = False) -> None:
        super().__init__(path, problem)
        self.user_traceback = user_traceback
        self.memory_symptom = memory_symptom  # an out-of-range index or bad address: the memory check finds its op


class DeviceError(AscendTuiError):
    """The requested device backend is not usable on this machine."""


class Cancelled(AscendTuiError):
    """A long operation stopped because its cancel event was set."""
