"""Reader of ONNX models into an `OpGraph`: nodes, port-carrying edges, shapes, module paths and source lines.

Module paths come from the `metadata_props` that `torch.onnx.export(dynamo=True)` writes
(`pkg.torch.onnx.name_scopes`, `class_hierarchy`, `stack_trace`), else from the legacy
exporter's `/attn/qkv/MatMul` node names, so they read like live capture's. External weights
are never loaded; shape inference runs only where the exporter left tensor types out.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ascend_tui.errors import InputError
from ascend_tui.evidence import SourceLocation, TensorMeta
from ascend_tui.formats.torch_meta import NodeNameModules, literal_list, module_from_scopes, source_from_trace
from ascend_tui.formats.reader import FunctionReader
from ascend_tui.graph.ids import IdMinter
from ascend_tui.graph.opgraph import OpGraph, OpNode, op_node
from ascend_tui.investigation import Investigation, RunInfo
from ascend_tui.progress import Progress, check_cancel, paused_gc

DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
          9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128",
          16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz",
          21: "uint4", 22: "int4", 23: "float4_e2m1", 24: "float8_e8m0", 25: "uint2", 26: "int2",
          27: "float6_e2m3", 28: "float6_e3m2"}
_SUBGRAPH_OPS_ATTR = (5, 10)  # AttributeProto.GRAPH, GRAPHS
_INFER_LIMIT = 2_000_000_000
_CONTROL_FLOW = frozenset({"If", "Loop", "Scan", "SequenceMap"})
_MISSING: Any = object()


def sniff(path: Path) -> bool:
    """Files named `*.onnx`."""
    return path.suffix.lower() == ".onnx" and path.is_file()


def _import_onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise InputError("", "reading ONNX models needs the onnx package (pip install 'ascend-tui[onnx]')") from None
    return onnx


def read_model(path: Path) -> Any:
    """The `ModelProto` without external weights; anything unreadable becomes one `InputError` line."""
    onnx = _import_onnx()
    try:
        model = onnx.load(str(path), load_external_data=False)
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise InputError(path, f"not an ONNX model ({type(exc).__name__}: {exc})".rstrip(": )") + ")") from None
    if not model.HasField("graph") or len(model.graph.node) == 0:
        raise InputError(path, "ONNX model has no graph nodes (is this an ONNX file?)")
    return model


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


def _needs_inference(graph: Any) -> bool:
    """True when the exporter typed fewer than half as many tensors as there are nodes."""
    return len(graph.value_info) + len(graph.output) < len(graph.node) // 2


class _OnnxBuilder:
    """Walks the main graph and every If/Loop/Scan body, minting ids and resolving tensor names to producers."""

    def __init__(self, path: Path, cancel: threading.Event | None, progress: Progress | None) -> None:
        self.path = path
        self.cancel = cancel
        self.progress = progress
        self.minter = IdMinter()
        self.nodes: list[OpNode] = []
        self.edges: list[tuple[int, int, int, int]] = []  # (producer, consumer, out slot, in slot) by position
        self.types: dict[str, TensorMeta] = {}
        self.metas: dict[tuple[int, tuple[int, ...]], TensorMeta] = {}
        self.module_of_head = NodeNameModules()
        self.unresolved: list[str] = []
        self.without_module: list[int] = []  # positions of ops neither metadata nor name placed in a module
        self.singles: dict[int, tuple[TensorMeta | None]] = {}  # id(meta) -> (meta,): one tuple per type
        self.inherited = 0
        self.with_metadata = 0
        self.subgraphs = 0

    def collect_types(self, graph: Any) -> None:
        by_bytes: dict[bytes, TensorMeta | None] = {}  # exporters repeat a few types many times
        types, known = self.types, by_bytes.get
        for infos in (graph.input, graph.output, graph.value_info):
            for vi in infos:
                t = vi.type
                raw = t.SerializeToString()
                meta = known(raw, _MISSING)
                if meta is _MISSING:
                    meta = by_bytes[raw] = tensor_meta(t, self.metas)
                if meta is not None:
                    types[vi.name] = meta
        for init in graph.initializer:
            self.types.setdefault(init.name, TensorMeta(tuple(init.dims), DTYPES.get(init.data_type, "unknown")))

    def placeholders(self, graph: Any, prefix: str, scope: dict[str, tuple[int, int]], parent_module: str) -> None:
        for name in [i.name for i in graph.initializer] + [s.values.name for s in graph.sparse_initializer]:
            nid = f"param:{prefix}{name}"
            module = name.rsplit(".", 1)[0] if "." in name and not prefix else ""
            scope[name] = (len(self.nodes), 0)
            self.nodes.append(OpNode(nid, "param", module, -1, "param", outputs=(self.types.get(name),),
                                     attrs={"name": name}))
        for vi in graph.input:
            if vi.name in scope:
                continue  # old exporters list initializers as inputs too
            scope[vi.name] = (len(self.nodes), 0)
            self.nodes.append(OpNode(f"input:{prefix}{vi.name}", "input", parent_module, -1, "input",
                                     outputs=(self.types.get(vi.name),), attrs={"name": vi.name}))

    def walk(self, graph: Any, outer: list[dict[str, tuple[int, int]]], prefix: str, parent_module: str,
             total: int) -> None:
        scope: dict[str, tuple[int, int]] = {}  # tensor name -> (producer position, output slot)
        self.placeholders(graph, prefix, scope, parent_module)
        scopes = [scope, *outer]
        types_get, edges, nodes, mint = self.types.get, self.edges, self.nodes, self.minter.mint
        module_of_head, unresolved, scope_get = self.module_of_head, self.unresolved, scope.get
        singles, singles_get = self.singles, self.singles.get
        for node in graph.node:  # every protobuf field is read once: each read builds a Python object
            index = len(nodes)
            if (index & 4095) == 0:
                check_cancel(self.cancel, "loading the ONNX model was cancelled")
                if self.progress is not None:
                    self.progress("building graph", index, total)
            name, op_type, domain = node.name, node.op_type, node.domain
            attrs: dict[str, Any] = {"name": name}
            if node.metadata_props:
                module, module_class, source, has_module = self.from_metadata(node, attrs)
            else:
                module, module_class, source = module_of_head[name.rpartition("/")[0]], "", None
                has_module = name[:1] == "/"
            if not module:
                if parent_module:
                    module = parent_module
                elif not has_module:
                    self.without_module.append(index)
            if not has_module:
                attrs["module_inferred"] = True
            if domain and domain != "ai.onnx":
                attrs["domain"] = domain
            nid = mint(module, op_type or "op")
            inputs = node.input[:]
            outputs = node.output[:]
            for slot, tensor in enumerate(inputs):
                if not tensor:
                    continue
                src = scope_get(tensor)
                if src is None:
                    for sc in scopes[1:]:
                        src = sc.get(tensor)
                        if src is not None:
                            break
                    else:
                        unresolved.append(tensor)
                        continue
                edges.append((src[0], index, src[1], slot))
            if len(outputs) == 1:  # most ops: share one tuple per output type (fewer objects for the collector)
                meta = types_get(outputs[0])
                outs = singles_get(id(meta))
                if outs is None:
                    outs = singles[id(meta)] = (meta,)
            else:
                outs = tuple(map(types_get, outputs))
            nodes.append(op_node(nid, op_type, module, index, "op", tuple(map(types_get, inputs)), outs, source,
                                 "forward", module_class, attrs))
            for slot, tensor in enumerate(outputs):
                if tensor:
                    scope[tensor] = (index, slot)
            if op_type in _CONTROL_FLOW or "domain" in attrs:
                self.subgraphs_of(node, nodes[-1], attrs, scopes, prefix, total)

    def from_metadata(self, node: Any, attrs: dict[str, Any]) -> tuple[str, str, SourceLocation | None, bool]:
        """(module, module class, source, whether a module was named) from the dynamo exporter's metadata_props."""
        meta = {p.key: p.value for p in node.metadata_props}
        scopes_list = literal_list(meta.get("pkg.torch.onnx.name_scopes"))
        classes = literal_list(meta.get("pkg.torch.onnx.class_hierarchy"))
        module, module_class = module_from_scopes(scopes_list, classes)
        source = source_from_trace(meta.get("pkg.torch.onnx.stack_trace"))
        if classes and classes[-1].startswith("aten."):
            attrs["aten"] = classes[-1]
        fx = meta.get("pkg.torch.onnx.fx_node", "")
        if fx.startswith("%"):
            attrs["aliases"] = [fx[1:].split(" ", 1)[0]]
        self.with_metadata += bool(scopes_list)
        return module, module_class, source, bool(scopes_list)

    def subgraphs_of(self, node: Any, op: OpNode, attrs: dict[str, Any], scopes: list[dict[str, tuple[int, int]]],
                     prefix: str, total: int) -> None:
        """Walk the If/Loop/Scan bodies (and a custom domain's graph attributes) after their node."""
        subs = [a for a in node.attribute if a.type in _SUBGRAPH_OPS_ATTR]
        if not subs:
            return
        attrs["subgraphs"] = [a.name for a in subs]  # the node's own attrs, so its record shows them
        for a in subs:
            bodies = [a.g] if a.type == 5 else list(a.graphs)
            for k, body in enumerate(bodies):
                self.subgraphs += 1
                self.collect_types(body)
                tag = f"{attrs['name'] or op.id}.{a.name}" + (f".{k}" if a.type == 10 else "")
                self.walk(body, scopes, f"{prefix}{tag}/", op.module, total)

    def inherit_modules(self) -> None:
        """Nodes the optimizer made (no metadata) take the innermost module holding all their neighbours."""
        todo = self.without_module
        if not todo:
            return
        neighbours: dict[int, list[int]] = {}
        for src, dst, _, _ in self.edges:
            neighbours.setdefault(dst, []).append(src)
            neighbours.setdefault(src, []).append(dst)
        for i in todo:
            n = self.nodes[i]
            known = [o for o in (self.nodes[x] for x in neighbours.get(i, ()))
                     if o.kind == "op" and not (o.attrs or {}).get("module_inferred")]
            if not known:
                continue
            module = common_module([o.module for o in known])
            owner = next((o for o in known if o.module == module), known[0])
            self.nodes[i] = OpNode(n.id, n.op_type, module, n.index, n.kind, n.inputs, n.outputs, owner.source,
                                   n.phase, owner.module_class if owner.module == module else "", n.attrs)
            self.inherited += 1


def common_module(paths: list[str]) -> str:
    """The innermost module path that holds every one of `paths` (`attn` for `attn.qkv` and `attn`)."""
    split = [p.split(".") if p else [] for p in paths]
    common: list[str] = []
    for parts in zip(*split):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return ".".join(common)


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None) -> Investigation:
    """Read an ONNX model (weights stay on disk) into an `Investigation` with a graph and no evidence."""
    with paused_gc():
        return _load(Path(path), progress, cancel)


def _load(path: Path, progress: Progress | None, cancel: threading.Event | None) -> Investigation:
    path = Path(path)
    if progress is not None:
        progress("reading ONNX model", 0, None)
    model = read_model(path)
    graph = model.graph
    inferred = False
    if _needs_inference(graph) and model.ByteSize() < _INFER_LIMIT:
        onnx = _import_onnx()
        check_cancel(cancel, "loading the ONNX model was cancelled")
        if progress is not None:
            progress("inferring shapes", 0, None)
        try:
            model = onnx.shape_inference.infer_shapes(model, strict_mode=False)
            graph = model.graph
            inferred = True
        except Exception:  # noqa: BLE001 - a model inference rejects still has a graph worth showing
            inferred = False
    builder = _OnnxBuilder(path, cancel, progress)
    builder.collect_types(graph)
    builder.walk(graph, [], "", "", len(graph.node))
    builder.inherit_modules()
    out = OpGraph(graph.name or path.stem)
    try:
        out.add_bulk(builder.nodes, builder.edges, by_position=True)
    except ValueError as exc:
        raise InputError(path, f"ONNX graph is malformed: {exc}") from None
    notes: list[str] = []
    if builder.unresolved:
        notes.append(f"{len(builder.unresolved)} node inputs name tensors nothing produces "
                     f"(e.g. {builder.unresolved[0]!r})")
    opset = {imp.domain or "ai.onnx": imp.version for imp in model.opset_import}
    run = RunInfo(target=str(path), source="onnx",
                  device={"backend": "offline", "name": "ONNX model", "inf_nan_mode": None},
                  extra={"producer": f"{model.producer_name} {model.producer_version}".strip(), "opset": opset,
                         "ir_version": model.ir_version, "shape_inference": inferred,
                         "nodes_with_module_metadata": builder.with_metadata,
                         "modules_inherited_from_neighbours": builder.inherited, "subgraphs": builder.subgraphs,
                         "outputs": [o.name for o in graph.output], "notes": notes})
    return Investigation(out, run=run)


READER = FunctionReader("ONNX model", sniff, load)
