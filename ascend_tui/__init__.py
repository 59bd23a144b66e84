"""ascend-tui: one operator graph, four kinds of evidence, walked from the symptom to the cause."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

__all__ = ["Investigation", "investigate", "watch", "__version__"]


def investigate(model: Any, inputs: Any, **kwargs: Any) -> Investigation:
    """Run `model` on `inputs` under capture and the requested checks; see `investigation.investigate`."""
    from ascend_tui.investigation import investigate as _investigate

    return _investigate(model, inputs, **kwargs)


def watch(model: Any, **kwargs: Any) -> Any:
    """Watch a user's own loop for overflow at low cost; see `live.watch.Watch`."""
    from ascend_tui.live.watch import Watch

    return Watch(model, **kwargs)


def __getattr__(name: str) -> Any:
    if name == "Investigation":
        from ascend_tui.investigation import Investigation

        return Investigation
    raise AttributeError(name)
