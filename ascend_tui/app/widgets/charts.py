"""Charts drawn with text cells: magnitudes on a log axis with a limit line, and a value over time with axes.

Drawn with Rich text rather than a plotting library: the charts sit inside tables and panes
that must fit 80 columns, take theme colours through component styles, and cost nothing to
install (see docs/architecture.md, "Charts").
"""

from __future__ import annotations

import math
from typing import Callable, ClassVar, Sequence

from rich.text import Text
from textual.widgets import Static

from ascend_tui.app.widgets.styles import cell_style

_EIGHTHS = " ▁▂▃▄▅▆▇█"


def log_span(values: Sequence[float], limit: float | None = None) -> tuple[int, int]:
    """Decades (lo, hi) of a log10 axis holding every finite positive value and the limit."""
    logs = [math.log10(v) for v in values if v is not None and math.isfinite(v) and v > 0]
    if limit is not None and limit > 0:
        logs.append(math.log10(limit))
    if not logs:
        return 0, 1
    lo, hi = math.floor(min(logs)), math.ceil(max(logs))
    return lo, hi if hi > lo else lo + 1


def log_bar(value: float | None, span: tuple[int, int], width: int, limit: float | None = None) -> str:
    """One hop's magnitude as a bar on the log axis `span`, `│` where the limit falls; `▶▶` past the axis (Inf)."""
    lo, hi = span

    def col(v: float) -> int:
        return max(0, min(width - 1, round((math.log10(v) - lo) / (hi - lo) * (width - 1))))

    cells = [" "] * width
    if value is not None and value > 0:
        end = width - 1 if not math.isfinite(value) else col(value)
        for c in range(end + 1):
            cells[c] = "━"
        if not math.isfinite(value):
            cells[-1] = "▶"
    if limit is not None and limit > 0:
        at = col(limit)
        cells[at] = "┃" if cells[at] == "━" else "│"
    return "".join(cells)


def log_axis(span: tuple[int, int], width: int) -> str:
    """The axis labels under (or over) `log_bar`s: `1e0` at the left, `1e5` at the right, decades between if room."""
    lo, hi = span
    cells = [" "] * width
    for decade in (lo, hi, *range(lo + 1, hi)):
        label = f"1e{decade}"
        at = round((decade - lo) / (hi - lo) * (width - 1))
        start = min(max(0, at - len(label) // 2), width - len(label))
        if decade in (lo, hi) or all(c == " " for c in cells[max(0, start - 1):start + len(label) + 1]):
            cells[start:start + len(label)] = label
    return "".join(cells)[:width]


class TimeChart(Static):
    """A value over time (memory per iteration or profiler sample): block columns, a labelled y and x axis."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"time-chart--bar", "time-chart--axis", "time-chart--grew"}
    DEFAULT_CSS = """
    TimeChart { height: auto; padding: 0 1; }
    TimeChart > .time-chart--bar { color: $primary; }
    TimeChart > .time-chart--grew { color: $warning; }
    TimeChart > .time-chart--axis { color: $text-muted; }
    """

    def __init__(self, values: Sequence[float], *, y_label: Callable[[float], str], x_first: str, x_last: str,
                 x_title: str, y_title: str, rows: int = 3, id: str | None = None) -> None:
        super().__init__(id=id)
        self.values = list(values)
        self.y_label, self.x_first, self.x_last = y_label, x_first, x_last
        self.x_title, self.y_title, self.rows = x_title, y_title, rows

    def on_resize(self) -> None:
        self.refresh()

    def render(self) -> Text:
        bar = cell_style(self, "time-chart--bar")
        axis = cell_style(self, "time-chart--axis")
        values = self.values
        top, bottom = max(values), min(values)
        base = bottom - (top - bottom) * 0.1 if top > bottom else 0.0  # the lowest sample still shows a sliver
        labels = [self.y_label(top), self.y_label(bottom)]
        label_w = max(len(s) for s in labels)
        width = max(8, self.content_size.width - label_w - 2)
        columns = _resample(values, width)
        out = Text(no_wrap=True, overflow="crop")
        out.append(f"{self.y_title} by {self.x_title}\n", axis)
        for r in range(self.rows):
            label = labels[0] if r == 0 else labels[1] if r == self.rows - 1 else ""
            out.append(f"{label:>{label_w}} ┤" if label else f"{'':>{label_w}} │", axis)
            for v in columns:
                level = (v - base) / (top - base) * self.rows if top > base else self.rows
                fill = min(1.0, max(0.0, level - (self.rows - 1 - r)))
                out.append(_EIGHTHS[round(fill * 8)], bar)
            out.append("\n")
        out.append(f"{'':>{label_w}} └" + "─" * len(columns) + "\n", axis)
        gap = max(1, len(columns) - len(self.x_first) - len(self.x_last))
        out.append(f"{'':>{label_w}}  {self.x_first}{' ' * gap}{self.x_last}", axis)
        return out


def _resample(values: list[float], width: int) -> list[float]:
    """`values` squeezed (each column the max of its samples) or stretched to at most `width` columns."""
    if len(values) <= width:
        per = max(1, width // max(1, len(values)))
        return [v for v in values for _ in range(min(per, 8))]
    out = []
    for c in range(width):
        a, b = c * len(values) // width, (c + 1) * len(values) // width
        out.append(max(values[a:max(b, a + 1)]))
    return out


class BandChart(Static):
    """Relative error against execution position on a log axis, with the dtype's band as a dashed line."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"band-chart--bar", "band-chart--over", "band-chart--band",
                                             "band-chart--axis"}
    DEFAULT_CSS = """
    BandChart { height: auto; padding: 0 1; }
    BandChart > .band-chart--bar { color: $primary; }
    BandChart > .band-chart--over { color: $error; }
    BandChart > .band-chart--band { color: $warning; }
    BandChart > .band-chart--axis { color: $text-muted; }
    """

    def __init__(self, values: Sequence[float], band: float, *, title: str, x_first: str, x_last: str,
                 rows: int = 5, id: str | None = None) -> None:
        super().__init__(id=id)
        self.values = [v if v is not None and not math.isnan(v) and v > 0 else 0.0 for v in values]  # Inf: full
        self.band, self.title, self.x_first, self.x_last, self.rows = band, title, x_first, x_last, rows

    def on_resize(self) -> None:
        self.refresh()

    def render(self) -> Text:
        styles = {k: cell_style(self, f"band-chart--{k}") for k in ("bar", "over", "band", "axis")}
        lo, hi = log_span([v for v in self.values if 0 < v < math.inf] or [self.band], self.band)
        labels = [f"1e{hi}", f"1e{lo}"]
        label_w = max(len(s) for s in labels)
        width = max(8, self.content_size.width - label_w - 2)
        columns = _resample(self.values, width) if self.values else []

        def level(v: float) -> float:
            return 0.0 if v <= 0 else (math.log10(v) - lo) / (hi - lo) * self.rows

        band_row = min(self.rows - 1, max(0, self.rows - 1 - int(level(self.band))))
        out = Text(no_wrap=True, overflow="crop")
        out.append(f"{self.title} (band ┄ at {self.band:.3g})\n", styles["axis"])
        for r in range(self.rows):
            label = labels[0] if r == 0 else labels[1] if r == self.rows - 1 else ""
            out.append(f"{label:>{label_w}} ┤" if label else f"{'':>{label_w}} │", styles["axis"])
            for v in columns:
                fill = min(1.0, max(0.0, level(v) - (self.rows - 1 - r)))
                if fill <= 0 and r == band_row:
                    out.append("┄", styles["band"])
                else:
                    out.append(_EIGHTHS[round(fill * 8)], styles["over" if v > self.band else "bar"])
            out.append("\n")
        out.append(f"{'':>{label_w}} └" + "─" * len(columns) + "\n", styles["axis"])
        gap = max(1, len(columns) - len(self.x_first) - len(self.x_last))
        out.append(f"{'':>{label_w}}  {self.x_first}{' ' * gap}{self.x_last}", styles["axis"])
        return out
