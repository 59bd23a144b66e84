"""The ONNX reader's deferred edges: the segments `onnx_model._OnnxBuilder.link_later` keeps, made into the edge lists
`OpGraph.adopt` takes when a view first reads an edge (`link_segments`), and the few neighbours module inheritance
needs, found without making them (`segment_neighbours`).
"""

from __future__ import annotations

from itertools import chain, compress, repeat
from operator import gt
from typing import Any, Iterator

__all__ = ["Segment", "input_readers", "link_segments", "segment_neighbours"]
# Nodes whose edges are made when first asked for (`link_later`): the first one's position, their input names, the
# position of each name's producer where output 0 made it, -1 where another output did, -2 where none did (an input
# left out), and the (producer, output slot) of each -1 by its place in that list.
Segment = tuple[int, list[list[str]], list[int], dict[int, tuple[int, int]]]


def input_readers(positions: list[int], counts: list[int]) -> list[int]:
    """Each node's position once per input it reads, in order: `chain(map(repeat, positions, counts))`, made as
    one pass per input slot and a merge of the sorted runs where nodes read few inputs (half the cost)."""
    most = max(counts, default=0)
    if most > 4:
        return list(chain.from_iterable(map(repeat, positions, counts)))
    readers = list(compress(positions, counts))
    for slot in range(1, most):
        readers += compress(positions, map(gt, counts, repeat(slot)))
    readers.sort()
    return readers


def link_segments(count: int, segments: list[Segment]
                  ) -> tuple[list[list[tuple[int, int, int, int]]], list[list[tuple[int, int, int, int]]]]:
    """The edge lists of `count` node positions (`OpGraph.adopt`'s `ins` and `outs`) from segments `link_later`
    kept: what `link` made of them, each edge one tuple in both lists, a producer's in the order they were made."""
    ins: list[Any] = [None] * count  # a segment's nodes get theirs below, the others (placeholders) an empty one
    outs: list[list[tuple[int, int, int, int]]] = [[] for _ in range(count)]
    done = 0
    for base, inputs, sources, far in segments:
        if base > done:
            ins[done:base] = [[] for _ in range(base - done)]
        into_all: list[list[tuple[int, int, int, int]]] = []
        append = into_all.append
        at = 0
        for index, tensors in enumerate(inputs, base):
            n = len(tensors)
            if n == 1 and (a := sources[at]) >= 0:
                first = (a, index, 0, 0)
                append([first])
                outs[a].append(first)
            elif n == 2 and (a := sources[at]) >= 0 and (b := sources[at + 1]) >= 0:
                first, second = (a, index, 0, 0), (b, index, 0, 1)
                append([first, second])
                outs[a].append(first)
                outs[b].append(second)
            else:
                into = list(_edges_of(index, sources, at, n, far)) if n else []
                append(into)
                for edge in into:
                    outs[edge[0]].append(edge)
            at += n
        done = base + len(inputs)
        ins[base:done] = into_all
    if count > done:
        ins[done:count] = [[] for _ in range(count - done)]
    return ins, outs


def _edges_of(index: int, sources: list[int], at: int, n: int, far: dict[int, tuple[int, int]]
              ) -> Iterator[tuple[int, int, int, int]]:
    """The edges into node `index` whose `n` producers start at `sources[at]`, by input slot."""
    for slot, src in enumerate(sources[at:at + n]):
        if src >= 0:
            yield (src, index, 0, slot)
        elif src == -1:
            maker, out = far[at + slot]
            yield (maker, index, out, slot)


def segment_neighbours(segments: list[Segment], wanted: list[int]) -> dict[int, list[int]]:
    """For each position in `wanted`, its producers' then its consumers' positions, each in the order `link` made
    their edges (what `inherit_modules` reads of the edges: a few nodes, found without making the edges)."""
    want = set(wanted)
    into: dict[int, list[int]] = {p: [] for p in wanted}
    out: dict[int, list[int]] = {p: [] for p in wanted}
    for base, inputs, sources, far in segments:
        counts = list(map(len, inputs))
        for index in want.intersection(range(base, base + len(inputs))):
            into[index] = [e[0] for e in _edges_of(index, sources, sum(counts[:index - base]), counts[index - base],
                                                   far)]
        read = sorted([k for k, src in enumerate(sources) if src in want]
                      + [k for k, (maker, _) in far.items() if maker in want])
        if read:
            readers = list(chain.from_iterable(map(repeat, range(base, base + len(inputs)), counts)))
            for k in read:
                src = sources[k]
                out[src if src != -1 else far[k][0]].append(readers[k])
    return {p: into[p] + out[p] for p in wanted}
