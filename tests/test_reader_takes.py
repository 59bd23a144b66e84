"""A reader's `Takes` (what its sniff can accept by name) never refuses a path its sniff accepts, and choosing
a reader for a path imports only the readers whose names could take it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from ascend_tui.investigation import INVESTIGATION_SCHEMA
from ascend_tui.offline.open import all_readers
from ascend_tui.readers import READERS, Takes
from tests.conftest import ROOT


def _paths(fixtures: Path) -> list[Path]:
    return [p for root in (fixtures, ROOT / "tests" / "data", ROOT / "samples") for p in [root, *root.rglob("*")]
            if p.suffix != ".pt"]  # tensor files: what no sniff takes by name, by hundreds


def test_no_takes_refuses_what_its_sniff_accepts(fixtures: Path, tmp_path: Path) -> None:
    paths = _paths(fixtures)
    # the same names in other cases and under gzip, which some sniffs take and the takes must too
    for name in ("MODEL.ONNX", "trace_view.json.gz", "kernel_details.csv.gz", "Cluster_Analysis.db", "model.PT2"):
        (tmp_path / name).write_bytes(b"")
        paths.append(tmp_path / name)
    # our own files under names a user may give them
    for name, text in (("run", f'{{"schema": "{INVESTIGATION_SCHEMA}"}}'), ("g.txt", '{"schema": "ascend-tui.graph/1"}')):
        (tmp_path / name).write_text(text)
        paths.append(tmp_path / name)
    accepted = {}
    for reader in all_readers():
        if reader.plugin:
            continue
        sniff = reader.reader().sniff
        for p in paths:
            if sniff(p):
                accepted.setdefault(reader.name, 0)
                accepted[reader.name] += 1
                assert reader.takes.could(p), (reader.name, p)
    # every built-in format has fixtures: the check above saw each reader accept something
    assert {r.name for r in READERS} <= set(accepted), sorted(set(r.name for r in READERS) - set(accepted))


def test_takes_judges_by_name_and_kind() -> None:
    onnx = Takes(False, (".onnx",))
    assert onnx.could(Path("a/b/Model.ONNX")) and not onnx.could(Path("a/model.onnx.txt"))
    assert not onnx.could(ROOT / "tests")  # a folder
    assert Takes(True, ()).could(ROOT / "tests") and not Takes(True, ()).could(Path("x.csv"))
    assert Takes().could(Path("any.name")) and not Takes().could(ROOT)


def _modules_choosing(path: Path, reader: str) -> set[str]:
    """The reader and service modules a fresh process has imported once it chose `reader` for `path`."""
    code = ("import sys\nfrom ascend_tui.offline.open import reader_for\n"
            f"assert reader_for({str(path)!r}).name == {reader!r}\n"
            "print(sorted(m for m in sys.modules if m.startswith(('ascend_tui.readers.', 'ascend_tui.offline.'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return set(ast.literal_eval(proc.stdout.strip().splitlines()[-1]))


def test_choosing_the_reader_of_an_onnx_file_imports_no_other_format(tmp_path: Path) -> None:
    model = ROOT / "tests" / "data" / "block_dynamo_export.onnx"
    loaded = _modules_choosing(model, 'ONNX model')
    # the readers whose sniff reads any file's first bytes (our own files, sanitizer logs) and the one that reads it
    assert not {m for m in loaded if m.startswith(("ascend_tui.readers.msprobe", "ascend_tui.readers.profiler",
                                                   "ascend_tui.offline.profile", "ascend_tui.offline.nan_ranks",
                                                   "ascend_tui.readers.graphs.ge_dump"))}, sorted(loaded)
    assert "ascend_tui.readers.graphs.onnx_model" in loaded


def test_choosing_the_reader_of_a_kernel_csv_imports_no_graph_or_cluster_reader(fixtures: Path) -> None:
    csv = fixtures / "profiler" / "level1_2025-01" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    loaded = _modules_choosing(csv, 'profiler')
    assert not {m for m in loaded if m.startswith(("ascend_tui.readers.graphs", "ascend_tui.offline.profile_cluster",
                                                   "ascend_tui.offline.nan_ranks", "ascend_tui.readers.msprobe.overflow",
                                                   "ascend_tui.readers.msprobe.vis",
                                                   "ascend_tui.readers.profiler.msprof_op"))}, sorted(loaded)
