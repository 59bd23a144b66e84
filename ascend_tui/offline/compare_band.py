"""The dtype-band side of the msprobe compare: each row's error against its band, verdicts, the depth profile.

When any matched tensor has another floating dtype in the golden run (bf16 against fp32), a
difference is judged against what rounding to the narrower dtype explains (`checks.precision_band`),
and where it is made by `checks.precision_growth`; the old thresholds would call every bf16 op an error.
A tensor whose golden magnitude is below one rounding of its op's inputs (a gradient that cancels to
about zero) is judged by its absolute error against the inputs' scale, not by its own relative error.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from typing import Any, Mapping, Sequence

from ascend_tui.checks.precision import N_A, TensorMetrics, Thresholds
from ascend_tui.checks.precision_band import (
    OP_BAND, Band, RowBand, band as dtype_band, stats_error, tensor_error, unit_roundoff,
)
from ascend_tui.checks.precision_growth import (
    GrowthVerdict, NodeError, ParamBand, attribute_growth, carried, growth_findings,
)
from ascend_tui.evidence import Finding
from ascend_tui.offline import compare_rows as msprobe_compare
from ascend_tui.offline.compare_rows import Row

_INPUTS = ("input", "parameters")


def _norm(row: Row, golden: bool = True) -> float:
    item = row.golden if golden else row.target
    if item is None or item.leaf is None or item.leaf.stats is None or item.leaf.stats[3] is None:
        return math.nan
    return abs(float(item.leaf.stats[3]))


def row_band(row: Row, mode: str, floor_norm: float = math.nan) -> RowBand | None:
    """This row's error against the band of its two dtypes (None: not a compared floating tensor pair)."""
    t, g = row.target.leaf, row.golden.leaf if row.golden is not None else None
    if t is None or g is None:
        return None
    if t.meta.shape != g.meta.shape and _squeezed(t.meta.shape) != _squeezed(g.meta.shape):
        return None  # another shape is another tensor: the shape finding says so, no band applies
    b = _band(t.meta.dtype, g.meta.dtype, t.numel)
    if b is None:
        return None
    differ = t.meta.dtype != g.meta.dtype
    gnorm = _norm(row)
    # only gradients: a forward value that cancels to near zero is used downstream (a variance as E[x^2] - E[x]^2),
    # a gradient that cancels (a bias before a norm layer) is about zero in either run
    tiny = ".backward" in row.target.entry and math.isfinite(floor_norm) and math.isfinite(gnorm) \
        and gnorm < b.u ** 1.5 * floor_norm
    m = row.metrics
    if _nonfinite(t.stats) and not _nonfinite(g.stats) or isinstance(m, TensorMetrics) and m.cosine == N_A:
        err = math.inf  # NaN/Inf where the golden run is finite (or at other positions): no rounding explains it
    elif mode == "tensor" and isinstance(m, TensorMetrics):
        err = tensor_error(m.value("cosine"), m.value("euc_dist"), floor_norm if tiny else gnorm, t.numel, b.tiny)
    elif t.stats is not None and g.stats is not None:
        if tiny:  # measured against the inputs' scale: the absolute difference of the norms and the extremes
            diffs = [abs(float(a) - float(c)) for a, c in zip(t.stats, g.stats) if a is not None and c is not None]
            err = max(diffs) / floor_norm if diffs else math.nan
        else:
            err = stats_error(t.stats, g.stats, t.numel, b.tiny)
    else:
        err = math.nan
    return RowBand(b, err, differ)


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple([d for d in shape if d != 1])


@lru_cache(maxsize=4096)
def _band(target: str, golden: str, numel: int) -> Band | None:
    """The (frozen, shared) band of two dtypes and a size; None unless both dtypes are floating."""
    b = dtype_band(target, golden, numel)
    if math.isnan(b.u) or math.isnan(unit_roundoff(target)) or math.isnan(unit_roundoff(golden)):
        return None
    return b


def _nonfinite(stats: Any) -> bool:
    return stats is not None and any(v is not None and not math.isfinite(float(v)) for v in stats[:4])


def assign_bands(rows: Sequence[Row], by_entry: Mapping[str, Sequence[Row]], mode: str) -> tuple[str, bool]:
    """Set `row.band` on every compared tensor row; (the run's narrower dtype, whether dtypes differ anywhere)."""
    for entry_rows in by_entry.values():
        ins = [r for r in entry_rows if r.target.section in _INPUTS or r.target.section == "param_grad"]
        for r in ins:
            r.band = row_band(r, mode)
        floor = max((n for r in ins if r.target.section == "input" and not math.isnan(n := _norm(r))), default=math.nan)
        for r in entry_rows:
            if r.target.section == "output":
                r.band = row_band(r, mode, floor)
    bands = [r.band for r in rows if r.band is not None]
    differ = [b for b in bands if b.dtypes_differ]
    if not differ:
        return "", False
    worst = max(differ, key=lambda b: b.band.u)
    return worst.band.dtype, True


def _err(rows: Sequence[Row]) -> float:
    vals = [r.band.error for r in rows if r.band is not None and not math.isnan(r.band.error)]
    return max(vals) if vals else math.nan


def band_verdicts(graph: Any, ids: Mapping[str, str], by_entry: Mapping[str, Sequence[Row]], rows: Sequence[Row],
                  run_dtype: str, t: Thresholds, replay: Any = None) -> tuple[dict[str, GrowthVerdict], list[Finding]]:
    """Verdicts and findings of a mixed-dtype compare, and each row's Result, from the band."""
    u = unit_roundoff(run_dtype)
    nodes: list[NodeError] = []
    for entry, nid in ids.items():
        erows = by_entry.get(entry, [])
        outs = [r for r in erows if r.target.section == "output" and r.band is not None]
        if not outs:
            continue
        ins = [r.band.error for r in erows if r.target.section in _INPUTS and r.band is not None]
        fwd = forward_of(entry)
        if fwd:  # a gradient is computed from the forward's inputs and outputs as well as from the incoming gradient
            ins += [r.band.error for r in by_entry.get(fwd, ()) if r.band is not None]
        nodes.append(NodeError(nid, _err(outs), tuple(ins), u, max(r.band.limit for r in outs)))
    # a record without dumped inputs (data_mode output, level L0) carries what its producers' outputs had
    out_err = {n.node: n.out_error for n in nodes}
    for i, n in enumerate(nodes):
        if not any(not math.isnan(e) for e in n.in_errors) and n.node in graph:
            ups = tuple(out_err[e.src] for e in graph.producers(n.node) if e.src in out_err)
            if ups:
                nodes[i] = replace(n, in_errors=ups)
    modules = _module_nodes(graph, ids, by_entry, u)
    nodes.extend(n for n, _ in modules.values())
    params: list[ParamBand] = []
    seen: set[str] = set()
    for r in rows:
        if r.target.section == "parameters" and r.band is not None and not r.band.within:
            name = _param_name(r)
            if name in seen:
                continue
            seen.add(name)
            node, module, index = _param_node(graph, r)
            params.append(ParamBand(node, module, name, r.band.error, r.band.limit, index))
    confirm = None
    gnorm = {nid: _norm(r) for entry, nid in ids.items() for r in by_entry.get(entry, ())[::-1]
             if r.target.section == "output"}
    if replay is not None:
        def confirm(nid: str) -> bool:
            """The op alone, on the golden inputs in the target dtype, leaves the op band too (None: no replay)."""
            m = replay(nid)
            if m is None:
                return True
            return tensor_error(m.value("cosine"), m.value("euc_dist"), gnorm.get(nid, math.nan), m.numel) > \
                t.op_band * u
    verdicts = attribute_growth(graph, nodes, t.amplification, t.op_band, seeds=[(p.index, p.node) for p in params],
                                confirm=confirm)
    for r in rows:
        if r.target.is_scalar and r.result == "error" and (why := scalar_expected(r, u)):
            r.result, r.messages = "pass", [why]
        _row_result(r, verdicts.get(r.node or ""), run_dtype)
    owner = {n.node: (m, n.index if n.index is not None else -1) for n, m in modules.values()}
    verdicts = {k: v for k, v in verdicts.items() if k not in owner or not _explained(graph, owner[k][0], verdicts, k)}
    verdicts, owner, moved = _at_consumers(graph, verdicts, owner)
    for r in rows:
        if r.node in moved and r.attribution:
            r.node = moved[r.node]  # the module output row points at the op where one can see it
    return verdicts, growth_findings(graph, verdicts, params, run_dtype, owner)


def _module_nodes(graph: Any, ids: Mapping[str, str], by_entry: Mapping[str, Sequence[Row]], u: float
                  ) -> dict[str, tuple[NodeError, str]]:
    """Module records whose output enters the graph at a placeholder (a tensor no dumped op produced).

    An error made between ops (a hook, a custom module's un-hooked arithmetic) shows first in such a
    module's output; as a node it can introduce the error the ops after it inherit.
    """
    out: dict[str, tuple[NodeError, str]] = {}
    for entry, erows in by_entry.items():
        m = msprobe_compare.MODULE_NAME.match(entry)
        if entry in ids or m is None or ".forward" not in entry:
            continue
        outs = [r for r in erows if r.target.section == "output" and r.band is not None and r.node in graph
                and graph.node(r.node).is_placeholder]
        if not outs:
            continue
        ins = tuple(r.band.error for r in erows if r.target.section in _INPUTS and r.band is not None)
        node = outs[0].node
        index = min((graph.node(e.dst).index for e in graph.consumers(node)), default=-1)
        out.setdefault(node, (NodeError(node, _err(outs), ins, u, max(r.band.limit for r in outs), index), m["path"]))
    return out


def _at_consumers(graph: Any, verdicts: dict[str, GrowthVerdict], owner: dict[str, tuple[str, int]]
                  ) -> tuple[dict[str, GrowthVerdict], dict[str, tuple[str, int]], dict[str, str]]:
    """Module-output verdicts moved from their placeholder to the first op that reads it (a node one can go to)."""
    moved: dict[str, str] = {}
    for p in list(owner):
        if p not in verdicts:
            continue
        first = min(graph.consumers(p), key=lambda e: graph.node(e.dst).index, default=None)
        if first is not None:
            moved[p] = first.dst
    if not moved:
        return verdicts, owner, moved
    out: dict[str, GrowthVerdict] = {}
    for k, v in verdicts.items():
        if k in moved.values() and k not in moved:
            continue  # the consumer's own verdict was only inheriting what the module output carried
        node = moved.get(k, k)
        out[node] = replace(v, node=node, cause=moved.get(v.cause, v.cause))
    return out, {moved.get(k, k): v for k, v in owner.items()}, moved


def _explained(graph: Any, module: str, verdicts: Mapping[str, GrowthVerdict], node: str) -> bool:
    """An op inside `module` already introduces an error, so the module's own verdict adds nothing."""
    return any(v.attribution == "introduced" and k != node and k in graph and
               (graph.node(k).module == module or graph.node(k).module.startswith(module + "."))
               for k, v in verdicts.items())


def forward_of(entry: str) -> str:
    """`Tensor.pow.0.backward` -> `Tensor.pow.0.forward`, `Module.m.L.backward.0` -> `...forward.0` ('': none)."""
    if entry.endswith(".backward"):
        return entry[: -len("backward")] + "forward"
    if ".backward." in entry:
        return entry.replace(".backward.", ".forward.")
    return ""


_LIMITS = (65504.0, 3.3895313892515355e38, 3.4028234663852886e38, 1.7976931348623157e308, 448.0, 57344.0)


def scalar_expected(r: Row, u: float) -> str:
    """Why two different float scalars are no error in a mixed-dtype compare ('' when they are one)."""
    a, b = r.target.value, r.golden.value if r.golden is not None else None
    if not all(isinstance(x, float) and math.isfinite(x) for x in (a, b)):
        return ""
    if any(math.isclose(abs(a), v, rel_tol=1e-9) for v in _LIMITS) and \
            any(math.isclose(abs(b), v, rel_tol=1e-9) for v in _LIMITS) and (a > 0) == (b > 0):
        return f"the largest finite value of each run's dtype ({a!r} vs {b!r}): expected"
    if b != 0 and abs(a - b) <= u * abs(b):
        return f"the value differs by rounding ({a!r} vs {b!r}): expected"
    return ""


def _param_name(r: Row) -> str:
    m = msprobe_compare.MODULE_NAME.match(r.target.entry)
    module = m["path"] if m else ""
    pname = r.target.name.rsplit(".parameters.", 1)[-1]
    return f"{module}.{pname}" if module else pname


def _param_node(graph: Any, r: Row) -> tuple[str, str, int]:
    m = msprobe_compare.MODULE_NAME.match(r.target.entry)
    module = m["path"] if m else ""
    nid = f"param:{_param_name(r)}"
    consumers = [e.dst for e in graph.consumers(nid)] if nid in graph else graph.module_nodes(module)
    index = min((graph.node(c).index for c in consumers if c in graph), default=-1)
    if nid not in graph:
        nid = consumers[0] if consumers else ""
    return nid, module, index


def _row_result(r: Row, v: GrowthVerdict | None, run_dtype: str) -> None:
    """Our verdict of one row in band mode: rounding is a pass; beyond it, the verdict of its node."""
    if r.golden is None or r.band is None or r.result == "error" and any("shape" in m for m in r.messages):
        return
    if math.isnan(r.band.error):
        return  # no band measure (no statistics, a marker): the row keeps the threshold verdict
    r.messages = [m for m in r.messages if not m.startswith(("warning: L2", "error: L2", "error: cosine",
                                                            "warning: cosine", "error: max abs", "warning: max abs"))]
    r.result = "pass"
    text = r.band.describe()
    if r.band.within or not text:
        if text:
            r.messages.append(text)
        return
    if r.target.section == "parameters":
        r.result = "error"
        r.messages.append(f"error: {text}: beyond what casting explains")
        return
    if v is not None and r.target.section == "output":
        r.attribution = v.attribution
        if v.attribution == "introduced":
            r.result = v.severity
            r.messages.append(f"{v.severity}: the op adds {v.bands:.1f}x the {run_dtype} op band beyond what its "
                              f"inputs carried ({text})")
        else:
            r.messages.append(f"{text}, inherited from {v.cause}")
        return
    why = "" if math.isinf(r.band.error) else " (accumulated rounding)"  # rounding never makes a NaN
    r.messages.append(f"{text}, carried in from upstream{why}" if r.target.section != "output"
                      else f"{text}, carried from its inputs{why}")


def depth_profile(graph: Any, ids: Mapping[str, str], by_entry: Mapping[str, Sequence[Row]],
                  verdicts: Mapping[str, GrowthVerdict], run_dtype: str, op_band: float = OP_BAND) -> dict[str, Any]:
    """Relative error (in units of u) of every op in execution order, and its peak per module: the error's growth."""
    u = unit_roundoff(run_dtype)
    points: list[dict[str, Any]] = []
    for entry, nid in ids.items():
        outs = [r for r in by_entry.get(entry, ()) if r.target.section == "output" and r.band is not None]
        e = _err(outs)
        if math.isnan(e) or nid not in graph:
            continue
        n = graph.node(nid)
        v = verdicts.get(nid)
        ins = [r.band.error for r in by_entry.get(entry, ()) if r.target.section in _INPUTS and r.band is not None]
        fwd = forward_of(entry)
        if fwd:
            ins += [r.band.error for r in by_entry.get(fwd, ()) if r.band is not None]
        carried = carried_error(ins)
        points.append({"index": n.index, "node": nid, "module": n.module,
                       "phase": "backward" if ".backward" in entry else "forward", "error": e,
                       "units": e / u, "growth_units": (e - carried) / u if not math.isnan(carried) else e / u,
                       "verdict": v.attribution if v else ""})
    seen = {p["node"]: p for p in points}
    for v in verdicts.values():  # a module output's verdict sits on an op whose own point measures the op alone
        if v.node in seen and v.attribution == "introduced":
            p = seen[v.node]
            p["growth_units"], p["verdict"] = max(p["growth_units"], v.excess / u), v.attribution
        elif v.node in graph and v.attribution == "introduced":
            n = graph.node(v.node)
            points.append({"index": n.index, "node": v.node, "module": n.module, "phase": n.phase or "forward",
                           "error": v.error, "units": v.error / u, "growth_units": v.excess / u,
                           "verdict": v.attribution})
    points.sort(key=lambda p: p["index"])
    modules: dict[tuple[str, str], dict[str, Any]] = {}
    for p in points:
        top = _top_module(p["module"])
        m = modules.setdefault((p["phase"], top), {"module": top, "phase": p["phase"], "first": p["index"],
                                                   "units": 0.0, "ops": 0})
        m["units"] = max(m["units"], float(p["units"]))
        m["ops"] += 1
    for m in modules.values():
        if not math.isfinite(m["units"]):
            m["units"] = str(m["units"])
    for p in points:  # JSON-safe (reports are written with allow_nan off): NaN/Inf errors as text
        for k in ("error", "units", "growth_units"):
            if not math.isfinite(p[k]):
                p[k] = str(p[k])
    ranking = sorted((p for p in points if isinstance(p["growth_units"], float) or p["growth_units"] == "inf"),
                     key=lambda p: -float(p["growth_units"]))
    return {"dtype": run_dtype, "u": u, "op_band_units": op_band, "points": points,
            "modules": sorted(modules.values(), key=lambda m: m["first"]),
            "growth_ranking": [{"node": p["node"], "module": p["module"], "growth_units": p["growth_units"],
                                "units": p["units"], "verdict": p["verdict"]} for p in ranking[:20]]}


def carried_error(in_errors: Sequence[float], amplification: float = 2.0) -> float:
    """What an op's inputs let it carry (`precision_growth.carried`), NaN when no input was measured."""
    known = [e for e in in_errors if not math.isnan(e)]
    return carried(known, amplification) if known else math.nan


def _top_module(module: str) -> str:
    """`model.layers.1.self_attn.o_proj` -> `model.layers.1` (the repeated block a depth chart steps through)."""
    parts = module.split(".")
    for i, p in enumerate(parts):
        if p.isdigit():
            return ".".join(parts[:i + 1])
    return ".".join(parts[:2]) if parts and parts[0] else "(top)"


def row_counts(rows: Sequence[Row]) -> dict[str, int]:
    """How the rows split: tensor pairs compared, scalar/None values, unmatched; expected rounding vs beyond it."""
    tensors = sum(1 for x in rows if x.golden is not None and x.target.leaf is not None)
    unmatched = sum(1 for x in rows if x.golden is None)
    bands = [x.band for x in rows if x.band is not None and x.golden is not None]
    return {"rows": len(rows), "tensor_pairs": tensors, "values": len(rows) - tensors - unmatched,
            "unmatched": unmatched, "within_band": sum(1 for b in bands if b.within),
            "beyond_band": sum(1 for b in bands if not b.within and not math.isnan(b.error))}
