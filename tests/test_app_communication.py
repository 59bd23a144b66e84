"""The communication view driven with keys: collectives with their wait/transit split, the rank × step heatmap
(Enter on the slow rank opens its kernels), the link matrix with the planted slow link; a snapshot at 80x24."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.app import App

from ascend_tui.app.config import load_themes, variable_defaults
from ascend_tui.app.screens.communication import CommunicationScreen, split_bar
from ascend_tui.app.screens.profile import ProfileScreen
from ascend_tui.app.screens.row_table import RowTable
from ascend_tui.investigation import Investigation
from ascend_tui.offline.open import open_path
from ascend_tui.offline.profile_cluster import load_cluster
from tests.conftest import FIXTURES
from tests.synthetic_cluster import make_cluster


@pytest.fixture(autouse=True)
def _fixed_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Investigation:
    root = make_cluster(tmp_path_factory.mktemp("c") / "job", 6, slow_rank=4, slow_link=(1, 2))
    inv = load_cluster(root, workers=1)
    inv.run.target = "job"
    return inv


class Host(App[None]):
    def __init__(self, inv: Investigation) -> None:
        super().__init__()
        self.inv = inv
        self.results: list[str | None] = []

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return variable_defaults(self.current_theme)

    def on_mount(self) -> None:
        for theme in load_themes():
            self.register_theme(theme)
        self.theme = "ascend-dark"
        self.push_screen(CommunicationScreen(self.inv), self.results.append)


def table(app: App[Any], name: str) -> RowTable:
    return app.screen.query_one(f"#{name}", RowTable)


def test_split_bar() -> None:
    assert split_bar(6, 2, 2) == "▓▓▓▓▓▓██░░" and split_bar(0, 0, 0) == " " * 10


def test_offered_for_profiles_with_communication_only(cluster: Investigation) -> None:
    assert CommunicationScreen.available(cluster)
    assert CommunicationScreen.available(open_path(FIXTURES / "profiler" / "level2_2025-11"))
    assert not CommunicationScreen.available(open_path(FIXTURES / "profiler" / "level0_2025-01"))


async def test_collectives_heatmap_links_and_the_jump_to_the_slow_ranks_kernels(cluster: Investigation) -> None:
    app = Host(cluster)
    async with app.run_test(size=(160, 40)) as pilot:
        ops = table(app, "ops-table")
        starts = [r.data[0] for r in ops.rows]
        assert starts == sorted(starts) and len(ops.rows) == 6 * 15
        waits = {r.data[1]: r.data[7] for r in ops.rows if r.data[2] == "hcom_allReduce__170_1_1"}
        assert waits[4] == 0.0 and all(waits[r] > 0.1 for r in (0, 1, 2, 3, 5))  # the slow rank waits for nobody
        await pilot.press("2")
        ranks = table(app, "ranks-table")
        assert [r.cells[0] for r in ranks.rows] == [str(r) for r in range(6)]
        assert ranks.rows[4].tone == "bad" and all(r.tone == "" for i, r in enumerate(ranks.rows) if i != 4)
        await pilot.press("v")
        assert ranks.columns[5].label == "computing @13"
        await pilot.press("3")
        links = table(app, "links-table")
        assert [c.label for c in links.columns] == ["src \\ dst", *map(str, range(6))]
        assert links.rows[1].cell_tones[3] == "bad" and links.rows[1].cells[3] == "4.8"
        await pilot.press("2")
        ranks.move_to(4)
        await pilot.press("enter")
        assert isinstance(app.screen, ProfileScreen)
        kernels = app.screen.query_one("#ops-table", RowTable)
        assert kernels.columns[0].label == "op" and "FlashAttentionScore" in kernels.rows[1].cells[0] + \
            kernels.rows[0].cells[0] + kernels.rows[2].cells[0]
        await pilot.press("enter")
        assert app.results and app.results[0] in app.inv.graph


def test_snapshot_communication_view_80x24(snap_compare: Any, cluster: Investigation, tmp_path: Path) -> None:
    from ascend_tui.app.app import InvestigatorApp

    assert snap_compare(InvestigatorApp(cluster, theme="ascend-dark", export_dir=tmp_path), press=["W"],
                        terminal_size=(80, 24))
