"""The overflow check on a dump read offline, and msprobe overflow_check's verdicts merged with it.

`checks/overflow.py` runs on every msprobe dump `open_path` reads; on an overflow_check result laid
onto its dump, an op msprobe flagged that the check also names as introducing the NaN/Inf becomes
one finding (`confirmed_by` msprobe), and the rest of msprobe's verdicts are kept as they are.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ascend_tui.checks import overflow
from ascend_tui.readers.msprobe.overflow import SOURCE

if TYPE_CHECKING:
    from ascend_tui.evidence import Finding
    from ascend_tui.investigation import Investigation


def _analyze(inv: Investigation) -> list[Finding]:
    """The overflow check on a dump's statistics, at its dominant dtype (float32 when that has no range)."""
    dtype = inv.run.dtype if overflow.range_of(inv.run.dtype) is not None else "float32"
    return overflow.analyze(inv.graph, inv.stats, dtype=dtype, inf_nan_mode=True)


def dump_findings(inv: Investigation) -> Investigation:
    """Add the overflow check's findings to a dump."""
    inv.add_findings(_analyze(inv))
    inv.run.checks = tuple(dict.fromkeys((*inv.run.checks, "overflow")))
    return inv


def overflow_check_findings(inv: Investigation) -> Investigation:
    """msprobe's flagged ops merged with the check's findings when the result was laid onto the full dump."""
    if "rank_dir" not in inv.run.extra:  # only the flagged ops were read: nothing for the check to add
        return inv
    theirs = [f for f in inv.findings if f.check == "overflow"]
    ours = _analyze(inv)
    added: list[Finding] = []
    for f in theirs:
        same = next((i for i, o in enumerate(ours)
                     if o.node == f.node and o.kind == f.kind and o.attribution == "introduced"), None)
        if same is not None:
            ours[same] = dataclasses.replace(ours[same], metrics={**ours[same].metrics, "confirmed_by": SOURCE})
        else:
            added.append(f)
    inv.replace_findings("overflow", [*ours, *added])
    return inv
