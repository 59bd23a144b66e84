"""`TimelineCanvas`: kernels (and host ops) in lanes under a time window, painted from columns.

Each lane keeps its rows' starts sorted and a running maximum of their ends, so painting a lane for
any window is two `searchsorted` calls over the cell edges, whatever the number of kernels. Host-op
lanes come from `Profile.host_calls`; a kernel's `host_op` column links it to the op that launched it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

from ascend_tui.fmt import duration_us, nbytes

if TYPE_CHECKING:
    from ascend_tui.evidence import MemorySample
    from ascend_tui.graph.profile import KernelTable

LABEL_W = 14
COMM_MARKS = ("hcom", "hccl", "allreduce", "allgather", "reducescatter", "broadcast", "alltoall", "send", "recv")


@dataclass(frozen=True, slots=True)
class Lane:
    """One rank's stream (or one host thread): its rows sorted by start, the starts and a running max of the
    ends (µs); a host lane's rows are host-call rows, the others kernel rows."""

    label: str
    rows: np.ndarray
    start: np.ndarray
    end_max: np.ndarray
    communication: bool
    host: bool = False


def build_host_lanes(calls: KernelTable) -> list[Lane]:
    """One lane per host thread of the host-call table (rows already in start order)."""
    if len(calls) == 0:
        return []
    start = calls.start_ns.astype(np.float64) / 1000.0
    end = start + calls.dur_us
    threads = calls.text["thread"]
    lanes = []
    for code, thread in enumerate(threads.values):
        rows = np.flatnonzero(threads.codes == code)
        if len(rows):
            tid = thread.rstrip(")").split()[-1].lstrip("(") if thread else ""
            lanes.append(Lane(f"host {tid}", rows, start[rows], np.maximum.accumulate(end[rows]), False, True))
    return lanes


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

    def __init__(self, kernels: KernelTable, memory: Sequence[MemorySample] = (), id: str | None = None,
                 calls: KernelTable | None = None) -> None:
        from ascend_tui.graph.profile import KernelTable

        super().__init__(id=id)
        self.kernels = kernels
        self.calls = calls if calls is not None else KernelTable(0)
        self.lanes = build_lanes(kernels)
        self.device_lanes = len(self.lanes)
        # the host lanes only where kernels lead to them (a host-call table from another export would not line up)
        self.host_op = kernels.ints["host_op"] if "host_op" in kernels.ints and len(self.calls) else None
        if self.host_op is not None and (self.host_op >= 0).any():
            self.lanes += build_host_lanes(self.calls)
        else:
            self.host_op = None
        self._lane_of: np.ndarray | None = None  # lane of each kernel / host-call row, made when a flow is followed
        self.came_from: int | None = None  # the kernel the last flow was followed from
        starts = [lane.start[0] for lane in self.lanes[:self.device_lanes]]
        ends = [lane.end_max[-1] for lane in self.lanes[:self.device_lanes]]
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
        """The kernel table row under the cursor (None on a host lane: see `cursor_call`)."""
        if not self.lanes or self.on_host:
            return None
        return int(self.lanes[self.lane].rows[self.pos])

    @property
    def on_host(self) -> bool:
        return bool(self.lanes) and self.lanes[self.lane].host

    @property
    def cursor_call(self) -> int | None:
        """The host-call row under the cursor, on a host lane."""
        return int(self.lanes[self.lane].rows[self.pos]) if self.on_host else None

    def _row(self) -> int | None:
        """The cursor's row in its lane's table (kernels, or host calls on a host lane)."""
        return int(self.lanes[self.lane].rows[self.pos]) if self.lanes else None

    def _table(self, lane: int | None = None) -> KernelTable:
        return self.calls if self.lanes and self.lanes[self.lane if lane is None else lane].host else self.kernels

    def _dur_of(self, row: int | None) -> float:
        return float(self._table().dur_us[row]) if row is not None else 0.0

    def linked_call(self) -> int | None:
        """The host call that launched the cursor kernel (its flow's start), if the trace says."""
        row = self.cursor_row
        if row is None or self.host_op is None or self.host_op[row] < 0:
            return None
        return int(self.host_op[row])

    def linked_kernels(self) -> np.ndarray:
        """The kernel rows the cursor host call launched, by start."""
        call = self.cursor_call
        if call is None or self.host_op is None:
            return np.zeros(0, np.int64)
        rows = np.flatnonzero(self.host_op == call)
        return rows[np.argsort(self.kernels.start_ns[rows], kind="stable")]

    def operator(self) -> str:
        """The operator under the cursor: the kernel's (its node, else its name: a profile alone has a node per
        kernel name), or the first kernel's of a host op; the caller checks it is in the graph."""
        row = self.cursor_row if not self.on_host else self._kernel_of_call()
        if row is None:
            return ""
        return self.kernels.label("node", row) or self.kernels.label("name", row)

    def go_to(self, lane: int, row: int) -> None:
        """Put the cursor on `row` of lane `lane`; the window follows it."""
        self.lane = lane
        self.pos = int(np.flatnonzero(self.lanes[lane].rows == row)[0])
        self._follow()

    def lane_of(self, row: int, host: bool) -> int:
        """The lane holding kernel (or host-call) row `row`."""
        if self._lane_of is None:
            k = np.zeros(len(self.kernels), np.int32)
            c = np.zeros(len(self.calls), np.int32)
            for i, lane in enumerate(self.lanes):
                (c if lane.host else k)[lane.rows] = i
            self._lane_of = np.concatenate([k, c])
        return int(self._lane_of[len(self.kernels) + row if host else row])

    def _kernel_of_call(self) -> int | None:
        """The kernel a host op under the cursor stands for: the one `f` came from, else its first."""
        kernels = self.linked_kernels()
        if not len(kernels):
            return None
        return self.came_from if self.came_from in kernels.tolist() else int(kernels[0])

    def follow_flow(self) -> bool:
        """From a kernel to the host op that launched it, or from a host op back to its kernel (else its first)."""
        if self.on_host:
            row = self._kernel_of_call()
            if row is None:
                return False
            self.go_to(self.lane_of(row, False), row)
            return True
        call = self.linked_call()
        if call is None:
            return False
        self.came_from = self.cursor_row
        self.go_to(self.lane_of(call, True), call)
        return True

    def land_on(self, node: str) -> bool:
        """The cursor on the first kernel of operator `node` (False when none of the timed kernels is its)."""
        if not self.device_lanes:
            return False
        for column in ("node", "name"):  # a profile alone names its operators after the kernels
            codes = self.kernels.text[column]
            code = codes.code(node)
            if code >= 0:
                break
        else:
            return False
        rows = np.flatnonzero(codes.codes == code)
        row = int(rows[np.argmin(self.kernels.start_ns[rows])])
        self.go_to(self.lane_of(row, False), row)
        return True

    def width_cells(self) -> int:
        return max(8, self.size.width - LABEL_W - 1)

    def zoom(self, factor: float) -> None:
        """Narrow (factor < 1) or widen the window, keeping the cursor kernel where it is on screen."""
        row = self._row()
        center = self._start_of(row) if row is not None else self.t0 + self.span / 2
        share = (center - self.t0) / self.span if self.span else 0.5
        self.span = min(max(1e-3, self.span * factor), max(1e-3, self.t_max - self.t_min))
        self.t0 = center - share * self.span
        self.refresh()

    def zoom_to_cursor(self) -> None:
        """The window around the cursor kernel alone (a few times its length)."""
        row = self._row()
        if row is None:
            return
        dur = max(1e-3, self._dur_of(row))
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
        at = self._start_of(self._row())
        self.lane = (self.lane + step) % len(self.lanes)
        lane = self.lanes[self.lane]
        self.pos = int(min(len(lane.rows) - 1, np.searchsorted(lane.start, at)))
        self._follow()

    def next_long(self) -> bool:
        """To the next long kernel in the lane (in the slowest 5%, at least twice the median)."""
        lane = self.lanes[self.lane] if self.lanes else None
        if lane is None:
            return False
        dur = self._table().dur_us[lane.rows[self.pos + 1:]]
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
        return float(self._table().start_ns[row]) / 1000.0 if row is not None else self.t0

    def _follow(self) -> None:
        row = self._row()
        if row is not None:
            start, dur = self._start_of(row), self._dur_of(row)
            if start < self.t0 or start + dur > self.t0 + self.span:
                self.t0 = start - self.span * 0.25 if dur < self.span else start
        self.refresh()

    def _cursor_into_window(self) -> None:
        if not self.lanes:
            return
        lane = self.lanes[self.lane]
        at = self._start_of(self._row())
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
        marks = self._marks(index, cells)
        at = 0
        for a, b, style in marks:  # the cursor reversed, its flow's other end shaded
            if a < at:
                continue
            marked = "▒" * (b - a) if style is _LINKED else text[a:b].replace("·", "▏")
            segments += [Segment(text[at:a], base), Segment(marked, style)]
            at = b
        segments.append(Segment(text[at:], base))
        return Strip(segments).adjust_cell_length(width)

    def _marks(self, index: int, cells: int) -> list[tuple[int, int, Style]]:
        """Cell ranges to mark on lane `index`: the cursor, and the other end of the cursor's flow."""
        lane = self.lanes[index]
        spans: list[tuple[float, float, Style]] = []
        table = self.calls if lane.host else self.kernels
        if index == self.lane:
            row = self._row()
            assert row is not None
            spans.append((self._start_of(row), self._dur_of(row), Style(reverse=True)))
        elif lane.host and not self.on_host and (call := self.linked_call()) is not None \
                and self.lane_of(call, True) == index:
            spans.append((float(table.start_ns[call]) / 1000.0, float(table.dur_us[call]), _LINKED))
        elif not lane.host and self.on_host:
            kernels = self.linked_kernels()
            shown = kernels[self._lane_rows(kernels) == index][:cells]
            spans += [(float(table.start_ns[k]) / 1000.0, float(table.dur_us[k]), _LINKED) for k in shown.tolist()]
        out = []
        for s, dur, style in spans:
            a = int((s - self.t0) / self.span * cells)
            b = int((s + dur - self.t0) / self.span * cells)
            a, b = max(0, min(cells, a)), max(0, min(cells, max(b, a + 1)))
            if a < cells:
                out.append((a, b, style))
        return sorted(out, key=lambda m: m[0])

    def _lane_rows(self, kernels: np.ndarray) -> np.ndarray:
        if not len(kernels):
            return np.zeros(0, np.int32)
        self.lane_of(int(kernels[0]), False)
        assert self._lane_of is not None
        return self._lane_of[kernels]


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
_LINKED = Style(bold=True)
