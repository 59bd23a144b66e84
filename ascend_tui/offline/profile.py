"""Profile advice offline: the findings on a profile read from files, and a profile laid onto a graph.

The readers make a profile into an investigation (`readers/profiler/investigation.py`); this adds
what `checks/profile_advice.py` says about it, the same rules the live profiler runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ascend_tui.checks.profile_advice import Cores, advise
from ascend_tui.evidence import Finding
from ascend_tui.graph.profile import Profile
from ascend_tui.readers.profiler.investigation import profile_investigation as reader_investigation

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation


def advise_profile(inv: Investigation) -> Investigation:
    """The advice findings on a profile a reader made into an investigation (what `open_path` adds)."""
    if inv.profile is not None:
        inv.add_findings(advise(inv.profile))
    return inv


def profile_investigation(profile: Profile, path: Path, *, source: str, device: dict[str, Any] | None = None,
                          extra_findings: list[Finding] | None = None, cores: Cores = Cores()) -> Investigation:
    """The `Investigation` of a profile read from `path`, with the advice and any `extra_findings`."""
    inv = reader_investigation(profile, path, source=source, device=device)
    inv.add_findings(advise(profile, cores=cores) + list(extra_findings or ()))
    return inv


def on_graph(profile: Profile, graph_inv: Investigation, target: str = "") -> Investigation:
    """Put a profile read offline onto an existing graph: kernel names map to nodes by exact id, then by
    normalised name against node ids and op types; the names that match nothing stay in `Profile.unmatched`."""
    from ascend_tui.checks.profile import attribute
    from ascend_tui.graph.profile import Codes

    graph = graph_inv.graph
    ops = [n for n in graph if not n.is_placeholder]
    names = profile.kernels.text["name"]
    mapping = attribute(names.values, [n.id for n in ops], {n.id: n.op_type for n in ops})
    profile.kernels = profile.kernels.with_text("node", Codes(names.codes, [mapping.get(v, "") for v in names.values]))
    profile.unmatched = tuple(sorted(v for v in names.values if v not in mapping))
    graph_inv.profile = profile
    graph_inv.run.checks = tuple(dict.fromkeys((*graph_inv.run.checks, "profile")))
    graph_inv.run.extra["profile_unmatched"] = len(profile.unmatched)
    graph_inv.run.target = graph_inv.run.target or target
    graph_inv.replace_findings("profile", advise(profile))
    return graph_inv
