"""`GraphCanvas`: the laid-out operator graph under a window, painted line by line from the rows on screen.

The drawing comes from `graph/layout.py`; this widget keeps the window (`x0`, `y0`), the opened
modules and the cursor box, and styles what `graph/drawing.py`'s `paint_row` gives it: severity
colours from the findings, check letters, the story's marks, and in side-by-side mode the target
and golden panes on the same rows with one-sided nodes and edges in the accent colour.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.cache import LRUCache
from textual.strip import Strip
from textual.widget import Widget

from ascend_tui.app.widgets.op_list import BADGE_CHECKS
from ascend_tui.app.widgets.styles import cell_style
from ascend_tui.evidence import SEVERITY_RANK
from ascend_tui.graph.drawing import BLANK, EDGE, EDGE_ONLY, Box, edge_cells, paint_row
from ascend_tui.graph.hierarchy import BOTH, GOLDEN, TARGET, Hierarchy, cut, module_name
from ascend_tui.graph.layout import Layout

if TYPE_CHECKING:
    from ascend_tui.graph.opgraph import OpGraph
    from ascend_tui.investigation import Investigation

ROOT_MARK, ORIGIN_MARK = "◆", "▲"  # a story cause's operator; a finding that starts there (introduced)


class Marks:
    """What each box says besides its name: worst severity per check (modules: of everything inside) and marks."""

    def __init__(self, inv: Investigation, h: Hierarchy) -> None:
        from ascend_tui.checks.story import tell

        self.inv = inv
        self.modules: dict[str, dict[str, str]] = {}
        self.origins: set[str] = set()
        for f in inv.findings:
            if f.attribution == "introduced" and f.severity != "info":
                self.origins.add(f.node)
            if f.node not in h.pos:
                continue
            for m in ["", *h.chain(f.node)]:
                worst = self.modules.setdefault(m, {})
                if f.check not in worst or SEVERITY_RANK[f.severity] < SEVERITY_RANK[worst[f.check]]:
                    worst[f.check] = f.severity
        self.causes = {c.node for c in tell(inv.graph, inv.findings) if c.node}

    def badges(self, key: str, kind: str) -> dict[str, str]:
        return self.inv.badges(key) if kind == "op" else self.modules.get(key, {})

    def marks(self, key: str, kind: str) -> str:
        if kind != "op":
            return ""
        return (ROOT_MARK if key in self.causes else "") + (ORIGIN_MARK if key in self.origins else "")

    def worst(self, key: str, kind: str) -> str | None:
        found = self.badges(key, kind).values()
        return min(found, key=lambda s: SEVERITY_RANK[s]) if found else None


class Drawing:
    """What the view keeps per investigation while the app runs: the hierarchies, the marks, the cached layouts."""

    def __init__(self, inv: Investigation) -> None:
        self.inv = inv
        self.signature = _signature(inv)
        self.single = Hierarchy.of(inv.graph)
        self.pair: Hierarchy | None = None
        self.marks = Marks(inv, self.single)
        self.layouts: dict[int, Layout] = {}

    def layout(self, h: Hierarchy) -> Layout:
        lay = self.layouts.get(id(h))
        if lay is None:
            lay = self.layouts[id(h)] = Layout(h, lambda key, kind: len(self.text(h, key, kind)))
        return lay

    def text(self, h: Hierarchy, key: str, kind: str) -> str:
        """A box's text: the op's call name (or `▸ module ·N`), its check letters and marks."""
        if kind == "frame":
            return cut(f"▾ {module_name(key)}", 40)
        badges = self.marks.badges(key, kind)
        letters = "".join(letter for check, letter in BADGE_CHECKS if check in badges)
        tail = (letters + self.marks.marks(key, kind)).strip()
        return self.layout(h).label(key, "op" if kind == "op" else "module") + (f" {tail}" if tail else "")


def _signature(inv: Investigation) -> tuple[int, int, int]:
    return len(inv.graph), inv.graph.edge_count(), len(inv.findings)


_DRAWINGS: weakref.WeakKeyDictionary[Investigation, Drawing] = weakref.WeakKeyDictionary()


def drawing_for(inv: Investigation) -> Drawing:
    """The investigation's drawing, made on the first visit and kept (layouts included) while it is unchanged."""
    found = _DRAWINGS.get(inv)
    if found is None or found.signature != _signature(inv):
        found = _DRAWINGS[inv] = Drawing(inv)
    return found


class GraphCanvas(Widget, can_focus=True):
    """The drawing under a window (`x0`, `y0`): one pane, or target and golden side by side on the same rows."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "graph--edge", "graph--op", "graph--module", "graph--frame", "graph--label", "graph--error",
        "graph--warning", "graph--info", "graph--cursor", "graph--absent", "graph--unmatched", "graph--mark",
        "graph--divider", "graph--hot",
    }
    DEFAULT_CSS = """
    GraphCanvas { height: 1fr; }
    GraphCanvas > .graph--edge { color: $text-muted; }
    GraphCanvas > .graph--op { color: $text-muted; }
    GraphCanvas > .graph--module { color: $secondary; }
    GraphCanvas > .graph--frame { color: $text-disabled; }
    GraphCanvas > .graph--label { color: $foreground; }
    GraphCanvas > .graph--error { color: $error; text-style: bold; }
    GraphCanvas > .graph--warning { color: $warning; text-style: bold; }
    GraphCanvas > .graph--info { color: $primary; }
    GraphCanvas > .graph--cursor { background: $cursor-blurred; }
    GraphCanvas:focus > .graph--cursor {
        background: $block-cursor-background; color: $block-cursor-foreground;
    }
    GraphCanvas > .graph--absent { color: $text-disabled; }
    GraphCanvas > .graph--unmatched { color: $accent; text-style: bold; }
    GraphCanvas > .graph--mark { color: $error; }
    GraphCanvas > .graph--divider { color: $text-muted; }
    GraphCanvas > .graph--hot { color: $primary; text-style: bold; }
    """

    def __init__(self, inv: Investigation, id: str | None = None) -> None:
        super().__init__(id=id)
        self.inv = inv
        self.drawing = drawing_for(inv)
        self.single = self.drawing.single
        self.marks = self.drawing.marks
        self.side_by_side = False
        self.h = self.single
        self.opened: set[str] = set()
        self.cursor: str | None = None
        self.x0 = self.y0 = 0
        self.scene = self._layout().scene(())
        self._lines: LRUCache[tuple[Any, ...], Strip] = LRUCache(256)
        self._styles: dict[str, Style] = {}
        self._version = 0
        self._hot_key: tuple[str | None, int] | None = None
        self._hot_cells: set[tuple[int, int]] = set()

    def use(self, inv: Investigation) -> None:
        """Draw a newer investigation of the app (partial results, a re-run, follow mode), keeping what is open."""
        if inv is self.inv:
            return
        self.inv = inv
        self.drawing = drawing_for(inv)
        self.single = self.h = self.drawing.single
        self.marks = self.drawing.marks
        self.side_by_side = False
        self.opened &= set(self.single.modules)
        self.rebuild()
        self.scroll_to_cursor()

    def style(self, name: str) -> Style:
        """The colours of component `graph--{name}`, looked up once per theme."""
        found = self._styles.get(name)
        if found is None:
            found = self._styles[name] = cell_style(self, f"graph--{name}")
        return found

    # -- the drawing --------------------------------------------------------------------------

    @property
    def pair(self) -> Hierarchy | None:
        return self.drawing.pair

    def _layout(self) -> Layout:
        return self.drawing.layout(self.h)

    def text(self, key: str, kind: str) -> str:
        return self.drawing.text(self.h, key, kind)

    def rebuild(self) -> None:
        """Lay out again after a module opened or closed (cached layouts make this cheap)."""
        self.scene = self._layout().scene(self.opened)
        self._version += 1
        self._lines.clear()
        if self.cursor is not None and self.cursor not in self.scene.box_of:
            self.cursor = None
        self.refresh()

    def show_pair(self, on: bool, golden: OpGraph | None = None) -> None:
        """Draw the golden side beside the target (`golden` the first time), or the target alone again."""
        if golden is not None and self.drawing.pair is None:
            self.drawing.pair = Hierarchy.pair(self.inv.graph, golden)
        self.side_by_side = on and self.pair is not None
        self.h = self.pair if self.side_by_side and self.pair is not None else self.single
        self.rebuild()
        self.scroll_to_cursor()

    # -- the cursor -----------------------------------------------------------------------------

    @property
    def box(self) -> Box | None:
        i = self.scene.box_of.get(self.cursor) if self.cursor is not None else None
        return self.scene.boxes[i] if i is not None else None

    def visible_key(self, op: str) -> str | None:
        """The box that shows operator `op`: its own, or the closed module holding it."""
        if op not in self.h.pos:
            return None
        for m in self.h.chain(op):
            if m not in self.opened:
                return m
        return op

    def reveal(self, op: str) -> bool:
        """Open the modules holding `op` and put the cursor on it; False when the drawing does not show it."""
        if op not in self.h.pos:
            return False
        chain = self.h.chain(op)
        if not set(chain) <= self.opened:
            self.opened.update(chain)
            self.rebuild()
        self.cursor = op
        self.scroll_to_cursor()
        return True

    def place(self, key: str) -> None:
        """The cursor on box `key` (an op or a closed module), the window following it."""
        self.cursor = key
        self.scroll_to_cursor()

    def pane_width(self) -> int:
        return (self.size.width - 1) // 2 if self.side_by_side else self.size.width

    def scroll_to_cursor(self) -> None:
        b = self.box
        if b is not None and self.size.width and self.size.height:  # not laid out on screen yet: on_resize does it
            w, hgt = max(1, self.pane_width()), max(1, self.size.height)
            if b.x < self.x0 or b.x + b.w > self.x0 + w:
                self.x0 = max(0, b.x - max(2, (w - b.w) // 2)) if b.w < w else b.x
            if b.y < self.y0 or b.y + b.h > self.y0 + hgt:
                self.y0 = max(0, b.y - max(1, (hgt - b.h) // 3))
            # no blank screen below the drawing's end, nor right of it, while the cursor stays in view
            self.y0 = max(0, min(self.y0, self.scene.height - hgt, b.y))
            self.x0 = max(0, min(self.x0, self.scene.width - w, b.x))
        self._lines.clear()
        self.refresh()

    def pan(self, dx: int, dy: int) -> None:
        self.x0 = max(0, min(self.x0 + dx, self.scene.width - self.pane_width()))
        self.y0 = max(0, min(self.y0 + dy, self.scene.height - self.size.height))
        self._lines.clear()
        self.refresh()

    def neighbour(self, dx: int, dy: int) -> str | None:
        """The box nearest the cursor in a direction: left/right on its rows, up/down by rows then columns."""
        cur = self.box
        if cur is None:
            return None
        cx, cy = cur.x + cur.w / 2, cur.y + 1
        best: tuple[float, float] | None = None
        found = None
        for b in self.scene.boxes:
            if b.kind == "frame" or b.key == cur.key:
                continue
            bx = b.x + b.w / 2
            if dx:
                if not b.y <= cy < b.y + b.h or (bx - cx) * dx <= 0:
                    continue
                score = (abs(bx - cx), 0.0)
            else:
                gap = (b.y - (cur.y + cur.h)) if dy > 0 else (cur.y - (b.y + b.h))
                if gap < 0:
                    continue
                score = (float(gap), abs(bx - cx))
            if best is None or score < best:
                best, found = score, b.key
        return found

    def box_at(self, x: int, y: int) -> str | None:
        """The operator or closed module drawn at screen cell (`x`, `y`), either pane."""
        w = self.pane_width()
        if self.side_by_side and x > w:
            x -= w + 1
        cx, cy = self.x0 + x, self.y0 + y
        rows = self.scene.rows[cy] if 0 <= cy < len(self.scene.rows) else []
        hit = [self.scene.boxes[i] for i in rows if self.scene.boxes[i].x <= cx < self.scene.boxes[i].x + self.scene.boxes[i].w]
        return hit[0].key if hit else None

    # -- painting ---------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        key = (y + self.y0, self.x0, self.cursor, self.side_by_side, width, self._version, self.has_focus)
        strip = self._lines.get(key)
        if strip is None:
            strip = self._lines[key] = self._paint(y + self.y0, width)
        return strip

    def _paint(self, row: int, width: int) -> Strip:
        if not self.side_by_side:
            return Strip(self._pane(row, width, BOTH)).adjust_cell_length(width, self.rich_style)
        pane = (width - 1) // 2
        segments = [*self._pane(row, pane, TARGET), Segment("┃", self.style("divider")),
                    *self._pane(row, width - pane - 1, GOLDEN)]
        return Strip(segments).adjust_cell_length(width, self.rich_style)

    def _pane(self, row: int, width: int, side: int) -> list[Segment]:
        chars, who = paint_row(self.scene, row, self.x0, width, lambda b: self.text(b.key, b.kind), side)
        styles: dict[int, tuple[Style, Style, list[tuple[int, Style]]]] = {}
        edge, only, blank, hot_style = self.style("edge"), self.style("unmatched"), Style(), self.style("hot")
        hot = self._hot()
        cursor = self.style("cursor")
        out: list[Segment] = []
        run, run_style = "", None
        for k, (ch, w) in enumerate(zip(chars, who)):
            if w == BLANK:
                style = blank
            elif w in (EDGE, EDGE_ONLY) and (self.x0 + k, row) in hot:
                style = hot_style  # the cursor box's own edges
            elif w == EDGE:
                style = edge
            elif w == EDGE_ONLY:
                style = only
            else:
                if w not in styles:
                    styles[w] = self._box_styles(self.scene.boxes[w], side)
                border, label, spans = styles[w]
                b = self.scene.boxes[w]
                cx = self.x0 + k
                style = border
                if row == b.y + 1 and b.kind != "frame" and b.x + 1 < cx < b.x + b.w - 1:
                    style = label
                    for start, span_style in spans:
                        if cx >= b.x + 2 + start:
                            style = span_style
                if b.key == self.cursor and b.kind != "frame":
                    style = style + cursor
            if style != run_style and run:
                out.append(Segment(run, run_style))
                run = ""
            run, run_style = run + ch, style
        if run:
            out.append(Segment(run, run_style))
        return out

    def _hot(self) -> set[tuple[int, int]]:
        """The cells of the cursor box's edges, worked out once per cursor and drawing."""
        key = (self.cursor, self._version)
        if self._hot_key != key:
            self._hot_key = key
            self._hot_cells = edge_cells(self.scene, self.cursor) if self.cursor is not None else set()
        return self._hot_cells

    def _box_styles(self, b: Box, side: int) -> tuple[Style, Style, list[tuple[int, Style]]]:
        """Border, label and the styles of the check letters and marks after the label (offsets in the text)."""
        style = self.style
        if not b.sides & side:
            return style("absent"), style("absent"), []
        kind = "op" if b.kind == "op" else "module" if b.kind == "module" else "frame"
        worst = self.marks.worst(b.key, kind) if b.kind != "frame" else None
        border = style(worst) if worst in ("error", "warning") else style(kind)
        label = style("label")
        if self.side_by_side and b.sides != BOTH:
            border = label = style("unmatched")
        if b.kind == "frame":
            return border, border, []
        text = self.text(b.key, kind)
        base = self._layout().label(b.key, "op" if kind == "op" else "module")
        spans: list[tuple[int, Style]] = []
        at = len(base) + 1
        badges = self.marks.badges(b.key, kind)
        for check, letter in BADGE_CHECKS:
            if check in badges:
                spans.append((at, style(badges[check])))
                at += 1
        if at < len(text):
            spans.append((at, style("mark")))
        return border, label, spans

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._lines.clear()

    def on_resize(self) -> None:
        self.scroll_to_cursor()
