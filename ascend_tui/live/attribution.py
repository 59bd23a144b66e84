"""Module attribution for a recording: each module's `_call_impl` shadowed by one that names it on a stack.

Global module hooks would do the same, but any hook at all sends every module call through
torch's slow path (about 10 us a call); the shadow costs a push and a pop.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

ABSENT = object()


def attributed(call: Callable[..., Any], name: str, stack: list[str], thread: int,
                get_ident: Callable[[], int], outer: list[Any], code: Any = None) -> Callable[..., Any]:
    """`call` with `name` on the module stack while it runs (on the recording thread), and an entry on `outer`
    (the `SourceStack`'s cache of the frames above it); `code`: this recording's own copy of the wrapper's code."""

    def _call_impl(*args: Any, **kwargs: Any) -> Any:
        if get_ident() != thread:
            return call(*args, **kwargs)
        stack.append(name)
        outer.append(None)
        try:
            return call(*args, **kwargs)
        finally:
            stack.pop()
            outer.pop()

    if code is not None:
        _call_impl.__code__ = code
    return _call_impl


WRAPPER_CODE = attributed(len, "", [], 0, threading.get_ident, []).__code__


class Unshadow:
    """Puts back every module's own `_call_impl` (or its absence)."""

    def __init__(self, shadowed: list[tuple[dict[str, Any], Any]]) -> None:
        self.shadowed = shadowed

    def remove(self) -> None:
        for own, prior in self.shadowed:
            if prior is ABSENT:
                own.pop("_call_impl", None)
            else:
                own["_call_impl"] = prior
        self.shadowed = []
