"""What the profile view shows of one profile, computed once and kept while that profile is open.

At a million kernels each grouping summarises every row again (50–250 ms), the op grouping formats
thousands of rows (100+ ms) and the module tree and the timeline strip read every row too: far over
a key's 50 ms. `ProfileData` memoises them per profile (a newer investigation of the same profile,
the view opened again, a way back) and `prepare` computes the view's opening grouping, the others,
the strip and the tree in a worker thread once the profile is on screen, so `T`, `v` and the tabs
pick up rows already made. Whatever is not ready yet is computed when asked, the same way.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable

import numpy as np

from ascend_tui import fmt
from ascend_tui.app.screens.row_table import Row, Tone, cell_widths
from ascend_tui.app.widgets.timeline_strip import Segments, segments_of
from ascend_tui.checks.profile import Group, column, summarize

if TYPE_CHECKING:
    from ascend_tui.graph.opgraph import OpGraph
    from ascend_tui.graph.profile import Profile

GROUPS = ("type", "name", "module", "category")
Filters = tuple[tuple[str, str], ...]  # (column, value) drill-downs, outermost first
_KEEP = 12  # drill-downs kept (the four groupings are always kept)


def module_tree(profile: Profile) -> list[tuple[str, int, float, int]]:
    """(module path, depth, time including submodules µs, calls) in tree order, children by time; [] without modules."""
    groups = [g for g in summarize(profile.kernels, "module") if g.key]
    if not groups:
        return []
    total: dict[str, float] = {}
    calls: dict[str, int] = {}
    for g in groups:
        parts = g.key.split(".")
        for i in range(1, len(parts) + 1):
            p = ".".join(parts[:i])
            total[p] = total.get(p, 0.0) + g.total_us
            calls[p] = calls.get(p, 0) + g.count
    children: dict[str, list[str]] = {}
    for p in total:
        children.setdefault(p.rpartition(".")[0], []).append(p)
    out: list[tuple[str, int, float, int]] = []

    def walk(parent: str, depth: int) -> None:
        for child in sorted(children.get(parent, ()), key=lambda c: -total[c]):
            out.append((child, depth, total[child], calls[child]))
            walk(child, depth + 1)

    walk("", 0)
    return out


def group_row(g: Group, by: str, graph: OpGraph) -> Row:
    """One row of the ops table: a group's cells, its values to sort by, and its node when it is one op."""
    key = g.key if by == "name" and g.key in graph else None
    values = (g.key, g.count, g.total_us, g.share, g.avg_us, g.max_us, g.category, g.bound)
    cells = (g.key or "(none)", fmt.count(g.count), fmt.duration_us(g.total_us), fmt.percent(g.share),
             fmt.duration_us(g.avg_us), fmt.duration_us(g.max_us), g.category, g.bound)
    tone: Tone = "bad" if g.category == "layout" and g.share >= 0.05 else ""
    return Row(cells, key=key, tone=tone, data=values)


class ProfileData:
    """One profile's groupings (as table rows), timeline segments and module tree, each made once, thread-safe.

    Each item has its own lock: a key asking for what the worker is making waits for it, not for the rest.
    """

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self._lock = threading.Lock()  # guards the two dicts, never held while making
        self._made: dict[object, object] = {}
        self._making: dict[object, threading.Lock] = {}

    def _memo(self, key: object, make: Callable[[], object], valid: Callable[[object], bool] = lambda _: True) -> object:
        with self._lock:
            if key in self._made and valid(self._made[key]):
                return self._made[key]
            lock = self._making.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                if key in self._made and valid(self._made[key]):
                    return self._made[key]
            value = make()
            with self._lock:
                self._made[key] = value
                drills = [k for k in self._made if isinstance(k, tuple) and k[1]]
                for old in drills[:max(0, len(drills) - _KEEP)]:  # drill-downs: the most recent kept
                    del self._made[old]
            return value

    def rows(self, by: str, filters: Filters, graph: OpGraph) -> list[Row]:
        """The rows of grouping `by` within the drill-downs `filters`, largest total first (made once per graph)."""
        return self._grouped(by, filters, graph)[1]

    def widths(self, by: str, filters: Filters, graph: OpGraph) -> list[int]:
        """The widest cell of each column of those rows (a sort shows the same rows: no measuring again)."""
        return self._grouped(by, filters, graph)[2]

    def _grouped(self, by: str, filters: Filters, graph: OpGraph) -> tuple[OpGraph, list[Row], list[int]]:
        def make() -> tuple[OpGraph, list[Row], list[int]]:
            rows = [group_row(g, by, graph) for g in self._summarize(by, filters)]
            return graph, rows, cell_widths(rows, len(rows[0].cells) if rows else 0)

        return self._memo((by, filters), make, lambda v: v[0] is graph)  # type: ignore[index,return-value]

    def _summarize(self, by: str, filters: Filters) -> list[Group]:
        t = self.profile.kernels
        mask = None
        for col, value in filters:
            codes = column(t, col)
            sel = codes.codes == codes.code(value)
            mask = sel if mask is None else mask & sel
        return summarize(t, by, np.flatnonzero(mask) if mask is not None else None)

    def segments(self) -> Segments:
        """The timeline strip's segments (`segments_of`)."""
        return self._memo("segments", lambda: segments_of(self.profile))  # type: ignore[return-value]

    def tree(self) -> list[tuple[str, int, float, int]]:
        """The module tree (`module_tree`)."""
        return self._memo("tree", lambda: module_tree(self.profile))  # type: ignore[return-value]

    def prepare(self, graph: OpGraph, cancelled: Callable[[], bool] = lambda: False) -> None:
        """Make what the view opens on, then what its keys ask for next; stop early when `cancelled()`."""
        # the strip's running sums are built on its first share (the timeline tab)
        steps: list[Callable[[], object]] = [lambda: self.rows("type", (), graph), lambda: self.segments().share(0, 0)]
        steps += [lambda by=by: self.rows(by, (), graph) for by in GROUPS[1:]]
        steps.append(self.tree)
        for step in steps:
            if cancelled():
                return
            step()


_DATA: list[ProfileData] = []  # the profile opened last (a newer investigation of it keeps the profile object)


_DATA_LOCK = threading.Lock()


def data_for(profile: Profile) -> ProfileData:
    """The `ProfileData` of `profile` (made on first ask; only the latest profile's is kept)."""
    with _DATA_LOCK:
        for d in _DATA:
            if d.profile is profile:
                return d
        d = ProfileData(profile)
        _DATA[:] = [d]
        return d
