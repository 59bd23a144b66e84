"""`PrecisionScreen`: one row per compared tensor with msprobe's metrics and our attribution.

Rows come from the precision check's table in the run (`run.extra["precision"]`), written by the
offline msprobe compare and the live check alike. Any column sorts (its number key; again
reverses), `i` keeps only introduced rows, Enter focuses the row's operator on the graph.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Header, Static

from ascend_tui import fmt
from ascend_tui.app.screens.check_view import CheckView
from ascend_tui.app.widgets.charts import BandChart
from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.app.screens.row_table import Column, Row, RowTable, Tone

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

CHECK = "precision"
# (table key, header, numeric): the columns shown, in msprobe's order.
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("name", "tensor", False), ("cosine", "cosine", True), ("max_abs", "max abs err", True),
    ("max_rel", "max rel err", True), ("rmse", "rmse", True), ("one_thousandth", "1‰ ratio", True),
    ("result", "result", False), ("attribution", "attribution", False),
)
_TONE: dict[str, Tone] = {"error": "error", "warning": "warning"}
# The rows that found no counterpart (`run.extra["precision_unmatched"]`, written by the offline compare).
UNMATCHED = "precision_unmatched"
UNMATCHED_COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("side", "side", 7), ("name", "unmatched tensor", None), ("dtype", "dtype", 16), ("shape", "shape", 18))


def table(inv: Investigation) -> list[dict[str, Any]]:
    """The precision check's rows as dicts (empty when the run has none)."""
    raw = (inv.run.extra or {}).get(CHECK)
    if not isinstance(raw, dict) or not isinstance(raw.get("rows"), list):
        return []
    cols = list(raw.get("columns") or [])
    return [dict(zip(cols, r)) for r in raw["rows"] if isinstance(r, list) and len(r) == len(cols)]


def growth(inv: Investigation) -> dict[str, Any]:
    """The compare's error-growth profile (points in execution order, the dtype's u), or {} when dtypes matched."""
    raw = (inv.run.extra or {}).get(CHECK)
    g = raw.get("growth") if isinstance(raw, dict) else None
    return g if isinstance(g, dict) and isinstance(g.get("points"), list) and g["points"] else {}


def unmatched_table(inv: Investigation) -> list[dict[str, Any]]:
    """The compare's unmatched rows (side, name, record, dtype, shape) as dicts; empty when every row paired."""
    raw = (inv.run.extra or {}).get(UNMATCHED)
    if not isinstance(raw, dict) or not isinstance(raw.get("rows"), list):
        return []
    cols = list(raw.get("columns") or [])
    return [dict(zip(cols, r)) for r in raw["rows"] if isinstance(r, list) and len(r) == len(cols)]


def unmatched_summary(inv: Investigation) -> str:
    """' · N of M target rows and K of L golden rows unmatched' from the run, or '' when not known."""
    u = (inv.run.extra or {}).get("unmatched")
    if not isinstance(u, dict) or not isinstance(u.get("target"), dict) or not isinstance(u.get("golden"), dict):
        return ""
    t, g = u["target"], u["golden"]
    return (f" · unmatched: {fmt.count(t.get('unmatched', 0))} of {fmt.count(t.get('rows', 0))} target rows, "
            f"{fmt.count(g.get('unmatched', 0))} of {fmt.count(g.get('rows', 0))} golden (u lists them)")


def _number(v: Any) -> float:
    if isinstance(v, bool) or v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


_FIXED = frozenset({"cosine", "one_thousandth"})
NAME_WIDTH = 40  # long msprobe names keep their tail (".backward.output.2"), where they differ


def _cell(key: str, v: Any, numeric: bool) -> str:
    """A cell as text: cosine and ratios with 6 decimals (as msprobe rounds), errors as magnitudes."""
    if not numeric:
        text = "" if v is None else str(v)
        return "…" + text[-(NAME_WIDTH - 1):] if key == "name" and len(text) > NAME_WIDTH else text
    x = _number(v)
    if math.isnan(x):
        return str(v) if v is not None else "—"
    return f"{x:.6f}" if key in _FIXED else fmt.magnitude(x)


class PrecisionScreen(CheckView):
    """The precision view: compared tensors, sortable by any column, filterable to introduced errors."""

    VIEW_ID = "precision"
    TITLE = "Precision"
    KEY = "C"
    CHECK = "precision"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "back", id="view.close"),
        Binding("i", "toggle_introduced", "introduced only", id="precision.introduced"),
        Binding("u", "toggle_unmatched", "unmatched rows", id="precision.unmatched"),
        *[Binding(str(i + 1), f"sort({i})", f"sort by {label}", id=f"precision.sort-{key}", show=i < 2)
          for i, (key, label, _n) in enumerate(COLUMNS)],
    ]

    DEFAULT_CSS = """
    PrecisionScreen #precision-summary { height: auto; padding: 0 1; background: $panel; }
    PrecisionScreen #precision-status { height: 1; padding: 0 1; color: $text-muted; }
    """

    def __init__(self, inv: Investigation) -> None:
        super().__init__(inv)
        self.records = table(inv)
        self.sort_column: int | None = None
        self.descending = False
        self.introduced_only = False
        self.unmatched = unmatched_table(inv)
        self.show_unmatched = False

    @classmethod
    def available(cls, inv: Investigation | None) -> bool:
        return inv is not None and (bool(table(inv)) or bool(unmatched_table(inv)) or super().available(inv))

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(self._summary(), id="precision-summary", markup=False)
        g = growth(self.inv)
        if g:
            points = g["points"]
            yield BandChart([_number(p.get("units")) for p in points], float(g.get("op_band_units", 8.0)),
                            title=f"relative error in units of {g.get('dtype')}'s u, by execution position",
                            x_first=f"#{points[0].get('index')}", x_last=f"#{points[-1].get('index')}",
                            id="precision-growth")
        yield RowTable(self._columns(), self._rows(), empty="no compared tensors", id="precision-table")
        yield Static("", id="precision-status", markup=False)
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        self.title = "Precision"
        table_ = self.query_one(RowTable)
        table_.focus()
        self._update_status(table_)

    # -- content ----------------------------------------------------------------------------

    def _summary(self) -> str:
        found = [f for f in self.inv.findings if f.check == CHECK]
        introduced = [f for f in found if f.attribution == "introduced" and f.severity != "info"]
        inherited = sum(1 for f in found if f.attribution == "inherited")
        bad = sum(1 for r in self.records if r.get("result") == "error")
        first = f" · first introduced: {introduced[0].node}" if introduced else ""
        golden = self.inv.run.reference or "reference"
        raw = (self.inv.run.extra or {}).get(CHECK) or {}
        total = raw.get("rows_total") if isinstance(raw, dict) else None
        of = f" (of {fmt.count(total)} rows; the rest are scalars, None or unmatched)" \
            if isinstance(total, int) and total > len(self.records) else ""
        return (f"target {self.inv.run.dtype} vs {golden} · {fmt.plural(len(self.records), 'tensor')} compared{of}, "
                f"{fmt.count(bad)} in error · {len(introduced)} introduced, "
                f"{inherited} inherited{first}{unmatched_summary(self.inv)}")

    def _columns(self) -> list[Column]:
        if self.show_unmatched:
            return [Column(label, width, grow=width is None) for _k, label, width in UNMATCHED_COLUMNS]
        cols = []
        for i, (_key, label, numeric) in enumerate(COLUMNS):
            mark = ("▼" if self.descending else "▲") if self.sort_column == i else ""
            width = {"name": NAME_WIDTH, "result": 8, "attribution": 11}.get(COLUMNS[i][0])
            cols.append(Column(label + mark, width, align="right" if numeric else "left", grow=i == 0))
        return cols

    def _rows(self) -> list[Row]:
        if self.show_unmatched:
            return [Row(tuple(str(r.get(k, "")) for k, _l, _w in UNMATCHED_COLUMNS),
                        tone="muted" if r.get("side") == "golden" else "warning", data=r) for r in self.unmatched]
        records = [r for r in self.records if not self.introduced_only or r.get("attribution") == "introduced"]
        if self.sort_column is not None:
            key, _label, numeric = COLUMNS[self.sort_column]
            if numeric:
                present = [r for r in records if not math.isnan(_number(r.get(key)))]
                absent = [r for r in records if math.isnan(_number(r.get(key)))]
                present.sort(key=lambda r: _number(r.get(key)), reverse=self.descending)
                records = present + absent
            else:
                records = sorted(records, key=lambda r: str(r.get(key) or ""), reverse=self.descending)
        rows = []
        for r in records:
            cells = tuple(_cell(key, r.get(key), numeric) for key, _label, numeric in COLUMNS)
            tone = _TONE.get(str(r.get("result")), "")
            tones: tuple[Tone, ...] = ("",) * 7 + (("bad",) if r.get("attribution") == "introduced" else ("muted",))
            node = r.get("node")
            rows.append(Row(cells, key=node if isinstance(node, str) and node in self.inv.graph else None,
                            tone=tone, cell_tones=tones, data=r))
        return rows

    def _refresh(self) -> None:
        self.query_one(RowTable).set_rows(self._rows(), self._columns())
        self._update_status(self.query_one(RowTable))

    # -- events -----------------------------------------------------------------------------

    def _update_status(self, table_: RowTable) -> None:
        position, total = table_.position()
        shown = "introduced only · " if self.introduced_only else ""
        if self.show_unmatched:
            self.query_one("#precision-status", Static).update(
                f"unmatched rows: {fmt.count(len(self.unmatched))} · u compared rows · esc back")
            return
        if not total:
            text = f"{shown}nothing to show · i all rows · esc back"
        else:
            more = " · u unmatched rows" if self.unmatched else ""
            text = (f"{shown}row {position} of {total} · 1-8 sort · i introduced only{more} · enter focuses the op "
                    f"on the graph · esc back")
        self.query_one("#precision-status", Static).update(text)

    @on(RowTable.Highlighted)
    def _highlighted(self, event: RowTable.Highlighted) -> None:
        self._update_status(event.table)

    @on(RowTable.Chosen)
    def _chosen(self, event: RowTable.Chosen) -> None:
        if event.row.key is not None:
            self.dismiss(event.row.key)

    def action_sort(self, column: int) -> None:
        if self.sort_column == column:
            self.descending = not self.descending
        else:
            self.sort_column, self.descending = column, False
        self._refresh()

    def action_toggle_introduced(self) -> None:
        self.introduced_only = not self.introduced_only
        self._refresh()

    def action_toggle_unmatched(self) -> None:
        self.show_unmatched = not self.show_unmatched
        self._refresh()

    def action_close(self) -> None:
        self.dismiss(None)
