"""`msprof op` (msOpProf) folders: one operator measured on the board, with per-core pipe, memory and cache tables.

Layouts: `OPPROF_<ts>_<id>/{OpBasicInfo,PipeUtilization,Memory,...}.csv` for one launch, or
`OPPROF_*/device<N>/<OpName>/<launch#>/<Metric>_<ts>.csv` for several. Every line ends with a
comma and "not applicable" is `NA`. Each launch becomes one kernel row whose pipe ratios are the
per-core ratios weighted by each core's time, so the bound-ness rules read it like a kernel_details row.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ascend_tui.errors import InputError
from ascend_tui.readers.profiler.investigation import profile_investigation
from ascend_tui.readers.parse.skipped import Skipped, report as report_skips
from ascend_tui.readers.profiler.csv_tables import read_records
from ascend_tui.readers.base import FunctionReader
from ascend_tui.progress import Progress
from ascend_tui.graph.profile import NO_INT, Codes, KernelTable, Profile

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

METRIC_FILES = ("OpBasicInfo", "PipeUtilization", "ArithmeticUtilization", "Memory", "MemoryL0", "MemoryUB",
                "L2Cache", "ResourceConflictRatio")
CORE_OF = {"mix": "MIX_AIC", "cube": "AI_CORE", "vector": "AI_VECTOR_CORE"}
# msOpProf's per-core column -> the kernel_details metric it means
RATIO_OF = {"aic_cube_ratio": "aic_mac_ratio", "aic_scalar_ratio": "aic_scalar_ratio", "aic_mte1_ratio": "aic_mte1_ratio",
            "aic_mte2_ratio": "aic_mte2_ratio", "aic_fixpipe_ratio": "aic_fixpipe_ratio",
            "aiv_vec_ratio": "aiv_vec_ratio", "aiv_scalar_ratio": "aiv_scalar_ratio", "aiv_mte2_ratio": "aiv_mte2_ratio",
            "aiv_mte3_ratio": "aiv_mte3_ratio"}


def _metric_name(path: Path) -> str | None:
    stem = path.stem
    for name in sorted(METRIC_FILES, key=len, reverse=True):
        if stem == name or stem.startswith(name + "_"):
            return name
    return None


def launches(path: Path) -> list[Path]:
    """The folders holding one launch's metric CSVs, in name order."""
    if not path.is_dir():
        return []
    found = {p.parent for p in path.rglob("*.csv") if _metric_name(p) is not None}
    return sorted(found)


def sniff(path: Path) -> bool:
    """An OPPROF_* folder, or a folder whose CSVs are msOpProf's metric tables."""
    if not path.is_dir():
        return False
    if path.name.startswith("OPPROF_") or any(p.is_dir() for p in path.glob("OPPROF_*")):
        return True
    names = {_metric_name(p) for p in path.glob("*.csv")}
    return bool(names - {None}) and not (path / "kernel_details.csv").exists()


def _float(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return float("nan")


def read_launch(folder: Path, skips: list[Skipped] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(kernel row, per-core tables) of one launch folder; records with too few or too many cells are skipped and
    counted in `skips` (one `Skipped` a file) when it is given."""
    tables: dict[str, Any] = {}
    basic: dict[str, str] = {}
    for p in sorted(folder.glob("*.csv")):
        name = _metric_name(p)
        if name is None:
            continue
        skipped = Skipped(str(p)) if skips is not None else None
        header, rows = read_records(p, skipped)
        if skipped is not None:
            skipped.refuse_if_empty(len(rows))
            skips.append(skipped)
        if name == "OpBasicInfo":
            if not rows:
                raise InputError(p, "OpBasicInfo.csv has no row")
            basic = rows[0][1]
            continue
        if "sub_block_id" not in header:
            raise InputError(p, f"not an msOpProf metric table: no sub_block_id column (columns: {', '.join(header[:8])})",
                             where="1")
        tables[name] = {"header": header, "rows": [[r.get(h, "") for h in header] for _, r in rows]}
    cores = tables.get("PipeUtilization") or next(iter(tables.values()), {"header": [], "rows": []})
    header = cores["header"]
    col = {h: i for i, h in enumerate(header)}
    aic_t = np.array([_float(r[col["aic_time(us)"]]) if "aic_time(us)" in col else np.nan for r in cores["rows"]])
    aiv_t = np.array([_float(r[col["aiv_time(us)"]]) if "aiv_time(us)" in col else np.nan for r in cores["rows"]])
    metrics: dict[str, float] = {}
    for src, dst in RATIO_OF.items():
        if src in col:
            v = np.array([_float(r[col[src]]) for r in cores["rows"]])
            w = aic_t if src.startswith("aic") else aiv_t
            ok = np.isfinite(v) & np.isfinite(w)
            if ok.any() and w[ok].sum() > 0:
                metrics[dst] = float((v[ok] * w[ok]).sum() / w[ok].sum())
    times = np.concatenate([aic_t, aiv_t])
    busiest = float(np.nanmax(times)) if np.isfinite(times).any() else 0.0
    kind = basic.get("Op Type", "") or ("vector" if np.isfinite(aiv_t).any() and not np.isfinite(aic_t).any() else "")
    row = {"name": basic.get("Op Name") or folder.name, "type": basic.get("Op Name") or folder.name,
           "core": CORE_OF.get(kind, kind.upper()),
           "dur_us": _float(basic["Task Duration(us)"]) if basic.get("Task Duration(us)") else busiest,
           "block_dim": int(_float(basic.get("Block Dim") or "nan")) if basic.get("Block Dim") else
           len({r[0] for r in cores["rows"]}) or NO_INT,
           "mix_block_dim": int(_float(basic["Mix Block Dim"])) if basic.get("Mix Block Dim") else NO_INT,
           "device": int(_float(basic["Device Id"])) if basic.get("Device Id") else NO_INT, "metrics": metrics}
    info = {k: v for k, v in basic.items() if k}
    return row, {"launch": str(folder), "basic": info, "tables": tables}


def read_folder(path: Path) -> Profile:
    """A `Profile` with one kernel row per launch and the per-core tables in `extra["cores"]`."""
    rows, cores = [], []
    skips: list[Skipped] = []
    for folder in launches(path):
        row, tables = read_launch(folder, skips)
        rows.append(row)
        cores.append(tables)
    if not rows:
        raise InputError(path, "no msOpProf metric CSVs (OpBasicInfo.csv, PipeUtilization.csv, ...) here")
    n = len(rows)
    names = sorted({k for r in rows for k in r["metrics"]})
    table = KernelTable(n, {"name": Codes.of(r["name"] for r in rows), "type": Codes.of(r["type"] for r in rows),
                            "core": Codes.of(r["core"] for r in rows)},
                        {k: np.array([r[k] for r in rows], np.int64) for k in ("block_dim", "mix_block_dim", "device")},
                        {"dur_us": np.array([r["dur_us"] for r in rows])},
                        {k: np.array([r["metrics"].get(k, np.nan) for r in rows]) for k in names})
    extra: dict[str, Any] = {"cores": cores}
    report_skips(extra, skips)
    return Profile("msprof_op", table, extra=extra)


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None) -> Investigation:
    """An `Investigation` of an msOpProf folder."""
    if progress is not None:
        progress(f"reading {Path(path).name}", 0, None)
    profile = read_folder(Path(path))
    return profile_investigation(profile, Path(path), source="msprof op",
                                 device={"backend": "npu", "name": "offline (msprof op)", "inf_nan_mode": True})


READER = FunctionReader("msprof op", sniff, load)
