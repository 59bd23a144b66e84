"""`TimelineScreen` (`L`): the profiled kernels in lanes per rank and stream, zoomed and panned by keyboard.

Drawn from the kernel table's columns (`start_ns`, `dur_us`, `device`, `stream`): each lane keeps its
kernels' starts sorted and a running maximum of their ends, so painting a lane for any window is two
`searchsorted` calls over the cell edges, whatever the number of kernels (1M stay well under 50 ms
a key). The host ops (`Profile.host_calls`) are lanes per thread under them, and the memory samples on
the same clock a last lane, allocated bytes in eighths of the peak. The cursor is one kernel or host op:
its flow's other end (a kernel's launching host op, a host op's kernels) is marked, `f` jumps there.
The view opens on the kernels of the operator the screen below had selected, and every move puts the
cursor's operator in the app's navigator, so the graph view shows it on return; Enter focuses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from ascend_tui.app.screens.check_view import CheckView
from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.app.widgets.timeline_canvas import COMM_MARKS, LABEL_W, Lane, TimelineCanvas, build_host_lanes, \
    build_lanes
from ascend_tui.fmt import duration_us

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

__all__ = ["COMM_MARKS", "LABEL_W", "Lane", "TimelineCanvas", "TimelineScreen", "build_host_lanes", "build_lanes"]

class TimelineScreen(CheckView):
    """Kernels in lanes per rank and stream; `+`/`-` zoom, `h`/`l` pan, `n` next long kernel, `g` next gap."""

    VIEW_ID = "timeline"
    TITLE = "Timeline"
    KEY = "L"
    CHECK = "profile"
    HOW_TO_GET = ("open a profiler folder (*_ascend_pt, PROF_*), kernel_details.csv or a trace with kernel start "
                  "times, or re-run with x and the profile check")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "back", id="timeline.back"),
        Binding("plus,equals_sign", "zoom(0.5)", "zoom in", id="timeline.zoom-in"),
        Binding("minus", "zoom(2.0)", "zoom out", id="timeline.zoom-out"),
        Binding("h", "pan(-0.25)", "pan left", id="timeline.pan-left"),
        Binding("l", "pan(0.25)", "pan right", id="timeline.pan-right"),
        Binding("left", "move(-1)", "previous kernel", show=False, id="timeline.previous"),
        Binding("right", "move(1)", "next kernel", show=False, id="timeline.next"),
        Binding("j,down", "lane(1)", "next lane", show=False, id="timeline.lane-down"),
        Binding("k,up", "lane(-1)", "previous lane", show=False, id="timeline.lane-up"),
        Binding("n", "next_long", "next long kernel", id="timeline.next-long"),
        Binding("g", "next_gap", "next gap", id="timeline.next-gap"),
        Binding("z", "zoom_kernel", "zoom to kernel", id="timeline.zoom-kernel"),
        Binding("f", "flow", "flow: host op <-> kernel", id="timeline.flow"),
        Binding("enter", "choose", "focus op", id="timeline.choose"),
    ]

    @classmethod
    def available(cls, inv: Investigation | None) -> bool:
        return inv is not None and inv.profile is not None and len(inv.profile.kernels) > 0 \
            and bool((inv.profile.kernels.start_ns >= 0).any())

    def compose(self) -> ComposeResult:
        assert self.inv.profile is not None
        kernels = self.inv.profile.kernels
        timed = kernels.take(kernels.start_ns >= 0) if (kernels.start_ns < 0).any() else kernels
        self.canvas = TimelineCanvas(timed, self.inv.memory_samples, id="timeline",
                                     calls=self.inv.profile.host_calls)
        yield Static(id="timeline-title")
        yield self.canvas
        yield Static(id="timeline-status")
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        canvas = self.canvas
        hosts = len(canvas.lanes) - canvas.device_lanes
        self.query_one("#timeline-title", Static).update(
            f" {len(canvas.kernels):,} kernels in {canvas.device_lanes} lanes"
            + (f" · {len(canvas.calls):,} host ops in {hosts} lanes" if hosts else "")
            + f" · {duration_us(canvas.t_max - canvas.t_min)} profiled")
        selected = self._selected_below()
        if selected and not canvas.land_on(selected):
            self.notify(f"{selected} ran no timed kernel: the timeline opens at the start", markup=False)
        canvas.focus()
        self._status(sync=False)

    def _selected_below(self) -> str | None:
        """The operator the screen under this one has selected: the graph view's focus, or a view's table row."""
        stack = self.app.screen_stack
        below = stack[stack.index(self) - 1] if self in stack and stack.index(self) > 0 else None
        if below is None:
            return None
        nav = getattr(below, "nav", None)  # the graph view (MainScreen) owns the app's navigator
        if nav is not None:
            ops = getattr(below, "ops", None)
            return getattr(ops, "current", None) or nav.focused
        from ascend_tui.app.screens.row_table import RowTable

        tables = list(below.query(RowTable))
        table = next((t for t in tables if t.has_focus), tables[0] if tables else None)
        row = table.current if table is not None else None
        return row.key if row is not None and row.key in self.inv.graph else None

    def _sync(self) -> None:
        """Put the cursor's operator in the app's navigator (the shared cursor the graph view shows)."""
        node = self.canvas.operator()
        main = getattr(self.app, "main", None)
        if node and node in self.inv.graph and main is not None and getattr(main, "nav", None) is not None:
            main.nav.focus(node, remember=False)

    def _status(self, sync: bool = True) -> None:
        canvas = self.canvas
        row, call = canvas.cursor_row, canvas.cursor_call
        if row is None and call is None:
            text = " no timed kernels"
        elif row is None:
            c = canvas.calls
            launched = len(canvas.linked_kernels())
            text = (f" host {c.label('name', call)} · {duration_us(float(c.dur_us[call]))} at "
                    f"{duration_us(canvas._start_of(call) - canvas.t_min)} · {c.label('thread', call)} · "
                    + (f"launched {launched} kernel{'s' if launched != 1 else ''} (f)" if launched
                       else "launched no kernel") + f" · window {duration_us(canvas.span)}")
        else:
            k = canvas.kernels
            node = k.label("node", row) or "no operator matched"
            host = canvas.linked_call()
            by = f" · from {canvas.calls.label('name', host)} (f)" if host is not None else ""
            text = (f" {k.label('name', row)} · {duration_us(float(k.dur_us[row]))} at "
                    f"{duration_us(canvas._start_of(row) - canvas.t_min)} · {node}{by} · window "
                    f"{duration_us(canvas.span)}")
        self.query_one("#timeline-status", Static).update(text)
        if sync:
            self._sync()

    def action_flow(self) -> None:
        if not self.canvas.follow_flow():
            what = "this host op launched no kernel" if self.canvas.on_host else \
                "no flow leads from a host op to this kernel"
            self.notify(what, markup=False)
        self._status()

    def action_zoom(self, factor: float) -> None:
        self.canvas.zoom(factor)
        self._status()

    def action_zoom_kernel(self) -> None:
        self.canvas.zoom_to_cursor()
        self._status()

    def action_pan(self, share: float) -> None:
        self.canvas.pan(share)
        self._status()

    def action_move(self, step: int) -> None:
        self.canvas.move(step)
        self._status()

    def action_lane(self, step: int) -> None:
        self.canvas.change_lane(step)
        self._status()

    def action_next_long(self) -> None:
        if not self.canvas.next_long():
            self.notify("no longer kernel after this one in the lane", markup=False)
        self._status()

    def action_next_gap(self) -> None:
        if not self.canvas.next_gap():
            self.notify("no idle gap after this kernel in the lane", markup=False)
        self._status()

    def action_choose(self) -> None:
        node = self.canvas.operator()
        if node and node in self.inv.graph:
            self.dismiss(node)
        else:
            self.notify("this kernel matched no operator of the graph", severity="warning", markup=False)

    def action_open_timeline(self) -> None:
        """Already here."""

    def action_close(self) -> None:
        main = getattr(self.app, "main", None)
        nav = getattr(main, "nav", None)
        if nav is not None and nav.focused and main.ops.current != nav.focused:  # the graph view shows where we were
            target, nav.focused = nav.focused, main.ops.current  # `b` there leads back to where the list stood
            main.go(target)
        self.dismiss(None)
