"""`StoryScreen`: the few causes that explain every check's findings, each opening onto its evidence.

The triage story (`checks/story.py`) as a list: one line per cause, most effect first;
`right`/`left` open and close a cause onto the findings it explains (from every check),
Enter focuses the cause's operator — or the finding's under the cursor — on the graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Header, Static

from ascend_tui.app.screens.check_view import CheckView
from ascend_tui.app.screens.row_table import Column, Row, RowTable, Tone
from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.checks.story import Cause, finding_ids, tell
from ascend_tui.fmt import plural

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

_TONE: dict[str, Tone] = {"error": "error", "warning": "warning", "info": "info"}


def cause_of(causes: list[Cause], finding_id: str) -> Cause | None:
    """The cause that explains `finding_id`."""
    return next((c for c in causes if finding_id in c.explains), None)


class StoryScreen(CheckView):
    """The story: causes ranked by effect; each opens onto its evidence; Enter goes to the operator."""

    VIEW_ID = "story"
    TITLE = "Story"
    KEY = "S"
    CHECK = ""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "back", id="view.close"),
        Binding("right,l", "expand(True)", "open", id="story.open"),
        Binding("left,h", "expand(False)", "close", id="story.close"),
        Binding("a", "expand_all", "open all", id="story.open-all"),
    ]

    DEFAULT_CSS = """
    StoryScreen #story-summary { height: auto; padding: 0 1; background: $panel; }
    """

    @classmethod
    def available(cls, inv: Investigation | None) -> bool:
        return inv is not None and any(f.severity in ("error", "warning") for f in inv.findings)

    def __init__(self, inv: Investigation, select: str | None = None) -> None:
        super().__init__(inv)
        self.causes = tell(inv.graph, inv.findings)
        self.by_id = dict(zip(finding_ids(inv.findings), inv.findings))
        chosen = cause_of(self.causes, select) if select else None
        self.open: set[str] = {chosen.id} if chosen else ({self.causes[0].id} if self.causes else set())
        self.select = chosen.id if chosen else None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(self._summary(), id="story-summary", markup=False)
        yield RowTable([Column("", 2), Column("cause", grow=True), Column("checks"), Column("explains", align="right")],
                       self._rows(), empty="no errors or warnings: nothing to explain", id="story-table")
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        table = self.query_one(RowTable)
        table.focus()
        if self.select is not None:
            table.move_to(self._row_of(self.select))

    def _summary(self) -> str:
        if not self.causes:
            return "story: no cause found"
        errors = sum(1 for c in self.causes if c.severity == "error")
        return (f"{plural(len(self.causes), 'cause')} behind the findings ({errors} at error), most effect "
                f"first; → opens one onto its evidence, enter goes to its operator, esc to the graph")

    def _rows(self) -> list[Row]:
        rows: list[Row] = []
        for k, c in enumerate(self.causes, 1):
            opened = c.id in self.open
            rows.append(Row((("▾" if opened else "▸"), f"{k}. {c.title}", ", ".join(c.checks),
                             str(len(c.explains))), key=c.node or None, tone=_TONE.get(c.severity, ""),
                            data=c.id))
            if not opened:
                continue
            for fid in c.explains:
                f = self.by_id.get(fid)
                if f is None:
                    continue
                rows.append(Row(("", f"  {f.severity} {f.check}/{f.kind} at {f.node or 'the run'}: {f.message}",
                                 f.check, ""), key=f.node or None, tone=_TONE.get(f.severity, "muted"), data=fid))
            if c.rules:
                rows.append(Row(("", f"  folded by: {', '.join(c.rules)}", "", ""), tone="muted", data=c.id))
        return rows

    def _row_of(self, cause_id: str) -> int:
        table = self.query_one(RowTable)
        return next((i for i, r in enumerate(table.rows) if r.data == cause_id), 0)

    def _cause_under_cursor(self) -> Cause | None:
        row = self.query_one(RowTable).current
        if row is None:
            return None
        cid = row.data if isinstance(row.data, str) and row.data.startswith("cause-") else None
        if cid is None and isinstance(row.data, str):
            found = cause_of(self.causes, row.data)
            cid = found.id if found else None
        return next((c for c in self.causes if c.id == cid), None)

    def cause_at_cursor(self) -> Cause | None:
        """The cause of the row under the cursor (a cause, or a finding it explains): what the app's `X` fixes."""
        return self._cause_under_cursor()

    def action_expand(self, opened: bool) -> None:
        cause = self._cause_under_cursor()
        if cause is None:
            return
        (self.open.add if opened else self.open.discard)(cause.id)
        table = self.query_one(RowTable)
        table.set_rows(self._rows())
        table.move_to(self._row_of(cause.id))

    def action_expand_all(self) -> None:
        self.open = {c.id for c in self.causes} if len(self.open) < len(self.causes) else set()
        self.query_one(RowTable).set_rows(self._rows())

    @on(RowTable.Chosen)
    def _chosen(self, event: RowTable.Chosen) -> None:
        if event.row.key and event.row.key in self.inv.graph and not self.inv.graph.node(event.row.key).is_placeholder:
            self.dismiss(event.row.key)
        elif event.row.key:
            self.notify(f"{event.row.key} is a model {self.inv.graph.node(event.row.key).kind}"
                        if event.row.key in self.inv.graph else f"{event.row.key} is not on this graph",
                        markup=False)

    def action_close(self) -> None:
        self.dismiss(None)
