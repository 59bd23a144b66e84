"""Layout conversions found in the graph, not in the timings: permute/transpose followed by a copy (contiguous).

A permute is free (a view); the copy after it moves the whole tensor. Whether that is worth a finding
is a property of the model — how many such pairs there are and what share of the activation bytes
they copy — so the finding comes from the captured graph and fires the same on every run. Time is
reported beside it as the median share over the profiled steps with its spread, because one step's
share on a busy machine can be half or twice another's.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ascend_tui import fmt
from ascend_tui.checks.profile import categories
from ascend_tui.evidence import Finding
from ascend_tui.graph.opgraph import OpGraph
from ascend_tui.graph.profile import Profile

VIEWS = ("permute", "transpose", "t", "swapaxes", "movedim", "npu_confusion_transpose")
COPIES = ("clone", "contiguous", "_to_copy", "copy", "copy_")
BYTES_SHARE = 0.05  # conversion copies moving this share of all op output bytes are a finding
DTYPE_BYTES = {"float64": 8, "int64": 8, "complex64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2,
               "int16": 2, "int8": 1, "uint8": 1, "bool": 1}


@dataclass(frozen=True, slots=True)
class Pair:
    """A view that reorders dimensions and the copy that materialises it."""

    view: str
    copy: str
    module: str
    nbytes: int


def _short(op_type: str) -> str:
    return op_type.rsplit(".", 1)[-1].split(".")[0]


def _nbytes(meta: object) -> int:
    shape = getattr(meta, "shape", None)
    dtype = str(getattr(meta, "dtype", "")).removeprefix("torch.")
    if shape is None:
        return 0
    return int(math.prod(shape)) * DTYPE_BYTES.get(dtype, 4)


def pairs(graph: OpGraph) -> list[Pair]:
    """Every view-then-copy pair of the graph, in execution order."""
    out = []
    for node in graph:
        if node.is_placeholder or _short(node.op_type) not in VIEWS:
            continue
        for edge in graph.consumers(node.id):
            copy = graph.node(edge.dst)
            if _short(copy.op_type) in COPIES:
                size = _nbytes(copy.outputs[0]) if copy.outputs else 0
                out.append(Pair(node.id, copy.id, copy.module or node.module, size))
                break
    return out


def step_shares(profile: Profile) -> list[float]:
    """The layout category's share of each profiled step's time (one value when steps are not known)."""
    t = profile.kernels
    if t.n == 0:
        return []
    cats = categories(t)
    layout = cats.codes == cats.code("layout")
    steps = t.ints["step"]
    keys = [s for s in np.unique(steps) if s >= 0] or [None]
    out = []
    for s in keys:
        rows = np.ones(t.n, bool) if s is None else steps == s
        total = float(t.dur_us[rows].sum())
        if total > 0:
            out.append(float(t.dur_us[rows & layout].sum()) / total)
    return out


def finding(graph: OpGraph, profile: Profile | None) -> Finding | None:
    """A layout finding when conversion copies move `BYTES_SHARE` of the activation bytes; time as median and spread."""
    found = pairs(graph)
    if not found:
        return None
    moved = sum(p.nbytes for p in found)
    total = sum(_nbytes(m) for n in graph if not n.is_placeholder for m in n.outputs if m is not None)
    share = moved / total if total else 0.0
    if share < BYTES_SHARE:
        return None
    modules = Counter(p.module.rsplit(".", 1)[-1] if p.module else "(top)" for p in found)
    times = step_shares(profile) if profile is not None else []
    timing = ""
    metrics: dict[str, object] = {"pairs": len(found), "bytes": moved, "bytes_share": share,
                                  "modules": sorted({p.module for p in found if p.module})[:32]}
    if times:
        med = float(np.median(times))
        timing = (f"; they take {fmt.percent(med)} of the step (median of {len(times)} steps, "
                  f"{fmt.percent(min(times))}-{fmt.percent(max(times))})")
        metrics.update(share=med, share_min=min(times), share_max=max(times), steps=len(times))
    where = ", ".join(f"{k} ({v})" for k, v in modules.most_common(4))
    first = graph.node(found[0].copy)
    return Finding("profile", "layout_conversion", "warning", first.id, first.op_type, first.module, first.index,
                   f"{fmt.plural(len(found), 'permute+contiguous pair')} copy {fmt.nbytes(moved)} a pass "
                   f"({fmt.percent(share)} of all operator output bytes), caused by {where}{timing}",
                   metrics=metrics,
                   hint="keep one memory layout through the model: drop permute()/contiguous() pairs around "
                        "normalisations (normalise over dim=1 in NCHW, or keep the whole block channels_last)")
