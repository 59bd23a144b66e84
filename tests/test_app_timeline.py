"""The timeline view (`L`): lanes per rank and stream, zoom and pan by keyboard, Enter focuses the kernel's op."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from textual.app import App

from ascend_tui.app.app import InvestigatorApp
from ascend_tui.app.config import load_themes, variable_defaults
from ascend_tui.app.screens.timeline import TimelineCanvas, TimelineScreen, build_lanes
from ascend_tui.graph.profile import Codes, KernelTable, Profile
from tests.app_fixtures import overflow_investigation


@pytest.fixture(autouse=True)
def _fixed_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))


def kernels(n: int, ranks: int = 2, ops: tuple[str, ...] = ("a", "b", "c")) -> KernelTable:
    """`n` kernels a rank; every 5th on a communication stream, every 50th 20x longer, a gap every 40th."""
    i = np.arange(n)
    dur = np.where(i % 50 == 7, 200.0, 10.0)
    step = dur + np.where(i % 40 == 39, 500.0, 2.0)
    start = np.concatenate([[0.0], np.cumsum(step)[:-1]])
    comm = i % 5 == 4
    names = np.where(comm, "hcom_allReduce_", np.char.add("MatMul_", (i % 3).astype(str)))
    nodes = np.where(comm, "", np.array(ops)[i % 3])
    tile = lambda a: np.concatenate([a] * ranks)  # noqa: E731
    return KernelTable(n * ranks, text={"name": Codes.of(tile(names).tolist()), "node": Codes.of(tile(nodes).tolist())},
                       ints={"device": np.repeat(np.arange(ranks), n), "stream": tile(np.where(comm, 3, 1)),
                             "start_ns": tile((start * 1000).astype(np.int64))},
                       floats={"dur_us": tile(dur)})


def with_host_calls(table: KernelTable, ranks: int = 2) -> tuple[KernelTable, KernelTable]:
    """The kernels with a `host_op` column and the host-call table it points into: every compute kernel launched by
    an `aten::mm` op on its rank's thread that ends 5 µs before the kernel starts; collectives by none."""
    names = table.text["name"]
    compute = np.array([not v.startswith("hcom") for v in names.values])[names.codes]
    rows = np.flatnonzero(compute)
    rows = rows[np.lexsort((rows, table.start_ns[rows]))]  # the host-call table is in start order
    starts = table.start_ns[rows] - 8000
    host_op = np.full(len(table), -1, np.int64)
    host_op[rows] = np.arange(len(rows))
    threads = table.ints["device"][rows]
    calls = KernelTable(len(rows), text={"name": Codes.of(["aten::mm"] * len(rows)),
                                         "thread": Codes(threads.astype(np.int32), [f"Thread {100 + r}" for r in range(ranks)])},
                        ints={"start_ns": starts}, floats={"dur_us": np.full(len(rows), 3.0)})
    linked = KernelTable(len(table), table.text, table.ints.replace("host_op", host_op), table.floats)
    return linked, calls


def investigation(n: int = 400, flows: bool = True) -> Any:
    inv = overflow_investigation()
    ops = tuple(inv.graph.execution_order()[:3])
    table = kernels(n, ops=ops)
    if flows:
        table, calls = with_host_calls(table)
        inv.profile = Profile("trace", table, host_calls=calls)
    else:
        inv.profile = Profile("trace", table)
    return inv


def test_lanes_per_rank_and_stream_with_communication_marked() -> None:
    lanes = build_lanes(kernels(100))
    assert [lane.label for lane in lanes] == ["r0 stream 1", "r0 comm 3", "r1 stream 1", "r1 comm 3"]
    assert [len(lane.rows) for lane in lanes] == [80, 20, 80, 20]
    assert all(np.all(np.diff(lane.start) >= 0) for lane in lanes)


class Host(App[None]):
    def __init__(self, inv: Any) -> None:
        super().__init__()
        self.inv = inv
        self.results: list[str | None] = []

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return variable_defaults(self.current_theme)

    def on_mount(self) -> None:
        for theme in load_themes():
            self.register_theme(theme)
        self.theme = "ascend-dark"
        self.push_screen(TimelineScreen(self.inv), self.results.append)


async def test_zoom_to_one_kernel_and_follow_it_to_its_operator() -> None:
    inv = investigation()
    app = Host(inv)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        canvas = app.screen.query_one(TimelineCanvas)
        whole = canvas.span
        await pilot.press("n")  # the next long kernel in the compute lane
        row = canvas.cursor_row
        assert row is not None and canvas.kernels.dur_us[row] == 200.0
        for _ in range(12):
            await pilot.press("plus")
        assert canvas.span < whole / 1000
        start = canvas.kernels.start_ns[row] / 1000
        assert canvas.t0 <= start <= canvas.t0 + canvas.span  # zoomed around the kernel
        line = "".join(s.text for s in canvas.render_line(1))
        assert "█" in line  # the kernel fills the window's middle
        await pilot.press("h", "l", "l")
        await pilot.press("g")  # the next idle gap: the cursor lands on the kernel after it
        after = canvas.cursor_row
        assert after is not None and after != row
        status = str(app.screen.query_one("#timeline-status").render())
        assert "MatMul_" in status or "hcom" in status
        await pilot.press("enter")
        await pilot.pause()
        assert app.results == [canvas.kernels.label("node", after)]


async def test_the_key_opens_it_from_the_graph_and_enter_focuses_the_op(tmp_path: Path) -> None:
    inv = investigation()
    app = InvestigatorApp(inv, theme="ascend-dark", export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("L")
        await pilot.pause()
        assert isinstance(app.screen, TimelineScreen)
        await pilot.press("right")  # the second kernel: operator "b"
        node = app.screen.canvas.kernels.label("node", app.screen.canvas.cursor_row)
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is app.main and app.main.ops.current == node


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_timeline_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    async def keys(pilot: Any) -> None:
        await pilot.pause()
        await pilot.press("n", "plus", "plus", "plus")
        await pilot.pause()

    assert snap_compare(Host(investigation()), terminal_size=size, run_before=keys)


async def test_a_memory_lane_follows_the_samples_on_the_kernels_clock() -> None:
    from ascend_tui.evidence import MemorySample

    inv = investigation()
    end = float(inv.profile.kernels.start_ns.max()) / 1000
    inv.memory_samples = [MemorySample(t, t * 10.0, t * 20.0) for t in np.linspace(0, end, 50).tolist()]
    app = Host(inv)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        canvas = app.screen.query_one(TimelineCanvas)
        line = "".join(s.text for s in canvas.render_line(len(canvas.lanes) + 1))
        assert line.startswith("mem ")
        curve = line[15:]
        assert curve.rstrip().endswith("█") and any(c in curve for c in "▁▂▃")  # rises to the peak at the end


def test_host_lanes_per_thread_under_the_device_lanes() -> None:
    inv = investigation(100)
    canvas = TimelineCanvas(inv.profile.kernels, calls=inv.profile.host_calls)
    assert [lane.label for lane in canvas.lanes] == ["r0 stream 1", "r0 comm 3", "r1 stream 1", "r1 comm 3",
                                                     "host 100", "host 101"]
    assert [len(lane.rows) for lane in canvas.lanes[4:]] == [80, 80] and all(lane.host for lane in canvas.lanes[4:])
    plain = TimelineCanvas(investigation(100, flows=False).profile.kernels)
    assert len(plain.lanes) == 4  # no host-call table: no host lanes


async def test_zoom_to_one_kernel_and_follow_its_flow_to_the_host_op() -> None:
    inv = investigation()
    app = Host(inv)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        canvas = app.screen.query_one(TimelineCanvas)
        await pilot.press("n", "z")  # the next long kernel, zoomed to it alone
        row = canvas.cursor_row
        assert row is not None and canvas.kernels.dur_us[row] == 200.0 and canvas.span == 800.0
        call = int(canvas.kernels.ints["host_op"][row])
        assert call >= 0 and "from aten::mm (f)" in str(app.screen.query_one("#timeline-status").render())
        host_lane = next(i for i, lane in enumerate(canvas.lanes) if lane.host and call in lane.rows)
        shaded = "".join(s.text for s in canvas.render_line(1 + host_lane))
        assert shaded.count("▒") == 1  # the flow's other end is marked on the host lane, 8 µs before the kernel
        await pilot.press("f")  # follow the flow: the cursor goes to the host op that launched the kernel
        assert canvas.on_host and canvas.cursor_call == call and canvas.lane == host_lane
        start = canvas.calls.start_ns[call] / 1000
        assert canvas.t0 <= start <= canvas.t0 + canvas.span
        status = str(app.screen.query_one("#timeline-status").render())
        assert "host aten::mm" in status and "Thread 10" in status and "launched 1 kernel (f)" in status
        kernel_lane = next(i for i, lane in enumerate(canvas.lanes) if not lane.host and row in lane.rows)
        assert "▒" in "".join(s.text for s in canvas.render_line(1 + kernel_lane))  # and its kernel on the device
        await pilot.press("f")  # and back to the kernel
        assert canvas.cursor_row == row
        await pilot.press("enter")
        await pilot.pause()
        assert app.results == [canvas.kernels.label("node", row)]


async def test_a_kernel_no_flow_reaches_says_so() -> None:
    app = Host(investigation())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        canvas = app.screen.query_one(TimelineCanvas)
        await pilot.press("j")  # the communication lane: collectives have no launching host op here
        assert canvas.cursor_row is not None and canvas.linked_call() is None
        await pilot.press("f")
        await pilot.pause()
        assert canvas.cursor_row is not None and not canvas.on_host
        assert any("no flow leads" in str(n.message) for n in app._notifications)


async def test_selection_is_shared_with_the_graph_and_profile_views(tmp_path: Path) -> None:
    inv = investigation()
    ops = inv.graph.execution_order()[:3]
    app = InvestigatorApp(inv, theme="ascend-dark", export_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        app.main.go(ops[2])  # the graph view's cursor on the third operator
        await pilot.press("L")
        await pilot.pause()
        canvas = app.screen.canvas
        row = canvas.cursor_row
        assert row is not None and canvas.kernels.label("node", row) == ops[2]
        first = canvas.kernels.start_ns[canvas.kernels.text["node"].codes == canvas.kernels.text["node"].code(ops[2])]
        assert canvas.kernels.start_ns[row] == first.min()  # its first kernel
        await pilot.press("right")  # the next kernel in the lane: another operator; the shared cursor moves along
        moved = canvas.kernels.label("node", canvas.cursor_row)
        assert moved != ops[2] and app.main.nav.focused == moved
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.main and app.main.ops.current == moved
        await pilot.press("b")  # the way back leads to where the user was before the timeline
        await pilot.pause()
        assert app.main.ops.current == ops[2]


async def test_the_profile_tables_row_opens_the_timeline_on_its_kernels_of_a_real_trace(tmp_path: Path) -> None:
    from ascend_tui.app.screens.row_table import RowTable
    from ascend_tui.offline.open import open_path
    from tests.conftest import FIXTURES

    inv = open_path(FIXTURES / "profiler" / "level1_2025-01" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    app = InvestigatorApp(inv, theme="ascend-dark", export_dir=tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        await pilot.press("T", "v")  # the profile view, grouped by kernel name: each row is an operator
        await pilot.pause()
        table = next(t for t in app.screen.query(RowTable) if t.has_focus)
        index = next(i for i, r in enumerate(table.rows) if r.key and r.key.startswith("Conv2D"))
        table.move_to(index)
        chosen = table.rows[index].key
        await pilot.press("L")
        await pilot.pause()
        assert isinstance(app.screen, TimelineScreen)
        canvas = app.screen.canvas
        assert canvas.kernels.label("name", canvas.cursor_row) == chosen
        await pilot.press("f")  # the real trace's async_npu flow: Conv2D1 was launched by the host op Conv2D
        assert canvas.on_host and canvas.calls.label("name", canvas.cursor_call) == "Conv2D"
        assert canvas.operator() == chosen  # the host op stands for the operator of its kernel
        await pilot.press("escape")
        await pilot.pause()
        assert app.main.nav.focused == chosen
