"""Timing evidence: kernel rows as numpy columns, plus the small per-type, per-step and host tables profilers write.

A real LLM step has millions of kernel rows; one Python object a row would cost more than the
file. Text columns are stored as int32 codes into a list of distinct values (`Codes`), numbers as
numpy arrays, and start times as int64 nanoseconds (epoch µs with ns decimals do not fit a float64).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

NO_INT = -1  # missing block dim / step / stream / device
NO_START = np.iinfo(np.int64).min  # a kernel row without a start time
TEXT_COLUMNS = ("name", "type", "core", "module", "node", "state", "input_shapes", "input_dtypes",
                "input_formats", "output_shapes", "output_dtypes", "output_formats")
INT_COLUMNS = ("start_ns", "block_dim", "mix_block_dim", "step", "stream", "device")
FLOAT_COLUMNS = ("dur_us", "wait_us")


class Codes:
    """A text column: int32 codes into `values`, the distinct strings in order of first appearance."""

    __slots__ = ("codes", "values", "_index")

    def __init__(self, codes: np.ndarray | None = None, values: Sequence[str] = ()) -> None:
        self.codes = np.zeros(0, np.int32) if codes is None else np.asarray(codes, dtype=np.int32)
        self.values: list[str] = list(values)
        self._index: dict[str, int] | None = None

    @classmethod
    def of(cls, items: Iterable[str]) -> Codes:
        """Codes of a sequence of strings."""
        items = list(items)
        index = {s: i for i, s in enumerate(dict.fromkeys(items))}
        return cls(np.fromiter(map(index.__getitem__, items), np.int32, len(items)), list(index))

    @classmethod
    def constant(cls, value: str, n: int) -> Codes:
        return cls(np.zeros(n, np.int32), [value])

    def __len__(self) -> int:
        return len(self.codes)

    def code(self, value: str) -> int:
        """The code of `value`, or -1 when no row holds it."""
        if self._index is None:
            self._index = {v: i for i, v in enumerate(self.values)}
        return self._index.get(value, -1)

    def at(self, row: int) -> str:
        return self.values[int(self.codes[row])]

    def take(self, rows: np.ndarray) -> Codes:
        return Codes(self.codes[rows], self.values)

    def to_json(self) -> dict[str, Any]:
        return {"values": self.values, "codes": self.codes.tolist()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Codes:
        return cls(np.asarray(d.get("codes", []), dtype=np.int32), [str(v) for v in d.get("values", [])])


def concat_codes(parts: Sequence[Codes]) -> Codes:
    """One column of several chunks, their vocabularies merged."""
    index: dict[str, int] = {}
    out = []
    for part in parts:
        remap = np.fromiter((index.setdefault(v, len(index)) for v in part.values), np.int32, len(part.values))
        out.append(remap[part.codes] if len(part.codes) else part.codes)
    return Codes(np.concatenate(out) if out else None, list(index))


class KernelTable:
    """Device kernel (or host op) rows in columns: what ran, where, when and for how long.

    `metrics` holds the hardware counters (`aic_mac_ratio`, `aiv_vec_ratio`, ... as float32, NaN
    where a row has none); every other column is in `text`, `ints` or `floats` under the names
    `TEXT_COLUMNS`, `INT_COLUMNS`, `FLOAT_COLUMNS`.
    """

    __slots__ = ("text", "ints", "floats", "metrics", "n")

    def __init__(self, n: int, text: Mapping[str, Codes] | None = None, ints: Mapping[str, np.ndarray] | None = None,
                 floats: Mapping[str, np.ndarray] | None = None, metrics: Mapping[str, np.ndarray] | None = None) -> None:
        self.n = int(n)
        self.text = {k: (text or {}).get(k) or Codes.constant("", n) for k in TEXT_COLUMNS}
        self.ints = {k: np.asarray((ints or {})[k], np.int64) if k in (ints or {}) else
                     np.full(n, NO_START if k == "start_ns" else NO_INT, np.int64) for k in INT_COLUMNS}
        self.floats = {k: np.asarray((floats or {})[k], np.float64) if k in (floats or {}) else
                       np.full(n, np.nan if k == "wait_us" else 0.0) for k in FLOAT_COLUMNS}
        self.metrics = {k: np.asarray(v, np.float32) for k, v in (metrics or {}).items()}
        for name, col in [*self.text.items(), *self.ints.items(), *self.floats.items(), *self.metrics.items()]:
            if len(col) != n:
                raise ValueError(f"column {name!r} has {len(col)} rows, expected {n}")

    def __len__(self) -> int:
        return self.n

    @property
    def dur_us(self) -> np.ndarray:
        return self.floats["dur_us"]

    @property
    def start_ns(self) -> np.ndarray:
        return self.ints["start_ns"]

    def names(self, column: str) -> list[str]:
        return self.text[column].values

    def label(self, column: str, row: int) -> str:
        return self.text[column].at(row)

    def total_us(self) -> float:
        return float(self.dur_us.sum())

    def with_text(self, column: str, codes: Codes) -> KernelTable:
        """A table sharing every column but `column` (module or node attribution made later)."""
        text = dict(self.text)
        text[column] = codes
        return KernelTable(self.n, text, self.ints, self.floats, self.metrics)

    def take(self, rows: np.ndarray) -> KernelTable:
        """The rows `rows` (indices or a boolean mask)."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        return KernelTable(len(rows), {k: c.take(rows) for k, c in self.text.items()},
                           {k: v[rows] for k, v in self.ints.items()}, {k: v[rows] for k, v in self.floats.items()},
                           {k: v[rows] for k, v in self.metrics.items()})

    def row(self, i: int) -> dict[str, Any]:
        """One row as a dict, for a detail pane."""
        out: dict[str, Any] = {k: c.at(i) for k, c in self.text.items()}
        out.update({k: int(v[i]) for k, v in self.ints.items()})
        out.update({k: float(v[i]) for k, v in self.floats.items()})
        out.update({k: float(v[i]) for k, v in self.metrics.items() if np.isfinite(v[i])})
        return out

    @classmethod
    def concat(cls, parts: Sequence[KernelTable]) -> KernelTable:
        if not parts:
            return cls(0)
        n = sum(p.n for p in parts)
        metric_names = list(dict.fromkeys(k for p in parts for k in p.metrics))
        return cls(n, {k: concat_codes([p.text[k] for p in parts]) for k in TEXT_COLUMNS},
                   {k: np.concatenate([p.ints[k] for p in parts]) for k in INT_COLUMNS},
                   {k: np.concatenate([p.floats[k] for p in parts]) for k in FLOAT_COLUMNS},
                   {k: np.concatenate([p.metrics.get(k, np.full(p.n, np.nan, np.float32)) for p in parts])
                    for k in metric_names})

    def to_json(self) -> dict[str, Any]:
        """Columns as lists; NaN floats become null so the file stays strict JSON."""
        def floats(a: np.ndarray) -> list[Any]:
            return [None if x != x else x for x in a.tolist()]

        return {"n": self.n, "text": {k: c.to_json() for k, c in self.text.items() if c.values != [""]},
                "ints": {k: v.tolist() for k, v in self.ints.items()},
                "floats": {k: floats(v) for k, v in self.floats.items()},
                "metrics": {k: floats(v) for k, v in self.metrics.items()}}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> KernelTable:
        def arr(v: Sequence[Any], dtype: Any) -> np.ndarray:
            return np.array([np.nan if x is None else x for x in v], dtype=dtype)

        return cls(int(d.get("n", 0)), {k: Codes.from_json(v) for k, v in (d.get("text") or {}).items()},
                   {k: np.asarray(v, np.int64) for k, v in (d.get("ints") or {}).items()},
                   {k: arr(v, np.float64) for k, v in (d.get("floats") or {}).items()},
                   {k: arr(v, np.float32) for k, v in (d.get("metrics") or {}).items()})


@dataclass(frozen=True, slots=True)
class OpStat:
    """One row of op_statistic.csv: an op type's count and time as the profiler summed them."""

    op_type: str
    core: str
    count: int
    total_us: float
    min_us: float
    avg_us: float
    max_us: float
    ratio_pct: float
    device: int = NO_INT


@dataclass(frozen=True, slots=True)
class StepTime:
    """One row of step_trace_time.csv (µs): how a step split into compute, communication and idle."""

    step: int
    computing: float
    communication_not_overlapped: float
    overlapped: float
    communication: float
    free: float
    stage: float
    bubble: float
    preparing: float = 0.0
    rank: int = NO_INT

    @property
    def total(self) -> float:
        """Wall time of the step: compute plus exposed communication plus idle."""
        return self.computing + self.communication_not_overlapped + self.free


@dataclass(frozen=True, slots=True)
class HostOp:
    """A framework op on the host (operator_details.csv, a cpu_op trace event): host and device time."""

    name: str
    count: int
    host_self_us: float
    host_total_us: float
    device_self_us: float
    device_total_us: float
    call_stack: str = ""
    input_shapes: str = ""


@dataclass(frozen=True, slots=True)
class Span:
    """One interval on a timeline track (the trace's Overlap Analysis, a ProfilerStep): µs from the profile start."""

    track: str
    name: str
    start_us: float
    dur_us: float


@dataclass(slots=True)
class Profile:
    """Everything a profiler wrote about time: kernel rows, per-type sums, steps, host ops, timeline spans.

    `kind` names the layout read ("ascend_pt", "msprof", "msprof_op", "kineto", "live", "cluster");
    `extra` carries what only one layout has (per-core PMU tables, API statistics, rank summaries).
    """

    kind: str
    kernels: KernelTable = field(default_factory=lambda: KernelTable(0))
    op_stats: tuple[OpStat, ...] = ()
    steps: tuple[StepTime, ...] = ()
    host_ops: tuple[HostOp, ...] = ()
    spans: tuple[Span, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    unmatched: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"kind": self.kind, "kernels": self.kernels.to_json(),
                "op_stats": [asdict(s) for s in self.op_stats], "steps": [asdict(s) for s in self.steps],
                "host_ops": [asdict(h) for h in self.host_ops], "spans": [asdict(s) for s in self.spans],
                "extra": self.extra, "unmatched": list(self.unmatched)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Profile:
        return cls(str(d.get("kind", "")), KernelTable.from_json(d.get("kernels") or {}),
                   tuple(OpStat(**s) for s in d.get("op_stats", ())), tuple(StepTime(**s) for s in d.get("steps", ())),
                   tuple(HostOp(**h) for h in d.get("host_ops", ())), tuple(Span(**s) for s in d.get("spans", ())),
                   dict(d.get("extra") or {}), tuple(d.get("unmatched", ())))
