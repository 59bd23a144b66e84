"""The registry of per-check views: adding a view is one screen module plus one `register` call.

A view is a `Screen[str | None]` built as `ScreenClass(investigation)`; it dismisses with the
id of the operator to focus on the graph (or None), and never changes the investigation.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation


@dataclass(frozen=True, slots=True)
class ViewSpec:
    """One per-check view: its id, title, the key that opens it and the check whose evidence it shows."""

    id: str
    title: str
    key: str
    check: str
    screen: str  # "module:ClassName", imported when first opened

    def available(self, inv: Investigation) -> bool:
        """Shown only when the investigation holds this check's evidence."""
        if any(f.check == self.check for f in inv.findings) or self.check in inv.run.checks:
            return True
        return self.check == "memory" and bool(inv.memory_events or inv.memory_samples)

    def screen_class(self) -> Any:
        module, _, name = self.screen.partition(":")
        return getattr(importlib.import_module(module), name)


VIEWS: list[ViewSpec] = []


def register(spec: ViewSpec) -> ViewSpec:
    """Add a view (ids are unique; re-registering replaces)."""
    VIEWS[:] = [v for v in VIEWS if v.id != spec.id]
    VIEWS.append(spec)
    return spec


register(ViewSpec("overflow", "Overflow", "o", "overflow", "ascend_tui.app.screens.overflow:OverflowScreen"))
register(ViewSpec("memory", "Memory", "m", "memory", "ascend_tui.app.screens.memory:MemoryScreen"))
