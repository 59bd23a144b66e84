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


def investigation(n: int = 400) -> Any:
    inv = overflow_investigation()
    ops = tuple(inv.graph.execution_order()[:3])
    inv.profile = Profile("trace", kernels(n, ops=ops))
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
