"""msprobe compare rows: every tensor and value of two dumps, matched by name as `msprobe compare` does.

Rows come in dump.json order (inputs, parameters, outputs of each record, then parameter
gradients), one per per-tensor name, with the same names msprobe's CSV uses; `match` pairs them
exactly, with `fuzzy` by name without call index in call order, or through a mapping's `rename`
(`readers/msprobe/mapping.py`); `unmatched` counts what found no counterpart on each side. Tensor
leaves are parsed by `dump.tensor_leaf`; this module only orders them and pairs them.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from ascend_tui.checks.precision import N_A, UNSUPPORTED, StatsMetrics, TensorMetrics
from ascend_tui.errors import InputError
from ascend_tui.readers.msprobe.dump import LeafCache, tensor_leaf
from ascend_tui.readers.msprobe.graph import API_NAME, MODULE_NAME, PARAM_GRAD, Leaf
from ascend_tui.readers.msprobe.mapping import Rename, canonical_dtype, compatible_dtypes

BASIC = ["NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
         "NPU Requires_grad", "Bench Requires_grad"]
TENSOR_INDEX = ["Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                "Five Thousandths Err Ratio"]
STATS_INDEX = ["Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr", "MinRelativeErr",
               "MeanRelativeErr", "NormRelativeErr"]
SUMMARY = ["NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm"]
EXTRACT = ["Requires_grad Consistent", "Result", "Err_message"]
_TENSOR_FIELDS = ("cosine", "euc_dist", "max_abs", "max_rel", "one_thousandth", "five_thousandths")


def header(mode: str) -> list[str]:
    """msprobe's CSV header for `mode` (tensor, statistics, md5) plus our Attribution column."""
    if mode == "md5":
        cols = BASIC + ["NPU MD5", "BENCH MD5"] + EXTRACT + ["NPU_Stack_Info"]
    elif mode == "statistics":
        cols = BASIC + STATS_INDEX + SUMMARY + EXTRACT + ["NPU_Stack_Info"]
    else:
        cols = BASIC + TENSOR_INDEX + SUMMARY + EXTRACT + ["NPU_Stack_Info", "Data_name"]
    return cols + ["Attribution"]


@dataclass(slots=True)
class Item:
    """One row's side: a tensor leaf, a scalar value, or None (a None argument or output)."""

    name: str
    entry: str
    section: str
    leaf: Leaf | None = None
    value: Any = None
    is_scalar: bool = False
    type_name: str = ""
    requires_grad: Any = None
    raw_stats: tuple[Any, ...] = ()
    raw_dtype: str = ""

    @property
    def dtype(self) -> str:
        """The dtype as this side's dump spells it (`torch.bfloat16`, MindSpore's `BFloat16`)."""
        if self.leaf is not None:
            return self.raw_dtype or f"torch.{self.leaf.meta.dtype}"
        return f"<class '{self.type_name}'>" if self.is_scalar else N_A

    @property
    def shape(self) -> str:
        if self.leaf is not None:
            return str(list(self.leaf.meta.shape))
        return "[]" if self.is_scalar else N_A


@dataclass(slots=True)
class Row:
    """One line of the compare: the target item, its golden match (None: unmatched) and the results."""

    target: Item
    golden: Item | None
    metrics: TensorMetrics | StatsMetrics | None = None
    result: str = "pass"
    messages: list[str] = field(default_factory=list)
    attribution: str = ""
    node: str | None = None
    slot: int = -1
    band: Any = None  # offline.compare's RowBand: this row's error against its dtype band


# -- rows of one dump ------------------------------------------------------------------------------


def _walk(value: Any, name: str, entry: str, section: str, path: Path, out: list[Item],
          cache: LeafCache | None) -> None:
    """Items of one record section in the order msprobe lists them."""
    if value is None:
        out.append(Item(name, entry, section))
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            _walk(v, f"{name}.{i}", entry, section, path, out, cache)
        return
    if not isinstance(value, dict):
        raise InputError(path, f"{name}: {value!r} is not an msprobe tensor or value record")
    if "dtype" in value and "shape" in value:
        get = value.get
        leaf = tensor_leaf(value, name, path)
        if cache is not None:
            cache[id(value)] = (value, leaf)
        out.append(Item(name, entry, section, leaf, requires_grad=get("requires_grad"),
                        raw_stats=(get("Max"), get("Min"), get("Mean"), get("Norm")), raw_dtype=str(value["dtype"])))
    elif "type" in value or "class_type" in value:
        out.append(Item(name, entry, section, value=value.get("value"), is_scalar=True,
                        type_name=str(value.get("type", value.get("class_type", ""))).removeprefix("<class '")))
    else:
        for k, v in value.items():
            _walk(v, f"{name}.{k}", entry, section, path, out, cache)


def items_of(data: Mapping[str, Any], path: Path, cache: LeafCache | None = None) -> list[Item]:
    """Every row item of a dump.json `data`, in msprobe's row order; `cache` collects the leaves for `parse_entry`."""
    out: list[Item] = []
    for name, record in data.items():
        name = str(name)
        if not isinstance(record, dict):
            raise InputError(path, f"record {name!r} is {type(record).__name__}, expected an object")
        if PARAM_GRAD.match(name):
            for pname, v in record.items():
                _walk(v[0] if isinstance(v, list) and len(v) == 1 else v, f"{name}.{pname}", name, "param_grad",
                      path, out, cache)
            continue
        if not (MODULE_NAME.match(name) or API_NAME.match(name)):
            continue
        if name.endswith("forward") or ".forward." in name:
            args = record.get("input_args") if "input_args" in record else record.get("input")  # older dumps: "input"
            for i, v in enumerate(args or ()):
                _walk(v, f"{name}.input.{i}", name, "input", path, out, cache)
            for k, v in (record.get("input_kwargs") or {}).items():
                _walk(v, f"{name}.input.{k}", name, "input", path, out, cache)
            for k, v in (record.get("parameters") or {}).items():
                _walk(v, f"{name}.parameters.{k}", name, "parameters", path, out, cache)
        else:
            for i, v in enumerate(record.get("input") or ()):
                _walk(v, f"{name}.input.{i}", name, "input", path, out, cache)
        out_v = record.get("output")
        for i, v in enumerate(out_v if isinstance(out_v, list) else [out_v] if out_v is not None else []):
            _walk(v, f"{name}.output.{i}", name, "output", path, out, cache)
    return out


# -- matching --------------------------------------------------------------------------------------

_API_IDX = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9_]*\..+)\.(?P<idx>\d+)\.(?P<dir>forward|backward)$")
_MOD_IDX = re.compile(r"^(?P<head>(?:Module|Cell)\..+)\.(?P<dir>forward|backward)\.(?P<idx>\d+)$")
_GRAD_IDX = re.compile(r"^(?P<head>(?:Module|Cell)\..+\.parameters_grad)\.(?P<idx>\d+)$")


def renumber_backward(names: Iterable[str]) -> dict[str, str]:
    """Entry name -> name with API backward call indices renumbered by order of appearance (recompute)."""
    seen: dict[str, int] = defaultdict(int)
    out: dict[str, str] = {}
    for name in names:
        m = _API_IDX.match(name)
        if m and m["dir"] == "backward":
            k = seen[m["head"]]
            seen[m["head"]] += 1
            out[name] = f"{m['head']}.{k}.backward"
        else:
            out[name] = name
    return out


def fuzzy_key(entry: str) -> str:
    """An entry name without its call index: what `--fuzzy` pairs in call order."""
    for pattern in (_API_IDX, _MOD_IDX):
        if m := pattern.match(entry):
            return f"{m['head']}.{m['dir']}"
    if m := _GRAD_IDX.match(entry):
        return m["head"]
    return entry


def _compatible(a: Item, b: Item, cross: bool = False) -> bool:
    if a.leaf is None or b.leaf is None:
        return a.dtype == b.dtype
    return compatible_dtypes(a.leaf.meta.dtype, b.leaf.meta.dtype, cross)


def match(target: Sequence[Item], golden: Sequence[Item], *, fuzzy: bool = False, rename: Rename | None = None,
          cross: bool = False, check_dtype: bool = True) -> list[Row]:
    """Rows for every target item, paired with the golden item of the same name (msprobe's outer join).

    `rename` (a mapping from `mapping.renamer`) gives the golden name to look for instead, None for
    none; `cross` pairs dtypes of one family across frameworks (MindSpore Int32 with torch.int64, as
    msprobe does); `check_dtype=False` pairs whatever the dtypes (msprobe's data and layer mappings).
    """
    t_names = renumber_backward(dict.fromkeys(i.entry for i in target))
    g_names = renumber_backward(dict.fromkeys(i.entry for i in golden))
    if fuzzy and rename is None:
        t_entry = _fuzzy_pairs(list(t_names), list(g_names))
        suffix = {i.name: i.name[len(i.entry):] for i in golden}
        g_by = {(i.entry, suffix[i.name]): i for i in golden}
        pick = lambda i: g_by.get((t_entry.get(i.entry, ""), i.name[len(i.entry):]))  # noqa: E731
    elif rename is not None:
        g_any = {i.name: i for i in golden}
        g_any.update({g_names[i.entry] + i.name[len(i.entry):]: i for i in golden})

        def pick(i: Item) -> Item | None:
            name = rename(i.name, i.entry, i.section)
            return g_any.get(name) if name is not None else None
    else:
        g_by_name = {g_names[i.entry] + i.name[len(i.entry):]: i for i in golden}
        pick = lambda i: g_by_name.get(t_names[i.entry] + i.name[len(i.entry):])  # noqa: E731
    rows: list[Row] = []
    for item in target:
        g = pick(item)
        if g is not None and check_dtype and not _compatible(item, g, cross):
            g = None
        rows.append(Row(item, g))
    return rows


@dataclass(frozen=True, slots=True)
class Unmatched:
    """How much of each side found no counterpart: rows (tensors and values) and records (APIs and modules)."""

    target_rows: int
    target_unmatched: int
    golden_rows: int
    golden_unmatched: int
    target_records: int
    target_records_unmatched: int
    golden_records: int
    golden_records_unmatched: int
    first_target: tuple[str, ...] = ()
    first_golden: tuple[str, ...] = ()

    @property
    def share(self) -> float:
        """The larger unmatched share of the two sides' rows (0 when both are empty)."""
        shares = [u / n for u, n in ((self.target_unmatched, self.target_rows),
                                     (self.golden_unmatched, self.golden_rows)) if n]
        return max(shares, default=0.0)

    def to_json(self) -> dict[str, Any]:
        return {"target": {"rows": self.target_rows, "unmatched": self.target_unmatched,
                           "records": self.target_records, "records_unmatched": self.target_records_unmatched,
                           "first_unmatched": list(self.first_target)},
                "golden": {"rows": self.golden_rows, "unmatched": self.golden_unmatched,
                           "records": self.golden_records, "records_unmatched": self.golden_records_unmatched,
                           "first_unmatched": list(self.first_golden)}}


def unmatched(rows: Sequence[Row], golden: Sequence[Item], first: int = 5) -> Unmatched:
    """Matched and unmatched counts per side of a compare; the first unmatched records of each side by name."""
    used = {id(r.golden) for r in rows if r.golden is not None}
    t_matched = {r.target.entry for r in rows if r.golden is not None}
    g_matched = {g.entry for g in golden if id(g) in used}
    t_entries = list(dict.fromkeys(r.target.entry for r in rows))
    g_entries = list(dict.fromkeys(g.entry for g in golden))
    t_left = [e for e in t_entries if e not in t_matched]
    g_left = [e for e in g_entries if e not in g_matched]
    return Unmatched(len(rows), sum(1 for r in rows if r.golden is None), len(golden),
                     sum(1 for g in golden if id(g) not in used), len(t_entries), len(t_left), len(g_entries),
                     len(g_left), tuple(t_left[:first]), tuple(g_left[:first]))


def _fuzzy_pairs(t_entries: list[str], g_entries: list[str]) -> dict[str, str]:
    """Target entry -> golden entry, pairing entries with the same name minus index in call order."""
    queues: dict[str, deque[str]] = defaultdict(deque)
    for g in g_entries:
        queues[fuzzy_key(g)].append(g)
    out: dict[str, str] = {}
    for t in t_entries:
        q = queues.get(fuzzy_key(t))
        if q:
            out[t] = q.popleft()
    return out


# -- CSV -------------------------------------------------------------------------------------------


_ENCODE = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(x, ensure_ascii=False) without a new encoder


def _num(x: Any) -> str:
    if type(x) is float and x - x == 0.0:  # finite: the common case first
        return repr(x)
    if isinstance(x, str):
        return x
    if x is None:
        return N_A
    v = float(x)
    if math.isinf(v):
        return " inf" if v > 0 else "-inf"
    if math.isnan(v):
        return "nan"
    return repr(v)


def _stats(item: Item | None) -> list[str]:
    if item is None:
        return [N_A] * 4
    if item.leaf is None:
        return [str(item.value)] * 4
    return [_raw(v) for v in item.raw_stats] if item.raw_stats else ["None"] * 4


def _raw(v: Any) -> str:
    """A Max/Min/Mean/Norm cell as dump.json spelled it (ints stay ints, None stays None)."""
    if type(v) is float and v - v == 0.0:
        return repr(v)
    return "None" if v is None else str(v) if isinstance(v, int) else _num(v)


def _rg(v: Any) -> str:
    return N_A if v is None else str(bool(v))


def csv_row(row: Row, mode: str, stack: str = N_A) -> list[str]:
    """One CSV line for `row` under `header(mode)`."""
    t, g = row.target, row.golden
    basic = [t.name, g.name if g else N_A, t.dtype, g.dtype if g else N_A, t.shape, g.shape if g else N_A,
             _rg(t.requires_grad), _rg(g.requires_grad) if g else N_A]
    consistent = N_A if g is None else str(t.requires_grad == g.requires_grad)
    messages = (_ENCODE(row.messages) if row.messages else "[]") if g is not None else "No bench data matched."
    extract = [consistent, row.result if g is not None else N_A, messages]
    if mode == "md5":
        return basic + [t.leaf.md5 if t.leaf and t.leaf.md5 else N_A,
                        g.leaf.md5 if g and g.leaf and g.leaf.md5 else N_A] + extract + [stack, row.attribution]
    summary = _stats(t) + _stats(g)
    m = row.metrics
    if mode == "statistics":
        values = [_num(getattr(m, f)) for f in StatsMetrics.__slots__] if isinstance(m, StatsMetrics) \
            else [UNSUPPORTED if t.is_scalar else N_A] * 8
        return basic + values + summary + extract + [stack, row.attribution]
    if isinstance(m, TensorMetrics):
        values = [_num(getattr(m, f)) for f in _TENSOR_FIELDS]
    else:
        values = [UNSUPPORTED if (t.is_scalar or t.leaf is None) and g is not None else N_A] * 6
    names = [t.leaf.data_name if t.leaf and t.leaf.data_name else "-1",
             g.leaf.data_name if g and g.leaf and g.leaf.data_name else "-1"]
    return basic + values + summary + extract + [stack, str(names), row.attribution]


def write_csv(path: Path, rows: Sequence[Row], mode: str, stacks: Mapping[str, str]) -> None:
    """The compare CSV: msprobe's columns in its order plus Attribution; stack text on each entry's first row."""
    tmp = path.with_name(path.name + ".tmp")
    seen: set[str] = set()
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header(mode))
        for row in rows:
            entry = row.target.entry
            stack = N_A
            if entry not in seen:
                seen.add(entry)
                stack = stacks.get(entry, N_A)
            w.writerow(csv_row(row, mode, stack))
    tmp.replace(path)


def tensor_rows(rows: Sequence[Row]) -> Iterator[Row]:
    """Rows whose two sides are tensors with data files (what tensor mode compares element by element)."""
    for r in rows:
        g = r.golden
        if g is not None and r.target.leaf is not None and g.leaf is not None \
                and r.target.leaf.data_name and g.leaf.data_name:
            yield r
