"""Messages that background workers post to the app; handlers on the UI thread change state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.message import Message

from ascend_tui.fmt import count

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation


class ProgressReported(Message):
    """A worker reached `done` of `total` in `phase`; a burst collapses to the newest one."""

    def __init__(self, job: str, phase: str, done: int, total: int | None) -> None:
        super().__init__()
        self.job = job
        self.phase = phase
        self.done = done
        self.total = total

    def can_replace(self, message: Message) -> bool:
        """A newer progress report of the same job supersedes this one."""
        return isinstance(message, ProgressReported) and message.job == self.job

    def text(self) -> str:
        """`capturing reference 120/412 ops` — the phase line under the bar."""
        if self.total:
            return f"{self.phase} {count(self.done)}/{count(self.total)} ops"
        return f"{self.phase} {count(self.done)} ops" if self.done else self.phase


class InvestigationLoaded(Message):
    """A worker finished reading or running something into an `Investigation`."""

    def __init__(self, inv: Investigation, *, source: str, target: Any = None, notes: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.inv = inv
        self.source = source
        self.target = target
        self.notes = notes


class ResultsArrived(Message):
    """A running job has part of its answer: the captured graph, then each finished check's findings."""

    def __init__(self, inv: Investigation, job: str) -> None:
        super().__init__()
        self.inv = inv
        self.job = job

    def can_replace(self, message: Message) -> bool:
        """A newer partial result of the same job supersedes this one."""
        return isinstance(message, ResultsArrived) and message.job == self.job


class ChecksFinished(Message):
    """A live run of `checks` finished; `inv` holds its graph, evidence and findings."""

    def __init__(self, inv: Investigation, checks: tuple[str, ...], target: Any = None) -> None:
        super().__init__()
        self.inv = inv
        self.checks = checks
        self.target = target


class FixFinished(Message):
    """A fix run for one cause ended; `fixed` is the `live.fix_run.FixRun` (numbers, verdict, patch)."""

    def __init__(self, fixed: Any, title: str, spec: str, dtype: str | None) -> None:
        super().__init__()
        self.fixed = fixed
        self.title = title
        self.spec = spec
        self.dtype = dtype
