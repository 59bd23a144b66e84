"""Reader of `msprobe overflow_check` output (anomaly_analyze_<ts>.json) -> `Investigation` with overflow findings.

msprobe flags an op whose inputs are finite but whose outputs hold Inf or NaN. Alone, the file
gives a graph of just those ops; when the dump it analysed is given or sits nearby (up to three
folders up), the findings are placed on the full dump graph instead.
"""

from __future__ import annotations

import itertools
import math
import re
import threading
from pathlib import Path
from typing import Any

from ascend_tui.errors import InputError
from ascend_tui.evidence import Finding
from ascend_tui.readers.msprobe.dump import (build, dominant_dtype, parse_leaves, rank_folders, read_dump,
                                        source_from_lines)
from ascend_tui.readers.msprobe.dump import load as load_dump
from ascend_tui.readers.msprobe.dump import sniff as sniff_dump
from ascend_tui.readers.msprobe.graph import MODULE_NAME, Leaf, Progress, stats_row
from ascend_tui.graph.opgraph import read_json
from ascend_tui.investigation import Investigation, RunInfo
from ascend_tui.readers.base import FunctionReader

_REPORT = re.compile(r"^anomaly_analyze_.*\.json$")
_RANK_KEY = re.compile(r"(\d+)$")
_MAX_SCAN = 256
_MAX_DUMP_BYTES = 256 << 20
SOURCE = "msprobe overflow_check"


def sniff(path: Path) -> bool:
    """An anomaly_analyze_*.json file, or a folder holding one."""
    path = Path(path)
    try:
        if path.is_file():
            return bool(_REPORT.match(path.name))
        return path.is_dir() and bool(_reports(path))
    except OSError:
        return False


def _reports(folder: Path) -> list[Path]:
    found = [p for p in itertools.islice(folder.iterdir(), 4096) if _REPORT.match(p.name) and p.is_file()]
    return sorted(found, key=lambda p: (len(p.name), p.name))


def read_report(path: Path) -> dict[str, list[dict[str, Any]]]:
    """{rank key: [flagged op records]}; anything else is an InputError naming the file."""
    raw = read_json(path)
    bad = "not an msprobe overflow_check result (expected {\"rank_0\": [{\"op_name\", \"data_info\"}, ...]})"
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        raise InputError(path, bad)
    for rank, items in raw.items():
        for i, item in enumerate(items):
            if not (isinstance(item, dict) and isinstance(item.get("op_name"), str)
                    and isinstance(item.get("data_info"), dict)):
                raise InputError(path, f"{rank}[{i}]: {bad}")
    return raw


def _rank_number(key: str) -> int:
    m = _RANK_KEY.search(key)
    return int(m.group(1)) if m else 0


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None, *,
         dump: Path | None = None) -> Investigation:
    """Read overflow_check output (a report file or its folder); merge onto `dump` or a dump found nearby."""
    path = Path(path)
    notes: list[str] = []
    if path.is_dir():
        reports = _reports(path)
        if not reports:
            raise InputError(path, "no anomaly_analyze_*.json here (expected msprobe overflow_check output)")
        if len(reports) > 1:
            notes.append(f"{len(reports)} overflow_check results in {path.name}; showing the latest, "
                         f"{reports[-1].name}")
        report = reports[-1]
    else:
        report = path
    ranks = read_report(report)
    if not ranks:
        raise InputError(report, "the overflow_check result lists no ranks")
    rank = min(ranks, key=_rank_number)
    if len(ranks) > 1:
        notes.append(f"{len(ranks)} ranks in the result; showing {rank}")
    flagged = ranks[rank]
    inv: Investigation | None = None
    if dump is not None:
        rank_dir = _rank_dir(Path(dump), rank)
        inv = load_dump(rank_dir, progress, cancel)
        notes.append(f"merged onto the dump at {rank_dir} (given)")
    elif (rank_dir := _find_dump(report, flagged, rank)) is not None:
        try:
            inv = load_dump(rank_dir, progress, cancel)
            notes.append(f"merged onto the dump at {rank_dir} (found next to the overflow_check output)")
        except InputError as exc:
            notes.append(f"the dump found at {rank_dir} could not be read ({exc.line()})")
    if inv is None:
        inv = _standalone(report, flagged, progress, cancel)
        notes.append("the dump this result came from was not found nearby: the graph holds only the flagged ops")
    _add_findings(inv, flagged, rank, notes)
    inv.run.extra.setdefault("notes", []).extend(notes)
    inv.run.extra["overflow_check"] = str(report)
    inv.run.target = str(path)
    return inv


def _standalone(report: Path, flagged: list[dict[str, Any]], progress: Progress | None,
                cancel: threading.Event | None) -> Investigation:
    """A graph of only the flagged ops, with their inputs as placeholders."""
    data: dict[str, Any] = {}
    construct: dict[str, str | None] = {}
    stacks = {}
    for item in flagged:
        name = item["op_name"]
        data[name] = item["data_info"]
        modules = [str(m) for m in item.get("construct_info") or () if MODULE_NAME.match(str(m))]
        if modules:
            construct[name] = max(modules, key=lambda m: len(MODULE_NAME.match(m)["path"]))  # type: ignore[index]
        if isinstance(item.get("stack_info"), list) and (loc := source_from_lines(item["stack_info"])):
            stacks[name] = loc
    built = build(data, construct, stacks, report, progress, cancel)
    run = RunInfo(target=str(report), source="msprobe", dtype=dominant_dtype(built.graph),
                  device={"backend": "offline", "name": "msprobe overflow_check", "inf_nan_mode": True},
                  checks=("overflow",), extra={"edges": dict(built.match_counts)})
    built.graph.name = f"msprobe overflow_check {report.name}"
    return Investigation(built.graph, stats=built.stats, run=run)


def _leaves(item: dict[str, Any], part: str, report: Path) -> list[Leaf]:
    info = item["data_info"]
    out: list[Leaf] = []
    keys = ("input_args", "input_kwargs", "input") if part == "input" else ("output",)
    for key in keys:
        parse_leaves(info.get(key), f"{item['op_name']}.{part}", report, out, {})
    return out


def _add_findings(inv: Investigation, flagged: list[dict[str, Any]], rank: str, notes: list[str]) -> None:
    """One error per flagged op and kind (`offline/overflow.py` merges them with the overflow check's own)."""
    by_entry = {n.attrs.get("msprobe"): n.id for n in inv.graph if n.attrs and not n.is_placeholder}
    report = Path(str(inv.run.extra.get("overflow_check", "")))
    added: list[Finding] = []
    missing = 0
    for item in flagged:
        node_id = by_entry.get(item["op_name"])
        if node_id is None:
            missing += 1
            continue
        node = inv.graph.node(node_id)
        rows = [r for leaf in _leaves(item, "output", report) if (r := stats_row(leaf)) is not None]
        kinds = [k for k, col in (("nan", 5), ("inf", 6)) if any(r[col] > 0 for r in rows)] or ["inf"]
        in_max = max((r[4] for leaf in _leaves(item, "input", report) if (r := stats_row(leaf))
                      and math.isfinite(r[4])), default=math.nan)
        for kind in kinds:
            metrics = {"input_abs_max": in_max, "source": SOURCE, "rank": rank, "msprobe_op": item["op_name"]}
            word = "NaN" if kind == "nan" else "Inf"
            added.append(Finding(
                check="overflow", kind=kind, severity="error", node=node_id, op_type=node.op_type,
                module=node.module, index=node.index, attribution="introduced", metrics=metrics,
                message=(f"{word} first appears at `{node_id}` ({item['op_name']}): every input is finite "
                         f"(largest |x| {in_max:.3g}) but the output holds {word} (flagged by {SOURCE})"),
            ))
    if missing:
        notes.append(f"{missing} flagged ops are not in the dump's graph")
    inv.replace_findings("overflow", added)
    inv.run.checks = tuple(dict.fromkeys((*inv.run.checks, "overflow")))


def _rank_dir(dump: Path, rank: str) -> Path:
    """The rank folder of `dump` that matches the result's rank key (`rank_1` -> rank1, or the second folder)."""
    folders, _ = rank_folders(dump)
    n = _rank_number(rank)
    named = [f for f in folders if f.name == f"rank{n}"]
    return named[0] if named else folders[min(n, len(folders) - 1)]


def _find_dump(report: Path, flagged: list[dict[str, Any]], rank: str) -> Path | None:
    """A dump folder up to three levels above `report` whose dump.json holds every flagged op with equal outputs."""
    home = Path.home().resolve()
    seen: set[Path] = set()
    for ancestor in list(report.resolve().parents)[:3]:
        if ancestor == Path(ancestor.anchor) or ancestor == home:
            break
        try:
            children = sorted(c for c in itertools.islice(ancestor.iterdir(), _MAX_SCAN) if c.is_dir())
        except OSError:
            continue
        for candidate in (ancestor, *children):
            if candidate in seen or not sniff_dump(candidate):
                continue
            seen.add(candidate)
            try:
                rank_dir = _rank_dir(candidate, rank)
                if _holds(rank_dir / "dump.json", flagged):
                    return rank_dir
            except (InputError, OSError):
                continue
    return None


def _holds(dump_file: Path, flagged: list[dict[str, Any]]) -> bool:
    """True when `dump_file` has a record for every flagged op whose outputs equal the flagged ones."""
    if dump_file.stat().st_size > _MAX_DUMP_BYTES:
        return False
    text = dump_file.read_text(encoding="utf-8", errors="replace")
    if not all(f'"{item["op_name"]}"' in text for item in flagged):
        return False
    _, data = read_dump(dump_file)
    for item in flagged:
        record = data.get(item["op_name"])
        if not isinstance(record, dict):
            return False
        theirs: list[Leaf] = []
        parse_leaves(record.get("output"), "output", dump_file, theirs, {})
        ours: list[Leaf] = []
        parse_leaves(item["data_info"].get("output"), "output", dump_file, ours, {})
        if [leaf.key() for leaf in theirs] != [leaf.key() for leaf in ours]:
            return False
    return True


READER = FunctionReader("msprobe overflow_check", sniff, load)
