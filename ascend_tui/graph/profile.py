"""Timing evidence: kernel rows as numpy columns, plus the small per-type, per-step and host tables profilers write.

A real LLM step has millions of kernel rows; one Python object a row would cost more than the
file. Text columns are stored as int32 codes into a list of distinct values (`Codes`), numbers as
numpy arrays, and start times as int64 nanoseconds (epoch µs with ns decimals do not fit a float64).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Generic, Iterable, Iterator, Mapping, Sequence, TypeVar

import numpy as np

from ascend_tui.graph.communication import Communication
from ascend_tui.threads import run_all

NO_INT = -1  # missing block dim / step / stream / device
NO_START = np.iinfo(np.int64).min  # a kernel row without a start time
TEXT_COLUMNS = ("name", "type", "core", "module", "node", "state", "input_shapes", "input_dtypes",
                "input_formats", "output_shapes", "output_dtypes", "output_formats")
INT_COLUMNS = ("start_ns", "block_dim", "mix_block_dim", "step", "stream", "device")
FLOAT_COLUMNS = ("dur_us", "wait_us")
V = TypeVar("V")


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


def take_rows(col: Any, rows: np.ndarray) -> Any:
    """Rows `rows` of a decoded column (`Codes` or array)."""
    return col.take(rows) if isinstance(col, Codes) else col[rows]


class Decoder:
    """A column not decoded yet: calling it decodes every row, `take(rows)` only those rows.

    `f(*args)` decodes the column and `f(*args, rows=rows)` some of its rows (a roofline estimate
    needs the shapes of the rows without hardware counters only).
    """

    __slots__ = ("f", "args")

    def __init__(self, f: Callable[..., Any], *args: Any) -> None:
        self.f, self.args = f, args

    def __call__(self) -> Any:
        return self.f(*self.args)

    def take(self, rows: np.ndarray) -> Any:
        return self.f(*self.args, rows=rows)


def _decode_rows(make: Callable[[], Any], rows: np.ndarray) -> Any:
    take = getattr(make, "take", None)
    return take(rows) if take is not None else take_rows(make(), rows)


class Lazy(Mapping[str, V], Generic[V]):
    """Named columns, each decoded the first time it is read and kept from then on.

    A million-row kernel file has forty-odd columns and a summary reads five of them: the readers
    hand over a decoder per column instead of the column, so the unread ones cost nothing.
    """

    __slots__ = ("_ready", "_pending", "_order", "_some")

    def __init__(self, ready: Mapping[str, V] | None = None, pending: Mapping[str, Callable[[], V]] | None = None
                 ) -> None:
        self._ready: dict[str, V] = dict(ready or {})
        self._pending: dict[str, Callable[[], V]] = {k: f for k, f in (pending or {}).items() if k not in self._ready}
        self._order = list(dict.fromkeys([*self._ready, *self._pending]))
        self._some: dict[tuple[Any, ...], V] = {}  # rows of columns not read yet, by (column, rows)

    def __getitem__(self, key: str) -> V:
        try:
            return self._ready[key]
        except KeyError:
            pass
        make = self._pending.get(key)
        if make is None:
            return self._ready[key]  # read by another thread meanwhile (or a KeyError)
        value = make()
        self._ready[key] = value
        self._pending.pop(key, None)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, key: object) -> bool:
        return key in self._ready or key in self._pending

    def is_ready(self, key: str) -> bool:
        return key in self._ready

    def maker(self, key: str) -> Callable[[], V]:
        """A `Decoder` of the column `key` that does not keep it here (a concatenation reads each part once)."""
        if key in self._ready:
            return Decoder(_given, self._ready[key])
        return self._pending[key]

    def rows(self, key: str, rows: np.ndarray) -> V:
        """Rows `rows` of column `key`; a column not read yet decodes only those rows when its decoder can."""
        if key in self._ready:
            return take_rows(self._ready[key], rows)  # type: ignore[no-any-return]
        make = self._pending.get(key)
        if make is None:
            return take_rows(self[key], rows)  # type: ignore[no-any-return]
        rows = np.asarray(rows)
        memo = (key, rows.dtype.str, len(rows), hash(rows.tobytes()))
        if memo not in self._some:  # the same rows asked again (each summary re-derives bound-ness)
            if len(self._some) >= 8:
                self._some.pop(next(iter(self._some)))
            self._some[memo] = _decode_rows(make, rows)
        return self._some[memo]  # type: ignore[no-any-return]

    def replace(self, key: str, value: V) -> Lazy[V]:
        """The same columns with `key` set to `value` (nothing decoded)."""
        out = Lazy(self._ready, self._pending)
        out._ready[key] = value
        out._pending.pop(key, None)
        if key not in out._order:
            out._order.append(key)
        return out


def _given(value: Any, rows: np.ndarray | None = None) -> Any:
    return value if rows is None else take_rows(value, rows)


def _checked(name: str, n: int, cast: Callable[[Any], V], make: Callable[[], Any], rows: np.ndarray | None = None) -> V:
    if rows is not None:
        return cast(_decode_rows(make, rows))
    col = cast(make())
    if len(col) != n:  # type: ignore[arg-type]
        raise ValueError(f"column {name!r} has {len(col)} rows, expected {n}")  # type: ignore[arg-type]
    return col


def _columns(n: int, given: Mapping[str, Any] | None, names: Sequence[str], default: Callable[[str], V],
             cast: Callable[[Any], V]) -> Lazy[V]:
    """`given` as a `Lazy` of n-row columns: its pending columns stay pending, the absent ones of `names`
    become `default(name)` when read."""
    given = given or {}
    ready: dict[str, V] = {}
    pending: dict[str, Callable[[], V]] = {}
    for k in dict.fromkeys([*names, *given]):
        if isinstance(given, Lazy) and k in given and not given.is_ready(k):
            pending[k] = Decoder(_checked, k, n, cast, given.maker(k))
            continue
        v = given.get(k) if k in given else None
        if v is None or (isinstance(v, Codes) and not len(v)):
            pending[k] = partial(default, k)
        else:
            ready[k] = _checked(k, n, cast, lambda v=v: v)
    return Lazy(ready, {k: pending[k] for k in dict.fromkeys([*names, *given]) if k in pending})


def _codes(v: Any) -> Codes:
    if not isinstance(v, Codes):
        raise TypeError(f"a text column must be Codes, not {type(v).__name__}")
    return v


class KernelTable:
    """Device kernel (or host op) rows in columns: what ran, where, when and for how long.

    `metrics` holds the hardware counters (`aic_mac_ratio`, `aiv_vec_ratio`, ... as float32, NaN
    where a row has none); every other column is in `text`, `ints` or `floats` under the names
    `TEXT_COLUMNS`, `INT_COLUMNS`, `FLOAT_COLUMNS`.
    """

    __slots__ = ("text", "ints", "floats", "metrics", "n")

    def __init__(self, n: int, text: Mapping[str, Codes] | None = None, ints: Mapping[str, np.ndarray] | None = None,
                 floats: Mapping[str, np.ndarray] | None = None, metrics: Mapping[str, np.ndarray] | None = None) -> None:
        self.n = n = int(n)
        self.text: Lazy[Codes] = _columns(n, text, TEXT_COLUMNS, lambda k: Codes.constant("", n), _codes)
        self.ints: Lazy[np.ndarray] = _columns(
            n, ints, INT_COLUMNS, lambda k: np.full(n, NO_START if k == "start_ns" else NO_INT, np.int64),
            partial(np.asarray, dtype=np.int64))
        self.floats: Lazy[np.ndarray] = _columns(
            n, floats, FLOAT_COLUMNS, lambda k: np.full(n, np.nan if k == "wait_us" else 0.0),
            partial(np.asarray, dtype=np.float64))
        self.metrics: Lazy[np.ndarray] = _columns(n, metrics, (), lambda k: np.full(n, np.nan, np.float32),
                                                  partial(np.asarray, dtype=np.float32))

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
        return KernelTable(self.n, self.text.replace(column, codes), self.ints, self.floats, self.metrics)

    def take(self, rows: np.ndarray) -> KernelTable:
        """The rows `rows` (indices or a boolean mask)."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        def part(cols: Lazy[Any]) -> Lazy[Any]:
            return Lazy({}, {k: partial(cols.rows, k, rows) for k in cols})

        return KernelTable(len(rows), part(self.text), part(self.ints), part(self.floats), part(self.metrics))

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
        if len(parts) == 1:
            return parts[0]
        n = sum(p.n for p in parts)
        metric_names = list(dict.fromkeys(k for p in parts for k in p.metrics))
        # a column every part has decoded is joined now; the others when first read, from the parts'
        # decoders (so the parts themselves can go)
        def joined(cols: list[Lazy[Any]], keys: Sequence[str], join: Callable[[list[Callable[[], Any]]], Any],
                   absent: Callable[[int], Any] | None = None) -> Lazy[Any]:
            ready, pending = {}, {}
            for k in keys:
                makers = [c.maker(k) if k in c or absent is None else partial(absent, p.n) for c, p in zip(cols, parts)]
                if all(k in c and c.is_ready(k) for c in cols):
                    ready[k] = join(makers)
                else:
                    pending[k] = Decoder(_join_parts, join, makers, offsets)
            return Lazy(ready, pending)

        offsets = np.cumsum([0] + [p.n for p in parts])

        return cls(n, joined([p.text for p in parts], TEXT_COLUMNS, _join_codes),
                   joined([p.ints for p in parts], INT_COLUMNS, _join),
                   joined([p.floats for p in parts], FLOAT_COLUMNS, _join),
                   joined([p.metrics for p in parts], metric_names, _join, partial(np.full, fill_value=np.nan,
                                                                                     dtype=np.float32)))

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


def _join(makers: Sequence[Callable[[], np.ndarray]]) -> np.ndarray:
    return np.concatenate(run_all(makers))  # the parts decode side by side


def _join_codes(makers: Sequence[Callable[[], Codes]]) -> Codes:
    return concat_codes(run_all(makers))


def _join_parts(join: Callable[[list[Callable[[], Any]]], Any], makers: list[Callable[[], Any]], offsets: np.ndarray,
                rows: np.ndarray | None = None) -> Any:
    """The parts' columns joined, or only the rows `rows` of the whole (each part decoding just its own)."""
    if rows is None:
        return join(makers)
    rows = np.asarray(rows, np.int64)
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    cut = np.searchsorted(ordered, offsets)
    pieces = [partial(_decode_rows, m, ordered[a:b] - lo)
              for m, a, b, lo in zip(makers, cut[:-1], cut[1:], offsets[:-1]) if b > a]
    if not pieces:
        return join([partial(_decode_rows, makers[0], ordered)])
    out = join(pieces)
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    return take_rows(out, back)


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
    communication: Communication | None = None
    # every framework-op call on the timeline (text name, thread; start_ns, dur_us), in start order: the kernel
    # table's `host_op` int column is a row of it (-1: no flow reached a host op)
    host_calls: KernelTable = field(default_factory=lambda: KernelTable(0))

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"kind": self.kind, "kernels": self.kernels.to_json(),
                "op_stats": [asdict(s) for s in self.op_stats], "steps": [asdict(s) for s in self.steps],
                "host_ops": [asdict(h) for h in self.host_ops], "spans": [asdict(s) for s in self.spans],
                "extra": self.extra, "unmatched": list(self.unmatched),
                "communication": self.communication.to_json() if self.communication else None,
                **({"host_calls": self.host_calls.to_json()} if self.host_calls.n else {})}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Profile:
        return cls(str(d.get("kind", "")), KernelTable.from_json(d.get("kernels") or {}),
                   tuple(OpStat(**s) for s in d.get("op_stats", ())), tuple(StepTime(**s) for s in d.get("steps", ())),
                   tuple(HostOp(**h) for h in d.get("host_ops", ())), tuple(Span(**s) for s in d.get("spans", ())),
                   dict(d.get("extra") or {}), tuple(d.get("unmatched", ())),
                   Communication.from_json(d["communication"]) if d.get("communication") else None,
                   KernelTable.from_json(d.get("host_calls") or {}))
