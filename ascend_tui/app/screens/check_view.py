"""The base of every per-check view: what it is called, the key that opens it and when it is offered."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, ClassVar

from textual.binding import Binding, BindingType
from textual.screen import Screen

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation


class CheckView(Screen[str | None]):
    """A screen built from an investigation that dismisses with the operator to focus on the graph (or None).

    It never changes the investigation. Subclasses set the class attributes and may
    widen `available` (the memory view also shows memory samples with no findings).
    """

    VIEW_ID: ClassVar[str] = ""
    TITLE: ClassVar[str] = ""
    KEY: ClassVar[str] = ""
    CHECK: ClassVar[str] = ""
    HOW_TO_GET: ClassVar[str] = ""  # what to open or run to get this view's evidence, said when there is none
    # kept once built: opening it again on the same investigation shows the same screen (its tab, rows and cursor)
    KEEP: ClassVar[bool] = False
    # the timeline over any view: it opens on the kernels of the operator that view's table has under its cursor
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("L", "open_timeline", "timeline", show=False, id="view.timeline-here")]

    def __init__(self, inv: Investigation) -> None:
        super().__init__()
        self.inv = inv

    @classmethod
    def available(cls, inv: Investigation | None) -> bool:
        """Offered only when the investigation holds this check's evidence."""
        if inv is None:
            return False
        return cls.CHECK in inv.run.checks or any(f.check == cls.CHECK for f in inv.findings)

    @classmethod
    def prepare(cls, inv: Investigation, cancelled: Callable[[], bool]) -> None:
        """Compute ahead, in a worker thread, what opening this view on `inv` would (once `inv` is on screen)."""

    def reusable(self) -> bool:
        """Whether a kept screen still shows all of its investigation (a view still waiting on a job says no)."""
        return True

    def action_open_timeline(self) -> None:
        open_view = getattr(self.app, "action_open_view", None)  # the investigator's; a test host may have none
        if open_view is not None:
            open_view("timeline")
