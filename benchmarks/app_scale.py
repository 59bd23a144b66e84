"""How the app copes with a 100,000-operator investigation: first screen, scrolling, search, filter.

Each measurement is repeated on a 1,000-operator investigation in the same run, and the
ratio is printed: a Line-API list should cost about the same per screen whatever the size.
Run: `python benchmarks/app_scale.py [--ops 100000] [--baseline 1000] [--trace-kernels 1000000]`.
With `--trace-kernels N` a trace_view.json of N device kernels (the Level1 fixture's kernel names
and streams, one after the other) is written and opened instead: the read alone is timed, then the
app's first screen from the file — the op list of the whole read, before its advice is computed —
measured from the moment the app's reader returned (goal: under 1 s), and when the advice was filled
in; then the keys on the opened investigation and in its profile view (`T`, and `T` again once closed; goal:
each under 50 ms). Beside each key's times, each run's counts (`Counts`): nodes restyled, lines painted, layouts
of the screen (goal for the home screen's keys: none) and full garbage collections, so a slow hour's times can
be told from more work. The app makes its full collections itself once idle between keys (`IdleCollector`):
those are counted apart ("idle GCs"), their CPU left out of the key that was waiting on the pilot meanwhile and
added up per run on a line of its own. The search's letters are timed one by one: their mean and the slowest.
With `--timeline-kernels N` the timeline view (`L`) is opened on N synthetic kernels (two ranks, a
compute and a communication stream each) and every zoom / pan / jump key is timed, each press
printed, beside the same keys on 1,000 kernels in the same run (goal: each under 50 ms). With
`--timeline-flows` as well, every compute kernel has a launching host op (a host-call row on its rank's
thread), so the host lanes are drawn and the flow key (`f`, to the host op and back) is timed too.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ascend_tui.evidence import STAT_FIELDS, Finding, StatsTable, TensorMeta
from ascend_tui.graph.opgraph import OpGraph, OpNode
from ascend_tui.investigation import Investigation, RunInfo

SIZE = (120, 40)
OPS_PER_LAYER = ("q_proj/addmm", "k_proj/addmm", "v_proj/addmm", "attn/bmm", "attn/softmax", "attn/bmm",
                 "o_proj/addmm", "norm/native_layer_norm", "mlp.up/addmm", "mlp.act/gelu", "mlp.down/addmm", "add")


def synthetic(n: int, flagged_every: int = 97) -> Investigation:
    """`n` operators in transformer-like layers, statistics for every output, a finding on every 97th op."""
    g = OpGraph(f"synthetic-{n}")
    meta = TensorMeta((8, 512, 1024), "float16")
    g.add_node(OpNode("input:0", "input", "", -1, kind="input", outputs=(meta,)))
    prev = "input:0"
    keys: list[tuple[str, int]] = []
    findings: list[Finding] = []
    counters: dict[str, int] = {}
    for i in range(n):
        layer, pos = divmod(i, len(OPS_PER_LAYER))
        sub, _, op = OPS_PER_LAYER[pos].rpartition("/")
        module = f"model.layers.{layer}.{sub}" if sub else f"model.layers.{layer}"
        k = counters.get(f"{module}/{op}", 0)
        counters[f"{module}/{op}"] = k + 1
        nid = f"{module}/{op}.{k}"
        g.add_node(OpNode(nid, f"aten.{op}.default", module, i, inputs=(meta,), outputs=(meta,)))
        g.add_edge(prev, nid, 0, 0)
        residual = f"model.layers.{layer - 1}/add.0"
        if op == "add" and residual in g:
            g.add_edge(residual, nid, 0, 1)
        keys.append((nid, 0))
        if i % flagged_every == 5:
            findings.append(Finding("overflow", "overflow", "warning" if i % 2 else "error", nid, f"aten.{op}",
                                    module, i, f"abs max {i * 3.0:.4g} leaves little headroom in float16"))
        prev = nid
    rng = np.random.default_rng(0)
    scale = np.abs(rng.normal(size=n)) * 100 + 1
    rows = np.zeros((n, len(STAT_FIELDS)))
    rows[:, 0], rows[:, 1], rows[:, 2] = -scale, scale, scale * 0.01  # min, max, mean
    rows[:, 3], rows[:, 4], rows[:, 8] = scale * 300, scale, 8 * 512 * 1024  # l2norm, abs_max, numel
    stats = StatsTable()
    stats.add_many(keys, rows)
    return Investigation(g, stats=stats, reference=None, findings=findings,
                         run=RunInfo(target=f"synthetic-{n}", dtype="float16", checks=("overflow",)))


def _median(samples: list[float]) -> float:
    return float(np.median(samples))


def _runs(samples: list[float]) -> str:
    """Every run's number, then their median: `12.1, 9.8, 10.4 ms (median 10.4 ms)`."""
    if len(samples) == 1:
        return _fmt(samples[0])
    return f"{', '.join(_fmt(v) for v in samples)} (median {_fmt(_median(samples))})"


class Counts:
    """What a key press did, counted the same however fast the machine is: nodes restyled from the stylesheet
    (each widget and each of its component classes), lines painted (not taken from a widget's cache), layouts of
    the screen, and full collections of the garbage collector (with their CPU time, the one count that is a time):
    those set off inside the key's handling, and apart those the app made itself once idle after it
    (`progress.IdleCollector`), whose CPU time `key_cpu` leaves out of the key's and `total_idle_ms` adds up.

    Counted by wrapping Textual's `Stylesheet.apply`, `StylesCache.render_line` and `Screen._refresh_layout`
    (textual is pinned at 8.2.8) and a `gc.callbacks` hook.
    """

    NAMES = ("restyled", "lines", "layouts", "full GCs")

    def __init__(self) -> None:
        self.n = dict.fromkeys(self.NAMES, 0)
        self.gc_ms = 0.0
        self.idle = 0
        self.idle_ms = 0.0
        self.total_idle = 0
        self.total_idle_ms = 0.0
        self._idle_start = False
        self._idle_collector: Any = None
        self._undo: list[tuple[type, str, object]] = []
        self._gc_start = 0.0

    def __enter__(self) -> Counts:
        import gc

        from textual._styles_cache import StylesCache
        from textual.css.stylesheet import Stylesheet
        from textual.screen import Screen

        for cls, name, key in ((Stylesheet, "apply", "restyled"), (StylesCache, "render_line", "lines"),
                               (Screen, "_refresh_layout", "layouts")):
            self._undo.append((cls, name, cls.__dict__[name]))
            setattr(cls, name, self._counted(cls.__dict__[name], key))
        from ascend_tui import progress

        self._idle_collector = getattr(progress, "IdleCollector", None)  # none in the code before it (compared)
        gc.callbacks.append(self._gc)
        return self

    def __exit__(self, *_exc: object) -> None:
        import gc

        for cls, name, method in self._undo:
            setattr(cls, name, method)
        gc.callbacks.remove(self._gc)

    def _counted(self, method: Callable[..., object], key: str) -> Callable[..., object]:
        counts = self.n

        def counted(*args: object, **kwargs: object) -> object:
            counts[key] += 1
            return method(*args, **kwargs)

        return counted

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._idle_start = self._idle_collector is not None and self._idle_collector.collecting
            if self._idle_start:
                self.idle += 1
                self.total_idle += 1
            else:
                self.n["full GCs"] += 1
            self._gc_start = time.thread_time()
        else:
            ms = (time.thread_time() - self._gc_start) * 1000
            if self._idle_start:
                self.idle_ms += ms
                self.total_idle_ms += ms
            else:
                self.gc_ms += ms

    def reset(self) -> None:
        self.n.update(dict.fromkeys(self.NAMES, 0))
        self.gc_ms = 0.0
        self.idle = 0
        self.idle_ms = 0.0

    def key_cpu(self, since: float, idle_ms_then: float = 0.0) -> float:
        """CPU seconds since `since` (a `process_time`), less the idle collections made meanwhile (`idle_ms` was
        `idle_ms_then` at `since`)."""
        return time.process_time() - since - (self.idle_ms - idle_ms_then) / 1000

    def taken(self, per: int = 1) -> tuple[float, ...]:
        """The counts since `reset` (divided by `per`), the idle collections, then both kinds' CPU ms."""
        return (*(self.n[k] / per for k in self.NAMES), self.idle / per, self.gc_ms / per, self.idle_ms / per)


def _counts(runs: list[tuple[float, ...]]) -> str:
    """`restyled 0/0/0, lines 71/71/71, layouts 1/1/1, full GCs 0/1 (12 ms)/0, idle GCs 0/0/1 (25 ms)`: each run's
    counts (an idle GC's time is not in the key's)."""
    parts = []
    for i, name in enumerate((*Counts.NAMES, "idle GCs")):
        if name.endswith("GCs"):
            ms = -2 if name == "full GCs" else -1
            each = [f"{r[i]:.3g}" + (f" ({r[ms]:.0f} ms)" if r[i] else "") for r in runs]
        else:
            each = [f"{r[i]:.3g}" for r in runs]
        parts.append(f"{name} {'/'.join(each)}")
    return ", ".join(parts)


KEYS = (("page down", "pagedown"), ("cursor down", "j"), ("jump to last op", "G"), ("next finding", "n"),
        ("flagged-only filter", "F"), ("filter off", "F"))


async def _app_timings(source: Path | Investigation, repeat: int, profile: bool = False) -> dict[str, list[Any]]:
    """Open an investigation in the app (from a file, or already in memory) and time what a user does with it.

    Keys are timed in CPU seconds of this process (the pilot's idle waits are not work);
    a key with no binding is measured too, as the floor every key pays. Every run's number is kept.
    """
    from ascend_tui.app.app import InvestigatorApp
    from ascend_tui.app.widgets.op_list import OpList

    from ascend_tui import readers

    label = "first screen (from file)" if isinstance(source, Path) else "first screen (in memory)"
    out: dict[str, list[Any]] = {label: [], "unbound key (floor)": [], "search 'mlp.act'": []}
    out.update({f"key: {name}": [] for name, _ in KEYS})
    read_end: list[float] = []
    plain_read = readers.read_with

    def timed_read(*args: object, **kwargs: object) -> object:
        result = plain_read(*args, **kwargs)  # type: ignore[arg-type]
        read_end.append(time.perf_counter())
        return result

    for _ in range(repeat):
        t0 = time.perf_counter()
        app = InvestigatorApp([str(source)] if isinstance(source, Path) else source)
        readers.read_with = timed_read  # type: ignore[assignment]
        try:
            async with app.run_test(size=SIZE) as pilot:
                if isinstance(source, Path):  # the whole read on screen, whether or not its advice is in
                    while not (read_end and app.inv is not None and (app.inv.profile is not None or not profile)
                               and len(app.main.query_one(OpList).shown)):
                        await pilot.pause(0.01)
                    shown = time.perf_counter()
                    out.setdefault("first screen beyond the read", []).append(shown - read_end[-1])
                    out.setdefault("advice: computing on screen", []).append(
                        float(app.inv.profile is not None and not any(f.check == "profile" for f in app.inv.findings)))
                await app.workers.wait_for_complete()
                await pilot.pause()
                ops = app.main.query_one(OpList)
                assert ops.rows is not None and len(ops.shown), "nothing on screen"
                out[label].append(time.perf_counter() - t0)
                if isinstance(source, Path):
                    out.setdefault("advice filled in beyond the read", []).append(time.perf_counter() - read_end[-1])
                    continue
                await pilot.pause(0.3)  # the start-up frames (the footer lays its new keys out twice) are no key's
                with Counts() as counts:
                    for name, key in (("unbound key (floor)", "w"), *((f"key: {n}", k) for n, k in KEYS)):
                        counts.reset()
                        c0 = time.process_time()
                        await pilot.press(key)
                        out[name].append(counts.key_cpu(c0))
                        out.setdefault(f"counts: {name}", []).append(counts.taken())
                    await pilot.press("slash")
                    counts.reset()
                    letters = []
                    for letter in "mlp.act":  # each its own key: a slow one is not averaged away
                        c0, idle_then = time.process_time(), counts.idle_ms
                        await pilot.press(letter)
                        letters.append(counts.key_cpu(c0, idle_then))
                    out["search 'mlp.act'"].append(sum(letters) / len(letters))
                    out.setdefault("search 'mlp.act': its slowest letter", []).append(max(letters))
                    out.setdefault("counts: search 'mlp.act'", []).append(counts.taken(len("mlp.act")))
                    if source.profile is not None:
                        await pilot.press("escape")  # the search closed
                        await _profile_keys(app, pilot, out, counts)
                out.setdefault("idle GCs over the run (count, CPU ms)", []).append(
                    (counts.total_idle, counts.total_idle_ms))
        finally:
            readers.read_with = plain_read  # type: ignore[assignment]
    return {k: v for k, v in out.items() if v}


PROFILE_KEYS = (("open profile view", "T"), ("page down", "pagedown"), ("cursor down", "j"), ("last row", "G"),
                ("sort", "s"), ("group by op", "v"), ("page down (by op)", "pagedown"), ("last row (by op)", "G"),
                ("sort (by op)", "s"), ("group by module", "v"), ("group by category", "v"), ("modules tab", "2"),
                ("timeline tab", "3"), ("strip: later", "l"), ("advice tab", "4"), ("page down (advice)", "pagedown"), ("ops tab", "1"))


async def _profile_keys(app: object, pilot: object, out: dict[str, list[Any]], counts: Counts) -> None:
    """CPU time and counts of each key in the profile view (`T`) on the opened investigation (then back to the
    graph)."""
    from ascend_tui.app.screens.profile import ProfileScreen

    while app.screen is not app.main:  # type: ignore[attr-defined]  # the story screen it may open on
        app.pop_screen()  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
    for name, key in PROFILE_KEYS:
        counts.reset()
        c0 = time.process_time()
        await pilot.press(key)  # type: ignore[attr-defined]
        out.setdefault(f"profile view: {name} ({key})", []).append(counts.key_cpu(c0))
        out.setdefault(f"counts: profile view: {name} ({key})", []).append(counts.taken())
        assert isinstance(app.screen, ProfileScreen), "the profile view did not open"  # type: ignore[attr-defined]
    await pilot.press("escape")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    counts.reset()
    c0 = time.process_time()  # back on the graph, the view again: the screen built above shows again
    await pilot.press("T")  # type: ignore[attr-defined]
    out.setdefault("profile view: open it again (T)", []).append(counts.key_cpu(c0))
    out.setdefault("counts: profile view: open it again (T)", []).append(counts.taken())
    assert isinstance(app.screen, ProfileScreen), "the profile view did not open again"  # type: ignore[attr-defined]
    await pilot.press("escape")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


def _widget_timings(inv: Investigation, repeat: int) -> dict[str, list[float]]:
    """The list's own work without the event loop: one screen of rows painted cold, one search, one filter."""
    from ascend_tui.app.widgets.op_list import OpRows

    paint: list[float] = []
    search: list[float] = []
    filt: list[float] = []
    build: list[float] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        rows = OpRows(inv)
        build.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        hay = rows.haystack()
        rows.select(flagged=False, search="mlp.act", module=None)
        search.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rows.select(flagged=True, search="", module=None)
        filt.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        mid = len(rows.ids) // 2
        for nid in rows.ids[mid:mid + SIZE[1]]:
            inv.badges(nid)
            inv.graph.node(nid)
        paint.append(time.perf_counter() - t0)
        del hay
    return {"row index": build, "first search (builds text)": search, "flagged select": filt,
            "rows of one screen": paint}


def measure(n: int, repeat: int, folder: Path) -> dict[str, list[float]]:
    t0 = time.perf_counter()
    inv = synthetic(n)
    built = time.perf_counter() - t0
    path = folder / f"synthetic-{n}.atui.json"
    inv.save(path)
    t0 = time.perf_counter()
    Investigation.load(path)
    loaded = time.perf_counter() - t0
    result = {"build investigation": [built], "load from file": [loaded]}
    result.update(_widget_timings(inv, repeat))
    result.update(asyncio.run(_app_timings(path, 1)))
    result.update(asyncio.run(_app_timings(inv, repeat)))
    return result


def write_trace(path: Path, kernels: int) -> int:
    """A trace_view.json of `kernels` device kernels on the Ascend Hardware process; returns its size."""
    import json

    names = ["aclnnMatmul_MatMulV3_MatMulV3", "aclnnAdd_AddAiCore_Add", "trans_TransData_12", "Conv2D1",
             "aclnnSoftmax_SoftmaxV2AiCore_SoftmaxV2", "hcom_allReduce__586_0_1", "MaxPoolWithArgmaxV1"]
    meta = [{"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "Ascend Hardware"}}]
    meta += [{"ph": "M", "name": "thread_name", "pid": 7, "tid": s, "args": {"name": f"Stream {s}"}} for s in range(4)]
    with path.open("w", encoding="utf-8") as fh:
        fh.write("[" + ", ".join(json.dumps(m) for m in meta))
        t = 1736408883704643212
        for i in range(kernels):
            name = f"{names[i % len(names)]}_{i % 997}"
            fh.write(f', {{"name": "{name}", "pid": 7, "tid": {i % 4}, "ts": "{t // 1000}.{t % 1000:03d}", '
                     f'"dur": {1 + i % 50 / 7:.3f}, "ph": "X", "args": {{"Task Type": "AI_CORE", "Physic Stream Id": '
                     f'{i % 4}, "Task Id": {i}}}}}')
            t += 2130
        fh.write("]")
    return path.stat().st_size


def measure_trace(kernels: int, repeat: int, folder: Path) -> None:
    """Read a trace of `kernels` kernels, open it in the app, press keys; print each number."""
    from ascend_tui.offline.open import open_path
    from ascend_tui.readers.profiler.trace import read_trace

    path = folder / "trace_view.json"
    size = write_trace(path, kernels)
    t0 = time.perf_counter()
    read_trace(path)
    read = time.perf_counter() - t0
    t0 = time.perf_counter()
    inv = open_path(path)
    opened = time.perf_counter() - t0
    first = asyncio.run(_app_timings(path, 1, profile=True))
    keys = asyncio.run(_app_timings(inv, repeat))
    screen = first["first screen (from file)"]
    print(f"trace of {kernels:,} kernels ({size / 1e6:.0f} MB): read {_fmt(read)}; open_path (read + investigation "
          f"+ advice) {_fmt(opened)}; in the app (wall, its own read included): first screen "
          f"{_runs(first['first screen beyond the read'])} after the app's read returned (goal < 1 s; "
          f"{'advice: computing' if first['advice: computing on screen'][0] else 'advice already in'} on it), "
          f"advice filled in {_runs(first['advice filled in beyond the read'])} after it, all done {_runs(screen)}")
    print(f"  every key, each of {repeat} app runs (CPU time incl. the event loop and painting, "
          f"less the full collections the app made once idle), then the median:")
    for key, value in keys.items():
        if key.startswith(("key:", "unbound", "search", "profile view")):
            worst = "" if max(value) < 0.05 else " ← over"
            counted = keys.get(f"counts: {key}")
            print(f"  {key}: {_runs(value)} (goal < 50 ms){worst}" + (f"; {_counts(counted)}" if counted else ""))
    idle = keys.get("idle GCs over the run (count, CPU ms)", [])
    print("  full collections the app made when idle (between keys, left out of the keys' times above), each run: "
          + ", ".join(f"{n} taking {ms:.0f} ms CPU in all" for n, ms in idle))


TIMELINE_KEYS = (("zoom in", "plus"), ("zoom in", "plus"), ("zoom out", "minus"), ("pan left", "h"),
                 ("pan right", "l"), ("next long kernel", "n"), ("next gap", "g"), ("next kernel", "right"),
                 ("next lane", "j"), ("zoom to kernel", "z"))


def timeline_kernels(n: int) -> object:
    """`n` kernels over two ranks: every 5th on a communication stream, every 50th 20x longer, a gap every 40th."""
    from ascend_tui.graph.profile import Codes, KernelTable

    per = n // 2
    i = np.arange(per)
    dur = np.where(i % 50 == 7, 200.0, 10.0)
    start = np.concatenate([[0.0], np.cumsum(dur + np.where(i % 40 == 39, 500.0, 2.0))[:-1]])
    comm = i % 5 == 4
    names = Codes(np.tile(np.where(comm, 0, 1 + i % 3), 2), ["hcom_allReduce_", "MatMul_0", "MatMul_1", "MatMul_2"])
    return KernelTable(2 * per, text={"name": names},
                       ints={"device": np.repeat(np.arange(2), per), "stream": np.tile(np.where(comm, 3, 1), 2),
                             "start_ns": np.tile((start * 1000).astype(np.int64), 2)},
                       floats={"dur_us": np.tile(dur, 2)})


FLOW_KEYS = (("flow to host op", "f"), ("next host op", "right"), ("flow to kernel", "f"), ("flow to host op", "f"),
             ("flow back", "f"))


def timeline_flows(table: object) -> tuple[object, object]:
    """`table` with a `host_op` column, and the host-call table it points into: each compute kernel launched by
    one host op on its rank's thread, 8 µs before it starts."""
    from ascend_tui.graph.profile import Codes, KernelTable

    t: KernelTable = table  # type: ignore[assignment]
    rows = np.flatnonzero(t.text["name"].codes != 0)  # code 0: the collectives
    rows = rows[np.lexsort((rows, t.start_ns[rows]))]
    host_op = np.full(len(t), -1, np.int64)
    host_op[rows] = np.arange(len(rows))
    calls = KernelTable(len(rows), text={"name": Codes(np.zeros(len(rows), np.int32), ["aten::mm"]),
                                         "thread": Codes(t.ints["device"][rows].astype(np.int32), ["Thread 1", "Thread 2"])},
                        ints={"start_ns": t.start_ns[rows] - 8000}, floats={"dur_us": np.full(len(rows), 3.0)})
    return KernelTable(len(t), t.text, t.ints.replace("host_op", host_op), t.floats), calls


async def _timeline_timings(n: int, repeat: int, flows: bool = False) -> tuple[float, dict[str, list[float]]]:
    """Seconds to open the timeline on `n` kernels, and CPU seconds of every timed key press."""
    from ascend_tui.app.app import InvestigatorApp
    from ascend_tui.app.screens.timeline import TimelineScreen
    from ascend_tui.graph.profile import Profile

    inv = synthetic(200)
    if flows:
        kernels, calls = timeline_flows(timeline_kernels(n))
        inv.profile = Profile("trace", kernels, host_calls=calls)  # type: ignore[arg-type]
    else:
        inv.profile = Profile("trace", timeline_kernels(n))  # type: ignore[arg-type]
    app = InvestigatorApp(inv)
    out: dict[str, list[float]] = {}
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        t0 = time.perf_counter()
        await pilot.press("L")
        await pilot.pause()
        opened = time.perf_counter() - t0
        assert isinstance(app.screen, TimelineScreen), "the timeline did not open"
        for _ in range(repeat):
            for name, key in TIMELINE_KEYS + (FLOW_KEYS if flows else ()):
                c0 = time.process_time()
                await pilot.press(key)
                out.setdefault(f"key: {name} ({key})", []).append(time.process_time() - c0)
    return opened, out


def measure_timeline(n: int, baseline: int, repeat: int, flows: bool = False) -> None:
    base_open, base = asyncio.run(_timeline_timings(baseline, repeat, flows))
    big_open, big = asyncio.run(_timeline_timings(n, repeat, flows))
    print(f"timeline view, terminal {SIZE[0]}x{SIZE[1]}; every press (CPU time incl. the event loop and painting)")
    print(f"  open (L): {baseline:,} kernels {_fmt(base_open)}, {n:,} kernels {_fmt(big_open)}")
    for key in big:
        worst = max(big[key]) / max(1e-9, max(base[key]))
        print(f"  {key}: {baseline:,}: {', '.join(_fmt(v) for v in base[key])} | {n:,}: "
              f"{', '.join(_fmt(v) for v in big[key])} | worst ratio {worst:.1f}x (goal < 50 ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--baseline", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trace-kernels", type=int, default=0, help="open a trace of this many kernels instead")
    parser.add_argument("--timeline-kernels", type=int, default=0,
                        help="time the timeline view's keys on this many synthetic kernels instead")
    parser.add_argument("--timeline-flows", action="store_true",
                        help="with --timeline-kernels: a launching host op per compute kernel, host lanes, the f key")
    args = parser.parse_args()
    asyncio.run(_app_timings(synthetic(200), 1))  # warm-up: imports, CSS parsing, first-run caches
    if args.timeline_kernels:
        measure_timeline(args.timeline_kernels, args.baseline, args.repeat, args.timeline_flows)
        return
    if args.trace_kernels:
        with tempfile.TemporaryDirectory() as tmp:
            measure_trace(args.trace_kernels, args.repeat, Path(tmp))
        return
    with tempfile.TemporaryDirectory() as tmp:
        base = measure(args.baseline, args.repeat, Path(tmp))
        big = measure(args.ops, args.repeat, Path(tmp))
    print(f"every run of {args.repeat} (median); terminal {SIZE[0]}x{SIZE[1]}; 'key:' rows are CPU time per key press "
          "including the event loop and painting the whole screen (goal < 50 ms); search is per typed character")
    for key in big:
        if key.startswith("counts: "):
            print(f"{key}: {args.baseline:,} ops {_counts(base[key])} | {args.ops:,} ops {_counts(big[key])}")
            continue
        b, g = base[key], big[key]
        if key.startswith("idle GCs"):  # (count, CPU ms) a run: no seconds to take a ratio of
            print(f"{key}: {args.baseline:,} ops {b} | {args.ops:,} ops {g}")
            continue
        ratio = _median(g) / _median(b) if _median(b) > 0 else float("inf")
        print(f"{key}: {args.baseline:,} ops {_runs(b)} | {args.ops:,} ops {_runs(g)} | median ratio {ratio:.1f}x")


def _fmt(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


if __name__ == "__main__":
    main()
