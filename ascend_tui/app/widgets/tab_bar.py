"""`TabBar`: a row of tab labels over an underline, the active one lit, in one widget painted by lines.

Textual's `TabbedContent` makes a widget per tab inside a scroll container, an underline that
moves a frame after the tab changed, and a chain of messages (tab activated, pane shown, pane
focused) each handled a frame apart: 4-5 layouts and repaints of the whole screen per switch,
50-100 ms at a million kernels. This bar draws the same two lines itself and changes nothing but
its own paint when the active tab changes; the screen that owns it shows the pane (a
`ContentSwitcher`) in the same handler, so a switch is one layout and one repaint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

BAR, HALF_LEFT, HALF_RIGHT = "━", "╺", "╸"


class TabBar(Widget):
    """Tab labels (`1 Ops`, `2 Modules`, …) and the bar under them; a click on a label posts `Chosen`."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"tab-bar--tab", "tab-bar--active", "tab-bar--bar"}
    # the look of Textual's `Tabs`/`Tab`/`Underline` (colours, dim under ANSI themes), so the screens look the same
    DEFAULT_CSS = """
    TabBar { width: 1fr; height: 2; }
    TabBar > .tab-bar--tab { color: $foreground 50%; }
    TabBar > .tab-bar--active { color: $foreground; }
    TabBar > .tab-bar--bar { color: $block-cursor-background; background: $foreground 10%; }
    TabBar:ansi > .tab-bar--tab { text-style: dim; }
    TabBar:ansi > .tab-bar--active { text-style: bold; }
    TabBar:ansi > .tab-bar--bar { color: $block-cursor-background; background: $border-blurred; }
    """

    class Chosen(Message):
        """A tab's label was clicked."""

        def __init__(self, bar: TabBar, tab: str) -> None:
            super().__init__()
            self.bar = bar
            self.tab = tab

        @property
        def control(self) -> TabBar:
            return self.bar

    def __init__(self, tabs: Sequence[tuple[str, str]], active: str, *, id: str | None = None) -> None:
        """`tabs`: (id, label) in order; `active`: the id lit first."""
        super().__init__(id=id)
        self.tabs = list(tabs)
        self._active = active
        self._hover: str | None = None

    @property
    def active(self) -> str:
        """The id of the lit tab."""
        return self._active

    @active.setter
    def active(self, tab: str) -> None:
        if tab not in dict(self.tabs):
            raise ValueError(f"no tab {tab!r}")
        if tab != self._active:
            self._active = tab
            self.refresh()  # its own two lines: no layout

    def spans(self) -> list[tuple[str, int, int]]:
        """(id, first column, end column) of each label with its one-cell padding either side."""
        out, x = [], 0
        for tab, label in self.tabs:
            width = cell_len(label) + 2
            out.append((tab, x, x + width))
            x += width
        return out

    def tab_at(self, x: int) -> str | None:
        """The tab whose label covers column `x`."""
        return next((tab for tab, lo, hi in self.spans() if lo <= x < hi), None)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        if y == 0:
            plain = base + self.get_component_rich_style("tab-bar--tab")
            lit = base + self.get_component_rich_style("tab-bar--active")
            pad = Style(bgcolor=base.bgcolor)  # blank cells as Textual paints a widget's padding
            segs = []
            for tab, label in self.tabs:
                segs += [Segment(" ", pad), Segment(label, lit if tab in (self._active, self._hover) else plain),
                         Segment(" ", pad)]
            return Strip(segs).adjust_cell_length(width, pad)
        if y != 1:
            return Strip.blank(width, base)
        return Strip(self._bar(width)).adjust_cell_length(width, base)

    def _bar(self, width: int) -> list[Segment]:
        """The underline, lit under the active label's text, drawn as `textual.renderables.bar.Bar` draws it."""
        bar_style = self.get_component_rich_style("tab-bar--bar")
        base = self.rich_style
        dim, lit = base + Style.from_color(bar_style.bgcolor), base + Style.from_color(bar_style.color)
        span = next(((lo + 1, hi - 1) for tab, lo, hi in self.spans() if tab == self._active), None)
        if span is None or width <= 0:
            return [Segment(BAR * width, dim)]
        start, end = max(0, span[0]), min(width, span[1])
        segs = [Segment(BAR * max(0, start - 1), dim)]
        if start > 0:
            segs.append(Segment(HALF_RIGHT, dim))
        segs.append(Segment(BAR * (end - start), lit))
        if end < width:
            segs.append(Segment(HALF_LEFT + BAR * max(0, width - end - 1), dim))
        return segs

    def on_click(self, event: events.Click) -> None:
        tab = self.tab_at(event.x)
        if tab is not None:
            event.stop()
            self.post_message(self.Chosen(self, tab))

    def on_mouse_move(self, event: events.MouseMove) -> None:
        hover = self.tab_at(event.x) if event.y == 0 else None
        if hover != self._hover:
            self._hover = hover
            self.refresh()

    def on_leave(self, _event: events.Leave) -> None:
        if self._hover is not None:
            self._hover = None
            self.refresh()
