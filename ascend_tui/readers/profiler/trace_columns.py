"""Trace events decoded a piece at a time into columns: numbers as numpy arrays, every text or id interned once.

Only what a view reads is decoded: for complete (`X`) events the phase, name, category, pid, tid,
start, duration and five args (`Task Type`, the stream ids, `External id`, `Call stack`); flows
(`s`/`f`) keep category, id, thread and start; metadata (`M`) the process and thread names. With
msgspec installed a piece is decoded into typed structs that skip every other field in C; without
it (or for a piece whose values have unexpected types) the standard `json` module decodes it.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterable, Union

import numpy as np

from ascend_tui.graph.profile import NO_INT
from ascend_tui.readers.profiler.csv_tables import to_ns

try:
    import msgspec
except ImportError:  # the json fallback below reads the same events, slower
    msgspec = None


class _Args:
    """The args of an event that the views read (the json fallback's struct)."""

    __slots__ = ("task_type", "physic_stream", "stream_id", "stream", "external_id", "call_stack", "name")

    def __init__(self, d: dict[str, Any]) -> None:
        self.task_type = d.get("Task Type")
        self.physic_stream = d.get("Physic Stream Id")
        self.stream_id = d.get("Stream Id")
        self.stream = d.get("stream")
        self.external_id = d.get("External id")
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
        self.dur = d.get("dur")
        self.id = d.get("id")
        a = d.get("args")
        self.args = _Args(a) if isinstance(a, dict) else None


def _json_events(piece: bytes) -> list[Any]:
    return [_Event(d) for d in json.loads(piece)]


if msgspec is not None:
    _Id = Union[int, str, None]

    class _MArgs(msgspec.Struct):
        task_type: Union[str, None] = msgspec.field(default=None, name="Task Type")
        physic_stream: Union[int, None] = msgspec.field(default=None, name="Physic Stream Id")
        stream_id: Union[int, None] = msgspec.field(default=None, name="Stream Id")
        stream: Union[int, None] = None
        external_id: _Id = msgspec.field(default=None, name="External id")
        call_stack: Union[str, None] = msgspec.field(default=None, name="Call stack")
        name: Union[str, None] = None

    class _MEvent(msgspec.Struct):
        ph: Union[str, None] = None
        name: Union[str, None] = None
        cat: Union[str, None] = None
        pid: _Id = None
        tid: _Id = None
        ts: Union[str, float, None] = None
        dur: Union[float, str, None] = None
        id: _Id = None
        args: Union[_MArgs, None] = None

    _DECODER = msgspec.json.Decoder(list[_MEvent])


def decode(piece: bytes, fast: bool = True) -> list[Any]:
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


class BadPiece(ValueError):
    """A piece that does not decode: what is wrong and where, counted from the piece's first byte."""

    def __init__(self, problem: str, pos: int) -> None:
        super().__init__(problem)
        self.problem, self.pos = problem, pos


def ns_of(value: Any) -> int:
    """A µs time (string with ns decimals, or a number) as int ns."""
    return to_ns(value) if isinstance(value, str) else int(round(float(value) * 1000))


def _stream(e: Any) -> int:
    a = e.args
    if a is not None:
        for v in (a.physic_stream, a.stream_id, a.stream):
            if v is not None:
                return int(v)
    return e.tid if isinstance(e.tid, int) else NO_INT


class Columns:
    """The columns of a trace's events, filled a piece at a time; values interned in one table."""

    def __init__(self) -> None:
        self.index: dict[Any, int] = {None: 0}
        self.values: list[Any] = [None]
        self.events = 0
        self._x: dict[str, list[np.ndarray]] = {k: [] for k in X_FIELDS}
        self._f: dict[str, list[np.ndarray]] = {k: [] for k in F_FIELDS}
        self.meta: list[tuple[str, Any, Any, str]] = []  # ("process_name" | "thread_name", pid, tid, name)
        self.x: dict[str, np.ndarray] = {}
        self.f: dict[str, np.ndarray] = {}

    def codes(self, items: Iterable[Any], n: int) -> np.ndarray:
        """Intern codes of `items` (unhashable values are interned as their JSON text)."""
        index = self.index
        got = index.get
        items = list(items)
        try:
            cs = [got(v) for v in items]
        except TypeError:
            items = [v if getattr(v, "__hash__", None) else json.dumps(v, sort_keys=True) for v in items]
            cs = [got(v) for v in items]
        if None in cs:
            values = self.values
            for i, c in enumerate(cs):
                if c is None:
                    v = items[i]
                    c = index.get(v)
                    if c is None:
                        c = index[v] = len(values)
                        values.append(v)
                    cs[i] = c
        return np.array(cs, np.int32) if n else np.zeros(0, np.int32)

    def add(self, events: list[Any]) -> None:
        """Take one decoded piece's events."""
        self.events += len(events)
        xs = [e for e in events if e.ph == "X" and e.ts is not None]
        flows = [e for e in events if (e.ph == "s" or e.ph == "f") and e.ts is not None]
        for e in events:
            if e.ph == "M" and (e.name == "process_name" or e.name == "thread_name"):
                a = e.args
                name = "" if a is None or a.name is None else str(a.name)
                self.meta.append((e.name, e.pid, e.tid, name))
        if xs:
            n = len(xs)
            x = self._x
            x["ts"].append(_times([e.ts for e in xs]))
            x["dur"].append(np.fromiter((0.0 if e.dur is None else float(e.dur) for e in xs), np.float64, n))
            x["stream"].append(np.fromiter(map(_stream, xs), np.int64, n))
            for key, get in X_TEXT.items():
                x[key].append(self.codes(map(get, xs), n))
        if flows:
            n = len(flows)
            f = self._f
            f["start"].append(np.fromiter((e.ph == "s" for e in flows), bool, n))
            f["ts"].append(_times([e.ts for e in flows]))
            for key, get in F_TEXT.items():
                f[key].append(self.codes(map(get, flows), n))

    def finish(self) -> None:
        """Join the pieces' arrays."""
        empty = {"ts": np.int64, "dur": np.float64, "stream": np.int64, "start": bool}
        self.x = {k: np.concatenate(v) if v else np.zeros(0, empty.get(k, np.int32)) for k, v in self._x.items()}
        self.f = {k: np.concatenate(v) if v else np.zeros(0, empty.get(k, np.int32)) for k, v in self._f.items()}
        self._x = self._f = {}

    def code_of(self, value: Any) -> int:
        """The intern code of `value`, adding it."""
        return int(self.codes((value,), 1)[0])


def _arg(field: str) -> Callable[[Any], Any]:
    def get(e: Any) -> Any:
        return None if e.args is None else getattr(e.args, field)
    return get


X_TEXT: dict[str, Callable[[Any], Any]] = {
    "name": lambda e: e.name, "cat": lambda e: e.cat, "pid": lambda e: e.pid, "tid": lambda e: e.tid,
    "task": _arg("task_type"), "ext": _arg("external_id"), "stack": _arg("call_stack")}
X_FIELDS = ("ts", "dur", "stream", *X_TEXT)
F_TEXT: dict[str, Callable[[Any], Any]] = {
    "cat": lambda e: e.cat, "id": lambda e: e.id, "pid": lambda e: e.pid, "tid": lambda e: e.tid}
F_FIELDS = ("start", "ts", *F_TEXT)


def _times(values: list[Any]) -> np.ndarray:
    """int64 ns of µs times, exactly (strings keep their ns decimals)."""
    return np.fromiter(map(ns_of, values), np.int64, len(values))
