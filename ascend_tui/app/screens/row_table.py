"""`RowTable`: a Line-API table with a row cursor, for the per-check views' long lists.

Rows are plain strings painted as segments (never parsed as markup: operator names contain `[`),
so a 100,000-row list costs one list in memory and only the visible lines are drawn.
"""

from __future__ import annotations

import textwrap
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Sequence

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ascend_tui.app.keys import LIST_BINDINGS
from ascend_tui.app.widgets.scrolling import set_virtual_size

Tone = Literal["", "error", "warning", "info", "muted", "bad", "good", "section"]
_AUTO_SAMPLE = 5_000
_AUTO_CAP = 48


@dataclass(frozen=True, slots=True)
class Column:
    """A column: its header, a fixed width or None to fit the content, its alignment, and which end a cut keeps.

    `cut="start"` keeps a too-long cell's tail (`…forward.output.2`): names that differ at their end.
    """

    label: str
    width: int | None = None
    align: Literal["left", "right"] = "left"
    grow: bool = False
    cut: Literal["end", "start"] = "end"


@dataclass(frozen=True, slots=True)
class Row:
    """One row: its cells, the operator it points at, a tone for the whole row or per cell, and payload.

    A "section" row is a heading across the whole width: its cells are joined, not put in columns.
    """

    cells: tuple[str, ...]
    key: str | None = None
    tone: Tone = ""
    cell_tones: tuple[Tone, ...] = ()
    data: Any = None


class RowTable(ScrollView, can_focus=True, inherit_bindings=False):
    """A sticky header and rows under a cursor; Enter chooses the row under it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *(b for b in LIST_BINDINGS if b.id != "list.page-down"),
        Binding("pagedown", "page(1)", "page down", id="list.page-down", show=False),
        Binding("enter", "choose", "focus op", id="view.focus-op"),
        Binding("space", "expand", "expand", id="view.expand",
                tooltip="show the cursor row's cut-off text in full, wrapped under it; space again folds it"),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "row-table--header", "row-table--cursor", "row-table--error", "row-table--warning",
        "row-table--info", "row-table--muted", "row-table--bad", "row-table--good", "row-table--section",
    }

    DEFAULT_CSS = """
    RowTable {
        height: 1fr;
        background: $surface;
        color: $foreground;
        scrollbar-gutter: stable;
    }
    RowTable > .row-table--header { background: $panel; text-style: bold; }
    RowTable > .row-table--cursor { background: $cursor-blurred; }
    RowTable:focus > .row-table--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    RowTable > .row-table--error { color: $badge-error; }
    RowTable > .row-table--warning { color: $badge-warning; }
    RowTable > .row-table--info { color: $badge-info; }
    RowTable > .row-table--muted { color: $text-muted; }
    RowTable > .row-table--bad { color: $metric-bad; text-style: bold; }
    RowTable > .row-table--good { color: $metric-good; }
    RowTable > .row-table--section { color: $accent; text-style: bold; }
    """

    cursor: reactive[int] = reactive(0, init=False)

    class _RowMessage(Message):
        """Something happened on `row` of `table`."""

        def __init__(self, table: RowTable, index: int, row: Row) -> None:
            super().__init__()
            self.table = table
            self.index = index
            self.row = row

        @property
        def control(self) -> RowTable:
            return self.table

    class Highlighted(_RowMessage):
        """The cursor moved onto `row`."""

    class Chosen(_RowMessage):
        """The user pressed Enter (or double-clicked) on `row`."""

    def __init__(self, columns: Sequence[Column] = (), rows: Sequence[Row] = (), *,
                 empty: str = "nothing to show", name: str | None = None, id: str | None = None,
                 classes: str | None = None, cell_widths: Sequence[int] | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.columns: list[Column] = list(columns)
        self.rows: Sequence[Row] = rows
        self._sections = _sections(rows)
        self.empty = empty
        self._natural: list[int] = []
        self._widths: list[int] = []
        self._laid_out_for = -1
        self.expanded = False
        self._extra: list[str] = []  # continuation lines of the expanded row: each cut-off cell in full
        self._measure(cell_widths)
        self.set_reactive(RowTable.cursor, self._landing(0, 1))

    # -- data -------------------------------------------------------------------------------

    def set_rows(self, rows: Sequence[Row], columns: Sequence[Column] | None = None, *,
                 cell_widths: Sequence[int] | None = None) -> None:
        """Replace the rows (and optionally the columns); the cursor goes back to the top.

        `rows` may be a lazy sequence that builds each row when asked (only visible rows are);
        such a sequence must hold no section headings, which are found by scanning lists only.
        `cell_widths`, the widest cell of each column (`cell_widths(rows)`, kept by a caller that shows
        the same rows again in another order), saves measuring them.
        """
        if columns is not None:
            self.columns = list(columns)
        self.rows = rows
        self._sections = _sections(rows)
        self._measure(cell_widths)
        self._laid_out_for = -1
        self.expanded, self._extra = False, []
        self.set_reactive(RowTable.cursor, self._landing(0, 1))
        set_virtual_size(self, Size(0, len(self.rows) + 1))  # a layout only if the scrollbar comes or goes
        self.scroll_to(y=0, animate=False, immediate=True)
        self.refresh()

    def position(self) -> tuple[int, int]:
        """(1-based place of the cursor among the rows that are not headings, how many such rows)."""
        total = len(self.rows) - len(self._sections)
        if total <= 0:
            return 0, 0
        return self.cursor - bisect_right(self._sections, self.cursor) + 1, total

    @property
    def current(self) -> Row | None:
        """The row under the cursor, if there is one."""
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def _measure(self, cell_widths: Sequence[int] | None = None) -> None:
        """Natural widths of auto columns, from the header and the first rows (or the widths given)."""
        if cell_widths is None or len(cell_widths) < len(self.columns):
            cell_widths = _cell_widths(self.rows[:_AUTO_SAMPLE], len(self.columns))
        natural = []
        for i, col in enumerate(self.columns):
            if col.width is not None:
                natural.append(col.width)
                continue
            natural.append(min(_AUTO_CAP, max(cell_len(col.label), cell_widths[i])))
        self._natural = natural

    def _layout(self, width: int) -> None:
        """Fit the columns into `width`: grow columns take what is left, the rest shrink from the right."""
        self._laid_out_for = width
        widths = list(self._natural)
        if not widths:
            self._widths = []
            return
        gaps = len(widths)  # one space before each column
        spare = width - gaps - sum(widths)
        growers = [i for i, c in enumerate(self.columns) if c.grow]
        if spare > 0 and growers:
            for n, i in enumerate(growers):
                widths[i] += spare // len(growers) + (1 if n < spare % len(growers) else 0)
        else:
            # text columns give way first (names, messages: a cut name reads on); numbers only when nothing
            # else can, since a cut number (`0.999…`, `159…`) misleads
            text_first = [i for i in reversed(range(len(widths))) if self.columns[i].align != "right"]
            numbers = [i for i in reversed(range(len(widths))) if self.columns[i].align == "right"]
            for i in (*text_first, *numbers):
                if spare >= 0:
                    break
                keep = min(widths[i], max(4, cell_len(self.columns[i].label)))
                take = min(widths[i] - keep, -spare)
                widths[i] -= take
                spare += take
        self._widths = widths

    def on_mount(self) -> None:
        self.virtual_size = Size(0, len(self.rows) + 1)

    # -- painting ---------------------------------------------------------------------------

    _base: Style | None = None  # the widget's own style while `render_lines` paints

    def render_lines(self, crop: Region) -> list[Strip]:
        """As Textual's, with the widget's style worked out once for the lines painted, not once a line (it walks
        every node above the table: 40 µs, half of a line's painting)."""
        self._base = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._base = None

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if width != self._laid_out_for:
            self._layout(width)
        base = self.rich_style if self._base is None else self._base
        if y == 0:
            header = self.get_component_rich_style("row-table--header")
            cells = tuple(c.label for c in self.columns)
            return self._strip(cells, (), base + header, {}, width)
        index = int(self.scroll_offset.y) + y - 1
        extra = len(self._extra) if self.expanded else 0
        if extra and self.cursor < index <= self.cursor + extra:
            return self._continuation(self._extra[index - self.cursor - 1], width)
        if extra and index > self.cursor + extra:
            index -= extra
        if not self.rows:
            if index == 0:
                muted = base + self.get_component_rich_style("row-table--muted")
                return Strip([Segment(set_cell_size(" " + self.empty, width), muted)])
            return Strip.blank(width, base)
        if index >= len(self.rows):
            return Strip.blank(width, base)
        row = self.rows[index]
        style = base
        if row.tone:
            style = style + self.get_component_rich_style(f"row-table--{row.tone}")
        cursor = index == self.cursor
        tones: dict[str, Style] = {}
        for tone in row.cell_tones:
            if tone and tone not in tones:
                tones[tone] = self.get_component_rich_style(f"row-table--{tone}")
        if cursor:
            cursor_style = self.get_component_rich_style("row-table--cursor")
            style = style + cursor_style
            tones = {k: v + cursor_style for k, v in tones.items()}
        if row.tone == "section":
            text = set_cell_size(" " + " ".join(row.cells), width)
            return Strip([Segment(text, style)], width)
        cells = row.cells
        return self._strip(cells, row.cell_tones, style, tones, width)

    # -- expanding the cursor row in place ----------------------------------------------------

    def _cut(self, column: int, text: str) -> bool:
        """Whether `text` does not fit its column (so the table shows it cut with `…`)."""
        w = self._widths[column] if column < len(self._widths) else 0
        return w > 0 and cell_len(text) > w

    def _expand_lines(self) -> list[str]:
        """The continuation lines of the cursor row: each cut-off cell in full as `header: text`, wrapped at
        words across the table's width (a column's own width split words mid-way: `warnin` / `g`)."""
        row = self.current
        if row is None or row.tone == "section":
            return []
        width = max(10, self.scrollable_content_region.width - 4)
        lines: list[str] = []
        for i, cell in enumerate(row.cells):
            if i < len(self.columns) and self._cut(i, cell):
                label = self.columns[i].label.strip() or f"column {i + 1}"
                lines += textwrap.wrap(f"{label}: {cell}", width, subsequent_indent="  ", break_long_words=True,
                                       break_on_hyphens=False) or [cell]
        return lines

    def _continuation(self, line: str, width: int) -> Strip:
        base = self.rich_style if self._base is None else self._base
        style = base + self.get_component_rich_style("row-table--cursor")
        return Strip([Segment(set_cell_size("   " + line, width), style)], width)

    def _refresh_expansion(self) -> None:
        if self._laid_out_for < 0:
            self._layout(self.scrollable_content_region.width)
        self._extra = self._expand_lines() if self.expanded else []
        set_virtual_size(self, Size(0, len(self.rows) + 1 + len(self._extra)))
        if self._extra:
            self._scroll_to_cursor(self.cursor + len(self._extra))
            self._scroll_to_cursor()
        self.refresh()

    def action_expand(self) -> None:
        """Show the cursor row's cut-off cells in full, wrapped under it (again: fold it back)."""
        self.expanded = not self.expanded
        self._refresh_expansion()

    def _strip(self, cells: Sequence[str], cell_tones: Sequence[Tone], style: Style,
               tones: dict[str, Style], width: int) -> Strip:
        segments: list[Segment] = [Segment(" ", style)]
        for i, w in enumerate(self._widths):
            if i:
                segments.append(Segment(" ", style))
            text = cells[i] if i < len(cells) else ""
            if cell_len(text) > w:
                if w > 0 and self.columns[i].cut == "start":
                    text = "…" + _tail(text, w - 1)
                else:
                    text = set_cell_size(text, max(0, w - 1)) + "…" if w > 0 else ""
            pad = w - cell_len(text)
            if self.columns[i].align == "right":
                text = " " * pad + text
            else:
                text = text + " " * pad
            tone = cell_tones[i] if i < len(cell_tones) else ""
            segments.append(Segment(text, tones.get(tone, style) if tone else style))
        return Strip(segments).adjust_cell_length(width, style)

    # -- cursor -----------------------------------------------------------------------------

    def watch_cursor(self, old: int, new: int) -> None:
        if self.expanded:
            self._refresh_expansion()
        self._scroll_to_cursor()
        self.refresh()
        row = self.current
        if row is not None:
            self.post_message(self.Highlighted(self, new, row))

    def _scroll_to_cursor(self, row: int | None = None) -> None:
        row = self.cursor if row is None else row
        visible = max(1, self.scrollable_content_region.height - 1)
        top = int(self.scroll_offset.y)
        if row < top:
            self.scroll_to(y=row, animate=False, immediate=True)
        elif row >= top + visible:
            self.scroll_to(y=row - visible + 1, animate=False, immediate=True)

    def _landing(self, index: int, direction: int) -> int:
        """The nearest row at or after `index` in `direction` that is not a section heading."""
        if not self.rows:
            return 0
        index = max(0, min(len(self.rows) - 1, index))
        for step in (direction, -direction):
            i = index
            while 0 <= i < len(self.rows):
                if self.rows[i].tone != "section":
                    return i
                i += step
        return index

    def move_to(self, index: int, direction: int = 1) -> None:
        """Put the cursor on row `index` (clamped, skipping headings along `direction`) and scroll it into view."""
        if self.rows:
            self.cursor = self._landing(index, direction)
            above = self.cursor - 1
            if above >= 0 and self.rows[above].tone == "section":
                self._scroll_to_cursor(above)

    def action_cursor(self, delta: int) -> None:
        self.move_to(self.cursor + delta, 1 if delta > 0 else -1)

    def action_page(self, direction: int) -> None:
        self.move_to(self.cursor + direction * max(1, self.scrollable_content_region.height - 2), direction)

    def action_edge(self, end: int) -> None:
        self.move_to(len(self.rows) - 1 if end else 0, -1 if end else 1)

    def action_choose(self) -> None:
        row = self.current
        if row is not None:
            self.post_message(self.Chosen(self, self.cursor, row))

    def on_click(self, event: events.Click) -> None:
        index = int(self.scroll_offset.y) + event.y - 1
        extra = len(self._extra) if self.expanded else 0
        if extra and index > self.cursor:
            index = self.cursor if index <= self.cursor + extra else index - extra
        if event.y < 1 or not 0 <= index < len(self.rows):
            return
        self.move_to(index)
        if event.chain >= 2:
            self.action_choose()


def cell_widths(rows: Sequence[Row], columns: int) -> list[int]:
    """The widest cell of each of `columns` columns over the first rows, as a table measures them."""
    return _cell_widths(rows[:_AUTO_SAMPLE], columns)


def _cell_widths(sample: Sequence[Row], columns: int) -> list[int]:
    return [max((cell_len(r.cells[i]) for r in sample if i < len(r.cells) and r.tone != "section"), default=0)
            for i in range(columns)]


def _sections(rows: Sequence[Row]) -> list[int]:
    """Indices of the heading rows of an eager list (a lazy sequence is never scanned)."""
    if not isinstance(rows, (list, tuple)):
        return []
    return [i for i, r in enumerate(rows) if r.tone == "section"]


def _tail(text: str, width: int) -> str:
    """The end of `text` that fits in `width` cells."""
    out = text[-width:] if width > 0 else ""
    while out and cell_len(out) > width:
        out = out[1:]
    return out
