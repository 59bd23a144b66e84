"""A profile as an `Investigation`: one graph node per distinct kernel, the timing table, and the advice findings.

Every profile reader (Ascend PyTorch Profiler, msprof, msprof op, Chrome traces, clusters) ends here,
so they all look the same in the CLI and the app.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ascend_tui.checks.profile import categories
from ascend_tui.checks.profile_advice import Cores, advise
from ascend_tui.evidence import Finding
from ascend_tui.graph.profile import Profile

if TYPE_CHECKING:
    from ascend_tui.graph.opgraph import OpGraph
    from ascend_tui.investigation import Investigation

NPU_OFFLINE = {"backend": "npu", "name": "offline (Ascend profiler)", "inf_nan_mode": True}


def kernel_graph(profile: Profile, name: str) -> OpGraph:
    """One node per distinct kernel name, in order of first launch, with its type, module, category and time."""
    from ascend_tui.graph.opgraph import OpGraph, OpNode

    t = profile.kernels
    graph = OpGraph(name)
    if t.n == 0:
        return graph
    codes = t.text["name"].codes
    k = len(t.text["name"].values)
    first = np.full(k, t.n, np.int64)
    np.minimum.at(first, codes, np.arange(t.n))
    total = np.bincount(codes, weights=t.dur_us, minlength=k)
    calls = np.bincount(codes, minlength=k)
    cats = categories(t)
    starts = t.start_ns
    order = sorted((c for c in range(k) if calls[c]), key=lambda c: (int(starts[first[c]]), int(first[c])))
    for i, c in enumerate(order):
        row = int(first[c])
        graph.add_node(OpNode(id=t.text["name"].values[c], op_type=t.label("type", row) or t.text["name"].values[c],
                              module=t.label("module", row), index=i,
                              attrs={"category": cats.at(row), "core": t.label("core", row), "calls": int(calls[c]),
                                     "total_us": round(float(total[c]), 3)}))
    return graph


def profile_investigation(profile: Profile, path: Path, *, source: str, device: dict[str, Any] | None = None,
                          extra_findings: list[Finding] | None = None, cores: Cores = Cores()) -> Investigation:
    """The `Investigation` of a profile read from `path`."""
    from ascend_tui.investigation import Investigation, RunInfo

    graph = kernel_graph(profile, path.name)
    findings = advise(profile, cores=cores)
    comm = communication_findings(profile, slow=next((int(f.metrics["rank"]) for f in extra_findings or ()
                                                       if f.kind == "slow_rank"), None))
    if any(f.kind == "exposed_communication" for f in comm):  # the same time, now split by rank and step
        findings = [f for f in findings if f.kind != "communication"]
    findings += comm + list(extra_findings or ())
    run = RunInfo(target=str(path), device=dict(device or NPU_OFFLINE), checks=("profile",), dtype="mixed",
                  source=source, extra={"profile_kind": profile.kind, "kernels": profile.kernels.n})
    return Investigation(graph, findings=findings, run=run, profile=profile)


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
    return communication.advise(profile.communication, profile.steps, slow=slow, matmul_us=matmul)


def merge_memory(inv: Investigation, memory: Investigation) -> Investigation:
    """Add a memory timeline (samples, blocks, their operators as nodes) to a profile investigation."""
    from ascend_tui.graph.opgraph import OpNode

    for node in memory.graph:
        if node.id not in inv.graph:
            inv.graph.add_node(OpNode(id=node.id, op_type=node.op_type, module=node.module, index=len(inv.graph),
                                      attrs=node.attrs))
    inv.memory_samples.extend(memory.memory_samples)
    inv.memory_events.extend(memory.memory_events)
    inv.run.extra.update(memory.run.extra)
    inv.run.checks = (*inv.run.checks, "memory")
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
