"""`set_virtual_size`: a Line-API list's new length without a layout of the screen, where nothing else moves.

Setting `virtual_size` lays the whole screen out (the reactive has `layout=True`), and when that
layout shows or hides the scrollbar the widget asks for a second one: two layouts and three paints
for a filter or a new text in a pane. A list whose scrollbar stays as it was (always shown:
`overflow-y: scroll`, or still needed, or still not) changes neither its own region nor any other
widget's, so its scrollbar's length, its scroll offset and its lines are all that change. One whose
scrollbar comes or goes is laid out once.
"""

from __future__ import annotations

from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.widget import Widget


def set_virtual_size(view: ScrollView, size: Size) -> None:
    """Give `view` a new virtual size, laying the screen out only if its scrollbars would come or go."""
    if size == view.virtual_size:
        view.refresh()
        return
    height = view.container_size.height
    styles = view.styles
    bar_stays = styles.overflow_y == "scroll" or (
        styles.overflow_y == "auto" and (size.height > height) == view.show_vertical_scrollbar)
    width_stays = styles.overflow_x == "hidden" or size.width == view.virtual_size.width
    if not view.is_mounted or not height or not width_stays:
        view.virtual_size = size  # Textual lays it out, scrollbars and all
        return
    if not bar_stays:
        # The scrollbar comes or goes: that is a layout (the compositor places it). Said before the layout, it is
        # one: found during it, Textual would ask for a second.
        show = size.height > height
        view.show_vertical_scrollbar = show
        view.vertical_scrollbar.display = show
        view.virtual_size = size
        return
    view.set_reactive(Widget.virtual_size, size)
    if view.show_vertical_scrollbar:
        bar = view.vertical_scrollbar
        bar.window_virtual_size = size.height
        bar.window_size = height - view.scrollbar_size_horizontal
    if view.scroll_y > view.max_scroll_y:
        view.scroll_to(y=view.max_scroll_y, animate=False, immediate=True)
    view.refresh()
