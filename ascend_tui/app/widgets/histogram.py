"""`HistogramChart`: counts over log bins as block columns, with a count axis and a decade axis under them.

It fills the height it is given (at least 4 rows of bars), so two fit one above the other at 80x24.
A bin that holds anything shows at least a sliver, however tall the tallest bin: one element off
by 1e3 is the thing to see next to a million exact ones.
"""

from __future__ import annotations

import math
from typing import ClassVar

from rich.text import Text
from textual.widgets import Static

from ascend_tui import fmt
from ascend_tui.app.widgets.styles import cell_style
from ascend_tui.checks.tensor_pair import Histogram

_EIGHTHS = " ▁▂▃▄▅▆▇█"
_MAX_BAR = 4  # columns a bin, at most


def decade_label(x: float) -> str:
    """`1e-3` for 10**-3; a half decade as `3e-3`."""
    if x <= 0 or not math.isfinite(x):
        return fmt.magnitude(x)
    exponent = math.floor(math.log10(x) + 1e-9)
    mantissa = round(x / 10 ** exponent)
    return f"{mantissa}e{exponent}" if mantissa != 1 else f"1e{exponent}"


class HistogramChart(Static):
    """A log-binned histogram (`checks.tensor_pair.Histogram`) drawn with axes; the title names what is counted."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"histogram--bar", "histogram--axis"}
    DEFAULT_CSS = """
    HistogramChart { height: 1fr; min-height: 7; padding: 0 1; }
    HistogramChart > .histogram--bar { color: $primary; }
    HistogramChart > .histogram--axis { color: $text-muted; }
    """

    def __init__(self, hist: Histogram, title: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.hist = hist
        self.title_text = title

    def on_resize(self) -> None:
        self.refresh()

    def render(self) -> Text:
        bar, axis = cell_style(self, "histogram--bar"), cell_style(self, "histogram--axis")
        h = self.hist.trimmed()
        out = Text(no_wrap=True, overflow="crop")
        extra = [f"{fmt.count(h.zeros)} exactly 0"] if h.zeros else []
        if h.nonfinite:
            extra.append(f"{fmt.count(h.nonfinite)} NaN/Inf on one side only")
        out.append(f"{self.title_text}" + (f" · {' · '.join(extra)}" if extra else "") + "\n", axis)
        counts = list(h.counts)
        if not any(counts):
            out.append("  no element differs: nothing to bin" if h.total else "  no elements", axis)
            return out
        top = max(counts)
        label_w = max(len(fmt.count(top)), 1)
        width = max(8, self.content_size.width - label_w - 2)
        per = max(1, min(_MAX_BAR, width // len(counts)))
        if per * len(counts) > width:  # more bins than columns: merge neighbours
            group = math.ceil(len(counts) / width)
            counts = [sum(counts[i:i + group]) for i in range(0, len(counts), group)]
            edges = list(h.edges[::group]) + [h.edges[-1]]
            top, per = max(counts), 1
        else:
            edges = list(h.edges)
        rows = max(3, self.content_size.height - 4)
        for r in range(rows):
            label = fmt.count(top) if r == 0 else ""
            out.append(f"{label:>{label_w}} ┤" if label else f"{'':>{label_w}} │", axis)
            for c in counts:
                level = c / top * rows if c else 0.0
                if c and level < 1 / 8:
                    level = 1 / 8
                fill = min(1.0, max(0.0, level - (rows - 1 - r)))
                out.append(_EIGHTHS[round(fill * 8)] * per, bar)
            out.append("\n")
        out.append(f"{'0':>{label_w}} └" + "─" * (per * len(counts)) + "\n", axis)
        out.append(self._x_axis(edges, per, label_w + 2), axis)
        return out

    def _x_axis(self, edges: list[float], per: int, indent: int) -> str:
        """Decade labels under the bars where their edge falls (half decades too when there is room)."""
        cells = [" "] * (indent + per * (len(edges) - 1) + 8)
        taken: list[tuple[int, int]] = []
        decades = [i for i, e in enumerate(edges) if e > 0 and abs(math.log10(e) - round(math.log10(e))) < 1e-6]
        others = [i for i in range(len(edges)) if i not in decades]
        for i in [*decades, *others]:
            label = decade_label(edges[i])
            at = indent + i * per
            if at + len(label) > len(cells) or any(at <= b + 1 and a <= at + len(label) for a, b in taken):
                continue
            cells[at:at + len(label)] = label
            taken.append((at, at + len(label) - 1))
        return "".join(cells).rstrip()
