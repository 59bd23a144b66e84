"""`CommunicationScreen`: collectives by time with their wait/transit split, a rank × step heatmap, the link matrix.

`1` collectives (Enter on one focuses its kernel on the graph), `2` ranks × steps (`v` cycles the
part shown: step time, computing, exposed communication, free; Enter on the slow rank opens its
kernels, slowest first), `3` links (ranks × ranks in GB/s, the slow links marked; a list past 12
ranks). `s` sorts the active table by its next column.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Header, Static, TabbedContent, TabPane

from ascend_tui import fmt
from ascend_tui.app.screens.check_view import CheckView
from ascend_tui.app.screens.row_table import Column, Row, RowTable, Tone
from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.checks.communication import LINK_MIN_MB, SLOW_LINK_RATIO, link_table, per_rank, real_ops

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

PARTS = ("total", "computing", "communication_not_overlapped", "free")
PART_LABEL = {"total": "step time", "computing": "computing", "communication_not_overlapped": "comm (exposed)",
              "free": "free"}
SHADES = " ░▒▓█"
SPLIT = 10
MATRIX_MAX = 12


def split_bar(wait: float, transit: float, idle: float, width: int = SPLIT) -> str:
    """`▓▓▓▓██░░░░`: an op's elapse as wait (▓), transit (█) and idle (░) in `width` cells."""
    total = wait + transit + idle
    if total <= 0:
        return " " * width
    cells = [round(width * x / total) for x in (wait, transit)]
    cells.append(max(width - sum(cells), 0))
    return ("▓" * cells[0] + "█" * cells[1] + "░" * cells[2])[:width].ljust(width)


def shade(value: float, lo: float, hi: float) -> str:
    """One heatmap cell's shade between the matrix's smallest and largest value."""
    if hi <= lo:
        return SHADES[2]
    return SHADES[1 + min(int((value - lo) / (hi - lo) * 4), 3)]


class CommunicationScreen(CheckView):
    """Communication across ranks; Enter on a collective focuses its kernel on the graph."""

    VIEW_ID = "communication"
    TITLE = "Communication"
    KEY = "W"
    CHECK = "profile"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "back", id="view.close"),
        Binding("s", "sort", "sort", id="communication.sort"),
        Binding("v", "part", "part", id="communication.part"),
        Binding("1", "tab('ops')", "collectives", id="communication.ops", show=False),
        Binding("2", "tab('ranks')", "ranks", id="communication.ranks", show=False),
        Binding("3", "tab('links')", "links", id="communication.links", show=False),
    ]

    DEFAULT_CSS = """
    CommunicationScreen #comm-summary { height: auto; padding: 0 1; background: $panel; }
    CommunicationScreen TabbedContent { height: 1fr; }
    CommunicationScreen TabPane { padding: 0; }
    CommunicationScreen #comm-status { height: 1; padding: 0 1; color: $text-muted; }
    """

    @classmethod
    def available(cls, inv: Investigation | None) -> bool:
        p = inv.profile if inv is not None else None
        return p is not None and (bool(p.communication) or "cluster" in p.extra)

    def __init__(self, inv: Investigation) -> None:
        super().__init__(inv)
        assert inv.profile is not None
        self.profile = inv.profile
        self.comm = inv.profile.communication
        self.part = "total"
        self.sort_col = {"ops-table": 0, "ranks-table": 0, "links-table": -1}
        cluster = inv.profile.extra.get("cluster") or {}
        slow = next((f for f in inv.findings if f.kind == "slow_rank"), None)
        self.slow_rank = int(slow.metrics["rank"]) if slow is not None else cluster.get("slow_rank")
        self.slow_links = {(int(x["src"]), int(x["dst"])) for f in inv.findings if f.kind == "slow_link"
                           for x in f.metrics.get("links", [{"src": f.metrics["src"], "dst": f.metrics["dst"]}])}

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(self._summary(), id="comm-summary", markup=False)
        with TabbedContent(initial="ops"):
            with TabPane("1 Collectives", id="ops"):
                yield RowTable(*self._ops(), empty="no collectives read (no communication.json or db tables)",
                               id="ops-table")
            with TabPane("2 Ranks × steps", id="ranks"):
                yield RowTable(*self._ranks(), empty="no step_trace_time in this profile", id="ranks-table")
            with TabPane("3 Links", id="links"):
                yield RowTable(*self._links(), empty="no communication_matrix links", id="links-table")
        yield Static("", id="comm-status", markup=False)
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        self.title = "Communication"
        table = self.query_one("#ops-table", RowTable)
        table.focus()
        self._status(table)

    # -- content ----------------------------------------------------------------------------

    def _summary(self) -> str:
        parts = []
        if self.comm:
            ranks = per_rank(self.comm)
            wait = sum(r.wait_ms for r in ranks) / max(len(ranks), 1)
            transit = sum(r.transit_ms for r in ranks) / max(len(ranks), 1)
            parts.append(f"{fmt.plural(len(real_ops(self.comm.ops)), 'collective')} on "
                         f"{fmt.plural(len(ranks), 'rank')} · wait {fmt.duration_us(wait * 1000)} / transit "
                         f"{fmt.duration_us(transit * 1000)} a rank-step")
            if self.comm.skipped:
                parts.append(f"{self.comm.skipped} records skipped")
        if self.slow_rank is not None:
            parts.append(f"slow rank {self.slow_rank}")
        if self.slow_links:
            a, b = sorted(self.slow_links)[0]
            parts.append(f"slow link {a}->{b}")
        return "communication · " + (" · ".join(parts) or "no collectives read")

    def _ops(self) -> tuple[list[Column], list[Row]]:
        ops = sorted(real_ops(self.comm.ops) if self.comm else [], key=lambda o: (o.start_us, o.rank))
        t0 = ops[0].start_us if ops else 0.0
        rows = []
        for o in ops:
            size = sum(t.size_mb for t in o.transports if t.transport in ("HCCS", "RDMA", "PCIE", "SIO"))
            bw = max((t.bandwidth_gbs for t in o.transports if t.transport != "LOCAL"), default=0.0)
            waiting: Tone = "warning" if o.wait_ms > max(o.transit_ms, 0.0) * 2 and o.wait_ms > 1.0 else ""
            key = o.name if o.name in self.inv.graph else None
            kind = "coll" if o.kind == "collective" else o.kind
            rows.append(Row((fmt.duration_us(o.start_us - t0), str(o.rank) if o.rank >= 0 else "", o.name, kind,
                             fmt.duration_us(o.elapse_ms * 1000), fmt.duration_us(o.wait_ms * 1000),
                             fmt.duration_us(o.transit_ms * 1000), split_bar(o.wait_ms, o.transit_ms, o.idle_ms),
                             f"{size:.1f}" if size else "", f"{bw:.1f}" if bw else ""),
                            key=key, cell_tones=("", "", "", "", "", waiting),
                            data=(o.start_us, o.rank, o.name, o.kind, o.elapse_ms, o.wait_ms, o.transit_ms,
                                  o.wait_ms / o.elapse_ms if o.elapse_ms else 0.0, size, bw)))
        labels = ["start", "rank", "collective", "kind", "elapse", "wait", "transit", "wait▓tran█", "MB", "GB/s"]
        return self._sorted("ops-table", labels, rows, grow=2, widths=(6, 4, 15, 4, 7, 7, 7, SPLIT, 5, 5))

    def _ranks(self) -> tuple[list[Column], list[Row]]:
        by: dict[int, dict[int, Any]] = {}
        for s in self.profile.steps:
            by.setdefault(s.rank, {})[s.step] = s
        steps = sorted({s.step for s in self.profile.steps})[:8]
        values = [getattr(s, self.part) for r in by.values() for s in r.values()]
        lo, hi = (min(values), max(values)) if values else (0.0, 0.0)
        rows = []
        for rank, per in sorted(by.items()):
            mean = {p: float(np.mean([getattr(s, p) for s in per.values()])) for p in PARTS}
            cells = [f"{shade(getattr(per[k], self.part), lo, hi)} {fmt.duration_us(getattr(per[k], self.part))}"
                     if k in per else "" for k in steps]
            tone: Tone = "bad" if rank == self.slow_rank else ""
            rows.append(Row((str(rank), *(fmt.duration_us(mean[p]) for p in PARTS), *cells), tone=tone,
                            data=(rank, *(mean[p] for p in PARTS), *(getattr(per[k], self.part) if k in per else 0.0
                                                                      for k in steps))))
        labels = ["rank", "step time", "computing", "comm (exposed)", "free",
                  *(f"{PART_LABEL[self.part]} @{k}" for k in steps)]
        return self._sorted("ranks-table", labels, rows, grow=len(labels) - 1)

    def _links(self) -> tuple[list[Column], list[Row]]:
        table = link_table(self.comm.links if self.comm else [])
        bw = {k: mb / 1024 / (ms / 1000) for k, (mb, ms) in table.items() if ms > 0}
        ranks = sorted({k[0] for k in bw} | {k[1] for k in bw})
        if bw and len(ranks) <= MATRIX_MAX and self.sort_col["links-table"] < 0:
            best: dict[tuple[int, int], float] = {}
            for (a, b, _t), v in bw.items():
                best[(a, b)] = max(best.get((a, b), 0.0), v)
            rows = []
            for a in ranks:
                cells = tuple(f"{best[(a, b)]:.1f}" if (a, b) in best else ("·" if a == b else " ") for b in ranks)
                tones = ("", *("bad" if (a, b) in self.slow_links else "" for b in ranks))
                data = (a, *(best.get((a, b), 0.0) for b in ranks))
                rows.append(Row((f"{a} ->", *cells), cell_tones=tones, data=data))
            return [Column("src \\ dst", width=9), *(Column(str(b), width=5, align="right") for b in ranks)], rows
        med: dict[str, float] = {}
        for t in {k[2] for k in bw}:
            med[t] = float(np.median([v for k, v in bw.items() if k[2] == t and table[k][0] >= LINK_MIN_MB] or [0.0]))
        rows = []
        for (a, b, t), v in bw.items():
            slow = (a, b) in self.slow_links or (table[(a, b, t)][0] >= LINK_MIN_MB and v < SLOW_LINK_RATIO * med[t])
            rows.append(Row((str(a), str(b), t, f"{v:.1f}", f"{table[(a, b, t)][0]:.1f}",
                             fmt.percent(v / med[t]) if med[t] else ""), tone="bad" if slow else "",
                            data=(a, b, t, v, table[(a, b, t)][0], v / med[t] if med[t] else 0.0)))
        col = max(self.sort_col["links-table"], 0)
        self.sort_col["links-table"] = col
        return self._sorted("links-table", ["src", "dst", "transport", "GB/s", "MB", "of median"], rows, grow=2)

    def _sorted(self, table_id: str, labels: list[str], rows: list[Row], grow: int,
                widths: tuple[int | None, ...] = ()) -> tuple[list[Column], list[Row]]:
        col = self.sort_col[table_id]
        numeric = bool(rows) and isinstance(rows[0].data[col], (int, float)) and col > 0
        rows = sorted(rows, key=lambda r: (0, r.data[col]) if isinstance(r.data[col], (int, float))
                      else (1, str(r.data[col]).lower()), reverse=numeric)
        numeric_cols = [bool(rows) and isinstance(rows[0].data[i], (int, float)) for i in range(len(labels))]
        return [Column(label + ((" ▼" if numeric else " ▲") if i == col else ""),
                       width=widths[i] if i < len(widths) else None,
                       align="right" if numeric_cols[i] and i != 2 else "left", grow=i == grow)
                for i, label in enumerate(labels)], rows

    # -- refresh and actions ----------------------------------------------------------------

    def _refresh(self, table_id: str) -> None:
        build = {"ops-table": self._ops, "ranks-table": self._ranks, "links-table": self._links}[table_id]
        columns, rows = build()
        table = self.query_one(f"#{table_id}", RowTable)
        table.set_rows(rows, columns)
        self._status(table)

    def _active(self) -> RowTable | None:
        pane = self.query_one(TabbedContent).active_pane
        tables = list(pane.query(RowTable)) if pane is not None else []
        return tables[0] if tables else None

    def _status(self, table: RowTable) -> None:
        position, total = table.position()
        hint = {"ops-table": "enter focuses the kernel", "ranks-table": f"v part ({PART_LABEL[self.part]}), "
                "enter on the slow rank opens its kernels", "links-table": "slow links marked"}.get(str(table.id), "")
        text = f"row {position} of {total} · s sort · {hint} · esc back" if total else "nothing here · esc back"
        self.query_one("#comm-status", Static).update(text)

    def action_sort(self) -> None:
        table = self._active()
        if table is None or not table.columns:
            return
        self.sort_col[str(table.id)] = (self.sort_col[str(table.id)] + 1) % len(table.columns)
        self._refresh(str(table.id))

    def action_part(self) -> None:
        self.part = PARTS[(PARTS.index(self.part) + 1) % len(PARTS)]
        self.action_tab("ranks")
        self._refresh("ranks-table")

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_close(self) -> None:
        self.dismiss(None)

    @on(RowTable.Highlighted)
    def _highlighted(self, event: RowTable.Highlighted) -> None:
        self._status(event.table)

    @on(RowTable.Chosen)
    def _chosen(self, event: RowTable.Chosen) -> None:
        table, row = event.table, event.row
        if table.id == "ops-table" and row.key is not None:
            self.dismiss(row.key)
        elif table.id == "ranks-table" and row.data is not None:
            rank = int(row.data[0])
            if rank == self.slow_rank and self.profile.kernels.n:
                from ascend_tui.app.screens.profile import ProfileScreen

                kernels = ProfileScreen(self.inv)
                kernels.group = "name"  # the slow rank's kernels, slowest first
                self.app.push_screen(kernels, self._kernel_chosen)
            else:
                self.notify(f"only the slow rank's kernels are kept in a cluster profile: open rank {rank}'s "
                            "folder to see its own", severity="information")

    def _kernel_chosen(self, node: str | None) -> None:
        if node is not None:
            self.dismiss(node)

    @on(TabbedContent.TabActivated)
    def _tab_changed(self, event: TabbedContent.TabActivated) -> None:
        tables = list(event.pane.query(RowTable))
        if tables:
            tables[0].focus()
            self._status(tables[0])
