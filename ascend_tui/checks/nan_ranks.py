"""Where a NaN/Inf is born across ranks, following collectives by call order (msprobe's overflow_check, cluster-wide).

In data or tensor parallel training one rank's NaN reaches every rank through the next all_reduce,
so every rank's dump turns non-finite and rank 0's first non-finite op is the collective, not the
cause. Each rank's records are walked in dump order: the first op whose inputs are finite and whose
outputs are not is where that rank *makes* a NaN (born); a collective whose local input is finite
and whose output is not *hands* it over (received). The same collective call has the same name on
every rank (`Distributed.all_reduce.3.forward` is every rank's fourth all_reduce), so the ranks
whose input to it was already non-finite are the ones it came from. Of the ranks that made one,
the origin is the one that did before the fewest collectives: nothing it saw could have come from
another rank.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from ascend_tui.evidence import Finding

COLLECTIVE = re.compile(r"^Distributed\.(?P<api>[A-Za-z_0-9]+)\.(?P<n>\d+)\.(?:forward|backward)")
P2P = re.compile(r"send|recv", re.I)


@dataclass(frozen=True, slots=True)
class OpState:
    """One op record of one rank: whether any input or output statistic was NaN/Inf."""

    name: str
    inputs_bad: bool
    outputs_bad: bool


@dataclass(frozen=True, slots=True)
class RankNan:
    """How a rank first saw a non-finite value: born at an op, received through a collective, or there at the start."""

    rank: int
    how: str  # "born", "received", "present"
    op: str
    index: int  # position of that op in the rank's dump
    collectives_before: int
    from_ranks: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class NanOrigin:
    """The ranks that made the NaN first, and how every other rank came to hold it."""

    origins: tuple[RankNan, ...]
    ranks: tuple[RankNan, ...]
    clean: tuple[int, ...]


def is_collective(name: str) -> bool:
    return COLLECTIVE.match(name) is not None


def first_nonfinite(ops: Sequence[OpState]) -> tuple[str, int, int] | None:
    """(how, op index, collectives before it) of a rank's first non-finite record, or None."""
    collectives = 0
    for i, op in enumerate(ops):
        coll = is_collective(op.name)
        if op.inputs_bad:
            return "present", i, collectives  # non-finite before anything this dump recorded made it
        if op.outputs_bad:
            return ("received" if coll else "born"), i, collectives
        collectives += coll
    return None


def trace(ranks: Mapping[int, Sequence[OpState]]) -> NanOrigin:
    """Follow the first NaN/Inf of every rank back to the rank and op that made it."""
    bad_input: dict[str, set[int]] = {}
    for rank, ops in ranks.items():
        for op in ops:
            if op.inputs_bad and is_collective(op.name):
                bad_input.setdefault(op.name, set()).add(rank)
    states = []
    for rank, ops in sorted(ranks.items()):
        got = first_nonfinite(ops)
        if got is None:
            continue
        how, i, before = got
        name = ops[i].name
        senders = tuple(sorted(bad_input.get(name, set()) - {rank})) if how == "received" else ()
        if how == "present" and is_collective(name):  # an in-place collective records its input after the call
            senders = tuple(sorted(bad_input.get(name, set()) - {rank}))
        states.append(RankNan(rank, how, name, i, before, senders))
    born = [s for s in states if s.how == "born"]
    if born:
        first = min(s.collectives_before for s in born)
        origins = tuple(s for s in born if s.collectives_before == first)
    else:
        origins = tuple(s for s in states if s.how == "present")
    clean = tuple(sorted(set(ranks) - {s.rank for s in states}))
    return NanOrigin(origins, tuple(states), clean)


def _ranks(rs: Sequence[int]) -> str:
    rs = sorted(rs)
    text = ", ".join(map(str, rs[:8])) + (", ..." if len(rs) > 8 else "")
    return ("rank " if len(rs) == 1 else "ranks ") + text


def findings(origin: NanOrigin, n_ranks: int) -> list[Finding]:
    """One finding naming where the NaN/Inf was born and which ranks only received it."""
    if not origin.ranks:
        return []
    receivers = [s for s in origin.ranks if s.how == "received"]
    later = [s for s in origin.ranks if s.how == "born" and s not in origin.origins]
    via = sorted({s.op for s in receivers})
    metrics = {"origin_ranks": [s.rank for s in origin.origins], "origin_ops": [s.op for s in origin.origins],
               "received": [{"rank": s.rank, "via": s.op, "from": list(s.from_ranks)} for s in receivers],
               "born_later": [{"rank": s.rank, "op": s.op} for s in later], "clean_ranks": list(origin.clean),
               "ranks": n_ranks}
    if not origin.origins:
        lead = receivers[0]
        return [Finding("overflow", "nan_across_ranks", "error", lead.op, "", "", lead.index,
                        f"every rank that holds a NaN/Inf received it through a collective ({', '.join(via[:3])}) "
                        f"and none made it: the rank that did is not in this dump",
                        metrics=metrics, hint="dump every rank (msprobe config \"rank\": [])")]
    o = origin.origins[0]
    made = "is born" if o.how == "born" else "is already in the first recorded inputs"
    others = f"; {_ranks([s.rank for s in receivers])} only received it through {', '.join(via[:3])}" \
        if receivers else ""
    also = f"; {_ranks([s.rank for s in later])} made one later too" if later else ""
    where = _ranks([s.rank for s in origin.origins])
    message = (f"NaN/Inf {made} on {where} at {o.op} (op {o.index} of its dump, after "
               f"{o.collectives_before} collective{'s' if o.collectives_before != 1 else ''}){others}{also}")
    hint = (f"open rank {o.rank}'s dump and walk upstream from {o.op}; the other ranks' NaN is this one, "
            "carried by communication") if receivers else f"open rank {o.rank}'s dump and walk upstream from {o.op}"
    return [Finding("overflow", "nan_across_ranks", "error", o.op, "", "", o.index, message, metrics=metrics,
                    hint=hint)]
