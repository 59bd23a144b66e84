"""`TrendsScreen`: per-step series (module max-abs and norm, loss, gradient norm, step time) as charts with axes.

The series are read in a background worker (`offline.trends.trend_series`: a multi-step dump's
statistics, the profiler's step trace, the trend `watch()` kept); each is judged by
`checks.trends` and its first anomalous step marked. The list on the left names every series
with its first anomaly; Enter shows or hides a series' chart, `a` goes back to the default
choice (the anomalous ones, the loss, the gradient norm and the step time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Header, Static

from ascend_tui.app.screens.check_view import CheckView
from ascend_tui.app.screens.row_table import Column, Row, RowTable
from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.app.widgets.step_chart import StepChart
from ascend_tui.checks.trends import SeriesVerdict, earliest, judge
from ascend_tui.fmt import plural

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

TREND_GROUP = "trends"
DEFAULT_KINDS = ("loss", "grad_norm", "step_time", "nonfinite")
DEFAULT_CHARTS = 6
NAME_CHROME = 14  # the list's cells beside the name: the mark, the anomaly column, gaps and the scrollbar


def tail(name: str, room: int) -> str:
    """`name` fitted to `room` cells: the module path's segments shortened to their first letter from the left
    (`m.l.0.s.q_proj max-abs`; numbers and the last segment kept, as they tell modules apart), then cut from the
    left with `…`."""
    if len(name) <= room:
        return name
    path, sep, rest = name.partition(" ")
    parts = path.split(".")
    for i in range(len(parts) - 1):
        if len(".".join(parts) + sep + rest) <= room:
            break
        if not parts[i].isdigit():
            parts[i] = parts[i][:1]
    short = ".".join(parts) + sep + rest
    return short if len(short) <= room else "…" + short[len(short) - room + 1:]


def has_trend(inv: Investigation | None) -> bool:
    """Whether the investigation holds several steps: a recorded trend, a multi-step dump, a profile's step trace."""
    from ascend_tui.offline.trends import TREND_SECTION, step_time_series

    if inv is None:
        return False
    if inv.sections.get(TREND_SECTION):
        return True
    if inv.run.source == "msprobe" and int(inv.run.extra.get("steps", 0) or 0) >= 2:
        return True
    return bool(step_time_series(inv))


def default_choice(verdicts: list[SeriesVerdict]) -> set[int]:
    """The charts shown first: every anomalous series (earliest first), then loss, gradient norm, step time."""
    flagged = sorted((i for i, v in enumerate(verdicts) if v.anomaly is not None),
                     key=lambda i: (verdicts[i].anomaly.step, i))  # type: ignore[union-attr]
    plain = [i for i, v in enumerate(verdicts) if v.anomaly is None and v.series.kind in DEFAULT_KINDS]
    chosen = (flagged + plain)[:DEFAULT_CHARTS]
    return set(chosen or range(min(DEFAULT_CHARTS, len(verdicts))))


class SeriesList(RowTable):
    """The list of series: Enter shows or hides the chart of the one under the cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "choose", "show/hide chart", id="trends.toggle")]


class TrendsScreen(CheckView):
    """Charts of per-step series with the first anomalous step marked; Enter on a series shows or hides it."""

    VIEW_ID = "trends"
    TITLE = "Trends"
    KEY = "I"
    CHECK = ""
    HOW_TO_GET = ("open an msprobe dump root with several step folders, a profiler folder with several steps, or "
                  "the investigation ascend_tui.watch() saved")

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "back", id="view.close"),
        Binding("a", "defaults", "default charts", id="trends.defaults"),
    ]

    DEFAULT_CSS = """
    TrendsScreen #trend-summary { height: auto; padding: 0 1; background: $panel; }
    TrendsScreen #trend-body { height: 1fr; }
    TrendsScreen #trend-series { width: 36; height: 1fr; }
    TrendsScreen #trend-charts { width: 1fr; height: 1fr; }
    """

    @classmethod
    def available(cls, inv: Investigation | None) -> bool:
        return has_trend(inv)

    def __init__(self, inv: Investigation) -> None:
        super().__init__(inv)
        self.verdicts: list[SeriesVerdict] = []
        self.chosen: set[int] = set()
        self.notes: list[str] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("reading the steps …", id="trend-summary", markup=False)
        with Horizontal(id="trend-body"):
            yield SeriesList([Column("", 1), Column("series", grow=True), Column("anomaly", align="right")], [],
                             empty="reading …", id="trend-series")
            yield VerticalScroll(id="trend-charts")
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        self.query_one(RowTable).focus()
        self._load()

    def on_resize(self) -> None:
        if self.verdicts:
            table = self.query_one(SeriesList)
            at = table.cursor
            table.set_rows(self._rows())
            table.move_to(at)

    @work(thread=True, exclusive=True, group=TREND_GROUP, exit_on_error=False, description="reading the steps")
    def _load(self) -> None:
        from textual.worker import get_current_worker

        from ascend_tui.offline.trends import trend_series

        worker = get_current_worker()

        def report(text: str, done: int, total: int | None) -> None:
            self.app.call_from_thread(self._progress, f"{text} ({done + 1} of {total})" if total else text)

        series, notes = trend_series(self.inv, report, worker.cancelled_event)
        verdicts = judge(series)
        if not worker.is_cancelled:
            self.app.call_from_thread(self._loaded, verdicts, notes)

    def _progress(self, text: str) -> None:
        self.query_one("#trend-summary", Static).update(text)

    def _loaded(self, verdicts: list[SeriesVerdict], notes: list[str]) -> None:
        self.verdicts, self.notes = verdicts, notes
        self.chosen = default_choice(verdicts)
        self.query_one("#trend-summary", Static).update(self._summary())
        self._refresh()

    def _summary(self) -> str:
        if not self.verdicts:
            return "no series with several steps here" + (f" ({'; '.join(self.notes)})" if self.notes else "")
        steps = max(len(v.series.steps) for v in self.verdicts)
        first = earliest(self.verdicts)
        where = (f"first anomaly {first.anomaly.describe()} in {first.series.name}" if first and first.anomaly
                 else "no anomaly: every series stays in its band")
        text = f"{plural(len(self.verdicts), 'series', 'series')} over {plural(steps, 'step')} · {where}"
        return text + (f" · {'; '.join(self.notes)}" if self.notes else "")

    def _rows(self) -> list[Row]:
        room = max(12, self.query_one(SeriesList).size.width - NAME_CHROME)
        return [Row(("●" if i in self.chosen else " ", tail(v.series.name, room),
                     f"step {v.anomaly.step}" if v.anomaly is not None else ""),
                    tone="error" if v.anomaly is not None else "", data=i) for i, v in enumerate(self.verdicts)]

    def _refresh(self) -> None:
        table = self.query_one(RowTable)
        at = table.cursor
        table.set_rows(self._rows())
        table.move_to(min(at, max(0, len(self.verdicts) - 1)))
        charts = self.query_one("#trend-charts", VerticalScroll)
        charts.remove_children()
        charts.mount_all([StepChart(self.verdicts[i].series, self.verdicts[i].anomaly)
                          for i in sorted(self.chosen)])

    @on(RowTable.Chosen)
    def _toggle(self, event: RowTable.Chosen) -> None:
        i = event.row.data
        if isinstance(i, int):
            self.chosen.symmetric_difference_update({i})
            self._refresh()

    def action_defaults(self) -> None:
        self.chosen = default_choice(self.verdicts)
        self._refresh()

    def action_close(self) -> None:
        self.workers.cancel_group(self, TREND_GROUP)
        self.dismiss(None)
