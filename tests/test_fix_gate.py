"""`--fail-on unverified`: CI fails on a fix that is not verified, whatever the findings, and passes when all are."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from ascend_tui.cli.main import main

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
DATA = ROOT / "tests" / "data" / "fix"


def cli(*argv: str) -> tuple[int, str]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(list(argv))
    return code, buf.getvalue()


def test_triage_fix_fail_on_unverified_passes_when_every_cause_is_verified(tmp_path: Path) -> None:
    out = tmp_path / "tri.json"
    code, text = cli("triage", str(SAMPLES / "drifting_resnet.py"), "--dtype", "bfloat16", "--fix", "-q",
                     "--fail-on", "unverified", "--json", str(out))
    # the run has precision errors (exit 1 under the default --fail-on error), but each cause's fix is verified
    assert "2 errors" in text and "fix verified:" in text
    assert code == 0, text
    assert "fail-on unverified" not in text
    marks = json.loads(out.read_text())["fix"]["story"]
    assert marks and all(m["verdict"].startswith("fix verified") for m in marks)


def test_triage_fix_fail_on_unverified_fails_and_names_the_cause(tmp_path: Path) -> None:
    junit = tmp_path / "tri.xml"
    code, text = cli("triage", str(DATA / "overflows_in_float32.py"), "--dtype", "float16", "--fix", "-q",
                     "--fail-on", "unverified", "--junit", str(junit))
    assert code == 1
    line = next(x for x in text.splitlines() if x.startswith("fail-on unverified: cause 1 "))
    assert "not verified: no remedy is claimed" in line
    assert "<failure" in junit.read_text()  # the dashboard and the exit code agree


def test_fix_fail_on_unverified_follows_the_verdict(tmp_path: Path) -> None:
    verified, text = cli("fix", str(SAMPLES / "drifting_resnet.py"), "--dtype", "bfloat16", "--checks", "precision",
                         "-q", "--fail-on", "unverified")
    assert verified == 0 and "fix verified:" in text
    unverified, text = cli("fix", str(DATA / "overflows_in_float32.py"), "--dtype", "float16", "--checks",
                           "overflow", "-q", "--fail-on", "unverified")
    assert unverified == 1 and "fail-on unverified: not verified: no remedy is claimed" in text
    # nothing to fix (float32, outputs match): nothing is unverified
    clean, text = cli("fix", str(SAMPLES / "drifting_resnet.py"), "--checks", "precision", "-q",
                      "--fail-on", "unverified")
    assert clean == 0 and "nothing to fix" in text


def test_fail_on_unverified_without_a_fix_run_is_a_usage_error() -> None:
    assert main(["triage", str(SAMPLES / "drifting_resnet.py"), "--fail-on", "unverified", "-q"]) == 2
    assert main(["check", str(SAMPLES / "drifting_resnet.py"), "--fail-on", "unverified", "-q"]) == 2


def test_fail_on_unverified_is_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    for sub in ("triage", "fix"):
        with pytest.raises(SystemExit):
            main([sub, "--help"])
        assert "unverified" in capsys.readouterr().out
