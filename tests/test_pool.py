"""`ascend_tui.pool`: one way to fan work out, in order, inline, on processes or on a dask scheduler."""

from __future__ import annotations

import sys
import threading

import pytest

from ascend_tui import pool
from ascend_tui.errors import Cancelled, InputError


def square_and_pid(x: int) -> tuple[int, int]:
    import os

    return x * x, os.getpid()


def test_inline_and_on_processes_give_the_same_results_in_order() -> None:
    import os

    items = list(range(12))
    inline = list(pool.run(square_and_pid, items, workers=1))
    spread = list(pool.run(square_and_pid, items, workers=2))
    assert [r for r, _ in inline] == [r for r, _ in spread] == [x * x for x in items]
    assert {p for _, p in inline} == {os.getpid()}
    assert os.getpid() not in {p for _, p in spread}


def test_a_dask_scheduler_runs_the_items_in_order() -> None:
    import distributed
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as lc:
        got = list(pool.run(square_and_pid, list(range(8)), scheduler=lc.scheduler_address))
    assert [r for r, _ in got] == [x * x for x in range(8)]


def test_cancel_stops_the_run() -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled, match="the test was cancelled"):
        list(pool.run(square_and_pid, [1, 2], workers=1, cancel=cancel, what="the test was cancelled"))


def test_without_dask_the_message_names_the_cluster_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(InputError, match=r"pip install 'ascend-tui\[cluster\]'"):
        list(pool.run(square_and_pid, [1], scheduler="tcp://127.0.0.1:1"))


def test_an_unreachable_scheduler_is_one_clear_line() -> None:
    with pytest.raises(InputError, match="cannot reach the dask scheduler"):
        list(pool.run(square_and_pid, [1], scheduler="tcp://127.0.0.1:9"))


def test_the_scheduler_comes_from_the_environment_when_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pool.SCHEDULER_ENV, "tcp://h:1")
    assert pool.scheduler_from(None) == "tcp://h:1" and pool.scheduler_from("tcp://x:2") == "tcp://x:2"
    monkeypatch.delenv(pool.SCHEDULER_ENV)
    assert pool.scheduler_from(None) is None


def test_no_other_module_builds_its_own_pool() -> None:
    """Every fan-out goes through `pool` (the issue found the process-or-dask code written twice)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "ascend_tui"
    users = [str(p.relative_to(root)) for p in root.rglob("*.py")
             if p.name != "pool.py" and ("ProcessPoolExecutor" in p.read_text() or "Client(" in p.read_text())]
    assert users == []
