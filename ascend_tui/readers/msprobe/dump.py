"""Reader of msprobe (mindstudio-probe) dumps: dump.json + construct.json + stack.json -> `Investigation`.

msprobe records what every API and module saw (dtype, shape, Max/Min/Mean/Norm, optionally the
tensor) but not which op fed which, so edges are inferred: an input is wired to the most recent
earlier output with the same dtype, shape and statistics. docs/formats.md describes the rules.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ascend_tui.errors import InputError
from ascend_tui.evidence import SourceLocation, StatsTable, TensorMeta
from ascend_tui.readers.msprobe.graph import (
    API_NAME, FLOAT_DTYPES, MODULE_NAME, PARAM_GRAD, Builder, Built, Entry, Leaf, Progress,
)
from ascend_tui.graph.ids import api_op
from ascend_tui.graph.opgraph import OpGraph, read_json
from ascend_tui.investigation import Investigation, RunInfo
from ascend_tui.readers.base import FunctionReader
from ascend_tui.readers.msprobe.mapping import canonical_dtype

_RANK_DIR = re.compile(r"^(?:rank|proc)(\d*)$")
_STEP_DIR = re.compile(r"^step(\d+)$")
_STACK_LINE = re.compile(r"^\s*File\s+(?P<file>.*?),\s*line\s+(?P<line>\d+),\s*in\s+(?P<func>[^,\n]*)", re.S)
_LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3")
_MAX_SCAN = 4096
_STACK_FRAMES = 16


# -- reading -------------------------------------------------------------------------------------


def sniff(path: Path) -> bool:
    """A dump.json file, or a folder holding one directly, in a rank/proc child or a step/rank grandchild."""
    path = Path(path)
    try:
        if path.is_file():
            return path.name == "dump.json"
        if not path.is_dir():
            return False
        if (path / "dump.json").is_file():
            return True
        if any((d / "dump.json").is_file() for d in _numbered(path, _RANK_DIR)):
            return True
        return any(any((r / "dump.json").is_file() for r in _numbered(s, _RANK_DIR))
                   for s in _numbered(path, _STEP_DIR))
    except OSError:
        return False


def _numbered(path: Path, pattern: re.Pattern[str]) -> list[Path]:
    """Child folders matching `pattern`, in numeric order (`rank2` before `rank10`)."""
    found: list[tuple[int, str, Path]] = []
    for child in itertools.islice(path.iterdir(), _MAX_SCAN):
        m = pattern.match(child.name)
        if m and child.is_dir():
            found.append((int(m.group(1) or 0), child.name, child))
    return [p for _, _, p in sorted(found, key=lambda t: (t[0], t[1]))]


def rank_folders(path: Path) -> tuple[list[Path], list[str]]:
    """Every rank/proc folder with a dump.json under `path` (first step only) and notes on what was left out."""
    path = Path(path)
    if path.is_file():
        if path.name != "dump.json":
            raise InputError(path, "expected an msprobe dump.json or a dump folder")
        return [path.parent], []
    if not path.is_dir():
        raise InputError(path, "no such file or folder")
    if (path / "dump.json").is_file():
        return [path], []
    notes: list[str] = []
    try:
        ranks = [d for d in _numbered(path, _RANK_DIR) if (d / "dump.json").is_file()]
        steps = _numbered(path, _STEP_DIR)
        for step in steps if not ranks else ():
            ranks = [d for d in _numbered(step, _RANK_DIR) if (d / "dump.json").is_file()]
            if ranks:
                if len(steps) > 1:
                    notes.append(f"{len(steps)} steps in {path.name}; showing {step.name} (i in the app picks "
                                 f"another; or open a step folder)")
                break
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    if not ranks:
        raise InputError(path, "no msprobe dump.json here (expected a dump root with step*/rank*/ or proc*/ "
                               "folders, a step folder, or a rank folder)")
    return ranks, notes


def locate(path: Path) -> tuple[Path, list[str]]:
    """The rank folder to read for `path` (a dump root, a step folder, a rank folder or dump.json) and notes."""
    ranks, notes = rank_folders(path)
    if len(ranks) > 1:
        notes.append(f"{len(ranks)} ranks in {ranks[0].parent.name}; showing {ranks[0].name} (i in the app picks "
                     f"another; or open a rank folder)")
    return ranks[0], notes


def read_dump(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, data) of a dump.json; bare Infinity/NaN tokens are accepted, anything malformed is an InputError."""
    raw = read_json(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), dict):
        raise InputError(path, "not an msprobe dump.json (expected an object with a \"data\" object of API "
                               "and module records)")
    return {k: v for k, v in raw.items() if k != "data"}, raw["data"]


def read_construct(path: Path) -> dict[str, str | None]:
    """construct.json: node name -> parent node name (absent file: empty)."""
    if not path.exists():
        return {}
    raw = read_json(path)
    if isinstance(raw, dict) and MICRO_STEPS in raw:  # Megatron dumps: {node: [parent, micro step], key: n}
        raw = {k: v[0] if isinstance(v, list) and len(v) == 2 else v for k, v in raw.items() if k != MICRO_STEPS}
    if not isinstance(raw, dict) or not all(v is None or isinstance(v, str) for v in raw.values()):
        raise InputError(path, "not an msprobe construct.json (expected an object mapping each node to its "
                               "parent's name or null)")
    return raw


MICRO_STEPS = "megatron_micro_step_number"


def read_stacks(path: Path) -> dict[str, SourceLocation]:
    """stack.json in the old ({name: [lines]}) or 26.x ({"0": [[names], [lines]]}) format -> name -> source."""
    if not path.exists():
        return {}
    return parse_stacks(read_json(path), path)


def parse_stacks(raw: Any, path: Path) -> dict[str, SourceLocation]:
    """`read_stacks` of stack.json's parsed JSON `raw` (for a caller that needs the raw lines too)."""
    bad = InputError(path, "not an msprobe stack.json (expected {name: [frames]} or {\"0\": [[names], [frames]]})")
    if not isinstance(raw, dict):
        raise bad
    grouped = "0" in raw
    out: dict[str, SourceLocation] = {}
    for key, value in raw.items():
        if grouped:
            if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], list)
                    and isinstance(value[1], list)):
                raise bad
            names, lines = value
        elif isinstance(value, list):
            names, lines = [key], value
        else:
            raise bad
        loc = source_from_lines(lines)
        if loc is not None:
            for name in names:
                out[str(name)] = loc
    return out


def source_from_lines(lines: list[Any]) -> SourceLocation | None:
    """A `SourceLocation` from msprobe's "File f, line n, in fn, \\n code" lines (innermost first)."""
    frames: list[tuple[str, int, str]] = []
    for line in lines:
        m = _STACK_LINE.match(str(line))
        if m and "/msprobe/" not in m["file"]:
            frames.append((m["file"], int(m["line"]), m["func"].strip()))
    if not frames:
        return None
    user = next((f for f in frames if not any(mark in f[0] for mark in _LIBRARY)), frames[0])
    stack = tuple(f"{f}:{n} in {fn}" for f, n, fn in frames[:_STACK_FRAMES])
    return SourceLocation(user[0], user[1], user[2], stack)


# -- records --------------------------------------------------------------------------------------


def _number(value: Any, where: str, path: Path) -> float | None:
    if value is None:
        return None
    if type(value) is float:
        return value
    if isinstance(value, (bool, int, float)):
        return float(value)
    try:
        return float(str(value).replace("Infinity", "inf"))
    except ValueError:
        raise InputError(path, f"{where}: statistic {value!r} is not a number") from None


def statistic(value: Any, where: str, path: Path) -> float | None:
    """One Max/Min/Mean/Norm value of a record as a float (None when absent; a non-number is an InputError)."""
    return _number(value, where, path)


_INT_TYPES = frozenset({int, bool})  # what isinstance(d, int) accepts among JSON's types


@lru_cache(maxsize=8192)
def _meta(shape: tuple[int, ...], dtype: str) -> TensorMeta:
    """One shared (frozen) `TensorMeta` per shape and dtype spelling: most tensors of a model share a few."""
    return TensorMeta(shape, canonical_dtype(dtype))


def tensor_leaf(value: dict[str, Any], name: str, path: Path) -> Leaf:
    """The `Leaf` of one msprobe tensor record (an object with "dtype" and "shape")."""
    shape, dtype = value["shape"], value["dtype"]
    if not (isinstance(shape, list) and isinstance(dtype, str)) or not _INT_TYPES.issuperset(map(type, shape)):
        raise InputError(path, f"{name}: a tensor record needs an integer list \"shape\" and a \"dtype\"")
    get = value.get
    mx, mn, mean, norm = get("Max"), get("Min"), get("Mean"), get("Norm")
    if mx is None and mn is None and mean is None and norm is None:
        stats = None
    else:
        stats = (_number(mx, name, path), _number(mn, name, path), _number(mean, name, path),
                 _number(norm, name, path))
    md5 = get("md5")
    return Leaf.make(name, _meta(tuple(shape), dtype), stats, str(md5) if md5 is not None else None,
                     get("data_name"))


LeafCache = dict[int, tuple[dict[str, Any], Leaf]]  # id(tensor record) -> (the record, its leaf)


def parse_leaves(value: Any, name: str, path: Path, tensors: list[Leaf], scalars: dict[str, Any],
                 cache: LeafCache | None = None) -> None:
    """Flatten nested lists/dicts of msprobe leaves into tensor `Leaf`s (in order) and scalar values.

    `cache` holds leaves already parsed from these very records (by `compare_rows.items_of`): reused
    when the name agrees, so a compare parses each tensor record once.
    """
    if value is None:
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            parse_leaves(item, f"{name}.{i}", path, tensors, scalars, cache)
        return
    if not isinstance(value, dict):
        raise InputError(path, f"{name}: {value!r} is not an msprobe tensor or value record")
    if "dtype" in value and "shape" in value:
        hit = cache.get(id(value)) if cache else None
        if hit is not None and hit[0] is value and hit[1].name == name:
            tensors.append(hit[1])
        else:
            tensors.append(tensor_leaf(value, name, path))
    elif "type" in value or "class_type" in value:
        if "value" in value and not isinstance(value["value"], (dict, list)):
            scalars[name] = value["value"]
        for k, v in value.items():
            if isinstance(v, dict) and "dtype" in v:
                parse_leaves(v, f"{name}.{k}", path, tensors, scalars, cache)
    else:
        for k, v in value.items():
            parse_leaves(v, f"{name}.{k}", path, tensors, scalars, cache)


def parse_entry(name: str, record: Any, path: Path, cache: LeafCache | None = None) -> Entry | None:
    """Classify one dump.json record; None for records that are not ops (parameter gradients).

    `cache`: leaves parsed before from these records (see `parse_leaves`).
    """
    if PARAM_GRAD.match(name):
        return None
    if not isinstance(record, dict):
        raise InputError(path, f"record {name!r} is {type(record).__name__}, expected an object")
    if m := MODULE_NAME.match(name):
        kind = name.split(".", 1)[0]  # Module (PyTorch) or Cell (MindSpore): the record says which
        entry = Entry(name, "module", m["cls"], f"{kind}.{m['cls']}", m["dir"], m["path"], m["cls"])
    elif m := API_NAME.match(name):
        entry = Entry(name, "api", api_op(m["api"]), f"{m['prefix']}.{api_op(m['api'])}", m["dir"])
    else:
        return None
    entry.phase = entry.direction
    ins = ("input_args", "input_kwargs") if entry.direction == "forward" else ("input",)
    if entry.direction == "forward" and "input_args" not in record and "input" in record:
        ins = ("input", "input_kwargs")  # older dumps (and MindSpore cells) write a forward's inputs as "input"
    for key in ins:
        parse_leaves(record.get(key), f"{name}.input", path, entry.inputs, entry.scalars, cache)
    parse_leaves(record.get("output"), f"{name}.output", path, entry.outputs, entry.scalars, cache)
    params = record.get("parameters")
    if isinstance(params, dict):
        for pname, leaf in params.items():
            found: list[Leaf] = []
            parse_leaves(leaf, f"{name}.parameters.{pname}", path, found, {}, cache)
            if found:
                entry.params[str(pname)] = found[0]
    entry.recompute = bool(record.get("is_recompute", False))
    return entry


# -- graph and statistics -------------------------------------------------------------------------


def build(data: Mapping[str, Any], construct: Mapping[str, str | None], stacks: Mapping[str, SourceLocation],
          path: Path, progress: Progress | None = None, cancel: threading.Event | None = None) -> Built:
    """The graph and statistics of dump.json `data` (records in execution order)."""
    entries: list[Entry] = []
    skipped = 0
    for name, record in data.items():
        entry = parse_entry(str(name), record, path)
        if entry is None:
            skipped += not PARAM_GRAD.match(str(name))
            continue
        entries.append(entry)
    builder = Builder(entries, construct, stacks)
    builder.build(progress, cancel)
    return builder.finish(skipped)


def exact_counts(rank_dir: Path, leaves: Mapping[tuple[str, int], Leaf], stats: StatsTable) -> int:
    """Replace lower-bound NaN/Inf/zero counts by exact ones from the .pt payloads of non-finite tensors.

    torch is imported only when such a tensor exists; payloads load with `weights_only=True`.
    """
    todo = [(key, stat, leaf) for key, stat in stats.items()
            if not stat.finite and (leaf := leaves.get(key)) is not None and leaf.data_name]
    if not todo:
        return 0
    try:
        import torch
    except ImportError:
        return 0
    fixed = 0
    for key, stat, leaf in todo:
        try:
            t = torch.load(rank_dir / "dump_tensor_data" / str(leaf.data_name), weights_only=True,
                           map_location="cpu")
        except Exception:  # noqa: BLE001 - a missing or foreign payload keeps the lower bounds
            continue
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            continue
        x = t.detach().float()
        row = list(stat.to_row())
        row[5], row[6] = float(torch.isnan(x).sum()), float(torch.isinf(x).sum())
        row[7] = float(x.numel() - torch.count_nonzero(x))
        stats.add_many([key], np.array([row]))
        fixed += 1
    return fixed


def dominant_dtype(graph: OpGraph) -> str:
    """The floating dtype most op outputs have (float32 when there are none)."""
    counts = Counter(m.dtype for n in graph if not n.is_placeholder for m in n.outputs
                     if m is not None and m.dtype in FLOAT_DTYPES)
    return counts.most_common(1)[0][0] if counts else "float32"


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None) -> Investigation:
    """Read an msprobe dump (root, stepN, rank/proc folder or dump.json) into an `Investigation`."""
    path = Path(path)
    rank_dir, notes = locate(path)
    if progress is not None:
        progress("reading dump.json", 0, None)
    dump_file = rank_dir / "dump.json"
    header, data = read_dump(dump_file)
    construct = read_construct(rank_dir / "construct.json")
    stacks = read_stacks(rank_dir / "stack.json")
    built = build(data, construct, stacks, dump_file, progress, cancel)
    if not construct:
        notes.append("construct.json is empty or absent (level L1?): operators have no module paths")
    if built.skipped:
        notes.append(f"{built.skipped} records with names msprobe does not use for APIs or modules were skipped")
    exact = exact_counts(rank_dir, built.leaves, built.stats) if header.get("task") == "tensor" else 0
    nonfinite = any(not s.finite for _, s in built.stats.items())
    run = RunInfo(
        target=str(path), source="msprobe", dtype=dominant_dtype(built.graph),
        device={"backend": "offline", "name": f"msprobe {header.get('framework', '')} dump".replace("  ", " "),
                "inf_nan_mode": True if nonfinite else None},
        extra={"task": header.get("task"), "level": header.get("level"), "framework": header.get("framework"),
               "rank_dir": str(rank_dir), "step": rank_dir.parent.name, "rank": rank_dir.name,
               "edges": dict(built.match_counts), "exact_counts_from_payloads": exact, "notes": notes,
               **_point_extra(path, rank_dir)},
    )
    built.graph.name = f"msprobe {rank_dir.parent.name}/{rank_dir.name}"
    return Investigation(built.graph, stats=built.stats, run=run)


def _point_extra(path: Path, rank_dir: Path) -> dict[str, Any]:
    """`run.extra` of a dump with several steps or ranks: the root and this folder's place among them."""
    try:
        points = dump_points(path)
    except InputError:
        return {}
    here = next((p for p in points if p.folder.resolve() == rank_dir.resolve()), None)
    if len(points) < 2 or here is None:
        return {}
    return {"dump_root": str(dump_root(path)), "points": len(points), "point": here.label,
            "steps": len({p.step for p in points}), "ranks": len({p.rank for p in points})}


READER = FunctionReader("msprobe dump", sniff, load)


def step_folders(path: Path) -> list[Path]:
    """The step*/ folders of a dump root that hold a rank with a dump.json, in step order ([] for one step)."""
    path = Path(path)
    if not path.is_dir() or (path / "dump.json").is_file():
        return []
    try:
        return [s for s in _numbered(path, _STEP_DIR)
                if any((r / "dump.json").is_file() for r in _numbered(s, _RANK_DIR))]
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None


# -- steps and ranks ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DumpPoint:
    """One step x rank folder of a dump root (`step`/`rank` None where the layout has no such level)."""

    step: int | None
    rank: int | None
    folder: Path

    @property
    def label(self) -> str:
        """`step1/rank0` (the folder names msprobe wrote), `rank0` or `dump` for a lone folder."""
        parts = ([self.folder.parent.name] if self.step is not None else []) + \
                ([self.folder.name] if self.rank is not None else [])
        return "/".join(parts) or "dump"


def dump_root(path: Path) -> Path:
    """The dump root above `path` (dump.json, a rank folder, a step folder or the root itself)."""
    path = Path(path)
    here = path.parent if path.is_file() else path
    if _RANK_DIR.match(here.name) and (here / "dump.json").is_file():
        here = here.parent
    if _STEP_DIR.match(here.name) and here.parent != here:
        here = here.parent
    return here


def dump_points(path: Path) -> list[DumpPoint]:
    """Every step x rank folder holding a dump.json under the root of `path`, in step then rank order."""
    root = dump_root(path)
    try:
        if (root / "dump.json").is_file():
            return [DumpPoint(None, None, root)]
        points = [DumpPoint(None, _num(r.name, _RANK_DIR), r) for r in _numbered(root, _RANK_DIR)
                  if (r / "dump.json").is_file()]
        for step in _numbered(root, _STEP_DIR):
            points += [DumpPoint(_num(step.name, _STEP_DIR), _num(r.name, _RANK_DIR), r)
                       for r in _numbered(step, _RANK_DIR) if (r / "dump.json").is_file()]
    except OSError as exc:
        raise InputError(root, exc.strerror or str(exc)) from None
    return points


def _num(name: str, pattern: re.Pattern[str]) -> int:
    m = pattern.match(name)
    return int(m.group(1) or 0) if m else 0
