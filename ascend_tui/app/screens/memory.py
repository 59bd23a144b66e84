"""`MemoryScreen`: memory findings and sanitizer events by kind, the leak trend, and events per operator.

Enter on a row focuses its operator on the graph; `r` focuses the root cause recorded for it
(for an out-of-bounds read: the op that produced the bad index).
"""

from __future__ import annotations

import math

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Header, Static, TabbedContent, TabPane

from ascend_tui.app.screens.check_view import CheckView
from ascend_tui.app.screens.row_table import Column, Row, RowTable, Tone
from ascend_tui.app.widgets.charts import TimeChart
from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.fmt import count, magnitude, nbytes, plural
from ascend_tui.evidence import SEVERITY_RANK, Finding, MemoryEvent, MemorySample

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

CHECK = "memory"
BAR_WIDTH = 24
_SEVERITY_TONE: dict[str, Tone] = {"error": "error", "warning": "warning", "info": "info"}


@dataclass(frozen=True, slots=True)
class Trend:
    """How allocated memory moved over the samples: first, last, least-squares growth per step, steps that grew."""

    first: float
    last: float
    per_step: float
    grew: int
    steps: int


def time_label(t: float) -> str:
    """A sample's time as the screen's counts read: `1,619` whether the record held 1619 or 1619.4."""
    return f"{t:,.0f}" if math.isfinite(t) and 1e3 <= abs(t) < 1e15 else magnitude(t)


def leak_trend(samples: list[MemorySample]) -> Trend | None:
    """The allocated-bytes trend over the samples in time order, or None with fewer than two."""
    if len(samples) < 2:
        return None
    ordered = sorted(samples, key=lambda s: s.time)
    alloc = np.array([s.allocated_bytes for s in ordered], dtype=np.float64)
    slope = float(np.polyfit(np.arange(len(alloc), dtype=np.float64), alloc, 1)[0])
    grew = int(np.count_nonzero(np.diff(alloc) > 0))
    return Trend(float(alloc[0]), float(alloc[-1]), slope, grew, len(alloc) - 1)


def memory_series(samples: list[MemorySample]) -> dict[str, list[MemorySample]]:
    """Samples split into series by label when labels repeat (a profiler's APP / PTA / GE components).

    Labels that never repeat (one per iteration) describe points of one series, returned under "".
    """
    ordered = sorted(samples, key=lambda s: s.time)
    labels = [s.label for s in ordered]
    if len(set(labels)) == len(labels):
        return {"": ordered} if ordered else {}
    series: dict[str, list[MemorySample]] = {}
    for sample in ordered:
        series.setdefault(sample.label, []).append(sample)
    return series


def root_cause_of(inv: Investigation, node: str | None, finding: Finding | None) -> str | None:
    """The root cause to jump to from a row: the finding's own, else a memory finding's on the same op."""
    if finding is not None and finding.root_cause is not None:
        return finding.root_cause.node
    if node is None or node not in inv.graph:
        return None
    for f in inv.findings_for(node):
        if f.check == CHECK and f.root_cause is not None:
            return f.root_cause.node
    return None


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One reported memory problem: a check's finding, a tool's event, or both when they tell the same thing."""

    kind: str
    node: str | None
    tool: str
    message: str
    severity: str | None
    confidence: float | None
    doubtful: bool
    finding: Finding | None
    event: MemoryEvent | None


def memory_items(inv: Investigation) -> list[MemoryItem]:
    """Memory findings and events, a finding merged with the event it was made from (same kind, op and text)."""
    pending = [f for f in inv.findings if f.check == CHECK]
    items: list[MemoryItem] = []
    for e in inv.memory_events:
        match = next((f for f in pending if f.kind == e.kind and (f.node or None) == (e.node or None)
                      and f.message.startswith(e.message)), None)
        if match is not None:
            pending.remove(match)
        severity = match.severity if match is not None else None
        items.append(MemoryItem(e.kind, e.node or None, e.tool, match.message if match else e.message, severity,
                                e.confidence, e.likely_false_positive, match, e))
    for f in pending:
        conf = f.metrics.get("confidence")
        items.append(MemoryItem(f.kind, f.node or None, str(f.metrics.get("tool") or "check"), f.message, f.severity,
                                float(conf) if isinstance(conf, (int, float)) else None,
                                bool(f.metrics.get("likely_false_positive")), f, None))
    return items


class MemoryScreen(CheckView):
    """The memory view: events by kind, the leak trend and events per operator."""

    VIEW_ID = "memory"
    TITLE = "Memory"
    KEY = "m"
    HOW_TO_GET = "open a msSanitizer log or profiler memory CSVs with it, or re-run with x and the memory check"
    CHECK = "memory"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "back", id="view.close"),
        Binding("r", "root_cause", "root cause", id="memory.root-cause"),
        Binding("1", "tab('events')", "events", id="memory.events"),
        Binding("2", "tab('trend')", "trend", id="memory.trend"),
        Binding("3", "tab('operators')", "operators", id="memory.operators"),
    ]

    DEFAULT_CSS = """
    MemoryScreen #memory-summary { height: auto; padding: 0 1; background: $panel; }
    MemoryScreen TabbedContent { height: 1fr; }
    MemoryScreen TabPane { padding: 0; }
    MemoryScreen #memory-status { height: 1; padding: 0 1; color: $text-muted; }
    """

    @classmethod
    def available(cls, inv: Investigation | None) -> bool:
        """Memory samples alone (a profiler memory timeline) are worth the view too."""
        return super().available(inv) or (inv is not None and bool(inv.memory_events or inv.memory_samples))

    def __init__(self, inv: Investigation) -> None:
        super().__init__(inv)
        self.items = memory_items(inv)
        self.series = memory_series(inv.memory_samples)
        self.trends = {name: t for name, samples in self.series.items() if (t := leak_trend(samples)) is not None}

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(self._summary(), id="memory-summary", markup=False)
        if self.trends:
            name = max(self.trends, key=lambda n: max(s.allocated_bytes for s in self.series[n]))
            series = self.series[name]
            named = len(self.series) > 1 or "" not in self.series
            first, last = series[0], series[-1]
            yield TimeChart([x.allocated_bytes for x in series], y_label=nbytes,
                            x_first=time_label(first.time) if named else (first.label or time_label(first.time)),
                            x_last=time_label(last.time) if named else (last.label or time_label(last.time)),
                            x_title="time (µs)" if named else "sample", y_title=f"allocated{' ' + name if name else ''}",
                            id="memory-spark")
        with TabbedContent(initial="events"):
            with TabPane("1 Events", id="events"):
                yield RowTable(*self._event_table(), empty="no memory findings or events", id="events-table")
            with TabPane("2 Trend", id="trend"):
                yield RowTable(*self._trend_table(), empty="no memory samples (run more than one iteration)",
                               id="trend-table")
            with TabPane("3 Operators", id="operators"):
                yield RowTable(*self._operator_table(), empty="no event is attributed to an operator",
                               id="operators-table")
        yield Static("", id="memory-status", markup=False)
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        self.title = "Memory"
        table = self.query_one("#events-table", RowTable)
        table.focus()
        self._update_status(table)

    # -- content ----------------------------------------------------------------------------

    def _summary(self) -> str:
        items = self.items
        kinds = Counter(i.kind for i in items)
        kind_text = ", ".join(f"{k} {count(n)}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
        errors = sum(1 for i in items if i.severity == "error")
        on_ops = sum(1 for i in items if i.node)
        doubtful = sum(1 for i in items if i.doubtful)
        head = (f"{plural(len(items), 'memory report')}: {plural(errors, 'error')}, "
                f"{count(on_ops)} on operators, {plural(doubtful, 'likely false positive')}")
        lines = [f"{head} · {kind_text}" if kind_text else head]
        for name, t in list(self.trends.items())[:3]:
            lines.append(f"{name + ': ' if name else ''}allocated {nbytes(t.first)} → {nbytes(t.last)}, "
                         f"{nbytes(t.per_step)} per step; grew in {t.grew} of {t.steps} steps")
        return "\n".join(lines)

    def _event_table(self) -> tuple[list[Column], list[Row]]:
        columns = [Column("level"), Column("source"), Column("operator", grow=True), Column("message", grow=True)]
        grouped: dict[str, list[tuple[MemoryItem, Row]]] = defaultdict(list)
        for item in self.items:
            level = item.severity or ""
            if item.confidence is not None:
                level = f"{level} {item.confidence:.0%}".strip()
            message = item.message
            cause = item.finding.root_cause if item.finding is not None else None
            if cause is not None and cause.node != item.node:
                message += f" (root cause {cause.node})"
            if item.doubtful and "false positive" not in message:
                message += " (likely false positive)"
            kernel = item.event.kernel if item.event is not None else None
            where = item.node or (f"kernel {kernel}" if kernel else "—")
            guesses = item.event.extra.get("candidate_nodes") if item.event is not None else None
            if not item.node and guesses:
                where += f" (unmapped; guess {guesses[0]}, {len(guesses)} candidates)"
            tone: Tone = "muted" if item.doubtful else _SEVERITY_TONE.get(item.severity or "", "")
            grouped[item.kind].append((item, Row((level or "—", item.tool, where, message), key=item.node, tone=tone,
                                                 data=item)))
        rows: list[Row] = []
        for kind in sorted(grouped, key=lambda k: (min(_rank(i) for i, _ in grouped[k]), k)):
            entries = sorted(grouped[kind], key=lambda ir: _rank(ir[0]))
            rows.append(Row((f"{kind}: {count(len(entries))}",), tone="section"))
            rows.extend(r for _, r in entries)
        return columns, rows

    def _trend_table(self) -> tuple[list[Column], list[Row]]:
        samples = [x for series in self.series.values() for x in series]
        reserved = any(x.reserved_bytes for x in samples)  # live runs measure tensors, not the pool
        named = len(self.series) > 1 or "" not in self.series
        columns = [Column("time (µs)" if named else "sample"), Column("allocated", align="right"),
                   Column("change", align="right"), *([Column("reserved", align="right")] if reserved else []),
                   Column("allocated, lowest to highest", width=BAR_WIDTH, grow=True)]
        rows: list[Row] = []
        for name, series in self.series.items():
            if named:
                rows.append(Row((f"{name}: {plural(len(series), 'sample')}",), tone="section"))
            rows += _trend_rows(series, reserved, named)
        return columns, rows

    def _operator_table(self) -> tuple[list[Column], list[Row]]:
        columns = [Column("reports", align="right"), Column("worst"), Column("operator", grow=True),
                   Column("op type"), Column("kinds", grow=True)]
        by_node: dict[str, list[MemoryItem]] = defaultdict(list)
        for item in self.items:
            if item.node:
                by_node[item.node].append(item)
        rows: list[Row] = []
        for node_id, found in sorted(by_node.items(), key=lambda kv: (min(_rank(i) for i in kv[1]), -len(kv[1]),
                                                                      kv[0])):
            node = self.inv.graph.get(node_id)
            worst = min(found, key=_rank)
            confidences = [i.confidence for i in found if i.confidence is not None]
            level = worst.severity or (f"{max(confidences):.0%}" if confidences else "—")
            doubtful = all(i.doubtful for i in found)
            kinds = ", ".join(sorted({i.kind for i in found}))
            tone: Tone = "muted" if doubtful else _SEVERITY_TONE.get(worst.severity or "", "")
            rows.append(Row((count(len(found)), level, node_id, node.op_type if node else "(not in graph)",
                             kinds + (" (likely false positive)" if doubtful else "")), key=node_id, tone=tone))
        return columns, rows

    # -- events -----------------------------------------------------------------------------

    def _active_table(self) -> RowTable:
        active = self.query_one(TabbedContent).active
        return self.query_one(f"#{active}-table", RowTable)

    def _update_status(self, table: RowTable) -> None:
        row = table.current
        position, total = table.position()
        if row is None or not total:
            text = "esc back"
        else:
            keys = "enter focuses the op" if row.key else "not on an operator"
            if self._cause(row) is not None:
                keys += " · r its root cause"
            text = f"row {position} of {total} · {keys} · esc back"
        self.query_one("#memory-status", Static).update(text)

    def _cause(self, row: Row) -> str | None:
        finding = row.data.finding if isinstance(row.data, MemoryItem) else None
        return root_cause_of(self.inv, row.key, finding)

    @on(RowTable.Highlighted)
    def _highlighted(self, event: RowTable.Highlighted) -> None:
        self._update_status(event.table)

    @on(RowTable.Chosen)
    def _chosen(self, event: RowTable.Chosen) -> None:
        if event.row.key is not None and event.row.key in self.inv.graph:
            self.dismiss(event.row.key)
        elif event.row.key is not None:
            self.notify(f"{event.row.key} is not in the loaded graph", severity="warning", markup=False)
        else:
            self.notify("this event is not attributed to an operator", severity="warning")

    @on(TabbedContent.TabActivated)
    def _tab_changed(self, event: TabbedContent.TabActivated) -> None:
        table = event.pane.query_one(RowTable)
        table.focus()
        self._update_status(table)

    def action_root_cause(self) -> None:
        row = self._active_table().current
        cause = self._cause(row) if row is not None else None
        if cause is None:
            self.notify("no root cause recorded for this row", severity="warning")
        elif cause not in self.inv.graph:
            self.notify(f"root cause {cause} is not in the loaded graph", severity="warning", markup=False)
        else:
            self.dismiss(cause)

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_close(self) -> None:
        self.dismiss(None)


def _trend_rows(series: list[MemorySample], reserved: bool, by_time: bool) -> list[Row]:
    """One row per sample: allocated, change from the sample before, a bar from the series' low to its high."""
    values = [x.allocated_bytes for x in series]
    low, high = min(values), max(values)
    rows: list[Row] = []
    prev: float | None = None
    for x in series:
        change = "" if prev is None else nbytes(x.allocated_bytes - prev)
        grew = prev is not None and x.allocated_bytes > prev
        share = (x.allocated_bytes - low) / (high - low) if high > low else 1.0
        cells = [time_label(x.time) if by_time else (x.label or time_label(x.time)), nbytes(x.allocated_bytes),
                 ("+" if grew else "") + change]
        if reserved:
            cells.append(nbytes(x.reserved_bytes))
        cells.append("█" * (1 + round((BAR_WIDTH - 1) * share)))
        tones: list[Tone] = ["", "", "warning" if grew else ""] + [""] * reserved + ["info"]
        rows.append(Row(tuple(cells), cell_tones=tuple(tones)))
        prev = x.allocated_bytes
    return rows


def _rank(item: MemoryItem) -> int:
    """Errors first, then warnings, notes, plain events, and likely false positives last."""
    if item.doubtful:
        return 5
    return SEVERITY_RANK.get(item.severity, 3) if item.severity else 3
