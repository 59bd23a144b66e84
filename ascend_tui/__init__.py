"""ascend-tui: one operator graph, four kinds of evidence, walked from the symptom to the cause."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation
    from ascend_tui.live.options import RunOptions
    from ascend_tui.live.runner import investigate
    from ascend_tui.live.watch import Watch as watch

__all__ = ["Investigation", "RunOptions", "investigate", "watch", "__version__"]

# Re-exported as they are (the same objects, with their own signatures), imported on first use so
# that `import ascend_tui` stays cheap and torch-free.
_EXPORTS = {
    "Investigation": ("ascend_tui.investigation", "Investigation"),
    "RunOptions": ("ascend_tui.live.options", "RunOptions"),
    "investigate": ("ascend_tui.live.runner", "investigate"),
    "watch": ("ascend_tui.live.watch", "Watch"),
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(name)
    import importlib

    module, attr = _EXPORTS[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
