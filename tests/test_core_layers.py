"""The core stays usable without the app and without torch: offline paths import neither."""

from __future__ import annotations

import subprocess
import sys

CORE = ["ascend_tui", "ascend_tui.graph", "ascend_tui.graph.trace", "ascend_tui.evidence",
        "ascend_tui.investigation", "ascend_tui.report", "ascend_tui.formats", "ascend_tui.formats.native",
        "ascend_tui.checks", "ascend_tui.cli"]


def test_core_imports_neither_textual_nor_torch() -> None:
    code = ("import sys\n" + "".join(f"import {m}\n" for m in CORE) +
            "bad = [m for m in ('textual', 'torch') if m in sys.modules]\n"
            "print(','.join(bad))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_checks_and_graph_never_import_textual() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "ascend_tui"
    for folder in ("graph", "checks", "formats"):
        for path in (root / folder).rglob("*.py"):
            text = path.read_text()
            assert "import textual" not in text and "from textual" not in text, path
