"""Trace events decoded a piece at a time into columns: numbers as numpy arrays, every text or id interned once.

Only what a view reads is decoded: for complete (`X`) events the phase, name, category, pid, tid,
start, duration and five args (`Task Type`, the stream ids, `External id`, `Call stack`); flows
(`s`/`f`) keep category, id, thread and start; metadata (`M`) the process and thread names. With
msgspec installed a piece is decoded into typed structs that skip every other field in C; without
it (or for a piece whose values have unexpected types) the standard `json` module decodes it.
Complete events no view reads are skipped once their process is named (`Keep`). Every pass over a
piece's fresh structs costs its cache misses, so the fields come out in one comprehension of tuples
that `zip` turns into columns, and values are interned in one C pass.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from itertools import count
from typing import Any, Literal, Sequence, Union

import numpy as np

from ascend_tui.readers.parse.json_events import BadPiece
from ascend_tui.readers.profiler.csv_tables import to_ns

ABSENT = -(1 << 62)  # an int arg the event does not have
# The trace format's phases; msgspec decodes another `ph` (or one of another type) through the json fallback.
PHASES = ("X", "M", "s", "f", "C", "B", "E", "i", "I", "b", "n", "e", "S", "T", "p", "F", "t", "P", "N", "O", "D", "V",
          "v", "R", "c", "(", ")")

try:
    import msgspec
except ImportError:  # the json fallback below reads the same events, slower
    msgspec = None


class _Args:
    """The args of an event that the views read (the json fallback's struct)."""

    __slots__ = ("task_type", "physic_stream", "stream_id", "stream", "external_id", "call_stack", "name")

    def __init__(self, d: dict[str, Any]) -> None:
        self.task_type = d.get("Task Type")
        self.physic_stream = d.get("Physic Stream Id", ABSENT)
        self.stream_id = d.get("Stream Id", ABSENT)
        self.stream = d.get("stream", ABSENT)
        self.external_id = d.get("External id", ABSENT)
        self.call_stack = d.get("Call stack")
        self.name = d.get("name")


class _Event:
    """One trace event, only the fields that are read (the json fallback's struct)."""

    __slots__ = ("ph", "name", "cat", "pid", "tid", "ts", "dur", "id", "args")

    def __init__(self, d: Any) -> None:
        if not isinstance(d, dict):
            raise ValueError(f"an event is a {type(d).__name__}, not an object")
        self.ph = d.get("ph")
        self.name = d.get("name")
        self.cat = d.get("cat")
        self.pid = d.get("pid")
        self.tid = d.get("tid")
        self.ts = d.get("ts")
        self.dur = d.get("dur", 0.0)
        self.id = d.get("id")
        a = d.get("args")
        self.args = _Args(a if isinstance(a, dict) else {})


def _json_events(piece: bytes | memoryview) -> list[Any]:
    return [_Event(d) for d in json.loads(bytes(piece) if isinstance(piece, memoryview) else piece)]


if msgspec is not None:
    _Id = Union[int, str, None]

    class _MArgs(msgspec.Struct, frozen=True, gc=False):  # frozen: one shared default for events without args
        task_type: Union[str, None] = msgspec.field(default=None, name="Task Type")
        physic_stream: int = msgspec.field(default=ABSENT, name="Physic Stream Id")
        stream_id: int = msgspec.field(default=ABSENT, name="Stream Id")
        stream: int = ABSENT
        external_id: Union[int, str] = msgspec.field(default=ABSENT, name="External id")
        call_stack: Union[str, None] = msgspec.field(default=None, name="Call stack")
        name: Union[str, None] = None

    _NO_ARGS = _MArgs()

    class _MEvent(msgspec.Struct, gc=False):  # no cycles: the collector need not track them
        ph: Union[Literal[PHASES], None] = None  # type: ignore[valid-type]  # the literal's own str: no new object
        name: Union[str, None] = None
        cat: Union[str, None] = None
        pid: _Id = None
        tid: _Id = None
        ts: Union[str, float, None] = None
        dur: float = 0.0
        id: _Id = None
        args: _MArgs = _NO_ARGS

    _DECODER = msgspec.json.Decoder(list[_MEvent])


def decode(piece: bytes | memoryview, fast: bool = True) -> list[Any]:
    """The events of `b"[...]"`, typed structs when msgspec can type them, else through `json`.

    Raises `BadPiece` for a piece that is not JSON or holds something other than objects.
    """
    if fast and msgspec is not None:
        try:
            return _DECODER.decode(piece)  # type: ignore[no-any-return]
        except msgspec.ValidationError:
            pass  # a field of an unexpected type: the general decoder takes the piece as it is
        except msgspec.DecodeError as exc:
            m = re.search(r"\(byte (\d+)\)", str(exc))
            raise BadPiece(str(exc).split(" (byte")[0], int(m.group(1)) if m else 0) from None
    try:
        return _json_events(piece)
    except json.JSONDecodeError as exc:
        raise BadPiece(f"JSON is malformed: {exc.msg}", exc.pos) from None
    except ValueError as exc:
        raise BadPiece(str(exc), 0) from None


def ns_of(value: Any) -> int:
    """A µs time (string with ns decimals, or a number) as int ns."""
    return to_ns(value) if isinstance(value, str) else int(round(float(value) * 1000))


@dataclass(frozen=True, slots=True)
class Keep:
    """Which complete events a view may read, whatever their process: by category, or by a name prefix within
    one; and the processes all of whose events it may read. An event on another named process is skipped."""

    processes: frozenset[str]
    cats: frozenset[str]
    prefixed: tuple[str, str]  # (category, name prefix)


class Columns:
    """The columns of a trace's events, filled a piece at a time; values interned in one table.

    With `keep`, a complete event on a process that `keep` does not name (its `process_name` already read)
    is skipped unless its category is kept: it costs its start time only (the earliest start anchors the
    spans). `conflict` says if a process named later overturns a skip; the trace is then read again whole.
    """

    def __init__(self, keep: Keep | None = None) -> None:
        self.index: defaultdict[Any, int] = defaultdict(count().__next__)  # a value not seen yet gets the next code
        self.index[None]  # code 0
        self.values: list[Any] = [None]  # by code, once `finish` ran
        self.events = 0
        self.skipped = 0
        self.first: int | None = None  # the earliest start among the skipped events
        self._x: dict[str, list[np.ndarray]] = {k: [] for k in X_FIELDS}
        self._f: dict[str, list[np.ndarray]] = {k: [] for k in F_FIELDS}
        self.meta: list[tuple[str, Any, Any, str]] = []  # ("process_name" | "thread_name", pid, tid, name)
        self.x: dict[str, np.ndarray] = {}
        self.f: dict[str, np.ndarray] = {}
        self._keep = keep
        self._named: dict[Any, str] = {}  # pid -> process name, as read so far
        self._drop: set[Any] = set()  # pids named as processes `keep` does not name
        self._dropped: set[Any] = set()  # pids whose events may have been skipped

    def codes(self, items: Sequence[Any]) -> np.ndarray:
        """Intern codes of `items` in one C-level pass (unhashable values are interned as their JSON text)."""
        try:
            return np.fromiter(map(self.index.__getitem__, items), np.int32, len(items))
        except TypeError:
            items = [v if getattr(v, "__hash__", None) else json.dumps(v, sort_keys=True) for v in items]
            return np.fromiter(map(self.index.__getitem__, items), np.int32, len(items))

    def conflict(self) -> bool:
        """Whether a process whose events were skipped is, by the names read in the end, one that `keep` names."""
        keep = self._keep
        return keep is not None and any(self._named.get(p, "") in keep.processes for p in self._dropped)

    def add(self, events: list[Any]) -> None:
        """Take one decoded piece's events: one pass picks each complete event's fields (and one its args'), `zip`
        turns them into columns in C, and each column becomes an array at once."""
        self.events += len(events)
        rest = [e for e in events if e.ph != "X" and e.ph is not None]
        flows = [(e.ph == "s", e.ts, e.cat, e.id, e.pid, e.tid) for e in rest
                 if (e.ph == "s" or e.ph == "f") and e.ts is not None]
        for e in [e for e in rest if e.ph == "M"] if len(flows) < len(rest) else ():
            if e.name == "process_name" or e.name == "thread_name":
                a = e.args
                self.meta.append((e.name, e.pid, e.tid, "" if a is None or a.name is None else str(a.name)))
                if e.name == "process_name" and self._keep is not None:
                    self._name(e.pid, self.meta[-1][3])
        del rest
        rows = self._skip(events) if self._drop else None
        if rows is None:
            rows = [(e.ts, e.dur, e.name, e.cat, e.pid, e.tid, e.args) for e in events
                    if e.ph == "X" and e.ts is not None]
        if rows:
            ts, dur, name, cat, pid, tid, args = zip(*rows)
            del rows
            ps, si, st, task, ext, stack = zip(*[(a.physic_stream, a.stream_id, a.stream, a.task_type, a.external_id,
                                                 a.call_stack) for a in args])
            x = self._x
            x["ts"].append(_times(ts))
            x["dur"].append(_floats(dur))
            stream = _ints(ps)
            for more in (si, st):
                missing = stream == ABSENT
                if missing.any():
                    stream = np.where(missing, _ints(more), stream)
            x["stream"].append(stream)
            x["name"].append(self.codes(name))
            x["cat"].append(self.codes(cat))
            x["pid"].append(self.ids(pid))
            x["tid"].append(self.ids(tid))
            x["task"].append(self.codes(task))
            x["ext"].append(self.ids(ext))
            x["stack"].append(self.codes(stack))
        if flows:
            start, fts, fcat, fid, fpid, ftid = zip(*flows)
            f = self._f
            f["start"].append(np.array(start, bool))
            f["ts"].append(_times(fts))
            for key, values in zip(F_FIELDS[2:], (fcat, fid, fpid, ftid)):
                f[key].append(self.ids(values))

    def _name(self, pid: Any, name: str) -> None:
        try:
            self._named[pid] = name
        except TypeError:  # an unhashable pid: never skipped
            return
        if name in self._keep.processes:  # type: ignore[union-attr]
            self._drop.discard(pid)
        else:
            self._drop.add(pid)

    def _skip(self, events: list[Any]) -> list[tuple[Any, ...]] | None:
        """The fields of the complete events a view may read; the others' earliest start kept in `first`.

        None where a pid or category cannot be looked up (unhashable): the piece is kept whole."""
        drop, cats, (cat, prefix) = self._drop, self._keep.cats, self._keep.prefixed  # type: ignore[union-attr]
        try:  # an event is read if not on a dropped process, or of a kept category, or a prefixed one; else its ts
            both = [(e.ts, e.dur, e.name, e.cat, e.pid, e.tid, e.args) if e.pid not in drop or e.cat in cats
                    or (e.cat == cat and str(e.name).startswith(prefix)) else e.ts
                    for e in events if e.ph == "X" and e.ts is not None]
        except TypeError:
            return None
        rows = [r for r in both if r.__class__ is tuple]  # a ts is a str or a number, never a tuple
        skipped = [r for r in both if r.__class__ is not tuple] if len(rows) < len(both) else []
        if skipped:
            self.skipped += len(skipped)
            self._dropped |= drop
            first = int(_times(skipped).min())
            self.first = first if self.first is None else min(self.first, first)
        return rows

    def finish(self) -> None:
        """Join the pieces' arrays."""
        empty = {"ts": np.int64, "dur": np.float64, "stream": np.int64, "start": bool}
        self.x = {k: np.concatenate(v) if v else np.zeros(0, empty.get(k, np.int32)) for k, v in self._x.items()}
        self.f = {k: np.concatenate(v) if v else np.zeros(0, empty.get(k, np.int32)) for k, v in self._f.items()}
        self._x = self._f = {}
        self.values = list(self.index)
        absent = self.index.get(ABSENT)
        if absent is not None:
            self.x["ext"][self.x["ext"] == absent] = 0

    def ids(self, items: Sequence[Any]) -> np.ndarray:
        """Intern codes of ids (pids, tids, flow ids): through numpy when all are ints."""
        try:
            arr = np.fromiter(items, np.int64, len(items))
        except (TypeError, ValueError, OverflowError):
            return self.codes(items)
        uniq, inv = np.unique(arr, return_inverse=True)
        return self.codes(uniq.tolist())[inv.reshape(-1)]


X_FIELDS = ("ts", "dur", "stream", "name", "cat", "pid", "tid", "task", "ext", "stack")
F_FIELDS = ("start", "ts", "cat", "id", "pid", "tid")


def _ints(values: Sequence[Any]) -> np.ndarray:
    """int64 of int args (ABSENT kept)."""
    try:
        return np.fromiter(values, np.int64, len(values))
    except (TypeError, ValueError, OverflowError):
        return np.fromiter((ABSENT if v is None else int(v) for v in values), np.int64, len(values))


def _floats(values: Sequence[Any]) -> np.ndarray:
    try:
        return np.fromiter(values, np.float64, len(values))
    except (TypeError, ValueError):
        return np.fromiter((0.0 if v is None else float(v) for v in values), np.float64, len(values))


def _times(values: Sequence[Any]) -> np.ndarray:
    """int64 ns of µs times, exactly (strings keep their ns decimals; numbers as `round(v * 1000)`)."""
    n = len(values)
    if n and type(values[0]) is str:
        out = _decimal_ns(values)
        if out is not None:
            return out
    elif n and set(map(type, values)) <= {float, int}:
        return np.rint(np.array(values, np.float64) * 1000).astype(np.int64)
    return np.fromiter(map(ns_of, values), np.int64, n)


def _decimal_ns(values: Sequence[str]) -> np.ndarray | None:
    """`"1736408883688177.930"` -> 1736408883688177930 for a list of such strings at once; None if one is not
    like it (of another length or layout, or not a string)."""
    try:
        text = "".join(values).encode("ascii")  # TypeError: not all are strings
    except (TypeError, UnicodeEncodeError):
        return None
    w = len(values[0])
    if not w or len(text) != w * len(values) or set(map(len, values)) != {w}:
        return None
    m = np.frombuffer(text, np.uint8).reshape(len(values), w)
    dots = np.flatnonzero(m[0] == 46)
    p = int(dots[0]) if len(dots) == 1 else 0
    if 0 < p <= 16 and p + 4 == w and (m[:, p] == 46).all():  # the usual: one layout, three decimals
        whole = m[:, :p] - 48
        frac = m[:, p + 1:] - 48
        if (whole < 10).all() and (frac < 10).all():  # uint8: a byte below '0' wraps above 9
            return whole.astype(np.int64) @ _POW10[p - 1::-1] * 1000 + frac.astype(np.int64) @ _POW10[2::-1]
    return None  # another layout: each value on its own


_POW10 = 10 ** np.arange(19, dtype=np.int64)
