"""Evidence records: plain frozen dataclasses that the checks produce and the interfaces show.

Per-op tensor statistics are kept in a column store (`StatsTable`) rather than as
objects on graph nodes, so that 100k-operator graphs stay fast to build, save and scan.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Literal, Mapping

if TYPE_CHECKING:
    import numpy as np  # imported where rows are stored: a graph without statistics never needs numpy

Severity = Literal["error", "warning", "info"]
CheckName = Literal["overflow", "precision", "memory", "profile"]
Attribution = Literal["introduced", "inherited"]

SEVERITY_RANK: dict[str, int] = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True, slots=True)
class TensorMeta:
    """Shape and dtype of one tensor flowing into or out of an operator."""

    shape: tuple[int, ...]
    dtype: str

    def describe(self) -> str:
        """`float16[8,512]` — how people write a tensor's type."""
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"

    def to_json(self) -> list[Any]:
        return [list(self.shape), self.dtype]

    @classmethod
    def from_json(cls, data: Any) -> TensorMeta | None:
        if data is None:
            return None
        shape, dtype = data
        return cls(tuple(int(d) for d in shape), str(dtype))


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """Where in the user's code an operator was called: innermost user frame first."""

    file: str
    line: int
    function: str = ""
    stack: tuple[str, ...] = ()

    def short(self) -> str:
        """`model.py:42` — enough to find the line."""
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "function": self.function, "stack": list(self.stack)}

    @classmethod
    def from_json(cls, data: Any) -> SourceLocation | None:
        if not data:
            return None
        return cls(str(data["file"]), int(data["line"]), str(data.get("function", "")), tuple(data.get("stack", ())))


STAT_FIELDS: tuple[str, ...] = (
    "min", "max", "mean", "l2norm", "abs_max", "nan_count", "inf_count", "zero_count", "numel",
)


@dataclass(frozen=True, slots=True)
class TensorStats:
    """Reductions of one tensor computed on the device: the numbers a person reads first."""

    min: float
    max: float
    mean: float
    l2norm: float
    abs_max: float
    nan_count: int
    inf_count: int
    zero_count: int
    numel: int

    @property
    def finite(self) -> bool:
        """True when the tensor holds no NaN and no Inf."""
        return self.nan_count == 0 and self.inf_count == 0

    @classmethod
    def from_row(cls, row: Iterable[float]) -> TensorStats:
        v = list(row)
        return cls(float(v[0]), float(v[1]), float(v[2]), float(v[3]), float(v[4]),
                   int(v[5]), int(v[6]), int(v[7]), int(v[8]))

    def to_row(self) -> tuple[float, ...]:
        return (self.min, self.max, self.mean, self.l2norm, self.abs_max,
                float(self.nan_count), float(self.inf_count), float(self.zero_count), float(self.numel))


class StatsTable:
    """Column store of `TensorStats` keyed by (node id, output slot).

    Rows live in one float64 numpy array (none until the first row); lookups go through a dict of row numbers.
    """

    __slots__ = ("_rows", "_data", "_n")

    def __init__(self) -> None:
        self._rows: dict[tuple[str, int], int] = {}
        self._data: np.ndarray | None = None
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def __contains__(self, key: tuple[str, int]) -> bool:
        return key in self._rows

    def add_many(self, keys: list[tuple[str, int]], values: np.ndarray) -> None:
        """Append rows; `values` has one row of `STAT_FIELDS` per key."""
        import numpy as np

        values = np.asarray(values, dtype=np.float64).reshape(len(keys), len(STAT_FIELDS))
        fresh = len(set(keys)) == len(keys) and self._rows.keys().isdisjoint(keys)  # all new: appended in one go
        if fresh and not self._rows:
            self._data = values.copy()
            self._rows = {k: i for i, k in enumerate(keys)}
            self._n = len(keys)
            return
        need = self._n + len(keys)
        held = 0 if self._data is None else self._data.shape[0]
        if need > held:
            grown = np.zeros((max(need, 2 * held, 64), len(STAT_FIELDS)), dtype=np.float64)
            if self._data is not None:
                grown[: self._n] = self._data[: self._n]
            self._data = grown
        if fresh:
            self._data[self._n: need] = values
            self._rows.update(zip(keys, range(self._n, need)))
            self._n = need
            return
        for i, key in enumerate(keys):
            row = self._rows.get(key)
            if row is None:
                row = self._n
                self._rows[key] = row
                self._n += 1
            self._data[row] = values[i]

    def add(self, node: str, slot: int, stats: TensorStats) -> None:
        import numpy as np

        self.add_many([(node, slot)], np.array([stats.to_row()]))

    def get(self, node: str, slot: int = 0) -> TensorStats | None:
        """Statistics of output `slot` of `node`, or None when it was not a measured tensor."""
        row = self._rows.get((node, slot))
        return None if row is None else TensorStats.from_row(self._data[row])

    def outputs(self, node: str) -> list[TensorStats]:
        """Statistics of every measured output of `node`, in slot order."""
        out: list[TensorStats] = []
        slot = 0
        while (node, slot) in self._rows:
            out.append(TensorStats.from_row(self._data[self._rows[(node, slot)]]))
            slot += 1
        return out

    def column(self, name: str) -> np.ndarray:
        """One statistic for every row, in insertion order."""
        return self._rows_data()[: self._n, STAT_FIELDS.index(name)]

    def _rows_data(self) -> np.ndarray:
        """The rows' array, an empty one before the first row."""
        if self._data is None:
            import numpy as np

            return np.zeros((0, len(STAT_FIELDS)), dtype=np.float64)
        return self._data

    def keys(self) -> list[tuple[str, int]]:
        return list(self._rows)

    def items(self) -> Iterator[tuple[tuple[str, int], TensorStats]]:
        for key, row in self._rows.items():
            yield key, TensorStats.from_row(self._data[row])

    def to_json(self) -> dict[str, Any]:
        """Columns of keys and finite rows; non-finite cells listed apart so the file stays strict JSON."""
        import numpy as np

        data = self._rows_data()[: self._n]
        finite = np.isfinite(data)
        bad = np.argwhere(~finite)
        return {
            "fields": list(STAT_FIELDS),
            "nodes": [k[0] for k in self._rows],
            "slots": [k[1] for k in self._rows],
            "rows": np.where(finite, data, 0.0).tolist(),
            "nonfinite": [[int(r), int(c), _json_float(float(data[r, c]))] for r, c in bad],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StatsTable:
        table = cls()
        keys = list(zip(map(str, data.get("nodes", [])), map(int, data.get("slots", []))))
        if not keys:
            return table
        import numpy as np

        rows = np.asarray(data["rows"], dtype=np.float64).reshape(len(keys), len(STAT_FIELDS))
        for r, c, value in data.get("nonfinite", []):
            rows[int(r), int(c)] = _from_json_float(value)
        table.add_many(keys, rows)
        return table


HIST_EDGES_LOG2: tuple[int, ...] = tuple(range(-24, 17, 4))  # float16's smallest subnormal .. 2**16 (> max)
HIST_BINS = len(HIST_EDGES_LOG2) + 1  # (0, 2**-24), [2**-24, 2**-20), ..., [2**12, 2**16), [2**16, inf]
HIST_SAMPLE = 4096  # values per output: a fixed, small cost per op whatever the tensor's size


class HistogramTable:
    """Histograms of log2|x| per (node id, output slot): the counts of each `HIST_EDGES_LOG2` bin in an
    evenly strided sample of the non-zero, non-NaN values, and how many values the sample held."""

    __slots__ = ("_rows", "_data")

    def __init__(self, keys: list[tuple[str, int]] | None = None, data: np.ndarray | None = None) -> None:
        keys = keys or []
        self._rows = {k: i for i, k in enumerate(keys)}
        self._data: np.ndarray | None = None  # no rows, no numpy
        if data is not None:
            import numpy as np

            self._data = np.asarray(data, dtype=np.int64).reshape(len(keys), HIST_BINS + 1)

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, node: str, slot: int = 0) -> tuple[np.ndarray, int] | None:
        """(bin counts, sample size) of output `slot` of `node`, or None when none was taken."""
        row = self._rows.get((node, slot))
        if row is None or self._data is None:
            return None
        return self._data[row, :HIST_BINS], int(self._data[row, HIST_BINS])

    def to_json(self) -> dict[str, Any]:
        return {"edges_log2": list(HIST_EDGES_LOG2), "nodes": [k[0] for k in self._rows],
                "slots": [k[1] for k in self._rows],
                "rows": [] if self._data is None else self._data.tolist()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HistogramTable:
        if list(data.get("edges_log2", HIST_EDGES_LOG2)) != list(HIST_EDGES_LOG2):
            return cls()  # another binning: better none than a mislabelled one
        keys = list(zip(map(str, data.get("nodes", [])), map(int, data.get("slots", []))))
        return cls(keys, data.get("rows", [])) if keys else cls()


def _json_float(x: float) -> float | str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def _from_json_float(x: Any) -> float:
    if isinstance(x, str):
        return float(x.replace("Infinity", "inf"))
    return float(x)


@dataclass(frozen=True, slots=True)
class ChainLink:
    """One hop of a root-cause walk: the operator and the value that matters there."""

    node: str
    module: str
    op_type: str
    value: float

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "module": self.module, "op_type": self.op_type, "value": _json_float(self.value)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ChainLink:
        return cls(str(d["node"]), str(d.get("module", "")), str(d.get("op_type", "")), _from_json_float(d.get("value", 0.0)))


@dataclass(frozen=True, slots=True)
class RootCause:
    """Where a finding really comes from, and the walk that led there (victim first, cause last)."""

    node: str
    module: str
    reason: str
    chain: tuple[ChainLink, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "module": self.module, "reason": self.reason,
                "chain": [c.to_json() for c in self.chain]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> RootCause | None:
        if not d:
            return None
        return cls(str(d["node"]), str(d.get("module", "")), str(d.get("reason", "")),
                   tuple(ChainLink.from_json(c) for c in d.get("chain", ())))


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing a check found on one operator, ready for the report and the app."""

    check: str
    kind: str
    severity: Severity
    node: str
    op_type: str
    module: str
    index: int
    message: str
    attribution: Attribution | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    root_cause: RootCause | None = None
    hint: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "check": self.check, "kind": self.kind, "severity": self.severity,
            "node": self.node, "op_type": self.op_type, "module": self.module, "index": self.index,
            "message": self.message, "attribution": self.attribution,
            "metrics": {k: _json_float(v) if isinstance(v, float) else v for k, v in self.metrics.items()},
            "root_cause": self.root_cause.to_json() if self.root_cause else None,
        }
        if self.hint is not None:
            data["hint"] = self.hint
        return data

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Finding:
        metrics = {k: _from_json_float(v) if isinstance(v, str) and v.lstrip("-") in ("NaN", "Infinity") else v
                   for k, v in dict(d.get("metrics") or {}).items()}
        return cls(
            check=str(d["check"]), kind=str(d["kind"]), severity=d["severity"], node=str(d.get("node") or ""),
            op_type=str(d.get("op_type") or ""), module=str(d.get("module") or ""), index=int(d.get("index", -1)),
            message=str(d.get("message", "")), attribution=d.get("attribution"), metrics=metrics,
            root_cause=RootCause.from_json(d.get("root_cause")), hint=d.get("hint"),
        )


@dataclass(frozen=True, slots=True)
class MemoryEvent:
    """One memory report: from a sanitizer log (msSanitizer, compute-sanitizer) or the live sanitizer."""

    kind: str
    tool: str
    message: str
    size: int | None = None
    address: int | None = None
    memory_space: str | None = None
    kernel: str | None = None
    block: str | None = None
    thread: str | None = None
    frames: tuple[str, ...] = ()
    line_no: int | None = None
    node: str | None = None
    confidence: float | None = None
    likely_false_positive: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)


_LIBRARY_FRAME = re.compile(r"\$\{ASCEND_HOME_PATH\}|/tikcpp/|/asc/impl/|/ascend-toolkit/|/cann-[\d.]+/")


def user_frame(frames: Iterable[str]) -> str | None:
    """The first device frame in the user's own code (not CANN's libraries), else the first frame."""
    frames = list(frames)
    device = [f for f in frames if not f.startswith(("host:", "device:"))] or frames
    return next((f for f in device if not _LIBRARY_FRAME.search(f)), device[0] if device else None)


@dataclass(frozen=True, slots=True)
class MemorySample:
    """Allocated and reserved device memory at one moment (µs or iteration), for the timeline."""

    time: float
    allocated_bytes: float
    reserved_bytes: float
    label: str = ""


@dataclass(frozen=True, slots=True)
class StepSeries:
    """One scalar per step (a module output's max-abs, the loss, the gradient norm, the step time): a trend's line.

    `kind` groups the series (`max_abs`, `norm`, `nonfinite`, `loss`, `grad_norm`, `step_time`); `unit` labels
    the y axis (`µs` for times, "" for values); `steps` are the dump's or run's own step numbers.
    """

    name: str
    kind: str
    steps: tuple[int, ...]
    values: tuple[float, ...]
    unit: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "unit": self.unit, "steps": list(self.steps),
                "values": [_json_float(v) for v in self.values]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> StepSeries:
        return cls(str(d["name"]), str(d.get("kind", "")), tuple(int(s) for s in d["steps"]),
                   tuple(_from_json_float(v) for v in d["values"]), str(d.get("unit", "")))
