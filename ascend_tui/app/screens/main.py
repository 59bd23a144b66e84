"""The graph view, home screen of the app: the operator list, the focused operator and its neighbours.

Every walk (producer, consumer, root cause, findings, step) asks the `Investigation` where to
go; this screen only moves the cursor there and repaints.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Header, Input
from textual.worker import get_current_worker

from ascend_tui.app.keys import GRAPH_BINDINGS, view_binding
from ascend_tui.app.views import VIEWS
from ascend_tui.app.widgets.breadcrumb import Breadcrumb
from ascend_tui.app.widgets.detail import Detail
from ascend_tui.app.widgets.module_tree import ModuleTree
from ascend_tui.app.widgets.neighbours import Neighbours
from ascend_tui.app.widgets.op_list import OpList, display_op
from ascend_tui.app.widgets.progress import RunProgress
from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.fmt import plural
from ascend_tui.graph.movers import moves_values
from ascend_tui.navigation import Navigator
from ascend_tui.progress import HeldFreeze, IdleCollector

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

NARROW = 110
IDLE_GC_CHECK = 0.1  # seconds between looks for a due full collection (IdleCollector)
PLACEHOLDER_NAMES = {"input": "a model input", "param": "a parameter", "buffer": "a buffer",
                     "const": "a constant (a tensor from outside the model's calls)"}
WALK_ACTIONS = frozenset({"focus_cursor", "producer", "producer_every_op", "consumer", "root_cause", "next_finding", "previous_finding",
                          "first_finding", "step_mode", "back", "search", "toggle_flagged", "module_tree", "slot"})


class MainScreen(Screen[None]):
    """Operators in execution order beside the detail of the one under the cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [*GRAPH_BINDINGS, *(view_binding(v.VIEW_ID, v.KEY, v.TITLE) for v in VIEWS)]
    AUTO_FOCUS = "OpList"

    def __init__(self) -> None:
        super().__init__(id="main")
        self.inv: Investigation | None = None
        self.nav = Navigator()
        self._slot: int | None = None
        self._chain: list[str] = []
        self._stepped = False
        self._auto_node: str | None = None  # the cursor's place when we chose it only for lack of a finding
        self._freeze = HeldFreeze()
        self._idle_gc = IdleCollector()  # full collections between keys, not inside them
        self._to_prepare: Investigation | None = None  # the investigation the views compute ahead for
        self._quiet = False  # True while the list is set up: its cursor moves paint no pane

    def compose(self) -> ComposeResult:
        yield Header()
        yield Breadcrumb(id="breadcrumb")
        with Horizontal(id="body"):
            yield ModuleTree(id="modules", classes="-hidden")
            with Vertical(id="list-pane"):
                yield OpList(id="ops")
                yield Input(placeholder="search id, module or op type; enter keeps, esc clears", id="search",
                            classes="-hidden")
            with Vertical(id="side"):
                yield Detail(id="detail")
                yield Neighbours(id="neighbours")
        yield RunProgress(id="progress")
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        # the panes follow the cursor in the handler that moved it, so the list and they are painted in one frame
        # (a Highlighted message is handled a frame later: the list, then the panes, painted apart)
        self.watch(self.ops, "cursor", self._cursor_moved, init=False)
        self._idle_gc.hold()
        self.set_interval(IDLE_GC_CHECK, self._collect_when_idle)
        if self.inv is None:
            self._repaint()

    def on_resize(self, event: events.Resize) -> None:
        narrow = event.size.width < NARROW
        if narrow != self.has_class("-narrow"):
            # a size `+`/`-` gave the list in one layout means nothing in the other: back to the layout's own
            pane = self.query_one("#list-pane")
            pane.styles.height = None
            pane.styles.width = None
        self.set_class(narrow, "-narrow")

    # -- state --------------------------------------------------------------------------------

    @property
    def ops(self) -> OpList:
        return self.query_one("#ops", OpList)

    def set_investigation(self, inv: Investigation, focus: str | None = None) -> None:
        """Show `inv`, with the cursor on `focus` (or where the user was, or the first finding).

        The navigator survives: a newer investigation of the same model (partial results, a
        re-run) keeps the focus, the way back and step mode.
        """
        self.inv = inv
        self._chain, self._slot = [], None
        self.nav.rebase(inv)
        self._quiet = True  # the panes are painted once, at the end, whatever the cursor does on the way
        try:
            self._show_investigation(inv, focus)
        finally:
            self._quiet = False
        if self.ops.current != self._auto_node:
            self._auto_node = None
        self._repaint(force=True)  # the same operator of a newer investigation may say more
        self.refresh_bindings()
        self._to_prepare = inv
        if not any(w.group == "prepare" and not w.is_finished for w in self.workers):
            self._prepare_views()

    def _show_investigation(self, inv: Investigation, focus: str | None) -> None:
        """The list on `inv`, its cursor on `focus`, where the user was or the first finding."""
        self.ops.set_investigation(inv)
        tree = self.query_one(ModuleTree)
        if not tree.has_class("-hidden"):
            tree.set_investigation(inv)
        else:
            tree.index = None
        start = focus if focus in inv.graph else self.nav.focused
        if start is not None and start == self._auto_node:
            start = None  # we put the cursor there for lack of a finding; a finding that arrived now wins
        if start is None and (first := inv.first_finding()) is not None and first.node in inv.graph:
            start = first.node
            self._auto_node = None
        if start is not None and start in inv.graph:
            self.nav.focus(start, remember=False)
            self.ops.show(start)
        elif (cur := self.ops.current) is not None:
            self.nav.focus(cur, remember=False)
            self._auto_node = cur

    @work(thread=True, group="prepare", exit_on_error=False, description="preparing the views")
    def _prepare_views(self) -> None:
        """Let each view compute ahead what opening it on the investigation shown takes, once the job is done.

        One such worker at a time: it goes on with whatever investigation was shown while it worked.
        """
        worker = get_current_worker()
        prepared = None
        while (inv := self._to_prepare) is not prepared and inv is not None:
            while self._job_busy() and not worker.is_cancelled:
                time.sleep(0.05)  # the job's own work first (its findings are what the user waits for)
            if worker.is_cancelled:  # the app is closing
                return
            if self._to_prepare is not inv:
                continue
            for view in VIEWS:
                if view.available(inv):
                    view.prepare(inv, lambda: worker.is_cancelled or self._to_prepare is not inv)
            build_ahead = getattr(self.app, "build_views_ahead", None)  # the investigator's; a test host may have none
            if build_ahead is not None and not worker.is_cancelled and self._to_prepare is inv:
                self.app.call_from_thread(build_ahead, inv)
            prepared = inv
        # What is alive now (the modules, the graph, the prepared rows: 150k+ objects) stays alive while it is on
        # screen; the collector's full passes walked all of it, 50-90 ms inside a key press, several a minute.
        self._freeze.refreeze()

    def on_unmount(self) -> None:
        self._freeze.release()  # the process goes on (an embedding script, the tests) with its collector as it was
        self._idle_gc.release()

    def _collect_when_idle(self) -> None:
        self._idle_gc.collect_if_due(self._app_quiet)

    def _app_quiet(self) -> bool:
        """Nothing waits to be handled or painted: no message queued anywhere, the screen shown painted."""
        app = self.app
        screen = app.screen
        if (app._batch_count or screen._layout_required or screen._repaint_required or screen._scroll_required
                or screen._recompose_required or screen._dirty_widgets):
            return False
        return app._message_queue.empty() and all(node._message_queue.empty() for node in app._registry)

    def _job_busy(self) -> bool:
        try:
            return bool(getattr(self.app, "busy", False))
        except RuntimeError:  # the workers changed while read from this thread: ask again
            return True

    def _repaint(self, *, force: bool = False) -> None:
        """The panes on the operator under the cursor; each leaves itself as it is if it shows that one already."""
        node = self.ops.current
        self.query_one(Detail).show(self.inv, node, force=force)
        self.query_one(Neighbours).show(self.inv, node, force=force)
        self._paint_breadcrumb()

    def _paint_breadcrumb(self) -> None:
        here = self.ops.current
        trail = self.nav.trail(16)
        if trail and trail[-1] == here:
            trail.pop()
        mode = []
        rows = self.ops.rows
        if self.nav.stepping and rows is not None and here is not None:
            # the number the list and the detail show for this op (`#11`), out of the rows stepped through
            index = self.inv.graph.node(here).index if self.inv is not None and here in self.inv.graph else -1
            mode.append(f"STEP #{index if index >= 0 else rows.row_of[here]} of {len(rows.ids)}")
        if self._slot is not None:
            mode.append(f"slot {self._slot}")
        self.query_one(Breadcrumb).show(trail, here, " · ".join(mode))

    def _cursor_moved(self) -> None:
        if self._quiet:
            return
        if self.ops.current != self._auto_node:
            self._auto_node = None  # the user moved: partial results keep their place from now on
        self._repaint()

    @on(OpList.Selected)
    def _selected(self, event: OpList.Selected) -> None:
        self.go(event.node_id)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Walks are dimmed (None) until something is loaded; the step keys exist only in step mode."""
        if action in WALK_ACTIONS and self.inv is None:
            return None
        if action == "step" and not self.nav.stepping:
            return False
        return True

    # -- moving -------------------------------------------------------------------------------

    def _commit(self) -> str | None:
        """Make the operator under the cursor the focus (remembered), so `back` can return to it."""
        cur = self.ops.current
        if self.inv is not None and cur is not None and cur != self.nav.focused:
            self.nav.focus(cur)
        return cur

    def go(self, node_id: str, *, remember: bool = True) -> bool:
        """Focus `node_id` and move the cursor there, dropping filters that hide it."""
        if self.inv is None or node_id not in self.inv.graph:
            self.notify(f"{node_id} is not an operator of this graph", severity="warning", markup=False)
            return False
        node = self.inv.graph.node(node_id)
        if node.is_placeholder:
            self.notify(f"{node_id} is {PLACEHOLDER_NAMES.get(node.kind, node.kind)}, not an operator: "
                        "nothing produced it inside the model",
                        markup=False)
            return False
        self._commit()
        self.nav.focus(node_id, remember=remember)
        if not self.ops.show(node_id):
            self.ops.set_filters(flagged=False, search="", module=None)
            self.query_one("#search", Input).value = ""
            self.ops.show(node_id)
        self._repaint()
        return True

    # -- panes ------------------------------------------------------------------------------

    def action_detail_page(self, direction: int) -> None:
        """Scroll the detail pane a page while the list keeps the focus."""
        self.query_one(Detail).page(direction)

    def action_zoom(self) -> None:
        """Maximise the focused pane (the list unless the detail has the focus); again to restore."""
        if self.maximized is not None:
            self.minimize()
            return
        focused = self.focused if isinstance(self.focused, (Detail, OpList)) else self.ops
        self.maximize(focused, container=False)

    def action_resize_list(self, step: int) -> None:
        """Give the list more (or less) of the screen: rows when stacked at 80 columns, columns side by side."""
        body = self.query_one("#body")
        pane = self.query_one("#list-pane")
        # a share of the body, not a count of cells, so the list keeps its proportion when the terminal resizes
        if self.has_class("-narrow"):
            size = max(5, min(body.size.height - 5, pane.size.height + 2 * step))
            pane.styles.height = f"{100 * (size + 0.5) / max(1, body.size.height):.2f}%"  # +0.5: cells are floored
        else:
            size = max(30, min(body.size.width - 30, pane.size.width + 4 * step))
            pane.styles.width = f"{100 * (size + 0.5) / max(1, body.size.width):.2f}%"

    def action_focus_cursor(self) -> None:
        if (cur := self.ops.current) is not None:
            self.go(cur)

    def action_slot(self, digit: int) -> None:
        self._slot = digit
        self._paint_breadcrumb()

    def _take_slot(self) -> int:
        slot, self._slot = self._slot, None
        return slot or 0

    def action_producer(self) -> None:
        """Go to the producer of the chosen input that computes, stepping over views, reshapes and copies."""
        self._producer(skip_moves=True)

    def action_producer_every_op(self) -> None:
        """Go to the producer of the chosen input, even one that only moves values."""
        self._producer(skip_moves=False)

    def _producer(self, *, skip_moves: bool) -> None:
        assert self.inv is not None
        slot = self._take_slot()
        node = self._commit()
        skipped: list[str] = []
        if node is None:
            target = None
        elif skip_moves:
            target, skipped = self.inv.producer_that_computes(slot, node)
        else:
            target = self.inv.step_into_producer(slot, node)
        if target is None:
            inputs = len(self.inv.graph.node(node).inputs) if node else 0
            why = "it has no inputs" if not inputs else f"input {slot} has no producer" if slot < inputs \
                else f"it has {inputs} inputs (0-{inputs - 1})"
            self.notify(f"no producer: {why}", severity="warning", markup=False)
            self._paint_breadcrumb()
            return
        if self.go(target) and skipped:
            self._note_skipped(skipped)

    def _note_skipped(self, skipped: list[str]) -> None:
        assert self.inv is not None
        names = ", ".join(display_op(self.inv.graph.node(n).op_type) for n in skipped)
        self.notify(f"stepped over {plural(len(skipped), 'op')} that only move values ({names}); "
                    f"P steps through every op", markup=False, timeout=3)

    def action_consumer(self) -> None:
        assert self.inv is not None
        index = self._take_slot()
        node = self._commit()
        consumers = self.inv.graph.consumers(node) if node else []
        if index >= len(consumers):
            why = "nothing reads its outputs" if not consumers else f"it has {len(consumers)} consumers"
            self.notify(f"no consumer {index}: {why}", severity="warning", markup=False)
            self._paint_breadcrumb()
            return
        self.go(consumers[index].dst)

    def action_root_cause(self) -> None:
        """Jump to the focused finding's root cause; pressed again, walk its chain one hop at a time."""
        assert self.inv is not None
        node = self._commit()
        if node in self._chain and node != self._chain[0] and self._chain[-1] != node:
            self._hop(node)
            return
        rc = self.inv.trace_root_cause(node) if node is not None else None
        if rc is None:
            if node in self._chain:
                self.notify("end of the root-cause chain", markup=False)
            else:
                self.notify("no root cause recorded for this operator", severity="warning", markup=False)
            return
        self._chain = [c.node for c in rc.chain if c.node in self.inv.graph]
        if rc.node in self.inv.graph and rc.node not in self._chain:
            self._chain.append(rc.node)
        cause = self.inv.graph.get(rc.node)
        if rc.node != node and cause is not None and not cause.is_placeholder:
            self.go(rc.node)
            self.notify(f"root cause: {rc.reason}", markup=False)
            return
        if node in self._chain:
            self._hop(node)
        moved = self.ops.current
        if moved != node:  # the toast names where the cursor went, not only the op it left
            self.notify(f"{node} is the root cause — {rc.reason}; r walked its chain upstream to {moved} "
                        "(b goes back)", markup=False)
        else:
            self.notify(f"root cause: {rc.node} — {rc.reason}", markup=False)

    def _hop(self, node: str) -> None:
        """One step further along the active root-cause chain (towards the source), over ops that only move values."""
        assert self.inv is not None
        rest = self._chain[self._chain.index(node) + 1:]
        if not rest:
            self.notify("end of the root-cause chain", markup=False)
            return
        graph = self.inv.graph
        skipped: list[str] = []
        while len(rest) > 1 and moves_values(graph.node(rest[0])) and not graph.node(rest[1]).is_placeholder:
            skipped.append(rest.pop(0))
        nxt = graph.node(rest[0])
        if nxt.is_placeholder:
            self.notify(f"the chain ends at {nxt.id}, {PLACEHOLDER_NAMES.get(nxt.kind, nxt.kind)}", markup=False)
            return
        if self.go(nxt.id) and skipped:
            self._note_skipped(skipped)

    def _to_finding(self, step: int | None) -> None:
        assert self.inv is not None
        node = self._commit()
        f = self.inv.first_finding() if step is None else self.inv.next_finding(node, step)
        if f is None:
            self.notify("no findings in this investigation", markup=False)
            return
        self.go(f.node)

    def action_next_finding(self) -> None:
        self._to_finding(1)

    def action_previous_finding(self) -> None:
        self._to_finding(-1)

    def action_first_finding(self) -> None:
        self._to_finding(None)

    def action_step_mode(self) -> None:
        """Toggle step mode: left/right walk execution order one operator at a time, filters off."""
        self.nav.stepping = not self.nav.stepping
        self._stepped = False
        if self.nav.stepping and (self.ops.flagged_only or self.ops.search or self.ops.module):
            self.ops.set_filters(flagged=False, search="", module=None)
            self.query_one("#search", Input).value = ""
        self._paint_breadcrumb()
        self.refresh_bindings()

    def action_step(self, delta: int) -> None:
        assert self.inv is not None
        node = self._commit()
        target = self.inv.step(delta, node)
        if target is None or target == node:
            self.notify("start of the run" if delta < 0 else "end of the run", markup=False)
            return
        self.go(target, remember=not self._stepped)
        self._stepped = True

    def action_back(self) -> None:
        assert self.inv is not None
        self._commit()
        node = self.nav.back()
        if node is None:
            self.notify("nowhere to go back to", markup=False)
            return
        if not self.ops.show(node):
            self.ops.set_filters(flagged=False, search="", module=None)
            self.ops.show(node)
        self._repaint()

    # -- filters ------------------------------------------------------------------------------

    def action_toggle_flagged(self) -> None:
        self.ops.set_filters(flagged=not self.ops.flagged_only)
        self._repaint()

    def action_search(self) -> None:
        search = self.query_one("#search", Input)
        search.remove_class("-hidden")
        search.focus()

    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        self.ops.set_filters(search=event.value)
        self._repaint()

    @on(Input.Submitted, "#search")
    def _search_submitted(self, _event: Input.Submitted) -> None:
        self.ops.focus()

    def clear_search(self) -> bool:
        """Close the search box and drop its filter; False when there was nothing to clear."""
        search = self.query_one("#search", Input)
        if search.has_class("-hidden") and not self.ops.search:
            return False
        search.value = ""
        search.add_class("-hidden")
        self.ops.set_filters(search="")
        self.ops.focus()
        self._repaint()
        return True

    def escape(self) -> bool:
        """Undo the innermost temporary state (search, slot digit, step mode); False when none was active."""
        if self._slot is not None:
            self._slot = None
            self._paint_breadcrumb()
            return True
        if self.clear_search():
            return True
        if self.nav.stepping:
            self.action_step_mode()
            return True
        return False

    def action_module_tree(self) -> None:
        tree = self.query_one(ModuleTree)
        if tree.has_class("-hidden"):
            if tree.index is None and self.inv is not None:
                tree.set_investigation(self.inv)
            tree.remove_class("-hidden")
            tree.focus()
        else:
            tree.add_class("-hidden")
            self.ops.focus()

    @on(ModuleTree.ModuleSelected)
    def _module_selected(self, event: ModuleTree.ModuleSelected) -> None:
        self.show_module(event.module)

    def show_module(self, module: str) -> None:
        """List only `module`'s operators (its subtree), cursor on the first."""
        self.ops.set_filters(module=module)
        self.ops.focus()
        self._repaint()
