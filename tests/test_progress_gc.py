"""`paused_gc`: what a big load builds skips the young generations, and the collector still works afterwards."""

from __future__ import annotations

import gc

from ascend_tui.progress import paused_gc


class _Node:
    def __init__(self) -> None:
        self.other: object = None


def _in_generation(obj: object, generation: int) -> bool:
    return any(o is obj for o in gc.get_objects(generation))


def test_objects_built_while_paused_land_in_the_oldest_generation_and_cycles_are_still_collected() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        kept = [_Node() for _ in range(1000)]
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # a cycle that becomes garbage after the load
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert not _in_generation(kept[0], 0) and not _in_generation(kept[0], 1)  # not scanned as young
    assert _in_generation(kept[0], 2)
    del a, b
    assert gc.collect() >= 2  # the full collection still finds the cycle


def test_objects_someone_else_froze_stay_frozen_and_a_disabled_collector_stays_off() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with paused_gc():
            pass
        assert gc.get_freeze_count() == frozen and gc.isenabled()
    finally:
        gc.unfreeze()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
