"""The timeline's first-level aten ops in order: what msprof-analyze's affinity-API rules are matched against.

A profile keeps framework ops folded by name (`HostOp`); the rules need their order. The readers
hand over the `aten::` ops no other aten op encloses (the advisor's own filter), in start order,
as a compact text column in `Profile.extra["aten_sequence"]`, and the optimizer steps the timeline
shows (`Optimizer.step#Adam.step`: calls) in `Profile.extra["optimizer_steps"]`.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ascend_tui.graph.profile import Codes

KEY = "aten_sequence"
STEPS = "optimizer_steps"
OPTIMIZER_STEP = "Optimizer.step#"
LIMIT = 2_000_000  # ops kept; a longer timeline keeps its first ones (the rules look at short runs)


def sequence(names: Sequence[str], starts: Sequence[float], ends: Sequence[float]) -> dict[str, Any]:
    """`{KEY: codes}` of the first-level aten ops (`aten::` stripped) in start order; {} when there are none."""
    order = sorted(range(len(names)), key=lambda i: (starts[i], -ends[i]))
    kept: list[str] = []
    end = float("-inf")
    for i in order:
        name = names[i]
        if not name.startswith("aten::"):
            continue
        if kept and ends[i] <= end:
            continue  # inside the previous first-level aten op
        kept.append(name[len("aten::"):])
        end = ends[i]
        if len(kept) >= LIMIT:
            break
    return {KEY: Codes.of(kept).to_json()} if kept else {}


def optimizer_steps(names: Iterable[str]) -> dict[str, Any]:
    """`{STEPS: {name: calls}}` of the `Optimizer.step#<Class>.step` framework ops among `names`; {} when none."""
    steps: dict[str, int] = {}
    for name in names:
        if name.startswith(OPTIMIZER_STEP):
            steps[name] = steps.get(name, 0) + 1
    return {STEPS: steps} if steps else {}


def of_events(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """`sequence` and `optimizer_steps` of Chrome-trace cpu_op events (`ts` µs as number or string, `dur` µs)."""
    names, starts, ends = [], [], []
    steps = []
    for e in events:
        name = str(e.get("name", ""))
        if name.startswith(OPTIMIZER_STEP):
            steps.append(name)
        if not name.startswith("aten::"):
            continue
        try:
            ts = float(e["ts"])
            dur = float(e.get("dur", 0) or 0)
        except (KeyError, TypeError, ValueError):
            continue
        names.append(name)
        starts.append(ts)
        ends.append(ts + dur)
    return {**sequence(names, starts, ends), **optimizer_steps(steps)}
