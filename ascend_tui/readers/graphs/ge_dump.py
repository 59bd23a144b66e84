"""Reader of Ascend GE graph dumps (`ge_proto_*.txt`, protobuf text of `ge.proto.ModelDef`) into an `OpGraph`.

`DUMP_GE_GRAPH` writes every graph GE builds: operators with `input: "src:idx"` edges
(`:-1` a control edge), tensor descriptors in device layouts (NC1HWC0, FRACTAL_Z) with their
origin shapes, partitioned subgraphs joined through PlaceHolder/End pairs, and fused operators
that remember the framework ops they replaced, which is how dumps keyed by either name find them.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from ascend_tui.errors import InputError
from ascend_tui.evidence import TensorMeta
from ascend_tui.readers.parse.pbtext import Message, first, parse, repeated
from ascend_tui.readers.base import FunctionReader, head
from ascend_tui.readers.parse.skipped import Skipped, report as report_skips
from ascend_tui.graph.ids import IdMinter
from ascend_tui.graph.opgraph import NodeKind, OpGraph, OpNode, op_node
from ascend_tui.investigation import Investigation, RunInfo
from ascend_tui.progress import Progress, check_cancel, paused_gc

_FILE_NAME = re.compile(r"^ge_proto_\d+_.*\.(?:txt|pbtxt)$")
# ge_ir.proto DataType: names as printed, numbers for dumps whose printer did not know the name.
_DTYPES = {
    "DT_FLOAT": "float32", "DT_FLOAT16": "float16", "DT_INT8": "int8", "DT_UINT8": "uint8",
    "DT_INT16": "int16", "DT_UINT16": "uint16", "DT_INT32": "int32", "DT_INT64": "int64",
    "DT_UINT32": "uint32", "DT_UINT64": "uint64", "DT_BOOL": "bool", "DT_DOUBLE": "float64",
    "DT_STRING": "string", "DT_DUAL_SUB_INT8": "dual_sub_int8", "DT_DUAL_SUB_UINT8": "dual_sub_uint8",
    "DT_COMPLEX64": "complex64", "DT_COMPLEX128": "complex128", "DT_QINT8": "qint8", "DT_QINT16": "qint16",
    "DT_QINT32": "qint32", "DT_QUINT8": "quint8", "DT_QUINT16": "quint16", "DT_RESOURCE": "resource",
    "DT_STRING_REF": "string_ref", "DT_DUAL": "dual", "DT_VARIANT": "variant", "DT_BF16": "bfloat16",
    "DT_INT4": "int4", "DT_UINT1": "uint1", "DT_INT2": "int2", "DT_UINT2": "uint2",
    "DT_COMPLEX32": "complex32", "DT_HIFLOAT8": "hifloat8", "DT_FLOAT8_E5M2": "float8_e5m2",
    "DT_FLOAT8_E4M3FN": "float8_e4m3fn", "DT_FLOAT8_E8M0": "float8_e8m0", "DT_FLOAT6_E3M2": "float6_e3m2",
    "DT_FLOAT6_E2M3": "float6_e2m3", "DT_FLOAT4_E2M1": "float4_e2m1", "DT_FLOAT4_E1M2": "float4_e1m2",
    "DT_UNDEFINED": "undefined",
}
_DTYPE_NUMBERS = {0: "undefined", 1: "float32", 2: "float16", 3: "int8", 4: "uint8", 5: "int16", 6: "uint16", 7: "int32",
                  8: "int64", 9: "uint32", 10: "uint64", 11: "bool", 12: "float64", 13: "string", 27: "bfloat16",
                  34: "float8_e5m2", 35: "float8_e4m3fn"}
_KINDS: dict[str, NodeKind] = {"Data": "input", "RefData": "input", "PlaceHolder": "input", "AippData": "input",
                               "Const": "const", "Constant": "const", "Variable": "param", "VariableV2": "param",
                               "NetOutput": "output", "End": "output"}
_SCALAR_ATTR_LIMIT = 32


_OPSET_SUFFIX = re.compile(r"^(?P<op>[A-Za-z][A-Za-z0-9]*?[A-Za-z])V(?P<v>[1-9]\d)$")


def op_family(ge_type: str) -> str:
    """One op type for the opset versions GE appends to ops it parsed from ONNX (`ResizeV14`, `ResizeV18` ->
    `Resize`); GE's own one-digit versions are different operators and stay (`MatMulV2`, `MatMulV3`, `PadV3`)."""
    m = _OPSET_SUFFIX.match(ge_type)
    return m.group("op") if m else ge_type


def dtype_name(value: Any) -> str:
    """`float16` for `DT_FLOAT16`; unknown names and numbers are kept (`DT_NEW_TYPE` -> `new_type`, 99 -> `dt_99`)."""
    if isinstance(value, int) or (isinstance(value, str) and value.lstrip("-").isdigit()):
        return _DTYPE_NUMBERS.get(int(value), f"dt_{int(value)}")
    text = str(value)
    return _DTYPES.get(text) or text.removeprefix("DT_").lower()


def attr_value(value: Any) -> Any:
    """A Python value for one `AttrDef` (`s`, `i`, `f`, `b`, `dt`, `list {...}`, `list_list_int`); None for others."""
    if not isinstance(value, dict):
        return None
    for key in ("s", "i", "f", "b"):
        if key in value:
            return _cast(key, first(value, key))
    if "dt" in value:
        return dtype_name(first(value, "dt"))
    if "list" in value:
        lst = first(value, "list") or {}
        for key in ("s", "i", "f", "b", "dt"):
            if key in lst:
                items = [_cast(key, v) for v in repeated(lst, key)]
                return [dtype_name(v) for v in items] if key == "dt" else items
        return []
    if "list_list_int" in value:
        return [[int(x) for x in repeated(inner, "list_i")] for inner in
                repeated(first(value, "list_list_int") or {}, "list_list_i")]
    return None


def _cast(key: str, v: Any) -> Any:
    if key == "i":
        return int(v)
    if key == "f":
        return float(v) if not isinstance(v, str) else float(v.replace("Infinity", "inf"))
    if key == "b":
        return v is True or v == "true"
    return v


def attrs_of(msg: Message) -> dict[str, Any]:
    """The `attr { key value }` map of an op, graph or tensor descriptor, decoded."""
    out: dict[str, Any] = {}
    for entry in repeated(msg, "attr"):
        if isinstance(entry, dict) and "key" in entry:
            out[str(first(entry, "key"))] = attr_value(first(entry, "value"))
    return out


def tensor_desc(desc: Any) -> tuple[TensorMeta | None, dict[str, Any]]:
    """(type as the device holds it, layout facts: layout, origin shape/format/dtype, fused-origin name)."""
    if not isinstance(desc, dict):
        return None, {}
    shape_msg = first(desc, "shape")
    dims = tuple(int(d) for d in repeated(shape_msg, "dim")) if isinstance(shape_msg, dict) else ()
    layout = str(first(desc, "layout", ""))
    attrs = attrs_of(desc)
    if "dtype" not in desc and (layout in ("", "FORMAT_RESERVED")) and not dims:
        return None, {}  # an absent optional input
    meta = TensorMeta(dims, dtype_name(first(desc, "dtype", "DT_UNDEFINED")))  # proto3 omits the 0 value
    facts: dict[str, Any] = {"layout": layout}
    if isinstance(attrs.get("origin_shape"), list):
        facts["origin_shape"] = attrs["origin_shape"]
    for key in ("origin_format", "origin_data_type"):
        if attrs.get(key) is not None:
            facts[key] = attrs[key]
    if attrs.get("_datadump_origin_name"):
        facts["origin_name"] = attrs["_datadump_origin_name"]
        facts["origin_output_index"] = attrs.get("_datadump_origin_output_index", 0)
    return meta, facts


_JSON_GRAPH = re.compile(rb'"graph"\s*:\s*\[\s*\{')
_JSON_HEAD = 65536  # the model's own attr list (task names) comes before "graph" and can be long


def sniff(path: Path) -> bool:
    """`ge_proto_<seq>_<stage>.txt`, a text file that starts like a GE ModelDef (`graph {` then `name:`), or the
    ModelDef as JSON (`atc --mode=1` of an .om, GE's own field names)."""
    if not path.is_file():
        return False
    if _FILE_NAME.match(path.name):
        return True
    if path.suffix == ".json":
        start = head(path, _JSON_HEAD)
        return start.lstrip().startswith(b"{") and _JSON_GRAPH.search(start) is not None and b'"op"' in start
    if path.suffix not in (".txt", ".pbtxt", ".prototxt"):
        return False
    return re.match(rb"\s*(?:#[^\n]*\n\s*)*graph\s*\{\s*name\s*:", head(path, 512)) is not None


def read_text(path: Path) -> str:
    """The file's text; every I/O failure becomes one `InputError` line."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    if b"\0" in data[:4096]:
        raise InputError(path, "binary data, expected GE graph dump text (DUMP_GE_GRAPH writes ge_proto_*.txt; "
                               "an .om or binary .pb needs `atc --mode=1` first)")
    return data.decode("utf-8", errors="replace")


def _json_model(path: Path, text: str) -> Message:
    """The ModelDef of `atc --mode=1` JSON: the message tree with protobuf's own field names, as `parse` gives."""
    import json

    try:
        model = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON: {exc.msg}", where=f"{exc.lineno}:{exc.colno}") from None
    if not isinstance(model, dict) or not isinstance(model.get("graph"), list):
        raise InputError(path, "not a GE graph as JSON (expected an object with a 'graph' list, as `atc --mode=1` "
                               "writes)")
    return model


class _GeBuilder:
    """Turns the parsed ModelDef into nodes and edges, graph by graph."""

    def __init__(self, path: Path, model: Message, cancel: threading.Event | None) -> None:
        self.path = path
        self.model = model
        self.cancel = cancel
        self.minter = IdMinter()
        self.nodes: list[OpNode] = []
        self.edges: list[tuple[str, str, int, int]] = []
        self.by_name: dict[tuple[str, str], str] = {}  # (graph, op name) -> node id
        self.by_ge_id: dict[tuple[str, int], str] = {}
        self.ends: dict[tuple[str, int], str] = {}
        self.notes: list[str] = []
        self.control_edges = 0
        self.controls: dict[str, list[str]] = {}
        self.unresolved: list[str] = []
        self.subgraph_links = 0
        self.skipped = Skipped(str(path))

    def build(self, progress: Progress | None) -> OpGraph:
        graphs = [g for g in repeated(self.model, "graph") if isinstance(g, dict)]
        if not graphs:
            raise InputError(self.path, "not a GE graph dump: no `graph { ... }` message (expected protobuf text "
                                        "of ge.proto.ModelDef, as DUMP_GE_GRAPH writes)")
        total = sum(len(repeated(g, "op")) for g in graphs)
        if total == 0:
            raise InputError(self.path, "GE graph dump has graphs but no `op { ... }` in any of them")
        ops: list[tuple[str, Message, str]] = []
        for g in graphs:
            gname = str(first(g, "name", ""))
            for k, op in enumerate(repeated(g, "op")):
                if not isinstance(op, dict) or "name" not in op:  # skipped and counted, the rest still reads
                    self.skipped.record(k + 1, f"graph {gname!r}: op {k + 1} has no name")
                    continue
                ops.append((gname, op, self.add_node(gname, op, len(self.nodes))))
                if progress is not None and (len(self.nodes) & 4095) == 0:
                    check_cancel(self.cancel, "loading the GE dump was cancelled")
                    progress("building graph", len(self.nodes), total)
        if not ops:
            raise InputError(self.path, f"no usable op: all {self.skipped.records} have no name")
        for gname, op, nid in ops:
            self.wire(gname, op, nid)
        self.attach_controls()
        self.link_subgraphs(graphs)
        graph = OpGraph(str(first(self.model, "name", "")) or self.path.name)
        graph.add_bulk(self.nodes, self.edges)
        return graph

    def add_node(self, gname: str, op: Message, index: int) -> str:
        name, ge_type = str(first(op, "name")), str(first(op, "type", ""))
        op_type = op_family(ge_type)
        attrs = attrs_of(op)
        module = name.rsplit("/", 1)[0].replace("/", ".") if "/" in name else ""
        nid = self.minter.mint(module, op_type or "op")
        in_facts: list[dict[str, Any]] = []
        outs: list[TensorMeta | None] = []
        ins: list[TensorMeta | None] = []
        for d in repeated(op, "input_desc"):
            meta, facts = tensor_desc(d)
            ins.append(meta)
            in_facts.append(facts)
        out_facts: list[dict[str, Any]] = []
        for d in repeated(op, "output_desc"):
            meta, facts = tensor_desc(d)
            outs.append(meta)
            out_facts.append(facts)
        info: dict[str, Any] = {"name": name, "graph": gname}
        if ge_type != op_type:
            info["ge_type"] = ge_type
        info["ge_id"] = int(first(op, "id", 0))  # proto3 leaves id 0 out
        self.by_ge_id.setdefault((gname, info["ge_id"]), nid)
        originals = attrs.get("_datadump_original_op_names")
        origin_outputs = [f.get("origin_name") for f in out_facts]
        origin_names = [str(x) for x in (originals or []) if x] + [str(x) for x in origin_outputs if x]
        if origin_names:
            info["origin_names"] = list(dict.fromkeys(origin_names))
        if any(origin_outputs):
            info["origin_outputs"] = [[f.get("origin_name"), f.get("origin_output_index", 0)] for f in out_facts]
        if any(in_facts):
            info["input_layouts"] = in_facts
        if any(out_facts):
            info["output_layouts"] = out_facts
        for key, label in (("_coretype", "core_type"), ("fusion_scope", "fusion_scope")):
            if attrs.get(key) is not None:
                info[label] = attrs[key]
        subgraphs = [str(s) for s in repeated(op, "subgraph_name") if s]
        if subgraphs:
            info["subgraphs"] = subgraphs
        info["ge_attrs"] = {k: v for k, v in attrs.items() if v is not None and not k.startswith("_datadump")
                            and (not isinstance(v, list) or len(v) <= _SCALAR_ATTR_LIMIT)}
        kind = _KINDS.get(ge_type, "op")
        self.nodes.append(op_node(nid, op_type, module, index, kind, tuple(ins), tuple(outs), None, "forward", "",
                                  info))
        if (gname, name) in self.by_name:
            self.notes.append(f"graph {gname!r} has two ops named {name!r}; edges go to the first")
        else:
            self.by_name[(gname, name)] = nid
        if op_type == "End" and attrs.get("peerIndex") is not None:
            self.ends[(gname, int(attrs["peerIndex"]))] = nid
        return nid

    def wire(self, gname: str, op: Message, nid: str) -> None:
        controls: list[str] = []
        for slot, ref in enumerate(repeated(op, "input")):
            ref = str(ref)
            if not ref:
                continue  # an absent optional input keeps its slot
            src, sep, idx = ref.rpartition(":")
            if not sep:
                src, idx = ref, "0"
            try:
                out_slot = int(idx)
            except ValueError:
                raise InputError(self.path, f"op {first(op, 'name')!r}: input {ref!r} is not \"op:index\"") from None
            src_id = self.by_name.get((gname, src))
            if src_id is None:
                self.unresolved.append(f"{first(op, 'name')} <- {ref}")
                continue
            if out_slot < 0:
                controls.append(src_id)
                self.control_edges += 1
            else:
                self.edges.append((src_id, nid, out_slot, slot))
        if controls:
            self.controls[nid] = controls

    def attach_controls(self) -> None:
        """Control inputs go into `attrs["control_inputs"]`: walks follow data, the detail pane shows both."""
        for pos, node in enumerate(self.nodes):
            controls = self.controls.get(node.id)
            if controls:
                self.nodes[pos] = OpNode(node.id, node.op_type, node.module, node.index, node.kind, node.inputs,
                                         node.outputs, attrs={**(node.attrs or {}), "control_inputs": controls})

    def link_subgraphs(self, graphs: list[Message]) -> None:
        """PlaceHolder <- its producer in another partition; control-flow subgraph Data <- the parent's input."""
        names = {str(first(g, "name", "")) for g in graphs}
        missing: set[str] = set()

        def resolve(name: str) -> str:
            """Partition names in parentId lack the `partition0_rank3_` prefix the dumped graph names carry."""
            if name in names:
                return name
            return next((n for n in sorted(names) if n.endswith("_" + name)), name)

        for node in self.nodes:
            attrs = node.attrs or {}
            ge = attrs.get("ge_attrs", {})
            if node.op_type == "PlaceHolder" and ge.get("parentId"):
                parent_graph, _, parent_id = str(ge["parentId"]).rpartition(":")
                parent_graph = resolve(parent_graph)
                src = self.by_ge_id.get((parent_graph, int(parent_id))) if parent_id.lstrip("-").isdigit() else None
                if src is not None:
                    self.edges.append((src, node.id, int(ge.get("anchorIndex", 0) or 0), 0))
                    self.subgraph_links += 1
                elif parent_graph not in names:
                    missing.add(parent_graph)
        data_ops: dict[str, list[OpNode]] = {}
        for other in self.nodes:
            if other.op_type == "Data":
                data_ops.setdefault((other.attrs or {}).get("graph", ""), []).append(other)
        parents = [n for n in self.nodes if (n.attrs or {}).get("subgraphs")]
        into: dict[str, dict[int, tuple[str, int]]] = {n.id: {} for n in parents}
        for src, dst, out_slot, in_slot in self.edges:
            if dst in into:
                into[dst][in_slot] = (src, out_slot)
        for node in parents:
            for sub in (node.attrs or {})["subgraphs"]:
                if sub not in names:
                    missing.add(sub)
                    continue
                for other in data_ops.get(sub, ()):
                    index = (other.attrs or {}).get("ge_attrs", {}).get("_parent_node_index")
                    if isinstance(index, int) and index in into[node.id]:
                        src, out_slot = into[node.id][index]
                        self.edges.append((src, other.id, out_slot, 0))
                        self.subgraph_links += 1
        if missing:
            self.notes.append(f"{len(missing)} graphs referenced by PlaceHolder or subgraph_name are not in this "
                              f"file ({', '.join(sorted(missing)[:4])}); those inputs start here")


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None) -> Investigation:
    """Read a GE graph dump into an `Investigation` whose graph carries layouts and fused-origin names."""
    with paused_gc():
        return _load(Path(path), progress, cancel)


def _load(path: Path, progress: Progress | None, cancel: threading.Event | None) -> Investigation:
    if progress is not None:
        progress("reading GE graph dump", 0, None)
    text = read_text(path)
    check_cancel(cancel, "loading the GE dump was cancelled")
    if progress is not None:
        progress("parsing protobuf text" if not text.lstrip().startswith("{") else "parsing JSON", 0, None)
    model = _json_model(path, text) if text.lstrip().startswith("{") else parse(text, path)
    del text
    builder = _GeBuilder(path, model, cancel)
    graph = builder.build(progress)
    notes = list(builder.notes)
    if builder.unresolved:
        notes.append(f"{len(builder.unresolved)} inputs name ops not in this dump (an excerpt?), e.g. "
                     f"{builder.unresolved[0]}")
    graphs = [str(first(g, "name", "")) for g in repeated(model, "graph")]
    run = RunInfo(target=str(path), source="ge_dump", device={"backend": "offline", "name": "GE graph dump",
                                                              "inf_nan_mode": None},
                  extra={"graphs": graphs, "control_edges": builder.control_edges,
                         "subgraph_links": builder.subgraph_links, "unresolved_inputs": len(builder.unresolved),
                         "model_attrs": {k: v for k, v in attrs_of(model).items() if not isinstance(v, list)},
                         "notes": notes})
    report_skips(run.extra, [builder.skipped])
    return Investigation(graph, run=run)


READER = FunctionReader("GE graph dump", sniff, load)
