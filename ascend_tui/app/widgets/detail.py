"""`Detail`: everything known about the focused operator, target and reference side by side.

The text is built as rich `Text` (never parsed as markup: operator names contain `[`),
styled only through component classes that read theme variables.
"""

from __future__ import annotations

import linecache
import math
import weakref
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ascend_tui.app.widgets.scrolling import set_virtual_size
from ascend_tui.app.widgets.styles import cell_style
from ascend_tui.checks.overflow import range_of
from ascend_tui.fmt import count, magnitude
from ascend_tui.evidence import HIST_EDGES_LOG2

if TYPE_CHECKING:
    from ascend_tui.evidence import Finding, TensorStats
    from ascend_tui.investigation import Investigation

STAT_ROWS: tuple[tuple[str, str], ...] = (
    ("min", "min"), ("max", "max"), ("mean", "mean"), ("abs max", "abs_max"), ("l2 norm", "l2norm"),
    ("NaN", "nan_count"), ("Inf", "inf_count"), ("zeros", "zero_count"), ("numel", "numel"),
)
StyleOf = Callable[[str], Style]


class Detail(ScrollView, can_focus=True):
    """Shapes, statistics, a magnitude bar, source and findings of one operator.

    A Line-API view of the text's lines: a new operator repaints the pane, and lays nothing out (its
    scrollbar is always there, so a longer or shorter text moves no other widget: `set_virtual_size`).
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "detail--title", "detail--heading", "detail--muted", "detail--bad", "detail--error",
        "detail--warning", "detail--info", "detail--bar", "detail--limit", "detail--code",
    }
    DEFAULT_CSS = """
    Detail { padding: 0 1; overflow-x: hidden; overflow-y: scroll; }
    Detail > .detail--title { text-style: bold; color: $foreground; }
    Detail > .detail--heading { text-style: bold; color: $secondary; }
    Detail > .detail--muted { color: $text-muted; }
    Detail > .detail--bad { color: $error; text-style: bold; }
    Detail > .detail--error { color: $error; text-style: bold; }
    Detail > .detail--warning { color: $warning; text-style: bold; }
    Detail > .detail--info { color: $primary; }
    Detail > .detail--bar { color: $accent; }
    Detail > .detail--limit { color: $error; }
    Detail > .detail--code { color: $foreground; background: $boost; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.node_id: str | None = None
        self._inv: Investigation | None = None
        self._note: str | None = None  # a line of status shown instead of an operator
        self._text = Text("no operator selected")
        self._lines: list[Text] = []  # the text's lines at the width they were cut for
        self._width = -1
        self._strips: dict[int, Strip] = {}
        self._base: Style | None = None  # the pane's own style, under every line

    @property
    def text(self) -> str:
        """The whole text (lines scrolled out of view too), as a test or a screen reader sees it."""
        return self._text.plain

    def show(self, inv: Investigation | None, node_id: str | None, *, force: bool = False) -> None:
        """Describe `node_id` (None: an empty pane with a hint); nothing to do if it is shown already, unless `force`."""
        if not force and inv is self._inv and node_id == self.node_id and self._note is None and self._width >= 0:
            return
        self._inv, self.node_id, self._note = inv, node_id, None
        self._paint()

    def note(self, text: str) -> None:
        """Show a line of status instead of an operator (while the first investigation loads)."""
        self._inv, self.node_id, self._note = None, None, text
        self._paint()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base = None
        if self.is_mounted:
            self.call_later(self._paint)  # the text carries the styles it was made with

    def on_mount(self) -> None:
        self._paint()

    def _paint(self) -> None:
        if self._note is not None:
            text = Text(self._note, style=self._style("detail--muted"))
        elif self._inv is None:
            text = welcome(self._style)
        elif self.node_id is None or self.node_id not in self._inv.graph:
            text = Text("no operator selected", style=self._style("detail--muted"))
        else:
            text = describe(self._inv, self.node_id, self._style)
        self._text = text
        self._cut(self.scrollable_content_region.width)

    def _cut(self, width: int) -> None:
        """Cut the text into the lines of `width` cells (a long line hangs under its start) and show them."""
        if not self.is_mounted:
            return
        console = self.app.console
        text = self._text
        if width >= 20:
            self._lines = list(hanging(text, width, console).split("\n", allow_blank=True))
        else:  # too narrow to hang lines under their start
            self._lines = list(text.wrap(console, max(1, width)))
        self._width = width
        self._strips = {}
        set_virtual_size(self, Size(width, len(self._lines)))
        self.refresh()

    def on_resize(self, _event: events.Resize) -> None:
        if self.scrollable_content_region.width != self._width:
            self._cut(self.scrollable_content_region.width)

    def render_line(self, y: int) -> Strip:
        row = int(self.scroll_y) + y
        width = self.scrollable_content_region.width  # the lines' own until a resize has them cut again
        if self._base is None:
            self._base = self.rich_style  # walks every ancestor's styles: once, not per line
        base = self._base
        if row >= len(self._lines):
            return Strip.blank(width, base)
        strip = self._strips.get(row)
        if strip is None or strip.cell_length != width:
            segments = list(self._lines[row].render(self.app.console, end=""))
            strip = Strip(Segment.apply_style(segments, base)).adjust_cell_length(width, base)
            self._strips[row] = strip
        return strip

    def page(self, direction: int) -> None:
        """Scroll by a page, whatever has the focus (the list keeps it)."""
        self.scroll_to(y=self.scroll_y + direction * max(1, self.scrollable_content_region.height - 2), animate=False)

    def _style(self, name: str) -> Style:
        return cell_style(self, name)


def hanging(text: Text, width: int, console: Console) -> Text:
    """`text` wrapped to `width`, each wrapped line indented under its own first line (plus two cells)."""
    if width < 20:
        return text
    out = Text(no_wrap=True, overflow="crop")
    for n, line in enumerate(text.split("\n", allow_blank=True)):
        if n:
            out.append("\n")
        plain = line.plain
        indent = len(plain) - len(plain.lstrip(" "))
        if len(plain) <= width:
            out.append_text(line)
            continue
        hang = indent + 2
        pieces = line[indent:].wrap(console, width - hang, overflow="fold")
        for k, piece in enumerate(pieces):
            piece.rstrip()
            out.append("\n" + " " * hang if k else " " * indent)
            out.append_text(piece)
    return out


def welcome(style: StyleOf) -> Text:
    """What the pane says before anything is open."""
    out = Text()
    out.append("Nothing open yet.\n\n", style("detail--title"))
    for key, what in (("O", "open an investigation, an msprobe dump folder, a sanitizer log or a model.py"),
                      ("ctrl+p", "command palette"), ("?", "every key")):
        out.append(f"  {key:8}", style("detail--heading"))
        out.append(what + "\n")
    out.append("\nFrom a shell: ascend-tui open PATH...  ·  ascend-tui demo", style("detail--muted"))
    return out


def describe(inv: Investigation, node_id: str, style: StyleOf) -> Text:
    """The detail text of one operator."""
    node = inv.graph.node(node_id)
    out = Text(no_wrap=False, overflow="fold")
    out.append(node.id, style("detail--title"))
    out.append(f"  {node.op_type}", style("detail--muted"))
    place = f"#{node.index}" if node.index >= 0 else node.kind
    module = node.module or "(root)"
    out.append(f"\n{place} · module {module}" + (f" ({node.module_class})" if node.module_class else ""),
               style("detail--muted"))
    if node.phase != "forward":
        out.append(f" · {node.phase}", style("detail--muted"))
    if (node.attrs or {}).get("detail") == "module":
        what = ("the gradient reaching this module's outputs" if node.phase == "backward"
                else "this module call's outputs")
        out.append(f"\nmodule-level evidence: {what}, measured as a whole; its operators were not recorded "
                   f"(only the suspect module's were: rerun with --detail full for all)", style("detail--muted"))
    _findings(out, inv, node_id, style)
    _statistics(out, inv, node_id, style)
    _tensors(out, inv, node_id, style)
    _memory(out, inv, node_id, style)
    _source(out, node.source, style)
    return out


def _tensors(out: Text, inv: Investigation, node_id: str, style: StyleOf) -> None:
    node = inv.graph.node(node_id)
    producers = {e.in_slot: e.src for e in inv.graph.producers(node_id)}
    out.append("\n\ninputs", style("detail--heading"))
    if not node.inputs:
        out.append("  none", style("detail--muted"))
    for slot, meta in enumerate(node.inputs):
        out.append(f"\n  [{slot}] {meta.describe() if meta else '-'}")
        if slot in producers:
            out.append(f"  ← {producers[slot]}", style("detail--muted"))
    out.append("\noutputs", style("detail--heading"))
    if not node.outputs:
        out.append("  none", style("detail--muted"))
    readers: dict[int, list[str]] = {}
    for e in inv.graph.consumers(node_id):
        readers.setdefault(e.out_slot, []).append(e.dst)
    for slot, meta in enumerate(node.outputs):
        out.append(f"\n  [{slot}] {meta.describe() if meta else '-'}")
        if slot in readers:
            names = readers[slot]
            more = f" +{len(names) - 3}" if len(names) > 3 else ""
            out.append(f"  → {', '.join(names[:3])}{more}", style("detail--muted"))


def _statistics(out: Text, inv: Investigation, node_id: str, style: StyleOf) -> None:
    node = inv.graph.node(node_id)
    slots = max(1, len(node.outputs))
    shown = False
    for slot in range(min(slots, 3)):
        target, ref = inv.stats_for(node_id, slot)
        if target is None and ref is None:
            continue
        shown = True
        out.append(f"\n\nstatistics, output {slot}", style("detail--heading"))
        runs = f"target {inv.run.dtype}" + (f" · reference {inv.run.reference or ''}".rstrip()
                                            if inv.reference is not None else "")
        out.append(f"\n  {runs}", style("detail--muted"))
        out.append(f"\n  {'':9}{'target':>{_COL}}", style("detail--muted"))
        if inv.reference is not None:
            out.append(f"  {'reference':>{_COL}}", style("detail--muted"))
        for label, field in STAT_ROWS:
            t = _known(field, getattr(target, field) if target else None)
            out.append(f"\n  {label:9}")
            out.append(f"{magnitude(t):>{_COL}}", _value_style(field, t, style))
            if inv.reference is not None:
                r = _known(field, getattr(ref, field) if ref else None)
                out.append(f"  {magnitude(r):>{_COL}}", _value_style(field, r, style))
        _precision(out, inv, node_id, slot, style)
        meta = node.outputs[slot] if slot < len(node.outputs) else None
        dtype = meta.dtype if meta is not None else inv.run.dtype
        if target is not None:
            _magnitude_bar(out, target, dtype, style)
        _histogram(out, inv, node_id, slot, dtype, style)
    if not shown:
        out.append("\n\nno statistics recorded for this operator", style("detail--muted"))


_PRECISION_INDEX: weakref.WeakKeyDictionary[Any, dict[tuple[str, int], dict[str, Any]]] = \
    weakref.WeakKeyDictionary()


def _precision(out: Text, inv: Investigation, node_id: str, slot: int, style: StyleOf) -> None:
    """The precision check's metrics of this output against the reference (from `run.extra["precision"]`)."""
    index = _PRECISION_INDEX.get(inv)
    if index is None:
        raw = (inv.run.extra or {}).get("precision")
        # the first ten columns hold what is shown here; the rest (msprobe's full row) stay out of the index
        cols = list(raw.get("columns") or [])[:10] if isinstance(raw, dict) else []
        index = {}
        for r in raw.get("rows", []) if cols else []:
            row = dict(zip(cols, r))
            if isinstance(row.get("node"), str) and isinstance(row.get("slot"), int) and row["slot"] >= 0:
                index.setdefault((row["node"], row["slot"]), row)
        _PRECISION_INDEX[inv] = index
    row = index.get((node_id, slot))
    if row is None:
        return
    parts = []
    for label, key in (("cosine", "cosine"), ("max abs", "max_abs"), ("max rel", "max_rel"), ("1‰", "one_thousandth")):
        v = row.get(key)
        parts.append(f"{label} {v:.6f}" if key == "cosine" and isinstance(v, float) else f"{label} {magnitude(v)}"
                     if isinstance(v, (int, float)) else f"{label} {v}")
    result = str(row.get("result") or "")
    out.append("\n  vs reference  ", style("detail--muted"))
    out.append(" · ".join(parts), style(f"detail--{result}") if result in ("error", "warning") else Style())
    if row.get("attribution"):
        out.append(f" ({row['attribution']})", style("detail--muted"))


_COL = 11  # a column of statistics: "-3.382e+04" and "16,777,216" fit, and two columns fit at 80x24


def _known(field: str, value: Any) -> Any:
    """None for a count the source did not record (msprobe dumps have no zero count: -1)."""
    if field.endswith("_count") and value is not None and value < 0:
        return None
    return value


def _value_style(field: str, value: Any, style: StyleOf) -> Style:
    if value is None:
        return style("detail--muted")
    if field in ("nan_count", "inf_count"):
        return style("detail--bad") if value else Style()
    if isinstance(value, float) and not math.isfinite(value):
        return style("detail--bad")
    return Style()


def _magnitude_bar(out: Text, stats: TensorStats, dtype: str, style: StyleOf, width: int = 24) -> None:
    """|mean| and |x| max on a log2 axis with the dtype's largest value: what summary stats can honestly show."""
    out.append("\n  |x| log2 ", style("detail--muted"))
    points = [v for v in (abs(stats.mean), stats.abs_max) if math.isfinite(v) and v > 0]
    limit = _dtype_max(dtype)
    if not points:
        text = "no finite non-zero values" if not stats.finite or stats.abs_max == 0 else "-"
        out.append(text, style("detail--bad") if not stats.finite else style("detail--muted"))
        return
    lo = math.floor(min(math.log2(p) for p in points)) - 2
    top = max(math.log2(p) for p in points)
    hi = math.ceil(max(top, math.log2(limit) if limit and math.log2(limit) - top < 24 else top)) + 1

    def col(v: float) -> int:
        return max(0, min(width - 1, round((math.log2(v) - lo) / max(1, hi - lo) * (width - 1))))

    cells = [("·", "detail--muted")] * width
    for c in range(col(min(points)), col(max(points)) + 1):
        cells[c] = ("━", "detail--bar")
    if limit and math.log2(limit) <= hi:
        cells[col(limit)] = ("|", "detail--limit")
    if math.isfinite(stats.mean) and stats.mean:
        cells[col(abs(stats.mean))] = ("μ", "detail--heading")
    if math.isfinite(stats.abs_max) and stats.abs_max > 0:
        cells[col(stats.abs_max)] = ("▲", "detail--bad" if limit and stats.abs_max >= limit else "detail--heading")
    out.append(f"2^{lo} ", style("detail--muted"))
    for ch, name in cells:
        out.append(ch, style(name))
    out.append(f" 2^{hi}", style("detail--muted"))
    legend = "  μ |mean|  ▲ abs max"
    if limit and math.log2(limit) <= hi:
        legend += f"  | {dtype} max"
        if math.isfinite(stats.abs_max) and stats.abs_max > 0:
            legend += f"  headroom {math.log2(limit / stats.abs_max):+.1f} bits"
    out.append("\n  " + legend.strip(), style("detail--muted"))


def _dtype_max(dtype: str) -> float | None:
    found = range_of(dtype)
    return found.max if found is not None else None


_BLOCKS = "▁▂▃▄▅▆▇█"
_BIN_WIDTH = 2  # 12 bins in 24 columns: fits the detail pane at 80 and 110 columns


def _histogram(out: Text, inv: Investigation, node_id: str, slot: int, dtype: str, style: StyleOf) -> None:
    """The sampled log2|x| histograms, the run's and the reference's one above the other on one axis: where
    the values sit between float16's subnormals and the dtype's max, and where the two runs part."""
    found = inv.histograms.get(node_id, slot)
    if found is None:
        return
    reference = inv.reference_histograms.get(node_id, slot) if inv.reference_histograms is not None else None
    counts, sampled = found
    stats = inv.stats.get(node_id, slot)
    limit = _dtype_max(dtype)
    rows = [("values  " if reference is None else "target  ", counts, sampled)]
    if reference is not None:
        rows.append(("refer.  ", reference[0], reference[1]))
    for label, row_counts, row_sampled in rows:
        out.append(f"\n  {label}", style("detail--muted"))
        if row_sampled == 0:
            out.append("all zero or NaN in the sample", style("detail--muted"))
            continue
        peak = max(int(c) for c in row_counts)
        for i, c in enumerate(int(c) for c in row_counts):
            low = HIST_EDGES_LOG2[i - 1] if i else None
            beyond = limit is not None and low is not None and 2.0 ** low >= limit
            name = "detail--muted" if c == 0 else "detail--bad" if beyond else "detail--bar"
            ch = "·" if c == 0 else _BLOCKS[min(len(_BLOCKS) - 1, (c * len(_BLOCKS) - 1) // peak)]
            out.append(ch * (_BIN_WIDTH - 1) + " ", style(name))
    if all(row_sampled == 0 for _, _, row_sampled in rows):
        return  # no bars, so no axis
    scale = [" "] * (_BIN_WIDTH * len(counts) + 4)
    for i, label in ((1, f"2^{HIST_EDGES_LOG2[0]}"), (HIST_EDGES_LOG2.index(0) + 1, "2^0"),
                     (len(counts) - 1, f"2^{HIST_EDGES_LOG2[-1]}+")):
        for j, ch in enumerate(label):
            if i * _BIN_WIDTH + j < len(scale):
                scale[i * _BIN_WIDTH + j] = ch
    out.append("\n          " + "".join(scale).rstrip(), style("detail--muted"))
    total = f" of {count(stats.numel)}" if stats is not None else ""  # zeros and NaN are not sampled
    out.append(f"\n          log2|x| of {count(sampled)} sampled{total}", style("detail--muted"))


def _findings(out: Text, inv: Investigation, node_id: str, style: StyleOf) -> None:
    findings = inv.findings_for(node_id)
    if not findings:
        return
    out.append("\n\nfindings", style("detail--heading"))
    for f in findings:
        _finding(out, f, style)


def metric_items(metrics: Mapping[str, Any]) -> str:
    """A finding's metrics as a person reads them: `replay error: not measured`, never `replay_error=nan`."""
    parts = []
    for key, value in metrics.items():
        if value is None:
            continue
        if isinstance(value, float) and math.isnan(value):
            text = "not measured"
        else:
            text = magnitude(value) if isinstance(value, (int, float)) else str(value)
        parts.append(f"{key.replace('_', ' ')}: {text}")
    return " · ".join(parts)


def _finding(out: Text, f: Finding, style: StyleOf) -> None:
    out.append(f"\n  {f.severity.upper()} ", style(f"detail--{f.severity}"))
    tag = f"{f.check}/{f.kind}" + (f" ({f.attribution})" if f.attribution else "")
    out.append(tag, style("detail--heading"))
    out.append(f"\n    {f.message}")
    if f.hint:
        out.append("\n    hint: ", style("detail--heading"))
        out.append(f.hint)
    if f.metrics:
        items = metric_items(f.metrics)
        if items:
            out.append(f"\n    {items}", style("detail--muted"))
    rc = f.root_cause
    if rc is not None:
        out.append("\n    root cause: ", style("detail--heading"))
        out.append(f"{rc.node} — {rc.reason}")
        if rc.chain:
            hops = " → ".join(f"{c.node} ({magnitude(c.value)})" for c in rc.chain[:8])
            more = f" → … {len(rc.chain) - 8} more" if len(rc.chain) > 8 else ""
            out.append(f"\n    chain: {hops}{more}", style("detail--muted"))


def _memory(out: Text, inv: Investigation, node_id: str, style: StyleOf) -> None:
    events = [e for e in inv.memory_events if e.node == node_id]
    if not events:
        return
    out.append(f"\n\nmemory events ({count(len(events))})", style("detail--heading"))
    for e in events[:6]:
        out.append(f"\n  {e.kind}", style("detail--warning"))
        out.append(f" [{e.tool}] {e.message}")
        if e.likely_false_positive:
            out.append("  (likely false positive)", style("detail--muted"))
    if len(events) > 6:
        out.append(f"\n  … {len(events) - 6} more", style("detail--muted"))


def _source(out: Text, source: Any, style: StyleOf) -> None:
    if source is None:
        return
    out.append("\n\nsource", style("detail--heading"))
    out.append(f"\n  {source.file}:{source.line}" + (f" in {source.function}" if source.function else ""))
    line = linecache.getline(source.file, source.line).strip() if source.file else ""
    if line:
        out.append("\n  ")
        out.append(f" {line} ", style("detail--code"))
    for frame in source.stack[1:]:
        out.append(f"\n    {frame}", style("detail--muted"))
