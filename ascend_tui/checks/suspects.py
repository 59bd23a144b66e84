"""Which event of a coarse (module-level) pass to record operator by operator: the first whose values went bad."""

from __future__ import annotations

import numpy as np


def first_bad_event(event_of_row: np.ndarray, mn: np.ndarray, mx: np.ndarray, nan: np.ndarray, inf: np.ndarray,
                    *, saturation_limit: float | None = None, flagged: np.ndarray | None = None) -> int | None:
    """The smallest event index with a NaN, an Inf, a value at `saturation_limit` (saturation mode) or the device's
    overflow flag set (`flagged`, one bool per event); None when every event is clean.

    `event_of_row[i]` names the event row `i` (min, max, NaN and Inf counts of one measured tensor) belongs to.
    """
    with np.errstate(invalid="ignore"):
        bad = (nan > 0) | (inf > 0) | ~np.isfinite(mn) | ~np.isfinite(mx)
        if saturation_limit is not None:
            bad |= np.fmax(np.abs(mn), np.abs(mx)) >= saturation_limit * (1 - 1e-6)
    found = [int(event_of_row[i]) for i in np.flatnonzero(bad)]
    if flagged is not None and flagged.any():
        found.append(int(np.flatnonzero(flagged)[0]))
    return min(found) if found else None


def first_zeroed_event(event_of_row: np.ndarray, zeros: np.ndarray, ref_zeros: np.ndarray, numel: np.ndarray,
                       *, share: float = 0.01, at_least: int = 64) -> int | None:
    """The smallest event index whose output holds many more zeros than the reference's same output (an Inf
    absorbed inside the module, as a float16 RMSNorm whose square overflowed zeroes its rows); rows align."""
    with np.errstate(invalid="ignore"):
        grown = (zeros - ref_zeros) > np.maximum(at_least, share * numel)
    hits = np.flatnonzero(grown)
    return int(event_of_row[hits].min()) if hits.size else None
