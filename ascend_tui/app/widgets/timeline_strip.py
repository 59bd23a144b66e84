"""`TimelineStrip`: one line of the profiled time, each cell compute, exposed communication or free, under a cursor.

The strip comes from the profiler's overlap track (Computing / Communication(Not Overlapped) /
Free), else from the kernels' own intervals, else from step_trace_time's per-step split laid end to
end; left/right move the cursor and the status line says what that slice of time holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from ascend_tui.app.widgets.focus_styles import FocusStyles
from ascend_tui.graph.profile import Profile

KINDS = ("compute", "communication", "free")
GLYPH = {"compute": "█", "communication": "▓", "free": "░", "": " "}


@dataclass(frozen=True, slots=True)
class Segments:
    """Intervals (µs from the start) of compute, exposed communication and free time, and where they came from."""

    start: np.ndarray
    dur: np.ndarray
    kind: np.ndarray  # index into KINDS
    source: str
    # per kind: sorted starts and ends with their running sums, built on first use (a million kernels' strip
    # asks for the time of each kind in a hundred cells; scanning every interval per cell took seconds)
    _sums: dict[int, tuple[np.ndarray, ...]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def end_us(self) -> float:
        if -1 not in self._sums:
            self._sums[-1] = (np.array([float((self.start + self.dur).max()) if len(self.start) else 0.0]),)
        return float(self._sums[-1][0][0])

    def before(self, x: np.ndarray) -> np.ndarray:
        """(kinds, len(x)): the time of each kind before each point of `x` (overlapping intervals each count)."""
        out = np.zeros((len(KINDS), len(x)))
        for k in range(len(KINDS)):
            if k not in self._sums:
                mine = self.kind == k
                starts, ends = np.sort(self.start[mine]), np.sort(self.start[mine] + self.dur[mine])
                self._sums[k] = (starts, np.concatenate([[0.0], np.cumsum(starts)]),
                                 ends, np.concatenate([[0.0], np.cumsum(ends)]))
            starts, start_sums, ends, end_sums = self._sums[k]
            ns, ne = np.searchsorted(starts, x, side="right"), np.searchsorted(ends, x, side="right")
            # the intervals begun by x give (x - start), less (x - end) for those over by then
            out[k] = (ns - ne) * x - start_sums[ns] + end_sums[ne]
        return out

    def shares(self, bounds: np.ndarray) -> np.ndarray:
        """(kinds, len(bounds) - 1): the time of each kind inside each [bounds[i], bounds[i + 1])."""
        return np.clip(np.diff(self.before(np.asarray(bounds, float)), axis=1), 0, None)

    def share(self, lo: float, hi: float) -> np.ndarray:
        """Time of each kind inside [lo, hi)."""
        return self.shares(np.array([lo, hi], float))[:, 0]


def segments_of(profile: Profile) -> Segments:
    """The best timeline the profile offers (see the module docstring)."""
    overlap = [s for s in profile.spans if s.track == "Overlap Analysis"]
    names = {"Computing": 0, "Communication(Not Overlapped)": 1, "Free": 2}
    picked = [s for s in overlap if s.name in names]
    if picked:
        return Segments(np.array([s.start_us for s in picked]), np.array([s.dur_us for s in picked]),
                        np.array([names[s.name] for s in picked], np.int64), "overlap track")
    t = profile.kernels
    ok = t.start_ns != np.iinfo(np.int64).min
    if ok.sum() >= 2:
        from ascend_tui.checks.profile import categories

        cats = categories(t)
        comm = cats.code("communication")
        start = (t.start_ns[ok] - t.start_ns[ok].min()) / 1000.0
        kind = np.where(cats.codes[ok] == comm, 1, 0)
        return Segments(start, t.dur_us[ok], kind.astype(np.int64), "kernels")
    if profile.steps:
        start, dur, kind, at = [], [], [], 0.0
        for s in profile.steps:
            for k, v in enumerate((s.computing, s.communication_not_overlapped, s.free)):
                start.append(at)
                dur.append(v)
                kind.append(k)
                at += v
        return Segments(np.array(start), np.array(dur), np.array(kind, np.int64), "step_trace_time")
    return Segments(np.zeros(0), np.zeros(0), np.zeros(0, np.int64), "none")


class TimelineStrip(FocusStyles, Widget, can_focus=True):
    """The strip; its cursor is a cell, each cell an equal slice of the profiled time."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right,l", "move(1)", "later", id="timeline.later", show=False),
        Binding("left,h", "move(-1)", "earlier", id="timeline.earlier", show=False),
        Binding("L", "move(10)", "much later", id="timeline.much-later", show=False),
        Binding("H", "move(-10)", "much earlier", id="timeline.much-earlier", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {"timeline--compute", "timeline--communication", "timeline--free",
                                             "timeline--cursor"}
    DEFAULT_CSS = """
    TimelineStrip { height: 3; background: $surface; }
    TimelineStrip > .timeline--compute { color: $accent; }
    TimelineStrip > .timeline--communication { color: $badge-warning; }
    TimelineStrip > .timeline--free { color: $text-muted; }
    TimelineStrip > .timeline--cursor { text-style: reverse; }
    TimelineStrip:focus > .timeline--cursor { text-style: reverse bold; }
    """

    cursor: reactive[int] = reactive(0)

    class Moved(Message):
        """The cursor now covers [start_us, end_us)."""

        def __init__(self, strip: TimelineStrip, start_us: float, end_us: float, shares: np.ndarray) -> None:
            super().__init__()
            self.strip = strip
            self.start_us = start_us
            self.end_us = end_us
            self.shares = shares

    def __init__(self, segments: Segments, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.segments = segments
        self._dominant: tuple[int, list[str]] = (-1, [])

    def cells(self) -> int:
        return max(1, self.size.width - 2)

    def cell_range(self, i: int) -> tuple[float, float]:
        span = self.segments.end_us or 1.0
        w = self.cells()
        return span * i / w, span * (i + 1) / w

    def dominant(self) -> list[str]:
        """The kind holding most of each cell's time ('' where nothing ran), worked out once per width."""
        w = self.cells()
        if self._dominant[0] != w:
            span = self.segments.end_us or 1.0
            shares = self.segments.shares(np.array([span * i / w for i in range(w + 1)]))
            self._dominant = (w, [KINDS[int(shares[:, i].argmax())] if shares[:, i].sum() > 0 else ""
                                  for i in range(w)])
        return self._dominant[1]

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        if y != 1 or not len(self.segments.start):
            if y == 1:
                return Strip([Segment(" no timeline in this profile".ljust(width), base)])
            return Strip.blank(width, base)
        styles = {k: base + self.get_component_rich_style(f"timeline--{k}") for k in KINDS}
        cursor = self.get_component_rich_style("timeline--cursor")
        segs = [Segment(" ", base)]
        for i, kind in enumerate(self.dominant()):
            style = styles.get(kind, base)
            if i == self.cursor:
                style = style + cursor
            segs.append(Segment(GLYPH[kind] if kind else "·", style if kind else style + Style(dim=True)))
        return Strip(segs).adjust_cell_length(width, base)

    def watch_cursor(self, value: int) -> None:
        self.refresh()
        lo, hi = self.cell_range(value)
        self.post_message(self.Moved(self, lo, hi, self.segments.share(lo, hi)))

    def action_move(self, delta: int) -> None:
        self.cursor = max(0, min(self.cells() - 1, self.cursor + delta))
