"""`FocusStyles`: a widget whose focus change puts back the styles it had in that state, not restyling it again.

Textual restyles a widget from the stylesheet each time it gains or loses the focus: the widget,
its scrollbars and one throwaway node per component class (a `RowTable` has nine), each node a
cycle the collector has to find. In a tabbed view every tab switch moves the focus from one table
to another: 22 widgets restyled, 3-5 ms of the switch and most of the garbage that set off a full
collection (10-30 ms) every few switches at a million kernels. The styles a restyle gives depend
only on the stylesheet, the theme and the classes and pseudo-classes of the widget and of every
node above it, so they are kept per such state, and a focus change to a state seen before sets
the kept rules back (what Textual's own per-pass style cache does), with no node made.
"""

from __future__ import annotations

from typing import Any

from textual.css.stylesheet import Stylesheet
from textual.dom import DOMNode
from textual.widget import Widget

_KEEP = 8  # states kept per widget (focused and not, each with or without the pointer over it)


class FocusStyles:
    """Mixed in before a widget class, `class PaneTable(FocusStyles, RowTable)`; not a widget itself, so Textual
    takes the CSS type and bindings of the widget class as ever."""

    _focus_styles: dict[tuple[Any, ...], list[tuple[DOMNode, dict[str, Any], dict[str, Any]]]] | None = None

    def _styled_nodes(self: Any) -> list[Widget]:
        """What a restyle of this widget styles: it and the scrollbars it shows (`Stylesheet.update_nodes`)."""
        nodes: list[Widget] = [self]
        if self.is_scrollable:
            if self.show_vertical_scrollbar and self.scrollbar_size_vertical:
                nodes.append(self.vertical_scrollbar)
            if self.show_horizontal_scrollbar and self.scrollbar_size_horizontal:
                nodes.append(self.horizontal_scrollbar)
                if self.show_vertical_scrollbar and self.scrollbar_size_vertical:
                    nodes.append(self.scrollbar_corner)
        return nodes

    def _style_state(self: Any, nodes: list[Widget]) -> tuple[Any, ...]:
        """Everything the stylesheet's selectors can tell apart for these nodes, and the stylesheet and theme."""
        path = tuple((n.id, frozenset(n.classes), n.pseudo_classes) for n in self.ancestors_with_self)
        bars = tuple((type(n), frozenset(n.classes), n.pseudo_classes) for n in nodes[1:])
        return self.app._css_update_count, self.app.theme, path, bars

    def watch_has_focus(self: Any, focused: bool) -> None:
        if self.children:  # a restyle styles them too: left to Textual
            super().watch_has_focus(focused)
            return
        if self._focus_styles is None:
            self._focus_styles = {}
        nodes = self._styled_nodes()
        state = self._style_state(nodes)
        kept = self._focus_styles.get(state)
        if kept is None or [n for n, _, _ in kept] != nodes:
            super().watch_has_focus(focused)  # Textual's restyle
            if len(self._focus_styles) >= _KEEP:
                self._focus_styles.clear()
            self._focus_styles[state] = [(n, n.styles.base.get_rules(), dict(n._component_styles)) for n in nodes]
            return
        for node, rules, components in kept:
            Stylesheet.replace_rules(node, rules)  # type: ignore[arg-type]
            node._component_styles.clear()
            node._component_styles.update(components)
            node.refresh()
