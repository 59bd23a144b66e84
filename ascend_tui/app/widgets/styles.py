"""`cell_style`: a component's colours for painting cells, without the widget background that would hide a cursor.

A partial component style keeps only what the component sets, but colours with alpha
(`$text-muted`, `$text-disabled`, `$boost`) come out unblended (white); the full style blends
them against the widget's background and also carries that background. This takes the
blended colours and keeps a background only where the component sets one.
"""

from __future__ import annotations

from rich.style import Style
from textual.widget import Widget


def cell_style(widget: Widget, name: str) -> Style:
    """The rich style of component `name` of `widget`, colours blended, background only if the component has one."""
    full = widget.get_component_rich_style(name)
    part = widget.get_component_rich_style(name, partial=True)
    return Style(color=full.color if part.color is not None else None,
                 bgcolor=full.bgcolor if part.bgcolor is not None else None,
                 bold=part.bold, dim=part.dim, italic=part.italic, underline=part.underline, reverse=part.reverse,
                 strike=part.strike)
