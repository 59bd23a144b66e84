"""Shared test helpers: where the real-format fixtures live."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures"
SAMPLES = ROOT / "samples"


@pytest.fixture
def fixtures() -> Path:
    """The shared real-format fixtures (CI lays shared/ beside the checkout).

    Missing fixtures fail the test: a skip would let CI pass with every format test unrun.
    """
    if not FIXTURES.is_dir():
        pytest.fail(f"real-format fixtures not found at {FIXTURES}: lay ../shared/fixtures beside the checkout",
                    pytrace=False)
    return FIXTURES
