"""Which event of a coarse (module-level) pass to record operator by operator: the first whose values went bad, or
the module call whose time or memory stands out against its peers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

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


@dataclass(frozen=True, slots=True)
class Standout:
    """The module call a timing or memory pass singles out, and why: its value against its peers' median."""

    index: int  # position in the values given (one per forward module call)
    value: float
    median: float  # the peers' median (the same class at the same depth, itself left out); NaN with no peers
    peers: int
    share: float  # of the step's total (the outermost calls' sum)
    outlier: bool  # False: nothing stood out, the call with the largest own value (its children's left out)


def enclosing(entered_at: Sequence[int], order: Sequence[int]) -> list[int]:
    """Per call, the position of the innermost call enclosing it (-1 for an outermost one).

    Calls are given in the order they ended (`order[i]`: events finished before call `i` ended, so its own event
    index; `entered_at[i]`: events finished when it started): a call encloses another when it started before and
    ended after it.
    """
    parent = [-1] * len(order)
    stack: list[int] = []
    for i in range(len(order) - 1, -1, -1):  # latest end first: every call comes after the calls enclosing it
        while stack and entered_at[stack[-1]] > order[i]:
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    return parent


def standout(values: Sequence[float], classes: Sequence[str], entered_at: Sequence[int], order: Sequence[int], *,
             ratio: float = 3.0, share: float = 0.05, narrow: float = 0.8) -> Standout | None:
    """The call whose value stands out: at least `ratio` times the median of its peers (the same class at the same
    depth) and above it by at least `share` of the step; of those, the one above its peers by the most, narrowed to
    an enclosed outlier that explains `narrow` of that excess (layer 7's attention rather than layer 7). When nothing
    stands out, the call with the largest own value (its children's subtracted). Outermost calls (the model's own)
    are never chosen; NaN values (not measured) are left out; None when there is nothing to choose."""
    v = np.asarray(values, dtype=np.float64)
    n = len(v)
    if n == 0:
        return None
    parent = enclosing(entered_at, order)
    depth = [0] * n
    for i in range(n - 1, -1, -1):  # parents come later in end order
        depth[i] = depth[parent[i]] + 1 if parent[i] >= 0 else 0
    total = float(np.nansum([v[i] for i in range(n) if parent[i] < 0]))
    groups: dict[tuple[str, int], list[int]] = {}
    for i in range(n):
        if parent[i] >= 0 and np.isfinite(v[i]):
            groups.setdefault((classes[i], depth[i]), []).append(i)
    medians: dict[int, tuple[float, int]] = {}
    excess: dict[int, float] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        vals = v[members]
        for k, i in enumerate(members):
            others = np.delete(vals, k)
            med = float(np.median(others))
            medians[i] = (med, len(others))
            if v[i] >= ratio * med and v[i] - med >= share * total and v[i] > 0:
                excess[i] = float(v[i] - med)
    if excess:
        best = max(excess, key=lambda i: excess[i])
        inner = [i for i in excess if i != best and excess[i] >= narrow * excess[best] and _inside(i, best, parent)]
        if inner:
            best = max(inner, key=lambda i: depth[i])
        med, peers = medians[best]
        return Standout(best, float(v[best]), med, peers, v[best] / total if total > 0 else float("nan"), True)
    own = v.copy()
    for i in range(n):
        if parent[i] >= 0 and np.isfinite(v[i]):
            own[parent[i]] -= v[i]
    candidates = [i for i in range(n) if parent[i] >= 0 and np.isfinite(own[i])]
    if not candidates:
        return None
    best = max(candidates, key=lambda i: own[i])
    med, peers = medians.get(best, (float("nan"), 0))
    return Standout(best, float(v[best]), med, peers, v[best] / total if total > 0 else float("nan"), False)


def _inside(i: int, outer: int, parent: list[int]) -> bool:
    p = parent[i]
    while p >= 0:
        if p == outer:
            return True
        p = parent[p]
    return False
