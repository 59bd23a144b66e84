"""Graph builder for msprobe dumps: op nodes and placeholders from classified records, and the inferred edges.

msprobe writes what each API and module saw (dtype, shape, Max/Min/Mean/Norm, optionally the
tensor) in execution order. An input is wired to the parameter of its module or to the most
recent earlier output holding the same values; docs/formats.md lists the rules and confidences.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ascend_tui.progress import Progress
from ascend_tui.errors import Cancelled
from ascend_tui.evidence import STAT_FIELDS, SourceLocation, StatsTable, TensorMeta
from ascend_tui.graph.ids import IdMinter
from ascend_tui.graph.opgraph import OpGraph, OpNode


API_NAME = re.compile(r"^(?P<prefix>[A-Za-z][A-Za-z0-9_]*)\.(?P<api>.+)\.(?P<idx>\d+)\.(?P<dir>forward|backward)$")
MODULE_NAME = re.compile(r"^(?:Module|Cell)\.(?P<path>.+)\.(?P<cls>[^.]+)\.(?P<dir>forward|backward)\.(?P<idx>\d+)$")
PARAM_GRAD = re.compile(r"^(?:Module|Cell)\..+\.parameters_grad(?:\.\d+)?$")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
_WINDOW = 64


@dataclass(frozen=True, slots=True)
class Leaf:
    """One tensor msprobe described: its per-tensor name, type and statistics (None where absent)."""

    name: str
    meta: TensorMeta
    stats: tuple[float | None, float | None, float | None, float | None] | None
    md5: str | None = None
    data_name: str | None = None
    exact_key: tuple[Any, ...] | None = field(default=None, compare=False)
    view_key: tuple[Any, ...] | None = field(default=None, compare=False)

    @classmethod
    def make(cls, name: str, meta: TensorMeta, stats: tuple[float | None, ...] | None, md5: str | None = None,
             data_name: str | None = None) -> Leaf:
        """A leaf with its match keys: what two records of the same tensor share (the view key drops the shape)."""
        if stats is None and md5 is None:
            return cls(name, meta, stats, md5, data_name)  # type: ignore[arg-type]
        values = tuple([v if v == v else "nan" for v in stats]) if stats else ()  # NaN != NaN; None == None
        return cls(name, meta, stats, md5, data_name, (meta.dtype, meta.shape, values, md5),  # type: ignore[arg-type]
                   (meta.dtype, math.prod(meta.shape), values, md5))

    @property
    def numel(self) -> int:
        return math.prod(self.meta.shape)

    def key(self, view: bool = False) -> tuple[Any, ...] | None:
        """The match key: dtype, shape (its size with `view`), statistics and CRC; None when nothing was measured."""
        return self.view_key if view else self.exact_key

    @property
    def constant(self) -> bool:
        """True when Max == Min: every element is the same, so many tensors look alike."""
        return self.stats is not None and self.stats[0] is not None and self.stats[0] == self.stats[1]


@dataclass(slots=True)
class Entry:
    """One API or module record of dump.json, classified and with its tensors flattened."""

    name: str
    kind: str
    op: str
    op_type: str
    direction: str
    module: str = ""
    module_class: str = ""
    phase: str = "forward"
    inputs: list[Leaf] = field(default_factory=list)
    outputs: list[Leaf] = field(default_factory=list)
    scalars: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Leaf] = field(default_factory=dict)
    recompute: bool = False

    @property
    def forward_name(self) -> str:
        """The name of the forward record a backward record belongs to."""
        if self.kind == "module":
            return re.sub(r"\.backward\.(\d+)$", r".forward.\1", self.name)
        return self.name.removesuffix(".backward") + ".forward"


@dataclass(slots=True)
class Built:
    """What `build` returns: the graph, statistics and a few facts for RunInfo."""

    graph: OpGraph
    stats: StatsTable
    leaves: dict[tuple[str, int], Leaf]
    match_counts: Counter[str]
    skipped: int


# -- statistics -----------------------------------------------------------------------------------


def stats_rows(leaves: list[Leaf]) -> np.ndarray:
    """`STAT_FIELDS` rows of measured leaves; NaN/Inf counts are lower bounds (1 = present), zero_count -1 = unknown.

    NaN is present when Max or Min is NaN (torch's max and min propagate it); Inf when Max is
    +Inf or Min is -Inf, which NaN would hide. A NaN Mean with infinite extremes is Inf - Inf.
    """
    raw = np.array([[np.nan if v is None else v for v in leaf.stats or (None,) * 4] for leaf in leaves],
                   dtype=np.float64).reshape(len(leaves), 4)
    measured = np.array([[leaf.stats is not None and leaf.stats[i] is not None for i in (0, 1)] for leaf in leaves],
                        dtype=bool).reshape(len(leaves), 2)
    numel = np.array([leaf.numel for leaf in leaves], dtype=np.float64)
    mx, mn = raw[:, 0], raw[:, 1]
    out = np.empty((len(leaves), len(STAT_FIELDS)), dtype=np.float64)
    with np.errstate(invalid="ignore"):
        has_nan = (np.isnan(mx) & measured[:, 0]) | (np.isnan(mn) & measured[:, 1])
        out[:, 0], out[:, 1], out[:, 2], out[:, 3] = mn, mx, raw[:, 2], raw[:, 3]
        out[:, 4] = np.maximum(np.abs(mn), np.abs(mx))
        out[:, 5] = has_nan
        out[:, 6] = np.where(has_nan, 0, (mx == np.inf).astype(np.float64) + (mn == -np.inf))
        out[:, 7] = np.where((mx == 0) & (mn == 0), numel, np.where((mn > 0) | (mx < 0), 0, -1))
    out[:, 8] = numel
    return out


def stats_row(leaf: Leaf) -> list[float] | None:
    """The `stats_rows` row of one leaf, or None when msprobe measured nothing for it."""
    return None if leaf.stats is None else [float(x) for x in stats_rows([leaf])[0]]


# -- graph -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Ref:
    node: str
    slot: int
    phase: str
    leaf: Leaf


Wire = tuple[str, int, str, float]


def _param_id(module: str, pname: str) -> str:
    return f"param:{module}.{pname}" if module else f"param:{pname}"


class Builder:
    """Walks dump.json records in order, adding op nodes, placeholders and inferred edges."""

    def __init__(self, entries: list[Entry], construct: Mapping[str, str | None],
                 stacks: Mapping[str, SourceLocation]) -> None:
        self.entries = entries
        self.construct = construct
        self.stacks = stacks
        self.graph = OpGraph()
        self.keys: list[tuple[str, int]] = []
        self.leaves: dict[tuple[str, int], Leaf] = {}
        self.exact: dict[Any, list[_Ref]] = {}
        self.view: dict[Any, list[_Ref]] = {}
        self.cast: dict[tuple[int, ...], list[_Ref]] = {}
        self.wired: dict[str, list[Wire]] = {}
        self.params: dict[Any, list[tuple[str, str, Leaf]]] = {}
        self.by_shape: dict[tuple[int, ...], list[tuple[str, str, Leaf]]] = {}
        self.param_leaves: dict[tuple[str, str], Leaf] = {}
        self.minter = IdMinter()
        self.ids: dict[str, str] = {}
        self.matches: Counter[str] = Counter()
        self.inputs = 0
        self.index = 0

    def owner(self, name: str, depth: int = 0) -> tuple[str, str, str | None]:
        """(module path, module class, special phase) of a record, from its construct.json parents."""
        parent = self.construct.get(name)
        if parent is None or depth > 16:
            return "", "", None
        if parent == "optimizer":
            return "", "", "optimizer"
        if m := MODULE_NAME.match(parent):
            return m["path"], m["cls"], None
        return self.owner(parent, depth + 1)

    def place(self, entry: Entry) -> None:
        """Fill module, class and phase of an API record (backward records take their forward's module)."""
        if entry.kind == "module":
            return
        lookup = entry.forward_name if entry.direction == "backward" and entry.forward_name in self.construct \
            else entry.name
        entry.module, entry.module_class, special = self.owner(lookup)
        entry.phase = special or entry.direction

    def node_modules(self) -> set[str]:
        """Module records that become nodes: those with no dumped API or module record inside them."""
        names = {e.name for e in self.entries}
        covered: set[str] = set()
        for e in self.entries:
            parent, depth = self.construct.get(e.name), 0
            while parent and depth < 64 and parent not in covered:
                covered.add(parent)
                parent, depth = self.construct.get(parent), depth + 1
        if not self.construct:
            paths = [e.module for e in self.entries if e.kind == "module"]
            covered |= {e.name for e in self.entries if e.kind == "module"
                        and any(p.startswith(e.module + ".") for p in paths)}
            if any(e.kind == "api" for e in self.entries):
                covered |= {e.name for e in self.entries if e.kind == "module"}
        chosen: set[str] = set()
        for e in self.entries:
            if e.kind != "module":
                continue
            base = e.forward_name if e.direction == "backward" and e.forward_name in names else e.name
            if base not in covered:
                chosen.add(e.name)
        return chosen

    def node_id(self, entry: Entry) -> str:
        if entry.phase == "backward" and (fwd := self.ids.get(entry.forward_name)):
            nid = f"backward:{fwd}"
            if nid not in self.graph:
                return nid
        return self.minter.mint(entry.module, entry.op, entry.phase)

    def build(self, progress: Progress | None, cancel: threading.Event | None) -> None:
        for e in self.entries:
            self.place(e)
            if e.kind == "module" and e.direction == "forward":
                for pname, leaf in e.params.items():
                    item = (e.module, pname, leaf)
                    if self.param_leaves.setdefault((e.module, pname), leaf) is not leaf:
                        continue
                    self.params.setdefault(leaf.key(), []).append(item)
                    self.by_shape.setdefault(leaf.meta.shape, []).append(item)
        as_nodes = self.node_modules()
        ops = [e for e in self.entries if e.kind == "api" or e.name in as_nodes]
        for i, entry in enumerate(ops):
            if cancel is not None and cancel.is_set():
                raise Cancelled("loading the msprobe dump was cancelled")
            if progress is not None and (i & 255) == 0:
                progress("building graph", i, len(ops))
            self.add(entry)
        if progress is not None:
            progress("building graph", len(ops), len(ops))

    def add(self, entry: Entry) -> None:
        nid = self.node_id(entry)
        self.ids[entry.name] = nid
        wires = self.wire(entry)
        metas: list[TensorMeta | None] = [leaf.meta for leaf in entry.inputs]
        if entry.kind == "module" and entry.direction == "forward":
            for pname, leaf in entry.params.items():  # a module node computes with its own parameters
                wires.append((self.param_node(entry.module, pname), 0, "param", 1.0))
                metas.append(leaf.meta)
        source = self.stacks.get(entry.name)
        attrs: dict[str, Any] = {"msprobe": entry.name}
        fwd = self.graph.get(self.ids.get(entry.forward_name)) if entry.phase == "backward" else None
        if fwd is not None:
            attrs["forward_node"] = fwd.id
            source = source or fwd.source
            wires, metas = self.saved(fwd, wires, metas)
        attrs["edge_match"] = [w[2] for w in wires]
        attrs["edge_confidence"] = [round(w[3], 3) for w in wires]
        if entry.scalars:
            attrs["scalars"] = {k.removeprefix(entry.name + "."): v for k, v in list(entry.scalars.items())[:8]}
        if entry.recompute:
            attrs["recompute"] = True
        self.graph.add_node(OpNode(
            nid, entry.op_type, entry.module, self.index, "op",
            inputs=tuple(metas), outputs=tuple(leaf.meta for leaf in entry.outputs),
            source=source, phase=entry.phase, module_class=entry.module_class, attrs=attrs))
        self.index += 1
        for slot, (src, out_slot, _how, _conf) in enumerate(wires):
            self.graph.add_edge(src, nid, out_slot, slot)
        if entry.phase == "forward":
            self.wired[nid] = wires
        for slot, leaf in enumerate(entry.outputs):
            self.publish(leaf, nid, slot, entry.phase)

    def saved(self, fwd: OpNode, wires: list[Wire], metas: list[TensorMeta | None]
              ) -> tuple[list[Wire], list[TensorMeta | None]]:
        """Append what autograd saved for a backward op: its forward op's inputs and outputs (after the grads).

        msprobe lists only gradients as a backward record's inputs; without these slots an Inf the
        forward pass made would look as if the backward op introduced it.
        """
        wires, metas = list(wires), list(metas)
        for slot, (src, out_slot, _how, conf) in enumerate(self.wired.get(fwd.id, ())):
            wires.append((src, out_slot, "saved", conf))
            metas.append(fwd.inputs[slot] if slot < len(fwd.inputs) else None)
        for slot, meta in enumerate(fwd.outputs):
            wires.append((fwd.id, slot, "saved", 1.0))
            metas.append(meta)
        return wires, metas

    def wire(self, entry: Entry) -> list[Wire]:
        """(producer, out slot, how, confidence) per input slot; placeholders for inputs nothing produced.

        Parameters are matched first, last slot first (weight and bias come last in torch signatures),
        and a constant-valued input (zeros, ones) never takes a parameter another slot of the op took.
        """
        hits: list[Wire | None] = [None] * len(entry.inputs)
        if entry.phase != "backward":
            taken: set[str] = set()
            for slot in reversed(range(len(entry.inputs))):
                leaf = entry.inputs[slot]
                hit = self.param(leaf, entry, taken if leaf.constant else set())
                if hit is not None:
                    hits[slot] = hit
                    taken.add(hit[0])
        wires: list[Wire] = []
        used = {h[0] for h in hits if h is not None}
        for slot, leaf in enumerate(entry.inputs):
            hit = hits[slot] or self.match(leaf, entry, used if leaf.constant else set()) \
                or (self.placeholder(leaf, entry), 0, "none", 0.0)
            self.matches[hit[2]] += 1
            used.add(hit[0])
            wires.append(hit)
        return wires

    def publish(self, leaf: Leaf, node: str, slot: int, phase: str, *, findable: bool = True) -> None:
        """Make an output (or placeholder) visible to later inputs and record its statistics."""
        if findable and (key := leaf.key()) is not None:
            ref = _Ref(node, slot, phase, leaf)
            self.exact.setdefault(key, []).append(ref)
            self.view.setdefault(leaf.key(view=True), []).append(ref)
            if leaf.stats is not None and leaf.meta.dtype in FLOAT_DTYPES and not leaf.constant:
                self.cast.setdefault(leaf.meta.shape, []).append(ref)
        if leaf.stats is not None:
            self.keys.append((node, slot))
            self.leaves[(node, slot)] = leaf

    def match(self, leaf: Leaf, entry: Entry, used: set[str]) -> Wire | None:
        """The latest earlier output with the same values: same shape, then any parameter, a reshape, a cast.

        Backward inputs (gradients) only match backward outputs; `used` holds producers this op already
        took, which a constant-valued input (zeros, ones) may not take again.
        """
        key = leaf.key()
        if key is None:
            return None
        backward = entry.phase == "backward"
        scale = 0.5 if leaf.constant else 1.0

        def seen(pool: Mapping[Any, list[_Ref]], k: Any) -> list[_Ref]:
            """Eligible earlier outputs under `k`, most recent first (at most `_WINDOW`: big dumps stay linear)."""
            out: list[_Ref] = []
            for r in reversed(pool.get(k, ())):
                if (not backward or r.phase == "backward") and r.node not in used:
                    out.append(r)
                    if len(out) == _WINDOW:
                        break
            return out

        if refs := seen(self.exact, key):
            base = 0.99 if leaf.md5 else 0.9
            return refs[0].node, refs[0].slot, "stats", base * scale / len({r.node for r in refs})
        if not backward and key in self.params and not leaf.constant:
            module, pname, _ = self.params[key][0]
            return self.param_node(module, pname), 0, "param", 0.8 * scale
        if leaf.stats is None:
            return None
        if refs := seen(self.view, leaf.key(view=True)):
            return refs[0].node, refs[0].slot, "view", 0.6 * scale / len({r.node for r in refs})
        if leaf.meta.dtype in FLOAT_DTYPES and not leaf.constant:
            for ref in seen(self.cast, leaf.meta.shape):
                if ref.leaf.meta.dtype != leaf.meta.dtype and _close(ref.leaf, leaf):
                    return ref.node, ref.slot, "cast", 0.5
        return None

    def param(self, leaf: Leaf, entry: Entry, taken: set[str]) -> Wire | None:
        """A parameter of the entry's module (any, for the optimizer) equal to `leaf`, or its cast to another dtype."""
        module, anywhere = entry.module, entry.phase == "optimizer"

        def inside(m: str, pname: str) -> bool:
            mine = anywhere or m == module or m == "" or module.startswith(m + ".")
            return mine and _param_id(m, pname) not in taken

        key = leaf.key()
        exact = [p for p in self.params.get(key, ()) if inside(p[0], p[1])] if key is not None else []
        if exact:
            m, pname, _ = max(exact, key=lambda p: len(p[0]))
            return self.param_node(m, pname), 0, "param", 0.95 * (0.5 if leaf.constant else 1.0)
        if leaf.stats is None or leaf.meta.dtype not in FLOAT_DTYPES or leaf.constant:
            return None
        for m, pname, p in sorted(self.by_shape.get(leaf.meta.shape, ()), key=lambda p: -len(p[0])):
            if inside(m, pname) and p.meta.dtype != leaf.meta.dtype and p.meta.dtype in FLOAT_DTYPES \
                    and _close(p, leaf):
                return self.param_node(m, pname), 0, "param-cast", 0.8
        return None

    def param_node(self, module: str, pname: str) -> str:
        nid = _param_id(module, pname)
        if nid not in self.graph:
            leaf = self.param_leaves[(module, pname)]
            self.graph.add_node(OpNode(nid, "param", module, -1, "param", outputs=(leaf.meta,),
                                       attrs={"msprobe": leaf.name}))
            self.publish(leaf, nid, 0, "forward", findable=False)
        return nid

    def placeholder(self, leaf: Leaf, entry: Entry) -> str:
        """An input node for a tensor no earlier record produced (a model input, buffer or undumped op's output)."""
        nid = f"input:{self.inputs}"
        self.inputs += 1
        self.graph.add_node(OpNode(nid, "input", "", -1, "input", outputs=(leaf.meta,), phase=entry.phase,
                                   attrs={"msprobe": leaf.name}))
        self.publish(leaf, nid, 0, entry.phase)
        return nid

    def finish(self, skipped: int) -> Built:
        table = StatsTable()
        if self.keys:
            table.add_many(self.keys, stats_rows([self.leaves[k] for k in self.keys]))
        return Built(self.graph, table, self.leaves, self.matches, skipped)


def _close(a: Leaf, b: Leaf, rtol: float = 1e-2) -> bool:
    """Statistics equal up to the rounding of a cast to a 16-bit float."""
    assert a.stats is not None and b.stats is not None
    for x, y in zip(a.stats, b.stats):
        if x is None or y is None:
            continue
        if not (math.isfinite(x) and math.isfinite(y)) or abs(x - y) > rtol * max(abs(x), abs(y)) + 1e-6:
            return False
    return True
