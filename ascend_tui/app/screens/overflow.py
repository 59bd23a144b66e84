"""`OverflowScreen`: where Inf/NaN start, how they spread, which chains amplify them, and how much range is left.

Three lists over the overflow check's findings and the run's statistics: findings (origins,
then propagating ops), amplification chains (hop by hop with growth), and headroom per op
in bits of the run's dtype. Choosing a row dismisses with the operator to focus on the graph.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, overload

import numpy as np
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Header, Static, TabbedContent, TabPane

from ascend_tui.app.screens.check_view import CheckView
from ascend_tui.app.screens.row_table import Column, Row, RowTable, Tone
from ascend_tui.app.widgets.charts import log_axis, log_bar, log_span
from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.checks.overflow import range_of
from ascend_tui.fmt import count, magnitude, percent, plural, ratio
from ascend_tui.evidence import SEVERITY_RANK, Finding

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

CHECK = "overflow"

def dtype_max(dtype: str) -> float | None:
    """The largest finite value of a floating dtype (`torch.float16`, `fp16`, `float16` alike), else None."""
    found = range_of(dtype)
    return found.max if found is not None else None


class Headroom:
    """Headroom per operator as columns, least first: how many doublings each op's largest value can take.

    Columns rather than one record per op, so 100k-operator graphs cost a few arrays.
    """

    __slots__ = ("nodes", "bits", "abs_max", "dtypes", "source")

    def __init__(self, nodes: list[str], bits: np.ndarray, abs_max: np.ndarray, dtypes: list[str],
                 source: str) -> None:
        self.nodes = nodes
        self.bits = bits
        self.abs_max = abs_max
        self.dtypes = dtypes
        self.source = source

    def __len__(self) -> int:
        return len(self.nodes)

    def past_range(self) -> int:
        """How many operators' values do not fit their dtype (negative headroom)."""
        return int(np.count_nonzero(self.bits < 0))


def headroom(inv: Investigation) -> Headroom:
    """`log2(finfo(dtype).max / abs_max)` per operator, least first, with the statistics it came from.

    abs_max comes from the reference run when there is one (what the values *should* be), else
    from the target run; dtype is the op's floating output dtype, or the run's. Negative bits: the
    true value does not fit; -inf: the target already holds Inf or NaN; integer outputs are skipped.
    """
    table = inv.reference if inv.reference is not None and len(inv.reference) else inv.stats
    source = "reference" if table is inv.reference else "target"
    where: dict[str, int] = {}
    ids: list[str] = []
    largest: list[float] = []
    for (node, _slot), value in zip(table.keys(), table.column("abs_max").tolist()):
        i = where.get(node)
        if i is None:
            where[node] = len(ids)
            ids.append(node)
            largest.append(value)
        elif value > largest[i] or value != value:
            largest[i] = value
    limits: dict[str, tuple[str, float | None]] = {}
    nodes: list[str] = []
    values: list[float] = []
    tops: list[float] = []
    dtypes: list[str] = []
    order: list[int] = []
    graph = inv.graph
    for node_id, value in zip(ids, largest):
        node = graph.get(node_id)
        if node is None or node.is_placeholder:
            continue
        meta = next((m for m in node.outputs if m is not None), None)
        raw = meta.dtype if meta is not None else inv.run.dtype
        if raw not in limits:
            limits[raw] = (raw.removeprefix("torch."), dtype_max(raw))
        name, top = limits[raw]
        if top is None:
            continue
        nodes.append(node_id)
        values.append(value)
        tops.append(top)
        dtypes.append(name)
        order.append(node.index)
    abs_max = np.array(values, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        bits = np.log2(np.array(tops, dtype=np.float64) / abs_max)
    bits[np.isnan(bits)] = -np.inf
    rank = np.lexsort((np.array(order, dtype=np.int64), bits))
    return Headroom([nodes[i] for i in rank], bits[rank], abs_max[rank], [dtypes[i] for i in rank], source)


class HeadroomRows(Sequence[Row]):
    """The headroom list as table rows, each built when the table paints it."""

    def __init__(self, data: Headroom, inv: Investigation) -> None:
        self.data = data
        self.graph = inv.graph

    def __len__(self) -> int:
        return len(self.data)

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return [self._row(i) for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return self._row(index % len(self))

    def _row(self, i: int) -> Row:
        d = self.data
        bits = float(d.bits[i])
        node = self.graph.node(d.nodes[i])
        return Row((_bits_text(bits), magnitude(float(d.abs_max[i])), d.dtypes[i], node.id, node.op_type,
                    node.module or "(root)"), key=node.id, cell_tones=(_bits_tone(bits),))


@dataclass(frozen=True, slots=True)
class Hop:
    """One operator on an amplification chain: its magnitude, the growth over the hop before, the target's abs max."""

    node: str
    op_type: str
    module: str
    magnitude: float
    growth: float | None
    target_abs_max: float | None


def amplification_chains(inv: Investigation) -> list[tuple[Finding, list[Hop]]]:
    """The chains the overflow check walked upstream from each origin, source first, with growth per hop.

    Magnitudes are the check's (the reference run's where there is one: a float16 run cannot
    show how far past its range a value went); the target's own abs max sits beside them.
    Inherited findings only point back at their origin, so they add no chain; repeats are dropped.
    """
    seen: set[tuple[str, ...]] = set()
    chains: list[tuple[Finding, list[Hop]]] = []
    for f in _overflow_findings(inv):
        rc = f.root_cause
        if f.attribution == "inherited" or rc is None or len(rc.chain) < 2:
            continue
        links = list(reversed(rc.chain))
        key = tuple(link.node for link in links)
        if key in seen:
            continue
        seen.add(key)
        hops: list[Hop] = []
        prev: float | None = None
        for link in links:
            measured = inv.stats.outputs(link.node)
            target = max(s.abs_max for s in measured) if measured else None
            hops.append(Hop(link.node, link.op_type, link.module, link.value, _growth(prev, link.value), target))
            prev = link.value
        chains.append((f, hops))
    return chains


def _growth(prev: float | None, value: float) -> float | None:
    if prev is None or not math.isfinite(prev) or not math.isfinite(value) or prev <= 0:
        return None
    return value / prev


def _overflow_findings(inv: Investigation) -> list[Finding]:
    return [f for f in inv.findings if f.check == CHECK]


def _bits_text(bits: float) -> str:
    if math.isinf(bits):
        return "∞" if bits > 0 else "none"
    return f"{bits:.1f}"


def _bits_tone(bits: float) -> Tone:
    if bits < 0:
        return "bad"
    if bits < 4:
        return "warning"
    return "muted" if math.isinf(bits) else ""


CHART_WIDTH = 22  # the chain chart's column: a decade every few cells, and the table still fits 80 columns

_SEVERITY_TONE: dict[str, Tone] = {"error": "error", "warning": "warning", "info": "info"}


class OverflowScreen(CheckView):
    """The overflow view: findings, amplification chains and headroom; Enter focuses the op on the graph."""

    VIEW_ID = "overflow"
    TITLE = "Overflow"
    KEY = "o"
    HOW_TO_GET = "open an msprobe overflow_check dump with it, or re-run with x and the overflow check"
    CHECK = "overflow"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "back", id="view.close"),
        Binding("1", "tab('findings')", "findings", id="overflow.findings"),
        Binding("2", "tab('chains')", "chains", id="overflow.chains"),
        Binding("3", "tab('headroom')", "headroom", id="overflow.headroom"),
    ]

    DEFAULT_CSS = """
    OverflowScreen #overflow-summary { height: auto; padding: 0 1; background: $panel; }
    OverflowScreen TabbedContent { height: 1fr; }
    OverflowScreen TabPane { padding: 0; }
    OverflowScreen #overflow-status { height: 1; padding: 0 1; color: $text-muted; }
    """

    def __init__(self, inv: Investigation) -> None:
        super().__init__(inv)
        self.headroom = headroom(inv)
        self.chains = amplification_chains(inv)

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(self._summary(), id="overflow-summary", markup=False)
        with TabbedContent(initial="findings"):
            with TabPane("1 Findings", id="findings"):
                yield RowTable(*self._finding_table(), empty="no overflow findings", id="findings-table")
            with TabPane("2 Chains", id="chains"):
                yield RowTable(*self._chain_table(), empty="no amplification chains", id="chains-table")
            with TabPane("3 Headroom", id="headroom"):
                yield RowTable(*self._headroom_table(), empty="no floating-point statistics", id="headroom-table")
        yield Static("", id="overflow-status", markup=False)
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        self.title = "Overflow"
        self.query_one("#findings-table", RowTable).focus()
        self._update_status(self.query_one("#findings-table", RowTable))

    # -- content ----------------------------------------------------------------------------

    def _summary(self) -> str:
        found = _overflow_findings(self.inv)
        origins = sum(1 for f in found if f.attribution != "inherited")
        spreading = len(found) - origins
        dtype = self.inv.run.dtype
        top = dtype_max(dtype)
        limit = f"max {magnitude(top)}" if top is not None else "not a floating dtype"
        past = self.headroom.past_range()
        chart = " · chains on a log axis, │ at the dtype max" if self.chains and top is not None else ""
        text = (f"run dtype {dtype} ({limit}){chart} · {plural(origins, 'origin')}, "
                f"{count(spreading)} propagating · {plural(len(self.chains), 'chain')} · "
                f"{plural(len(self.headroom), 'op')} measured, {count(past)} past their range · "
                f"headroom from {self.headroom.source} stats")
        effect = self.inv.run.extra.get("output_effect")
        if isinstance(effect, dict):
            text += "\neffect on the outputs: " + effect_line(effect)
        return text

    def _finding_table(self) -> tuple[list[Column], list[Row]]:
        columns = [Column("sev"), Column("kind"), Column("operator", grow=True), Column("op type"),
                   Column("module"), Column("message", grow=True)]
        found = _overflow_findings(self.inv)
        origins = sorted((f for f in found if f.attribution != "inherited"), key=_order)
        spreading = sorted((f for f in found if f.attribution == "inherited"), key=_order)
        rows: list[Row] = []
        for title, group in (("origins (introduced here)", origins), ("propagating (inherited)", spreading)):
            if not group:
                continue
            rows.append(Row((f"{title}: {count(len(group))}",), tone="section"))
            for f in group:
                rows.append(Row((f.severity, f.kind, f.node, f.op_type, f.module or "(root)", f.message),
                                key=f.node, tone=_SEVERITY_TONE.get(f.severity, ""), data=f))
        return columns, rows

    def _chain_table(self) -> tuple[list[Column], list[Row]]:
        limit = dtype_max(self.inv.run.dtype)
        span = log_span([h.magnitude for _f, hops in self.chains for h in hops], limit)
        columns = [Column("hop", align="right"), Column("magnitude", align="right"), Column("growth", align="right"),
                   Column(log_axis(span, CHART_WIDTH), width=CHART_WIDTH),
                   Column("target", align="right"), Column("operator", grow=True), Column("op type"),
                   Column("module")]
        rows: list[Row] = []
        for finding, hops in self.chains:
            rc = finding.root_cause
            reason = f": {rc.reason}" if rc is not None and rc.reason else ""
            rows.append(Row((f"{finding.kind} at {finding.node}{reason}",), key=finding.node, tone="section"))
            for i, hop in enumerate(hops, 1):
                growth = "" if hop.growth is None else ratio(hop.growth)
                target = "—" if hop.target_abs_max is None else magnitude(hop.target_abs_max)
                bad = hop.target_abs_max is not None and not math.isfinite(hop.target_abs_max)
                grow_tone: Tone = "warning" if hop.growth is not None and hop.growth >= 2 else ""
                past = limit is not None and hop.magnitude >= limit
                cause = rc is not None and hop.node == rc.node
                rows.append(Row((str(i), magnitude(hop.magnitude), growth, log_bar(hop.magnitude, span, CHART_WIDTH,
                                                                                   limit),
                                 target, hop.node, hop.op_type, hop.module or "(root)"), key=hop.node,
                                tone="bad" if cause else "",
                                cell_tones=("", "", grow_tone, "bad" if past else "info", "bad" if bad else "")))
        return columns, rows

    def _headroom_table(self) -> tuple[list[Column], Sequence[Row]]:
        columns = [Column("bits", align="right"), Column("abs max", align="right"), Column("dtype"),
                   Column("operator", grow=True), Column("op type"), Column("module")]
        return columns, HeadroomRows(self.headroom, self.inv)

    # -- events -----------------------------------------------------------------------------

    def _update_status(self, table: RowTable) -> None:
        position, total = table.position()
        if not total:
            text = "nothing to focus here · esc back"
        else:
            text = f"row {position} of {total} · enter focuses the op on the graph · esc back"
        self.query_one("#overflow-status", Static).update(text)

    @on(RowTable.Highlighted)
    def _highlighted(self, event: RowTable.Highlighted) -> None:
        self._update_status(event.table)

    @on(RowTable.Chosen)
    def _chosen(self, event: RowTable.Chosen) -> None:
        if event.row.key is not None:
            self.dismiss(event.row.key)

    @on(TabbedContent.TabActivated)
    def _tab_changed(self, event: TabbedContent.TabActivated) -> None:
        table = event.pane.query_one(RowTable)
        table.focus()
        self._update_status(table)

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_close(self) -> None:
        self.dismiss(None)


def _order(f: Finding) -> tuple[int, int]:
    return (f.index if f.index >= 0 else 1 << 40, SEVERITY_RANK.get(f.severity, 9))


def effect_line(effect: dict[str, object]) -> str:
    """The overflow check's measured effect on the model's outputs, with the numbers the precision check uses."""
    def num(key: str) -> float:
        value = effect.get(key)
        return float(value) if isinstance(value, (int, float)) else math.nan

    cosine, err = num("cosine"), num("rel_l2")
    parts = [f"cosine {'NaN' if math.isnan(cosine) else f'{cosine:.6g}'}",
             f"relative L2 error {'NaN' if math.isnan(err) else percent(min(err, 99.99))} against float32"]
    zeroed, rows = effect.get("rows_zeroed"), effect.get("rows")
    if isinstance(zeroed, int) and zeroed:
        parts.append(f"{count(zeroed)} of {count(rows or 0)} rows became 0")
    nonfinite = effect.get("nonfinite")
    if isinstance(nonfinite, int) and nonfinite:
        parts.append(f"{count(nonfinite)} NaN/Inf where float32 is finite")
    verdict = "beyond" if effect.get("damaged") else "within"
    return f"{', '.join(parts)} ({verdict} the {effect.get('dtype', 'run')} thresholds)"
