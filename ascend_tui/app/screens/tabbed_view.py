"""`TabbedView`: a `CheckView` with a `TabBar` over a `ContentSwitcher`, a tab switch in one frame, built ahead.

Textual's `TabbedContent` switches through a chain of messages (tab activated, pane shown, pane
focused), each handled a frame apart: 4-5 layouts and paints of the whole screen per switch. Here
`action_tab` lights the bar, shows the pane, moves the focus, lets the subclass set its status line
(`_shown`) and updates the footer's keys inside one `batch_update`, and `refresh` leaves out the
whole-screen repaint a focus change asks for: one layout, one paint. A pane's widgets are made the
first time it is shown (`_pane`).

A view composed ahead (`CheckView.KEEP`, the app's `build_views_ahead`) then lays itself out off
screen, each pane in turn (`_lay_out_ahead`), so its first opening does not lay it out again, and
skips the restyle of every widget that showing a screen asks for while nothing it is styled by has
changed (`update_node_styles`). Both use Textual's own private machinery (`Screen._refresh_layout`,
`App._css_update_count`; textual is pinned at 8.2.8), as `build_views_ahead` does.

The subclass composes one `TabBar` (ids as `TABS`), one `ContentSwitcher` holding the panes shown first,
each with the id `PANES` gives its tab, and a `KeyFooter`; it makes the other panes (`_pane`) and says what to
focus in a tab (`_focus_target`). A pane of one widget is that widget, not a container around it: a container
covered by its one child is still painted whenever it is shown (a line of blanks per line of the pane).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Self

from textual import on
from textual.widget import Widget
from textual.widgets import ContentSwitcher

from ascend_tui.app.screens.check_view import CheckView
from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.app.widgets.tab_bar import TabBar

if TYPE_CHECKING:
    from textual.geometry import Region

_FOCUS = "\0focus"  # the last step of `_lay_out_ahead`: the focus and the footer's keys back


class TabbedView(CheckView):
    """Tabs switched in one frame; composed ahead, laid out and styled ahead as well."""

    TABS: ClassVar[tuple[tuple[str, str], ...]] = ()  # (id, label) of each tab, the first shown on opening
    PANES: ClassVar[dict[str, str]] = {}  # the id of a tab's pane, the switcher's child, where it is not the tab's
    _switching = False  # inside `_show` (see `refresh`); a class default, as Screen.__init__ refreshes already
    _ahead: list[str] = []  # the panes still to lay out ahead; set per screen
    _styled: tuple[int, str] | None = None  # the app's CSS count and theme its widgets were last all styled for

    # -- what the subclass says -------------------------------------------------------------

    def _pane(self, tab: str) -> Widget:
        """The pane of a tab not composed, made when it is first shown (its id as `_pane_id` says)."""
        raise NotImplementedError(tab)

    def _focus_target(self, tab: str) -> Widget | None:
        """What to focus when `tab` is shown."""
        return None

    def _shown(self, tab: str, target: Widget | None) -> None:
        """Called as `tab` is shown, before the pane is (a status line set here repaints in the same frame)."""

    # -- switching --------------------------------------------------------------------------

    @property
    def tab(self) -> str:
        """The id of the tab shown: the one lit on the bar."""
        return self.query_one(TabBar).active

    def _pane_id(self, tab: str) -> str:
        return self.PANES.get(tab, tab)

    def _pane_of(self, tab: str) -> Widget | None:
        """The pane of `tab`, None until it is made."""
        found = self.query_one(ContentSwitcher).children
        pane_id = self._pane_id(tab)
        return next((w for w in found if w.id == pane_id), None)

    async def _make_pane(self, tab: str) -> None:
        """Mount `tab`'s pane, hidden, if it is not yet."""
        if self._pane_of(tab) is None:
            pane = self._pane(tab)
            pane.display = False
            await self.query_one(ContentSwitcher).mount(pane)

    async def action_tab(self, tab: str) -> None:
        """Show a tab, its pane made the first time (`_pane`)."""
        if tab == self.tab and self._pane_id(tab) == self.query_one(ContentSwitcher).current:
            return
        with self.app.batch_update():  # the bar, the pane, the focus, the status line and the keys: one frame
            await self._make_pane(tab)
            self._show(tab)
            await self.query_one(KeyFooter).update_keys()  # a pane's widget may have other keys

    def _show(self, tab: str) -> None:
        """Light the tab, show its pane (made already) and focus what is in it."""
        self._switching = True
        try:
            target = self._focus_target(tab)
            self._shown(tab, target)
            self.query_one(TabBar).active = tab
            self._switch_to(tab)
            if target is not None:
                self.set_focus(target)
        finally:
            self._switching = False

    def _switch_to(self, tab: str) -> None:
        """Show `tab`'s pane and hide the one shown, as `ContentSwitcher.current = tab` does, less the repaint of the
        whole switcher that setting it asks for: the pane shown covers it (34 blank lines of a 40-line terminal)."""
        switcher = self.query_one(ContentSwitcher)
        old, new = switcher.current, self._pane_id(tab)
        switcher.set_reactive(ContentSwitcher.current, new)
        for child in switcher.children:
            if child.id in (old, new):
                child.display = child.id == new

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False) -> Self:
        """As `Screen.refresh`, but a whole-screen repaint asked for while `_show` switches tabs is left out.

        A focus change repaints the whole screen; a tab switch lays the new pane out and repaints what changed
        (the pane, the bar, the restyled widgets) in the same frame, so that second paint of everything was
        redundant (10-15 ms of each switch).
        """
        if self._switching and not regions and not layout and not recompose:
            return self
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    @on(TabBar.Chosen)
    async def _tab_clicked(self, event: TabBar.Chosen) -> None:
        await self.action_tab(event.tab)

    # -- ahead ------------------------------------------------------------------------------

    def start_ahead(self) -> None:
        """From `on_mount`: each widget is styled now; composed off screen, lay each pane out ahead too."""
        self._styled = (self.app._css_update_count, self.app.theme)
        if not self.is_current:
            self._ahead = [tab for tab, _ in self.TABS[1:]] + [self.TABS[0][0], _FOCUS] if self.TABS else []
            self.call_after_refresh(self._lay_out_ahead, 4)

    async def _lay_out_ahead(self, passes: int) -> None:
        """Lay this screen out at the terminal's size before it is first shown, each tab's pane in turn, again while
        its widgets ask for it (a table sized by one layout asks for another), at most `passes` times a pane.

        Textual lays a screen out when it is pushed, and the widgets it places for the first time, the screen among
        them, get a resize event: the screen's resize lays it out again and the screen beneath it too (4 layouts
        and 5 paints in the profile view's first `T`), and a pane shown the first time is laid out twice. The
        layout is `Screen._refresh_layout` and the flag its update timer clears after it (it paints nothing for a
        screen not shown, and the push paints the whole screen anyway). One step a call: a key on the screen
        beneath waits for one step at most; `on_screen_resume` stops it where it is.
        """
        size = self.app.size
        if self.is_current or self.is_active or not self.is_attached or not size:
            return
        if self._layout_required and passes:
            self._refresh_layout(size)
            self._layout_required = False
            self.call_after_refresh(self._lay_out_ahead, passes - 1)
            return
        if not self._ahead:
            return
        tab = self._ahead.pop(0)
        if tab == _FOCUS:  # the focus back on the tab lit, and the footer's keys
            if (target := self._focus_target(self.tab)) is not None:
                self.set_focus(target, scroll_visible=False)
            await self.query_one(KeyFooter).update_keys()
        else:
            if self._pane_of(tab) is None:
                await self._make_pane(tab)
                if self.is_current or self.is_active or not self.is_attached:  # opened while its widgets mounted
                    return
            self._switch_to(tab)  # shown off screen; the bar stays
            # and focused: what it focuses is styled focused and then not, ahead, once (`FocusStyles`), so a tab's
            # first switch restyles nothing either
            if (target := self._focus_target(tab)) is not None:
                self.set_focus(target, scroll_visible=False)
        self.call_after_refresh(self._lay_out_ahead, 4)

    def update_node_styles(self, animate: bool = True) -> None:
        """As Textual's, less the restyle of every widget that showing the screen asks for when nothing they are styled
        by changed since they were (most of the profile view's first `T` once built ahead: 15-50 ms at 1M kernels).

        That restyle is the one call without animation while the screen is shown; a theme or CSS change in between
        bumps the app's CSS count, and then it restyles as before.
        """
        styled = (self.app._css_update_count, self.app.theme)
        if not animate and styled == self._styled:
            return
        super().update_node_styles(animate=animate)
        if not animate:
            self._styled = styled

    def on_screen_resume(self) -> None:
        self._ahead.clear()
        if self.query_one(ContentSwitcher).current != self._pane_id(self.tab):  # pushed while a pane was laid out ahead
            self._switch_to(self.tab)
        self._refocus()

    def _refocus(self) -> None:
        """Focus what the tab shown holds if the focus is not in its pane: a pane hidden with the focus in it lets go
        of it, and one focused ahead (`_lay_out_ahead`) and hidden again here still holds it until the next layout."""
        pane, focused = self._pane_of(self.tab), self.focused
        if focused is not None and pane is not None and (focused is pane or pane in focused.ancestors):
            return
        if (target := self._focus_target(self.tab)) is not None:
            self.set_focus(target)
