"""`HelpScreen`: every key that works where you were, grouped, with the id to remap it in keymap.toml.

Built from the live bindings of the screen underneath (focused widget, screen, app), after
the user's keymap was applied, so the keys shown are the keys that work.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from ascend_tui.app.config import KEYMAP_FILE, config_dir
from ascend_tui.app.screens.row_table import Column, Row, RowTable
from ascend_tui.app.widgets.op_list import badge_legend


@dataclass(frozen=True, slots=True)
class KeyHelp:
    """One binding as the help lists it: its keys, what it does, its id and whether it works right now."""

    group: str
    keys: tuple[str, ...]
    description: str
    id: str | None
    enabled: bool


def collect_keys(screen: Screen[object]) -> list[KeyHelp]:
    """The bindings active on `screen`, one entry per binding (its keys merged), grouped by id area.

    Groups are sorted by name, with the app's keys and Textual's fixed keys last.
    """
    app = screen.app
    merged: dict[tuple[int, str], KeyHelp] = {}
    for active in screen.active_bindings.values():
        binding = active.binding
        if binding.system:
            continue
        ident = binding.id or binding.action
        slot = (id(active.node), ident)
        display = app.get_key_display(binding)
        found = merged.get(slot)
        if found is None:
            does = binding.description or binding.action
            if binding.tooltip:
                does = f"{does}: {binding.tooltip}"
            merged[slot] = KeyHelp(_group(binding), (display,), does, binding.id, active.enabled)
        elif display not in found.keys:
            merged[slot] = KeyHelp(found.group, (*found.keys, display), found.description, found.id, found.enabled)
    entries = list(merged.values())
    last = {"app": 1, FIXED_GROUP: 2}
    return sorted(entries, key=lambda e: (last.get(e.group, 0), e.group))


FIXED_GROUP = "fixed (no id: Textual's own keys)"


def _group(binding: Binding) -> str:
    """`graph` for `graph.producer`; bindings without an id cannot be remapped and go last."""
    if not binding.id:
        return FIXED_GROUP
    return binding.id.split(".", 1)[0] if "." in binding.id else binding.id


def keymap_hint() -> str:
    """Where the keymap lives, with the home folder written as `~` (no user paths on screen)."""
    path = config_dir() / KEYMAP_FILE
    try:
        return "~/" + path.relative_to(Path.home()).as_posix()
    except ValueError:
        return str(path)


class HelpScreen(ModalScreen[None]):
    """The keys of the screen underneath, grouped; escape or ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "close", id="help.close"),
    ]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical {
        width: 96;
        max-width: 100%;
        height: 90%;
        border: round $primary;
        background: $surface;
    }
    HelpScreen #help-title { padding: 0 1; text-style: bold; }
    HelpScreen #help-legend { padding: 0 1; height: auto; }
    HelpScreen #help-remap { padding: 0 1; color: $text-muted; height: auto; }
    """

    def __init__(self, source: Screen[object] | None = None) -> None:
        super().__init__()
        self._source = source

    def compose(self) -> ComposeResult:
        source = self._source or self._beneath()
        entries = collect_keys(source) if source is not None else []
        rows: list[Row] = []
        group = None
        for e in entries:
            if e.group != group:
                group = e.group
                rows.append(Row((group,), tone="section"))
            rows.append(Row((" / ".join(e.keys), e.id or "— (fixed)", e.description),
                            tone="" if e.enabled else "muted"))
        title = f"Keys: {source.title}" if source is not None and source.title else "Keys"
        with Vertical():
            yield Static(title, id="help-title", markup=False)
            yield Static(f"Badges: {badge_legend()}; colour = worst finding, · = none", id="help-legend",
                         markup=False)
            yield RowTable([Column("key"), Column("binding id"), Column("does", grow=True)], rows,
                           empty="no keys are bound here", id="help-table")
            yield Static(f"To move a key, add  binding-id = \"keys\"  to {keymap_hint()}  "
                         f"(e.g. graph.producer = \"u\"); dim keys do nothing right now.",
                         id="help-remap", markup=False)

    def _beneath(self) -> Screen[object] | None:
        stack = self.app.screen_stack
        below = [s for s in stack if s is not self]
        return below[-1] if below else None

    def on_mount(self) -> None:
        self.query_one(RowTable).focus()

    def action_close(self) -> None:
        self.dismiss(None)
