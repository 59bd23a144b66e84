"""`Breadcrumb`: the operators you walked through to get here, newest last; `b` goes back one."""

from __future__ import annotations

from typing import ClassVar, Sequence

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from ascend_tui.app.widgets.styles import cell_style

SEPARATOR = " › "


class Breadcrumb(Static):
    """One line: mode, then the trail of focused operators, cut from the left to fit."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"breadcrumb--mode", "breadcrumb--trail", "breadcrumb--here"}
    DEFAULT_CSS = """
    Breadcrumb { height: 1; padding: 0 1; background: $panel; }
    Breadcrumb > .breadcrumb--mode { background: $accent; color: $text; text-style: bold; }
    Breadcrumb > .breadcrumb--trail { color: $text-muted; }
    Breadcrumb > .breadcrumb--here { color: $foreground; text-style: bold; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(Text(""), id=id)
        self._trail: tuple[str, ...] = ()
        self._here: str | None = None
        self._mode = ""
        self._painted = False

    def show(self, trail: Sequence[str], here: str | None, mode: str = "") -> None:
        """Display `trail` (oldest first) leading to `here`, with an optional mode tag such as STEP."""
        if (tuple(trail), here, mode) == (self._trail, self._here, self._mode) and self._painted:
            return
        self._trail, self._here, self._mode = tuple(trail), here, mode
        self._paint()

    def on_resize(self) -> None:
        self._paint()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted:
            self.call_later(self._paint)

    @property
    def text(self) -> str:
        """The trail as plain text (what a test or a screen reader sees)."""
        return SEPARATOR.join([*self._trail, self._here or ""])

    def _paint(self) -> None:
        style = self._style
        out = Text(no_wrap=True, overflow="ellipsis")
        if self._mode:
            out.append(f" {self._mode} ", style("breadcrumb--mode"))
            out.append(" ")
        room = max(10, self.size.width - 2 - cell_len(out.plain)) if self.size.width else 200
        here = self._here or "nothing focused"
        parts: list[str] = []
        used = cell_len(here)
        for node in reversed(self._trail):
            need = cell_len(node) + len(SEPARATOR)
            if used + need + 2 > room:
                parts.append("…")
                break
            parts.append(node)
            used += need
        for p in reversed(parts):
            out.append(p + SEPARATOR, style("breadcrumb--trail"))
        out.append(here, style("breadcrumb--here"))
        self.update(out, layout=False)  # one line whatever it says: no layout of the screen
        self._painted = True

    def _style(self, name: str) -> Style:
        return cell_style(self, name)
