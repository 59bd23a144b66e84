"""How a target dump's names become golden names across frameworks: dtype spellings and msprobe's mapping files.

MindSpore writes `BFloat16`, PyTorch `torch.bfloat16`; both become torch's bare spelling for
pairing and metrics (the CSV keeps each side's own). A MindSpore dump names its records `Cell.*`,
`Mint.*`, `Primitive.*`, a PyTorch one `Module.*`, `Torch.*`, `NPU.*`: msprobe's four mapping
options translate one into the other, with the same file formats and rules as `msprobe compare`:
`-dm` (tensor name -> tensor name), `-cm` (Cell -> Module, by cell name or by substring), `-am`
(API -> API, with argument and output index lists; Mint/MintFunctional by rule) and `-lm` (layer
names per layer class, resolved on a scope tree built from construct.json and stack.json).
"""

from __future__ import annotations

import importlib.util
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ascend_tui.errors import InputError
from ascend_tui.graph.opgraph import read_json


def read_yaml(path: Path) -> Any:
    """msprobe's YAML subset (imported here: a compare without mapping files reads none)."""
    from ascend_tui.readers.msprobe.yaml_subset import read_yaml as read

    return read(path)

# -- dtype spellings -------------------------------------------------------------------------------

_ALIAS = {"float": "float32", "half": "float16", "double": "float64", "bf16": "bfloat16", "fp16": "float16",
          "fp32": "float32", "fp64": "float64", "long": "int64", "int": "int32", "short": "int16",
          "cfloat": "complex64", "cdouble": "complex128", "bool_": "bool"}
_PREFIXES = ("torch.", "mindspore.", "numpy.", "np.", "ms.")
FLOATS = frozenset({"float16", "float32", "float64", "bfloat16"})


def canonical_dtype(name: str) -> str:
    """torch's bare spelling (`bfloat16`) of a dtype as PyTorch, MindSpore or numpy write it."""
    s = name.strip()
    for p in _PREFIXES:
        if s.startswith(p):
            s = s[len(p):]
            break
    s = s.lower()
    return _ALIAS.get(s, s)


def dtype_family(dtype: str) -> str:
    """int, float, bool or complex (else the name): the classes msprobe pairs across frameworks."""
    if dtype in FLOATS or dtype.startswith("float"):
        return "float"
    if re.fullmatch(r"u?int\d+", dtype):
        return "int"
    return "complex" if dtype.startswith("complex") else dtype


def compatible_dtypes(a: str, b: str, cross: bool) -> bool:
    """msprobe's pairing rule: equal, both floating, or (across frameworks) the same family."""
    return a == b or (a in FLOATS and b in FLOATS) or (cross and dtype_family(a) == dtype_family(b))


# -- options -----------------------------------------------------------------------------------------

# The default when `-am`/`-cm` is given without a file: msprobe's own rules, no table.
DEFAULT = "default"


@dataclass(frozen=True, slots=True)
class MappingOptions:
    """The mapping options of one compare; a path, DEFAULT (the flag alone) or None (off)."""

    data: Path | None = None
    layer: Path | None = None
    api: Path | str | None = None
    cell: Path | str | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.data, self.layer, self.api, self.cell))

    @property
    def checks_dtype(self) -> bool:
        """msprobe pairs data- and layer-mapped names whatever their dtypes."""
        return self.data is None and self.layer is None


Rename = Callable[[str, str, str], "str | None"]  # (tensor name, entry, section) -> golden tensor name


def _str_map(raw: Any, path: Path, what: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(v, (str, int)) for v in raw.values()):
        raise InputError(path, f"not an msprobe {what} (expected one 'target name: golden name' per line)")
    return {str(k): str(v) for k, v in raw.items()}


def read_data_mapping(path: Path) -> dict[str, str]:
    """A `-dm` file: target tensor name -> golden tensor name."""
    return _str_map(read_yaml(path), path, "data mapping")


def renamer(opts: MappingOptions, target_dir: Path, golden_dir: Path,
            target_entries: Sequence[str], golden_entries: Sequence[str]) -> Rename | None:
    """The name translation msprobe applies for these options (api, then cell, then data/layer mapping)."""
    if opts.api is not None:
        return _api_renamer(None if opts.api == DEFAULT else Path(opts.api), golden_entries)
    if opts.cell is not None:
        table = {} if opts.cell == DEFAULT else _str_map(read_yaml(Path(opts.cell)), Path(opts.cell), "cell mapping")
        return lambda name, entry, section: map_cell(name, table)
    if opts.layer is not None:
        entries = layer_pairs(opts.layer, target_dir, golden_dir)
        return lambda name, entry, section: (entries[entry] + name[len(entry):]) if entries.get(entry) else None
    if opts.data is not None:
        table = read_data_mapping(opts.data)
        return lambda name, entry, section: table.get(name, name)
    return None


# -- cell mapping ------------------------------------------------------------------------------------

_FWD_BWD = re.compile(r"\.(?:forward|backward)\.")
_CELL_SPLIT = re.compile(r"\.(?:forward|backward|parameters_grad)\.")


def map_cell(name: str, table: Mapping[str, str]) -> str | None:
    """`Cell.<cell>.<Class>...` -> `Module.<module>.<Class>...`: whole cell name first, else each substring once."""
    if "parameters_grad" not in name.split(".") and not _FWD_BWD.search(name):
        return None
    name = name.replace("Cell", "Module", 1)
    if table:
        cell = _CELL_SPLIT.split(name.split(".", 1)[-1])[0]
        new = table.get(cell)
        if new is None:
            new = cell
            for target, golden in table.items():
                if target in new:
                    new = new.replace(target, golden, 1)
        if new != cell:
            name = name.replace(cell, new, 1)
    return name


# -- API mapping -------------------------------------------------------------------------------------

_SECTIONS = {"input": ("ms_args", "pt_args"), "output": ("ms_outputs", "pt_outputs"),
             "parameters": ("ms_parameters", "pt_parameters"),
             "param_grad": ("ms_parameters_grad", "pt_parameters_grad")}


def builtin_api_table() -> dict[str, str]:
    """msprobe's MindSpore -> PyTorch API table when msprobe is installed (read as data, not imported), else {}."""
    try:
        spec = importlib.util.find_spec("msprobe")
    except (ImportError, ValueError):
        return {}
    if spec is None or not spec.submodule_search_locations:
        return {}
    for root in spec.submodule_search_locations:
        path = Path(root) / "core" / "compare" / "ms_to_pt_api.yaml"
        if path.is_file():
            try:
                return _str_map(read_yaml(path), path, "API table")
            except InputError:
                return {}
    return {}


def _api_head(name: str) -> str:
    return ".".join(name.split(".")[:2])


def map_api_builtin(name: str, table: Mapping[str, str]) -> str:
    """Mint.* -> Torch.*, MintFunctional.* -> Functional.*, else msprobe's table by `Type.api`."""
    head = _api_head(name)
    kind = head.split(".")[0]
    if kind == "Mint":
        return name.replace("Mint", "Torch", 1)
    if kind == "MintFunctional":
        return name.replace("MintFunctional", "Functional", 1)
    if head in table:
        return name.replace(head, table[head], 1)
    return name


def read_api_mapping(path: Path) -> list[dict[str, Any]]:
    """A `-am` file: one or a list of {ms_api, pt_api, ms_args, pt_args, ms_outputs, pt_outputs, ...} entries."""
    raw = read_yaml(path)
    items = [raw] if isinstance(raw, dict) else raw if isinstance(raw, list) else None
    if not items or not all(isinstance(i, dict) and isinstance(i.get("ms_api"), str)
                            and isinstance(i.get("pt_api"), str) for i in items):
        raise InputError(path, "not an msprobe API mapping (expected entries with ms_api, pt_api and the "
                               "ms_args/pt_args, ms_outputs/pt_outputs index lists)")
    for i in items:
        for ms, pt in _SECTIONS.values():
            for key in (ms, pt):  # msprobe's docs say ms_outputs, its code reads ms_output: take either
                if key.endswith("_outputs") and key not in i and key[:-1] in i:
                    i[key] = i[key[:-1]]
            a, b = i.get(ms) or [], i.get(pt) or []
            if not isinstance(a, list) or not isinstance(b, list) or len(a) != len(b):
                raise InputError(path, f"{i['ms_api']}: {ms} and {pt} must be lists of the same length")
    return items


_SAME_NAME = ("Torch", "Functional", "Tensor", "NPU")


def _api_renamer(path: Path | None, golden_entries: Sequence[str]) -> Rename:
    table = builtin_api_table()
    user = {i["ms_api"]: i for i in read_api_mapping(path)} if path is not None else {}
    golden_apis = {_api_head(e) for e in golden_entries}

    def same_name(name: str) -> str:
        """Without msprobe's table: the golden API of the same name under another prefix, when there is one."""
        head = _api_head(name)
        kind, _, api = head.partition(".")
        if head in golden_apis or kind in _LAYERS:
            return name
        other = next((f"{k}.{api}" for k in _SAME_NAME if f"{k}.{api}" in golden_apis), None)
        return name.replace(head, other, 1) if other else name

    def rename(name: str, entry: str, section: str) -> str | None:
        rule = user.get(_api_head(name))
        if rule is None or rule["pt_api"] not in golden_apis:
            mapped = map_api_builtin(name, table)
            return mapped if table else same_name(mapped)
        ms_api, pt_api = rule["ms_api"], rule["pt_api"]
        new_entry = entry.replace(ms_api, pt_api, 1)
        ms_key, pt_key = _SECTIONS.get(section, ("", ""))
        word = {"input": "input", "output": "output", "parameters": "parameters",
                "param_grad": "parameters_grad"}.get(section, section)
        rest = name[len(entry):].removeprefix(f".{word}.") if section != "param_grad" else name[len(entry) + 1:]
        for ms_i, pt_i in zip(rule.get(ms_key) or [], rule.get(pt_key) or []):
            if rest == str(ms_i):
                return f"{new_entry}.{word}.{pt_i}" if section != "param_grad" else f"{new_entry}.{pt_i}"
        return None

    return rename


# -- layer mapping -----------------------------------------------------------------------------------

_LAYERS = ("Cell", "Module")
_NO_STACK = ("Primitive", "Jit")
_FRAME_FILES = ("site-packages/torch", "package/torch", "site-packages/mindspore", "package/mindspore")
_SKIP_FILES = ("msprobe", "MindSpeed")
_SKIP_FUNCS = ("construct", "__call__")
_STACK_SIGNS = {"mindspore": ("Template", "construct"), "pytorch": ("Template", r"in (for|back)ward,")}
TOP = "TopLayer"


@dataclass(slots=True)
class _Scoped:
    """One dump record placed on the layer tree: its scope path and the state (forward/backward/...) it sits in."""

    name: str
    type_name: str
    state: str
    layer_scope: str = TOP
    full_scope: str = TOP


@dataclass(slots=True)
class _Layer:
    type_name: str
    children: dict[str, "_Layer"] = field(default_factory=dict)
    items: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))


def _frame_function(stack: Sequence[str], framework: str) -> str:
    """The framework function that called the API: the last framework frame before user code, inside the hook."""
    start_sign, end_sign = _STACK_SIGNS.get(framework, _STACK_SIGNS["pytorch"])
    start, end = -1, len(stack)
    for i, line in enumerate(stack):
        if re.search(start_sign, line):
            start = i
        elif start >= 0 and re.search(end_sign, line):
            end = i
            break
    frame = None
    for line in stack[start + 1:end]:
        if any(f in line.split(",")[0] for f in _FRAME_FILES):
            frame = line
        else:
            break
    if frame is None:
        return ""
    parts = frame.split(",")
    if len(parts) < 3 or any(s in parts[0] for s in _SKIP_FILES) or any(s in parts[2] for s in _SKIP_FUNCS):
        return ""
    words = parts[2].split()
    return words[1] if len(words) > 1 else ""


def _scoped(name: str, parent: str, stack: Sequence[str] | None, framework: str) -> _Scoped | None:
    parts = name.split(".")
    if len(parts) < 4:
        return None
    if parts[-1] == "parameters_grad" or (parts[-2] == "parameters_grad" and parts[-1].isdigit()):
        off = 0 if parts[-1] == "parameters_grad" else 1
        item = _Scoped(name, parts[-2 - off], "parameters_grad")
        api, api_name, scope_parts = "parameters_grad", parts[-3 - off], parts
    elif parts[0] in _LAYERS:
        item = _Scoped(name, parts[-3], parts[-2])
        api, api_name, scope_parts = parts[0], parts[-4], parts[:-4] + parts[-3:]
    else:
        item = _Scoped(name, parts[-3], parts[-1])
        api, api_name, scope_parts = parts[0], parts[-3], parent.split(".") if parent else []
    item.layer_scope = ".".join(scope_parts[:-3]) if scope_parts else TOP
    frame = ""
    if api not in _LAYERS and api not in _NO_STACK and stack:
        frame = _frame_function(stack, framework)
    item.full_scope = ".".join([item.layer_scope, *([frame] if frame else []), api_name])
    return item


def _next_number(scope: str, prefix: str) -> float:
    m = re.search(rf"^{re.escape(prefix)}\.(\S+?)(?:\.|$)", scope)
    numbers = re.findall(r"\d+", m.group(1)) if m else []
    return int(numbers[-1]) if numbers else math.inf


def _postprocess(items: list[_Scoped]) -> None:
    """Backward records take their forward's scope; layer numbers under a ParallelTransformer start at 0."""
    by_name = {i.name: i for i in items}
    for item in items:
        parts = item.name.split(".")
        if "backward" in parts[-2:]:
            fwd = by_name.get(".".join(parts[:-2] + [p.replace("backward", "forward") for p in parts[-2:]]))
            if fwd is not None:
                item.full_scope, item.layer_scope = fwd.full_scope, fwd.layer_scope
    prefixes = {f"{i.full_scope}.layers" for i in items if i.type_name == "ParallelTransformer"}
    for prefix in prefixes:
        low = min((_next_number(i.full_scope, prefix) for i in items), default=math.inf)
        for item in items:
            n = _next_number(item.full_scope, prefix)
            if math.isfinite(n):
                seg = re.search(rf"^{re.escape(prefix)}\.(\S+?)(?:\.|$)", item.full_scope)
                assert seg is not None
                item.full_scope = f"{prefix}.{int(n - low)}" + item.full_scope[seg.end(1):]


def _stack_lines(path: Path) -> dict[str, list[str]]:
    """stack.json as entry -> frame lines, in the old ({name: [lines]}) or 26.x grouped format."""
    if not path.exists():
        return {}
    raw = read_json(path)
    out: dict[str, list[str]] = {}
    if not isinstance(raw, dict):
        return out
    for key, value in raw.items():
        if "0" in raw and isinstance(value, list) and len(value) == 2 and isinstance(value[0], list):
            for n in value[0]:
                out[str(n)] = [str(x) for x in value[1]]
        elif isinstance(value, list):
            out[str(key)] = [str(x) for x in value]
    return out


def _tree(rank_dir: Path) -> tuple[list[_Scoped], _Layer, dict[str, int]]:
    """The records of a rank on their scope tree, and each record's position among its node's same-state records."""
    raw = read_json(rank_dir / "dump.json")
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), dict):
        raise InputError(rank_dir / "dump.json", "not an msprobe dump.json (expected an object with a \"data\" "
                                                 "object of API and module records)")
    data = raw["data"]
    framework = str(raw.get("framework") or "pytorch")
    construct = read_json(rank_dir / "construct.json") if (rank_dir / "construct.json").exists() else {}
    if not isinstance(construct, dict):
        raise InputError(rank_dir / "construct.json", "not an msprobe construct.json (expected an object)")
    construct.pop("megatron_micro_step_number", None)  # Megatron dumps: values are [parent, micro step]
    stacks = _stack_lines(rank_dir / "stack.json")
    items = []
    for name in data:
        parent = construct.get(name)
        parent = parent[0] if isinstance(parent, list) and parent else parent
        item = _scoped(str(name), str(parent or ""), stacks.get(str(name)), framework)
        if item is not None:
            items.append(item)
    _postprocess(items)
    root = _Layer(TOP)
    position: dict[str, int] = {}
    for item in items:
        node = root
        for part in item.full_scope.split(".")[1:]:
            node = node.children.setdefault(part, _Layer(part))
        position[item.name] = len(node.items[item.state])
        node.items[item.state].append(item.name)
        node.type_name = item.type_name
    return items, root, position


def read_layer_mapping(path: Path) -> dict[str, list[tuple[str, str, int]]]:
    """A `-lm` file: layer class -> {nested name: golden name}, as rules keyed by the first name part."""
    raw = read_yaml(path)
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(v, dict) or v is None for v in raw.values()):
        raise InputError(path, "not an msprobe layer mapping (expected 'LayerClass:' lines, each with "
                               "'target_name: golden_name' lines under it)")
    if "Cell" in raw:
        raw[TOP] = raw.pop("Cell")
    rules: dict[str, dict[str, list[tuple[str, str, int]]]] = {}
    for type_name, names in raw.items():
        per = rules.setdefault(str(type_name), {})
        for key, value in (names or {}).items():
            if not isinstance(value, (str, int)):
                raise InputError(path, f"{type_name}.{key}: expected a layer name, got {value!r}")
            key = str(key)
            per.setdefault(key.split(".")[0], []).append((key, str(value).split("(")[0], len(key.split("."))))
        for rule in per.values():
            rule.sort(key=lambda r: -r[2])
    return rules  # type: ignore[return-value]


def layer_pairs(path: Path, target_dir: Path, golden_dir: Path) -> dict[str, str | None]:
    """Target record -> golden record (None: no counterpart), walking both scope trees with the layer rules."""
    rules: Any = read_layer_mapping(path)
    items, t_root, position = _tree(target_dir)
    _g_items, g_root, _g_position = _tree(golden_dir)
    out: dict[str, str | None] = {}
    for item in items:
        scope = item.full_scope.split(".")
        node, new, i = t_root, [TOP], 0
        while i < len(scope) - 1:
            child = scope[i + 1]
            step = 1
            for origin, target, level in [*rules.get(node.type_name, {}).get(child, []), (child, child, 1)]:
                if ".".join(scope[i + 1:i + level + 1]) == origin:
                    new.append(target)
                    step = level
                    break
            for _ in range(step):
                node = node.children[scope[i + 1]]
                i += 1
        index = position[item.name]
        g = g_root
        for part in ".".join(new).split(".")[1:]:
            g = g.children.get(part)  # type: ignore[assignment]
            if g is None:
                break
        candidates = g.items.get(item.state, []) if g is not None else []
        out[item.name] = candidates[index] if 0 <= index < len(candidates) else None
    return out
