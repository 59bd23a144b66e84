"""Node and edge records of `OpGraph`: one frozen record per executed operator or placeholder.

Readers build 100k of them at a time, so `op_node` and `op_nodes` build them without the frozen
dataclass's per-field `object.__setattr__`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Literal, Mapping, cast

from ascend_tui.evidence import SourceLocation, TensorMeta

NodeKind = Literal["op", "input", "param", "buffer", "const", "output"]
PLACEHOLDER_KINDS = frozenset({"input", "param", "buffer", "const"})
NODE_COLUMNS = ("id", "op_type", "module", "index", "kind", "inputs", "outputs", "source", "phase",
                "module_class", "attrs")


@dataclass(frozen=True, slots=True)
class OpNode:
    """One executed operator (or a placeholder for a graph input, parameter, buffer or constant)."""

    id: str
    op_type: str
    module: str
    index: int
    kind: NodeKind = "op"
    inputs: tuple[TensorMeta | None, ...] = ()
    outputs: tuple[TensorMeta | None, ...] = ()
    source: SourceLocation | None = None
    phase: str = "forward"
    module_class: str = ""
    attrs: Mapping[str, Any] | None = None

    @property
    def is_placeholder(self) -> bool:
        return self.kind in PLACEHOLDER_KINDS

    @property
    def short_op(self) -> str:
        """`addmm` for `aten.addmm` — what fits a narrow column."""
        return self.op_type.rsplit(".", 1)[-1]


class _Unfrozen:
    """`OpNode`'s slots in its order without its frozen `__setattr__`: filled by plain attribute stores, then
    made an `OpNode` by assigning `__class__` (allowed between classes with the same slots)."""

    __slots__ = NODE_COLUMNS

    def __init__(self, id: str, op_type: str, module: str, index: int, kind: NodeKind,
                 inputs: tuple[TensorMeta | None, ...], outputs: tuple[TensorMeta | None, ...],
                 source: SourceLocation | None, phase: str, module_class: str, attrs: Mapping[str, Any] | None
                 ) -> None:
        self.id = id
        self.op_type = op_type
        self.module = module
        self.index = index
        self.kind = kind
        self.inputs = inputs
        self.outputs = outputs
        self.source = source
        self.phase = phase
        self.module_class = module_class
        self.attrs = attrs


def op_node(id: str, op_type: str, module: str, index: int, kind: NodeKind, inputs: tuple[TensorMeta | None, ...],
            outputs: tuple[TensorMeta | None, ...], source: SourceLocation | None, phase: str, module_class: str,
            attrs: Mapping[str, Any] | None) -> OpNode:
    """`OpNode(...)` with every field given, at a third of the cost: a frozen dataclass's `__init__` sets each
    field through `object.__setattr__` (readers build 100k nodes at a time)."""
    node: Any = _Unfrozen(id, op_type, module, index, kind, inputs, outputs, source, phase, module_class, attrs)
    node.__class__ = OpNode
    return node  # an `OpNode` now (no `typing.cast`: a Python call per node that does nothing)


def op_nodes(*columns: Iterable[Any]) -> list[OpNode]:
    """`op_node` over eleven columns in `NODE_COLUMNS` order (`itertools.repeat` for a constant): the records
    of a reader's whole batch, without a Python call per node besides the store of its fields."""
    nodes: list[Any] = list(map(_Unfrozen, *columns))
    for node in nodes:
        node.__class__ = OpNode
    return cast("list[OpNode]", nodes)


@dataclass(frozen=True, slots=True)
class Edge:
    """A tensor from output `out_slot` of `src` into input `in_slot` of `dst`."""

    src: str
    dst: str
    out_slot: int
    in_slot: int


def derive(node: OpNode, **changes: Any) -> OpNode:
    """A copy of `node` with some fields changed."""
    return replace(node, **changes)
