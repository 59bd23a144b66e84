"""msprobe 26.2.0's own `Result` and `Err_message` rules, so `compare --csv` keeps that column's meaning.

msprobe groups a CSV's rows by API or module (inputs and parameters, then outputs) and runs its checkers
(`msprobe/core/compare/indicator_analysis/algorithm.py`): a dtype difference is an error, so is Inf/NaN
in NPU max/min where the bench has none, a changed requires_grad, a changed scalar argument, a shape
difference; by mode, the one-thousandth ratio rule (tensor), the norm relative error rules (statistics),
the CRC-32 rule (md5). A user's scripts that read `Result` keep reading msprobe's verdict; ours goes in
our own columns (`write_csv`). Works on the CSV cells as strings, as msprobe's data frame holds them.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from ascend_tui.offline.compare_rows import Row, csv_row, header
from ascend_tui.progress import paused_gc

OURS = ["Verdict", "Verdict_message", "Band_units", "Attribution"]
_ALL_IGNORE = {"empty", "empty_like", "numpy", "to", "__setitem__", "empty_with_format", "new_empty_strided",
               "new_empty", "empty_strided"}
_INPUT_IGNORE = {"_reduce_scatter_base", "_all_gather_base", "all_to_all_single", "batch_isend_irecv"}
_LEVEL = {"pass": 0, "warning": 1, "error": 2}
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(x, ensure_ascii=False) without a new encoder


def _num(cell: str) -> float | None:
    """A metric cell as msprobe reads it: a float, a percentage as a fraction, or None (a marker)."""
    c = cell.strip()
    if c in ("N/A", "Nan", "", "unsupported") or c.startswith("shape"):
        return None
    try:
        return float(c.rstrip("%")) / 100 if c.endswith("%") else float(c)
    except ValueError:
        return None


def _inf_nan(cell: str) -> bool:
    return cell.strip().lower() in ("inf", "-inf", "nan")


class _Api:
    """One API or module's rows: inputs (and parameters) and outputs, with a result and messages per row."""

    def __init__(self, cols: Mapping[str, int], lines: Sequence[list[str]]) -> None:
        self.cols = cols
        self.lines = lines
        self.outputs = [i for i, line in enumerate(lines) if ".output." in line[0]]
        outs = set(self.outputs)
        self.inputs = [i for i in range(len(lines)) if i not in outs]
        self.result = ["pass"] * len(lines)
        self.msgs: list[list[str]] = [[] for _ in lines]

    def get(self, i: int, col: str) -> str:
        return self.lines[i][self.cols[col]]

    def mark(self, i: int, level: str, msg: str) -> None:
        if _LEVEL[level] > _LEVEL[self.result[i]]:
            self.result[i] = level
        self.msgs[i].append(f"{level}: {msg}")

    def extreme(self, col: str, inputs: bool, low: bool) -> float:
        """msprobe's get_min_or_max_value: 1.0 (min) or 0.0 (max) when nothing is measured."""
        value = 1.0 if low else 0.0
        for i in self.inputs if inputs else self.outputs:
            v = _num(self.get(i, col))
            if v is not None and not math.isnan(v):
                value = min(value, v) if low else max(value, v)
        return value


def _matched(api: _Api, i: int) -> bool:
    name = api.get(i, "Bench Name")
    return bool(name) and name != "N/A"


def _common(api: _Api, rows: Sequence[int]) -> None:
    c = api.cols
    name, nmax, nmin, bmax, bmin = c["Bench Name"], c["NPU max"], c["NPU min"], c["Bench max"], c["Bench min"]
    nrg, brg, nd, bd, ns, bs = (c["NPU Requires_grad"], c["Bench Requires_grad"], c["NPU Dtype"], c["Bench Dtype"],
                                c["NPU Tensor Shape"], c["Bench Tensor Shape"])
    for i in rows:
        line = api.lines[i]
        bench = line[name]
        if not bench or bench == "N/A":  # _matched
            continue
        if not (_inf_nan(line[bmax]) or _inf_nan(line[bmin])) and (_inf_nan(line[nmax]) or _inf_nan(line[nmin])):
            api.mark(i, "error", "There is nan/inf/-inf in the maximum or minimum value of NPU.")
        if line[nrg] != line[brg]:
            api.mark(i, "error", "The Required_Grad of NPU and Bench are inconsistent")
        if line[nd] != line[bd] and "qkv" not in bench and "gate_up" not in bench:
            api.mark(i, "error", "The dtype of NPU and Bench are inconsistent.")
        if line[ns] != line[bs]:
            api.mark(i, "error", "The shape of NPU and Bench are inconsistent.")


def _scalars(api: _Api) -> None:
    for i in api.inputs:
        nd, bd = api.get(i, "NPU Dtype"), api.get(i, "Bench Dtype")
        if _matched(api, i) and "class" in nd and "class" in bd and api.get(i, "NPU Tensor Shape") == "[]" \
                and api.get(i, "NPU max") != api.get(i, "Bench max"):
            api.mark(i, "error", "The scalar parameters of NPU and Bench are inconsistent.")


def _tensor(api: _Api, ignore: str) -> None:
    if ignore == "none" and api.outputs:
        col = "One Thousandth Err Ratio"
        if api.extreme(col, True, True) > 0.9 and api.extreme(col, False, True) < 0.1:
            api.mark(api.outputs[0], "error", "The input/parameters of One Thousandth Err Ratio > 0.9 while the "
                     "output < 0.6.")
    if ignore == "none" and api.outputs:
        cin, cout = api.extreme("Cosine", True, True), api.extreme("Cosine", False, True)
        if cin > 0.9 and cin - cout > 0.1:
            api.mark(api.outputs[0], "warning", "The input/parameters of Cosine > 0.9, and input/parameters - "
                     "output > 0.1")


def _statistics(api: _Api, ignore: str) -> None:
    if ignore != "none":
        return
    col = "NormRelativeErr"
    nin = abs(api.extreme(col, True, False))
    if nin < 0.1:
        for i in api.outputs:
            v = _num(api.get(i, col))
            if v is not None and abs(v) > 0.5:
                api.mark(i, "error", "The NormRelativeErr of output is greater than 0.5.")
    if api.outputs:
        nout = abs(api.extreme(col, False, False))
        if (nin == 0 and nout > 0.1) or (nin != 0 and nout / nin > 10):
            api.mark(api.outputs[0], "warning", "The norm relative error of output is 10 times that of input.")


def _md5(api: _Api, rows: Sequence[int]) -> None:
    for i in rows:
        a, b = api.get(i, "NPU MD5"), api.get(i, "BENCH MD5")
        if a != b:
            if a in ("N/A", "Nan", "") or b in ("N/A", "Nan", ""):
                api.mark(i, "warning", "The parameter of NPU does not match the bench.")
            else:
                api.mark(i, "error", "The CRC-32 value of NPU differs from that of the bench.")


def _ignore(api: _Api) -> str:
    if not api.inputs:
        return "none"
    parts = api.get(api.inputs[0], "NPU Name").split(".")
    name = parts[1] if len(parts) >= 2 else ""
    return "all" if name in _ALL_IGNORE else "input" if name in _INPUT_IGNORE else "none"


def msprobe_results(mode: str, groups: Sequence[Sequence[list[str]]]) -> list[list[tuple[str, str]]]:
    """(Result, Err_message JSON) of each line of each API group, by msprobe's rules for `mode`."""
    cols = {c: i for i, c in enumerate(header(mode))}
    out = []
    for lines in groups:
        api = _Api(cols, lines)
        ignore = _ignore(api)
        rows = [] if ignore == "all" else api.outputs if ignore == "input" else api.inputs + api.outputs
        if mode == "md5":
            _md5(api, rows)
        else:
            _common(api, rows)
            if ignore == "none":
                _scalars(api)
            (_statistics if mode == "statistics" else _tensor)(api, ignore)
        out.append([(res, _ENCODE(msgs) if msgs else "[]") for res, msgs in zip(api.result, api.msgs)])
    return out


def _units(row: Row) -> str:
    b = row.band
    if b is None or math.isnan(b.error):
        return "N/A"
    return f"{b.times:.3g}"


def write_csv(path: Path, rows: Sequence[Row], mode: str, stacks: Mapping[str, str]) -> None:
    """msprobe's columns with msprobe's Result and Err_message, then ours: Verdict, reasons, band units, Attribution."""
    with paused_gc():  # a list of cells a row, none cyclic: collections would only rescan them
        _write_csv(path, rows, mode, stacks)


def _write_csv(path: Path, rows: Sequence[Row], mode: str, stacks: Mapping[str, str]) -> None:
    base = header(mode)[:-1]  # rows.header ends with our Attribution, which goes among our columns here
    cols = {c: i for i, c in enumerate(base)}
    seen: set[str] = set()
    groups: dict[str, list[int]] = {}
    lines: list[list[str]] = []
    for k, row in enumerate(rows):
        entry = row.target.entry
        stack = "N/A"
        if entry not in seen:
            seen.add(entry)
            stack = stacks.get(entry, "N/A")
        lines.append(csv_row(row, mode, stack)[:-1])
        groups.setdefault(entry, []).append(k)
    order = list(groups.values())
    results = msprobe_results(mode, [[lines[k] for k in g] for g in order])
    for g, res in zip(order, results):
        for k, (result, msg) in zip(g, res):
            if rows[k].golden is not None:
                lines[k][cols["Result"]] = result
                lines[k][cols["Err_message"]] = msg
    # cells repeat (dtypes, shapes, N/A, and a stack is one string shared by the records of its call site): each
    # distinct cell is quoted once
    quoted = _Quoted()
    out = [_csv_line(base + OURS)]
    for row, line in zip(rows, lines):
        line += (row.result if row.golden is not None else "N/A", "; ".join(row.messages), _units(row),
                 row.attribution)
        out.append(",".join([quoted[c] for c in line]))
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        fh.write("\r\n".join(out))
        fh.write("\r\n")
    tmp.replace(path)


_NEEDS_QUOTES = re.compile(r'[,"\r\n]')


def _csv_field(cell: Any) -> str:
    """One cell as `csv.writer` (excel dialect, QUOTE_MINIMAL) writes it: quoted when it holds , " CR or LF."""
    text = cell if type(cell) is str else "" if cell is None else str(cell)
    if _NEEDS_QUOTES.search(text) is None:
        return text
    return '"' + text.replace('"', '""') + '"'


class _Quoted(dict[Any, str]):
    """cell -> `_csv_field(cell)`, computed on first use."""

    def __missing__(self, cell: Any) -> str:
        self[cell] = text = _csv_field(cell)
        return text


def _csv_line(cells: Sequence[Any]) -> str:
    return ",".join([_csv_field(c) for c in cells])
