"""Small modal dialogs: open a path, pick a step or rank, and show an unexpected error without closing the app."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static
from textual.worker import get_current_worker

from ascend_tui.app.screens.row_table import Column, Row, RowTable
from ascend_tui.fmt import plural

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation
    from ascend_tui.offline.trends import Pick, PointSummary


COMPLETIONS_SHOWN = 8
PICKER_CHUNK = 64  # step/rank summaries read between two updates of the picker's rows


def complete_path(text: str) -> tuple[str, list[str]]:
    """Tab completion as a shell does it: (the text completed as far as it is unambiguous, the candidates)."""
    expanded = os.path.expanduser(text) if text.startswith("~") else text
    folder, prefix = os.path.split(expanded)
    base = Path(folder or ".")
    try:
        names = sorted(e.name + ("/" if e.is_dir() else "") for e in base.iterdir()
                       if e.name.startswith(prefix) and (prefix.startswith(".") or not e.name.startswith(".")))
    except OSError:
        return text, []
    if not names:
        return text, []
    common = os.path.commonprefix(names)
    head = text[: len(text) - len(prefix)] if prefix else text
    if folder and not head.endswith("/") and not prefix:
        head += "/"
    return head + common, names


class OpenDialog(ModalScreen[str | None]):
    """Ask for a path (investigation, dump folder, sanitizer log or model file) and dismiss with it; Tab completes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_none", "close", id="dialog.close"),
        Binding("tab", "complete", "complete path", id="dialog.complete", priority=True),
    ]
    DEFAULT_CSS = """
    OpenDialog { align: center middle; }
    OpenDialog > Vertical { width: 72; max-width: 100%; height: auto; border: round $accent; padding: 0 1;
                            background: $surface; }
    OpenDialog Label { color: $text-muted; }
    OpenDialog #candidates { color: $text-muted; height: auto; }
    """

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("open: investigation .json, msprobe dump folder, sanitizer log, model.py", markup=False)
            yield Input(placeholder="path (tab completes)", id="path")
            yield Label("", id="candidates", markup=False)

    def action_complete(self) -> None:
        """Complete the path as far as it is unambiguous and list the choices when there are several."""
        box = self.query_one("#path", Input)
        completed, names = complete_path(box.value)
        box.value = completed
        box.cursor_position = len(completed)
        shown = names[:COMPLETIONS_SHOWN]
        more = f"  +{len(names) - len(shown)} more" if len(names) > len(shown) else ""
        self.query_one("#candidates", Label).update("  ".join(shown) + more if len(names) > 1 else
                                                    ("" if names else "no match"))

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class ExportDialog(ModalScreen[str | None]):
    """Ask where to write the report, with the default filled in, so nothing is written without being shown first."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "close", id="dialog.close")]
    DEFAULT_CSS = """
    ExportDialog { align: center middle; }
    ExportDialog > Vertical { width: 80; max-width: 100%; height: auto; border: round $accent; padding: 0 1;
                              background: $surface; }
    ExportDialog Label { color: $text-muted; width: 1fr; }
    """

    def __init__(self, default: str, what: str) -> None:
        super().__init__()
        self._default = default
        self._what = what

    def compose(self) -> ComposeResult:
        with Vertical():
            # the question and the keys on lines of their own that wrap: one line was cut at every width
            yield Label(f"export {self._what} to:", markup=False)
            yield Input(value=self._default, id="path")
            yield Label("enter writes · esc cancels", markup=False)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class ErrorDialog(ModalScreen[None]):
    """An error we did not expect (a bug): its traceback, and the app keeps running."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter,q", "close", "close", id="dialog.close")]
    DEFAULT_CSS = """
    ErrorDialog { align: center middle; }
    ErrorDialog > Vertical { width: 90%; height: 80%; border: round $error; background: $surface; padding: 0 1; }
    ErrorDialog #title { color: $error; text-style: bold; }
    ErrorDialog #hint { color: $text-muted; }
    """

    def __init__(self, title: str, detail: str) -> None:
        super().__init__()
        self._title = title
        self._detail = detail

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._title, id="title", markup=False)
            with VerticalScroll():
                yield Static(Text(self._detail))
            yield Label("this is a bug in ascend-tui; please report it with the text above · esc closes",
                        id="hint", markup=False)

    def action_close(self) -> None:
        self.dismiss(None)



class PointList(RowTable):
    """The picker's list: Enter opens the step/rank under the cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "choose", "open", id="picker.open")]


class PointPicker(ModalScreen[str | None]):
    """The steps and ranks on screen, one line each (read in a worker), dismissed with the chosen entry's key (a folder
    to open, or a step of the profile)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss_none", "close", id="dialog.close")]
    DEFAULT_CSS = """
    PointPicker { align: center middle; }
    PointPicker > Vertical { width: 90%; max-width: 140; height: 80%; border: round $accent; padding: 0 1;
                             background: $surface; }
    PointPicker #picker-title { color: $text-muted; }
    PointPicker RowTable { height: 1fr; }
    """

    def __init__(self, inv: Investigation, points: list[Pick]) -> None:
        super().__init__()
        self.inv = inv
        self.points = points

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"{plural(len(self.points), 'step/rank', 'steps/ranks')} · reading their statistics …",
                        id="picker-title", markup=False)
            yield PointList([Column("", 1), Column("step/rank"), Column("summary", grow=True)],
                            [Row(("", p.label, "…"), data=p.key) for p in self.points], id="picker-table")
            yield Label("enter opens the step/rank · space shows a cut line whole · esc closes", markup=False)

    def on_mount(self) -> None:
        table = self.query_one(RowTable)
        table.focus()
        table.move_to(next((i for i, p in enumerate(self.points) if p.label == self.inv.run.extra.get("point")), 0))
        self._summarise()

    @work(thread=True, exclusive=True, group="picker", exit_on_error=False, description="reading steps and ranks")
    def _summarise(self) -> None:
        from ascend_tui.offline.trends import summaries

        worker = get_current_worker()
        lines: list[PointSummary] = []
        total = len(self.points)
        for start in range(0, total, PICKER_CHUNK):  # rows fill in as they are read: thousands of ranks take a while

            def report(text: str, done: int, _n: int | None, at: int = start) -> None:
                self.app.call_from_thread(self._title, f"{text} ({at + done + 1} of {total}) …")

            lines += summaries(self.inv, self.points[start:start + PICKER_CHUNK], report, worker.cancelled_event)
            if worker.is_cancelled:
                return
            self.app.call_from_thread(self._show, list(lines))

    def _title(self, text: str) -> None:
        self.query_one("#picker-title", Label).update(text)

    def _show(self, lines: list[PointSummary]) -> None:
        table = self.query_one(RowTable)
        at = table.cursor
        table.set_rows([Row(("●" if s.current else "", s.pick.label, s.text), tone="error" if s.bad else "",
                            data=s.pick.key) for s in lines]
                       + [Row(("", p.label, "…"), data=p.key) for p in self.points[len(lines):]])
        table.move_to(at)
        if len(lines) < len(self.points):
            return
        bad = sum(1 for s in lines if s.bad)
        self._title(f"{plural(len(lines), 'step/rank', 'steps/ranks')} · {bad} flagged (red) · "
                    f"● is the one on screen")

    @on(RowTable.Chosen)
    def _chosen(self, event: RowTable.Chosen) -> None:
        self.workers.cancel_group(self, "picker")
        self.dismiss(str(event.row.data) if event.row.data else None)  # a `Pick.key`

    def action_dismiss_none(self) -> None:
        self.workers.cancel_group(self, "picker")
        self.dismiss(None)
