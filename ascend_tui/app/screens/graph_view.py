"""`GraphScreen` (`V`): the operator graph drawn in layers, modules closed to one box until opened.

The drawing comes from `graph/layout.py` (one cached layout per opened module), painted line by
line from the rows on screen only. The cursor is the app's: moving here moves the operator
list's cursor, and the walks (`p`, `c`, `r`, `n`, `f`, `b`, digits) are the list's own, run on the
home screen and followed here, opening the modules the walk lands in. On an msprobe compare `d`
draws the golden graph beside the target's on the same rows, the differences coloured.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from ascend_tui.app.screens.check_view import CheckView
from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.app.widgets.op_list import BADGE_CHECKS
from ascend_tui.app.widgets.styles import cell_style
from ascend_tui.evidence import SEVERITY_RANK
from ascend_tui.fmt import plural
from ascend_tui.graph.layout import BLANK, BOTH, EDGE, EDGE_ONLY, GOLDEN, TARGET, Box, Hierarchy, Layout, cut, module_name, \
    paint_row
from ascend_tui.offline.graph_pair import golden_graph, has_golden_graph

if TYPE_CHECKING:
    from ascend_tui.graph.opgraph import OpGraph
    from ascend_tui.investigation import Investigation

ROOT_MARK, ORIGIN_MARK = "◆", "▲"  # a story cause's operator; a finding that starts there (introduced)
WALKS = ("first_finding", "next_finding", "previous_finding", "producer", "producer_every_op", "consumer",
         "root_cause", "back")


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
        "graph--divider",
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
        edge, only, blank = self.style("edge"), self.style("unmatched"), Style()
        cursor = self.style("cursor")
        out: list[Segment] = []
        run, run_style = "", None
        for k, (ch, w) in enumerate(zip(chars, who)):
            if w == BLANK:
                style = blank
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


class GraphScreen(CheckView):
    """The graph drawn in layers: arrows move between boxes, Enter opens a module, `-` closes it, walks as in the list."""

    VIEW_ID = "graph"
    TITLE = "Graph"
    KEY = "V"
    CHECK = ""
    HOW_TO_GET = "open a model, an msprobe dump or a graph file: this view draws the operators it holds"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "back", id="graphview.close"),
        Binding("enter,o", "open", "open", id="graphview.open", tooltip="open the module under the cursor; on "
                "an operator, go to it in the list"),
        Binding("minus", "fold", "close module", id="graphview.fold"),
        Binding("d", "side_by_side", "golden side", id="graphview.side-by-side", show=False,
                tooltip="the golden graph of the compare beside the target, matched operators on the same rows"),
        Binding("left,h", "move(-1, 0)", "left", show=False, id="graphview.left"),
        Binding("right,l", "move(1, 0)", "right", show=False, id="graphview.right"),
        Binding("up,k", "move(0, -1)", "up", show=False, id="graphview.up"),
        Binding("down,j", "move(0, 1)", "down", show=False, id="graphview.down"),
        Binding("H", "pan(-1, 0)", "pan left", show=False, id="graphview.pan-left"),
        Binding("L", "pan(1, 0)", "pan right", show=False, id="graphview.pan-right"),
        Binding("K", "pan(0, -1)", "pan up", show=False, id="graphview.pan-up"),
        Binding("J", "pan(0, 1)", "pan down", show=False, id="graphview.pan-down"),
        # the list's walks, on the same keys (they run on the home screen and the drawing follows)
        Binding("f", "walk('first_finding')", "first finding", show=False, id="graphview.first-finding"),
        Binding("n", "walk('next_finding')", "next", id="graphview.next-finding"),
        Binding("N", "walk('previous_finding')", "previous finding", show=False, id="graphview.previous-finding"),
        Binding("p", "walk('producer')", "producer", id="graphview.producer"),
        Binding("P", "walk('producer_every_op')", "producer (every op)", show=False, id="graphview.producer-every-op"),
        Binding("c", "walk('consumer')", "consumer", show=False, id="graphview.consumer"),
        Binding("r", "walk('root_cause')", "root cause", id="graphview.root-cause"),
        Binding("b,backspace", "walk('back')", "back", show=False, id="graphview.back"),
        *[Binding(str(d), f"slot({d})", f"input slot {d}", id=f"graphview.slot-{d}", show=False) for d in range(10)],
    ]

    DEFAULT_CSS = """
    GraphScreen #graph-title { height: 1; background: $panel; }
    GraphScreen #graph-status { height: auto; max-height: 2; background: $panel; }
    """

    @classmethod
    def available(cls, inv: Investigation | None) -> bool:
        return inv is not None and any(not n.is_placeholder for n in inv.graph.nodes)

    def compose(self) -> ComposeResult:
        self.canvas = GraphCanvas(self.inv, id="graph-canvas")
        yield Static(id="graph-title", markup=False)
        yield self.canvas
        yield Static(id="graph-status", markup=False)
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        self.canvas.focus()
        main = self._main()
        op = main.ops.current if main is not None else None
        if op is None or not self.canvas.reveal(op):
            first = self.canvas.scene.boxes[0].key if self.canvas.scene.boxes else None
            if first is not None:
                self.canvas.place(first)
        self._paint()

    def _main(self) -> Any:
        return getattr(self.app, "main", None)

    # -- what the user sees besides the drawing -----------------------------------------------

    def _paint(self) -> None:
        c = self.canvas
        sc = c.scene
        opened = len(c.opened & set(c.h.modules))
        parts = [f" {c.h.ops_under(''):,} ops", f"{plural(opened, 'module')} open" if opened else "modules closed",
                 f"{ROOT_MARK} cause {ORIGIN_MARK} introduced"]
        if sc.back_edges:
            parts.append(f"{plural(sc.back_edges, 'edge')} against execution order")
        if has_golden_graph(self.inv) and not c.side_by_side:
            parts.insert(1, "d: golden side by side")
        if c.side_by_side and c.pair is not None:
            both = int((c.pair.sides == BOTH).sum())
            only_t = int((c.pair.sides == TARGET).sum())
            only_g = int((c.pair.sides == GOLDEN).sum())
            parts = [" target ┃ golden", f"{both:,} matched", f"{only_t:,} target only", f"{only_g:,} golden only",
                     *parts[1:]]
        width = max(20, self.size.width - 1)
        title = parts[0]
        for part in parts[1:]:  # whole parts only, most important first
            if len(title) + 3 + len(part) <= width:
                title += " · " + part
        self.query_one("#graph-title", Static).update(title)
        self.query_one("#graph-status", Static).update(self._status())

    def _status(self) -> str:
        c = self.canvas
        b = c.box
        if b is None:
            return " nothing under the cursor"
        side = ""
        if c.side_by_side:
            side = {BOTH: " · on both sides", TARGET: " · target only", GOLDEN: " · golden only"}[b.sides]
        if b.kind == "module":
            worst = c.marks.worst(b.key, "module")
            flagged = f" · {worst} inside" if worst else ""
            return f" module {b.key} · {plural(c.h.ops_under(b.key), 'op')}{flagged}{side} · enter opens"
        node = self.inv.graph.get(b.key)
        findings = self.inv.findings_for(b.key) if node is not None else []
        first = f" · {findings[0].severity}: {findings[0].message}" if findings else ""
        what = f"{node.op_type} in {node.module or '(model)'}" if node is not None else "golden side only"
        return f" {b.key} · {what}{side}{first}"

    # -- keys -------------------------------------------------------------------------------------

    def _moved(self) -> None:
        """Share the cursor with the list (a closed module shares its first operator), then repaint."""
        main = self._main()
        b = self.canvas.box
        if main is not None and main.inv is not None and b is not None:
            op = b.key if b.kind == "op" else self.canvas.h.first_op(b.key)
            if op is not None and op in main.inv.graph and main.ops.current != op and not main.ops.show(op):
                main.go(op, remember=False)
        self._paint()

    def action_move(self, dx: int, dy: int) -> None:
        target = self.canvas.neighbour(dx, dy)
        if target is not None:
            self.canvas.place(target)
            self._moved()

    def action_pan(self, dx: int, dy: int) -> None:
        c = self.canvas
        c.pan(dx * max(4, c.pane_width() // 2), dy * max(2, c.size.height // 2))

    def action_open(self) -> None:
        b = self.canvas.box
        if b is None:
            return
        if b.kind == "op":
            if self.inv.graph.get(b.key) is None:
                self.notify(f"{b.key} is on the golden side only: not in the target's list", markup=False)
                return
            self.dismiss(b.key)
            return
        self.canvas.opened.add(b.key)
        self.canvas.rebuild()
        first = self.canvas.h.first_op(b.key)
        key = self.canvas.visible_key(first) if first is not None else None
        self.canvas.place(key or next(iter(self.canvas.scene.box_of)))
        self._moved()

    def action_fold(self) -> None:
        """Close the module that holds the cursor; the cursor goes to its box."""
        c = self.canvas
        b = c.box
        if b is None:
            return
        module = c.h.module_of(b.key) if b.kind == "op" else c.h.parent(b.key)
        if not module:
            self.notify("nothing to close: this is the model's top level", markup=False)
            return
        c.opened.discard(module)
        c.rebuild()
        c.place(module)
        self._moved()

    def action_walk(self, name: str) -> None:
        """A walk of the list (`p`, `c`, `r`, ...), run where the list is, the drawing following where it went."""
        main = self._main()
        if main is None or main.inv is None:
            self.notify("walks need the operator list of the app", markup=False)
            return
        getattr(main, f"action_{name}")()
        op = main.ops.current
        if op is not None and not self.canvas.reveal(op):
            self.notify(f"{op} is not drawn here", markup=False)
        self._paint()

    def action_slot(self, digit: int) -> None:
        main = self._main()
        if main is not None:
            main.action_slot(digit)
            self.notify(f"input slot {digit}: p or c next", markup=False, timeout=2)

    def action_side_by_side(self) -> None:
        c = self.canvas
        if c.pair is not None:
            c.show_pair(not c.side_by_side)
            self._placed()
            return
        if not has_golden_graph(self.inv):
            self.notify("no golden side here: open TARGET_DUMP GOLDEN_DUMP (an msprobe compare) to draw both",
                        markup=False)
            return
        self.query_one("#graph-status", Static).update(" reading the golden dump …")
        self._load_golden()

    @work(thread=True, exclusive=True, group="graph-golden", exit_on_error=False, description="reading the golden graph")
    def _load_golden(self) -> None:
        graph = golden_graph(self.inv)
        self.app.call_from_thread(self._golden_loaded, graph)

    def _golden_loaded(self, graph: OpGraph) -> None:
        self.canvas.show_pair(True, graph)
        self._placed()

    def _placed(self) -> None:
        """After the drawing changed sides: the cursor on a box again (the first one if its own is gone)."""
        c = self.canvas
        main = self._main()
        op = main.ops.current if main is not None else None
        if c.box is None and not (op is not None and c.reveal(op)) and c.scene.boxes:
            c.place(c.scene.boxes[0].key)
        self._paint()

    def on_click(self, event: Any) -> None:
        """A click puts the cursor on the box under it; a double click opens it as Enter does."""
        if event.widget is not self.canvas:
            return
        key = self.canvas.box_at(event.x, event.y)
        if key is not None:
            self.canvas.place(key)
            self._moved()
            if event.chain == 2:
                self.action_open()

    def on_worker_state_changed(self, event: Any) -> None:
        from textual.worker import WorkerState

        if event.worker.group == "graph-golden" and event.state == WorkerState.ERROR:
            self.app.show_error(event.worker.error, "reading the golden graph") if hasattr(self.app, "show_error") \
                else self.notify(str(event.worker.error), severity="error", markup=False)
            self._paint()

    def action_close(self) -> None:
        self.dismiss(None)
