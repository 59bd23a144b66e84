"""Reader of MindSpore `save_graphs` text IR (`*.ir`) into an `OpGraph` with scopes and source lines.

Each CNode line `%1(CNode_70$b) = PrimFunc_Add(%0, %para2_y)` is followed by its types,
`# Fullname with scope: (Default/Add-op0)` (what kernel dumps spell `Default_Add-op0`) and
`# In file f.py:17` lines; subgraphs bound through `Partial(@g, args)` or direct calls get
edges from the bound arguments to the callee's parameters, so walks cross function calls.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ascend_tui.errors import InputError
from ascend_tui.evidence import SourceLocation, TensorMeta
from ascend_tui.readers.base import FunctionReader, head
from ascend_tui.graph.ids import IdMinter
from ascend_tui.graph.opgraph import NodeKind, OpGraph, OpNode
from ascend_tui.investigation import Investigation, RunInfo
from ascend_tui.progress import Progress, check_cancel

_SUBGRAPH = re.compile(r"^(?:subgraph|graph)\s+@(?P<name>\S+?)\((?P<params>[^)]*)\)\s*\{\s*$")
_CNODE = re.compile(r"^\s+%(?P<n>\d+)(?:\((?P<label>[^)]*)\))?\s*=\s*(?P<call>.*)$")
_RETURN = re.compile(r"^\s+(?P<call>Return\(.*)$")
_TOP_PARAM = re.compile(r"^%(?P<name>para\d+_[^:\s]+)\s*:\s*(?P<type><[^>]*>)")
_SCOPE = re.compile(r"#\s*(?:Fullname with scope|scope):\s*\((?P<scope>[^)]*)\)")
_IN_FILE = re.compile(r"#\s*In file (?P<file>[^:]+):(?P<line>\d+)[^/]*/(?P<code>.*?)/(?:<~~.*)?$")
_TYPES = re.compile(r"^\s+:\s*\((?P<ins>.*)\)\s*->\s*\((?P<outs>.*)\)\s*$")
_TENSOR = re.compile(r"Tensor\[(?P<dtype>\w+)\](?:,\s*\((?P<shape>[^)]*)\)|x\[[^\]]*\]\[(?P<old>[^\]]*)\])")
_REF = re.compile(r"^%(?P<ref>\d+|para\d+_[\w.\-]+)$")
_LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3")
_MS_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
              "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8", "bool": "bool"}


@dataclass(slots=True)
class _Node:
    """One CNode while reading: its call text, then what the following comment and type lines add."""

    graph: str
    number: str
    label: str
    op: str
    args: list[str]
    line: int
    scope: str = ""
    types: tuple[list[TensorMeta | None], list[TensorMeta | None]] = field(default_factory=lambda: ([], []))
    frames: list[tuple[str, int, str]] = field(default_factory=list)


def sniff(path: Path) -> bool:
    """`*.ir` files (MindSpore writes `<seq>_<pass>_<id>.ir`) whose head looks like a MindSpore graph."""
    if path.suffix != ".ir":
        return False
    start = head(path)
    return b"# IR entry" in start or b"subgraph @" in start or b"# [No." in start or b"%para" in start


def split_args(text: str) -> tuple[str, str]:
    """(`Op`, `a, b(c, d)`) of `Op(a, b(c, d)) attrs...`: the callee and its argument text, brackets balanced."""
    start = text.find("(")
    if start < 0:
        return text.strip(), ""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
            if depth == 0:
                return text[:start].strip(), text[start + 1:i]
    return text[:start].strip(), text[start + 1:]


def top_level_items(text: str) -> list[str]:
    """Comma-separated items of `text` outside brackets."""
    items: list[str] = []
    depth, start = 0, 0
    for i, c in enumerate(text):
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        items.append(tail)
    return items


def type_meta(text: str) -> TensorMeta | None:
    """`<Tensor[Float32], (2, 3)>` (or the 1.x `Tensor[Float32]x[const vector][2, 3]`) as a TensorMeta."""
    m = _TENSOR.search(text)
    if m is None:
        return None
    dims = m["shape"] if m["shape"] is not None else m["old"] or ""
    shape = tuple(int(d) if d.strip().lstrip("-").isdigit() else -1 for d in dims.split(",") if d.strip())
    dtype = m["dtype"].lower()
    return TensorMeta(shape, _MS_DTYPES.get(dtype, dtype))


def scope_module(scope: str) -> tuple[str, str, str]:
    """(module path, class, phase) of `Gradients/Default/network-Net/layers-CellList/0-Block/Add-op0`."""
    parts = [p for p in scope.split("/") if p]
    phase = "forward"
    if parts and parts[0] == "Gradients":
        phase, parts = "backward", parts[1:]
    if parts and parts[0] == "Default":
        parts = parts[1:]
    cells = parts[:-1]
    names = [p.split("-", 1)[0] for p in cells]
    cls = cells[-1].split("-", 1)[1] if cells and "-" in cells[-1] else ""
    return ".".join(names), cls, phase


def source_of(frames: list[tuple[str, int, str]]) -> SourceLocation | None:
    """The innermost frame outside installed libraries (MindSpore lists frames outermost first)."""
    if not frames:
        return None
    user = [f for f in frames if not any(mark in f[0] for mark in _LIBRARY)]
    chosen = user[-1] if user else frames[-1]
    stack = tuple(dict.fromkeys(f"{f}:{n}  {code.strip()}" for f, n, code in reversed(frames)))
    return SourceLocation(chosen[0], chosen[1], chosen[2].strip(), stack[:16])


def read_ir(path: Path, text: str) -> tuple[dict[str, TensorMeta | None], dict[str, list[str]], list[_Node]]:
    """(top-level params with their types, subgraph -> formal params, CNodes in file order)."""
    params: dict[str, TensorMeta | None] = {}
    graphs: dict[str, list[str]] = {}
    nodes: list[_Node] = []
    current: str | None = None
    last: _Node | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if current is None:
            if m := _TOP_PARAM.match(line):
                params[m["name"]] = type_meta(m["type"])
            elif m := _SUBGRAPH.match(line):
                current = m["name"]
                graphs[current] = [p.strip().lstrip("%") for p in m["params"].split(",") if p.strip()]
                last = None
            continue
        if line.startswith("}"):
            current, last = None, None
            continue
        m = _CNODE.match(line) or _RETURN.match(line)
        if m is not None and not line.lstrip().startswith(("#", ":")):
            op, args = split_args(m["call"])
            label = m.groupdict().get("label") or ""
            last = _Node(current, m.groupdict().get("n") or "", label, op, top_level_items(args), lineno)
            nodes.append(last)
            continue
        if last is None:
            continue
        if (s := _SCOPE.search(line)) is not None:
            last.scope = s["scope"]
        elif (f := _IN_FILE.search(line)) is not None:
            last.frames.append((f["file"].strip(), int(f["line"]), f["code"]))
        elif (t := _TYPES.match(line)) is not None:
            last.types = ([type_meta(x) for x in top_level_items(t["ins"])],
                          [type_meta(x) for x in top_level_items(t["outs"])])
    if current is not None:
        raise InputError(path, f"subgraph @{current} is never closed (truncated file?)", where=str(lineno))
    if not nodes:
        raise InputError(path, "no MindSpore graph nodes (expected `subgraph @name(...) {` blocks with "
                               "`%N(...) = Op(...)` lines, as save_graphs writes)")
    return params, graphs, nodes


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None) -> Investigation:
    """Read a MindSpore `.ir` file into an `Investigation` whose nodes carry scopes and source lines."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    if progress is not None:
        progress("reading MindSpore IR", 0, None)
    params, graphs, cnodes = read_ir(path, text)
    minter = IdMinter()
    out: list[OpNode] = []
    edges: list[tuple[str, str, int, int]] = []
    refs: dict[tuple[str, str], str] = {}  # (graph or "", %ref) -> node id
    for p, meta in params.items():
        name = p.split("_", 1)[1] if "_" in p else p
        kind: NodeKind = "param" if "." in name else "input"
        nid = f"{kind}:{name}"
        module = name.rsplit(".", 1)[0] if kind == "param" else ""
        out.append(OpNode(nid, kind, module, -1, kind, outputs=(meta,), attrs={"name": p}))
        refs[("", p)] = nid
    for g, formals in graphs.items():
        for p in formals:
            nid = f"input:@{g}/{p}"
            out.append(OpNode(nid, "input", "", -1, "input", attrs={"name": p, "graph": g}))
            refs[(g, p)] = nid
    bindings: list[tuple[str, list[str], str]] = []  # (callee graph, argument texts, caller graph)
    for index, c in enumerate(cnodes):
        if (index & 1023) == 0:
            check_cancel(cancel, "loading the MindSpore IR was cancelled")
        op = c.op.removeprefix("PrimFunc_") if not c.op.startswith("%") else "call"
        module, cls, phase = scope_module(c.scope)
        nid = minter.mint(module, op, phase)
        named = "/" in c.scope or "-op" in c.scope  # `(0)` is no name
        attrs: dict[str, Any] = {"name": c.scope if named else f"{c.graph}/%{c.number}", "graph": c.graph,
                                 "line": c.line}
        if named:
            attrs["aliases"] = [c.scope.replace("/", "_")]
        if c.label:
            attrs["cnode"] = c.label
        args = list(c.args)
        if c.op.startswith("%"):  # a call through a function value: `%5[@FuncUnion(@a, @b)]()`
            callee = c.op.split("[", 1)[0]
            attrs["calls"] = [g for g in re.findall(r"@([^,()\s\]]+)", c.op) if g != "FuncUnion"]
            args = [callee, *args]
        elif c.op.startswith("@"):
            bindings.append((c.op[1:], args, c.graph))
            attrs["calls"] = [c.op[1:]]
        if op == "Partial" and args and args[0].startswith("@"):
            bindings.append((args[0][1:], args[1:], c.graph))
            attrs["calls"] = [args[0][1:]]
        for slot, arg in enumerate(args):
            m = _REF.match(arg)
            if m is None:
                continue
            src = refs.get((c.graph, m["ref"])) or refs.get(("", m["ref"]))
            if src is not None:
                edges.append((src, nid, 0, slot))
        ins, outs = c.types
        out.append(OpNode(nid, op, module, index, "output" if op == "Return" else "op", tuple(ins), tuple(outs),
                          source=source_of(c.frames), phase=phase, module_class=cls, attrs=attrs))
        if c.number:
            refs[(c.graph, c.number)] = nid
    linked = 0
    for callee, args, caller in bindings:
        formals = graphs.get(callee, [])
        for formal, arg in zip(formals, args):
            m = _REF.match(arg)
            src = (refs.get((caller, m["ref"])) or refs.get(("", m["ref"]))) if m else None
            if src is not None:
                edges.append((src, refs[(callee, formal)], 0, 0))
                linked += 1
    graph = OpGraph(path.stem)
    try:
        graph.add_bulk(out, edges)
    except ValueError as exc:
        raise InputError(path, f"MindSpore IR is malformed: {exc}") from None
    run = RunInfo(target=str(path), source="mindspore_ir",
                  device={"backend": "offline", "name": "MindSpore IR", "inf_nan_mode": None},
                  extra={"subgraphs": list(graphs), "cnodes": len(cnodes), "call_bindings": linked, "notes": []})
    return Investigation(graph, run=run)


READER = FunctionReader("MindSpore IR", sniff, load)
