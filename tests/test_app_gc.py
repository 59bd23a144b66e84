"""The app's full garbage collections: between keys when the app is idle, never set off inside a key, and cyclic
garbage still collected while it runs (`progress.IdleCollector`, held by the home screen)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
from app_fixtures import to_home, wide_investigation

from ascend_tui.app.app import InvestigatorApp
from ascend_tui.app.screens.main import IDLE_GC_CHECK
from ascend_tui.progress import IdleCollector


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))


class _Cyclic:
    def __init__(self) -> None:
        self.me = self


def _old_cycle() -> weakref.ref[_Cyclic]:
    """A cycle that reached the oldest generation, then became garbage: only a full pass frees it."""
    obj = _Cyclic()
    gc.collect(1)  # survivors of the young generations move to the oldest
    ref = weakref.ref(obj)
    del obj
    gc.collect(1)
    assert ref() is not None, "a young-generation pass freed a cycle of the oldest generation"
    return ref


def _allocate_until_due() -> None:
    """What many keys allocate: enough middle-generation passes, set off by allocations, to make a full one due."""
    kept: list[list[int]] = []
    for _ in range(200):
        if gc.get_count()[2] >= IdleCollector.DUE:
            return
        kept.extend([i] for i in range(7_000))
    raise AssertionError(f"allocations set off no middle-generation passes: {gc.get_count()}")


def test_a_held_collector_runs_full_passes_only_when_due_and_quiet_and_gives_the_thresholds_back() -> None:
    before = gc.get_threshold()
    collector = IdleCollector()
    assert not collector.collect_if_due(lambda: True)  # not held: nothing
    collector.hold()
    try:
        assert gc.get_threshold() == (*before[:2], max(before[2], IdleCollector.BACKSTOP))
        ref = _old_cycle()
        gc.collect(1)  # the count of middle-generation passes starts again from a full pass only
        while gc.get_count()[2] < IdleCollector.DUE:
            gc.collect(1)
        assert ref() is not None
        assert not collector.collect_if_due(lambda: False)  # due, but something waits: not now
        assert ref() is not None and collector.runs == 0
        assert collector.collect_if_due(lambda: True)
        assert ref() is None and collector.runs == 1 and collector.cpu_s >= 0
        assert gc.get_count()[2] == 0
        assert not collector.collect_if_due(lambda: True)  # just collected: not due
    finally:
        collector.release()
    assert gc.get_threshold() == before
    collector.release()  # twice is harmless
    assert gc.get_threshold() == before


async def test_cyclic_garbage_made_while_the_app_runs_is_collected_when_it_is_idle_and_never_inside_a_key(
        tmp_path: Path) -> None:
    before = gc.get_threshold()
    app = InvestigatorApp(wide_investigation(300), theme="textual-dark", export_dir=tmp_path)
    full: list[bool] = []  # each full pass while the app runs: made by the idle collector?

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(IdleCollector.collecting)

    async with app.run_test(size=(120, 40)) as pilot:
        await to_home(app, pilot)  # the prepare worker's own collection (HeldFreeze) is over
        assert gc.get_threshold()[2] >= IdleCollector.BACKSTOP
        gc.callbacks.append(watch)
        try:
            for _round in range(2):
                ref = _old_cycle()
                _allocate_until_due()
                for key in ("j", "pagedown", "G", "home"):  # keys handled while a full pass is due
                    await pilot.press(key)
                for idle_period in range(50):
                    if ref() is None:
                        break
                    await pilot.pause(IDLE_GC_CHECK)
                assert ref() is None, f"the cycle outlived {idle_period + 1} idle periods"
                assert gc.get_count()[2] < IdleCollector.DUE
        finally:
            gc.callbacks.remove(watch)
        assert len(full) >= 2 and all(full), f"full passes not made by the idle collector: {full}"
    assert gc.get_threshold() == before  # the process goes on with its collector as it was
