"""Root-cause walks over an `OpGraph`: generic searches the checks specialise with a scoring function."""

from __future__ import annotations

from typing import Callable

from ascend_tui.graph.opgraph import OpGraph


def origins(graph: OpGraph, bad: Callable[[str], bool]) -> list[str]:
    """Bad nodes none of whose producers are bad, in execution order: where a defect first appears."""
    out: list[str] = []
    for nid in graph.execution_order():
        if bad(nid) and not any(bad(e.src) for e in graph.producers(nid)):
            out.append(nid)
    return out


def greedy_upstream(
    graph: OpGraph,
    start: str,
    score: Callable[[str, int], float | None],
    max_hops: int = 10_000,
) -> list[str]:
    """Walk from `start` to a source, each hop taking the producer whose `score(producer, out_slot)` is largest.

    Producers scoring None are not followed; the walk ends where no producer scores.
    Returns the path, `start` first.
    """
    path = [start]
    seen = {start}
    node = start
    for _ in range(max_hops):
        best: tuple[float, str] | None = None
        for edge in graph.producers(node):
            if edge.src in seen:
                continue
            value = score(edge.src, edge.out_slot)
            if value is None:
                continue
            if best is None or value > best[0]:
                best = (value, edge.src)
        if best is None:
            break
        node = best[1]
        seen.add(node)
        path.append(node)
    return path


def first_reaching(graph: OpGraph, start: str, hit: Callable[[str], bool]) -> str | None:
    """The nearest ancestor of `start` (breadth first) for which `hit` is true."""
    for nid in graph.upstream(start):
        if hit(nid):
            return nid
    return None
