"""The core stays usable without the app and without torch: offline paths import neither."""

from __future__ import annotations

import subprocess
import sys

CORE = ["ascend_tui", "ascend_tui.graph", "ascend_tui.graph.trace", "ascend_tui.evidence",
        "ascend_tui.investigation", "ascend_tui.report", "ascend_tui.readers", "ascend_tui.readers.native",
        "ascend_tui.checks", "ascend_tui.cli.main", "ascend_tui.offline.open", "ascend_tui.pool", "ascend_tui.plugins"]


def test_core_imports_neither_textual_nor_torch() -> None:
    code = ("import sys\n" + "".join(f"import {m}\n" for m in CORE) +
            "bad = [m for m in ('textual', 'torch') if m in sys.modules]\n"
            "print(','.join(bad))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_start_up_imports_no_reader_numpy_or_networkx() -> None:
    """The reader registry is lazy: the CLI's parser and the registry load no reader module, numpy or networkx
    (a reader is imported when a path reaches its sniff)."""
    code = ("import sys, ascend_tui.cli.main, ascend_tui.readers, ascend_tui.offline.open\n"
            "print(sorted(m for m in sys.modules if m in ('numpy', 'networkx') or m.startswith('ascend_tui.readers.')"
            " and m != 'ascend_tui.readers.base'))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_every_lazy_reader_names_its_reader() -> None:
    """Each registry entry's name is its reader's own name (the name is what lists and errors show unimported)."""
    from ascend_tui.offline.open import all_readers

    assert [(r.name, r.reader().name) for r in all_readers()] == [(r.name, r.name) for r in all_readers()]


def test_checks_and_graph_never_import_textual() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "ascend_tui"
    for folder in ("graph", "checks", "readers", "offline"):
        for path in (root / folder).rglob("*.py"):
            text = path.read_text()
            assert "import textual" not in text and "from textual" not in text, path


ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def test_no_import_cycles_in_the_package() -> None:
    """The layer drawing in docs/architecture.md holds only if imports never loop (function-level ones too)."""
    tool = ROOT.parent / "shared" / "tools" / "import_cycles.py"
    assert tool.is_file(), f"the import-cycle tool is missing at {tool}"
    proc = subprocess.run([sys.executable, str(tool), str(ROOT / "ascend_tui")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout


def test_nothing_imports_a_private_name_from_another_module() -> None:
    import ast

    offenders = []
    for path in (ROOT / "ascend_tui").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ascend_tui") \
                    and node.module != module:
                offenders += [f"{module}: {node.module}.{a.name}" for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
    assert offenders == []


def test_the_live_runner_and_the_app_import_without_torch() -> None:
    """The app starts over SSH without torch; live code imports it only when a model runs."""
    code = ("import sys, ascend_tui.live.runner, ascend_tui.app.app, ascend_tui\n"
            "assert ascend_tui.investigate is ascend_tui.live.runner.investigate\n"
            "print('torch' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_every_import_points_down_the_declared_layers() -> None:
    """The order in `tests/import_layers.py` (drawn in docs/architecture.md) holds for every import in the package."""
    from import_layers import violations

    assert violations(ROOT / "ascend_tui") == []


def test_the_layer_checker_reports_a_wrong_import(tmp_path) -> None:
    """A check that imports a reader, a loop hidden behind TYPE_CHECKING and a module in no layer are all reported."""
    from import_layers import violations

    pkg = tmp_path / "ascend_tui"
    for folder in ("checks", "readers", "graph"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "readers" / "dump.py").write_text("from ascend_tui.graph import node\n")
    (pkg / "checks" / "bad.py").write_text("def f():\n    import ascend_tui.readers.dump\n")
    (pkg / "graph" / "node.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                           "    from ascend_tui.graph.edge import Edge\n")
    (pkg / "graph" / "edge.py").write_text("from . import node\n")
    (pkg / "stray.py").write_text("")
    assert violations(pkg) == [
        "ascend_tui.stray: in no layer (add it to LAYERS in tests/import_layers.py)",
        "ascend_tui.checks.bad:2 imports ascend_tui.readers.dump: checks may not import readers",
        "ascend_tui.graph.node -> ascend_tui.graph.edge -> ascend_tui.graph.node",
    ]
    (pkg / "readers" / "dump.py").write_text("import importlib\nimportlib.import_module('ascend_tui.checks.bad')\n")
    assert "ascend_tui.readers.dump:2 imports ascend_tui.checks.bad: forbidden (readers never import checks)" \
        in violations(pkg)
