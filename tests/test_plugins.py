"""Plug-ins: a throwaway installed distribution adds a reader, a live check and a view through entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PLUGIN = '''
"""A site-specific format: one operator name per line; a line ending in '!' overflowed."""
from pathlib import Path

from ascend_tui.readers.base import FunctionReader


def sniff(path: Path) -> bool:
    return path.is_file() and path.suffix == ".opslist"


def load(path: Path, progress=None, cancel=None):
    from ascend_tui.evidence import Finding
    from ascend_tui.graph.opgraph import OpGraph, OpNode
    from ascend_tui.investigation import Investigation, RunInfo

    graph = OpGraph(path.name)
    findings = []
    for i, line in enumerate(path.read_text().split()):
        name = line.rstrip("!")
        graph.add_node(OpNode(id=name, op_type="site_op", module="", index=i))
        if line.endswith("!"):
            findings.append(Finding("overflow", "inf", "error", name, "site_op", "", i, f"{name} overflowed"))
    return Investigation(graph, findings=findings, run=RunInfo(target=str(path), source="ops list"))


READER = FunctionReader("ops list", sniff, load)


class SiteCheck:
    """A live check that observes nothing and adds nothing (enough to be listed, loaded and run)."""

    name = "sitecheck"
    needs_reference = False

    def observers(self, ctx, run):
        return []

    def run(self, ctx, inv):
        pass
'''

VIEW = '''
from ascend_tui.app.screens.check_view import CheckView


class SiteView(CheckView):
    VIEW_ID = "siteview"
    TITLE = "Site"
    KEY = "9"
    CHECK = "overflow"
'''


@pytest.fixture()
def installed(tmp_path: Path) -> Path:
    """A folder that, on sys.path, is an installed distribution `atui-site-plugin` with three entry points."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "atui_site_plugin.py").write_text(textwrap.dedent(PLUGIN))
    (site / "atui_site_view.py").write_text(textwrap.dedent(VIEW))
    info = site / "atui_site_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: atui-site-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[ascend_tui.readers]\nops list = atui_site_plugin:READER\n\n"
                                           "[ascend_tui.checks]\nsitecheck = atui_site_plugin:SiteCheck\n\n"
                                           "[ascend_tui.views]\nsiteview = atui_site_view:SiteView\n")
    return site


def _env(site: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)])}


def test_check_reads_a_file_of_a_plugin_format(installed: Path, tmp_path: Path) -> None:
    path = tmp_path / "run.opslist"
    path.write_text("embed\nmatmul!\nsoftmax\n")
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "ascend_tui", "check", str(path), "--json", str(out)],
                          capture_output=True, text=True, timeout=120, env=_env(installed), cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert "matmul overflowed" in proc.stdout
    report = json.loads(out.read_text())
    assert [f["node"] for f in report["findings"]] == ["matmul"]
    assert report["target"] == str(path) and report["graph"]["nodes"] == 3


def test_plugins_are_listed_by_name_without_importing_them(installed: Path) -> None:
    code = ("import sys\n"
            "from ascend_tui.offline.open import all_readers\n"
            "from ascend_tui.live.runner import available_checks\n"
            "from ascend_tui.app.views import plugin_view_ids\n"
            "print([r.name for r in all_readers()][-1], available_checks()[-1], plugin_view_ids())\n"
            "print(sorted(m for m in sys.modules if m.startswith('atui_site')))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=_env(installed))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["ops list sitecheck ('siteview',)", "[]"]


def test_a_plugin_check_and_view_load_when_asked_for(installed: Path) -> None:
    code = ("from ascend_tui.live.runner import resolve_checks\n"
            "from ascend_tui.app.views import all_views, view_by_id\n"
            "(check,) = resolve_checks(('sitecheck',))\n"
            "print(type(check).__name__, view_by_id('siteview').TITLE, all_views()[-1].__name__)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=_env(installed))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "SiteCheck Site SiteView"


def test_a_broken_plugin_is_one_clear_line(installed: Path, tmp_path: Path) -> None:
    (installed / "atui_site_plugin.py").write_text("raise RuntimeError('half installed')\n")
    path = tmp_path / "run.opslist"
    path.write_text("embed\n")
    proc = subprocess.run([sys.executable, "-m", "ascend_tui", "check", str(path)], capture_output=True, text=True,
                          timeout=120, env=_env(installed), cwd=tmp_path)
    assert proc.returncode == 2
    assert "plug-in 'ops list'" in proc.stderr and "half installed" in proc.stderr


def test_a_plugin_whose_sniff_raises_is_one_clear_line(installed: Path, tmp_path: Path) -> None:
    (installed / "atui_site_plugin.py").write_text(
        "from ascend_tui.readers.base import FunctionReader\n"
        "def sniff(path):\n    raise ValueError('bad sniff')\n"
        "READER = FunctionReader('ops list', sniff, lambda path, **_: None)\n")
    path = tmp_path / "anything.bin"
    path.write_bytes(b"\x00\x01")
    proc = subprocess.run([sys.executable, "-m", "ascend_tui", "check", str(path)], capture_output=True, text=True,
                          timeout=120, env=_env(installed), cwd=tmp_path)
    assert proc.returncode == 2
    assert "anything.bin" in proc.stderr and "'ops list' plug-in's sniff failed (ValueError: bad sniff)" in proc.stderr
