"""The op list's filters (`OpRows.select`) against the plain per-row scan they replaced.

The search narrows from its recent results (a needle that contains an earlier one only looks in
that one's rows); these tests type, extend, shorten and replace needles on awkward rows, with the
flagged-only and module filters switched under them, and compare every answer with a fresh scan.
"""

from __future__ import annotations

import random

import numpy as np

from ascend_tui.app.widgets.op_list import OpRows
from ascend_tui.evidence import Finding
from ascend_tui.graph.opgraph import OpGraph, OpNode
from ascend_tui.investigation import Investigation

PIECES = ("ab", "AB", "aba", "İ", "Σ", "ς", "ß", "é", "日本", "mlp", "act", ".", "/", ":", "[", "]", "(", "*", "+",
          "?", "\\", " ", "-", "_", "0", "1", "10", "x")
MODULES = ("", "layer", "layer.1", "layer.10", "layer.1.mlp", "layer.10.mlp.act", "Σ.日本", "Σ.日本.ß", "a b", "a b.c")


def _text(rng: random.Random, most: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, most)))


def _investigation(seed: int, n: int = 400) -> Investigation:
    rng = random.Random(seed)
    g = OpGraph(f"search-{seed}")
    findings = []
    ids: set[str] = set()
    for i in range(n):
        nid = f"{_text(rng, 5)}#{i}" if i % 3 else _text(rng, 6) + str(i)  # unique, some ending in a piece
        while nid in ids:
            nid += "~"
        ids.add(nid)
        g.add_node(OpNode(nid, _text(rng, 3), rng.choice(MODULES), i))
        if rng.random() < 0.2:
            findings.append(Finding(check="overflow", kind="overflow", severity="warning", node=nid, op_type="",
                                    module="", index=i, message="flagged"))
    # a needle spanning two fields must not match: the id ends "ab", the module starts "cd"
    g.add_node(OpNode("split-ab", "ef", "cd.x", n))
    return Investigation(g, findings=findings)


def _reference(rows: OpRows, *, flagged: bool, search: str, module: str | None) -> list[int]:
    """The scan `select` replaced, row by row over its own haystack."""
    node = rows.inv.graph.node
    pool: list[int] = rows.flagged.tolist() if flagged else list(range(len(rows.ids)))
    if module:
        pool = [i for i in pool if (m := node(rows.ids[i]).module) == module or m.startswith(module + ".")]
    needle = search.strip().lower()
    if needle:
        hay = [f"{nid}\0{node(nid).module}\0{node(nid).op_type}".lower() for nid in rows.ids]
        pool = [i for i in pool if needle in hay[i]]
    return pool


def _check(rows: OpRows, **filters: object) -> np.ndarray:
    got = rows.select(**filters)  # type: ignore[arg-type]
    assert got.dtype == np.int64
    assert got.tolist() == _reference(rows, **filters), filters  # type: ignore[arg-type]
    return got


def _next_needle(rng: random.Random, needle: str) -> str:
    move = rng.random()
    if move < 0.45:
        return needle + rng.choice(PIECES)  # typed on
    if move < 0.65:
        return needle[:-1]  # backspace
    if move < 0.75:
        return rng.choice(PIECES) + needle  # typed at the start
    if move < 0.85 and needle:
        cut = rng.randrange(len(needle))
        return needle[:cut] + rng.choice(PIECES) + needle[cut + 1:]  # edited in the middle
    return rng.choice(("", " ", "  MLP ", "Ab", "x", _text(rng, 3)))  # replaced


def test_search_sequences_match_the_plain_scan() -> None:
    for seed in range(6):
        rows = OpRows(_investigation(seed))
        rng = random.Random(100 + seed)
        needle, flagged, module = "", False, None
        for _ in range(150):
            if rng.random() < 0.08:
                flagged = not flagged
            if rng.random() < 0.08:
                module = rng.choice((None, *MODULES, "layer.1.", "zz"))
            needle = _next_needle(rng, needle)
            search = rng.choice(("", " ", "\t")) + needle + rng.choice(("", " "))
            _check(rows, flagged=flagged, search=search, module=module)


def test_a_match_never_spans_two_fields() -> None:
    rows = OpRows(_investigation(0, n=0))
    assert _check(rows, flagged=False, search="ab", module=None).tolist() == [0]
    for needle in ("abcd", "b c", "x ef", "xef", "cd.xef", "ab\0cd"):
        _check(rows, flagged=False, search=needle, module=None)
    assert rows.select(flagged=False, search="abcd", module=None).tolist() == []
    assert rows.select(flagged=False, search="ab\0cd", module=None).tolist() == [0]  # what the scan finds too


def test_typing_on_looks_only_at_the_rows_the_shorter_needle_matched() -> None:
    rows = OpRows(_investigation(3, n=600))
    looked: list[int] = []

    class Text(str):  # a row's text that notes each search that looks in it
        row = -1

        def __contains__(self, needle: object) -> bool:
            looked.append(self.row)
            return super().__contains__(needle)  # type: ignore[operator]

    texts = []
    for row, text in enumerate(rows.haystack()):
        texts.append(Text(text))
        texts[-1].row = row
    rows._haystack = texts
    first = _check(rows, flagged=False, search="a", module=None)
    assert 0 < len(first) < len(rows.ids)
    looked.clear()
    second = _check(rows, flagged=False, search="ab", module=None)
    assert looked == first.tolist()  # the rows "a" matched, no other
    looked.clear()
    _check(rows, flagged=False, search="a", module=None)  # backspace: answered from what was kept
    assert looked == []
    looked.clear()
    _check(rows, flagged=True, search="ab", module=None)  # flagged under it: the kept rows, the flagged of them
    assert looked == []
    _check(rows, flagged=True, search="abx", module=None)  # typed on: only the flagged rows "ab" matched
    assert looked == np.intersect1d(second, rows.flagged).tolist()
