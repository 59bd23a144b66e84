"""Reader of `torch.export.save` archives (`.pt2`): the graph in `models/model.json`, read without torch.

The archive is a zip; its model.json holds every FX node with its aten target, tensor
arguments by name, `nn_module_stack` and `stack_trace`, plus the graph signature that says
which inputs are parameters, buffers or user inputs. Weights are never read, so opening a
large model costs only its graph.
"""

from __future__ import annotations

import json
import threading
import zipfile
from pathlib import Path
from typing import Any, Iterator

from ascend_tui.errors import InputError
from ascend_tui.evidence import TensorMeta
from ascend_tui.readers.graphs.torch_meta import SCALAR_TYPES, module_from_stack_string, source_from_trace
from ascend_tui.readers.base import FunctionReader
from ascend_tui.graph.ids import IdMinter
from ascend_tui.graph.opgraph import NodeKind, OpGraph, OpNode
from ascend_tui.investigation import Investigation, RunInfo
from ascend_tui.progress import Progress, check_cancel

_MODEL_JSON = "models/model.json"
_MAX_JSON = 1 << 30
_SPEC_KINDS: dict[str, tuple[NodeKind, str]] = {
    "parameter": ("param", "parameter_name"), "buffer": ("buffer", "buffer_name"),
    "tensor_constant": ("const", "tensor_constant_name"), "user_input": ("input", ""),
    "custom_obj": ("const", "custom_obj_name"), "token": ("const", ""), "constant_input": ("const", ""),
}


def sniff(path: Path) -> bool:
    """Files named `*.pt2`."""
    return path.suffix.lower() == ".pt2" and path.is_file()


def read_model_json(path: Path) -> tuple[dict[str, Any], str]:
    """(model.json of the first model in the archive, its name inside the zip); errors name the file."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.endswith(_MODEL_JSON)]
            if not names:
                raise InputError(path, "no models/model.json inside (is this a torch.export.save archive? "
                                       "AOTInductor packages hold compiled code, not a graph)")
            name = sorted(names, key=len)[0]
            info = zf.getinfo(name)
            if info.file_size > _MAX_JSON:
                raise InputError(path, f"{name} is {info.file_size} bytes, larger than any graph should be")
            raw = zf.read(name)
    except zipfile.BadZipFile as exc:
        raise InputError(path, f"not a torch.export archive (not a zip file: {exc})") from None
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(path, f"{name} is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("graph_module"), dict) \
            or not isinstance(data["graph_module"].get("graph"), dict):
        raise InputError(path, f"{name} has no graph_module.graph (not a torch.export model?)")
    return data, name


def tensor_names(arg: Any) -> Iterator[str | None]:
    """The tensor names one serialized argument refers to, in order (None for an absent optional)."""
    if not isinstance(arg, dict):
        return
    if "as_tensor" in arg:
        yield arg["as_tensor"].get("name")
    elif "as_tensors" in arg:
        for t in arg["as_tensors"]:
            yield t.get("name")
    elif "as_optional_tensor" in arg:
        yield from tensor_names(arg["as_optional_tensor"]) if isinstance(arg["as_optional_tensor"], dict) else ()
    elif "as_optional_tensors" in arg:
        for t in arg["as_optional_tensors"]:
            names = list(tensor_names(t))
            yield names[0] if names else None


def output_names(outputs: list[Any]) -> list[str | None]:
    """Names of every tensor a node returns, by output slot."""
    out: list[str | None] = []
    for o in outputs:
        names = list(tensor_names(o))
        out.extend(names if names else [None])
    return out


def meta_of(tensor_values: dict[str, Any], name: str | None) -> TensorMeta | None:
    """Shape (symbolic sizes as -1) and dtype of a named tensor from `tensor_values`."""
    tv = tensor_values.get(name) if name else None
    if not isinstance(tv, dict):
        return None
    shape = tuple(int(s["as_int"]) if isinstance(s, dict) and "as_int" in s else -1 for s in tv.get("sizes", ()))
    code = tv.get("dtype")
    return TensorMeta(shape, SCALAR_TYPES.get(code, f"scalar_type_{code}") if isinstance(code, int)
                      else str(code))


def op_names(target: str) -> tuple[str, str]:
    """(op type, short op) of `torch.ops.aten.layer_norm.default`: `aten.layer_norm`, `layer_norm`."""
    parts = target.removeprefix("torch.ops.").split(".")
    if len(parts) >= 3:
        return f"{parts[0]}.{parts[1]}", parts[1]
    if len(parts) == 2:
        return f"{parts[0]}.{parts[1]}", parts[1]
    return target, target.rsplit(".", 1)[-1] or "op"


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None) -> Investigation:
    """Read a `torch.export.save` archive into an `Investigation` with the exported graph."""
    path = Path(path)
    if progress is not None:
        progress("reading torch.export archive", 0, None)
    data, inner = read_model_json(path)
    gm = data["graph_module"]
    graph_json = gm["graph"]
    tensor_values = graph_json.get("tensor_values") or {}
    nodes_json = graph_json.get("nodes")
    if not isinstance(nodes_json, list):
        raise InputError(path, f"{inner}: graph_module.graph.nodes is not a list")
    nodes: list[OpNode] = []
    edges: list[tuple[str, str, int, int]] = []
    producer: dict[str, tuple[str, int]] = {}
    counts: dict[str, int] = {}
    specs = (gm.get("signature") or {}).get("input_specs") or []
    for spec in specs:
        if not isinstance(spec, dict) or not spec:
            continue
        kind_name, body = next(iter(spec.items()))
        kind, fqn_key = _SPEC_KINDS.get(kind_name, ("const", ""))
        arg = body.get("arg", {}) if isinstance(body, dict) else {}
        names = list(tensor_names(arg)) or [arg.get("name")]
        name = names[0] if names else None
        if not name:
            continue
        fqn = str(body.get(fqn_key) or name) if fqn_key else name
        nid = f"{kind}:{fqn}"
        module = fqn.rsplit(".", 1)[0] if kind in ("param", "buffer") and "." in fqn else ""
        nodes.append(OpNode(nid, kind, module, -1, kind, outputs=(meta_of(tensor_values, name),),
                            attrs={"name": name, "fqn": fqn}))
        producer[name] = (nid, 0)
        counts[kind] = counts.get(kind, 0) + 1
    for arg in graph_json.get("inputs") or []:  # inputs the signature did not describe
        for name in tensor_names(arg):
            if name and name not in producer:
                nid = f"input:{name}"
                nodes.append(OpNode(nid, "input", "", -1, "input", outputs=(meta_of(tensor_values, name),),
                                    attrs={"name": name}))
                producer[name] = (nid, 0)
    minter = IdMinter()
    unresolved = 0
    for index, n in enumerate(nodes_json):
        if (index & 1023) == 0:
            check_cancel(cancel, "loading the torch.export archive was cancelled")
            if progress is not None:
                progress("building graph", index, len(nodes_json))
        if not isinstance(n, dict) or "target" not in n:
            raise InputError(path, f"{inner}: node {index} has no target")
        meta = n.get("metadata") or {}
        module, module_class = module_from_stack_string(meta.get("nn_module_stack"))
        op_type, op = op_names(str(n["target"]))
        nid = minter.mint(module, op)
        ins: list[TensorMeta | None] = []
        slot = 0
        for item in n.get("inputs") or []:
            for name in tensor_names(item.get("arg") if isinstance(item, dict) else None):
                ins.append(meta_of(tensor_values, name))
                if name is not None:
                    src = producer.get(name)
                    if src is None:
                        unresolved += 1
                    else:
                        edges.append((src[0], nid, src[1], slot))
                slot += 1
        outs = output_names(n.get("outputs") or [])
        attrs: dict[str, Any] = {"name": n.get("name") or (outs[0] if outs else "")}
        if meta.get("torch_fn"):
            attrs["torch_fn"] = meta["torch_fn"]
        nodes.append(OpNode(nid, op_type, module, index, "op", tuple(ins),
                            tuple(meta_of(tensor_values, o) for o in outs),
                            source=source_from_trace(meta.get("stack_trace")),
                            module_class=module_class, attrs=attrs))
        for out_slot, name in enumerate(outs):
            if name:
                producer[name] = (nid, out_slot)
    graph = OpGraph(inner.split("/", 1)[0] or path.stem)
    try:
        graph.add_bulk(nodes, edges)
    except ValueError as exc:
        raise InputError(path, f"{inner}: {exc}") from None
    notes = [f"{unresolved} node inputs name tensors nothing produces"] if unresolved else []
    run = RunInfo(target=str(path), source="torch_export",
                  device={"backend": "offline", "name": "torch.export archive", "inf_nan_mode": None},
                  extra={"torch_version": data.get("torch_version"), "schema_version": data.get("schema_version"),
                         "model": inner, "inputs_by_kind": counts,
                         "modules_called": [m.get("fqn") for m in gm.get("module_call_graph") or []
                                            if isinstance(m, dict)],
                         "notes": notes})
    return Investigation(graph, run=run)


READER = FunctionReader("torch.export archive", sniff, load)
