"""Plug-ins: readers, live checks and views other packages declare as entry points, listed without importing them.

A distribution adds one by naming an object in its entry points, e.g. in pyproject.toml:

    [project.entry-points."ascend_tui.readers"]
    my_format = "my_package.reader:READER"

`ascend_tui.readers` (a `Reader`), `ascend_tui.checks` (a live check's `CheckSpec`) and
`ascend_tui.views` (a `CheckView` class). The listing reads installed metadata only; an entry's
module is imported when a file, a `--checks` name or the app needs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from ascend_tui.errors import InputError

READERS, CHECKS, VIEWS = "ascend_tui.readers", "ascend_tui.checks", "ascend_tui.views"


@dataclass(frozen=True, slots=True)
class Plugin:
    """One entry point: its name, the `module:attribute` it names and the distribution that declared it."""

    group: str
    name: str
    value: str
    dist: str = ""

    def load(self) -> Any:
        """The object the entry point names (its module is imported now); a broken plug-in is an `InputError`."""
        import importlib

        module, _, attr = self.value.partition(":")
        try:
            obj: Any = importlib.import_module(module.strip())
            for part in attr.strip().split(".") if attr.strip() else ():
                obj = getattr(obj, part)
        except Exception as exc:  # noqa: BLE001 - any failure of foreign code is reported the same way
            raise InputError(f"plug-in {self.name!r}", f"{self.group} entry point {self.value!r} of "
                                                       f"{self.dist or 'an installed package'} cannot be loaded "
                                                       f"({type(exc).__name__}: {exc})") from None
        return obj


@cache
def plugins(group: str) -> tuple[Plugin, ...]:
    """The entry points installed for `group`, by distribution then name (the first of a repeated name wins)."""
    from importlib.metadata import entry_points

    found: dict[str, Plugin] = {}
    for ep in sorted(entry_points(group=group), key=lambda e: (getattr(e.dist, "name", "") or "", e.name)):
        found.setdefault(ep.name, Plugin(group, ep.name, ep.value, getattr(ep.dist, "name", "") or ""))
    return tuple(found.values())
