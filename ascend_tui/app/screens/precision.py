"""`PrecisionScreen`: one row per compared tensor with msprobe's metrics and our attribution.

Rows come from the precision check's table in the run (`run.extra["precision"]`), written by the
offline msprobe compare, the compare-result reader and the live check alike; every msprobe column
the table holds can be shown (`c` opens a checklist; the choice is kept in the config dir's
views.toml per compare mode). `s` sorts by the next shown column (worst first; `S` flips; a number
key sorts by that column), `f` cycles the result filter (error, warning, pass, unmatched), `/`
filters by name, `i` keeps only introduced rows. Enter opens the tensor pair (`TensorPairScreen`),
`w` focuses the row's operator on the graph. Rows are built only when drawn (`precision_rows`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Sequence

import numpy as np
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Header, Input, Static

from ascend_tui import fmt
from ascend_tui.app import config
from ascend_tui.app.screens.check_view import CheckView
from ascend_tui.app.screens.column_chooser import ColumnChooser
from ascend_tui.app.screens.precision_rows import (
    NAME_WIDTH, RESULTS, LazyRows, PrecisionRows, cell_text, number, width_of, worst_first,  # noqa: F401
)
from ascend_tui.app.widgets.charts import BandChart
from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.app.screens.row_table import Column, Row, RowTable, Tone
from ascend_tui.readers.msprobe.compare_columns import BY_KEY

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

CHECK = "precision"
NAME_MIN = 24  # the name column gives way down to this before other columns are dropped
_TONE: dict[str, Tone] = {"error": "error", "warning": "warning", "unmatched": "muted"}
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


def _has_rows(inv: Investigation, key: str) -> bool:
    """Whether the run's table `key` has a row (without turning 100,000 rows into dicts to find out)."""
    raw = (inv.run.extra or {}).get(key)
    return isinstance(raw, dict) and isinstance(raw.get("rows"), list) and bool(raw["rows"])


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


class _PrecisionTable(RowTable):
    """The precision rows: Enter opens the tensor pair here (the shared table's Enter says "focus op")."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "choose", "tensors", id="precision.tensors"),
    ]


class PrecisionScreen(CheckView):
    """The precision view: compared tensors with every msprobe column, sortable, filterable, drilled into."""

    VIEW_ID = "precision"
    TITLE = "Precision"
    KEY = "C"
    HOW_TO_GET = ("open a target and a golden msprobe dump together (ascend-tui open npu_dump gpu_dump), "
                  "a compare result CSV, or re-run with x and the precision check")
    CHECK = "precision"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "back", id="view.close"),
        Binding("s", "sort_next", "sort", id="precision.sort"),
        Binding("S", "sort_reverse", "reverse", id="precision.sort-reverse", show=False),
        Binding("f", "cycle_result", "result filter", id="precision.result-filter"),
        Binding("slash", "name_filter", "name filter", id="precision.name-filter"),
        Binding("c", "choose_columns", "columns", id="precision.columns"),
        Binding("w", "focus_op", "op on graph", id="precision.focus-op"),
        Binding("right,l", "scroll_columns(1)", "columns right", id="precision.columns-right", show=False),
        Binding("left,h", "scroll_columns(-1)", "columns left", id="precision.columns-left", show=False),
        Binding("i", "toggle_introduced", "introduced only", id="precision.introduced", show=False),
        Binding("u", "toggle_unmatched", "unmatched rows", id="precision.unmatched", show=False),
        *[Binding(str(i + 1), f"sort({i})", f"sort by column {i + 1}", id=f"precision.sort-{i + 1}", show=False)
          for i in range(9)],
    ]

    DEFAULT_CSS = """
    PrecisionScreen #precision-summary { height: auto; padding: 0 1; background: $panel; }
    PrecisionScreen #precision-status { height: 1; padding: 0 1; color: $text-muted; }
    PrecisionScreen #precision-filter { display: none; height: 3; }
    PrecisionScreen #precision-filter.shown { display: block; }
    """

    def __init__(self, inv: Investigation) -> None:
        super().__init__(inv)
        raw = (inv.run.extra or {}).get(CHECK)
        cols = list(raw.get("columns") or []) if isinstance(raw, dict) else []
        body = raw.get("rows") if isinstance(raw, dict) and isinstance(raw.get("rows"), list) else []
        mode = (inv.run.extra or {}).get("mode")
        self.data = PrecisionRows(cols, body, unmatched_table(inv) if cols else [],
                                  mode if isinstance(mode, str) else None,
                                  raw.get("stacks") if isinstance(raw, dict) else None)
        self.unmatched = unmatched_table(inv)
        self.shown_keys = self._saved_columns()
        self.sort_key: str | None = None
        self.descending = False
        self.result_filter = "all"
        self.needle = ""
        self.introduced_only = False
        self.show_unmatched = False
        self.shown_idx = np.arange(0)
        self._fitted: list[str] = list(self.shown_keys)
        self.col_offset = 0  # the first of the columns after the name shown, when not all fit

    @property
    def records(self) -> list[dict[str, Any]]:
        """The table's rows as dicts (built on each call: for tests and callers, not the view)."""
        return table(self.inv)

    @property
    def mode_key(self) -> str:
        return self.data.mode or "tensor"

    def _saved_columns(self) -> list[str]:
        keys = {c.key for c in self.data.available()}
        saved = config.load_view_choice(self.VIEW_ID, self.mode_key)
        chosen = [k for k in (saved or []) if k in keys]
        chosen = chosen or self.data.defaults()
        return chosen if "name" in chosen or "name" not in keys else ["name", *chosen]

    @classmethod
    def available(cls, inv: Investigation | None) -> bool:
        return inv is not None and (_has_rows(inv, CHECK) or _has_rows(inv, UNMATCHED) or super().available(inv))

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(self._summary(), id="precision-summary", markup=False)
        g = growth(self.inv)
        if g:
            points = g["points"]
            yield BandChart([number(p.get("units")) for p in points], float(g.get("op_band_units", 8.0)),
                            title=f"relative error in units of {g.get('dtype')}'s u, by execution position",
                            x_first=f"#{points[0].get('index')}", x_last=f"#{points[-1].get('index')}",
                            id="precision-growth")
        self.shown_idx = self._select()
        yield _PrecisionTable(self._columns(), self._rows(), empty="no compared tensors", id="precision-table")
        yield Input(placeholder="name contains (enter keeps it, esc clears)", id="precision-filter")
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
        rows = self.data.table_rows  # every row of the table as it came (a compare result's unmatched ones too)
        bad = int(np.count_nonzero(self.data.results() == "error"))
        first = f" · first introduced: {introduced[0].node}" if introduced else ""
        golden = self.inv.run.reference or "reference"
        raw = (self.inv.run.extra or {}).get(CHECK) or {}
        total = raw.get("rows_total") if isinstance(raw, dict) else None
        of = f" (of {fmt.count(total)} rows; the rest are scalars, None or unmatched)" \
            if isinstance(total, int) and total > rows else ""
        return (f"target {self.inv.run.dtype} vs {golden} · {fmt.plural(rows, 'tensor')} compared{of}, "
                f"{fmt.count(bad)} in error · {fmt.count(len(introduced))} introduced, "
                f"{fmt.count(inherited)} inherited{first}{unmatched_summary(self.inv)}")

    def _select(self) -> np.ndarray:
        self._fitted = self._fitting()
        idx = self.data.select(self.result_filter, self.introduced_only, self.needle)
        if self.sort_key is not None:
            idx = self.data.sort(idx, self.sort_key, self.descending)
        return idx

    def _fitting(self) -> list[str]:
        """The shown columns that fit the screen's width: the name (at least NAME_MIN wide) and result always, then
        the others from the column offset (`←`/`→`) on while they fit; the status line says how many are off."""
        width = (self.size.width or self.app.size.width or 160) - 3  # the leading space and the scrollbar gutter
        keys = self.shown_keys
        always = [k for k in keys if k in ("name", "result")]
        others = [k for k in keys if k not in always]
        self.col_offset = max(0, min(self.col_offset, len(others) - 1))
        used = sum(NAME_MIN if k == "name" else width_of(BY_KEY[k]) + 2 for k in always)
        fit = set(always)
        for k in others[self.col_offset:]:
            w = width_of(BY_KEY[k]) + 2  # a gap, and room for a sort mark
            if used + w > width:
                break
            used += w
            fit.add(k)
        return [k for k in keys if k in fit]

    def action_scroll_columns(self, delta: int) -> None:
        """Show the columns further right (or back left) when not all fit."""
        others = [k for k in self.shown_keys if k not in ("name", "result")]
        at = max(0, min(self.col_offset + delta, len(others) - 1))
        if delta > 0 and all(k in self._fitted for k in others[self.col_offset:]):
            return  # the last columns are already on screen
        if at != self.col_offset:
            self.col_offset = at
            self._refresh(keep=True)

    def on_resize(self) -> None:
        if self.is_mounted and self._fitted != self._fitting():
            self._refresh(keep=True)

    def _columns(self) -> list[Column]:
        if self.show_unmatched:
            return [Column(label, width, grow=width is None) for _k, label, width in UNMATCHED_COLUMNS]
        cols = []
        for key in self._fitted:
            c = BY_KEY[key]
            mark = ("▼" if self.descending else "▲") if self.sort_key == key else ""
            width = NAME_MIN if key == "name" else width_of(c)  # the name grows into what the others leave
            cols.append(Column(c.label + mark, width + (1 if mark else 0),
                               align="right" if c.numeric else "left", grow=key == "name",
                               cut="start" if key in ("name", "bench_name", "data_name", "node") else "end"))
        return cols

    def _make_row(self, i: int) -> Row:
        data = self.data
        cells, tones = [], []
        for key in self._fitted:
            c = BY_KEY[key]
            cells.append(cell_text(key, data.value(i, key), c.numeric))
            tone: Tone = ""
            if key == "attribution":
                tone = "bad" if data.value(i, key) == "introduced" else "muted"
            tones.append(tone)
        record = data.record(i)
        node = record.get("node")
        return Row(tuple(cells), key=node if isinstance(node, str) and node in self.inv.graph else None,
                   tone=_TONE.get(str(record.get("result")), ""), cell_tones=tuple(tones), data=record)

    def _rows(self) -> Sequence[Row]:
        if self.show_unmatched:
            return [Row(tuple(str(r.get(k, "")) for k, _l, _w in UNMATCHED_COLUMNS),
                        tone="muted" if r.get("side") == "golden" else "warning", data=r) for r in self.unmatched]
        return LazyRows(self.shown_idx, self._make_row)

    def _refresh(self, keep: bool = False) -> None:
        table_ = self.query_one(RowTable)
        current, cursor, before = table_.current, table_.cursor, self.shown_idx
        self.shown_idx = self._select()
        table_.set_rows(self._rows(), self._columns())
        if keep and current is not None and isinstance(current.data, dict) and not self.show_unmatched:
            same = before.shape == self.shown_idx.shape and np.array_equal(before, self.shown_idx)
            at = cursor if same else self._position_of(current.data)  # columns changed, not rows: same place
            if at is not None:
                table_.move_to(at)
        self._update_status(table_)

    def _position_of(self, record: dict[str, Any]) -> int | None:
        """Where the row of `record` now is (after a sort or a column change), if still shown."""
        name, node = record.get("name"), record.get("node")
        col_name, col_node = self.data.col.get("name"), self.data.col.get("node")
        if col_name is None:
            return None
        for pos, i in enumerate(self.shown_idx.tolist()):
            r = self.data.raw[i]
            if r[col_name] == name and (col_node is None or r[col_node] == node):
                return pos
        return None

    # -- events -----------------------------------------------------------------------------

    def _update_status(self, table_: RowTable) -> None:
        if self.show_unmatched:
            self.query_one("#precision-status", Static).update(
                f"unmatched rows: {fmt.count(len(self.unmatched))} · u compared rows · esc back")
            return
        position, total = table_.position()
        parts = []
        if self.result_filter != "all":
            parts.append(f"result {self.result_filter}")
        if self.introduced_only:
            parts.append("introduced only")
        if self.needle:
            parts.append(f"name ~ {self.needle!r}")
        shown = " · ".join(parts) + " · " if parts else ""
        if not total:
            text = f"{shown}nothing to show · f all results · / clears the name · esc back"
        else:
            sort = f" · sorted by {BY_KEY[self.sort_key].label}" if self.sort_key else ""
            more = f" · {fmt.count(self.data.unmatched)} unmatched (f)" if self.data.unmatched and \
                self.result_filter != "unmatched" else ""
            hidden = len(self.shown_keys) - len(self._fitted)
            narrow = f" · {hidden} column{'s' if hidden > 1 else ''} off screen (←/→)" if hidden else ""
            text = (f"{shown}row {fmt.count(position)} of {fmt.count(total)}{sort}{more}{narrow} · enter tensors · "
                    "w op on graph · c columns")
        self.query_one("#precision-status", Static).update(text)

    @on(RowTable.Highlighted)
    def _highlighted(self, event: RowTable.Highlighted) -> None:
        self._update_status(event.table)

    @on(RowTable.Chosen)
    def _chosen(self, event: RowTable.Chosen) -> None:
        if self.show_unmatched or not isinstance(event.row.data, dict):
            if event.row.key is not None:
                self.dismiss(event.row.key)
            return
        from ascend_tui.app.screens.tensor_pair import TensorPairScreen

        def back(node: str | None) -> None:
            if node is not None:
                self.dismiss(node)
        self.app.push_screen(TensorPairScreen(self.inv, event.row.data), back)

    def action_focus_op(self) -> None:
        row = self.query_one(RowTable).current
        if row is not None and row.key is not None:
            self.dismiss(row.key)
        elif row is not None:
            self.notify("this row has no operator on the graph", severity="warning", markup=False)

    def action_sort(self, column: int) -> None:
        if self.show_unmatched or column >= len(self.shown_keys):
            return
        self._sort_by(self.shown_keys[column])

    def _sort_by(self, key: str, again_reverses: bool = True) -> None:
        if self.sort_key == key and again_reverses:
            self.descending = not self.descending
        else:
            self.sort_key, self.descending = key, worst_first(key)
        self._refresh()  # a sort shows its top

    def action_sort_next(self) -> None:
        """Sort by the next shown column (worst first); after the last, back to the table's own order."""
        if self.show_unmatched:
            return
        keys = self.shown_keys
        if self.sort_key not in keys:
            self._sort_by(keys[0], again_reverses=False)
            return
        at = keys.index(self.sort_key) + 1
        if at >= len(keys):
            self.sort_key, self.descending = None, False
            self._refresh()
        else:
            self._sort_by(keys[at], again_reverses=False)

    def action_sort_reverse(self) -> None:
        if self.sort_key is not None and not self.show_unmatched:
            self.descending = not self.descending
            self._refresh()

    def action_cycle_result(self) -> None:
        self.show_unmatched = False
        self.result_filter = RESULTS[(RESULTS.index(self.result_filter) + 1) % len(RESULTS)]
        if self.result_filter == "unmatched" and not self.data.unmatched:
            self.result_filter = RESULTS[0]
        self._refresh()

    def set_result_filter(self, result: str) -> None:
        """Show only rows with this result (one of RESULTS)."""
        self.result_filter = result if result in RESULTS else "all"
        self._refresh()

    def action_name_filter(self) -> None:
        self.data.names()  # built once now, so each key typed only scans them
        box = self.query_one("#precision-filter", Input)
        box.add_class("shown")
        box.value = self.needle
        box.focus()

    @on(Input.Changed, "#precision-filter")
    def _needle_changed(self, event: Input.Changed) -> None:
        self.needle = event.value
        self._refresh()

    @on(Input.Submitted, "#precision-filter")
    def _needle_done(self, event: Input.Submitted) -> None:
        self._close_filter()

    def _close_filter(self) -> None:
        box = self.query_one("#precision-filter", Input)
        box.remove_class("shown")
        self.query_one(RowTable).focus()

    def action_choose_columns(self) -> None:
        if self.show_unmatched:
            return
        choices = [(c.key, f"{c.header}" + (f"  ({c.label})" if c.label.lower() not in c.header.lower() else ""))
                   for c in self.data.available()]

        def chosen(keys: list[str] | None) -> None:
            if keys is None:
                return
            self.shown_keys = keys or ["name"]
            if self.sort_key not in self.shown_keys:
                self.sort_key, self.descending = None, False
            try:
                config.save_view_choice(self.VIEW_ID, self.mode_key, self.shown_keys)
            except OSError as exc:
                self.notify(f"columns not saved: {config.config_dir()}: {exc.strerror or exc}", severity="warning",
                            markup=False)
            self._refresh(keep=True)
        self.app.push_screen(ColumnChooser(choices, self.shown_keys, self.data.defaults(), fixed=("name",),
                                           title=f"precision columns ({self.mode_key} compare)"), chosen)

    def action_toggle_introduced(self) -> None:
        self.introduced_only = not self.introduced_only
        self._refresh()

    def action_toggle_unmatched(self) -> None:
        self.show_unmatched = not self.show_unmatched
        self._refresh()

    def action_close(self) -> None:
        box = self.query_one("#precision-filter", Input)
        if box.has_focus:
            if box.value:
                box.value = ""
            self._close_filter()
            return
        self.dismiss(None)
