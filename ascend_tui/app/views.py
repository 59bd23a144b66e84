"""The per-check views, in the order their keys are listed: adding a view is one `CheckView` module plus one line.

A view is a `CheckView` (see `screens/check_view.py`): built as `View(investigation)`, dismissed
with the id of the operator to focus on the graph (or None). Installed packages add views as entry
points (group `ascend_tui.views`, named by the view id, naming a `CheckView` class); they are listed
by name and imported the first time the app opens one or lists the views it offers.
"""

from __future__ import annotations

from ascend_tui.app.screens.check_view import CheckView
from ascend_tui.app.screens.communication import CommunicationScreen
from ascend_tui.app.screens.graph_view import GraphScreen
from ascend_tui.app.screens.memory import MemoryScreen
from ascend_tui.app.screens.overflow import OverflowScreen
from ascend_tui.app.screens.precision import PrecisionScreen
from ascend_tui.app.screens.profile import ProfileScreen
from ascend_tui.app.screens.story import StoryScreen
from ascend_tui.app.screens.timeline import TimelineScreen
from ascend_tui.app.screens.trends import TrendsScreen
from ascend_tui.errors import InputError
from ascend_tui.plugins import VIEWS as VIEWS_GROUP
from ascend_tui.plugins import plugins

VIEWS: list[type[CheckView]] = [StoryScreen, PrecisionScreen, OverflowScreen, MemoryScreen, ProfileScreen,
                                CommunicationScreen, TimelineScreen, GraphScreen, TrendsScreen]


def plugin_view_ids() -> tuple[str, ...]:
    """The ids of the views other installed packages declare (not imported)."""
    builtin = {v.VIEW_ID for v in VIEWS}
    return tuple(p.name for p in plugins(VIEWS_GROUP) if p.name not in builtin)


def all_views() -> list[type[CheckView]]:
    """The built-in views, then the plug-ins' (imported now); one that fails to load or is not a `CheckView` is
    left out here (opening it by id says why)."""
    extra = []
    for view_id in plugin_view_ids():
        try:
            extra.append(view_by_id(view_id))
        except InputError:
            continue
    return [*VIEWS, *(v for v in extra if v is not None)]


def view_by_id(view_id: str) -> type[CheckView] | None:
    """The view class registered under `view_id` (a plug-in's is imported on this first use), or None."""
    found = next((v for v in VIEWS if v.VIEW_ID == view_id), None)
    if found is not None:
        return found
    plugin = next((p for p in plugins(VIEWS_GROUP) if p.name == view_id), None)
    view = plugin.load() if plugin is not None else None
    if not (isinstance(view, type) and issubclass(view, CheckView)):
        return None
    if not view.VIEW_ID:
        view.VIEW_ID = view_id
    return view
