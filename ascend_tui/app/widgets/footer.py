"""`KeyFooter`: the keys of the current mode, as many as fit the width, none cut in half.

Textual's footer lays every shown binding out in a row and lets the last ones run off the
edge (and the docked palette key overlap them); this one measures each key and keeps only
those that fit, in binding order, so an 80-column terminal shows fewer hints, whole.

Textual recomposes a footer whenever the screen's bindings are refreshed (every focus change,
every `refresh_bindings`): dozens of key widgets mounted and restyled, 20–60 ms a time. This one
works out which keys it would show and recomposes only when that list (or the width) changed; when
the new keys are some of those it shows, in the same order (a table's keys and the screen's, then
only the screen's), it hides the others instead: new key widgets are laid out twice (their first
layout sizes them, which asks for another), a shown or hidden one once, with the rest of the frame.
"""

from __future__ import annotations

import asyncio

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


ALWAYS = frozenset({"app.help", "view.close"})  # kept whatever else has to go

# (key, key display, description, action, enabled, tooltip, is the palette key)
Shown = tuple[str, str, str, str, bool, str, bool]


class KeyFooter(Footer):
    """The footer of every screen: whole key hints that fit, the palette key at the right."""

    _composed: tuple[Shown, ...] | None = None  # what the last compose yielded
    _keys: list[FooterKey] = []  # the widgets it yielded, in order (set per footer by compose)
    _recomposing = False

    def _plan(self) -> tuple[Shown, ...]:
        """The keys to show at the current width and bindings, in order, the palette key last."""
        app = self.app
        width = self.size.width or app.size.width
        active = self.screen.active_bindings
        palette = active.get(app.COMMAND_PALETTE_BINDING) if self.show_command_palette else None
        budget = width
        if palette is not None:
            budget -= cell_len(app.get_key_display(palette[1])) + 1 + cell_len(palette[1].description) + 3
        candidates = []
        seen: set[str] = set()
        for _node, binding, enabled, tooltip in active.values():
            if not binding.show or binding.action in seen or binding.key == app.COMMAND_PALETTE_BINDING:
                continue
            seen.add(binding.action)
            display = app.get_key_display(binding)
            candidates.append((binding, enabled, tooltip, display,
                               cell_len(display) + 1 + cell_len(binding.description) + 1))
        chosen: set[int] = set()
        for i in sorted(range(len(candidates)), key=lambda k: candidates[k][0].id not in ALWAYS):
            if candidates[i][4] <= budget:
                budget -= candidates[i][4]
                chosen.add(i)
        plan = [(b.key, display, b.description, b.action, enabled, tooltip, False)
                for i, (b, enabled, tooltip, display, _cost) in enumerate(candidates) if i in chosen]
        if palette is not None:
            _node, binding, enabled, _tooltip = palette
            plan.append((binding.key, app.get_key_display(binding), binding.description, binding.action, enabled,
                         binding.tooltip or binding.description, True))
        return tuple(plan)

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        self._composed = plan = self._plan()
        self._keys = []
        compact = "-compact" if self.compact else ""
        for key, display, description, action, enabled, tooltip, is_palette in plan:
            if is_palette:
                widget = FooterKey(key, display, description, action, classes="-command-palette",
                                   disabled=not enabled, tooltip=tooltip)
            else:
                # born compact: its watcher setting the class on mount restyled every key once more (3 ms a key)
                widget = FooterKey(key, display, description, action, disabled=not enabled, tooltip=tooltip,
                                   classes=compact)
                widget.set_reactive(FooterKey.compact, self.compact)
            self._keys.append(widget)
            yield widget  # not `data_bind` (`watch_compact` instead): that needs compose to run on this footer's own
            # message pump, and `update_keys` runs it on the screen's

    def watch_compact(self, compact: bool) -> None:
        for key in self.query(FooterKey):
            key.compact = compact

    async def _recompose_if_changed(self) -> None:
        if self._recomposing or not self.is_attached or (plan := self._plan()) == self.shown or self._show_only(plan):
            return
        self._recomposing = True  # a call meanwhile (the refresh after a focus change) leaves it to this one
        try:
            await self.recompose()
        finally:
            self._recomposing = False

    @property
    def shown(self) -> tuple[Shown, ...] | None:
        """The keys on show: those composed, less the hidden ones."""
        if self._composed is None:
            return None
        return tuple(p for p, w in zip(self._composed, self._keys) if w.display)

    def _show_only(self, plan: tuple[Shown, ...]) -> bool:
        """Show just the keys of `plan` if each is a key composed here, in the composed order; False if not."""
        if self._composed is None or len(self._keys) != len(self._composed):
            return False
        at = {p: i for i, p in enumerate(self._composed)}
        wanted = [at.get(p, -1) for p in plan]
        if -1 in wanted or wanted != sorted(wanted):
            return False
        keep = set(wanted)
        for i, widget in enumerate(self._keys):
            widget.display = i in keep
        return True

    async def update_keys(self) -> None:
        """Show the keys of the focus as it is now, without waiting for the refresh after it (a screen that moved the
        focus inside `batch_update` calls it there: the new keys are laid out in the same frame, not one or two later)."""
        if self._bindings_ready and self._plan() != self.shown:
            await self._recompose_if_changed()
            # one turn of the event loop, still inside the caller's batch: the keys shown or hidden pass their layout
            # requests to the screen now, not after its next frame (a second layout of the whole screen)
            await asyncio.sleep(0)

    def bindings_changed(self, screen: Screen) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen:
            self.call_after_refresh(self._recompose_if_changed)

    def on_resize(self, _event: events.Resize) -> None:
        if self._bindings_ready:
            self.call_after_refresh(self._recompose_if_changed)
