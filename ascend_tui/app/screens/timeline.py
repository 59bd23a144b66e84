"""`TimelineScreen` (`L`): the profiled kernels in lanes per rank and stream, zoomed and panned by keyboard.

Drawn from the kernel table's columns (`start_ns`, `dur_us`, `device`, `stream`): each lane keeps its
kernels' starts sorted and a running maximum of their ends, so painting a lane for any window is two
`searchsorted` calls over the cell edges, whatever the number of kernels (1M stay well under 50 ms
a key). Memory samples on the same clock are a last lane, allocated bytes in eighths of the peak.
The cursor is one kernel; Enter dismisses with its operator so the graph view focuses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Sequence

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from ascend_tui.app.screens.check_view import CheckView
from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.fmt import duration_us, nbytes

if TYPE_CHECKING:
    from ascend_tui.evidence import MemorySample
    from ascend_tui.graph.profile import KernelTable
    from ascend_tui.investigation import Investigation

LABEL_W = 14
COMM_MARKS = ("hcom", "hccl", "allreduce", "allgather", "reducescatter", "broadcast", "alltoall", "send", "recv")


@dataclass(frozen=True, slots=True)
class Lane:
    """One rank's stream: its kernels' rows sorted by start, the starts and a running max of the ends (µs)."""

    label: str
    rows: np.ndarray
    start: np.ndarray
    end_max: np.ndarray
    communication: bool


def build_lanes(kernels: KernelTable) -> list[Lane]:
    """Lanes per (device, stream) from the columns, communication lanes marked by their kernels' names."""
    n = len(kernels)
    if n == 0:
        return []
    start = kernels.start_ns.astype(np.float64) / 1000.0
    end = start + kernels.dur_us
    device, stream = kernels.ints["device"], kernels.ints["stream"]
    key = device.astype(np.int64) * (1 << 32) + (stream.astype(np.int64) & 0xFFFFFFFF)
    order = np.lexsort((start, key))
    keys = key[order]
    cuts = np.flatnonzero(np.diff(keys)) + 1
    names = kernels.text["name"]
    ranks = len(np.unique(device))
    lanes = []
    for part in np.split(order, cuts):
        d, s = int(device[part[0]]), int(stream[part[0]])
        sample = " ".join(names.at(int(i)) for i in part[:50]).lower()
        comm = any(m in sample for m in COMM_MARKS)
        label = (f"r{d} " if ranks > 1 and d >= 0 else "") + ("comm" if comm else "stream") + (f" {s}" if s >= 0 else "")
        lanes.append(Lane(label, part, start[part], np.maximum.accumulate(end[part]), comm))
    return lanes


class TimelineCanvas(Widget, can_focus=True):
    """The lanes under a time window: one line per lane, the cursor kernel reversed; Line API, no per-kernel work."""

    DEFAULT_CSS = "TimelineCanvas { height: 1fr; }"

    def __init__(self, kernels: KernelTable, memory: Sequence[MemorySample] = (), id: str | None = None) -> None:
        super().__init__(id=id)
        self.kernels = kernels
        self.lanes = build_lanes(kernels)
        starts = [lane.start[0] for lane in self.lanes]
        ends = [lane.end_max[-1] for lane in self.lanes]
        self.t_min = float(min(starts)) if starts else 0.0
        self.t_max = float(max(ends)) if ends else 1.0
        # the memory curve: samples on the kernels' clock (µs) only; iteration-numbered ones would not line up
        timed = sorted((m for m in memory if self.t_min <= m.time <= self.t_max), key=lambda m: m.time)
        self.mem_t = np.array([m.time for m in timed], dtype=np.float64)
        self.mem_v = np.array([m.allocated_bytes for m in timed], dtype=np.float64)
        self.t0, self.span = self.t_min, max(1e-3, self.t_max - self.t_min)
        self.lane = 0
        self.pos = 0  # position of the cursor kernel in its lane
        dur = kernels.dur_us
        # "long": in the slowest 5% and at least twice the median (a profile of equal kernels has none)
        self.long_us = max(float(np.percentile(dur, 95)), 2 * float(np.median(dur))) if len(dur) else 0.0

    # -- state ------------------------------------------------------------------------------

    @property
    def cursor_row(self) -> int | None:
        """The kernel table row under the cursor."""
        if not self.lanes:
            return None
        return int(self.lanes[self.lane].rows[self.pos])

    def width_cells(self) -> int:
        return max(8, self.size.width - LABEL_W - 1)

    def zoom(self, factor: float) -> None:
        """Narrow (factor < 1) or widen the window, keeping the cursor kernel where it is on screen."""
        row = self.cursor_row
        center = self._start_of(row) if row is not None else self.t0 + self.span / 2
        share = (center - self.t0) / self.span if self.span else 0.5
        self.span = min(max(1e-3, self.span * factor), max(1e-3, self.t_max - self.t_min))
        self.t0 = center - share * self.span
        self.refresh()

    def zoom_to_cursor(self) -> None:
        """The window around the cursor kernel alone (a few times its length)."""
        row = self.cursor_row
        if row is None:
            return
        dur = max(1e-3, float(self.kernels.dur_us[row]))
        self.span = dur * 4
        self.t0 = self._start_of(row) - dur * 1.5
        self.refresh()

    def pan(self, share: float) -> None:
        self.t0 += share * self.span
        self._cursor_into_window()
        self.refresh()

    def move(self, step: int) -> None:
        """The next (or previous) kernel in the lane; the window follows it."""
        if not self.lanes:
            return
        lane = self.lanes[self.lane]
        self.pos = max(0, min(len(lane.rows) - 1, self.pos + step))
        self._follow()

    def change_lane(self, step: int) -> None:
        """Another lane; the cursor goes to its kernel nearest the current one's start."""
        if not self.lanes:
            return
        at = self._start_of(self.cursor_row)
        self.lane = (self.lane + step) % len(self.lanes)
        lane = self.lanes[self.lane]
        self.pos = int(min(len(lane.rows) - 1, np.searchsorted(lane.start, at)))
        self._follow()

    def next_long(self) -> bool:
        """To the next long kernel in the lane (in the slowest 5%, at least twice the median)."""
        lane = self.lanes[self.lane] if self.lanes else None
        if lane is None:
            return False
        dur = self.kernels.dur_us[lane.rows[self.pos + 1:]]
        hits = np.flatnonzero(dur >= self.long_us)
        if not len(hits):
            return False
        self.pos += 1 + int(hits[0])
        self._follow()
        return True

    def next_gap(self) -> bool:
        """To the kernel after the next idle gap in the lane longer than a long kernel."""
        lane = self.lanes[self.lane] if self.lanes else None
        if lane is None or self.pos + 1 >= len(lane.rows):
            return False
        gaps = lane.start[self.pos + 1:] - lane.end_max[self.pos:-1]
        hits = np.flatnonzero(gaps > max(self.long_us, 1e-3))
        if not len(hits):
            return False
        self.pos += 1 + int(hits[0])
        self._follow()
        return True

    def _start_of(self, row: int | None) -> float:
        return float(self.kernels.start_ns[row]) / 1000.0 if row is not None else self.t0

    def _follow(self) -> None:
        row = self.cursor_row
        if row is not None:
            start, dur = self._start_of(row), float(self.kernels.dur_us[row])
            if start < self.t0 or start + dur > self.t0 + self.span:
                self.t0 = start - self.span * 0.25 if dur < self.span else start
        self.refresh()

    def _cursor_into_window(self) -> None:
        if not self.lanes:
            return
        lane = self.lanes[self.lane]
        at = self._start_of(self.cursor_row)
        if not self.t0 <= at <= self.t0 + self.span:
            self.pos = int(min(len(lane.rows) - 1, np.searchsorted(lane.start, self.t0)))

    # -- painting ---------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        muted, base = Style(dim=True), Style()
        if y == 0:
            cells = self.width_cells()
            left, right = duration_us(self.t0 - self.t_min), duration_us(self.t0 + self.span - self.t_min)
            gap = max(1, cells - len(left) - len(right))
            return Strip([Segment(f"{'time':<{LABEL_W}} {left}{' ' * gap}{right}", muted)]).adjust_cell_length(width)
        index = y - 1
        if index == len(self.lanes) and len(self.mem_t):
            return self._memory_line(width)
        if index >= len(self.lanes):
            return Strip.blank(width)
        lane = self.lanes[index]
        cells = self.width_cells()
        edges = self.t0 + self.span * np.arange(cells + 1) / cells
        # busy cell: a kernel starts inside it, or one started earlier still runs at its left edge
        first = np.searchsorted(lane.start, edges[:-1], side="left")
        upto = np.searchsorted(lane.start, edges[1:], side="left")
        before = first - 1
        running = (before >= 0) & (lane.end_max[np.maximum(before, 0)] > edges[:-1])
        busy = (upto > first) | running
        glyph = "▓" if lane.communication else "█"
        text = "".join(glyph if b else "·" for b in busy)
        segments = [Segment(f"{lane.label[:LABEL_W]:<{LABEL_W}} ", muted if index != self.lane else Style(bold=True))]
        if index == self.lane and self.lanes:
            row = self.cursor_row
            assert row is not None
            s = self._start_of(row)
            a = int((s - self.t0) / self.span * cells)
            b = int((s + float(self.kernels.dur_us[row]) - self.t0) / self.span * cells)
            a, b = max(0, min(cells, a)), max(0, min(cells, max(b, a + 1)))
            segments += [Segment(text[:a], base), Segment(text[a:b].replace("·", "▏"), Style(reverse=True)),
                         Segment(text[b:], base)]
        else:
            segments.append(Segment(text, base))
        return Strip(segments).adjust_cell_length(width)


    def _memory_line(self, width: int) -> Strip:
        """Allocated memory at each cell's right edge (the last sample before it), in eighths of the peak."""
        cells = self.width_cells()
        edges = self.t0 + self.span * np.arange(1, cells + 1) / cells
        at = np.searchsorted(self.mem_t, edges, side="right") - 1
        peak = float(self.mem_v.max()) or 1.0
        level = np.where(at >= 0, np.round(self.mem_v[np.maximum(at, 0)] / peak * 8), -1).astype(int)
        text = "".join(" " if v < 0 else _EIGHTHS[v] for v in level.tolist())
        label = f"mem {nbytes(peak)}"
        return Strip([Segment(f"{label[:LABEL_W]:<{LABEL_W}} ", Style(dim=True)),
                      Segment(text, Style())]).adjust_cell_length(width)


_EIGHTHS = " ▁▂▃▄▅▆▇█"


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
        self.canvas = TimelineCanvas(timed, self.inv.memory_samples, id="timeline")
        yield Static(id="timeline-title")
        yield self.canvas
        yield Static(id="timeline-status")
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        lanes = self.canvas.lanes
        self.query_one("#timeline-title", Static).update(
            f" {len(self.canvas.kernels):,} kernels in {len(lanes)} lanes · "
            f"{duration_us(self.canvas.t_max - self.canvas.t_min)} profiled")
        self.canvas.focus()
        self._status()

    def _status(self) -> None:
        row = self.canvas.cursor_row
        if row is None:
            text = " no timed kernels"
        else:
            k = self.canvas.kernels
            node = k.label("node", row) or "no operator matched"
            text = (f" {k.label('name', row)} · {duration_us(float(k.dur_us[row]))} at "
                    f"{duration_us(self.canvas._start_of(row) - self.canvas.t_min)} · {node} · window "
                    f"{duration_us(self.canvas.span)}")
        self.query_one("#timeline-status", Static).update(text)

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
        row = self.canvas.cursor_row
        node = self.canvas.kernels.label("node", row) if row is not None else ""
        if node and node in self.inv.graph:
            self.dismiss(node)
        else:
            self.notify("this kernel matched no operator of the graph", severity="warning", markup=False)

    def action_close(self) -> None:
        self.dismiss(None)
