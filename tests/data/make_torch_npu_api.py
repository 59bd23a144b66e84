"""Write the list of torch_npu and pyACL names ascend-tui calls, with their signatures as the real wheel defines them.

Run: python tests/data/make_torch_npu_api.py [--wheel PATH | --download] [--out tests/data/torch_npu_api.json]

`--download` fetches `torch-npu==2.14.0` from the package index (`pip download --no-deps`). The
wheel's Python sources are read with `ast` inside the zip, never imported (no NPU or CANN
needed). The names come from `used_names(ascend_tui)`: every attribute chain in the package's
code rooted at `torch_npu` or `acl` (however bound: `import`, `importlib.import_module`, an
alias such as `self._npu` or `npu = self._npu.npu`). Each is resolved in the wheel through
re-exports (`from .x import y`, `from .x import *`) to the `def`/`class`/assignment that makes
it; `acl` (CANN's pyACL) is not on the package index, so its entries carry the signatures of
CANN's documentation and say so. `tests/test_npu_api.py` fails when the package calls a name not
on the list, and `tests/fake_npu/` builds its fake `torch_npu` from it.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VERSION = "2.14.0"
ROOTS = ("torch_npu", "acl")
# CANN's pyACL is installed with the CANN toolkit, not from the package index: its signatures come from the
# "pyACL API reference" (acl.get_soc_name, acl.rt.get_mem_info), not from a file this script can read.
ACL_DOCUMENTED = {
    "acl.get_soc_name": {"kind": "function", "signature": "()", "returns": "str"},
    "acl.rt.get_mem_info": {"kind": "function", "signature": "(attr)", "returns": "(free, total, ret)"},
}


# -- what the package calls ------------------------------------------------------------------------


def _chain(node: ast.AST) -> list[str] | None:
    """`a.b.c` -> ['a', 'b', 'c'] (with `self.x` as one root 'self.x'); None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    parts.reverse()
    if parts[0] == "self" and len(parts) > 1:
        parts = [f"self.{parts[1]}", *parts[2:]]
    return parts


def _imported_module(value: ast.AST) -> str | None:
    """'torch_npu' for `importlib.import_module("torch_npu")`."""
    if isinstance(value, ast.Call) and value.args and isinstance(value.args[0], ast.Constant):
        fn = _chain(value.func)
        if fn and fn[-1] == "import_module" and isinstance(value.args[0].value, str):
            return value.args[0].value
    return None


def file_names(tree: ast.AST) -> set[str]:
    """The torch_npu/acl names one file's code reaches (maximal attribute chains, aliases resolved)."""
    alias: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in ROOTS:
                    alias[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ROOTS:
            for a in node.names:
                alias[a.asname or a.name] = f"{node.module}.{a.name}"
    for _ in range(4):  # aliases of aliases (`npu = self._npu.npu`), to a fixpoint
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                continue
            target = _chain(node.targets[0])
            if not target or len(target) != 1:
                continue
            mod = _imported_module(node.value)
            if mod is not None and mod.split(".")[0] in ROOTS:
                alias[target[0]] = mod
                continue
            src = _chain(node.value)
            if src and src[0] in alias:
                alias[target[0]] = ".".join([alias[src[0]], *src[1:]])
    found: set[str] = set()
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            inner.add(id(node.value))
            parts = _chain(node)
            if parts and parts[0] in alias:
                found.add(".".join([alias[parts[0]], *parts[1:]]))
        elif isinstance(node, ast.Attribute):
            inner.add(id(node.value))
    return found


def used_names(package: Path = ROOT / "ascend_tui") -> dict[str, list[str]]:
    """Every torch_npu/acl name the package's code reaches -> the files that do."""
    out: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for name in file_names(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            out.setdefault(name, []).append(str(path.relative_to(package.parent)))
    return dict(sorted(out.items()))


# -- what the wheel defines ------------------------------------------------------------------------


class Wheel:
    """The Python sources of a wheel, parsed on demand (never imported)."""

    def __init__(self, path: Path) -> None:
        self.zip = zipfile.ZipFile(path)
        self.files = set(self.zip.namelist())
        self._trees: dict[str, ast.Module] = {}

    def module_file(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for cand in (f"{base}.py", f"{base}/__init__.py"):
            if cand in self.files:
                return cand
        return None

    def tree(self, file: str) -> ast.Module:
        if file not in self._trees:
            self._trees[file] = ast.parse(self.zip.read(file).decode("utf-8"), file)
        return self._trees[file]

    def resolve(self, dotted: str) -> dict[str, Any] | None:
        """Where `dotted` is defined: kind, signature, file and line; None when the wheel does not define it."""
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):  # the longest prefix that is a module
            module = ".".join(parts[:i])
            file = self.module_file(module)
            if file is None:
                continue
            if i == len(parts):
                return {"kind": "module", "file": file}
            return self._in_module(module, parts[i:], depth=0)
        return None

    def _in_module(self, module: str, rest: list[str], depth: int) -> dict[str, Any] | None:
        file = self.module_file(module)
        if file is None or depth > 8:
            return None
        tree = self.tree(file)
        name = rest[0]
        for node in tree.body:
            found = self._defines(node, name, file, rest)
            if found is not None:
                return found
        for node in ast.walk(tree):  # re-exports, possibly inside try/if blocks
            if isinstance(node, ast.ImportFrom):
                src = _absolute(module, file, node)
                for a in node.names:
                    if a.name == "*":
                        continue
                    if (a.asname or a.name) == name:
                        if self.module_file(src) is None and self.module_file(src.partition(".")[0]) is not None:
                            return self._native(src, [a.name, *rest[1:]])
                        sub = self.module_file(f"{src}.{a.name}")
                        if sub is not None:
                            return self._in_module(f"{src}.{a.name}", rest[1:], depth + 1) if rest[1:] else \
                                {"kind": "module", "file": sub}
                        return self._in_module(src, [a.name, *rest[1:]], depth + 1)
        if self.module_file(f"{module}.{name}") is not None:  # a submodule reached as an attribute
            return self.resolve(".".join([module, *rest]))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                found = self._in_module(_absolute(module, file, node), rest, depth + 1)
                if found is not None:
                    return found
        return None

    def _native(self, module: str, rest: list[str]) -> dict[str, Any]:
        """A name from the compiled extension (`torch_npu._C...`): no source, so the wheel's own Python uses of it
        are the evidence that it exists (`ProfilerActivity.NPU`)."""
        tail = ".".join(rest)
        uses = [f for f in sorted(self.files)
                if f.endswith(".py") and tail in self.zip.read(f).decode("utf-8", "replace")]
        return {"kind": "native", "module": module, "used_by_the_wheel_in": uses[:3], "uses": len(uses)}

    def _defines(self, node: ast.AST, name: str, file: str, rest: list[str]) -> dict[str, Any] | None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name and len(rest) == 1:
            return {"kind": "function", "signature": f"({ast.unparse(node.args)})", "file": file,
                    "line": node.lineno}
        if isinstance(node, ast.ClassDef) and node.name == name:
            if len(rest) == 1:
                init = next((b for b in node.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"), None)
                sig = f"({ast.unparse(init.args)})" if init is not None else None
                return {"kind": "class", "signature": sig, "file": file, "line": node.lineno}
            for b in node.body:  # a class attribute (an enum member)
                targets = b.targets if isinstance(b, ast.Assign) else [b.target] if isinstance(b, ast.AnnAssign) \
                    else []
                if any(isinstance(t, ast.Name) and t.id == rest[1] for t in targets) and len(rest) == 2:
                    return {"kind": "class attribute", "value": ast.unparse(b.value) if b.value else None,
                            "file": file, "line": b.lineno}
                found = self._defines(b, rest[1], file, rest[1:])
                if found is not None:
                    return found
            return None
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and len(rest) == 1:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return {"kind": "attribute", "value": ast.unparse(node.value)[:120] if node.value else None,
                        "file": file, "line": node.lineno}
        if isinstance(node, (ast.If, ast.Try)):
            for b in [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                      *(s for h in getattr(node, "handlers", []) for s in h.body)]:
                found = self._defines(b, name, file, rest)
                if found is not None:
                    return found
        return None


def _absolute(module: str, file: str, node: ast.ImportFrom) -> str:
    """The absolute module an `ImportFrom` in `module` names."""
    if not node.level:
        return node.module or ""
    package = module if file.endswith("__init__.py") else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def build(wheel: Path) -> dict[str, Any]:
    """The checked-in list: every name the package calls, as the wheel (or CANN's documentation) defines it."""
    w = Wheel(wheel)
    names: dict[str, Any] = {}
    for name, files in used_names().items():
        if name.startswith("acl"):
            entry = dict(ACL_DOCUMENTED.get(name, {"kind": "unknown"}))
            entry["source"] = "CANN pyACL documentation (pyACL is not on the package index)"
        else:
            entry = w.resolve(name) or {"kind": "missing"}
            entry["source"] = wheel.name
        entry["used_in"] = files
        names[name] = entry
    return {"torch_npu": VERSION, "wheel": wheel.name, "generated_by": "tests/data/make_torch_npu_api.py", "names": names}


def download(dest: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", f"torch-npu=={VERSION}", "--no-deps", "-d", str(dest)],
                   check=True)
    return next(iter(sorted(dest.glob("torch_npu-*.whl"))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", type=Path, help="a downloaded torch_npu wheel")
    parser.add_argument("--download", action="store_true", help=f"pip download torch-npu=={VERSION} first")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "torch_npu_api.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or (download(Path(tmp)) if args.download else None)
        if wheel is None:
            parser.error("give --wheel PATH or --download")
        data = build(wheel)
    missing = [n for n, e in data["names"].items() if e["kind"] in ("missing", "unknown")]
    args.out.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(f"{len(data['names'])} names written to {args.out}" + (f"; NOT in the wheel: {', '.join(missing)}"
                                                                  if missing else ""))
    return 1 if missing else 0



if __name__ == "__main__":
    sys.exit(main())
