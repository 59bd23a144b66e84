"""`GraphScreen` (`V`): the operator graph drawn in layers, modules closed to one box until opened.

The drawing comes from `graph/layout.py` (one cached layout per opened module), painted line by
line from the rows on screen only. The cursor is the app's: moving here moves the operator
list's cursor, and the walks (`p`, `c`, `r`, `n`, `f`, `b`, digits) are the list's own, run on the
home screen and followed here, opening the modules the walk lands in. On an msprobe compare `d`
draws the golden graph beside the target's on the same rows, the differences coloured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from ascend_tui.app.screens.check_view import CheckView
from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.app.widgets.graph_canvas import ORIGIN_MARK, ROOT_MARK, GraphCanvas
from ascend_tui.fmt import plural
from ascend_tui.graph.hierarchy import BOTH, GOLDEN, TARGET
from ascend_tui.offline.graph_pair import golden_graph, has_golden_graph

if TYPE_CHECKING:
    from ascend_tui.graph.opgraph import OpGraph
    from ascend_tui.investigation import Investigation


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
        Binding("R", "app.story_cause", "cause in story", show=False, id="graphview.story-cause"),
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
        self.set_interval(0.5, self._sync)  # newer results while the view is open are drawn within half a second
        self.canvas.focus()
        main = self._main()
        op = main.ops.current if main is not None else None
        if op is None or not self.canvas.reveal(op):
            first = self.canvas.scene.boxes[0].key if self.canvas.scene.boxes else None
            if first is not None:
                self.canvas.place(first)
        self._paint()

    def on_screen_resume(self) -> None:
        """Back from a screen on top (the story, help): the list's cursor may have moved there; draw it here too."""
        main = self._main()
        op = main.ops.current if main is not None else None
        box = self.canvas.box
        here = box.key if box is not None and box.kind == "op" else None
        if op is not None and op != here and not (box is not None and box.kind == "module"
                                                  and op in self.canvas.h.pos and box.key in self.canvas.h.chain(op)):
            self.canvas.reveal(op)
        self._paint()

    def on_resize(self) -> None:
        self._paint()  # the title's parts refitted to the new width

    def _main(self) -> Any:
        return getattr(self.app, "main", None)

    # -- what the user sees besides the drawing -----------------------------------------------

    def _paint(self) -> None:
        c = self.canvas
        sc = c.scene
        opened = sum(1 for m in c.opened if m in c.h.code)
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

    def _sync(self) -> None:
        """Follow the app to a newer investigation (partial results, a re-run, follow mode): draw that one."""
        main = self._main()
        if main is not None and main.inv is not None and main.inv is not self.inv:
            self.inv = main.inv
            self.canvas.use(main.inv)
            if self.canvas.box is None and (op := main.ops.current) is not None:
                self.canvas.reveal(op)
            self._paint()

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
        self._sync()
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
        self._sync()
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
