"""Reader of ONNX models into an `OpGraph`: nodes, port-carrying edges, shapes, module paths and source lines.

Module paths come from the `metadata_props` that `torch.onnx.export(dynamo=True)` writes
(`pkg.torch.onnx.name_scopes`, `class_hierarchy`, `stack_trace`), else from the legacy
exporter's `/attn/qkv/MatMul` node names, so they read like live capture's. External weights
are never loaded. Tensor types are read when something first reads a node's tensors
(`OpGraph.defer_shapes`, `onnx_types.py`), not on every open, and so is shape inference where the
exporter left them out; the file is parsed with onnx's generated protobuf module alone, so a
plain open does not import the `onnx` package (a second here, mostly `ml_dtypes`). Edges are
counted on open and made when a view first reads one (`link_later`; `onnx_links.py`), where the names allow it.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import threading
from itertools import chain, compress, repeat
from operator import attrgetter, eq, ge, itemgetter, not_
from pathlib import Path
from typing import Any, cast

from ascend_tui.errors import InputError
from ascend_tui.evidence import SourceLocation
from ascend_tui.readers.graphs.onnx_types import (CONTROL_FLOW, DTYPES, PLAIN_DOMAINS, SUBGRAPH_OPS_ATTR, Step,
                                                  TensorTypes, tensor_meta)
from ascend_tui.readers.graphs.onnx_links import Segment, input_readers, link_segments, segment_neighbours
from ascend_tui.readers.graphs.onnx_metadata import (DeferredMetadata, ScopeModules, common_module,
                                                     legacy_modules, scope_texts)
from ascend_tui.readers.graphs.torch_meta import NodeNameModules
from ascend_tui.readers.base import FunctionReader
from ascend_tui.graph.ids import IdMinter
from ascend_tui.graph.opgraph import OpGraph, OpNode, op_nodes
from ascend_tui.investigation import Investigation, RunInfo
from ascend_tui.progress import Progress, check_cancel, paused_gc

__all__ = ["DTYPES", "READER", "load", "read_model", "sniff", "tensor_meta"]
_INFER_LIMIT = 2_000_000_000
_KEEP_LIMIT = 256 << 20  # a typed model file bigger than this has its types read on open (its proto is let go)
CHUNK = 1024  # protobuf entries read at a time (cancel and progress are checked between chunks of nodes)
_FIELDS = attrgetter("name", "op_type", "domain", "input", "output", "metadata_props")
_ALL = itemgetter(slice(None))
_NO_TENSORS = ()  # a record's tensors until the types are read: nothing reads them before (every read resolves)
_PB2_IMPORT = re.compile(r"^from \.(\w+) import \*", re.M)
_PROTOS: list[Any] = []  # onnx's generated protobuf module, once found
# The tensors a graph's nodes can read, innermost graph first: each graph's names -> the producer's position where
# its output 0 made the tensor (no tuple a tensor, most of them), else -1, and then (position, output slot) in the
# second dict.
Scope = tuple[dict[str, int], dict[str, tuple[int, int]]]


def sniff(path: Path) -> bool:
    """Files named `*.onnx`."""
    return path.suffix.lower() == ".onnx" and path.is_file()


def _import_onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise InputError("", "reading ONNX models needs the onnx package (pip install 'ascend-tui[onnx]')") from None
    return onnx


def _protos() -> Any:
    """A module with onnx's `ModelProto`: the package when something imported it, else its generated
    `onnx_ml_pb2` run on its own (protobuf alone: ~0.05 s against `import onnx`'s ~1 s here, most of it
    `ml_dtypes`). The classes are the ones `import onnx` gives later (protobuf keeps one descriptor pool
    and one class per message), so shape inference takes the model as it is; any surprise in onnx's
    layout falls back to importing it."""
    if _PROTOS:
        return _PROTOS[0]
    if hasattr(sys.modules.get("onnx"), "ModelProto"):
        return sys.modules["onnx"]
    try:
        spec = importlib.util.find_spec("onnx")
        folder = Path((spec.submodule_search_locations or [""])[0]) if spec is not None else None
        found = _PB2_IMPORT.search((folder / "onnx_pb.py").read_text(encoding="utf-8")) if folder else None
        if found is not None:
            name = found.group(1)
            pb2 = importlib.util.spec_from_file_location(f"{__name__}._{name}", folder / f"{name}.py")
            if pb2 is not None and pb2.loader is not None:
                module = importlib.util.module_from_spec(pb2)
                pb2.loader.exec_module(module)
                if "onnx" not in sys.modules or sys.modules["onnx"].ModelProto is module.ModelProto:
                    _PROTOS.append(module)
                    return module
    except Exception:  # noqa: BLE001 - any other layout of the package: import it the ordinary way
        pass
    return _import_onnx()


def read_model(path: Path) -> Any:
    """The `ModelProto` without external weights (what `onnx.load(path, load_external_data=False)` reads);
    anything unreadable becomes one `InputError` line."""
    protos = _protos()
    try:
        with open(path, "rb") as f:
            data = f.read()
        model = protos.ModelProto()
        decoded = model.ParseFromString(data)
        if decoded is not None and decoded != len(data):
            from google.protobuf.message import DecodeError

            raise DecodeError(f"Protobuf decoding consumed too few bytes: {decoded} out of {len(data)}")
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise InputError(path, f"not an ONNX model ({type(exc).__name__}: {exc})".rstrip(": )") + ")") from None
    if not model.HasField("graph") or len(model.graph.node) == 0:
        raise InputError(path, "ONNX model has no graph nodes (is this an ONNX file?)")
    return model


def _needs_inference(graph: Any) -> bool:
    """True when the exporter typed fewer than half as many tensors as there are nodes."""
    return len(graph.value_info) + len(graph.output) < len(graph.node) // 2


class _OnnxBuilder:
    """Walks the main graph and every If/Loop/Scan body, minting ids and resolving tensor names to producers.

    Nodes are read a chunk at a time, column by column (`attrgetter` over the chunk, module paths per
    unique name prefix, ids minted in one call, records built by `map`); only edges and the tensor
    scope need a loop over nodes. A node with bodies ends its segment, so its bodies are walked
    right after it, as the ids and positions of a one-node-at-a-time walk require.
    """

    def __init__(self, path: Path, cancel: threading.Event | None, progress: Progress | None) -> None:
        self.path = path
        self.cancel = cancel
        self.progress = progress
        self.minter = IdMinter()
        self.nodes: list[OpNode] = []
        # Edges by node position, as OpGraph keeps them: one (producer, consumer, out slot, in slot)
        # tuple per edge, in the consumer's `ins` list and the producer's `outs` list.
        self.ins: list[list[tuple[int, int, int, int]]] = []
        self.outs: list[list[tuple[int, int, int, int]]] = []
        # Segments whose edges are made on first ask instead (`link_later`); None once the walk met a segment
        # that needs its edges made as it reads (`link_now`), and from then on.
        self.unlinked: list[Segment] | None = []
        self.unlinked_edges = 0
        # What the tensor types are read from later (`onnx_types.replay`): the graphs in the order their
        # declarations came into scope, and the steps of the walk (a graph's ordinal, or a run of nodes' names).
        self.graphs: list[Any] = []
        self.steps: list[Step] = []
        self.op_types: dict[str, str] = {}
        self.module_of_head = NodeNameModules()
        self.scope_module = ScopeModules()
        self.scope_at = [0]  # where in a node's metadata_props the name scopes were last found
        # Where the nodes with dynamo metadata are, to read the rest of it on first ask (`DeferredMetadata`):
        # (node container, first proto, first position, count) per segment, and (position, owner, same module)
        # per node that takes its module, source and class from a neighbour.
        self.segments: list[tuple[Any, int, int, int]] = []
        self.inherited_from: list[tuple[int, int, bool]] = []
        self.origin: tuple[Any, int] = ((), 0)  # the node container and first proto of the segment being added
        self.unresolved: list[str] = []
        self.without_module: list[int] = []  # positions of ops neither metadata nor name placed in a module
        self.inherited = 0
        self.with_metadata = 0
        self.subgraphs = 0

    def collect_types(self, graph: Any) -> None:
        """Note that the declarations of `graph` (inputs, outputs, value_info, initializers) come into scope here:
        a body's replace the outer ones from then on."""
        self.steps.append(len(self.graphs))
        self.graphs.append(graph)

    def placeholders(self, graph: Any, prefix: str, scope: dict[str, int], parent_module: str) -> None:
        base = len(self.nodes)
        for name in [i.name for i in graph.initializer] + [s.values.name for s in graph.sparse_initializer]:
            nid = f"param:{prefix}{name}"
            module = name.rsplit(".", 1)[0] if "." in name and not prefix else ""
            self.place(scope, name, OpNode(nid, "param", module, -1, "param", attrs={"name": name}))
        for vi in graph.input:
            if vi.name in scope:
                continue  # old exporters list initializers as inputs too
            self.place(scope, vi.name, OpNode(f"input:{prefix}{vi.name}", "input", parent_module, -1, "input",
                                              attrs={"name": vi.name}))
        if len(self.nodes) > base:  # each placeholder's one output is the tensor it is named after
            self.steps.append((base, None, [[cast("dict[str, str]", n.attrs)["name"]] for n in self.nodes[base:]]))

    def place(self, scope: dict[str, int], name: str, node: OpNode) -> None:
        scope[name] = len(self.nodes)
        self.nodes.append(node)
        if self.unlinked is None:
            self.ins.append([])
            self.outs.append([])

    def walk(self, graph: Any, outer: list[Scope], prefix: str, parent_module: str, total: int) -> None:
        scope: dict[str, int] = {}  # tensor name -> its producer's position (output 0), or -1: see `later`
        self.placeholders(graph, prefix, scope, parent_module)
        scope.pop("", None)  # "" is an optional input left out, never a tensor, even if an initializer is unnamed
        scopes = [(scope, {}), *outer]
        protos = graph.node
        for start in range(0, len(protos), CHUNK):
            check_cancel(self.cancel, "loading the ONNX model was cancelled")
            if self.progress is not None and not prefix:  # top-level operators out of `total` (bodies are extra)
                self.progress("building graph", start, total)
            chunk = protos[start:start + CHUNK]  # few protobuf wrappers alive at a time: each costs less
            columns = list(zip(*map(_FIELDS, chunk)))  # every field is read once: each read builds an object
            first = 0
            for cut in self.with_bodies(chunk, columns[1], columns[2]):
                self.origin = (protos, start + first)
                self.add_ops([column[first:cut + 1] for column in columns], scopes, parent_module)
                self.subgraphs_of(chunk[cut], self.nodes[-1], scopes, prefix, total)
                first = cut + 1
            if first < len(chunk):
                self.origin = (protos, start + first)
                self.add_ops([column[first:] for column in columns] if first else columns, scopes, parent_module)
        if self.progress is not None and not prefix:
            self.progress("building graph", len(protos), total)

    @staticmethod
    def with_bodies(chunk: list[Any], op_types: tuple[str, ...], domains: tuple[str, ...]) -> list[int]:
        """Positions in `chunk` of the nodes holding graphs: If/Loop/Scan, and custom-domain ops that have some."""
        if CONTROL_FLOW.isdisjoint(op_types) and PLAIN_DOMAINS.issuperset(domains):
            return []
        return [k for k, (node, op_type, domain) in enumerate(zip(chunk, op_types, domains))
                if (op_type in CONTROL_FLOW or domain not in PLAIN_DOMAINS)
                and any(a.type in SUBGRAPH_OPS_ATTR for a in node.attribute)]

    def add_ops(self, columns: list[tuple[Any, ...]], scopes: list[Scope], parent_module: str) -> None:
        """Add one segment of nodes (no bodies among them but maybe the last) from its `_FIELDS` columns."""
        names, op_types, domains, input_fields, output_fields, metadata = columns
        base, count = len(self.nodes), len(names)
        op_types = list(map(self.op_types.setdefault, op_types, op_types))  # one string per op type, not per node
        inputs, outputs = list(map(_ALL, input_fields)), list(map(_ALL, output_fields))  # `field[:]`: lists of str
        if any(metadata):
            modules, classes, sources, attrs, placed = self.from_metadata(names, metadata)
        else:
            modules = legacy_modules(self.module_of_head, names)
            classes, sources = repeat(""), repeat(None)
            attrs = [{"name": name} if name[:1] == "/" else {"name": name, "module_inferred": True}
                     for name in names]
            placed = None
        if "" in modules:
            for k in [k for k, module in enumerate(modules) if not module]:
                if parent_module:
                    modules[k] = parent_module
                elif not (placed[k] if placed is not None else names[k][:1] == "/"):
                    self.without_module.append(base + k)
        if not PLAIN_DOMAINS.issuperset(domains):
            for k, domain in enumerate(domains):
                if domain not in PLAIN_DOMAINS:
                    attrs[k]["domain"] = domain
        ids = self.minter.mint_all(modules, [op or "op" for op in op_types] if "" in op_types else op_types)
        self.steps.append((base, inputs, outputs))  # their types are read when first asked for
        positions = list(range(base, base + count))  # one int object a node, shared by its record and its edges
        self.link(positions, inputs, outputs, scopes)
        self.nodes += op_nodes(ids, op_types, modules, positions, repeat("op"), repeat(_NO_TENSORS),
                               repeat(_NO_TENSORS), sources, repeat("forward"), classes, attrs)

    def link(self, positions: list[int], inputs: list[list[str]], outputs: list[list[str]], scopes: list[Scope]
             ) -> None:
        """Edges into the nodes at `positions` from the producers their input names resolve to, then their outputs
        into scope."""
        if self.unlinked is not None:
            if len(scopes) == 1 and self.link_later(positions, inputs, outputs, scopes[0]):
                return
            self.link_now()
        scope, later = scopes[0]
        scope_get, ins, outs = scope.get, self.ins, self.outs
        outs += [[] for _ in inputs]
        for index, tensors, produced in zip(positions, inputs, outputs):
            # One or two inputs made in this graph by a first output (most ops) spelled out; the rest in edges_into().
            if len(tensors) == 2 and (a := scope_get(tensors[0], -1)) >= 0 and (b := scope_get(tensors[1], -1)) >= 0:
                first, second = (a, index, 0, 0), (b, index, 0, 1)
                ins.append([first, second])
                outs[a].append(first)
                outs[b].append(second)
            elif len(tensors) == 1 and (a := scope_get(tensors[0], -1)) >= 0:
                first = (a, index, 0, 0)
                ins.append([first])
                outs[a].append(first)
            else:
                ins.append(self.edges_into(index, tensors, scopes))
            if len(produced) == 1:
                if produced[0]:
                    scope[produced[0]] = index
            else:
                for slot, tensor in enumerate(produced):
                    if tensor:
                        if slot:
                            scope[tensor] = -1
                            later[tensor] = (index, slot)
                        else:
                            scope[tensor] = index

    def link_later(self, positions: list[int], inputs: list[list[str]], outputs: list[list[str]], scope_pair: Scope
                   ) -> bool:
        """What `link` does, with the edges kept as their producers' positions, to be made when first asked for
        (`link_segments`): where no tensor the segment makes was named before (by it or an earlier node) and every
        input names a tensor made before its reader, or none (""). Judged and resolved by C calls over the segment,
        no bytecode per node or tensor; False, nothing changed, where that does not hold (the walk then links as it
        reads: a name made twice, a name nothing made, which is noted, a tensor read before it is made)."""
        scope, later = scope_pair
        if not positions:
            return True
        made = list(chain.from_iterable(outputs))
        others: dict[str, tuple[int, int]] = {}
        if len(made) == len(positions) and "" not in made and all(outputs):  # one named tensor a node: most ops
            named, entries = made, zip(made, positions)
        else:  # as `link`: output 0 by its maker's position, another -1 here and (maker, slot) in `later`
            counts = list(map(len, outputs))
            slots = list(chain.from_iterable(map(range, counts)))
            makers = list(chain.from_iterable(map(repeat, positions, counts)))
            first = dict(compress(zip(made, makers), map(not_, slots)))
            others = dict(compress(zip(made, zip(makers, slots)), slots))
            first.pop("", None)  # a tensor left out
            others.pop("", None)
            named = list(filter(None, made))
            entries = chain(first.items(), zip(others, repeat(-1)))
        if not scope.keys().isdisjoint(named):
            return False
        size = len(scope)
        scope.update(entries)
        if len(scope) - size != len(named):  # made twice in the segment
            return self.forget(scope, named)
        names = list(chain.from_iterable(inputs))
        sources = list(map(scope.get, names, repeat(-2)))  # "" is never in scope
        missing = sources.count(-2)
        if missing and missing != names.count(""):
            return self.forget(scope, named)
        readers = input_readers(positions, list(map(len, inputs)))
        if any(map(ge, sources, readers)):
            return self.forget(scope, named)
        far: dict[int, tuple[int, int]] = {}  # (maker, slot) of each input made as an output past the first
        if (others or later) and -1 in sources:
            second = list(map(eq, sources, repeat(-1)))
            wanted = list(compress(names, second))
            far_makers = list(map(others.get, wanted, map(later.get, wanted)))
            if any(map(ge, map(itemgetter(0), far_makers), compress(readers, second))):
                return self.forget(scope, named)
            far = dict(zip(compress(range(len(sources)), second), far_makers))
        later.update(others)
        cast("list[Segment]", self.unlinked).append((positions[0], inputs, sources, far))
        self.unlinked_edges += len(sources) - missing
        return True

    @staticmethod
    def forget(scope: dict[str, int], named: list[str]) -> bool:
        """Take the names a segment made out of `scope` again (none was in it before): False, for `link_later`."""
        for name in named:
            scope.pop(name, None)
        return False

    def link_now(self) -> None:
        """Make the edges of the segments linked later, and link each segment as it is read from here on."""
        if self.unlinked is not None:
            self.ins, self.outs = link_segments(len(self.nodes), self.unlinked)
            self.unlinked = None

    def edges_into(self, index: int, tensors: list[str], scopes: list[Scope]) -> list[tuple[int, int, int, int]]:
        """The edges into node `index` from its input names, innermost scope first; names nothing made are noted."""
        into: list[tuple[int, int, int, int]] = []
        for slot, tensor in enumerate(tensors):
            if not tensor:  # an optional input left out
                continue
            for sc, later in scopes:
                src = sc.get(tensor)
                if src is not None:
                    break
            else:
                self.unresolved.append(tensor)
                continue
            edge = (src, index, 0, slot) if src >= 0 else (later[tensor][0], index, later[tensor][1], slot)
            into.append(edge)
            self.outs[edge[0]].append(edge)
        return into

    def from_metadata(self, names: tuple[str, ...], metadata: tuple[Any, ...]
                      ) -> tuple[list[str], list[str], list[SourceLocation | None], list[dict[str, Any]], list[bool]]:
        """(modules, module classes, sources, attrs, whether a module was named) of a segment where some nodes
        carry the dynamo exporter's metadata_props; the others are placed by their names. Only the name scopes
        are read here: the classes, sources and metadata attrs when first asked for (`onnx_metadata.py`)."""
        self.segments.append((*self.origin, len(self.nodes), len(names)))
        texts = scope_texts(metadata, self.scope_at)
        if None in texts:  # some nodes without metadata: placed by their names
            with_props = [k for k, text in enumerate(texts) if text is not None]
            found, named = self.scope_module.modules([texts[k] for k in with_props])
            modules, placed = [""] * len(names), [False] * len(names)
            for k, module, has_module in zip(with_props, found, named):
                modules[k], placed[k] = module, has_module
            for k in [k for k, text in enumerate(texts) if text is None]:
                modules[k], placed[k] = self.module_of_head[names[k].rpartition("/")[0]], names[k][:1] == "/"
        else:
            modules, placed = self.scope_module.modules(cast("list[str]", texts))
            named = placed
        self.with_metadata += sum(named)
        attrs: list[dict[str, Any]] = [{"name": name} for name in names]
        if not all(placed):
            for k in [k for k, has_module in enumerate(placed) if not has_module]:
                attrs[k]["module_inferred"] = True
        return modules, [""] * len(names), [None] * len(names), attrs, placed

    def subgraphs_of(self, node: Any, op: OpNode, scopes: list[Scope], prefix: str, total: int) -> None:
        """Walk the If/Loop/Scan bodies (and a custom domain's graph attributes) after their node."""
        subs = [a for a in node.attribute if a.type in SUBGRAPH_OPS_ATTR]
        if not subs:
            return
        attrs = cast("dict[str, Any]", op.attrs)
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
        nodes = self.nodes
        found = None if self.unlinked is None or not self.without_module else \
            segment_neighbours(self.unlinked, self.without_module)
        for i in self.without_module:
            n = nodes[i]
            neighbours = found[i] if found is not None else \
                [e[0] for e in self.ins[i]] + [e[1] for e in self.outs[i]]  # the order edges were made
            known = [x for x in neighbours
                     if nodes[x].kind == "op" and not (nodes[x].attrs or {}).get("module_inferred")]
            if not known:
                continue
            module = common_module([nodes[x].module for x in known])
            at = next((x for x in known if nodes[x].module == module), known[0])
            owner = nodes[at]
            nodes[i] = OpNode(n.id, n.op_type, module, n.index, n.kind, n.inputs, n.outputs, owner.source,
                              n.phase, owner.module_class if owner.module == module else "", n.attrs)
            if self.segments:  # the owner's source and class are read later: take them then
                self.inherited_from.append((i, at, owner.module == module))
            self.inherited += 1


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
    builder = _build(path, graph, progress, cancel)
    out = OpGraph(graph.name or path.stem)
    try:
        if builder.unlinked is None:
            out.adopt(builder.nodes, builder.ins, builder.outs)
        else:  # made when a view first reads an edge: `ascend-tui graph` prints their count alone
            count, segments = len(builder.nodes), builder.unlinked
            out.adopt_unlinked(builder.nodes, builder.unlinked_edges, lambda: _linked(count, segments))
    except ValueError as exc:
        raise InputError(path, f"ONNX graph is malformed: {exc}") from None
    notes: list[str] = []
    if builder.unresolved:
        notes.append(f"{len(builder.unresolved)} node inputs name tensors nothing produces "
                     f"(e.g. {builder.unresolved[0]!r})")
    opset = {imp.domain or "ai.onnx": imp.version for imp in model.opset_import}
    extra: dict[str, Any] = {
        "producer": f"{model.producer_name} {model.producer_version}".strip(), "opset": opset,
        "ir_version": model.ir_version, "shape_inference": False,
        "nodes_with_module_metadata": builder.with_metadata, "modules_inherited_from_neighbours": builder.inherited,
        "subgraphs": builder.subgraphs, "outputs": [o.name for o in graph.output], "notes": notes}
    size = path.stat().st_size  # the model's serialized size (`ByteSize()` walked every message: 0.02 s at 100k nodes)
    infer = _needs_inference(graph) and size < _INFER_LIMIT
    if infer:
        extra["shape_inference"] = "pending"  # run by the first reader of a node's tensors, not by every open
    types = TensorTypes(path, model, builder.graphs, builder.steps, len(builder.nodes), extra, infer)
    out.defer_shapes(DeferredMetadata(builder.nodes, builder.segments, builder.inherited_from, types)
                     if builder.segments else types)
    if not infer and size > _KEEP_LIMIT:
        out.resolve_shapes()  # mostly weights held inline: read the types now rather than keep the whole file
    run = RunInfo(target=str(path), source="onnx",
                  device={"backend": "offline", "name": "ONNX model", "inf_nan_mode": None}, extra=extra)
    return Investigation(out, run=run)


def _linked(count: int, segments: list[Segment]
            ) -> tuple[list[list[tuple[int, int, int, int]]], list[list[tuple[int, int, int, int]]]]:
    with paused_gc():  # 100k lists and 160k tuples, no cycle among them
        return link_segments(count, segments)


def _build(path: Path, graph: Any, progress: Progress | None, cancel: threading.Event | None) -> _OnnxBuilder:
    """Walk `graph` (and its bodies) into a builder's node and edge lists."""
    builder = _OnnxBuilder(path, cancel, progress)
    builder.collect_types(graph)
    builder.walk(graph, [], "", "", len(graph.node))
    builder.inherit_modules()
    return builder


READER = FunctionReader("ONNX model", sniff, load)
