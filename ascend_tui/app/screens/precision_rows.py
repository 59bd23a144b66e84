"""The precision view's rows as columns: every msprobe column, filtered by result and name, sorted by any column.

`PrecisionRows` keeps the precision table's rows as they came (lists under `run.extra["precision"]`'s
columns) plus the unmatched rows, and answers with an index array; `LazyRows` turns the indices the
screen shows into `Row`s only when the table draws them, so a 100,000-row compare costs one index
array a key, not 100,000 rows.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Sequence, overload

import numpy as np

from ascend_tui import fmt
from ascend_tui.app.screens.row_table import Row
from ascend_tui.readers.msprobe.compare_columns import BY_KEY, COLUMNS, CompareColumn

N_A = "N/A"
RESULTS = ("all", "error", "warning", "pass", "unmatched")  # the result filter's cycle; "all": every compared row
_MISSING = frozenset({"", N_A, "None", "none", "-1", "nan", "unsupported"})
_FIXED_DECIMALS = frozenset({"cosine", "one_thousandth", "five_thousandths"})
_WORST_LOW = frozenset({"cosine", "one_thousandth", "five_thousandths"})  # lower is worse: sorted ascending first
DEFAULTS: dict[str, tuple[str, ...]] = {
    "tensor": ("name", "cosine", "max_abs", "max_rel", "rmse", "one_thousandth", "result", "attribution"),
    "statistics": ("name", "max_diff", "mean_diff", "norm_rel_diff", "npu_dtype", "bench_dtype", "result",
                   "attribution"),
    "md5": ("name", "npu_md5", "bench_md5", "npu_dtype", "bench_dtype", "result", "attribution"),
}
NAME_WIDTH = 40  # the name column's width before it grows or gives way
WIDTHS: dict[str, int] = {
    "name": NAME_WIDTH, "bench_name": 40, "npu_dtype": 14, "bench_dtype": 14, "npu_shape": 16, "bench_shape": 16,
    "result": 9, "attribution": 11, "accuracy": 8, "err_message": 40, "stack": 48, "data_name": 40, "node": 24,
    "npu_md5": 9, "bench_md5": 9, "requires_grad_consistent": 9, "cosine": 8, "one_thousandth": 8,
    "five_thousandths": 8,
}


def number(v: Any) -> float:
    """A cell as a float for sorting: numbers, `12.5%` as 0.125, `inf`; NaN for markers (N/A, unsupported) and text."""
    if isinstance(v, bool) or v is None:
        return math.nan
    if isinstance(v, (int, float)):
        return float(v)
    text = str(v).strip()
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        return math.nan


def cell_text(key: str, v: Any, numeric: bool) -> str:
    """A cell as text: cosine and ratios with 6 decimals (as msprobe rounds), other numbers as magnitudes."""
    if not numeric:
        return "" if v is None else str(v)  # the table cuts long names at their start (Column.cut)
    if isinstance(v, str) and v.endswith("%"):
        try:  # statistics mode's relative errors, as msprobe writes them (`34.017930221557%`)
            return fmt.magnitude(float(v[:-1])) + "%"
        except ValueError:
            return v
    if isinstance(v, str) or v is None or isinstance(v, bool):
        return "—" if v is None else str(v)  # msprobe's own spelling: N/A, unsupported, inf
    x = float(v)
    if math.isnan(x):
        return "nan"
    return f"{x:.6f}" if key in _FIXED_DECIMALS and math.isfinite(x) else fmt.magnitude(x)


def width_of(column: CompareColumn) -> int:
    """The column's fixed width: room for its label and its usual content."""
    return max(len(column.label), WIDTHS.get(column.key, 10 if column.numeric else 12))


class PrecisionRows:
    """The rows of one precision table (compared, then unmatched) with filters and sorts answered as index arrays."""

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], unmatched: Sequence[dict[str, Any]],
                 mode: str | None, stacks: dict[str, str] | None = None) -> None:
        self.columns = list(columns)
        self.stacks = stacks if isinstance(stacks, dict) else {}
        self.col = {k: i for i, k in enumerate(self.columns)}
        width = len(columns)
        kept = [r for r in rows if isinstance(r, (list, tuple)) and len(r) == width]
        self.table_rows = len(kept)
        # a compare result lists its unmatched target rows among the others (Bench Name N/A): they join the
        # unmatched rows, once
        b, res = self.col.get("bench_name"), self.col.get("result")
        alone = [r for r in kept if r[b] == N_A or r[b] == ""] if b is not None else []
        self.raw: list[Sequence[Any]] = [r for r in kept if r[b] != N_A and r[b] != ""] if alone else kept
        self.compared = len(self.raw)
        for r in alone:
            row = list(r)
            if res is not None:
                row[res] = "unmatched"
            self.raw.append(row)
        named = {str(r[self.col["name"]]) for r in alone} if alone and "name" in self.col else set()
        self.raw.extend(self._unmatched_row(u) for u in unmatched
                        if u.get("side") == "golden" or str(u.get("name")) not in named)
        self.mode = mode if mode in DEFAULTS else None
        self._numbers: dict[str, np.ndarray] = {}
        self._ranks: dict[str, np.ndarray] = {}
        self._available: list[CompareColumn] | None = None
        self._last: tuple[tuple[str, bool, str], np.ndarray] | None = None  # the last name filter, to narrow it
        self._names: list[str] | None = None
        self._results: np.ndarray | None = None

    def _unmatched_row(self, u: dict[str, Any]) -> list[Any]:
        """An unmatched tensor in the table's columns: its side's name, dtype and shape, result "unmatched"."""
        row: list[Any] = [N_A] * len(self.columns)
        golden = u.get("side") == "golden"
        values = {"name": u.get("name", ""), "node": None, "slot": -1, "result": "unmatched", "attribution": "",
                  "err_message": "no target tensor of this name" if golden else "No bench data matched."}
        side = "bench" if golden else "npu"
        values[f"{side}_dtype"], values[f"{side}_shape"] = u.get("dtype", N_A), u.get("shape", N_A)
        if golden:
            values["bench_name"] = u.get("name", "")
        for k, v in values.items():
            if k in self.col:
                row[self.col[k]] = v
        return row

    def __len__(self) -> int:
        return len(self.raw)

    @property
    def unmatched(self) -> int:
        return len(self.raw) - self.compared

    def available(self) -> list[CompareColumn]:
        """The msprobe (and our) columns this table holds for its mode, in msprobe's order (found once)."""
        if self._available is None:
            self._available = self._find_available()
        return list(self._available)

    def _find_available(self) -> list[CompareColumn]:
        letter = {"tensor": "t", "statistics": "s", "md5": "m"}.get(self.mode or "", "")
        out = []
        for c in COLUMNS:
            present = ("npu_data_name" in self.col) if c.key == "data_name" else c.key in self.col
            if c.key == "accuracy" and present:  # only older msprobe CSVs have it: offered when one row does
                j = self.col["accuracy"]
                present = any(r[j] not in ("", N_A) for r in self.raw)
            if present and (not letter or letter in c.modes):
                out.append(c)
        return out

    def defaults(self) -> list[str]:
        keys = {c.key for c in self.available()}
        return [k for k in DEFAULTS[self.mode or "tensor"] if k in keys] or ["name"]

    def value(self, i: int, key: str) -> Any:
        r = self.raw[i]
        if key == "data_name":
            names = [r[self.col[k]] for k in ("npu_data_name", "bench_data_name") if k in self.col]
            return ", ".join(str(n) for n in names) if any(str(n) not in _MISSING for n in names) else N_A
        j = self.col.get(key)
        if key == "stack" and j is not None:
            return self.stacks.get(r[j], r[j]) if isinstance(r[j], str) else r[j]  # the cell names its record
        return r[j] if j is not None else None

    def record(self, i: int) -> dict[str, Any]:
        """Row `i` as a dict under the table's columns (the stack resolved to its text)."""
        out = dict(zip(self.columns, self.raw[i]))
        if "stack" in out:
            out["stack"] = self.value(i, "stack")
        return out

    # -- filtering and sorting ---------------------------------------------------------------

    def results(self) -> np.ndarray:
        if self._results is None:
            j = self.col.get("result")
            self._results = np.array([str(r[j]) if j is not None else "" for r in self.raw], dtype=object)
        return self._results

    def select(self, result: str = "all", introduced: bool = False, needle: str = "") -> np.ndarray:
        """Indices of the rows the filters keep, in table order: result in RESULTS, name substring (either side)."""
        needle = needle.strip().lower()
        last = self._last
        if needle and last is not None and last[0][:2] == (result, introduced) and needle.startswith(last[0][2]):
            names = self.names()  # a longer needle keeps a subset of the last one's rows: narrow those
            idx = np.array([i for i in last[1].tolist() if needle in names[i]], dtype=np.int64)
            self._last = ((result, introduced, needle), idx)
            return idx
        if result == "unmatched":
            idx = np.arange(self.compared, len(self.raw))
        else:
            idx = np.arange(self.compared)
            if result != "all":
                idx = idx[self.results()[: self.compared] == result]
        if introduced:
            j = self.col.get("attribution")
            idx = np.array([i for i in idx.tolist() if j is not None and self.raw[i][j] == "introduced"],
                           dtype=np.int64)
        if needle:
            names = self.names()
            idx = np.array([i for i in idx.tolist() if needle in names[i]], dtype=np.int64)
            self._last = ((result, introduced, needle), idx)
        return idx.astype(np.int64, copy=False)

    def names(self) -> list[str]:
        """Each row's target and golden names, lower-cased, for the name filter."""
        if self._names is None:
            a, b = self.col.get("name"), self.col.get("bench_name")
            self._names = [((str(r[a]) if a is not None else "") + "\n" + (str(r[b]) if b is not None else "")).lower()
                           for r in self.raw]
        return self._names

    def column(self, key: str) -> list[Any]:
        """Every row's cell under `key` (data_name: the two names joined)."""
        j = self.col.get(key)
        if key in ("data_name", "stack") or j is None:
            return [self.value(i, key) for i in range(len(self.raw))]
        return [r[j] for r in self.raw]

    def numbers(self, key: str) -> np.ndarray:
        """The column as float64 (NaN for markers), built once."""
        if key not in self._numbers:
            self._numbers[key] = np.fromiter((v if type(v) is float else number(v) for v in self.column(key)),
                                             dtype=np.float64, count=len(self.raw))
        return self._numbers[key]

    def ranks(self, key: str) -> np.ndarray:
        """Each row's place in the column's a-to-z order (missing cells share the last place), built once."""
        if key not in self._ranks:
            texts = ["" if v is None else str(v) for v in self.column(key)]
            order = sorted(range(len(texts)), key=texts.__getitem__)
            rank = np.empty(len(texts), np.int64)
            rank[np.array(order, dtype=np.int64)] = np.arange(len(texts))
            missing = np.fromiter((t in _MISSING for t in texts), dtype=bool, count=len(texts))
            rank[missing] = len(texts)
            self._ranks[key] = rank
        return self._ranks[key]

    def sort(self, idx: np.ndarray, key: str, descending: bool) -> np.ndarray:
        """`idx` ordered by column `key` (numbers numerically); NaN, N/A and empty cells last either way."""
        column = BY_KEY.get(key)
        if column is not None and column.numeric:
            vals = self.numbers(key)[idx]
            order = np.argsort(-vals if descending else vals, kind="stable")  # NaN sorts last in both
            return idx[order]
        rank = self.ranks(key)[idx]
        last = len(self.raw)
        keyed = np.where(rank == last, np.int64(-1), rank) if descending else rank
        order = np.argsort(-keyed if descending else keyed, kind="stable")  # missing (last / -1) at the end
        return idx[order]


def worst_first(key: str) -> bool:
    """The direction a first press sorts in: the worst rows on top (lowest cosine, highest error, a to z text)."""
    column = BY_KEY.get(key)
    return bool(column is not None and column.numeric and key not in _WORST_LOW)


class LazyRows(Sequence[Row]):
    """The `Row`s of an index array, built when the table asks for one (a slice is another lazy view)."""

    def __init__(self, idx: np.ndarray, make: Callable[[int], Row]) -> None:
        self.idx = idx
        self.make = make
        self._cache: dict[int, Row] = {}

    def __len__(self) -> int:
        return int(self.idx.size)

    @overload
    def __getitem__(self, i: int) -> Row: ...
    @overload
    def __getitem__(self, i: slice) -> LazyRows: ...

    def __getitem__(self, i: int | slice) -> Row | LazyRows:
        if isinstance(i, slice):
            return LazyRows(self.idx[i], self.make)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        row = self._cache.get(i)
        if row is None:
            if len(self._cache) > 512:
                self._cache.clear()
            row = self._cache[i] = self.make(int(self.idx[i]))
        return row

    def __iter__(self) -> Iterator[Row]:
        return (self[i] for i in range(len(self)))
