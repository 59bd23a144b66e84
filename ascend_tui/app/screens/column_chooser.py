"""`ColumnChooser`: a checklist of a table's columns; space toggles, enter applies, esc leaves them as they were."""

from __future__ import annotations

from typing import ClassVar, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option


class ColumnChooser(ModalScreen[list[str] | None]):
    """Pick which columns a table shows; dismisses with the chosen keys in the table's order (None: cancelled).

    Marks are text (`[x]` shown, `[ ]` hidden), not colour alone; `fixed` keys are always shown and cannot
    be unticked; `a` ticks all, `d` goes back to `defaults`.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "cancel", "cancel", id="columns.cancel"),
        Binding("space,x", "toggle", "show/hide", id="columns.toggle", priority=True),
        Binding("enter", "apply", "apply", id="columns.apply", priority=True),
        Binding("a", "all", "all", id="columns.all"),
        Binding("d", "defaults", "defaults", id="columns.defaults"),
        Binding("j", "move(1)", "down", id="columns.down", show=False),
        Binding("k", "move(-1)", "up", id="columns.up", show=False),
    ]
    DEFAULT_CSS = """
    ColumnChooser { align: center middle; }
    ColumnChooser > Vertical { width: 64; max-width: 100%; height: 90%; max-height: 40; border: round $accent;
                               background: $surface; padding: 0 1; }
    ColumnChooser OptionList { height: 1fr; border: none; }
    ColumnChooser Label { color: $text-muted; width: 1fr; }
    """

    def __init__(self, columns: Sequence[tuple[str, str]], shown: Sequence[str], defaults: Sequence[str] = (),
                 fixed: Sequence[str] = (), title: str = "columns") -> None:
        super().__init__()
        self.columns = list(columns)  # (key, description)
        self.shown = {k for k in shown if any(k == c for c, _d in self.columns)}
        self.defaults = list(defaults)
        self.fixed = set(fixed)
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"{self.title_text}: space shows/hides · enter applies · a all · d defaults · esc cancels",
                        markup=False)
            yield OptionList(*(Option(self._prompt(k, d), id=k) for k, d in self.columns), id="columns")
            yield Label("", id="columns-count", markup=False)

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()
        self._count()

    def _prompt(self, key: str, description: str) -> Text:
        mark = "[=]" if key in self.fixed else "[x]" if key in self.shown else "[ ]"
        return Text(f"{mark} {description}")  # Text, not markup: `[x]` would be read as a tag

    def _redraw(self) -> None:
        box = self.query_one(OptionList)
        for i, (key, description) in enumerate(self.columns):
            box.replace_option_prompt_at_index(i, self._prompt(key, description))
        self._count()

    def _count(self) -> None:
        n = len(self.shown | (self.fixed & {k for k, _d in self.columns}))
        self.query_one("#columns-count", Label).update(f"{n} of {len(self.columns)} shown · [=] always shown")

    def action_toggle(self) -> None:
        box = self.query_one(OptionList)
        if box.highlighted is None:
            return
        key = self.columns[box.highlighted][0]
        if key in self.fixed:
            return
        self.shown ^= {key}
        self._redraw()

    def action_move(self, delta: int) -> None:
        box = self.query_one(OptionList)
        box.highlighted = max(0, min(len(self.columns) - 1, (box.highlighted or 0) + delta))

    def action_all(self) -> None:
        self.shown = {k for k, _d in self.columns}
        self._redraw()

    def action_defaults(self) -> None:
        self.shown = set(self.defaults)
        self._redraw()

    def action_apply(self) -> None:
        self.dismiss([k for k, _d in self.columns if k in self.shown or k in self.fixed])

    def action_cancel(self) -> None:
        self.dismiss(None)
