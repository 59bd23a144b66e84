"""`StepChart`: one per-step series as block columns with a labelled y axis (log when it spans decades), step
numbers on the x axis, non-finite steps drawn as `×` and the first anomalous step marked `▲`.

Drawn with Rich text like the other charts (`widgets/charts.py`): it fits 80 columns and takes
its colours from the theme through component classes.
"""

from __future__ import annotations

import math
from typing import ClassVar

from rich.text import Text
from textual.widgets import Static

from ascend_tui.app.widgets.styles import cell_style
from ascend_tui.checks.trends import Anomaly
from ascend_tui.evidence import StepSeries
from ascend_tui.fmt import duration_us, magnitude

_EIGHTHS = " ▁▂▃▄▅▆▇█"
LOG_DECADES = 2.0  # a positive series spanning at least this many decades is drawn on a log axis
MAX_STEP_WIDTH = 6  # columns one step gets when there are few
X_TITLE = " step"


def use_log(values: list[float]) -> bool:
    """Log scale when every finite value is positive and they span `LOG_DECADES` decades or more."""
    finite = [v for v in values if math.isfinite(v)]
    return bool(finite) and min(finite) > 0 and math.log10(max(finite) / min(finite)) >= LOG_DECADES


def columns_of(n: int, width: int) -> list[tuple[int, int]]:
    """For each chart column, the range [a, b) of series positions it shows (a step stretched over several columns
    when there are few steps, several steps squeezed into one when there are many)."""
    if n <= 0:
        return []
    if n <= width:
        per = max(1, min(MAX_STEP_WIDTH, width // n))
        return [(i, i + 1) for i in range(n) for _ in range(per)]
    return [(c * n // width, max((c + 1) * n // width, c * n // width + 1)) for c in range(width)]


class StepChart(Static):
    """A per-step series: title, y labels top and bottom, one block column per step, the x axis in step numbers."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"step-chart--bar", "step-chart--axis", "step-chart--bad",
                                             "step-chart--mark", "step-chart--title"}
    DEFAULT_CSS = """
    StepChart { height: auto; padding: 0 1; margin-bottom: 1; }
    StepChart > .step-chart--bar { color: $primary; }
    StepChart > .step-chart--bad { color: $error; }
    StepChart > .step-chart--mark { color: $error; text-style: bold; }
    StepChart > .step-chart--axis { color: $text-muted; }
    StepChart > .step-chart--title { text-style: bold; }
    """

    def __init__(self, series: StepSeries, anomaly: Anomaly | None, *, rows: int = 5, id: str | None = None) -> None:
        super().__init__(id=id)
        self.series, self.anomaly, self.rows = series, anomaly, rows

    def on_resize(self) -> None:
        self.refresh()

    def label(self, v: float) -> str:
        """A y value as the axis writes it (times as durations)."""
        return duration_us(v) if self.series.unit == "µs" else magnitude(v, 4)

    def render(self) -> Text:
        s = self.series
        st = {k: cell_style(self, f"step-chart--{k}") for k in ("bar", "axis", "bad", "mark", "title")}
        values = list(s.values)
        finite = [v for v in values if math.isfinite(v)]
        log = use_log(values)
        top = max(finite) if finite else 1.0
        bottom = min(finite) if finite else 0.0
        if log:
            lo, hi = math.floor(math.log10(bottom)), math.ceil(math.log10(top))
            hi = hi if hi > lo else lo + 1
            labels = [f"1e{hi}", f"1e{lo}"]
        else:
            lo = bottom - (top - bottom) * 0.1 if top > bottom else min(0.0, bottom)
            if bottom >= 0 > lo or s.kind == "nonfinite":  # counts and positive values: no axis below 0
                lo = 0.0
            hi = top if top > lo else lo + 1.0
            labels = [self.label(top), self.label(lo if top > bottom else bottom)]
        label_w = max(len(x) for x in labels)
        width = max(8, self.content_size.width - label_w - 2 - len(X_TITLE))  # the x title after the axis
        cols = columns_of(len(values), width)
        mark_pos = self.anomaly.position if self.anomaly is not None else None

        def level(v: float) -> float:
            if log:
                return (math.log10(v) - lo) / (hi - lo) * self.rows if v > 0 else 0.0
            return (v - lo) / (hi - lo) * self.rows

        out = Text(no_wrap=True, overflow="crop")
        unit = f" ({s.unit})" if s.unit else ""
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append(f"{s.name}{unit}", st["title"])
        title.append(f" · {'log' if log else 'linear'} · {len(values)} steps", st["axis"])
        if self.anomaly is not None:
            title.append(f"  ▲ {self.anomaly.describe()}", st["mark"])
        title.truncate(max(1, self.content_size.width), overflow="ellipsis")
        out.append_text(title)
        out.append("\n")
        for r in range(self.rows):
            label = labels[0] if r == 0 else labels[1] if r == self.rows - 1 else ""
            out.append(f"{label:>{label_w}} ┤" if label else f"{'':>{label_w}} │", st["axis"])
            for a, b in cols:
                chunk = values[a:b]
                bad = any(not math.isfinite(v) for v in chunk)
                if bad:
                    out.append("×" if r == 0 else "┊", st["bad"])
                    continue
                v = max(chunk)
                fill = min(1.0, max(0.0, level(v) - (self.rows - 1 - r)))
                marked = mark_pos is not None and a <= mark_pos < b
                out.append(_EIGHTHS[round(fill * 8)], st["mark" if marked else "bar"])
            out.append("\n")
        out.append(f"{'':>{label_w}} └" + "─" * len(cols) + "\n", st["axis"])
        out.append(" " * (label_w + 2), st["axis"])
        out.append_text(self._x_axis(cols, st["axis"], st["mark"]))
        return out

    def _x_axis(self, cols: list[tuple[int, int]], axis: object, mark: object) -> Text:
        """Step numbers under the columns: the first, the last, the anomaly's (`▲N`), and others where they fit."""
        steps = self.series.steps
        cells = [" "] * len(cols)
        marked = [False] * len(cols)

        def first_col(pos: int) -> int:
            return next(c for c, (a, b) in enumerate(cols) if a <= pos < b)

        def place(pos: int, text: str, *, force: bool = False, is_mark: bool = False) -> None:
            start = min(max(0, first_col(pos)), max(0, len(cols) - len(text)))
            span = range(max(0, start - 1), min(len(cols), start + len(text) + 1))
            if not force and any(cells[i] != " " for i in span):
                return
            for i, ch in enumerate(text[: len(cols) - start]):
                cells[start + i] = ch
                marked[start + i] = is_mark
        if not cols:
            return Text("")
        if self.anomaly is not None:
            place(self.anomaly.position, f"▲{self.anomaly.step}", force=True, is_mark=True)
        place(0, str(steps[0]))
        place(len(steps) - 1, str(steps[-1]))
        stride = max(1, len(steps) // 8)
        for pos in range(stride, len(steps) - 1, stride):
            place(pos, str(steps[pos]))
        text = Text(no_wrap=True, overflow="crop")
        for ch, m in zip(cells, marked):
            text.append(ch, mark if m else axis)  # type: ignore[arg-type]
        text.append(X_TITLE, axis)  # type: ignore[arg-type]
        return text
