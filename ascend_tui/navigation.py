"""`Navigator`: where an interface is on the graph — the focused operator, the way back, step mode.

It belongs to the interface that moves it (each app screen, a CLI walk), never to the
`Investigation`, so replacing the investigation with a newer one (partial results, a re-run
of the checks) keeps the user's place and their way back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

HISTORY = 256


class Navigator:
    """The focused operator, the history of where the user came from, and step-mode position."""

    def __init__(self) -> None:
        self.focused: str | None = None
        self.history: list[str] = []
        self.stepping = False

    def focus(self, node: str, *, remember: bool = True) -> str:
        """Make `node` the focus, remembering the previous one unless told not to."""
        if remember and self.focused is not None and self.focused != node:
            self.history.append(self.focused)
            del self.history[:-HISTORY]
        self.focused = node
        return node

    def back(self) -> str | None:
        """The previous focus (now focused again), or None when there is nowhere to go back to."""
        if not self.history:
            return None
        self.focused = self.history.pop()
        return self.focused

    def rebase(self, inv: Investigation) -> None:
        """Keep only the places that still exist in `inv` (a re-run may name operators differently)."""
        self.history = [n for n in self.history if n in inv.graph]
        if self.focused is not None and self.focused not in inv.graph:
            self.focused = self.history.pop() if self.history else None

    def trail(self, n: int = 16) -> list[str]:
        """The last `n` places, oldest first, ending with the focus."""
        out = list(self.history[-n:])
        if self.focused is not None:
            out.append(self.focused)
        return out
