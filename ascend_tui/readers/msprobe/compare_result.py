"""msprobe's compare result (`compare_result_*.csv` or `.xlsx`) opened without the dumps it came from.

Each row is one tensor of the target (NPU) run with its golden (Bench) counterpart, in execution
order, named as in dump.json. The rows are turned back into dump records (NPU dtype, shape and
Max/Min/Mean/Norm as the record's statistics) and go through the msprobe graph builder, so the
graph is the one the dump would give, minus construct.json's module nesting. msprobe's metrics
become the precision table, its Result column a finding per operator, the Bench statistics the
reference; rows with no Bench data are counted and, over a tenth, lead as a warning. A row of the
wrong length is skipped and counted; a file with no usable row is refused. The `.xlsx` is read
with zipfile and ElementTree (the first worksheet, inline or shared strings): no dependency.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
import re
import threading
import zipfile
from pathlib import Path
from typing import Any, Iterator
from xml.etree import ElementTree

from ascend_tui.errors import InputError
from ascend_tui.evidence import Finding, SourceLocation, StatsTable, TensorMeta
from ascend_tui.investigation import Investigation, RunInfo
from ascend_tui.progress import Progress
from ascend_tui.readers.base import FunctionReader, head
from ascend_tui.readers.msprobe.compare_columns import COLUMNS, EXTRA_KEYS, FROM_HEADER, STATISTICS_HEADER
from ascend_tui.readers.msprobe.dump import dominant_dtype, parse_entry, source_from_lines
from ascend_tui.readers.msprobe.graph import Builder, Leaf, stats_rows
from ascend_tui.readers.msprobe.mapping import canonical_dtype

NA = "N/A"
REQUIRED = ("NPU Name", "Bench Name", "NPU Dtype", "NPU Tensor Shape")
VERDICT = ("Result", "Accuracy Reached or Not")  # the second is what msprobe/ptdbg wrote before Result
_RESULT = {"pass": "pass", "fail": "error", "error": "error", "warning": "warning", "yes": "pass", "no": "error"}
_ROW = re.compile(r"^(?P<entry>.+?\.(?:forward|backward)(?:\.\d+)?)\.(?P<section>input|output|parameters)"
                  r"\.(?P<rest>.+)$")
_GRAD = re.compile(r"^(?P<entry>.+\.parameters_grad)\.(?P<rest>.+)$")
_NS = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_REL_NS = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
VIEW_COLUMNS = ("name", "node", "slot", "cosine", "max_abs", "max_rel", "rmse", "one_thousandth", "result",
                "attribution")
UNMATCHED_SHARE = 0.1
HINT = ("msprobe pairs by name: rerun its compare with -am/-cm/-lm/-dm or -fm, or compare the dumps with "
        "`ascend-tui compare --api-mapping/--cell-mapping/--layer-mapping/--data-mapping/--fuzzy`")


# -- sniffing and tables ---------------------------------------------------------------------------


def sniff(path: Path) -> bool:
    """A CSV whose header starts with msprobe's `NPU Name,Bench Name`, or an .xlsx whose first sheet does."""
    if path.suffix.lower() == ".csv":
        return head(path, 64).lstrip(b"\xef\xbb\xbf").startswith(b"NPU Name,Bench Name")
    if path.suffix.lower() == ".xlsx" and head(path, 4) == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(path) as z:
                with z.open(_first_sheet(z)) as fh:
                    if b"NPU Name" in fh.read(8192):
                        return True
                if "xl/sharedStrings.xml" in z.namelist():  # a workbook re-saved by Excel: header text is shared
                    with z.open("xl/sharedStrings.xml") as fh:
                        return b"NPU Name" in fh.read(8192)
                return False
        except (OSError, KeyError, zipfile.BadZipFile, ElementTree.ParseError):
            return False
    return False


def _first_sheet(z: zipfile.ZipFile) -> str:
    """The zip member of the workbook's first worksheet."""
    try:
        wb = ElementTree.fromstring(z.read("xl/workbook.xml"))
        rels = ElementTree.fromstring(z.read("xl/_rels/workbook.xml.rels"))
        sheet = next(iter(wb.iter(f"{_NS}sheet")))
        rid = sheet.get(f"{_REL_NS}id")
        target = next(r.get("Target") for r in rels if r.get("Id") == rid)
        target = str(target).lstrip("/")
        return target if target.startswith("xl/") else f"xl/{target}"
    except (KeyError, StopIteration):
        return "xl/worksheets/sheet1.xml"


def _column(ref: str) -> int:
    n = 0
    for ch in ref:
        if not ch.isalpha():
            break
        n = n * 26 + ord(ch.upper()) - 64
    return n - 1


def _xlsx_rows(path: Path) -> Iterator[list[str]]:
    """Rows of the first worksheet as text (numbers as written, shared and inline strings resolved)."""
    try:
        with zipfile.ZipFile(path) as z:
            shared: list[str] = []
            if "xl/sharedStrings.xml" in z.namelist():
                root = ElementTree.fromstring(z.read("xl/sharedStrings.xml"))
                shared = ["".join(t.text or "" for t in si.iter(f"{_NS}t")) for si in root.iter(f"{_NS}si")]
            sheet = ElementTree.fromstring(z.read(_first_sheet(z)))
    except (OSError, KeyError, zipfile.BadZipFile, ElementTree.ParseError) as exc:
        raise InputError(path, f"not a readable .xlsx workbook ({type(exc).__name__}: {exc})") from None
    for row in sheet.iter(f"{_NS}row"):
        cells: dict[int, str] = {}
        for i, c in enumerate(row.iter(f"{_NS}c")):
            col = _column(c.get("r") or "") if c.get("r") else i
            kind = c.get("t")
            if kind == "inlineStr":
                text = "".join(t.text or "" for t in c.iter(f"{_NS}t"))
            else:
                v = c.find(f"{_NS}v")
                text = v.text or "" if v is not None else ""
                if kind == "s" and text.isdigit() and int(text) < len(shared):
                    text = shared[int(text)]
                elif kind == "b":
                    text = "True" if text == "1" else "False"
            cells[col] = text
        yield [cells.get(i, "") for i in range(max(cells) + 1)] if cells else []


def _csv_rows(path: Path) -> Iterator[list[str]]:
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise InputError(path, f"cannot read ({exc.strerror or exc})") from None
    yield from csv.reader(io.StringIO(text, newline=""))


def read_table(path: Path) -> tuple[list[str], list[dict[str, str]], int, int | None]:
    """(header, rows as dicts, rows skipped for a wrong field count, the first skipped row's number)."""
    rows = _xlsx_rows(path) if path.suffix.lower() == ".xlsx" else _csv_rows(path)
    header = next(rows, None)
    if not header or any(c not in header for c in REQUIRED) or not any(c in header for c in VERDICT):
        missing = [c for c in REQUIRED if c not in (header or [])] or ["Result"]
        raise InputError(path, f"not an msprobe compare result (no {', '.join(missing)} column)")
    out: list[dict[str, str]] = []
    skipped, first = 0, None
    for n, row in enumerate(rows, 2):
        if not row or not any(row):
            continue
        if len(row) != len(header):
            row = row + [""] * (len(header) - len(row)) if path.suffix.lower() == ".xlsx" else row
            if len(row) != len(header):
                skipped += 1
                first = first or n
                continue
        out.append(dict(zip(header, row)))
    if not out:
        raise InputError(path, "an msprobe compare result with no usable row"
                               + (f" ({skipped} rows of the wrong length, first at row {first})" if skipped else ""))
    return header, out, skipped, first


# -- rows back into records ------------------------------------------------------------------------


def _float(text: Any) -> float | None:
    s = str(text).strip()
    if s in ("", NA, "None", "unsupported"):
        return None
    pct = s.endswith("%")
    try:
        v = float(s.rstrip("%").replace("Infinity", "inf"))
    except ValueError:
        return None
    return v / 100 if pct else v


def _stat(text: Any) -> float | None:
    s = str(text).strip()
    if s in ("", NA, "None"):
        return None
    try:
        return float(s.replace("Infinity", "inf"))
    except ValueError:
        return None


def _shape(text: str) -> list[int] | None:
    try:
        shape = json.loads(text)
    except ValueError:
        return None
    return shape if isinstance(shape, list) and all(isinstance(d, int) for d in shape) else None


def _leaf_record(row: dict[str, str], side: str) -> Any:
    """The dump.json leaf a row's `side` (NPU or Bench) describes; None for a None value."""
    dtype = row.get(f"{side} Dtype", NA)
    if dtype.startswith("<class '"):
        return {"type": dtype[8:].rstrip("'>"), "value": row.get(f"{side} max")}
    shape = _shape(row.get(f"{side} Tensor Shape", NA))
    if dtype in ("", NA) or shape is None:
        return None
    rec: dict[str, Any] = {"type": "torch.Tensor", "dtype": dtype, "shape": shape}
    for key, col in (("Max", "max"), ("Min", "min"), ("Mean", "mean"), ("Norm", "l2norm")):
        rec[key] = _stat(row.get(f"{side} {col}", NA))
    md5 = row.get("NPU MD5" if side == "NPU" else "BENCH MD5")
    if md5 and md5 != NA:
        rec["md5"] = md5
    return rec


def records(rows: list[dict[str, str]]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """dump.json-like records of the NPU side in row order, and each row name's entry (parameter grads too)."""
    data: dict[str, dict[str, Any]] = {}
    entry_of: dict[str, str] = {}
    for row in rows:
        name = row["NPU Name"]
        if m := _GRAD.match(name):
            entry_of[name] = m["entry"]
            continue
        m = _ROW.match(name)
        if m is None:
            continue
        entry, section, rest = m["entry"], m["section"], m["rest"]
        entry_of[name] = entry
        forward = entry.endswith(".forward") or ".forward." in entry
        rec = data.setdefault(entry, {"input_kwargs": {}, "output": {}, "parameters": {}} if forward
                              else {"input": {}, "output": {}})
        key = {"input": "input_kwargs" if forward else "input"}.get(section, section)
        rec.setdefault(key, {})[rest] = _leaf_record(row, "NPU")
    return data, entry_of


def _stacks(rows: list[dict[str, str]], entry_of: dict[str, str]) -> dict[str, SourceLocation]:
    out: dict[str, SourceLocation] = {}
    for row in rows:
        text, entry = row.get("NPU_Stack_Info", ""), entry_of.get(row["NPU Name"])
        if entry is None or entry in out or not text.startswith("["):
            continue
        try:
            lines = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            continue
        if isinstance(lines, list) and (loc := source_from_lines(lines)) is not None:
            out[entry] = loc
    return out


def _mode(header: list[str]) -> str:
    if "Cosine" in header:
        return "tensor"
    return "md5" if "NPU MD5" in header else "statistics"


def _metrics(row: dict[str, str], mode: str) -> list[Any]:
    """cosine, max_abs, max_rel, rmse, one_thousandth of a row, as the compare's precision table has them."""
    def num(col: str) -> Any:
        v = _float(row.get(col, NA))
        return NA if v is None else v if math.isfinite(v) else str(v)
    if mode == "tensor":
        return [num("Cosine"), num("MaxAbsErr"), num("MaxRelativeErr"), NA, num("One Thousandth Err Ratio")]
    if mode == "statistics":
        return [NA, num("Max diff"), num("NormRelativeErr"), NA, NA]
    return [NA] * 5


def verdict(row: dict[str, str]) -> str:
    """pass, warning, error or N/A from the Result column (or the older "Accuracy Reached or Not": Yes/No).

    A CSV written by `ascend-tui compare` keeps msprobe's rules in Result and ours in Verdict: ours is read.
    """
    text = row.get("Verdict") or row.get("Result") or row.get("Accuracy Reached or Not") or NA
    return _RESULT.get(text.strip().lower(), NA)


def _messages(text: str) -> list[str]:
    try:
        found = json.loads(text)
    except ValueError:
        return [text] if text and text != NA else []
    return [str(m) for m in found] if isinstance(found, list) else [str(found)]


def _extra_cells(header: list[str], mode: str) -> Any:
    """A function giving a row's cells under `EXTRA_KEYS` (N/A for a column this file does not have)."""
    by_key = {**{k: h for h, k in FROM_HEADER.items() if h in header},
              **({STATISTICS_HEADER[h]: h for h in STATISTICS_HEADER if h in header} if mode == "statistics" else {})}
    numeric = {c.key for c in COLUMNS if c.numeric}
    plan = [(by_key.get(k), k in numeric) for k in EXTRA_KEYS[:-2]]
    message = EXTRA_KEYS.index("err_message") if "err_message" in by_key else None

    def cells(row: dict[str, str]) -> list[Any]:
        out: list[Any] = [(_cell_number(row.get(h, NA)) if num else row.get(h, NA)) if h else NA for h, num in plan]
        if message is not None:
            out[message] = "; ".join(_messages(str(out[message]))) or NA
        return out + _data_names(row.get("Data_name", NA))
    return cells


def _stack_cells(table: list[list[Any]], entry_of: dict[str, str]) -> dict[str, str]:
    """Record -> its NPU_Stack_Info (msprobe writes it on the record's first row); each row's stack cell then
    names its record, so every row of a record shows the stack and the text is kept once."""
    at = len(VIEW_COLUMNS) + EXTRA_KEYS.index("stack")
    stacks: dict[str, str] = {}
    for row in table:
        entry = entry_of.get(str(row[0]), str(row[0]))
        text = row[at]
        if isinstance(text, str) and text not in ("", NA):
            stacks.setdefault(entry, text)
    for row in table:
        entry = entry_of.get(str(row[0]), str(row[0]))
        row[at] = entry if entry in stacks else NA
    return stacks


def _cell_number(text: str) -> Any:
    """A number cell as a float where it is a plain finite number; as written otherwise (`12.5%`, `N/A`, `inf`)."""
    try:
        v = float(text)
    except ValueError:
        return text
    return v if math.isfinite(v) else text.strip()


def _data_names(text: str) -> list[str]:
    """msprobe's Data_name cell (`['a.pt', 'b.pt']`, `-1` for none) as the two file names, N/A where absent."""
    try:
        names = ast.literal_eval(text) if text.startswith("[") else None
    except (ValueError, SyntaxError):
        names = None
    if not isinstance(names, list) or len(names) != 2:
        return [NA, NA]
    return [str(n) if str(n) not in ("-1", "", NA) else NA for n in names]


# -- load ------------------------------------------------------------------------------------------


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None) -> Investigation:
    """Read msprobe's compare result into an `Investigation`: its graph, its metrics, its Result verdicts."""
    path = Path(path)
    if progress is not None:
        progress("reading msprobe compare result", 0, None)
    header, rows, skipped, first_bad = read_table(path)
    mode = _mode(header)
    extra = _extra_cells(header, mode)
    data, entry_of = records(rows)
    entries = [e for name, rec in data.items() if (e := parse_entry(name, rec, path)) is not None]
    builder = Builder(entries, {}, _stacks(rows, entry_of))
    builder.build(progress, cancel)
    built = builder.finish(0)
    graph = built.graph
    slot_of = {leaf.name: key for key, leaf in built.leaves.items()}
    table: list[list[Any]] = []
    ref_keys, ref_leaves = [], []
    worst: dict[str, tuple[str, dict[str, str]]] = {}
    unmatched: list[str] = []
    for row in rows:
        name = row["NPU Name"]
        result = verdict(row)
        entry = entry_of.get(name)
        nid = builder.ids.get(entry) if entry else None
        key = slot_of.get(name)
        node, slot = (key if key else (nid, -1))
        if row.get("Bench Name", NA) in ("", NA):
            unmatched.append(entry or name)
        elif key is not None and (bench := _leaf_record(row, "Bench")) is not None and "shape" in bench:
            stats = tuple(bench[k] for k in ("Max", "Min", "Mean", "Norm"))
            if any(v is not None for v in stats):
                ref_keys.append(key)
                ref_leaves.append(Leaf.make(name, TensorMeta(tuple(bench["shape"]), canonical_dtype(bench["dtype"])),
                                            stats))
        table.append([name, node, slot, *_metrics(row, mode), result, row.get("Attribution", ""),  # ours: kept
                      *extra(row)])
        if result in ("error", "warning") and node in graph and (node not in worst or
                                                                  (worst[node][0] == "warning" and result == "error")):
            worst[node] = (result, row)
    stacks = _stack_cells(table, entry_of)
    findings = [_finding(graph.node(nid), sev, row, mode) for nid, (sev, row) in worst.items()]
    notes = ["construct.json is not part of a compare result: operators have no module paths"]
    if skipped:
        notes.append(f"{skipped} rows of the wrong length were skipped (first at row {first_bad})")
    unnamed = [r["NPU Name"] for r in rows if r["NPU Name"] not in entry_of]
    if unnamed:
        notes.append(f"{len(unnamed)} rows have names that are not msprobe API or module names (first: "
                     f"{unnamed[0]}): they stay in the precision table without an operator")
    entries_left = list(dict.fromkeys(unmatched))
    if rows and len(unmatched) / len(rows) > UNMATCHED_SHARE:
        more = len(entries_left) - 5
        at = next((graph.node(n) for e in entries_left if (n := builder.ids.get(e)) and n in graph), None)
        where = (at.id, at.op_type, at.module, at.index) if at else ("", "", "", -1)
        findings.append(Finding(
            "precision", "unmatched", "warning", *where,
            f"{len(unmatched)} of {len(rows)} rows of msprobe's result have no bench data ({len(entries_left)} "
            f"records, first: {', '.join(entries_left[:5])}{f' and {more} more' if more > 0 else ''}); "
            "msprobe gives no verdict on them", metrics={"rows": len(rows), "unmatched": len(unmatched)}, hint=HINT))
    reference = StatsTable()
    if ref_keys:
        reference.add_many(ref_keys, stats_rows(ref_leaves))
    run = RunInfo(target=str(path), source="msprobe compare result", checks=("precision",),
                  dtype=dominant_dtype(graph), reference="msprobe's bench side",
                  device={"backend": "offline", "name": "msprobe compare result", "inf_nan_mode": None},
                  extra={"mode": mode, "notes": notes, "skipped_rows": skipped, "first_skipped_row": first_bad,
                         "precision": {"columns": [*VIEW_COLUMNS, *EXTRA_KEYS], "rows": table, "tensor_dirs": None,
                                       "stacks": stacks},
                         "unmatched": {"target": {"rows": len(rows), "unmatched": len(unmatched),
                                                  "first_unmatched": entries_left[:5]},
                                       "golden": {"rows": len(rows) - len(unmatched), "unmatched": 0}},
                         "precision_unmatched": {"columns": ["side", "name", "record", "dtype", "shape"],
                                                 "rows": [["target", r["NPU Name"], entry_of.get(r["NPU Name"], ""),
                                                           r.get("NPU Dtype", NA), r.get("NPU Tensor Shape", NA)]
                                                          for r in rows if r.get("Bench Name", NA) in ("", NA)]}})
    graph.name = f"msprobe compare result {path.name}"
    return Investigation(graph, stats=built.stats, reference=reference, run=run, findings=findings)


def _finding(node: Any, severity: str, row: dict[str, str], mode: str) -> Finding:
    text = row.get("Verdict_message") if "Verdict" in row else None  # ours, beside msprobe's Err_message
    found = [m for m in text.split("; ") if m] if text is not None else _messages(row.get("Err_message", ""))
    messages = [re.sub(r"^(?:error|warning):\s*", "", m, flags=re.I) for m in found]
    cols = {"tensor": ("Cosine", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio"),
            "statistics": ("Max diff", "NormRelativeErr")}.get(mode, ())
    metrics = {c: v for c in cols if (v := _float(row.get(c, NA))) is not None}
    text = "; ".join(messages) if messages else "no message"
    return Finding("precision", "msprobe-result", severity, node.id, node.op_type, node.module, node.index,
                   f"msprobe marks {row['NPU Name']} {severity}: {text}", metrics=metrics)


READER = FunctionReader("msprobe compare result", sniff, load)
