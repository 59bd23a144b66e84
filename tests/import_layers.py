"""The layer order of the package, declared once, and the checker `tests/test_core_layers.py` runs over every import.

A module may import modules of its own layer and of the layers below it, never above; within the
package no imports may loop (module-level, function-level and `TYPE_CHECKING` imports all count, and so
does a literal module name handed to `importlib.import_module` or a lazy registry's `module:attribute`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

# Highest first. A module belongs to the layer of the longest prefix that names it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("front-ends", ("ascend_tui", "ascend_tui.__main__", "ascend_tui.cli", "ascend_tui.app")),
    ("services", ("ascend_tui.triage", "ascend_tui.gate", "ascend_tui.live", "ascend_tui.offline")),
    ("readers", ("ascend_tui.readers",)),
    ("investigation", ("ascend_tui.investigation", "ascend_tui.report", "ascend_tui.navigation",
                       "ascend_tui.export")),
    ("checks", ("ascend_tui.checks",)),
    ("model", ("ascend_tui.graph", "ascend_tui.evidence")),
    ("utilities", ("ascend_tui.errors", "ascend_tui.fmt", "ascend_tui.progress", "ascend_tui.threads",
                   "ascend_tui.pool", "ascend_tui.outputs", "ascend_tui.plugins")),
)

# Downward but still not allowed: readers translate files into the model; the analyses on what they
# read run in offline/ (and live/), so a reader never reaches into checks/.
FORBIDDEN: tuple[tuple[str, str], ...] = (("ascend_tui.readers", "ascend_tui.checks"),)

_NAME = re.compile(r"^ascend_tui(?:\.\w+)*:\w+$")


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package at `root` (a folder named like the package) by dotted name."""
    return {".".join(p.with_suffix("").relative_to(root.parent).parts).removesuffix(".__init__"): p
            for p in sorted(root.rglob("*.py"))}


def imports(root: Path) -> dict[str, dict[str, int]]:
    """Each module's imports inside the package: target module -> first line that imports it."""
    mods = modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, dict[str, int]] = {}
    for m, p in mods.items():
        base = m if p.name == "__init__.py" else m.rpartition(".")[0]
        found: dict[str, int] = {}
        for n in ast.walk(ast.parse(p.read_text(), str(p))):
            targets: list[str] = []
            if isinstance(n, ast.ImportFrom):
                module = n.module or ""
                if n.level:
                    parts = base.split(".")[: len(base.split(".")) - n.level + 1]
                    module = ".".join(parts + ([module] if module else []))
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module for a in n.names]
            elif isinstance(n, ast.Import):
                targets = [a.name for a in n.names]
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and ":" in n.value and _NAME.match(n.value):
                targets = [n.value.partition(":")[0]]  # a lazy `module:attribute` (registries, entry points)
            elif isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", "")) == "import_module" \
                    and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
                targets = [n.args[0].value]
            for t in targets:
                r = resolve(t)
                if r is not None and r != m and not m.startswith(r + "."):  # a package's own parents run anyway
                    found.setdefault(r, getattr(n, "lineno", 0))
        edges[m] = found
    return edges


def layer_of(module: str) -> int | None:
    """The index in `LAYERS` of the layer `module` belongs to (0 is the top), or None."""
    best: tuple[int, int] | None = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            nested = "." in prefix and module.startswith(prefix + ".")  # the package root names only itself
            if (module == prefix or nested) and (best is None or len(prefix) > best[1]):
                best = (i, len(prefix))
    return None if best is None else best[0]


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def violations(root: Path) -> list[str]:
    """One line per module without a layer, per import that points up or is forbidden, and per import loop."""
    edges = imports(root)
    out = [f"{m}: in no layer (add it to LAYERS in tests/import_layers.py)" for m in edges if layer_of(m) is None]
    for m, targets in sorted(edges.items()):
        lm = layer_of(m)
        for t, line in sorted(targets.items()):
            lt = layer_of(t)
            if lm is None or lt is None:
                continue
            if lt < lm:
                out.append(f"{m}:{line} imports {t}: {LAYERS[lm][0]} may not import {LAYERS[lt][0]}")
            elif any(_under(m, a) and _under(t, b) for a, b in FORBIDDEN):
                out.append(f"{m}:{line} imports {t}: forbidden (readers never import checks)")
    out += [" -> ".join([*c, c[0]]) for c in cycles(edges)]
    return out


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The import loops, each as the list of its modules (one loop per back edge found)."""
    state: dict[str, int] = {}
    found: list[list[str]] = []

    def visit(u: str, stack: list[str]) -> None:
        state[u] = 1
        stack.append(u)
        for v in sorted(edges.get(u, ())):
            if state.get(v) == 1:
                found.append(stack[stack.index(v):])
            elif not state.get(v):
                visit(v, stack)
        stack.pop()
        state[u] = 2

    for m in sorted(edges):
        if not state.get(m):
            visit(m, [])
    return found
