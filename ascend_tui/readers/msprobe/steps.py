"""Per-step statistics of a multi-step msprobe dump: each step x rank's dump.json read for its statistics only.

No graph is built and no tensor is loaded: the records' Max/Min/Norm become a few numpy columns per
module, so a trend over hundreds of steps costs one JSON parse a step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import isfinite, nan
from pathlib import Path
from typing import Any

import numpy as np

from ascend_tui.errors import InputError
from ascend_tui.readers.msprobe.dump import DumpPoint, read_dump, statistic
from ascend_tui.readers.msprobe.graph import API_NAME, MODULE_NAME, PARAM_GRAD


@dataclass(frozen=True, slots=True)
class PointStatistics:
    """One dump.json's statistics per module (or per API when no module was dumped), read without a graph.

    Columns, one entry per module forward output: `max_abs` (max |Max|, |Min| over its calls), `norm` (the
    norm of all its calls' outputs together), `nonfinite` (outputs whose statistics hold NaN or Inf). `loss`:
    the mean of the last loss API's output (`Functional.mse_loss`, `cross_entropy`); `grad_norm`: the norm of
    every parameter gradient msprobe recorded. `skipped`: records whose statistics could not be read.
    """

    point: DumpPoint
    names: tuple[str, ...]
    max_abs: np.ndarray
    norm: np.ndarray
    nonfinite: np.ndarray
    first_nonfinite: str | None
    loss: float | None
    grad_norm: float | None
    records: int
    skipped: int
    first_kind: str = ""  # "NaN" or "Inf": what `first_nonfinite`'s output held


_LOSS_API = re.compile(r"loss|cross_entropy", re.I)


def point_statistics(point: DumpPoint) -> PointStatistics:
    """The per-module statistics of one step x rank's dump.json (statistics only: no tensor is loaded)."""
    dump_file = point.folder / "dump.json"
    _header, data = read_dump(dump_file)
    module_rows: dict[str, list[float]] = {}  # name -> [max_abs, sum of squared norms, nonfinite]
    api_rows: dict[str, list[float]] = {}
    first_bad: str | None = None
    first_kind = ""
    loss: float | None = None
    grad_sq, grads = 0.0, 0
    skipped = 0
    for name, record in data.items():
        name = str(name)
        if not isinstance(record, dict):
            skipped += 1
            continue
        try:
            if PARAM_GRAD.match(name):
                for leaf in _stat_leaves(record):
                    norm = statistic(leaf.get("Norm"), name, dump_file)
                    if norm is not None:
                        grad_sq, grads = grad_sq + norm * norm, grads + 1
                continue
            outs = [_leaf_stats(leaf, name, dump_file) for leaf in _stat_leaves(record.get("output"))]
        except InputError:
            skipped += 1
            continue
        if first_bad is None and any(_extreme_bad(o) for o in outs):
            first_bad = name
            first_kind = "NaN" if any(v is not None and v != v for o in outs for v in o[:2]) else "Inf"
        if m := MODULE_NAME.match(name):
            if m["dir"] == "forward":
                _accumulate(module_rows.setdefault(m["path"], [0.0, 0.0, 0.0]), outs)
        elif (a := API_NAME.match(name)) and a["dir"] == "forward":
            _accumulate(api_rows.setdefault(f"{a['prefix']}.{a['api']}.{a['idx']}", [0.0, 0.0, 0.0]), outs)
            if _LOSS_API.search(a["api"]) and outs and outs[0][2] is not None:
                loss = outs[0][2]
    rows = module_rows or api_rows
    cols = np.array(list(rows.values()), dtype=np.float64).reshape(-1, 3)
    return PointStatistics(point, tuple(rows), cols[:, 0], np.sqrt(cols[:, 1]), cols[:, 2], first_bad, loss,
                           float(np.sqrt(grad_sq)) if grads else None, len(data), skipped, first_kind)


def _extreme_bad(stats: tuple[float | None, ...]) -> bool:
    """Whether a tensor held NaN or Inf: its Max or Min is not finite (Mean and Norm overflow on finite values, as
    a float32 mask at finfo.min has Mean -Inf)."""
    return any(v is not None and not isfinite(v) for v in stats[:2])


def _stat_leaves(value: Any) -> list[dict[str, Any]]:
    """The tensor records (objects with "dtype" and statistics) nested in `value`, in order."""
    out: list[dict[str, Any]] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(reversed(v))
        elif isinstance(v, dict):
            if "dtype" in v and ("Max" in v or "Norm" in v):
                out.append(v)
            else:
                stack.extend(reversed([x for x in v.values() if isinstance(x, (dict, list))]))
    return out


def _leaf_stats(leaf: dict[str, Any], name: str, path: Path) -> tuple[float | None, float | None, float | None,
                                                                     float | None]:
    """(Max, Min, Mean, Norm) of one tensor record, None where absent."""
    return (statistic(leaf.get("Max"), name, path), statistic(leaf.get("Min"), name, path),
            statistic(leaf.get("Mean"), name, path), statistic(leaf.get("Norm"), name, path))


def _accumulate(row: list[float], outs: list[tuple[float | None, ...]]) -> None:
    """Fold one call's output statistics into a module's row: max-abs, sum of squared norms, non-finite outputs."""
    for mx, mn, _mean, norm in outs:
        vals = [v for v in (mx, mn) if v is not None]
        bad = not all(map(isfinite, vals))
        row[2] += bad
        if any(v != v for v in vals) or row[0] != row[0]:  # NaN stays NaN, so the trend sees it
            row[0] = nan
        elif vals:
            row[0] = max(row[0], *map(abs, vals))
        if norm is not None and (bad or isfinite(norm)):  # a finite tensor's Inf norm overflowed msprobe's sum
            row[1] += norm * norm
