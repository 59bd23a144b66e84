"""Ascend profiler folders: torch_npu's `*_ascend_pt/ASCEND_PROFILER_OUTPUT/` and msprof's `mindstudio_profiler_output/`.

The folder reader owns the whole folder: kernel rows (kernel_details.csv / op_summary_*.csv /
task_time_*.csv), per-type sums (op_statistic), steps (step_trace_time), host ops
(operator_details), API statistics, the timeline (trace_view.json / msprof_*.json, for module
attribution and the overlap track when it is small enough to read), and the memory timeline, which
`memory.py` reads. A lone kernel CSV or trace JSON opens too.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ascend_tui.errors import InputError
from ascend_tui.readers.profiler import csv_tables, memory, trace
from ascend_tui.readers.profiler.investigation import merge_memory, profile_investigation
from ascend_tui.readers.base import FunctionReader
from ascend_tui.progress import Progress
from ascend_tui.graph.profile import Codes, KernelTable, Profile

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

TORCH_NPU_DIR = "ASCEND_PROFILER_OUTPUT"
MSPROF_DIR = "mindstudio_profiler_output"
KERNEL_FILES = ("kernel_details.csv", "op_summary*.csv", "task_time*.csv")
TRACE_FILES = ("trace_view.json", "msprof_*.json", "msprof*.json")
TRACE_LIMIT = 64 * 1024 * 1024  # larger timelines are skipped: kernel rows already hold the time
MARKERS = ("kernel_details.csv", "op_statistic.csv", "step_trace_time.csv", "operator_details.csv", "trace_view.json",
           memory.RECORD, memory.OPERATOR)


def output_dir(path: Path) -> Path | None:
    """The folder holding the CSVs: `path` itself, its ASCEND_PROFILER_OUTPUT, or a mindstudio_profiler_output."""
    if not path.is_dir():
        return None
    for sub in (TORCH_NPU_DIR, MSPROF_DIR):
        if (path / sub).is_dir():
            return path / sub
    prof = sorted(path.glob(f"PROF_*/{MSPROF_DIR}"))
    if prof:
        return prof[0]
    if any((path / m).is_file() for m in MARKERS) or any(path.glob("op_summary*.csv")) or \
            any(path.glob("op_statistic*.csv")):
        return path
    return None


def _first(folder: Path, pattern: str) -> list[Path]:
    """Files matching `pattern`; msprof slices (`*_slice_<k>_*`) all, otherwise the first by name."""
    found = sorted(p for p in folder.glob(pattern) if p.is_file())
    slices = [p for p in found if "_slice_" in p.name]
    return slices or found[:1]


def kernel_files(folder: Path) -> list[Path]:
    for pattern in KERNEL_FILES:
        files = _first(folder, pattern)
        if files:
            return files
    return []


def read_folder(folder: Path, *, cancel: threading.Event | None = None, progress: Progress | None = None,
                on_partial: Callable[[Profile], None] | None = None) -> Profile:
    """Everything about time in one profiler output folder; `on_partial` sees the profile after the first
    block of kernel rows when there is more to read (a million-row file shows long before it is read)."""
    files = kernel_files(folder)
    kind = "msprof" if folder.name == MSPROF_DIR or any(f.name.startswith(("op_summary", "task_time"))
                                                        for f in files) else "ascend_pt"
    stats = [s for f in _first(folder, "op_statistic*.csv") for s in csv_tables.read_op_statistic(f)]
    steps = [s for f in _first(folder, "step_trace_time*.csv") for s in csv_tables.read_step_trace(f)]
    chunks: list[KernelTable] = []
    for f in files:
        for chunk in csv_tables.iter_kernel_chunks(f, cancel=cancel, progress=progress):
            chunks.append(chunk)
            if on_partial is not None and len(chunks) == 1:
                on_partial(Profile(kind, _fill_types(chunk), tuple(stats), tuple(steps),
                                   extra={"partial": True, "files": [f.name]}))
    kernels = _fill_types(KernelTable.concat(chunks))
    host = [h for f in _first(folder, "operator_details*.csv") for h in csv_tables.read_operator_details(f)]
    extra: dict[str, Any] = {"files": [f.name for f in files]}
    api = _first(folder, "api_statistic*.csv")
    if api:
        extra["api_statistic"] = _api(api[0])
    spans: tuple = ()
    trace_file = next((p for pattern in TRACE_FILES for p in _first(folder, pattern)), None)
    if trace_file is not None and (kernels.n == 0 or trace_file.stat().st_size <= TRACE_LIMIT):
        if progress is not None:
            progress(f"reading {trace_file.name}", 0, None)
        timeline = trace.read_trace(trace_file, cancel)
        spans = timeline.spans
        if kernels.n == 0:
            kernels = timeline.kernels
            extra["files"].append(trace_file.name)
        else:
            kernels = _modules_from(kernels, timeline.kernels)
        host = host or list(timeline.host_ops)
    info = _profiler_info(folder.parent if folder.name in (TORCH_NPU_DIR, MSPROF_DIR) else folder)
    extra.update(info)
    return Profile(kind, kernels, tuple(stats), tuple(steps), tuple(host), spans, extra)


def _fill_types(t: KernelTable) -> KernelTable:
    """Level0 files write `N/A` types and task_time has none: take the type from the kernel name."""
    types = t.text["type"]
    if t.n and not any(v not in ("", "N/A") for v in types.values):
        names = t.text["name"]
        mapped = [trace.type_from_name(v) for v in names.values]
        index = {v: i for i, v in enumerate(dict.fromkeys(mapped))}
        return t.with_text("type", Codes(np.array([index[m] for m in mapped], np.int32)[names.codes], list(index)))
    return t


def _modules_from(kernels: KernelTable, timeline: KernelTable) -> KernelTable:
    """Module paths of the timeline's kernels, joined onto the kernel rows by (name, start)."""
    mods = timeline.text["module"]
    if timeline.n == 0 or mods.values == [""]:
        return kernels
    where = {(timeline.label("name", i), int(timeline.start_ns[i])): mods.at(i)
             for i in range(timeline.n) if mods.at(i)}
    names = kernels.text["name"]
    found = [where.get((names.values[c], int(s)), "") for c, s in zip(names.codes.tolist(), kernels.start_ns.tolist())]
    return kernels.with_text("module", Codes.of(found)) if any(found) else kernels


def _api(path: Path) -> list[dict[str, Any]]:
    header, rows = csv_tables.read_records(path)
    return [{"level": r.get("Level", ""), "name": r.get("API Name", ""), "count": int(float(r.get("Count") or 0)),
             "time_us": float(r.get("Time(us)") or 0)} for _, r in rows]


def _profiler_info(root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in sorted(root.glob("profiler_info*.json"))[:1]:
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            if "rank_id" in data:
                out["rank"] = data["rank_id"]
            level = ((data.get("config") or {}).get("experimental_config") or {}).get("_profiler_level")
            if level:
                out["level"] = level
    return out


def sniff(path: Path) -> bool:
    """A profiler output folder (or its parent), or a kernel CSV / trace JSON by its name and first bytes."""
    if path.is_dir():
        return output_dir(path) is not None
    if path.suffix == ".csv" and path.is_file():
        try:
            with path.open(encoding="utf-8-sig", errors="replace") as fh:
                head = fh.readline()
        except OSError:
            return False
        return csv_tables.is_kernel_header([h.strip() for h in head.split(",")])
    return trace.sniff_json(path)


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None,
         on_partial: Callable[[Investigation], None] | None = None) -> Investigation:
    """An `Investigation` of a profiler folder, kernel CSV or trace: time per kernel and memory (no advice yet).

    `on_partial` receives an investigation of the first block of kernel rows while the rest is read.
    """
    path = Path(path)
    partial = None if on_partial is None else \
        (lambda p: on_partial(profile_investigation(p, path, source=f"{p.kind} profiler (reading)",
                                                    device=_device(p))))
    if path.is_file():
        if path.suffix == ".json":
            profile = trace.read_trace(path, cancel)
        else:
            profile = Profile("kernel_csv", _fill_types(csv_tables.read_kernels(path, cancel=cancel,
                                                                                  progress=progress)))
        return profile_investigation(profile, path, source="trace" if path.suffix == ".json" else "kernel table",
                                     device=_device(profile))
    folder = output_dir(path)
    if folder is None:
        raise InputError(path, "not a profiler folder (no ASCEND_PROFILER_OUTPUT, mindstudio_profiler_output, "
                               "kernel_details.csv or op_summary_*.csv)")
    profile = read_folder(folder, cancel=cancel, progress=progress, on_partial=partial)
    if profile.kernels.n == 0 and not profile.op_stats and not profile.steps:
        record, operator = memory.find_files(path)
        if record is None and operator is None:
            raise InputError(path, "profiler folder without kernel rows, op statistics, step times or memory records")
    inv = profile_investigation(profile, path, source=f"{profile.kind} profiler", device=_device(profile))
    record, operator = memory.find_files(folder)
    if record is not None or operator is not None:
        merge_memory(inv, memory.load(folder, cancel=cancel))
    return inv


def _device(profile: Profile) -> dict[str, Any]:
    if profile.kind == "kineto":
        return {"backend": "cuda", "name": "offline (PyTorch profiler trace)", "inf_nan_mode": True}
    return {"backend": "npu", "name": f"offline ({profile.kind} profile)", "inf_nan_mode": True}


READER = FunctionReader("profiler", sniff, load, streams=True)
