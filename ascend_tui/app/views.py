"""The per-check views, in the order their keys are listed: adding a view is one `CheckView` module plus one line.

A view is a `CheckView` (see `screens/check_view.py`): built as `View(investigation)`, dismissed
with the id of the operator to focus on the graph (or None).
"""

from __future__ import annotations

from ascend_tui.app.screens.check_view import CheckView
from ascend_tui.app.screens.communication import CommunicationScreen
from ascend_tui.app.screens.memory import MemoryScreen
from ascend_tui.app.screens.overflow import OverflowScreen
from ascend_tui.app.screens.precision import PrecisionScreen
from ascend_tui.app.screens.profile import ProfileScreen
from ascend_tui.app.screens.story import StoryScreen

VIEWS: list[type[CheckView]] = [StoryScreen, PrecisionScreen, OverflowScreen, MemoryScreen, ProfileScreen,
                                CommunicationScreen]


def view_by_id(view_id: str) -> type[CheckView] | None:
    """The view class registered under `view_id`, or None."""
    return next((v for v in VIEWS if v.VIEW_ID == view_id), None)
