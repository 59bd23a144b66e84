"""Shared test helpers: where the real-format fixtures live."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures"
SAMPLES = ROOT / "samples"


@pytest.fixture
def fixtures() -> Path:
    """The shared real-format fixtures (CI lays shared/ beside the checkout)."""
    if not FIXTURES.is_dir():
        pytest.skip(f"real-format fixtures not found at {FIXTURES}")
    return FIXTURES
