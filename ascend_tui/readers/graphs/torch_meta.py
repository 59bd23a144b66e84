"""What torch's exporters write about each op, read without torch: stack traces, module stacks, dtype codes.

`torch.export` archives and `torch.onnx.export(dynamo=True)` both carry the FX node's
`stack_trace` and module stack as strings; these helpers turn them into a `SourceLocation`
and a module path spelled as `named_modules()` spells it, which is what live capture uses.
"""

from __future__ import annotations

import ast
import re
from typing import Iterable

from ascend_tui.evidence import SourceLocation

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>[^\n]+)')
_LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3")
_STACK_FRAMES = 16
_PLAIN_LIST = re.compile(r"\[(?:'[^'\\\r\n\0]*'(?:, '[^'\\\r\n\0]*')*)?\]")  # repr() of a list of names
_PLAIN_ITEM = re.compile(r"'([^'\\\r\n\0]*)'")
_FOLDS = re.compile(r"/([^/]+)/\1\.")  # a part that starts with the one before it and a dot: `/mlp/mlp.0`

# c10::ScalarType as torch.export's schema numbers it.
SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float16",
                7: "float32", 8: "float64", 9: "complex32", 10: "complex64", 11: "complex128", 12: "bool",
                13: "bfloat16", 14: "uint16", 15: "uint32", 16: "uint64", 29: "float8_e4m3fn",
                30: "float8_e5m2", 31: "float8_e4m3fnuz", 32: "float8_e5m2fnuz"}


def source_from_trace(trace: str | None) -> SourceLocation | None:
    """The innermost frame outside installed libraries (torch, site-packages) of a Python-style stack trace."""
    if not trace:
        return None
    frames = [(m["file"], int(m["line"]), m["func"].strip()) for m in _FRAME.finditer(trace)]
    if not frames:
        return None
    user = [f for f in frames if not any(mark in f[0] for mark in _LIBRARY)]
    chosen = user[-1] if user else frames[-1]
    stack = tuple(f"{f}:{n} in {fn}" for f, n, fn in reversed(frames[-_STACK_FRAMES:]))
    return SourceLocation(chosen[0], chosen[1], chosen[2], stack)


def module_from_stack_string(text: str | None) -> tuple[str, str]:
    """(module path, class name) of the innermost module of torch.export's `"key,path,class;key,path,class"`."""
    if not text:
        return "", ""
    last = text.rsplit(";", 1)[-1]
    parts = last.split(",")
    if len(parts) < 3:
        return "", ""
    path = ",".join(parts[1:-1])  # a path never holds a comma, but be safe
    return path, parts[-1].rsplit(".", 1)[-1]


def literal_list(text: str | None) -> list[str]:
    """`['', 'attn', 'attn.qkv']` (a Python list literal in ONNX metadata) as a list of strings."""
    if not text:
        return []
    if _PLAIN_LIST.fullmatch(text):  # names without quotes, backslashes or line breaks: no parser needed
        return _PLAIN_ITEM.findall(text)
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return []
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def module_from_scopes(scopes: list[str], classes: list[str]) -> tuple[str, str]:
    """(module path, class name) from ONNX `name_scopes`/`class_hierarchy`: the last entry is the op itself."""
    if len(scopes) < 2:
        return "", ""
    cls = classes[-2] if len(classes) == len(scopes) else ""
    return scopes[-2], cls.rsplit(".", 1)[-1]


def module_from_node_name(name: str) -> str:
    """`layers.0.attn.qkv` from the legacy exporter's `/layers.0/attn/qkv/MatMul` node names."""
    if not name.startswith("/"):
        return ""
    path: list[str] = []
    for part in (p for p in name.split("/")[1:-1] if p):
        if path and part.startswith(path[-1] + "."):
            path[-1] = part  # children of Sequential/ModuleList are spelled `mlp.0` under `mlp`
        else:
            path.append(part)
    return ".".join(path)


class NodeNameModules(dict[str, str]):
    """`module_from_node_name` per name prefix: `modules[name.rpartition("/")[0]]` is the module of `name`.

    `/layers.3/attn/MatMul_1` and `/layers.3/attn/Add` share the prefix `/layers.3/attn`, worked out once.
    A prefix with no empty part and no part that folds into the one before it (`mlp.0` under `mlp`) is
    its parts joined by dots, which C-level string calls find; any other extends its parent's path.
    """

    def __init__(self) -> None:
        super().__init__({"": ""})

    def __missing__(self, head: str) -> str:
        return self.learn(head)

    def learn(self, head: str) -> str:
        """Work out, record and return the module of a new prefix (and of its new ancestors, where it needs them)."""
        if head[:1] != "/":  # not the legacy exporter's spelling: no module (its prefixes do not start with / either)
            module = ""
        elif "//" not in head and head[-1] != "/" and _FOLDS.search(head) is None:
            module = head[1:].replace("/", ".")
        else:
            return self.extend(head)
        self[head] = module
        return module

    def extend(self, head: str) -> str:
        """Work out `head` and its unknown ancestors, part by part, in a loop: names may nest deeper than the stack."""
        chain = [head]
        parent = head.rpartition("/")[0]
        while parent not in self:
            chain.append(parent)
            parent = parent.rpartition("/")[0]
        module = self[parent]
        last = parent.rstrip("/").rpartition("/")[2]  # the last part that is not empty
        for h in reversed(chain):
            part = h.rpartition("/")[2]
            if part:
                if last and part.startswith(last + "."):  # `mlp.0` under `mlp` replaces it
                    module = module[:len(module) - len(last)] + part
                else:
                    module = f"{module}.{part}" if module else part
                last = part
            self[h] = module
        return module

    def of(self, name: str) -> str:
        """The module of node `name` (what `module_from_node_name(name)` says)."""
        return self[name.rpartition("/")[0]]

    def of_all(self, names: Iterable[str]) -> list[str]:
        """`of(name)` for each of `names`: one loop for a reader's 100k names, learning each new prefix once."""
        get, learn, folds = self.get, self.learn, _FOLDS.search
        modules: list[str] = []
        append = modules.append
        for name in names:
            head = name.rpartition("/")[0]
            module = get(head)
            if module is None:  # learn(head), its common case inline: most prefixes of a big model are new
                if head[:1] == "/" and "//" not in head and head[-1] != "/" and folds(head) is None:
                    module = self[head] = head[1:].replace("/", ".")
                else:
                    module = learn(head)
            append(module)
        return modules
