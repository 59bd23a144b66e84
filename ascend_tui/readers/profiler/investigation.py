"""A profile as an `Investigation`: one graph node per distinct kernel, the timing table, the device, memory.

Every profile reader (Ascend PyTorch Profiler, msprof, msprof op, Chrome traces) ends here, so they
all look the same in the CLI and the app; the advice findings are added by `offline/profile.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ascend_tui.graph.profile_kernels import kernel_graph
from ascend_tui.investigation import Investigation, RunInfo

if TYPE_CHECKING:
    from ascend_tui.graph.profile import Profile

NPU_OFFLINE = {"backend": "npu", "name": "offline (Ascend profiler)", "inf_nan_mode": True}


def profile_investigation(profile: Profile, path: Path, *, source: str,
                          device: dict[str, Any] | None = None) -> Investigation:
    """The `Investigation` of a profile read from `path` (no findings yet)."""
    extra: dict[str, Any] = {"profile_kind": profile.kind, "kernels": profile.kernels.n}
    for key in ("notes", "skipped"):  # what the reader could not read, said where notes are shown
        if profile.extra.get(key):
            extra[key] = list(profile.extra[key])
    run = RunInfo(target=str(path), device=dict(device or NPU_OFFLINE), checks=("profile",), dtype="mixed",
                  source=source, extra=extra)
    return Investigation(kernel_graph(profile, path.name), run=run, profile=profile)


def merge_memory(inv: Investigation, memory: Investigation) -> Investigation:
    """Add a memory timeline (samples, blocks, their operators as nodes) to a profile investigation."""
    from ascend_tui.graph.opgraph import OpNode

    for node in memory.graph:
        if node.id not in inv.graph:
            inv.graph.add_node(OpNode(id=node.id, op_type=node.op_type, module=node.module, index=len(inv.graph),
                                      attrs=node.attrs))
    inv.memory_samples.extend(memory.memory_samples)
    inv.memory_events.extend(memory.memory_events)
    for key, value in memory.run.extra.items():  # notes and skipped records add up; the rest is the memory's
        if key in ("notes", "skipped"):
            inv.run.extra[key] = [*inv.run.extra.get(key, []), *value]
        else:
            inv.run.extra[key] = value
    inv.run.checks = (*inv.run.checks, "memory")
    return inv
