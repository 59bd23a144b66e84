"""`Neighbours`: who made each input of the focused operator (by slot) and who reads its outputs."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from ascend_tui.app.widgets.op_list import display_op
from ascend_tui.app.widgets.styles import cell_style

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

MAX_CONSUMERS = 12


class Neighbours(Static):
    """Producers numbered by input slot (the digit before `p`) and consumers (the digit before `c`)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "neighbours--heading", "neighbours--muted", "neighbours--slot", "neighbours--error", "neighbours--warning",
        "neighbours--info",
    }
    DEFAULT_CSS = """
    Neighbours { padding: 0 1; }
    Neighbours > .neighbours--heading { text-style: bold; color: $secondary; }
    Neighbours > .neighbours--muted { color: $text-muted; }
    Neighbours > .neighbours--slot { color: $accent; text-style: bold; }
    Neighbours > .neighbours--error { color: $error; text-style: bold; }
    Neighbours > .neighbours--warning { color: $warning; text-style: bold; }
    Neighbours > .neighbours--info { color: $primary; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(Text(""), id=id, classes=classes)
        self._inv: Investigation | None = None
        self.node_id: str | None = None
        self._lines = 0  # lines of the text shown (0: nothing shown yet)

    def show(self, inv: Investigation | None, node_id: str | None, *, force: bool = False) -> None:
        """List the neighbours of `node_id`; nothing to do if they are listed already, unless `force`."""
        if not force and inv is self._inv and node_id == self.node_id and self._lines:
            return
        self._inv, self.node_id = inv, node_id
        self._paint()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted and self._inv is not None:
            self.call_later(self._paint)

    def _paint(self) -> None:
        inv, node_id = self._inv, self.node_id
        if inv is None or node_id is None or node_id not in inv.graph:
            # Blank, at the height it had (a search that empties the list would otherwise lay the screen out on
            # that letter, and again when an operator comes back: 2 of a letter's 3 layouts at 1M kernels).
            self._update(Text("\n" * max(self._lines - 1, 0)))
            return
        style = self._style
        out = Text(no_wrap=True, overflow="ellipsis")
        producers = inv.graph.producers(node_id)
        out.append("producers", style("neighbours--heading"))
        out.append("  digit, p", style("neighbours--muted"))
        if not producers:
            out.append("\n  none (a graph input)", style("neighbours--muted"))
        for e in producers:
            self._line(out, f"[{e.in_slot}] ← ", e.src, f" out {e.out_slot}" if e.out_slot else "")
        consumers = inv.graph.consumers(node_id)
        out.append("\nconsumers", style("neighbours--heading"))
        out.append("  digit, c", style("neighbours--muted"))
        if not consumers:
            out.append("\n  none (a graph output)", style("neighbours--muted"))
        for i, e in enumerate(consumers[:MAX_CONSUMERS]):
            self._line(out, f"[{i}] → ", e.dst, f" in {e.in_slot}")
        if len(consumers) > MAX_CONSUMERS:
            out.append(f"\n  … {len(consumers) - MAX_CONSUMERS} more", style("neighbours--muted"))
        self._update(out)

    def _update(self, text: Text) -> None:
        """Show `text` (never wrapped: a line each), laying the screen out only when the number of lines changes."""
        lines = text.plain.count("\n") + 1
        self.update(text, layout=lines != self._lines)
        self._lines = lines

    def _line(self, out: Text, slot: str, other: str, port: str) -> None:
        assert self._inv is not None
        node = self._inv.graph.get(other)
        out.append("\n  ")
        out.append(slot, self._style("neighbours--slot"))
        badges = self._inv.badges(other)
        worst = next((s for s in ("error", "warning", "info") if s in badges.values()), None)
        out.append(other, self._style(f"neighbours--{worst}") if worst else Style())
        if node is not None:
            out.append(f"  {display_op(node.op_type)}{port}", self._style("neighbours--muted"))

    def _style(self, name: str) -> Style:
        return cell_style(self, name)
