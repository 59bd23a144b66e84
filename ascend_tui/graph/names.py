"""The one name-matching layer: evidence keyed by an operator's name finds its node in any graph.

Readers record what each node is called in its own tool as `attrs["name"]` (GE op name, ONNX
node name, FX node name, MindSpore scope), other spellings as `attrs["aliases"]`, the msprobe
record as `attrs["msprobe"]`, and the framework ops a fused op replaced as
`attrs["origin_names"]`. Dump entries, profile rows and sanitizer kernels are matched against
them exactly, then normalized (`Default/Add-op0` = `Default_Add-op0`), then through fused
origins; whatever matches nothing is reported, never dropped silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Literal

from ascend_tui.graph.opgraph import OpGraph, OpNode

MatchKind = Literal["id", "exact", "normalized", "fused-origin"]
_SEPARATORS = re.compile(r"[\s/.:\-]+")
# A GE/CANN data-dump file name: `{op type}.{op name}.{task id}.{stream id}.{timestamp}`.
_DUMP_FILE = re.compile(r"^(?P<type>[A-Za-z0-9_]+)\.(?P<name>.+)\.\d+\.\d+\.\d{10,}$")


@dataclass(frozen=True, slots=True)
class NameMatch:
    """Where one evidence name landed: the node, how it matched, and how many nodes shared that key."""

    name: str
    node: str
    how: MatchKind
    candidates: int = 1


def normalize(name: str) -> str:
    """A spelling-independent key: lower case, every run of `/ . : -` and spaces one `_`, no edge `_`."""
    return _SEPARATORS.sub("_", name.strip().lower()).strip("_")


def node_names(node: OpNode) -> tuple[list[str], list[str]]:
    """(names the node goes by, names of the framework ops it replaced) from its reader's attrs."""
    attrs = node.attrs or {}
    names = [node.id]
    for key in ("name", "msprobe"):
        value = attrs.get(key)
        if isinstance(value, str) and value:
            names.append(value)
    names += [str(a) for a in attrs.get("aliases") or () if a]
    origins = [str(o) for o in attrs.get("origin_names") or () if o]
    return names, origins


class NameIndex:
    """Lookup tables over one graph's node names, built once and shared by every evidence file laid on it."""

    def __init__(self, graph: OpGraph) -> None:
        self.graph = graph
        self.exact: dict[str, list[str]] = {}
        self.normal: dict[str, list[str]] = {}
        self.origin: dict[str, list[str]] = {}
        for node in graph:
            names, origins = node_names(node)
            for name in names:
                _put(self.exact, name, node.id)
                _put(self.normal, normalize(name), node.id)
            for name in origins:
                _put(self.origin, normalize(name), node.id)

    def match(self, name: str) -> NameMatch | None:
        """The node `name` refers to (id, exact, normalized, then fused-origin), or None."""
        if not name:
            return None
        if name in self.graph:
            return NameMatch(name, name, "id")
        for candidate in _spellings(name):
            if hit := self.exact.get(candidate):
                return NameMatch(name, hit[0], "exact", len(hit))
        for candidate in _spellings(name):
            key = normalize(candidate)
            if hit := self.normal.get(key):
                return NameMatch(name, hit[0], "normalized", len(hit))
            if hit := self.origin.get(key):
                return NameMatch(name, hit[0], "fused-origin", len(hit))
        return None

    def match_first(self, names: Iterable[str]) -> NameMatch | None:
        """The best match among several names one piece of evidence goes by (earlier names win ties)."""
        best: NameMatch | None = None
        rank = {"id": 0, "exact": 1, "normalized": 2, "fused-origin": 3}
        for name in names:
            m = self.match(name)
            if m is not None and (best is None or rank[m.how] < rank[best.how]):
                best = m
                if m.how in ("id", "exact"):
                    break
        return best

    def match_all(self, names: Iterable[str]) -> tuple[dict[str, NameMatch], list[str]]:
        """(name -> match for those that matched, the names that matched nothing, in order)."""
        found: dict[str, NameMatch] = {}
        unmatched: list[str] = []
        for name in names:
            m = self.match(name)
            if m is None:
                unmatched.append(name)
            else:
                found[name] = m
        return found, unmatched


def _put(table: dict[str, list[str]], key: str, node: str) -> None:
    if not key:
        return
    ids = table.setdefault(key, [])
    if node not in ids:
        ids.append(node)


def _spellings(name: str) -> list[str]:
    """`name` itself, then the op name inside a data-dump file name."""
    out = [name]
    if m := _DUMP_FILE.match(name):
        out.append(m["name"])
    return out
