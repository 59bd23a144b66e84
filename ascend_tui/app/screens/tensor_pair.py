"""`TensorPairScreen`: one compared tensor pair up close, from the precision view's Enter.

With the two dumped tensor files (msprobe `task: tensor`; `.pt` read with weights_only, `.npy`
without pickle) it draws the histograms of |npu - bench| and of the relative error on log bins,
lists the worst elements with their indices and both values, and puts both sides' statistics side
by side (`checks.tensor_pair`, read in a worker thread). Without them it says why and how to get
them, and still shows the statistics the compare recorded. Enter or `w` focuses the operator.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Header, Static, TabbedContent, TabPane

from ascend_tui import fmt
from ascend_tui.app.screens.precision_rows import cell_text
from ascend_tui.app.screens.row_table import Column, Row, RowTable
from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.app.widgets.histogram import HistogramChart
from ascend_tui.checks.tensor_pair import PairDetail
from ascend_tui.errors import InputError

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

N_A = "N/A"
HOW_TO_DUMP = ("dump both runs with msprobe `task: tensor` (config.json \"task\": \"tensor\"; narrow it with "
               "\"tensor\": {\"scope\": [...], \"list\": [...]}) and open the two dumps together: "
               "ascend-tui open NPU_DUMP BENCH_DUMP")
_STATS = (("max", "max"), ("min", "min"), ("mean", "mean"), ("l2norm", "norm"))


def tensor_files(inv: Investigation, record: dict[str, Any]) -> tuple[str, str] | str:
    """The row's (target, golden) tensor file paths, or the reason there are none (and how to get them)."""
    raw = (inv.run.extra or {}).get("precision")
    dirs = raw.get("tensor_dirs") if isinstance(raw, dict) else None
    names = [record.get("npu_data_name"), record.get("bench_data_name")]
    mode = (inv.run.extra or {}).get("mode")
    if record.get("result") == "unmatched":
        return "this tensor has no counterpart on the other side: there is no pair to look into"
    if mode in ("statistics", "md5"):
        kept = "a checksum" if mode == "md5" else "max, min, mean and norm"
        return f"this compare is of a `task: {mode}` dump, which keeps {kept} per tensor, not the elements; {HOW_TO_DUMP}"
    if "npu_data_name" not in record:
        return f"this run's precision check kept no tensor files; {HOW_TO_DUMP}"
    if not all(isinstance(n, str) and n not in ("", N_A, "-1") for n in names):
        return "this row is a scalar or None argument (no tensor file was dumped for it)"
    if not (isinstance(dirs, list) and len(dirs) == 2):
        return (f"this compare result names the files ({names[0]}, {names[1]}) but not the dump folders they are in; "
                "open the two dumps together to see the elements: ascend-tui open NPU_DUMP BENCH_DUMP")
    return str(Path(dirs[0]) / str(names[0])), str(Path(dirs[1]) / str(names[1]))


class TensorPairScreen(Screen[str | None]):
    """The tensor pair of one precision row: error histograms, worst elements, both sides' statistics."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "back", id="pair.close"),
        Binding("enter,w", "focus_op", "op on graph", id="pair.focus-op"),
        Binding("1", "tab('errors')", "errors", id="pair.errors"),
        Binding("2", "tab('worst')", "worst", id="pair.worst"),
        Binding("3", "tab('stats')", "statistics", id="pair.stats"),
    ]
    DEFAULT_CSS = """
    TensorPairScreen #pair-head { height: auto; padding: 0 1; background: $panel; }
    TensorPairScreen #pair-note { height: auto; padding: 0 1; color: $text-muted; }
    TensorPairScreen TabbedContent { height: 1fr; }
    TensorPairScreen TabPane { padding: 0; }
    TensorPairScreen #pair-charts { height: 1fr; }
    """

    def __init__(self, inv: Investigation, record: dict[str, Any]) -> None:
        super().__init__()
        self.inv = inv
        self.record = record
        self.files = tensor_files(inv, record)
        self.detail: PairDetail | None = None
        self.error: str | None = None
        self._cancel = threading.Event()  # set when the screen goes: a big pair stops being read

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(self._head(), id="pair-head", markup=False)
        note = ("reading the two tensor files…" if isinstance(self.files, tuple) else f"no element data: {self.files}")
        yield Static(note, id="pair-note", markup=False)
        with TabbedContent(initial="errors"):
            with TabPane("1 Errors", id="errors"):
                yield Vertical(id="pair-charts")
            with TabPane("2 Worst", id="worst"):
                yield RowTable(self._worst_columns(), [], empty="no element data", id="pair-worst")
            with TabPane("3 Statistics", id="stats"):
                yield RowTable(self._stats_columns(), self._stats_rows(), id="pair-stats")
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        self.title = "Tensor pair"
        if isinstance(self.files, tuple):
            self._load(*self.files)

    # -- content ----------------------------------------------------------------------------

    def _head(self) -> str:
        r = self.record
        name, bench = str(r.get("name", "")), r.get("bench_name")
        other = f" vs {bench}" if isinstance(bench, str) and bench not in (N_A, name, "") else ""
        sides = [f"npu {r.get('npu_dtype', '?')} {r.get('npu_shape', '')}".rstrip(),
                 f"bench {r.get('bench_dtype', '?')} {r.get('bench_shape', '')}".rstrip()]
        metrics = []
        for key, label in (("cosine", "cosine"), ("max_abs", "max abs"), ("max_rel", "max rel"),
                           ("one_thousandth", "1‰"), ("result", "result")):
            v = r.get(key)
            if v is not None and v != N_A:
                metrics.append(f"{label} {v:.6f}" if key in ("cosine", "one_thousandth") and isinstance(v, float)
                               else f"{label} {cell_text(key, v, key != 'result')}")
        message = r.get("err_message")
        tail = f"\n{message}" if isinstance(message, str) and message not in (N_A, "") else ""
        return f"{name}{other}\n{' · '.join(sides)} · {' · '.join(metrics)}{tail}"

    @staticmethod
    def _worst_columns() -> list[Column]:
        return [Column("#", 3, align="right"), Column("index", None, grow=True), Column("npu", 11, align="right"),
                Column("bench", 11, align="right"), Column("abs err", 10, align="right"),
                Column("rel err", 10, align="right")]

    @staticmethod
    def _stats_columns() -> list[Column]:
        return [Column("", 22), Column("npu", 12, align="right"), Column("bench", 12, align="right"),
                Column("npu - bench", 12, align="right")]

    def _stats_rows(self) -> list[Row]:
        """Both sides' statistics: from the tensors once read, else as the compare recorded them."""
        rows: list[Row] = []
        d = self.detail
        if d is not None:
            rows.append(Row(("from the tensor files",), tone="section"))
            for label, attr in (("max", "max"), ("min", "min"), ("mean", "mean"), ("l2norm", "l2norm")):
                a, b = getattr(d.target, attr), getattr(d.golden, attr)
                rows.append(Row((label, _num(a), _num(b), _num(a - b))))
            for label, attr in (("elements", "numel"), ("NaN", "nan"), ("+Inf", "posinf"), ("-Inf", "neginf"),
                                ("zeros", "zeros")):
                a, b = getattr(d.target, attr), getattr(d.golden, attr)
                rows.append(Row((label, fmt.count(a), fmt.count(b), fmt.count(a - b)),
                                tone="warning" if attr in ("nan", "posinf", "neginf") and a != b else ""))
            rows.append(Row((f"max |npu - bench| {_num(d.max_abs)} · mean {_num(d.mean_abs)} · max rel "
                             f"{_num(d.max_rel)}",), tone="section"))
        rows.append(Row(("as the compare recorded them",), tone="section"))
        for label, key in _STATS:
            a, b = self.record.get(f"npu_{key}"), self.record.get(f"bench_{key}")
            diff = a - b if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None
            rows.append(Row((label, _num(a), _num(b), _num(diff) if diff is not None else "")))
        return rows

    # -- loading ----------------------------------------------------------------------------

    @work(thread=True, exclusive=True, exit_on_error=False, description="reading tensors")
    def _load(self, target: str, golden: str) -> None:
        from ascend_tui.offline.tensor_detail import pair_detail_of_files

        try:
            detail = pair_detail_of_files(target, golden, cancel=self._cancel)
        except InputError as exc:
            if not self._cancel.is_set():
                self.app.call_from_thread(self._show_error, str(exc))
            return
        if not self._cancel.is_set():
            self.app.call_from_thread(self._show, detail)

    def on_unmount(self) -> None:
        self._cancel.set()

    def _show_error(self, text: str) -> None:
        if not self.is_mounted:
            return
        self.error = text
        self.query_one("#pair-note", Static).update(f"the tensors could not be read: {text}")

    def _show(self, d: PairDetail) -> None:
        if not self.is_mounted:
            return
        self.detail = d
        shape = "×".join(str(x) for x in d.shape) or "scalar"
        mismatch = (f" · {fmt.count(d.nonfinite_mismatch)} NaN/Inf on one side only, first at "
                    f"{list(d.first_mismatch or ())}") if d.nonfinite_mismatch else ""
        self.query_one("#pair-note", Static).update(
            f"{fmt.count(d.numel)} elements ({shape}) · {fmt.count(d.abs_hist.zeros)} equal{mismatch} · "
            f"max |npu - bench| {_num(d.max_abs)} at {list(d.worst[0].index) if d.worst else '-'}")
        charts = self.query_one("#pair-charts", Vertical)
        charts.mount(HistogramChart(d.abs_hist, "|npu - bench| by log bin (elements)", id="pair-abs"),
                     HistogramChart(d.rel_hist, "relative error |npu - bench| / |bench| by log bin", id="pair-rel"))
        rows = [Row((str(n), ",".join(str(i) for i in w.index) or "()", _num(w.target), _num(w.golden),
                     _num(w.abs_err), _num(w.rel_err)), tone="warning" if math.isnan(w.abs_err) else "")
                for n, w in enumerate(d.worst, 1)]
        self.query_one("#pair-worst", RowTable).set_rows(rows)
        self.query_one("#pair-stats", RowTable).set_rows(self._stats_rows())

    # -- keys -------------------------------------------------------------------------------

    @on(TabbedContent.TabActivated)
    def _tab_changed(self, event: TabbedContent.TabActivated) -> None:
        tables = event.pane.query(RowTable)
        if tables:
            tables.first().focus()

    @on(RowTable.Chosen)
    def _chosen(self, event: RowTable.Chosen) -> None:
        self.action_focus_op()

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_focus_op(self) -> None:
        node = self.record.get("node")
        if isinstance(node, str) and node in self.inv.graph:
            self.dismiss(node)
        else:
            self.notify("this row has no operator on the graph", severity="warning", markup=False)

    def action_close(self) -> None:
        self.dismiss(None)


def _num(v: Any) -> str:
    """A value for the tables: numbers as magnitudes (6 significant digits), markers as written."""
    if v is None:
        return "—"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return fmt.magnitude(v, 6)
    return str(v)

