"""`OpList`: every operator in execution order, painted line by line so 100k rows stay instant.

A Line-API `ScrollView` (toolong's recipe): `render_line` builds one row at a time from
the investigation and keeps finished `Strip`s in an LRU cache; filtering and searching
only rebuild an integer index of visible rows.
"""

from __future__ import annotations

import operator
from itertools import compress, repeat
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from rich.cells import set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import BindingType
from textual.cache import LRUCache
from textual.content import Content
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ascend_tui.app.keys import LIST_BINDINGS
from ascend_tui.app.widgets.scrolling import set_virtual_size
from ascend_tui.app.widgets.styles import cell_style

if TYPE_CHECKING:
    from ascend_tui.graph.opgraph import OpNode
    from ascend_tui.investigation import Investigation

BADGE_CHECKS: tuple[tuple[str, str], ...] = (("precision", "P"), ("overflow", "O"), ("memory", "M"), ("profile", "T"))
BADGE_WORDS = {"profile": "time"}  # what a badge letter stands for, where the check's name says it less well


def badge_legend() -> str:
    """`P precision · O overflow · M memory · T time`: the key to the badge columns."""
    return " · ".join(f"{letter} {BADGE_WORDS.get(check, check)}" for check, letter in BADGE_CHECKS)


class OpRows:
    """The operators of one investigation as row numbers, with the text a search looks in.

    A search keeps its last few results: a needle that contains an earlier one (the same filters
    under it) only looks in that one's rows, so typing a search on narrows instead of rescanning
    every row, and a needle typed back (backspace) is answered from the cache.
    """

    KEPT = 8  # recent searches kept: at most this many row arrays and text lists (16 bytes a row each)

    def __init__(self, inv: Investigation) -> None:
        self.inv = inv
        self.ids: list[str] = list(inv.graph.execution_order())
        self.row_of: dict[str, int] = {nid: i for i, nid in enumerate(self.ids)}
        self._haystack: list[str] | None = None
        flagged = inv.flagged_nodes()
        rows = [self.row_of[n] for n in flagged if n in self.row_of]
        self.flagged = np.array(sorted(rows), dtype=np.int64)
        self._pool: tuple[tuple[bool, str], np.ndarray] | None = None  # the last module filter's rows
        self._module_codes: tuple[list[str], np.ndarray] | None = None
        # recent searches: (needle, the rows it looked in (None: all), the rows it matched, their texts)
        self._found: list[tuple[str, np.ndarray | None, np.ndarray, list[str]]] = []

    def haystack(self) -> list[str]:
        """One lower-cased `id module op_type` string per row, built on the first search."""
        if self._haystack is None:
            node = self.inv.graph.node
            self._haystack = [f"{nid}\0{(n := node(nid)).module}\0{n.op_type}".lower() for nid in self.ids]
        return self._haystack

    def select(self, *, flagged: bool, search: str, module: str | None) -> np.ndarray:
        """Row numbers that pass the flagged-only, module and search filters, in execution order."""
        rows = self._filtered(flagged, module)
        needle = search.strip().lower()
        if needle:
            rows = self._search(needle, rows)
        if rows is None:
            return np.arange(len(self.ids), dtype=np.int64)
        return rows

    def _filtered(self, flagged: bool, module: str | None) -> np.ndarray | None:
        """The flagged-only and module filters' rows (None: all), the same array while they stay the same."""
        rows = self.flagged if flagged else None
        if not module:
            return rows
        if self._pool is not None and self._pool[0] == (flagged, module):
            return self._pool[1]  # each letter of a search in a module: not a filter of every row again
        names, codes = self._modules()
        prefix = module + "."
        inside = np.array([m == module or m.startswith(prefix) for m in names], dtype=bool)
        keep = np.flatnonzero(inside[codes]) if rows is None else rows[inside[codes[rows]]]
        self._pool = ((flagged, module), keep.astype(np.int64, copy=False))
        return self._pool[1]

    def _modules(self) -> tuple[list[str], np.ndarray]:
        """Each distinct module once, and each row's as a number into them: built on the first module filter."""
        if self._module_codes is None:
            node = self.inv.graph.node
            number: dict[str, int] = {}
            codes = np.fromiter((number.setdefault(node(nid).module, len(number)) for nid in self.ids),
                                dtype=np.int32, count=len(self.ids))
            self._module_codes = (list(number), codes)
        return self._module_codes

    def _search(self, needle: str, pool: np.ndarray | None) -> np.ndarray:
        """The rows of `pool` (None: all) whose text contains `needle`; a kept search's rows where one covers it.

        A row holding `needle` holds every piece of it, so the rows an earlier needle contained in this one
        matched (among the same rows or all) are the only ones to look at; each kept search has its rows'
        texts beside them, so narrowing reads them in order, at the cost of a full scan's step a row.
        """
        hay = self.haystack()
        best: tuple[np.ndarray, list[str] | None] | None = None
        for old, among, found, texts in reversed(self._found):
            if old in needle and (among is None or among is pool):
                if among is not pool and pool is not None:  # all rows' matches, a filter under them now
                    found, texts = np.intersect1d(found, pool, assume_unique=True), None
                if old == needle:
                    return found
                if best is None or len(found) < len(best[0]):
                    best = (found, texts)
        if best is None:
            look, texts = pool, None if pool is None else list(map(hay.__getitem__, pool.tolist()))
        else:
            look, texts = best[0], best[1] if best[1] is not None else list(map(hay.__getitem__, best[0].tolist()))
        scan = hay if texts is None else texts
        hits = np.fromiter(map(operator.contains, scan, repeat(needle)), dtype=bool, count=len(scan))
        rows = np.flatnonzero(hits).astype(np.int64, copy=False) if look is None else look[hits]
        self._found = [*self._found[1 - self.KEPT:], (needle, pool, rows, list(compress(scan, hits)))]
        return rows


class OpList(ScrollView, can_focus=True, inherit_bindings=False):
    """Operators in execution order: index, evidence badges, op type (∇ for backward), module and output shapes."""

    BINDINGS: ClassVar[list[BindingType]] = list(LIST_BINDINGS)
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "op-list--cursor", "op-list--index", "op-list--op", "op-list--module", "op-list--shape",
        "op-list--none", "op-list--error", "op-list--warning", "op-list--info", "op-list--empty",
    }
    DEFAULT_CSS = """
    OpList { overflow-x: hidden; overflow-y: scroll; }
    OpList > .op-list--cursor { background: $cursor-blurred; }
    OpList:focus > .op-list--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    OpList > .op-list--index { color: $text-muted; }
    OpList > .op-list--op { color: $secondary; }
    OpList > .op-list--module { color: $foreground; }
    OpList > .op-list--shape { color: $text-muted; }
    OpList > .op-list--none { color: $text-disabled; }
    OpList > .op-list--error { color: $error; text-style: bold; }
    OpList > .op-list--warning { color: $warning; text-style: bold; }
    OpList > .op-list--info { color: $primary; }
    OpList > .op-list--empty { color: $text-muted; text-style: italic; }
    """

    cursor: reactive[int] = reactive(0, always_update=True, init=False, repaint=False)  # watch_cursor repaints the two rows

    class Highlighted(Message):
        """The cursor moved onto `node_id`; a burst of moves collapses to the last one."""

        def __init__(self, op_list: OpList, node_id: str | None) -> None:
            super().__init__()
            self.op_list = op_list
            self.node_id = node_id

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, OpList.Highlighted)

    class Selected(Message):
        """Enter (or a click) on `node_id`."""

        def __init__(self, op_list: OpList, node_id: str) -> None:
            super().__init__()
            self.op_list = op_list
            self.node_id = node_id

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.rows: OpRows | None = None
        self.shown: np.ndarray = np.zeros(0, dtype=np.int64)
        self.flagged_only = False
        self.search = ""
        self.module: str | None = None
        self._cache: LRUCache[tuple[int, int, bool], Strip] = LRUCache(1024)
        self._base: Style | None = None  # this widget's rich style, kept like the painted rows are

    # -- data ---------------------------------------------------------------------------------

    def set_investigation(self, inv: Investigation) -> None:
        """Show a (new) investigation from its first operator, filters cleared."""
        self.rows = OpRows(inv)
        self.flagged_only, self.search, self.module = False, "", None
        self._apply(None)

    def set_filters(self, *, flagged: bool | None = None, search: str | None = None,
                    module: str | None | bool = False) -> None:
        """Change any of the three filters (None / False leaves one as it is); the cursor stays on its operator."""
        if flagged is not None:
            self.flagged_only = flagged
        if search is not None:
            self.search = search
        if module is not False:
            self.module = module  # type: ignore[assignment]
        self._apply(self.current)

    def _apply(self, keep: str | None) -> None:
        if self.rows is None:
            return
        self.shown = self.rows.select(flagged=self.flagged_only, search=self.search, module=self.module)
        self._cache.clear()
        set_virtual_size(self, Size(self.scrollable_content_region.width, len(self.shown)))
        self.border_title = Content(self.title())  # plain text: a search may contain '['
        self.border_subtitle = Content(badge_legend())
        target = self._visible_row(keep) if keep is not None else None
        self.cursor = target if target is not None else 0
        self.refresh()

    def title(self) -> str:
        """`operators 12 of 100,000 · flagged · "matmul"` — what the border shows."""
        total = len(self.rows.ids) if self.rows else 0
        parts = [f"operators {len(self.shown):,} of {total:,}"]
        if self.flagged_only:
            parts.append("flagged")
        if self.module:
            parts.append(f"in {self.module}")
        if self.search:
            parts.append(f'"{self.search}"')
        return " · ".join(parts)

    @property
    def current(self) -> str | None:
        """The operator under the cursor."""
        if self.rows is None or not len(self.shown):
            return None
        return self.rows.ids[int(self.shown[min(self.cursor, len(self.shown) - 1)])]

    def _visible_row(self, node_id: str) -> int | None:
        if self.rows is None or (row := self.rows.row_of.get(node_id)) is None:
            return None
        pos = int(np.searchsorted(self.shown, row))
        return pos if pos < len(self.shown) and int(self.shown[pos]) == row else None

    def show(self, node_id: str) -> bool:
        """Put the cursor on `node_id`; False when a filter hides it."""
        pos = self._visible_row(node_id)
        if pos is None:
            return False
        self.cursor = pos
        return True

    # -- cursor -------------------------------------------------------------------------------

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, len(self.shown) - 1)) if len(self.shown) else 0

    def watch_cursor(self, old: int, new: int) -> None:
        width = self.size.width
        self.refresh(Region(0, old - int(self.scroll_y), width, 1), Region(0, new - int(self.scroll_y), width, 1))
        self.scroll_to_region(Region(0, new, 1, 1), animate=False, force=True, immediate=True)
        self.post_message(self.Highlighted(self, self.current))

    def action_cursor(self, delta: int) -> None:
        self.cursor += delta

    def action_page(self, direction: int) -> None:
        self.cursor += direction * max(1, self.scrollable_content_region.height - 1)

    def action_edge(self, end: int) -> None:
        self.cursor = len(self.shown) - 1 if end else 0

    def on_click(self, event: events.Click) -> None:
        row = int(self.scroll_y) + event.y
        if 0 <= row < len(self.shown):
            self.cursor = row
            if event.chain == 2 and (node := self.current) is not None:
                self.post_message(self.Selected(self, node))

    def on_resize(self, _event: events.Resize) -> None:
        self._cache.clear()
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.shown))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self._base = None

    # -- painting -----------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        row = int(self.scroll_y) + y
        width = self.scrollable_content_region.width
        if self.rows is None or row >= len(self.shown):
            if row == 0 and self.rows is not None:
                text = set_cell_size("  no operator matches", width)
                return Strip([Segment(text, self.get_component_rich_style("op-list--empty"))], width)
            return Strip.blank(width, self.rich_style)
        is_cursor = row == self.cursor
        key = (int(self.shown[row]), width, is_cursor)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._render_row(key[0], width, is_cursor)
            self._cache[key] = strip
        return strip

    def _render_row(self, row: int, width: int, is_cursor: bool) -> Strip:
        assert self.rows is not None
        inv = self.rows.inv
        node = inv.graph.node(self.rows.ids[row])
        # Cells carry only their own colours (partial styles); the row's background comes from the
        # widget or the cursor, applied last, so the cursor's background is never hidden by a cell's.
        def style(name: str) -> Style:
            return cell_style(self, name)

        index_w = len(str(len(self.rows.ids)))
        segments = [Segment(f"{node.index:>{index_w}} ", style("op-list--index"))]
        badges = inv.badges(node.id)
        for check, letter in BADGE_CHECKS:
            severity = badges.get(check)
            segments.append(Segment(letter if severity else "·",
                                    style(f"op-list--{severity}") if severity else style("op-list--none")))
        rest = max(0, width - index_w - 1 - len(BADGE_CHECKS))
        op_w = min(16, max(6, rest // 4))
        shape_w = 0 if rest < 48 else min(22, rest // 4)
        module_w = max(0, rest - op_w - shape_w - 3)
        op = display_op(node.op_type) if node.phase == "forward" else f"∇{display_op(node.op_type)}"
        segments.append(Segment(" " + set_cell_size(op, op_w), style("op-list--op")))
        segments.append(Segment(" " + set_cell_size(_module_label(node), module_w), style("op-list--module")))
        if shape_w:
            segments.append(Segment(" " + set_cell_size(_shapes(node), shape_w), style("op-list--shape")))
        cursor = style("op-list--cursor") if is_cursor else None
        if self._base is None:
            self._base = self.rich_style
        base = self._base
        return Strip(Segment.apply_style(segments, base, cursor)).adjust_cell_length(
            width, base + cursor if cursor else base)


def display_op(op_type: str) -> str:
    """`add` for `aten.add.Tensor`, `addmm` for `aten.addmm`: the op without namespace or overload."""
    parts = op_type.split(".")
    if len(parts) >= 2 and parts[0] in ("aten", "prims", "torch", "npu", "c10d", "_c10d_functional"):
        return parts[1]
    return parts[-1]


def _module_label(node: OpNode) -> str:
    return node.module or "(root)"


def _shapes(node: OpNode) -> str:
    out = [m for m in node.outputs if m is not None]
    if not out:
        return ""
    first = out[0]
    text = f"{_short_dtype(first.dtype)}[{','.join(str(d) for d in first.shape)}]"
    return text + (f" +{len(out) - 1}" if len(out) > 1 else "")


def _short_dtype(dtype: str) -> str:
    return {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "int64": "i64",
            "int32": "i32", "bool": "bool"}.get(dtype, dtype)

