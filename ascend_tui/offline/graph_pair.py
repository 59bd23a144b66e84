"""The other side of a pair for the graph view: the golden graph of an msprobe compare, read from its dump.

The compare keeps only the target's graph (the golden side's statistics become the reference);
drawing both side by side needs the golden operators and edges too, so its rank folder is read
again with the msprobe reader. Nodes of the two sides match by id, as the compare's rows do
when both dumps come from the same framework and model code.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ascend_tui.errors import InputError

if TYPE_CHECKING:
    from ascend_tui.graph.opgraph import OpGraph
    from ascend_tui.investigation import Investigation

COMPARE_SOURCE = "msprobe compare"


def has_golden_graph(inv: Investigation | None) -> bool:
    """True when `inv` is an msprobe compare whose golden side names a dump folder."""
    return inv is not None and inv.run.source == COMPARE_SOURCE and bool(inv.run.reference)


def golden_graph(inv: Investigation) -> OpGraph:
    """The golden side's operator graph, read from the compare's golden rank folder (`InputError` when it is gone)."""
    from ascend_tui.readers.msprobe import dump

    if not has_golden_graph(inv):
        raise InputError(inv.run.target or "the investigation", "not an msprobe compare: there is no golden side "
                         "to draw (open TARGET_DUMP GOLDEN_DUMP)")
    folder = Path(str(inv.run.reference))
    if not (folder / "dump.json").is_file():
        raise InputError(folder, "the golden dump of this compare is not there any more (no dump.json)")
    return dump.load(folder).graph
