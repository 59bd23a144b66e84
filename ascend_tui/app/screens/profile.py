"""`ProfileScreen`: where the time went — ops by type, op, module or category; a module tree; a step timeline; advice; diff.

Every table sorts by its next column with `s` (`S` flips the order; the module tree turns into a flat
list while sorted); `v` regroups the ops table
(type → op → module → category); Enter drills from a group into its ops and from an op to its
node on the graph; `b` climbs back. Advice rows open the ops they are about; with a baseline the
diff tab lists regressions first, deltas coloured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar

from rich.cells import cell_len

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.widget import Widget
from textual.widgets import ContentSwitcher, Header, Static

from ascend_tui import fmt
from ascend_tui.app.screens.tabbed_view import TabbedView
from ascend_tui.app.widgets.focus_styles import FocusStyles
from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.app.widgets.tab_bar import TabBar
from ascend_tui.app.screens.row_table import Column, Row, RowTable, Tone
# module_tree is imported by those who import it from here
from ascend_tui.app.screens.profile_data import GROUPS, data_for, module_tree  # noqa: F401
from ascend_tui.app.widgets.timeline_strip import KINDS, TimelineStrip

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

GROUP_LABEL = {"type": "op type", "name": "op", "module": "module", "category": "category"}
TABS = (("ops", "1 Ops"), ("modules", "2 Modules"), ("timeline", "3 Timeline"), ("advice", "4 Advice"),
        ("diff", "5 Diff"))
BAR = 12
_SEVERITY_TONE: dict[str, Tone] = {"error": "error", "warning": "warning", "info": "info"}


def share_bar(share: float, width: int = BAR) -> str:
    """`█████▍      ` — a share in [0, 1] as a bar of eighths."""
    eighths = int(round(max(0.0, min(1.0, share)) * width * 8))
    full, part = divmod(eighths, 8)
    return ("█" * full + (" ▏▎▍▌▋▊▉"[part] if part else "")).ljust(width)


class PaneTable(FocusStyles, RowTable):
    """A table of the profile view: a tab switch moves the focus to it without restyling it (`FocusStyles`)."""


class ProfileScreen(TabbedView):
    """The profile browser; Enter on an op focuses its node on the graph."""

    VIEW_ID = "profile"
    TITLE = "Profile"
    KEY = "T"
    HOW_TO_GET = ("open a profiler folder (*_ascend_pt, PROF_*), kernel_details.csv or a trace with it, "
                  "or re-run with x and the profile check")
    CHECK = "profile"
    KEEP = True  # composing and styling its tabs is most of `T`: re-opened, the same screen shows again
    TABS = TABS
    PANES: ClassVar[dict[str, str]] = {"ops": "ops-table", "modules": "modules-table", "advice": "advice-table",
                                       "diff": "diff-table"}

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "back", id="view.close"),
        Binding("s", "sort", "sort", id="profile.sort"),
        Binding("S", "sort_reverse", "reverse", id="profile.sort-reverse", show=False),
        Binding("v", "regroup", "group", id="profile.group"),
        Binding("b,backspace", "up", "up", id="profile.up"),
        Binding("1", "tab('ops')", "ops", id="profile.ops", show=False),
        Binding("2", "tab('modules')", "modules", id="profile.modules", show=False),
        Binding("3", "tab('timeline')", "timeline", id="profile.timeline", show=False),
        Binding("4", "tab('advice')", "advice", id="profile.advice", show=False),
        Binding("5", "tab('diff')", "diff", id="profile.diff", show=False),
    ]

    DEFAULT_CSS = """
    ProfileScreen #profile-summary { height: auto; padding: 0 1; background: $panel; }
    ProfileScreen #profile-panes { height: 1fr; }
    ProfileScreen #timeline-info { height: auto; padding: 0 1; }
    ProfileScreen #profile-status { height: 1; padding: 0 1; color: $text-muted; }
    /* bars always shown: regrouping 1M kernels into 20 op types would otherwise lay the view out twice */
    ProfileScreen RowTable { overflow-y: scroll; }
    """

    @classmethod
    def available(cls, inv: Investigation | None) -> bool:
        return inv is not None and inv.profile is not None

    @classmethod
    def prepare(cls, inv: Investigation, cancelled: Callable[[], bool]) -> None:
        """Group and format the profile's rows, its strip and module tree ahead (see `profile_data`)."""
        if inv.profile is not None:
            data_for(inv.profile).prepare(inv.graph, cancelled)
            inv.profile_summary()  # the line above the tabs

    def __init__(self, inv: Investigation) -> None:
        super().__init__(inv)
        assert inv.profile is not None
        self.profile = inv.profile
        self.group = "type"
        self.filters: list[tuple[str, str, str]] = []  # (column, value, the grouping to return to)
        self.sorts: dict[str, tuple[int, bool]] = {"ops-table": (2, True), "advice-table": (0, False),
                                                   "diff-table": (3, True), "modules-table": (-1, True),
                                                   "steps-table": (0, False)}
        self.diff_by = "type"
        self.data = data_for(self.profile)
        self.segments = self.data.segments()
        self.pending = False  # the advice is still being computed by the job that opened this profile

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(self._summary(), id="profile-summary", markup=False)
        # a bar of our own over a switcher, not `TabbedContent`: a switch is then one layout and one paint (tab_bar)
        yield TabBar(TABS, "ops", id="profile-tabs")
        # each table is its tab's pane (no container around it); modules, timeline and diff made when first shown
        with ContentSwitcher(initial="ops-table", id="profile-panes"):
            yield PaneTable(*self._ops(), empty="no kernel rows", id="ops-table", cell_widths=self._ops_widths())
            yield PaneTable(*self._advice(), empty=self._advice_empty(), id="advice-table")
        yield Static("", id="profile-status", markup=False)
        yield KeyFooter(compact=True)

    def _pane(self, tab: str) -> Widget:
        """The pane of a tab not shown on opening, made when it first is: opening mounts and styles a third
        fewer widgets (60-80 ms of `T`)."""
        if tab == "modules":
            return PaneTable(*self._modules(), id="modules-table", empty="no module attribution in this profile "
                            "(profile with with_modules=True, or run it live)")
        if tab == "timeline":
            return Container(TimelineStrip(self.segments, id="timeline-strip"),
                             Static("", id="timeline-info", markup=False),
                             PaneTable(*self._steps(), empty="no step_trace_time in this profile", id="steps-table"),
                             id="timeline")
        if tab == "diff":
            return PaneTable(*self._diff(), empty="no baseline: run `ascend-tui profile NEW --baseline OLD --open`",
                            id="diff-table")
        raise ValueError(f"no tab {tab!r}")

    def on_mount(self) -> None:
        self.title = "Profile"
        table = self.query_one("#ops-table", RowTable)
        table.focus()
        self._status(table)
        if self._job_running():
            self.pending = True
            self._show_advice()
            self._waiting = self.set_interval(0.2, self._advice_arrived)
        self.start_ahead()  # composed ahead (the app's `build_views_ahead`): the tabs made and laid out ahead too

    # -- advice computed after the first screen -----------------------------------------------

    def reusable(self) -> bool:
        return not self.pending


    def _job_running(self) -> bool:
        """Whether the app's job (opening or running checks) is still at work: its findings are not all in yet."""
        return any(w.group == "job" and not w.is_finished for w in self.app.workers)

    def _advice_arrived(self) -> None:
        """Take the findings of the newer investigation the job made from this profile; stop waiting when it ends."""
        newer = getattr(self.app, "inv", None)
        if newer is not None and newer is not self.inv and newer.profile is self.profile:
            self.inv = newer
            self.pending = self._job_running()
            self._show_advice()
        elif not self._job_running():
            self.pending = False
            self._show_advice()
        if not self.pending:
            self._waiting.stop()

    def _advice_empty(self) -> str:
        return "advice: computing …" if self.pending else "no advice: nothing stands out"

    def _show_advice(self) -> None:
        self.query_one("#profile-summary", Static).update(self._summary())
        table = self.query_one("#advice-table", RowTable)
        table.empty = self._advice_empty()
        columns, rows = self._advice()
        table.set_rows(rows, columns)
        if self._active_table() is table:
            self._status(table)

    # -- content ----------------------------------------------------------------------------

    def _summary(self) -> str:
        s = self.inv.profile_summary()
        assert s is not None
        parts = ", ".join(f"{g.key} {fmt.percent(g.share)}" for g in s.by_category[:5])
        return (f"{self.profile.kind} profile · {fmt.plural(s.kernels, 'kernel')} · {fmt.duration_us(s.total_us)} · "
                f"{fmt.plural(s.steps, 'step')} · {parts}" + (" · advice: computing …" if self.pending else ""))

    def _ops(self) -> tuple[list[Column], list[Row]]:
        labels = [GROUP_LABEL[self.group], "calls", "total", "share", "mean", "max", "category", "bound"]
        rows = self.data.rows(self.group, self._drills(), self.inv.graph)
        return self._sorted("ops-table", labels, rows, grow=0)

    def _drills(self) -> tuple[tuple[str, str], ...]:
        return tuple((c, v) for c, v, _ in self.filters)

    def _ops_widths(self) -> list[int]:
        """The ops table's widest cells, measured once over its rows in their first order (a sort keeps them)."""
        return self.data.widths(self.group, self._drills(), self.inv.graph)

    def _sorted(self, table_id: str, labels: list[str], rows: list[Row], grow: int) -> tuple[list[Column], list[Row]]:
        col, desc = self.sorts[table_id]
        rows = sorted(rows, key=lambda r: _sort_key(r.data[col]), reverse=desc)
        columns = []
        for i, label in enumerate(labels):
            mark = (" ▼" if desc else " ▲") if i == col else ""
            numeric = bool(rows) and isinstance(rows[0].data[i], (int, float))
            columns.append(Column(label + mark, align="right" if numeric else "left", grow=i == grow))
        return columns, rows

    def _modules(self) -> tuple[list[Column], list[Row]]:
        """The module tree (children by time); sorted by a column it becomes a flat list of full paths."""
        tree = self.data.tree()
        total = self.profile.kernels.total_us() or 1.0
        col, desc = self.sorts["modules-table"]
        if col < 0:
            columns = [Column("module (tree)", grow=True), Column("share", width=BAR),
                       Column("time", align="right"), Column("calls", align="right")]
            return columns, [Row(("  " * depth + path.rpartition(".")[2], share_bar(us / total), fmt.duration_us(us),
                                  fmt.count(n)), data=(path, us / total, us, n)) for path, depth, us, n in tree]
        rows = [Row((path, share_bar(us / total), fmt.duration_us(us), fmt.count(n)), data=(path, us / total, us, n))
                for path, _, us, n in tree]
        return self._sorted("modules-table", ["module", "share", "time", "calls"], rows, grow=0)

    def _steps(self) -> tuple[list[Column], list[Row]]:
        columns = [Column("step", align="right"), Column("rank", align="right"), Column("computing", align="right"),
                   Column("comm (exposed)", align="right"), Column("free", align="right"),
                   Column("step time", align="right"), Column("free share", align="right", grow=True)]
        rows = []
        for s in self.profile.steps:
            free = s.free / s.total if s.total else 0.0
            rows.append(Row((str(s.step), str(s.rank) if s.rank >= 0 else "", fmt.duration_us(s.computing),
                             fmt.duration_us(s.communication_not_overlapped), fmt.duration_us(s.free),
                             fmt.duration_us(s.total), fmt.percent(free)),
                            cell_tones=("", "", "", "", "warning" if free >= 0.1 else ""),
                            data=(s.step, s.rank, s.computing, s.communication_not_overlapped, s.free, s.total, free)))
        labels = [c.label for c in columns]
        sorted_columns, rows = self._sorted("steps-table", labels, rows, grow=6)
        return [Column(c.label, align="right", grow=c.grow) for c in sorted_columns], rows

    def _advice(self) -> tuple[list[Column], list[Row]]:
        found = [f for f in self.inv.findings if f.check == self.CHECK]
        rank = {"error": 0, "warning": 1, "info": 2}
        rows = [Row((f.severity, f.kind, f.op_type or "", f.message), key=f.node if f.node in self.inv.graph else None,
                    tone=_SEVERITY_TONE.get(f.severity, ""), data=(rank.get(f.severity, 3), f.kind, f.op_type, f.message,
                                                                    f))
                for f in found]
        return self._sorted("advice-table", ["sev", "kind", "op type", "advice"], rows, grow=3)

    def _diff(self) -> tuple[list[Column], list[Row]]:
        base = self.profile.extra.get("baseline") or {}
        rows = []
        for r in base.get(self.diff_by, []):
            delta = r["after_us"] - r["before_us"]
            x = r["after_us"] / r["before_us"] if r["before_us"] else float("inf")
            tone: Tone = "bad" if delta > 0 else ("good" if delta < 0 else "")
            rows.append(Row((r["key"] or "(none)", fmt.duration_us(r["before_us"]), fmt.duration_us(r["after_us"]),
                             ("+" if delta > 0 else "") + fmt.duration_us(delta), fmt.ratio(x) if r["before_us"] else "new"),
                            cell_tones=("", "", "", tone, tone), data=(r["key"], r["before_us"], r["after_us"], delta, x)))
        return self._sorted("diff-table", [GROUP_LABEL.get(self.diff_by, self.diff_by), "before", "after", "delta", "x"],
                            rows, grow=0)

    # -- refresh ----------------------------------------------------------------------------

    def _refresh(self, table_id: str) -> None:
        build = {"ops-table": self._ops, "advice-table": self._advice, "diff-table": self._diff,
                 "modules-table": self._modules, "steps-table": self._steps}[table_id]
        columns, rows = build()
        table = self.query_one(f"#{table_id}", RowTable)
        table.set_rows(rows, columns, cell_widths=self._ops_widths() if table_id == "ops-table" else None)
        self._status(table)

    def _active_table(self) -> RowTable | None:
        return self._table_of(self.tab)

    def _table_of(self, tab: str) -> RowTable | None:
        """The table of `tab`'s pane (the pane itself, or the steps under the timeline), None until it is made."""
        pane = self._pane_of(tab)
        if pane is None or isinstance(pane, RowTable):
            return pane
        tables = list(pane.query(RowTable))
        return tables[0] if tables else None

    def _focus_target(self, tab: str) -> Widget | None:
        if tab == "timeline":
            return self.query_one(TimelineStrip)
        return self._table_of(tab)

    def _shown(self, tab: str, target: Widget | None) -> None:
        if isinstance(target, RowTable):
            self._status(target)

    def _status(self, table: RowTable) -> None:
        position, total = table.position()
        where = ""
        if table.id == "ops-table":
            trail = " › ".join(f"{GROUP_LABEL[c]} {v}" for c, v, _ in self.filters)
            where = f"by {GROUP_LABEL[self.group]}" + (f" in {trail}" if trail else "") + " · "
        hint = "enter drills in, b back" if table.id == "ops-table" else "enter opens"
        text = f"{where}row {position} of {total} · s sort, v group · {hint} · esc back" if total else \
            f"{where}nothing here · esc back"
        self.query_one("#profile-status", Static).update(text, layout=False)  # one line whatever it says

    # -- actions ----------------------------------------------------------------------------

    def action_sort(self) -> None:
        table = self._active_table()
        if table is None or table.id not in self.sorts:
            return
        col, _ = self.sorts[table.id]
        if table.id == "modules-table":  # tree order, then each column, then the tree again
            col = (col + 2) % (len(table.columns) + 1) - 1
        else:
            col = (col + 1) % max(len(table.columns), 1)
        first = table.rows[0].data if table.rows else None
        numeric = isinstance(first, tuple) and isinstance(first[col], (int, float))
        self.sorts[table.id] = (col, numeric)  # numbers largest first, names a to z
        self._refresh(table.id)

    def action_sort_reverse(self) -> None:
        table = self._active_table()
        if table is None or table.id not in self.sorts:
            return
        col, desc = self.sorts[table.id]
        self.sorts[table.id] = (col, not desc)
        self._refresh(table.id)

    def action_regroup(self) -> None:
        table = self._active_table()
        if table is not None and table.id == "diff-table":
            self.diff_by = "module" if self.diff_by == "type" else "type"
            self._refresh("diff-table")
            return
        self.group = GROUPS[(GROUPS.index(self.group) + 1) % len(GROUPS)]
        self._show("ops")
        self._refresh("ops-table")

    def action_up(self) -> None:
        if self.filters:
            _, _, self.group = self.filters.pop()
            self._refresh("ops-table")

    def drill(self, col: str, value: str) -> None:
        """Show the ops of one type, module or category."""
        self.filters.append((col, value, self.group))
        self.group = "name"
        self._show("ops")
        self._refresh("ops-table")

    def action_close(self) -> None:
        self.dismiss(None)

    # -- events -----------------------------------------------------------------------------

    @on(RowTable.Highlighted)
    def _highlighted(self, event: RowTable.Highlighted) -> None:
        if event.table is self._active_table():
            self._status(event.table)

    @on(RowTable.Chosen)
    def _chosen(self, event: RowTable.Chosen) -> None:
        table, row = event.table, event.row
        if table.id == "ops-table":
            if self.group == "name":
                if row.key is not None:
                    self.dismiss(row.key)
            elif row.data is not None:
                self.drill(self.group, str(row.data[0]))
        elif table.id == "modules-table" and row.data:
            if str(row.data[0]) in self.profile.kernels.names("module"):
                self.drill("module", str(row.data[0]))
        elif table.id == "advice-table" and row.data is not None:
            finding = row.data[-1]
            if finding.op_type and finding.op_type in self.profile.kernels.names("type"):
                self.drill("type", finding.op_type)
            elif row.key is not None:
                self.dismiss(row.key)
        elif table.id == "diff-table" and row.data is not None:
            key = str(row.data[0])
            if key in self.profile.kernels.names(self.diff_by):
                self.drill(self.diff_by, key)

    @on(TimelineStrip.Moved)
    def _moved(self, event: TimelineStrip.Moved) -> None:
        total = float(event.shares.sum())
        parts = ", ".join(f"{k} {fmt.percent(v / total)}" for k, v in zip(KINDS, event.shares) if total and v)
        info = self.query_one("#timeline-info", Static)
        text = (f"{fmt.duration_us(event.start_us)} – {fmt.duration_us(event.end_us)} of "
                f"{fmt.duration_us(self.segments.end_us)} ({self.segments.source}): {parts or 'idle'} · h/l move")
        # its height follows the text: a layout only if the line shown or the new one wraps (h/l: 1 layout less)
        width = info.content_region.width
        one_line = cell_len(text) <= width and 0 < cell_len(str(info.render())) <= width
        info.update(text, layout=not one_line)

def _sort_key(value: Any) -> tuple[int, Any]:
    if isinstance(value, (int, float)):
        return (0, value)
    return (1, str(value).lower())

