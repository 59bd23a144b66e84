"""`RunProgress`: a progress bar with the phase of the running job ("capturing reference 120/412 ops")."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, ProgressBar


class RunProgress(Horizontal):
    """Shown while a worker runs; Escape (the app's cancel binding) stops the job."""

    DEFAULT_CSS = """
    RunProgress { height: 1; display: none; background: $panel; padding: 0 1; }
    RunProgress.-running { display: block; }
    RunProgress > ProgressBar { width: 24; }
    RunProgress > #phase { width: 1fr; padding: 0 1; color: $foreground; }
    RunProgress > #hint { width: auto; color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        yield ProgressBar(total=None, show_eta=False, show_percentage=False)
        yield Label("", id="phase", markup=False)
        yield Label("esc cancels", id="hint", markup=False)

    def start(self, phase: str) -> None:
        """Show the bar (indeterminate until a total is known) with a first phase line."""
        self.add_class("-running")
        self.query_one(ProgressBar).update(total=None, progress=0)
        self.phase = phase

    def report(self, text: str, done: int, total: int | None) -> None:
        """Move the bar and rewrite the phase line."""
        bar = self.query_one(ProgressBar)
        if total:
            bar.update(total=total, progress=min(done, total))
        else:
            bar.update(total=None)
        self.phase = text

    def stop(self) -> None:
        """Hide the bar."""
        self.remove_class("-running")

    @property
    def phase(self) -> str:
        """The phase line as shown."""
        return str(self.query_one("#phase", Label).content)

    @phase.setter
    def phase(self, text: str) -> None:
        self.query_one("#phase", Label).update(text)

    @property
    def running(self) -> bool:
        return self.has_class("-running")
