"""Profile advice offline: the findings on a profile read from files, and a profile laid onto a graph.

The readers make a profile into an investigation (`readers/profiler/investigation.py`); this adds
what `checks/profile_advice.py` says about it, the same rules the live profiler runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ascend_tui.checks.profile_advice import Cores, advise
from ascend_tui.evidence import Finding
from ascend_tui.graph.profile import Profile
from ascend_tui.readers.profiler.investigation import profile_investigation as reader_investigation

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation


def advise_profile(inv: Investigation) -> Investigation:
    """The advice findings on a profile a reader made into an investigation (what `open_path` adds)."""
    if inv.profile is not None:
        inv.add_findings(profile_findings(inv.profile))
    return inv


def profile_investigation(profile: Profile, path: Path, *, source: str, device: dict[str, Any] | None = None,
                          extra_findings: list[Finding] | None = None, cores: Cores = Cores()) -> Investigation:
    """The `Investigation` of a profile read from `path`, with the advice and any `extra_findings`."""
    inv = reader_investigation(profile, path, source=source, device=device)
    slow = next((int(f.metrics["rank"]) for f in extra_findings or () if f.kind == "slow_rank"), None)
    inv.add_findings(profile_findings(profile, cores=cores, slow=slow) + list(extra_findings or ()))
    return inv


def profile_findings(profile: Profile, *, cores: Cores = Cores(), slow: int | None = None) -> list[Finding]:
    """The advice rules and the communication checks on one profile."""
    findings = advise(profile, cores=cores)
    comm = communication_findings(profile, slow=slow)
    if any(f.kind == "exposed_communication" for f in comm):  # the same time, now split by rank and step
        findings = [f for f in findings if f.kind != "communication"]
    return findings + comm


def communication_findings(profile: Profile, slow: int | None = None) -> list[Finding]:
    """The communication checks on a profile's collectives and steps (nothing when it has neither)."""
    from ascend_tui.checks import communication

    if profile.communication is None and not any(s.communication for s in profile.steps):
        return []
    t = profile.kernels
    matmul = np.zeros((0, 2))
    if t.n and profile.kind != "cluster":  # a cluster keeps one rank's kernels: no clock shared with the others
        names = t.text["name"]
        codes = [i for i, v in enumerate(names.values) if "matmul" in v.lower()]
        rows = np.flatnonzero(np.isin(names.codes, codes) & (t.start_ns != np.iinfo(np.int64).min))
        start = t.start_ns[rows] / 1000.0
        matmul = np.stack([start, start + t.dur_us[rows]], axis=1) if len(rows) else matmul
    stages = (profile.communication.parallel.get("stages") if profile.communication is not None else None) or {}
    return communication.advise(profile.communication, profile.steps, slow=slow, matmul_us=matmul,
                                stages={int(k): int(v) for k, v in stages.items()})


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
    graph_inv.replace_findings("profile", profile_findings(profile))
    return graph_inv
