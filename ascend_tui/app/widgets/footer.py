"""`KeyFooter`: the keys of the current mode, as many as fit the width, none cut in half.

Textual's footer lays every shown binding out in a row and lets the last ones run off the
edge (and the docked palette key overlap them); this one measures each key and keeps only
those that fit, in binding order, so an 80-column terminal shows fewer hints, whole.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


ALWAYS = frozenset({"app.help", "view.close"})  # kept whatever else has to go


class KeyFooter(Footer):
    """The footer of every screen: whole key hints that fit, the palette key at the right."""

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
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
        for i, (binding, enabled, tooltip, display, _cost) in enumerate(candidates):
            if i in chosen:
                yield FooterKey(binding.key, display, binding.description, binding.action, disabled=not enabled,
                                tooltip=tooltip).data_bind(compact=Footer.compact)
        if palette is not None:
            _node, binding, enabled, tooltip = palette
            yield FooterKey(binding.key, app.get_key_display(binding), binding.description, binding.action,
                            classes="-command-palette", disabled=not enabled,
                            tooltip=binding.tooltip or binding.description)

    def on_resize(self, _event: events.Resize) -> None:
        if self._bindings_ready:
            self.call_after_refresh(self.recompose)
