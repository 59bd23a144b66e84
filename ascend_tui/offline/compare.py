"""Offline precision compare of two msprobe dumps (target vs golden) into rows, findings and an `Investigation`.

Both dumps are read with the msprobe reader; rows are matched by name (`compare_rows`),
tensor pairs go to `compare_tensors` (processes or dask), statistics and md5 dumps are
compared from dump.json alone. The target dump's graph carries the findings, the golden
side's statistics become the reference, and a cross-rank summary names the first divergence.
"""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ascend_tui.checks.precision import (
    N_A, StatsMetrics, TensorMetrics, Thresholds, classify, from_norm_rel, stats_metrics,
)
from ascend_tui.checks.precision_attribution import NodeCompare, ParamDiff, Verdict, attribute, findings
from ascend_tui.offline.compare_band import assign_bands, band_verdicts, depth_profile, row_counts
from ascend_tui.errors import InputError
from ascend_tui.evidence import Finding, StatsTable
from ascend_tui.readers.msprobe import dump
from ascend_tui.readers.msprobe.compare_columns import EXTRA_KEYS
from ascend_tui.offline import compare_rows
from ascend_tui.offline.compare_rows import Item, Row, Unmatched
from ascend_tui.readers.msprobe.mapping import MappingOptions, renamer
from ascend_tui.readers.msprobe.graph import PARAM_GRAD, Builder, stats_rows
from ascend_tui.graph.opgraph import read_json
from ascend_tui.investigation import Investigation, RunInfo
from ascend_tui.progress import Progress, paused_gc

VIEW_COLUMNS = ("name", "node", "slot", "cosine", "max_abs", "max_rel", "rmse", "one_thousandth", "result",
                "attribution")


@dataclass(slots=True)
class RankCompare:
    """One rank's compare: its rows, the mode, the investigation on its target graph and its verdicts."""

    rank: str
    target_dir: Path
    golden_dir: Path
    mode: str
    rows: list[Row]
    inv: Investigation
    verdicts: Mapping[str, Any]  # node -> Verdict, or GrowthVerdict when the dtypes differ
    stacks: dict[str, str] = field(default_factory=dict)
    unmatched: Unmatched | None = None
    growth: dict[str, Any] = field(default_factory=dict)

    def first_introduced(self) -> Finding | None:
        """The earliest finding (execution order) that introduces an error or warning: where this rank diverges."""
        return next((f for f in self.inv.findings if f.check == "precision" and f.attribution == "introduced"
                     and f.severity != "info"), None)


@dataclass(slots=True)
class CompareResult:
    """Every rank's compare plus the summary across ranks; `investigation` is what the app and reports show."""

    ranks: list[RankCompare]
    summary: dict[str, Any]

    @property
    def investigation(self) -> Investigation:
        first = self.summary.get("first_rank")
        return next((r.inv for r in self.ranks if r.rank == first), self.ranks[0].inv)

    def ranks_section(self) -> dict[str, Any]:
        """The report's `ranks` section: the summary across ranks and each rank's rows, errors and divergence."""
        return {**self.summary, "per_rank": [_rank_json(r) for r in self.ranks]}


def _rank_json(r: RankCompare) -> dict[str, Any]:
    first = r.first_introduced()
    return {"rank": r.rank, "mode": r.mode, "rows": len(r.rows),
            "errors": sum(1 for x in r.rows if x.result == "error"),
            "warnings": sum(1 for x in r.rows if x.result == "warning"),
            "first_introduced": first.node if first else None,
            "unmatched": r.unmatched.to_json() if r.unmatched is not None else None,
            "counts": row_counts(r.rows), "growth": r.growth}


def _mode(header: Mapping[str, Any], items: Sequence[Item]) -> str:
    """tensor, md5 (summary_mode md5 or xor: a checksum per tensor) or statistics, as msprobe picks its columns."""
    if str(header.get("task") or "") == "tensor":
        return "tensor"
    if any(i.leaf is not None and i.leaf.md5 for i in items[:200]):
        return "md5"
    return "statistics"


def _side(rank_dir: Path, cache: dump.LeafCache | None = None) -> tuple[dict[str, Any], dict[str, Any], list[Item]]:
    header, data = dump.read_dump(rank_dir / "dump.json")
    return header, data, compare_rows.items_of(data, rank_dir / "dump.json", cache)


def _stacks(rank_dir: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """stack.json read once: (entry name -> source location, entry name -> its stack as msprobe's CSV writes it)."""
    path = rank_dir / "stack.json"
    if not path.exists():
        return {}, {}
    raw = read_json(path)
    return dump.parse_stacks(raw, path), _stack_text(raw)  # parse_stacks validates: InputError on a malformed file


def _stack_text(raw: Any) -> dict[str, str]:
    """Entry name -> its stack as msprobe's CSV writes it (the raw lines of stack.json, old or 26.x format)."""
    out: dict[str, str] = {}
    for key, value in raw.items():
        if "0" in raw:
            text = str(value[1])
            for name in value[0]:
                out[str(name)] = text
        else:
            out[str(key)] = str(value)
    return out


def compare_steps(target: Path, golden: Path, **kw: Any) -> CompareResult:
    """Compare every step both dump roots have (step0, step1, ...): per-step summary and the step it first diverges.

    One step (or a step/rank folder) is a plain `compare`. The returned result is the first diverging step's
    (the last step's when none diverges), with `summary["steps"]` holding one line per step.
    """
    t_steps, g_steps = dump.step_folders(Path(target)), dump.step_folders(Path(golden))
    if len(t_steps) < 2 or len(g_steps) < 2:
        return compare(target, golden, **kw)
    g_by = {p.name: p for p in g_steps}
    pairs = [(t, g_by[t.name]) for t in t_steps if t.name in g_by]
    if not pairs:
        raise InputError(golden, f"no step folder here has the name of one in {target}")
    results = [(t.name, compare(t, g, **kw)) for t, g in pairs]
    steps = []
    for name, r in results:
        s = r.summary
        steps.append({"step": name, "diverges": bool(s.get("first_node")), "first_node": s.get("first_node"),
                      "first_module": s.get("first_module"), "first_kind": s.get("first_kind"),
                      "errors": sum(1 for rk in r.ranks for x in rk.rows if x.result == "error"),
                      "rows": sum(len(rk.rows) for rk in r.ranks)})
    first = next((i for i, st in enumerate(steps) if st["diverges"]), None)
    chosen = results[first if first is not None else -1][1]
    chosen.summary["steps"] = steps
    chosen.summary["first_step"] = steps[first]["step"] if first is not None else None
    unpaired = len(t_steps) - len(pairs)
    if unpaired:
        chosen.summary.setdefault("notes", []).append(f"{unpaired} step folder(s) of the target have no golden step")
    return chosen


def _gc_paused(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run `fn` with the cyclic collector paused: a compare builds ~20 objects a tensor and frees none of them."""
    @functools.wraps(fn)
    def run(*args: Any, **kw: Any) -> Any:
        with paused_gc():
            return fn(*args, **kw)
    return run


@_gc_paused
def compare(target: Path, golden: Path, *, fuzzy: bool = False, thresholds: Thresholds | None = None,
            workers: int | None = None, scheduler: str | None = None, replay: bool = True,
            progress: Progress | None = None, cancel: threading.Event | None = None,
            mappings: MappingOptions | None = None) -> CompareResult:
    """Compare two msprobe dumps (root, step folder with many ranks, rank folder or dump.json).

    `mappings` are msprobe's -dm/-lm/-am/-cm options; dumps of two frameworks pair dtypes by family.
    """
    opts = mappings or MappingOptions()
    if fuzzy and opts.any:
        raise InputError("--fuzzy", "pairs by name alone and cannot be combined with a mapping file; use one or "
                                    "the other")
    lefts: list[tuple[Unmatched, list[Item]]] = []
    t = thresholds or Thresholds()
    t_ranks, _ = dump.rank_folders(Path(target))
    g_ranks, _ = dump.rank_folders(Path(golden))
    if len(t_ranks) != len(g_ranks):
        raise InputError(golden, f"{len(g_ranks)} rank folders here but {len(t_ranks)} in {target}; "
                                 "msprobe pairs ranks by position, so the counts must match")
    prepared = []
    caches: list[dump.LeafCache] = []  # the target's leaves, parsed once for the rows and the graph
    for i, (td, gd) in enumerate(zip(t_ranks, g_ranks)):
        if progress is not None:
            progress("reading dump.json", i, len(t_ranks))
        caches.append({})
        th, tdata, titems = _side(td, caches[-1])
        gh, gdata, gitems = _side(gd)
        mode = _mode(th, titems) if _mode(th, titems) == _mode(gh, gitems) else "statistics"
        rows = _pair(td, gd, th, gh, titems, gitems, fuzzy, opts)
        lefts.append((compare_rows.unmatched(rows, gitems), gitems))
        prepared.append((td, gd, th, tdata, mode, rows, gdata))
    notes: list[str] = []
    if replay and any(p[4] == "tensor" for p in prepared) and not _torch_available():
        notes.append("isolated replay needs PyTorch (pip install torch): attribution uses the amplification rule")
    _tensor_metrics(prepared, workers, scheduler, progress, cancel)
    ranks = []
    for (td, gd, th, tdata, mode, rows, gdata), cache in zip(prepared, caches):
        for row in rows:
            _judge(row, mode, t)
        ranks.append(_rank_compare(td, gd, th, tdata, gdata, mode, rows, t, replay, cache))
    summary = summarize(ranks)
    summary["notes"] = notes
    _account_unmatched(ranks, lefts, summary, opts)
    result = CompareResult(ranks, summary)
    result.investigation.sections["ranks"] = result.ranks_section()  # the report writes it beside the findings
    return result


def _tensor_metrics(prepared: list[Any], workers: int | None, scheduler: str | None, progress: Progress | None,
                    cancel: threading.Event | None) -> None:
    """Fill tensor-mode metrics of every rank in one batch of work (each file pair once)."""
    if not any(p[4] == "tensor" for p in prepared):
        return
    from ascend_tui.offline import compare_tensors  # processes and the .pt reader: tensor dumps only

    index: dict[tuple[str, str], int] = {}
    pairs: list[compare_tensors.Pair] = []
    todo: list[tuple[Row, int]] = []
    for td, gd, _th, _data, mode, rows, _gdata in prepared:
        if mode != "tensor":
            continue
        for row in compare_rows.tensor_rows(rows):
            assert row.golden is not None and row.target.leaf is not None and row.golden.leaf is not None
            key = (str(td / "dump_tensor_data" / str(row.target.leaf.data_name)),
                   str(gd / "dump_tensor_data" / str(row.golden.leaf.data_name)))
            if key not in index:
                index[key] = len(pairs)
                nbytes = row.target.leaf.numel * 4
                pairs.append(compare_tensors.Pair(key[0], key[1], nbytes))
            todo.append((row, index[key]))
    if not pairs:
        return
    results = compare_tensors.run_pairs(pairs, workers=workers, scheduler=scheduler, progress=progress,
                                        cancel=cancel)
    for row, i in todo:
        row.metrics = results[i]


def _torch_available() -> bool:
    from ascend_tui.readers.msprobe.tensors import torch_available

    return torch_available()


def _scale(item: Item | None) -> float:
    if item is None or item.leaf is None or item.leaf.stats is None:
        return math.nan
    vals = [abs(v) for v in item.leaf.stats[:2] if v is not None and math.isfinite(v)]
    return max(vals) if vals else math.nan


def _judge(row: Row, mode: str, t: Thresholds) -> None:
    """Result and messages of one row: our thresholds; a dtype difference alone is not an error."""
    tgt, gold = row.target, row.golden
    if gold is None:
        row.result = N_A
        return
    if mode == "statistics" and (tgt.leaf is None or gold.leaf is None):  # msprobe diffs values' cells too
        row.metrics = stats_metrics((tgt.value,) * 4, (gold.value,) * 4)
    if tgt.is_scalar or gold.is_scalar:
        if tgt.value != gold.value:
            row.result = "error"
            row.messages.append(f"error: the value differs ({tgt.value!r} vs {gold.value!r})")
        return
    if tgt.leaf is None or gold.leaf is None:
        return
    ts, gs = tgt.leaf.meta.shape, gold.leaf.meta.shape
    if ts != gs and tuple(d for d in ts if d != 1) != tuple(d for d in gs if d != 1):
        row.result = "error"
        row.messages.append("error: the shape of target and golden differ")
        return
    if mode == "md5":
        if tgt.leaf.md5 != gold.leaf.md5:
            row.result = "error"
            row.messages.append("error: the CRC-32 differs")
        return
    if mode == "statistics":
        if tgt.leaf.stats is not None and gold.leaf.stats is not None:
            row.metrics = stats_metrics(tgt.raw_stats or tgt.leaf.stats, gold.raw_stats or gold.leaf.stats)
            rel = row.metrics.norm_rel_value
            sev, reason = classify(from_norm_rel(rel), math.nan, t) if not math.isnan(rel) else (None, "")
            if sev is not None:
                row.result = sev
                row.messages.append(f"{sev}: {reason}")
        return
    if isinstance(row.metrics, TensorMetrics):
        sev, reason = classify(row.metrics, _scale(gold), t)
        if sev is not None:
            row.result = sev
            row.messages.append(f"{sev}: {reason}")
        elif row.metrics.message:
            row.messages.append(row.metrics.message)
    if tgt.requires_grad is not None and gold.requires_grad is not None and tgt.requires_grad != gold.requires_grad:
        row.result = "error" if row.result == "error" else "warning"
        row.messages.append("warning: requires_grad differs")


def _as_tensor_metrics(m: TensorMetrics | StatsMetrics | None) -> TensorMetrics | None:
    """Statistics-mode rows become tensor metrics carrying only a relative error, for attribution."""
    if m is None or isinstance(m, TensorMetrics):
        return m
    rel = m.norm_rel_value
    if math.isnan(rel):
        return None
    return from_norm_rel(rel)


def _rank_compare(td: Path, gd: Path, header: Mapping[str, Any], data: Mapping[str, Any],
                  golden: Mapping[str, Any], mode: str,
                  rows: list[Row], t: Thresholds, replay: bool, cache: dump.LeafCache | None = None) -> RankCompare:
    """Build the target graph, put metrics on its nodes, attribute, and make the investigation."""
    dump_file = td / "dump.json"
    construct = dump.read_construct(td / "construct.json")
    stacks, stack_text = _stacks(td)
    entries = [e for name, rec in data.items() if (e := dump.parse_entry(str(name), rec, dump_file, cache)) is not None]
    builder = Builder(entries, construct, stacks)
    builder.build(None, None)
    built = builder.finish(sum(1 for n in data if not PARAM_GRAD.match(str(n))) - len(entries))
    graph = built.graph
    by_entry: dict[str, list[Row]] = {}
    for row in rows:
        by_entry.setdefault(row.target.entry, []).append(row)
    out_key = {leaf.key(): key for key, leaf in built.leaves.items() if leaf.key() is not None}
    nodes: list[NodeCompare] = []
    ref_keys: list[tuple[str, int]] = []
    ref_leaves = []
    params: list[ParamDiff] = []
    run_dtype, band_mode = assign_bands(rows, by_entry, mode)
    for entry_name, nid in builder.ids.items():
        erows = by_entry.get(entry_name, [])
        outs = [r for r in erows if r.target.section == "output" and r.target.leaf is not None]
        ins = [r for r in erows if r.target.section == "input" and r.target.leaf is not None]
        for slot, r in enumerate(outs):
            r.node, r.slot = nid, slot
            if r.golden is not None and r.golden.leaf is not None and r.golden.leaf.stats is not None:
                ref_keys.append((nid, slot))
                ref_leaves.append(r.golden.leaf)
        if band_mode:  # judged by the band: the threshold attribution's inputs are not needed
            continue
        nodes.append(NodeCompare(nid, tuple(_as_tensor_metrics(r.metrics) for r in outs),
                                 tuple(_scale(r.golden) for r in outs),
                                 tuple(_as_tensor_metrics(r.metrics) for r in ins), None,
                                 tuple(r.target.name for r in outs)))
    seen_params: set[str] = set()
    for row in rows:
        if row.target.section == "parameters" and _differs(row):
            diff = _param_diff(graph, row)
            if diff.name not in seen_params:  # a module called n times lists its parameters n times
                seen_params.add(diff.name)
                params.append(diff)
        elif row.node is None and row.target.leaf is not None and (k := out_key.get(row.target.leaf.key())):
            row.node, row.slot = k
    growth: dict[str, Any] = {}
    replay_op = None
    if replay and mode == "tensor" and _torch_available():
        from ascend_tui.offline.replay import replayer

        replay_op = replayer(gd, data, golden, builder.ids)
    if band_mode:
        verdicts, found = band_verdicts(graph, builder.ids, by_entry, rows, run_dtype, t, replay_op)
        growth = depth_profile(graph, builder.ids, by_entry, verdicts, run_dtype, t.op_band)
    else:
        verdicts = attribute(graph, nodes, t, replay_op)
        found = findings(graph, verdicts, params)
        for row in rows:
            v = verdicts.get(row.node or "")
            if v is not None and row.result in ("error", "warning") and row.target.section == "output":
                row.attribution = v.attribution
    reference = StatsTable()
    if ref_keys:
        reference.add_many(ref_keys, stats_rows(ref_leaves))
    run = RunInfo(target=str(td), source="msprobe compare", checks=("precision",), dtype=dump.dominant_dtype(graph),
                  reference=str(gd),
                  device={"backend": "offline", "name": f"msprobe {header.get('framework', '')} dump".replace("  ", " "),
                          "inf_nan_mode": None},
                  extra={"task": header.get("task"), "mode": mode, "rank": td.name, "golden": str(gd),
                         "thresholds": {k: getattr(t, k) for k in t.__slots__},
                         "precision": {"columns": [*VIEW_COLUMNS, *EXTRA_KEYS],
                                       "rows": _view_rows(rows, mode, stack_text),
                                       "rows_total": len(rows), "growth": growth,
                                       "tensor_dirs": [str(td / "dump_tensor_data"), str(gd / "dump_tensor_data")]
                                       if mode == "tensor" else None,
                                       "stacks": stack_text}})
    graph.name = f"msprobe compare {td.parent.name}/{td.name}"
    inv = Investigation(graph, stats=built.stats, reference=reference, run=run,
                        findings=[*_shape_findings(graph, rows), *found,
                                  *(_md5_first(graph, builder.ids, by_entry) if mode == "md5" else ())])
    return RankCompare(td.name, td, gd, mode, rows, inv, verdicts, stack_text,
                       growth=growth)


def _shape_findings(graph: Any, rows: Sequence[Row]) -> list[Finding]:
    """One error per node whose output has another shape on the golden side: the two runs are not the same model."""
    out: dict[str, Finding] = {}
    for r in rows:
        if r.node is None or r.node in out or r.target.section != "output" or r.golden is None \
                or not any("shape" in m for m in r.messages) or r.node not in graph:
            continue
        n = graph.node(r.node)
        out[r.node] = Finding("precision", "shape-mismatch", "error", n.id, n.op_type, n.module, n.index,
                              f"output {r.target.name} is {r.target.shape} here but {r.golden.shape} in the golden "
                              "dump: the two runs do not compute the same thing", attribution="introduced",
                              hint="compare dumps of the same model and inputs (or map names with --fuzzy)")
    return list(out.values())


def _md5_first(graph: Any, ids: Mapping[str, str], by_entry: Mapping[str, Sequence[Row]]) -> list[Finding]:
    """The first op, in execution order, whose output checksum differs while its inputs' all match (md5 dumps).

    A checksum says only "equal" or "not": no size, so this is the one place the two runs start to differ,
    not how much. Tensors of different dtypes always differ, so they count as unknown, never as evidence.
    """
    def state(r: Row) -> str:
        """'same', 'differs', or 'unknown' (no checksum, or another dtype: its checksum must differ)."""
        t, g = r.target.leaf, r.golden.leaf if r.golden is not None else None
        if t is None or g is None or not t.md5 or not g.md5 or t.meta.dtype != g.meta.dtype:
            return "unknown"
        return "same" if t.md5 == g.md5 else "differs"

    best: tuple[int, str, Row] | None = None
    for entry, nid in ids.items():
        erows = by_entry.get(entry, ())
        outs = [r for r in erows if r.target.section == "output" and state(r) == "differs"]
        ins = [state(r) for r in erows if r.target.section == "input" and r.target.leaf is not None]
        if not outs or nid not in graph or any(s != "same" for s in ins):
            continue
        index = graph.node(nid).index
        if best is None or index < best[0]:
            best = (index, nid, outs[0])
    if best is None:
        return []
    index, nid, row = best
    n = graph.node(nid)
    return [Finding("precision", "first-difference", "error", nid, n.op_type, n.module, index,
                    f"{row.target.name}: the first output, in execution order, whose checksum differs while the op's "
                    "inputs match; an md5 dump cannot say by how much", attribution="introduced",
                    metrics={"tensor": row.target.name},
                    hint="dump this op with task statistics or tensor to measure the difference")]


def _differs(row: Row) -> bool:
    """The two sides of a parameter row are not equal (by values, statistics or checksum)."""
    m, t, g = row.metrics, row.target.leaf, row.golden.leaf if row.golden is not None else None
    if isinstance(m, TensorMetrics):
        return m.value("max_abs") > 0
    if isinstance(m, StatsMetrics):
        return any(isinstance(d, float) and d != 0 for d in (m.max_diff, m.min_diff, m.mean_diff, m.norm_diff))
    return t is not None and g is not None and t.md5 is not None and g.md5 is not None and t.md5 != g.md5


def _param_diff(graph: Any, row: Row) -> ParamDiff:
    entry = row.target.entry
    m = compare_rows.MODULE_NAME.match(entry)
    module = m["path"] if m else ""
    pname = row.target.name.rsplit(".parameters.", 1)[-1]
    nid = f"param:{module}.{pname}" if module else f"param:{pname}"
    consumers = [e.dst for e in graph.consumers(nid)] if nid in graph else graph.module_nodes(module)
    index = min((graph.node(c).index for c in consumers if c in graph), default=-1)
    if nid not in graph:
        nid = consumers[0] if consumers else ""
    metrics = row.metrics if isinstance(row.metrics, TensorMetrics) else \
        _as_tensor_metrics(row.metrics) or from_norm_rel(math.nan)
    return ParamDiff(nid, module, f"{module}.{pname}" if module else pname, metrics, index)


def _cell(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


def _view_rows(rows: Sequence[Row], mode: str = "tensor", stacks: Mapping[str, str] | None = None) -> list[list[Any]]:
    """Compact rows for the app's precision view (tensor rows that were compared): VIEW_COLUMNS then EXTRA_KEYS."""
    out: list[list[Any]] = []
    stacks = stacks or {}
    for r in rows:
        if r.golden is None or r.target.leaf is None:
            continue
        m = r.metrics
        vals: list[Any] = [N_A] * 5
        if isinstance(m, TensorMetrics):
            vals = [m.cosine, m.max_abs, m.max_rel, m.rmse, m.one_thousandth]
        elif isinstance(m, StatsMetrics):
            vals = [N_A, m.max_diff, m.norm_rel, N_A, N_A]
        out.append([r.target.name, r.node, r.slot, *(_cell(v) for v in vals), r.result, r.attribution,
                    *_view_extra(r, mode, r.target.entry if r.target.entry in stacks else N_A)])
    return out


def _view_extra(r: Row, mode: str, stack: str) -> list[Any]:
    """The row's cells under `EXTRA_KEYS`: msprobe's columns the first ten leave out (N/A where a mode has none).

    The stack cell names the record (a key of the table's `stacks`), so a saved investigation holds each stack once.
    """
    t, g = r.target, r.golden
    assert g is not None
    m = r.metrics
    tensor = [m.euc_dist, m.five_thousandths] if isinstance(m, TensorMetrics) else [N_A, N_A]
    stats = [m.max_diff, m.min_diff, m.mean_diff, m.norm_diff, m.max_rel, m.min_rel, m.mean_rel, m.norm_rel] \
        if isinstance(m, StatsMetrics) else [N_A] * 8
    md5 = [t.leaf.md5 if t.leaf and t.leaf.md5 else N_A, g.leaf.md5 if g.leaf and g.leaf.md5 else N_A]
    summary = [*_side_stats(t), *_side_stats(g)]
    consistent = N_A if t.requires_grad is None or g.requires_grad is None else str(t.requires_grad == g.requires_grad)
    names = [t.leaf.data_name if t.leaf and t.leaf.data_name else N_A,
             g.leaf.data_name if g.leaf and g.leaf.data_name else N_A] if mode == "tensor" else [N_A, N_A]
    return [g.name, t.dtype, g.dtype, t.shape, g.shape, _grad(t.requires_grad), _grad(g.requires_grad),
            *(_cell(v) for v in tensor), *(_cell(v) for v in stats), *md5, *(_cell(v) for v in summary),
            consistent, N_A, "; ".join(r.messages) if r.messages else N_A, stack, *names]


def _side_stats(item: Item) -> list[Any]:
    """Max, Min, Mean, Norm of one side as dump.json recorded them (N/A where it did not)."""
    raw = item.raw_stats or (item.leaf.stats if item.leaf is not None and item.leaf.stats is not None else ())
    return [N_A if v is None else v for v in raw] if raw else [N_A] * 4


def _grad(v: Any) -> str:
    return N_A if v is None else str(bool(v))


# -- across ranks ----------------------------------------------------------------------------------


def summarize(ranks: Sequence[RankCompare]) -> dict[str, Any]:
    """The first rank and op to diverge, and ranks whose error on an op is far from their peers'."""
    firsts = []
    for r in ranks:
        f = r.first_introduced()
        if f is not None:
            firsts.append((f.index, r.rank, f))
    summary: dict[str, Any] = {"ranks": len(ranks),
                               "ranks_with_errors": sum(1 for r in ranks if r.first_introduced() is not None)}
    if firsts:
        index, rank, f = min(firsts, key=lambda x: (x[0], x[1]))
        summary.update(first_rank=rank, first_node=f.node, first_index=index, first_severity=f.severity,
                       first_kind=f.kind, first_module=f.module)
    if len(ranks) > 2:
        summary["outliers"] = _outliers(ranks)
    return summary


def _outliers(ranks: Sequence[RankCompare]) -> list[dict[str, Any]]:
    """(rank, node) whose error measure is over threshold and 10x the median of the same node on other ranks."""
    per_node: dict[str, dict[str, float]] = {}
    for r in ranks:
        for v in r.verdicts.values():
            per_node.setdefault(v.node, {})[r.rank] = v.error
        for node in r.inv.graph:
            per_node.setdefault(node.id, {}).setdefault(r.rank, 0.0)
    out = []
    for node, errs in per_node.items():
        if len(errs) < 3:
            continue
        values = np.array(list(errs.values()))
        med = float(np.median(values))
        for rank, e in errs.items():
            if e > 0 and e > 10 * max(med, 1e-9) and any(rc.rank == rank and node in rc.verdicts for rc in ranks):
                out.append({"rank": rank, "node": node, "error": e, "median": med})
    return sorted(out, key=lambda d: -d["error"])[:50]


# -- pairing and what did not pair -----------------------------------------------------------------

UNMATCHED_SHARE = 0.1  # over this share of either side unmatched, the compare leads with it
UNMATCHED_HINT = ("names differ between the dumps: map them with --api-mapping (MindSpore Mint/Functional to "
                  "torch), --cell-mapping (Cell to Module), --layer-mapping or --data-mapping (msprobe's YAML "
                  "files), or --fuzzy to pair calls in order")


def _pair(td: Path, gd: Path, th: Mapping[str, Any], gh: Mapping[str, Any], titems: list[Item], gitems: list[Item],
          fuzzy: bool, opts: MappingOptions) -> list[Row]:
    """Rows of one rank, paired by name or by the mapping options; two frameworks pair dtypes by family."""
    tf, gf = str(th.get("framework") or ""), str(gh.get("framework") or "")
    rename = renamer(opts, td, gd, list(dict.fromkeys(i.entry for i in titems)),
                     list(dict.fromkeys(i.entry for i in gitems))) if opts.any else None
    return compare_rows.match(titems, gitems, fuzzy=fuzzy, rename=rename, cross=bool(tf and gf and tf != gf),
                                 check_dtype=opts.checks_dtype)


def unmatched_finding(rank: str, um: Unmatched, node: Any = None) -> Finding:
    """The warning a compare leads with when over a tenth of either side found nothing to compare with.

    It sits on `node` (the first unmatched target operator, so the app can go there) when given.
    """
    names = ", ".join(um.first_target or um.first_golden)
    more = um.target_records_unmatched - len(um.first_target)
    where = (node.id, node.op_type, node.module, node.index) if node is not None else ("", "", "", -1)
    return Finding("precision", "unmatched", "warning", *where,
                   f"{rank}: {um.target_unmatched} of {um.target_rows} target rows and {um.golden_unmatched} of "
                   f"{um.golden_rows} golden rows have nothing to compare with ({um.target_records_unmatched} "
                   f"target records, first: {names}{f' and {more} more' if more > 0 else ''}); no verdict is "
                   "given on them", metrics=um.to_json(), hint=UNMATCHED_HINT)


def unmatched_view_rows(rows: Sequence[Row], golden_left: Sequence[Item]) -> list[list[Any]]:
    """The app's unmatched rows: side, name, record, dtype and shape of every item that found no counterpart."""
    out = [["target", r.target.name, r.target.entry, r.target.dtype, r.target.shape] for r in rows if r.golden is None]
    out.extend(["golden", g.name, g.entry, g.dtype, g.shape] for g in golden_left)
    return out


def _account_unmatched(ranks: Sequence[RankCompare], lefts: Sequence[tuple[Unmatched, list[Item]]],
                       summary: dict[str, Any], opts: MappingOptions) -> None:
    """Put matched/unmatched counts on every rank, its run and the summary; warn where more than a tenth is left."""
    totals = {"target_rows": 0, "target_unmatched": 0, "golden_rows": 0, "golden_unmatched": 0}
    for rank, (um, gitems) in zip(ranks, lefts):
        rank.unmatched = um
        used = {id(r.golden) for r in rank.rows if r.golden is not None}
        rank.inv.run.extra["precision_unmatched"] = {
            "columns": ["side", "name", "record", "dtype", "shape"],
            "rows": unmatched_view_rows(rank.rows, [g for g in gitems if id(g) not in used])}
        for k in totals:
            totals[k] += getattr(um, k)
        extra = rank.inv.run.extra
        extra["unmatched"] = um.to_json()
        extra["mappings"] = {k: str(v) for k in ("data", "layer", "api", "cell") if (v := getattr(opts, k))}
        if um.share > UNMATCHED_SHARE:
            graph = rank.inv.graph
            first = next((r.node for r in rank.rows if r.golden is None and r.node and r.node in graph
                          and not graph.node(r.node).is_placeholder), None)
            rank.inv.add_findings([unmatched_finding(rank.rank, um, graph.node(first) if first else None)])
    summary["unmatched"] = totals
    summary["unmatched_share"] = max((um.share for um, _g in lefts), default=0.0)
    shown = CompareResult(list(ranks), summary).investigation  # what the CLI gates and the app shows
    others = [f for r in ranks if r.inv is not shown for f in r.inv.findings if f.kind == "unmatched"]
    shown.add_findings(Finding(f.check, f.kind, f.severity, "", "", "", -1, f.message, metrics=f.metrics,
                               hint=f.hint) for f in others)  # other ranks' graphs differ: no node here
