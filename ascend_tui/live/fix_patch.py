"""The chosen remedies as a change the user can paste: a unified diff against the model file, or a snippet.

The diff adds small hook helpers after the file's imports (hooks keep module names and the
state_dict as they are) and calls them on the model its factory returns, naming each module
by its dotted path; the capture's source locations say where each module is called, quoted in
the comments. When the factory's `return (model, inputs)` cannot be found, the same code comes
as a snippet to add after the model is built.
"""

from __future__ import annotations

import ast
import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ascend_tui.live.remedies import Remedy

MARK = "ascend-tui fix"

_FLOAT32 = '''

# --- {mark}: hooks that keep a module in float32 (outside autocast) or clamp an index; names and state_dict unchanged
def _ascend_float32_pre(module, args, kwargs):
    floats = [t for t in (*args, *kwargs.values()) if torch.is_tensor(t) and t.is_floating_point()]
    device = floats[0].device.type if floats else "cpu"
    ctx = torch.autocast(device_type=device, enabled=False)
    ctx.__enter__()
    module.__dict__.setdefault("_ascend_stack", []).append((floats[0].dtype if floats else None, ctx))
    module.float()
    up = lambda t: t.float() if torch.is_tensor(t) and t.is_floating_point() else t  # noqa: E731
    return tuple(up(a) for a in args), {{k: up(v) for k, v in kwargs.items()}}


def _ascend_float32_post(module, args, kwargs, output):
    dtype, ctx = module.__dict__["_ascend_stack"].pop()
    ctx.__exit__(None, None, None)

    def back(t):  # back to the caller's dtype unless the values do not fit there
        if not (torch.is_tensor(t) and t.is_floating_point()) or dtype is None or t.dtype == dtype:
            return t
        finite = t[torch.isfinite(t)]
        return t if finite.numel() and float(finite.abs().max()) > torch.finfo(dtype).max else t.to(dtype)

    return torch.utils._pytree.tree_map(back, output)


def keep_float32(module):
    """Run `module` in float32, outside autocast; its outputs go back to the input dtype when they fit."""
    module.register_forward_pre_hook(_ascend_float32_pre, with_kwargs=True)
    module.register_forward_hook(_ascend_float32_post, with_kwargs=True, always_call=True)
    return module
'''

_CLAMP = '''

def _ascend_clamp_pre(low, high, module, args):
    i = next((i for i, a in enumerate(args) if torch.is_tensor(a) and not a.is_floating_point()), None)
    return None if i is None else (*args[:i], args[i].clamp(low, high - 1), *args[i + 1:])


def clamp_index(module, low, high):
    """Clamp the first integer input of `module` into [low, high) (the ids past the table's end are a bug to fix)."""
    module.register_forward_pre_hook(functools.partial(_ascend_clamp_pre, low, high))
    return module
'''

_NORMALIZE = '''

def _ascend_normalize_pre(argument, mean, std, module, args):
    x = args[argument]
    y = (x.float() - torch.tensor(mean, device=x.device)) / torch.tensor(std, device=x.device)
    return (*args[:argument], y.to(x.dtype), *args[argument + 1:])


def normalize_input(model, argument, mean, std):
    """Normalise positional input `argument` with the measured per-feature statistics (better: in the data pipeline)."""
    model.register_forward_pre_hook(functools.partial(_ascend_normalize_pre, argument, mean, std), prepend=True)
    return model
'''


@dataclass(frozen=True, slots=True)
class Patch:
    """The change: `diff` (unified, for `patch -p1` from `root`) when it could be placed, else `snippet`."""

    diff: str
    snippet: str
    file: str
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"diff": self.diff or None, "snippet": self.snippet, "file": self.file, "notes": list(self.notes)}


def _fmt(values: Sequence[float]) -> str:
    return "(" + ", ".join(f"{v:.6g}" for v in values) + ("," if len(values) == 1 else "") + ")"


def _calls(remedies: Sequence[Remedy], var: str, where: dict[str, str],
           rewritten: frozenset[Remedy] = frozenset()) -> tuple[list[str], list[str]]:
    """(lines that apply the remedies to `var`, notes on the ones the patch cannot express).

    An upcast in `rewritten` is in the diff as `.float()` at its call sites, so it needs no line here.
    """
    lines, notes = [], []
    for r in remedies:
        if r in rewritten:
            continue
        target = f'{var}.get_submodule("{r.module}")' if r.module else var
        called = f"  # called at {where[r.module]}" if r.module in where else ""
        if r.kind == "layout":
            notes.append(f"{r.describe()}: no `.contiguous()` after a permute/transpose was found at the recorded "
                         f"call sites in the model file; remove it by hand where `{r.module or 'the model'}` calls it")
        elif r.kind == "float32":
            lines.append(f"keep_float32({target}){called}")
        elif r.kind == "clamp":
            lines.append(f"clamp_index({target}, {r.low}, {r.high}){called}")
            notes.append(f"clamping hides the bug that made the index: the real fix is to grow `{r.module}` or "
                         f"stop producing indices past {r.high - 1}" + (f" ({r.reason})" if r.reason else ""))
        elif r.kind == "normalize":
            lines.append(f"normalize_input({var}, {r.argument}, mean={_fmt(r.mean)}, std={_fmt(r.std)})")
            notes.append(f"input {r.argument} is normalised inside the model: better done once in the data "
                         f"pipeline with the same statistics")
        else:
            notes.append(f"{r.describe()}: call .float() on the input of the softmax / norm / sum in "
                         f"`{r.module or 'the model'}` and cast the result back (no call site of it was found in "
                         f"the model file)")
    return lines, notes


def _helpers(remedies: Sequence[Remedy]) -> str:
    kinds = {r.kind for r in remedies}
    text = _FLOAT32.format(mark=MARK) if "float32" in kinds else f"\n\n# --- {MARK}"
    if "clamp" in kinds:
        text += _CLAMP
    if "normalize" in kinds:
        text += _NORMALIZE
    return text


def _call_sites(graph: Any, path: Path, remedies: Sequence[Remedy]) -> dict[str, str]:
    """Module -> `file.py:line` where the capture saw it called from the model file."""
    want = os.path.realpath(path)
    out: dict[str, str] = {}
    mods = {r.module for r in remedies if r.module}
    if graph is None or not mods:
        return out
    for node in graph:
        src = node.source
        if node.module in mods and node.module not in out and src is not None \
                and os.path.realpath(src.file) == want:
            out[node.module] = src.short()
    return out


def build_patch(path: Path, factory: str, remedies: Sequence[Remedy], graph: Any = None,
                root: Path | None = None, fits: Mapping[str, bool] | None = None, dtype: str = "") -> Patch:
    """The diff (or snippet) that applies `remedies` to the model `factory` in `path` returns.

    An upcast becomes `.float()` on the input of each accumulating call the capture recorded in the
    file, cast back to the run's dtype (`dtype`) when `fits` (node id -> whether its float32 result
    fits that dtype) says so or, unknown, when the op's result is bounded (softmax, norms, means).
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    where = _call_sites(graph, path, remedies)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        tree = None
    edits, rewritten = _upcast_edits(text, tree, graph, path, remedies, fits or {}, dtype) if tree else ({}, set())
    if tree is not None:
        moved, dropped = _layout_edits(text, tree, graph, path, remedies, set(edits))
        edits.update(moved)
        rewritten |= dropped
    rest = [r for r in remedies if r not in rewritten and r.kind in ("float32", "clamp", "normalize")]  # as hooks
    helpers = _helpers(rest)
    calls, notes = _calls(remedies, "model", where, frozenset(rewritten))
    snippet = (helpers.strip("\n") + "\n\n# after the model is built:\n" + "\n".join(calls) + "\n")
    if tree is None:
        return Patch("", snippet, str(path), (*notes, "the model file does not parse: add the snippet by hand"))
    new = _patched(text, tree, factory, rest, helpers, where, edits)
    if new is None and not rest:  # nothing the diff can place: the notes say what to change by hand
        return Patch("", snippet if calls else "", str(path), tuple(notes))
    if new is None:
        return Patch("", snippet, str(path), (*notes, f"no `return model, inputs` in {factory}(): add the snippet "
                                                      f"after the model is built"))
    rel = _relative(path, root or Path.cwd())
    if rel == path.name and path.resolve().parent != (root or Path.cwd()).resolve():
        notes.append(f"the model file is not under the working folder: apply with `patch -p1` in {path.resolve().parent}")
    diff = "".join(difflib.unified_diff(text.splitlines(True), new.splitlines(True), f"a/{rel}", f"b/{rel}"))
    return Patch(diff, snippet, str(path), tuple(notes))


def _relative(path: Path, root: Path) -> str:
    """`path` relative to `root` for `patch -p1` there; its bare name when it is not under `root`."""
    try:
        rel = Path(os.path.relpath(path.resolve(), root.resolve())).as_posix()
    except ValueError:
        return path.name
    return path.name if rel.startswith("../") else rel


def _patched(text: str, tree: ast.Module, factory: str, remedies: Sequence[Remedy], helpers: str,
             where: dict[str, str], edits: Mapping[int, str] | None = None) -> str | None:
    """The file with `edits` (line number -> new line), the helpers after its imports and the remedies applied
    before the factory's returns."""
    lines = text.splitlines(True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    for lineno, new_line in (edits or {}).items():
        lines[lineno - 1] = new_line
    if not remedies:
        return "".join(lines) if edits else None
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == factory), None)
    if fn is None:
        return None
    returns = [n for n in _own_nodes(fn) if isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple)
               and len(n.value.elts) >= 2]
    if not returns:
        return None
    # edit from the bottom up so earlier line numbers stay right
    for ret in sorted(returns, key=lambda n: n.lineno, reverse=True):
        first = ret.value.elts[0]
        indent = lines[ret.lineno - 1][:ret.col_offset]
        if isinstance(first, ast.Name):
            var, pre = first.id, []
        else:
            var = "fixed_model"
            segment = ast.get_source_segment(text, first) or ""
            if first.lineno != first.end_lineno:
                return None
            row = lines[first.lineno - 1]
            lines[first.lineno - 1] = row[:first.col_offset] + var + row[first.end_col_offset:]
            pre = [f"{var} = {segment}"]
        calls, _ = _calls(remedies, var, where)
        block = [f"{indent}{line}  # {MARK}\n" if "#" not in line else f"{indent}{line}; {MARK}\n"
                 for line in (*pre, *calls)]
        lines[ret.lineno - 1:ret.lineno - 1] = block
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    after = max((n.end_lineno or n.lineno for n in imports), default=0)
    kinds = {r.kind for r in remedies}
    needs = ["torch", *(["functools"] if kinds & {"clamp", "normalize"} else [])]
    extra = "".join(f"import {m}  # {MARK}\n" for m in needs if not _imports(tree, m))
    lines[after:after] = ["\n" + (extra + "\n" if extra else "") + helpers.lstrip("\n").rstrip("\n") + "\n\n"]
    return "".join(lines)


BOUNDED = frozenset({"softmax", "log_softmax", "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm",
                     "mean", "var", "std", "var_mean"})
"""Accumulations whose result is no larger than their input (or a probability): cast back when nothing says otherwise."""


def python_name(op_type: str) -> str:
    """`aten._log_softmax.default` -> `log_softmax`: the Python call an accumulating aten op comes from."""
    name = op_type.split("aten.", 1)[-1].split(".", 1)[0].lstrip("_")
    name = name.removeprefix("native_").removeprefix("fused_")
    if "batch_norm" in name:
        return "batch_norm"
    return {"linalg_vector_norm": "norm", "safe_softmax": "softmax"}.get(name, name)


def _upcast_edits(text: str, tree: ast.Module, graph: Any, path: Path, remedies: Sequence[Remedy],
                  fits: Mapping[str, bool], dtype: str) -> tuple[dict[int, str], set[Remedy]]:
    """Line number -> the line with `.float()` on each recorded accumulation's input; the upcasts so expressed."""
    from ascend_tui.live.remedies import ACCUMULATING

    ups = [r for r in remedies if r.kind == "upcast"]
    if graph is None or not ups:
        return {}, set()
    want = os.path.realpath(path)
    sites: dict[int, dict[str, bool]] = {}  # line -> python name -> cast back
    owner: dict[int, set[Remedy]] = {}
    for node in graph:
        src, name = node.source, python_name(node.op_type)
        if node.is_placeholder or src is None or name not in ACCUMULATING or os.path.realpath(src.file) != want:
            continue
        for r in ups:
            if r.module == "" or node.module == r.module or node.module.startswith(f"{r.module}."):
                back = fits.get(node.id, name in BOUNDED)
                sites.setdefault(src.line, {})[name] = sites.get(src.line, {}).get(name, True) and back
                owner.setdefault(src.line, set()).add(r)
    lines = text.splitlines(True)
    edits: dict[int, str] = {}
    done: set[Remedy] = set()
    for lineno, names in sites.items():
        calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and c.lineno == lineno == c.end_lineno
                 and _call_name(c) in names and not any(k.arg == "dtype" for k in c.keywords)]
        if not calls or lineno > len(lines):
            continue
        row = lines[lineno - 1]
        inserts: list[tuple[int, str]] = []  # (column, text), applied right to left
        for c in calls:
            subject = _subject(c)
            if subject is None:
                continue
            start, end = subject.col_offset, subject.end_col_offset or subject.col_offset
            simple = isinstance(subject, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
            if not simple:
                inserts.append((start, "("))
            inserts.append((end, ")" * (not simple) + ".float()"))
            if names[_call_name(c)]:
                back = f"{ast.get_source_segment(text, subject)}.dtype" if isinstance(subject, ast.Name) else \
                    f"torch.{dtype or 'float16'}"
                inserts.append((c.end_col_offset or end, f".to({back})"))
        if not inserts:
            continue
        for col, piece in sorted(inserts, key=lambda t: t[0], reverse=True):
            row = _insert_at(row, col, piece)
        edits[lineno] = row.rstrip("\n") + f"  # {MARK}: accumulate in float32\n"
        done |= owner[lineno]
    return edits, done


def _layout_edits(text: str, tree: ast.Module, graph: Any, path: Path, remedies: Sequence[Remedy],
                  taken: set[int]) -> tuple[dict[int, str], set[Remedy]]:
    """Line number -> the line without the `.contiguous()` of each conversion pair recorded there; the remedies done."""
    from ascend_tui.checks.layout_pairs import VIEWS, pairs

    mine = [r for r in remedies if r.kind == "layout"]
    if graph is None or not mine:
        return {}, set()
    want = os.path.realpath(path)
    lines_of: dict[int, set[Remedy]] = {}
    for p in pairs(graph):
        src = graph.node(p.copy).source
        if src is None or os.path.realpath(src.file) != want or src.line in taken:
            continue
        for r in mine:
            if r.module == "" or p.module == r.module or p.module.startswith(f"{r.module}."):
                lines_of.setdefault(src.line, set()).add(r)
    rows = text.splitlines(True)
    edits: dict[int, str] = {}
    done: set[Remedy] = set()
    for lineno, owners in lines_of.items():
        calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and c.lineno == lineno == c.end_lineno
                 and isinstance(c.func, ast.Attribute) and c.func.attr == "contiguous" and not c.args
                 and not c.keywords and isinstance(c.func.value, ast.Call) and _call_name(c.func.value) in VIEWS]
        if not calls or lineno > len(rows):
            continue
        raw = rows[lineno - 1].encode("utf-8")
        for c in sorted(calls, key=lambda c: c.col_offset, reverse=True):
            view_end = c.func.value.end_col_offset or 0
            raw = raw[:view_end] + raw[c.end_col_offset or view_end:]
        row = raw.decode("utf-8")
        edits[lineno] = row.rstrip("\n") + f"  # {MARK}: no copy, the next op reads the view\n"
        done |= owners
    return edits, done


def _insert_at(row: str, col: int, piece: str) -> str:
    """`row` with `piece` at AST column `col` (a UTF-8 byte offset)."""
    raw = row.encode("utf-8")
    return (raw[:col] + piece.encode("utf-8") + raw[col:]).decode("utf-8")


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _subject(call: ast.Call) -> ast.expr | None:
    """The tensor an accumulating call reads: `x` in `x.sum(1)`, `torch.softmax(x, -1)` and `F.layer_norm(x, s)`."""
    f = call.func
    if isinstance(f, ast.Attribute) and not (isinstance(f.value, ast.Name) and f.value.id in ("torch", "F")) \
            and not isinstance(f.value, ast.Attribute):
        return f.value
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute) and \
            ast.unparse(f.value) not in ("torch.nn.functional", "nn.functional", "torch.special", "torch.linalg"):
        return f.value  # self.x.sum(): a method on an attribute
    if call.args and (isinstance(f, ast.Attribute) or (isinstance(f, ast.Name) and f.id != "sum")):
        return call.args[0]
    return None


def _own_nodes(fn: ast.FunctionDef) -> list[ast.AST]:
    """The nodes of `fn` outside nested functions and classes."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return out


def _imports(tree: ast.Module, name: str) -> bool:
    """Whether the file imports `name` at top level as itself (`import torch`)."""
    for n in tree.body:
        if isinstance(n, ast.Import) and any(a.name == name and a.asname in (None, name) for a in n.names):
            return True
    return False


def save_patch(text: str, folder: str | Path, stem: str = "ascend-tui-fix") -> Path:
    """Write `text` to a new `stem.patch` in `folder` (`stem-2.patch`, ... when taken); never over a file."""
    base = Path(folder).expanduser()
    base.mkdir(parents=True, exist_ok=True)
    for k in range(1, 1000):
        path = base / (f"{stem}.patch" if k == 1 else f"{stem}-{k}.patch")
        try:
            with path.open("x", encoding="utf-8") as out:
                out.write(text)
            return path
        except FileExistsError:
            continue
    raise OSError(f"{base}: no free name for {stem}.patch")
