"""`cell_style`: a component's colours for painting cells, without the widget background that would hide a cursor.

A partial component style keeps only what the component sets, but colours with alpha
(`$text-muted`, `$text-disabled`, `$boost`) come out unblended (white); the full style blends
them against the widget's background and also carries that background. This takes the
blended colours and keeps a background only where the component sets one.

A list paints eight or so cells a row, forty rows a page: each style is made once and kept while
Textual's own cached component style is the same object (it makes a new one when the styles change).
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from rich.style import Style
from textual.widget import Widget

_MADE: WeakKeyDictionary[Widget, dict[str, tuple[Style, Style]]] = WeakKeyDictionary()


def cell_style(widget: Widget, name: str) -> Style:
    """The rich style of component `name` of `widget`, colours blended, background only if the component has one."""
    full = widget.get_component_rich_style(name)
    made = _MADE.get(widget)
    if made is None:
        made = _MADE[widget] = {}
    hit = made.get(name)
    if hit is not None and hit[0] is full:
        return hit[1]
    part = widget.get_component_rich_style(name, partial=True)
    style = Style(color=full.color if part.color is not None else None,
                  bgcolor=full.bgcolor if part.bgcolor is not None else None,
                  bold=part.bold, dim=part.dim, italic=part.italic, underline=part.underline, reverse=part.reverse,
                  strike=part.strike)
    made[name] = (full, style)
    return style
