"""Every file-reading subcommand prints and writes what it did before the restructure (tests/golden/cases/)."""

from __future__ import annotations

import difflib
import importlib.util
import json
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("make_golden", Path(__file__).parent / "golden" / "make_golden.py")
assert _SPEC is not None and _SPEC.loader is not None
golden = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(golden)


def test_every_case_has_a_golden_file() -> None:
    recorded = {p.stem for p in golden.CASES_DIR.glob("*.json")}
    assert recorded == set(golden.CASES), f"golden files and cases differ; {golden.HINT}"


@pytest.mark.parametrize("name", sorted(golden.CASES))
def test_output_is_unchanged(name: str, fixtures: Path) -> None:
    expected = golden.golden_path(name).read_text(encoding="utf-8")
    actual = golden.dumps(golden.run_case(name))
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                            f"golden/{name}.json", "now", n=2))
        lines = diff.splitlines(True)
        shown = "".join(lines[:80]) + (f"... {len(lines) - 80} more diff lines\n" if len(lines) > 80 else "")
        pytest.fail(f"`ascend-tui {' '.join(json.loads(expected)['argv'])}` changed:\n{shown}{golden.HINT}",
                    pytrace=False)
