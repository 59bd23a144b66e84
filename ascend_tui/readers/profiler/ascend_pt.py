"""Ascend profiler folders: torch_npu's `*_ascend_pt/ASCEND_PROFILER_OUTPUT/` and msprof's `mindstudio_profiler_output/`.

The folder reader owns the whole folder: kernel rows (kernel_details.csv / op_summary_*.csv /
task_time_*.csv), per-type sums (op_statistic), steps (step_trace_time), host ops
(operator_details), API statistics, the timeline (trace_view.json / msprof_*.json, for module
attribution and the overlap track when it is small enough to read), and the memory timeline, which
`profiler_memory` reads. A lone kernel CSV or trace JSON opens too.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ascend_tui.errors import InputError
from ascend_tui.readers.profiler import communication, csv_tables, db as profiler_db, framework_ops, memory, trace
from ascend_tui.readers.profiler.investigation import merge_memory, profile_investigation
from ascend_tui.readers.base import FunctionReader
from ascend_tui.readers.parse.compressed import head as compressed_head, plain_name
from ascend_tui.readers.parse.skipped import Skipped, report as report_skips
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
    if any((path / m).is_file() or (path / f"{m}.gz").is_file() for m in MARKERS) or \
            any(path.glob("op_summary*.csv*")) or any(path.glob("op_statistic*.csv*")):
        return path
    found, _ = profiler_db.find(path)
    return found.parent if found is not None else None


def _text_export(folder: Path) -> bool:
    """Whether `folder` holds the text export (kernel, step or statistic CSVs, a timeline), not only the db."""
    return bool(kernel_files(folder) or _first(folder, "op_statistic*.csv") or _first(folder, "step_trace_time*.csv")
                or any(_first(folder, pattern) for pattern in TRACE_FILES))


def _first(folder: Path, pattern: str) -> list[Path]:
    """Files matching `pattern`; msprof slices (`*_slice_<k>_*`) all, otherwise the first by name."""
    found = sorted(p for p in (*folder.glob(pattern), *folder.glob(pattern + ".gz")) if p.is_file())
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
    skips: dict[Path, Skipped] = {}

    def skip(f: Path) -> Skipped:  # each file's skipped records, said in the notes
        return skips.setdefault(f, Skipped(str(f)))

    stats = [s for f in _first(folder, "op_statistic*.csv") for s in csv_tables.read_op_statistic(f, skip(f))]
    steps = [s for f in _first(folder, "step_trace_time*.csv") for s in csv_tables.read_step_trace(f, skip(f))]
    chunks: list[KernelTable] = []
    for f in files:
        for chunk in csv_tables.iter_kernel_chunks(f, cancel=cancel, progress=progress, skipped=skip(f)):
            chunks.append(chunk)
            if on_partial is not None and len(chunks) == 1:
                on_partial(Profile(kind, _fill_types(chunk), tuple(stats), tuple(steps),
                                   extra={"partial": True, "files": [f.name]}))
    kernels = _fill_types(KernelTable.concat(chunks))
    kernels.dur_us  # decoded now, so that the cells it could not read are counted before the notes are made
    host = [h for f in _first(folder, "operator_details*.csv") for h in csv_tables.read_operator_details(f, skip(f))]
    extra: dict[str, Any] = {"files": [f.name for f in files]}
    api = _first(folder, "api_statistic*.csv")
    if api:
        extra["api_statistic"] = _api(api[0], skip(api[0]))
    spans: tuple = ()
    calls = KernelTable(0)
    trace_file = next((p for pattern in TRACE_FILES for p in _first(folder, pattern)), None)
    if trace_file is not None and (kernels.n == 0 or trace_file.stat().st_size <= TRACE_LIMIT):
        timeline, source = _timeline(folder, trace_file, cancel, progress)
        spans = timeline.spans
        extra.update({k: v for k, v in timeline.extra.items() if k in (framework_ops.KEY, framework_ops.STEPS)})
        if source != trace_file.name:
            extra["timeline"] = f"{source} (the SQLite export, read instead of {trace_file.name})"
        if kernels.n == 0:
            kernels = timeline.kernels
            extra["files"].append(source)
        else:
            kernels = _host_calls_from(_modules_from(kernels, timeline.kernels), timeline.kernels)
        host = host or list(timeline.host_ops)
        calls = timeline.host_calls
    info = _profiler_info(folder.parent if folder.name in (TORCH_NPU_DIR, MSPROF_DIR) else folder)
    extra.update(info)
    report_skips(extra, list(skips.values()))
    comm = communication.read_folder(folder, int(info.get("rank", -1)), trace=trace_file)
    return Profile(kind, kernels, tuple(stats), tuple(steps), tuple(host), spans, extra,
                   communication=comm if comm or comm.skipped else None, host_calls=calls)


def _timeline(folder: Path, trace_file: Path, cancel: threading.Event | None, progress: Progress | None
              ) -> tuple[Profile, str]:
    """The folder's timeline and the file it came from: its db export when it has one (no JSON to parse),
    else the trace; a db that cannot be read leaves the trace to be read."""
    db_file, analysis = profiler_db.find(folder)
    if db_file is not None:
        if progress is not None:
            progress(f"reading {db_file.name}", 0, None)
        try:
            return profiler_db.read(db_file, analysis)[0], db_file.name
        except InputError:
            pass
    if progress is not None:
        progress(f"reading {trace_file.name}", 0, None)
    return trace.read_trace(trace_file, cancel, progress), trace_file.name


def read_profile(path: Path, *, cancel: threading.Event | None = None) -> Profile | None:
    """The `Profile` of a profiler folder, its text export or, when it has only that, its db export; None when
    `path` is no profiler folder."""
    folder = output_dir(path)
    if folder is None:
        return None
    db_file, analysis = profiler_db.find(folder)
    if db_file is not None and not _text_export(folder):
        profile = profiler_db.read(db_file, analysis)[0]
        profile.extra.update({k: v for k, v in _profiler_info(_info_root(db_file.parent)).items()
                              if k not in profile.extra})
        if profile.communication is None:  # analysis.db's CommAnalyzer* tables and the db's COMMUNICATION_OP
            comm = communication.read_folder(folder, int(profile.extra.get("rank", -1)))
            profile.communication = comm if comm or comm.skipped else None
        return profile
    return read_folder(folder, cancel=cancel)


def _host_calls_from(kernels: KernelTable, timeline: KernelTable) -> KernelTable:
    """The timeline's `host_op` (its host-call row) joined onto the kernel rows by (name, start), as modules are."""
    if timeline.n == 0 or "host_op" not in timeline.ints or not (timeline.ints["host_op"] >= 0).any():
        return kernels
    tnames, host = timeline.text["name"], timeline.ints["host_op"]
    where = {(tnames.at(i), int(timeline.start_ns[i])): int(host[i]) for i in np.flatnonzero(host >= 0).tolist()}
    names = kernels.text["name"]
    found = np.fromiter((where.get((names.values[c], s), -1) for c, s in
                         zip(names.codes.tolist(), kernels.start_ns.tolist())), np.int64, kernels.n)
    return KernelTable(kernels.n, kernels.text, kernels.ints.replace("host_op", found), kernels.floats, kernels.metrics)


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


def _api(path: Path, skipped: Skipped | None = None) -> list[dict[str, Any]]:
    header, rows = csv_tables.read_records(path, skipped)
    num = csv_tables._num
    return csv_tables._tolerant(path, rows, lambda k, r: {
        "level": r.get("Level", ""), "name": r.get("API Name", ""), "count": int(num(path, r, "Count", k)),
        "time_us": num(path, r, "Time(us)", k)}, skipped)


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
    if path.suffix == ".db":  # a profiler db, or analysis.db beside one
        return profiler_db.sniff_file(path) or (path.name == profiler_db.ANALYSIS_DB and path.is_file()
                                                and profiler_db.find(path.parent)[0] is not None)
    if plain_name(path).endswith(".csv") and path.is_file():
        line = compressed_head(path).decode("utf-8-sig", errors="replace").split("\n", 1)[0]
        header = [h.strip() for h in line.split(",")]
        if "Allocation Time(us)" in header:  # operator_memory.csv has Name and Duration(us) too: the memory reader's
            return False
        return csv_tables.is_kernel_header(header) or _is_step_header(header)
    return trace.sniff_json(path)


def _is_step_header(header: list[str]) -> bool:
    """step_trace_time.csv's header (one rank's steps: Step, Computing, ..., Free)."""
    return "Computing" in header and "Free" in header and ("Step" in header or "Step Id" in header) and \
        "Type" not in header  # msprof-analyze's cluster table is the cluster reader's


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None,
         on_partial: Callable[[Investigation], None] | None = None) -> Investigation:
    """An `Investigation` of a profiler folder, kernel CSV or trace: time per kernel and memory (no advice yet).

    `on_partial` receives an investigation of the first block of kernel rows while the rest is read.
    """
    path = Path(path)
    partial = None if on_partial is None else \
        (lambda p: on_partial(profile_investigation(p, path, source=f"{p.kind} profiler (reading)",
                                                    device=_device(p))))
    if path.is_file() and path.suffix == ".db":
        return _load_db(path, path, *profiler_db.find(path.parent))
    if path.is_file():
        if plain_name(path).endswith(".json"):
            profile = trace.read_trace(path, cancel, progress)
        elif _is_step_header([h.strip() for h in compressed_head(path).decode("utf-8-sig", errors="replace")
                             .split("\n", 1)[0].split(",")]):
            skipped = Skipped(str(path))
            profile = Profile("ascend_pt", steps=csv_tables.read_step_trace(path, skipped),
                              extra={"files": [path.name]})
            report_skips(profile.extra, [skipped])
        else:
            skipped = Skipped(str(path))
            profile = Profile("kernel_csv", _fill_types(csv_tables.read_kernels(path, cancel=cancel, progress=progress,
                                                                                  skipped=skipped)))
            profile.kernels.dur_us  # decoded now: its undecodable cells are counted before the notes are made
            report_skips(profile.extra, [skipped])
        return profile_investigation(profile, path, source="trace" if plain_name(path).endswith(".json") else "kernel table",
                                     device=_device(profile))
    folder = output_dir(path)
    if folder is None:
        raise InputError(path, "not a profiler folder (no ASCEND_PROFILER_OUTPUT, mindstudio_profiler_output, "
                               "kernel_details.csv or op_summary_*.csv)")
    db_file, analysis = profiler_db.find(folder)
    if db_file is not None and not _text_export(folder):
        return _load_db(path, db_file, db_file, analysis)
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


def _load_db(path: Path, asked: Path, db_file: Path | None, analysis: Path | None) -> Investigation:
    """The investigation of a profiler db export (`asked` is the db the user named, or the folder's)."""
    if db_file is None or (asked.is_file() and asked != db_file and asked.name != profiler_db.ANALYSIS_DB):
        db_file, analysis = asked, None
    profile, samples, blocks = profiler_db.read(db_file, analysis)
    profile.extra.update({k: v for k, v in _profiler_info(_info_root(db_file.parent)).items() if k not in profile.extra})
    if profile.kernels.n == 0 and not profile.steps and not samples and not blocks:
        raise InputError(db_file, "profiler db without kernel tasks, steps or memory records")
    inv = profile_investigation(profile, path, source=f"{profile.kind} profiler (db)", device=_device(profile))
    if samples or blocks:
        merge_memory(inv, memory.memory_investigation(path, samples, blocks))
    return inv


def _info_root(folder: Path) -> Path:
    return folder.parent if folder.name in (TORCH_NPU_DIR, MSPROF_DIR) else folder


def _device(profile: Profile) -> dict[str, Any]:
    if profile.kind == "kineto":
        return {"backend": "cuda", "name": "offline (PyTorch profiler trace)", "inf_nan_mode": True}
    return {"backend": "npu", "name": f"offline ({profile.kind} profile)", "inf_nan_mode": True}


READER = FunctionReader("profiler", sniff, load, streams=True)
