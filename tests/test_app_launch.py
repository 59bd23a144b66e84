"""Entry points: `ascend-tui open` on bad paths, `serve` on localhost only, and the bundled demo run live."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from ascend_tui.app import launch
from ascend_tui.cli.main import main
from ascend_tui.errors import InputError


def test_open_on_a_missing_path_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.atui.json"
    assert main(["open", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err == f"ascend-tui: error: {missing}: no such file or folder\n"


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "::1", "[::1]", "127.0.0.2"])
def test_loopback_hosts_are_accepted(host: str) -> None:
    assert launch.is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.4", "example.com", ""])
def test_serve_refuses_to_listen_beyond_this_machine(host: str) -> None:
    assert not launch.is_loopback(host)
    with pytest.raises(InputError, match="serve listens on localhost only"):
        launch.serve([], host=host, port=8000)


def test_serve_runs_the_same_app_for_each_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import textual_serve.server

    started: dict[str, Any] = {}

    class FakeServer:
        def __init__(self, command: str, host: str, port: int, title: str) -> None:
            started.update(command=command, host=host, port=port, title=title)

        def serve(self) -> None:
            started["served"] = True

    monkeypatch.setattr(textual_serve.server, "Server", FakeServer)
    inv = tmp_path / "a b.atui.json"
    inv.write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert launch.serve(["a b.atui.json"], host="localhost", port=8123) == 0
    assert started["served"] and started["host"] == "localhost" and started["port"] == 8123
    assert shlex.split(started["command"]) == [sys.executable, "-m", "ascend_tui", "open", str(inv)]


def test_the_demo_is_bundled() -> None:
    path = launch.demo_path()
    assert path.name == "demo.py" and "def build()" in path.read_text()


@pytest.mark.live
async def test_demo_runs_live_and_fills_every_view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ascend_tui.app.app import InvestigatorApp
    from ascend_tui.app.screens.memory import MemoryScreen
    from ascend_tui.app.screens.overflow import OverflowScreen
    from ascend_tui.app.workers import available_checks

    assert not set(launch.DEMO_CHECKS) - set(available_checks()), "the demo's live checks are not all available"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    app = InvestigatorApp([str(launch.demo_path())], theme="textual-dark", live=launch.demo_options(),
                          export_dir=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        inv = app.inv
        assert inv is not None, [n.message for n in app._notifications]
        kinds = {(f.check, f.kind) for f in inv.findings}
        assert {("overflow", "inf"), ("memory", "out_of_bounds"), ("memory", "leak")} <= kinds
        origin = next(f.node for f in inv.findings if f.kind == "inf")
        # the NaN at the last op leads back to where the Inf first appeared
        await pilot.press("G")
        last = app.main.ops.current
        assert last is not None and inv.findings_for(last)
        await pilot.press("r")
        assert app.main.ops.current == origin
        # pressed again, r walks the origin's amplification chain one hop at a time towards the input
        rc = inv.trace_root_cause(origin)
        assert rc is not None
        hops = [c.node for c in rc.chain if c.node in inv.graph and not inv.graph.node(c.node).is_placeholder]
        assert hops[0] == origin and len(hops) >= 3
        for hop in hops[1:3]:
            await pilot.press("r")
            assert app.main.ops.current == hop
        await pilot.press("b", "b")
        assert app.main.ops.current == origin
        # each view opens on its evidence and hands an operator back to the graph
        await pilot.press("o")
        assert isinstance(app.screen, OverflowScreen)
        await pilot.press("escape")
        await pilot.press("m")
        assert isinstance(app.screen, MemoryScreen)
        await pilot.press("enter")
        assert app.screen is app.main
        assert app.main.ops.current in {f.node for f in inv.findings if f.check == "memory"}
