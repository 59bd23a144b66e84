"""Tensor types of an ONNX model's nodes, read from the file (or ONNX shape inference) when first asked for.

The reader's walk records which graph's declarations come into scope when (`steps`: a graph's
ordinal) and which tensor names each run of nodes reads and writes (`(first position, input
names, output names)`); `TensorTypes` replays that record against the graphs' `value_info`,
inputs, outputs and initializers, so each node gets the types an eager walk would have given it,
without `ascend-tui graph` paying for them. Where the exporter left most tensors untyped, the
replay runs over the inferred model instead.
"""

from __future__ import annotations

from operator import attrgetter, itemgetter, methodcaller
from pathlib import Path
from typing import Any, Union

from ascend_tui.evidence import TensorMeta
from ascend_tui.progress import Progress

DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
          9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128",
          16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz",
          21: "uint4", 22: "int4", 23: "float4_e2m1", 24: "float8_e8m0", 25: "uint2", 26: "int2",
          27: "float6_e2m3", 28: "float6_e3m2"}
CHUNK = 1024  # value_info entries read at a time (few protobuf wrappers alive at once: each costs less)
SUBGRAPH_OPS_ATTR = (5, 10)  # AttributeProto.GRAPH, GRAPHS
CONTROL_FLOW = frozenset({"If", "Loop", "Scan", "SequenceMap"})
PLAIN_DOMAINS = frozenset({"", "ai.onnx"})
_NAME, _TYPE = attrgetter("name"), attrgetter("type")
_SERIALIZE = methodcaller("SerializeToString")
_FIRST = itemgetter(0)
_UNTYPED = (None,)

Tensors = tuple[Union[TensorMeta, None], ...]
# One step of a walk: a graph's declarations come into scope (its ordinal), or a run of nodes from a position
# reads (None for placeholders: no inputs) and writes the tensors named.
Step = Union[int, tuple[int, Union[list[list[str]], None], list[list[str]]]]


def tensor_meta(type_proto: Any, cache: dict[tuple[int, tuple[int, ...]], TensorMeta] | None = None
                ) -> TensorMeta | None:
    """Shape (symbolic dims as -1) and dtype of a `TypeProto` holding a tensor; None for other types."""
    if not type_proto.HasField("tensor_type"):
        return None
    tt = type_proto.tensor_type
    shape = tuple(d.dim_value if d.dim_value or not d.dim_param else -1 for d in tt.shape.dim) \
        if tt.HasField("shape") else ()
    key = (tt.elem_type, shape)
    if cache is not None and (hit := cache.get(key)) is not None:
        return hit
    meta = TensorMeta(shape, DTYPES.get(tt.elem_type, f"onnx_{tt.elem_type}"))
    if cache is not None:
        cache[key] = meta
    return meta


def holds_graphs(node: Any) -> bool:
    """True for a node whose attributes hold graphs the walk enters: If/Loop/Scan, custom-domain ops with some."""
    return (node.op_type in CONTROL_FLOW or node.domain not in PLAIN_DOMAINS) \
        and any(a.type in SUBGRAPH_OPS_ATTR for a in node.attribute)


def bodies(node: Any) -> list[tuple[str, int, Any]]:
    """(attribute name, index or -1 for a lone graph, graph) of each body of `node`, in the walk's order."""
    found: list[tuple[str, int, Any]] = []
    for a in node.attribute:
        if a.type == 5:
            found.append((a.name, -1, a.g))
        elif a.type == 10:
            found += [(a.name, k, g) for k, g in enumerate(a.graphs)]
    return found


def graphs_in_walk_order(graph: Any) -> list[Any]:
    """`graph` and every body in it, in the order the reader's walk brings their declarations into scope."""
    found = [graph]
    for node in graph.node:
        if holds_graphs(node):
            for _, _, body in bodies(node):
                found += graphs_in_walk_order(body)
    return found


class TypeTable:
    """Tensor types by name as a walk sees them: a body's declarations replace the outer ones from then on."""

    __slots__ = ("types", "singles", "metas", "by_bytes")

    def __init__(self) -> None:
        self.types: dict[str, TensorMeta] = {}
        self.singles: dict[str, tuple[TensorMeta]] = {}  # tensor name -> (its type,): one tuple per type
        self.metas: dict[tuple[int, tuple[int, ...]], TensorMeta] = {}
        self.by_bytes: dict[bytes, tuple[TensorMeta] | None] = {}  # a serialized TypeProto -> (its meta,)

    def collect(self, graph: Any) -> None:
        """Types from the graph's inputs, outputs, value_info and initializers (one `TensorMeta` per distinct
        serialized `TypeProto`: exporters repeat a few types many times)."""
        by_bytes, types, singles = self.by_bytes, self.types, self.singles
        for infos in (graph.input, graph.output, graph.value_info):
            for start in range(0, len(infos), CHUNK):
                chunk = infos[start:start + CHUNK]
                names, raws = list(map(_NAME, chunk)), list(map(_SERIALIZE, map(_TYPE, chunk)))
                for raw in set(raws).difference(by_bytes):
                    meta = tensor_meta(chunk[raws.index(raw)].type, self.metas)
                    by_bytes[raw] = None if meta is None else (meta,)
                found = list(map(by_bytes.__getitem__, raws))
                if None in found:  # not tensors (sequences, maps): no meta
                    kept = [k for k, single in enumerate(found) if single is not None]
                    names, found = [names[k] for k in kept], [found[k] for k in kept]
                singles.update(zip(names, found))
                types.update(zip(names, map(_FIRST, found)))
        for init in graph.initializer:
            if init.name not in types:
                meta = TensorMeta(tuple(init.dims), DTYPES.get(init.data_type, "unknown"))
                types[init.name] = meta
                singles[init.name] = (meta,)

    def fill(self, base: int, inputs: list[list[str]] | None, outputs: list[list[str]],
             ins: list[Tensors], outs: list[Tensors]) -> None:
        """Set `ins`/`outs` from `base` on to the types of a run of nodes' input and output names."""
        types_get, singles_get = self.types.get, self.singles.get
        if inputs is not None:
            # Spelled out for one and two tensors (most ops), where a call of map() per node costs more than the rest.
            ins[base:base + len(inputs)] = [
                (types_get(tensors[0]), types_get(tensors[1])) if len(tensors) == 2
                else singles_get(tensors[0], _UNTYPED) if len(tensors) == 1 else (*map(types_get, tensors),)
                for tensors in inputs]
        outs[base:base + len(outputs)] = [
            singles_get(tensors[0], _UNTYPED) if len(tensors) == 1 else (*map(types_get, tensors),)
            for tensors in outputs]


def replay(graphs: list[Any], steps: list[Step], count: int) -> tuple[list[Tensors], list[Tensors]]:
    """The input and output types of each of `count` node positions, by the walk's `steps` over `graphs`."""
    table = TypeTable()
    ins: list[Tensors] = [()] * count
    outs: list[Tensors] = [()] * count
    for step in steps:
        if type(step) is int:
            table.collect(graphs[step])
        else:
            base, inputs, outputs = step  # type: ignore[misc]
            table.fill(base, inputs, outputs, ins, outs)
    return ins, outs


class TensorTypes:
    """The resolver an ONNX load hands its graph: the nodes' tensor types from the model it kept, by inference
    first where `infer` (the exporter typed too few tensors); `extra["shape_inference"]` then says if it ran."""

    __slots__ = ("path", "model", "graphs", "steps", "count", "extra", "infer")

    def __init__(self, path: Path, model: Any, graphs: list[Any], steps: list[Step], count: int,
                 extra: dict[str, Any], infer: bool) -> None:
        self.path, self.model, self.graphs, self.steps, self.count = path, model, graphs, steps, count
        self.extra, self.infer = extra, infer

    def __call__(self, progress: Progress | None) -> tuple[list[Tensors], list[Tensors]]:
        model, graphs, steps = self.model, self.graphs, self.steps
        self.model = self.graphs = None  # what the graph no longer needs once typed (a whole model proto)
        self.steps = []
        if self.infer:
            self.extra["shape_inference"] = False
            if progress is not None:
                progress("inferring shapes", 0, None)
            inferred = _inferred(model)
            if inferred is not None:
                found = graphs_in_walk_order(inferred.graph)
                if len(found) == len(graphs):  # inference never adds or drops bodies; if it did, keep the file's
                    graphs = found
                    self.extra["shape_inference"] = True
        del model
        if progress is not None:
            progress("reading tensor types", 0, None)
        return replay(graphs, steps, self.count)


def _inferred(model: Any) -> Any:
    """ONNX shape inference's typed copy of `model`, or None where it rejects the model."""
    try:
        import onnx.shape_inference
    except ImportError:
        return None
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # noqa: BLE001 - a model inference rejects keeps the types its file has
        return None
