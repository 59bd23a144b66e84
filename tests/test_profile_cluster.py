"""Cluster profiles: per-rank step times, the slow rank and its stage, read by a process pool or dask."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ascend_tui.cli.main import main
from ascend_tui.offline.open import kind_of, open_path
from ascend_tui.offline.profile_cluster import load_cluster
from tests.conftest import FIXTURES

PROF = FIXTURES / "profiler"


@pytest.fixture
def cluster_dir(tmp_path: Path) -> Path:
    """Two ranks: the Level1 capture as rank 0 (its profiler_info says so) and the Level0 one as rank 1."""
    root = tmp_path / "job"
    shutil.copytree(PROF / "level1_2025-01", root / "rank0_ascend_pt")
    shutil.copytree(PROF / "level0_2025-01", root / "rank1_ascend_pt")
    return root


def test_msprof_analyze_cluster_csv() -> None:
    folder = PROF / "msprof_analyze"
    assert kind_of(folder) == "cluster profile"
    inv = open_path(folder)
    c = inv.profile.extra["cluster"]
    assert len(c["ranks"]) == 16 and (c["slow_rank"], c["slow_stage"]) == (13, "free")
    slow = next(f for f in inv.findings if f.kind == "slow_rank")
    assert slow.message.startswith("rank 13 is the slow rank: free")


def test_rank_folders_in_a_process_pool(cluster_dir: Path) -> None:
    inv = load_cluster(cluster_dir, workers=2)
    c = inv.profile.extra["cluster"]
    assert [r["rank"] for r in c["ranks"]] == [0, 1]
    # rank 1 (Level0 run): computing 8.83 ms + free 25.9 ms vs rank 0: 8.87 + 25.7, 0.1% of a 137 ms step apart:
    # no rank holds the others back, and no slow_rank finding says one does
    assert c["slow_rank"] == -1 and not [f for f in inv.findings if f.kind == "slow_rank"]
    # the tables show rank 0's kernel rows (the first rank that has any); the count is the cluster's
    assert c["shown_rank"] == 0 and inv.profile.kernels.n == 20 and set(c["per_rank"]) == {0, 1}
    assert c["kernels"] == sum(r["kernels"] for r in c["per_rank"].values()) == inv.run.extra["kernels"]


def test_rank_folders_on_dask(cluster_dir: Path) -> None:
    import dask.distributed as distributed  # in the test extra: a missing one fails the test
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as lc:
        inv = load_cluster(cluster_dir, scheduler=lc.scheduler_address)
    assert [r["rank"] for r in inv.profile.extra["cluster"]["ranks"]] == [0, 1]


def test_cluster_cli(cluster_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", str(PROF / "msprof_analyze"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "<- slow" in out and "slow rank 13: free" in out
