"""The dynamo exporter's ONNX node metadata: module paths read on open, the rest when first asked for.

`ascend-tui graph` needs only each node's module path, which is the second-to-last entry of
`pkg.torch.onnx.name_scopes`; the class hierarchy, stack trace and FX node (module class, source
line, `aten` and `aliases` attrs) are read from the kept protos by `DeferredMetadata`, which runs
before the tensor types when anything first reads a node's record, and gives what an eager read
gave (`tests/test_formats_onnx_lazy_metadata.py`).
"""

from __future__ import annotations

import re
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any, Callable, Sequence, cast

from ascend_tui.evidence import SourceLocation
from ascend_tui.graph.node import OpNode, op_node
from ascend_tui.progress import Progress
from ascend_tui.readers.graphs.torch_meta import (NodeNameModules, literal_list, module_from_scopes,
                                                  source_from_trace)

# A part that starts with the one before it and a dot (`/mlp/mlp.0`): what NodeNameModules works out part by part
# (torch_meta's own rule; tests/test_formats_onnx_columns.py holds legacy_modules to it).
_FOLDS = re.compile(r"/([^/]+)/\1\.")

SCOPES = "pkg.torch.onnx.name_scopes"
_KEY_VALUE = attrgetter("key", "value")
_KEY, _VALUE = attrgetter("key"), attrgetter("value")
_MISSING: Any = object()
# torch_meta._PLAIN_LIST (repr() of a list of names) with two items or more, the second-to-last caught.
_PLAIN_SEP = "', '"
_TWO_OR_MORE = re.compile(r"\[(?:'[^'\\\r\n\0]*', )*'([^'\\\r\n\0]*)', '[^'\\\r\n\0]*'\]").fullmatch


def all_plain(joined: str, count: int) -> bool:
    """True when each of the `count` lines of `joined` (none holding a backslash, CR or NUL) is a plain list of one
    name or more (`['', 'attn', 'mm']`, no quote in a name), what `ScopeModules.modules` splits, judged by counts
    over the whole text: each line starts with `['` and ends with `']`, no separator `', '` overlaps another or
    either bracket's quote, and the quotes are two per name in all, so in each line (a line holds two per
    separator and its brackets' two at least)."""
    return (joined[:2] == "['" and joined[-2:] == "']" and joined.count("']\n['") == count - 1
            and joined[:3] != "[']" and "\n[']" not in joined  # brackets sharing one quote
            and not joined.startswith(_PLAIN_SEP, 1) and "\n[" + _PLAIN_SEP not in joined
            and not joined.endswith(_PLAIN_SEP + "]") and _PLAIN_SEP + "]\n" not in joined
            and "', ', '" not in joined and joined.count("'") == 2 * (joined.count(_PLAIN_SEP) + count))


class ScopeModules:
    """(module path, whether any scopes were named) of a `name_scopes` text, as `literal_list` and
    `module_from_scopes` give them: a plain literal of two or more names by one regex call that also finds
    the second-to-last (texts differ per node, each ending in the op's own name); any other parsed in full,
    once a text."""

    __slots__ = ("texts",)

    def __init__(self) -> None:
        self.texts: dict[str, tuple[str, bool]] = {}

    def __call__(self, text: str) -> tuple[str, bool]:
        found = _TWO_OR_MORE(text)
        if found is not None:
            return found.group(1), True
        hit = self.texts.get(text)
        if hit is None:
            scopes = literal_list(text)
            hit = self.texts[text] = (module_from_scopes(scopes, [])[0], bool(scopes))
        return hit

    def modules(self, texts: list[str]) -> tuple[list[str], list[bool]]:
        """(module paths, whether any scopes were named) of many texts, as `__call__` gives each: where none holds
        a backslash, CR, LF or NUL, a plain list of two or more names is one split (its items hold no quote when
        the text's quotes are two per item), the rest go through `__call__` (two thirds of the regex's cost)."""
        joined = "\n".join(texts)
        if "\\" in joined or "\r" in joined or "\0" in joined or joined.count("\n") != len(texts) - 1:
            found: list[str | None] = [None] * len(texts)
        elif all_plain(joined, len(texts)):  # the text after the last quote before the last separator: none for one
            return [text.rpartition(_PLAIN_SEP)[0].rpartition("'")[2] for text in texts], [True] * len(texts)
        else:
            # `['a', 'b']` split at `', '` into `['a` and `b']` (the brackets' quotes none of a separator's) with
            # no quote besides: two per part
            found = [(parts[-2] if n > 2 else parts[0][2:])
                     if (n := len(parts)) > 1 and parts[0][:2] == "['" and parts[-1][-2:] == "']"
                     and text.count("'") == 2 * n
                     else None for text, parts in zip(texts, map(str.split, texts, repeat(_PLAIN_SEP)))]
        named = [True] * len(texts)
        if None in found:
            for k in [k for k, module in enumerate(found) if module is None]:
                found[k], named[k] = self(texts[k])
        return cast("list[str]", found), named


def name_scopes(props: Any) -> str:
    """The `name_scopes` value of one node's metadata_props: its first such entry (keys are distinct in ONNX;
    reading on past it to find a repeat cost ~0.17 s more at 100k nodes), entries after it never read."""
    for entry in props:
        if entry.key == SCOPES:
            return entry.value
    return ""


def scope_texts(metadata: Sequence[Any], at: list[int]) -> list[str | None]:
    """The `name_scopes` value of each node's metadata_props (None where it has none, "" where it has no such
    entry): first the entry at the position where the node before had it (`at[0]`, kept for the next call),
    since exporters write the same keys in the same order on every node (torch sorts them: `name_scopes` is
    the fourth), so only that entry is read; else the first such entry (keys are distinct in ONNX). Where every
    node has an entry there and each is `name_scopes`, the keys and values are read by `map` over the batch
    (no bytecode per node); else (a first batch, nodes without metadata, other orders) one node at a time."""
    k = at[0]
    if metadata and k < min(map(len, metadata)) and metadata[0][k].key == SCOPES and metadata[-1][k].key == SCOPES:
        # every node has an entry there and the ends' are name scopes (nodes with the entry elsewhere seldom read
        # twice): read them all by C calls, no loop
        entries = list(map(itemgetter(k), metadata))
        if list(map(_KEY, entries)).count(SCOPES) == len(entries):
            return list(map(_VALUE, entries))
    texts: list[str | None] = []
    append = texts.append
    for props in metadata:
        if not props:
            append(None)
            continue
        if k < len(props):
            entry = props[k]
            if entry.key == SCOPES:
                append(entry.value)
                continue
        for j, entry in enumerate(props):
            if entry.key == SCOPES:
                k = j
                append(entry.value)
                break
        else:
            append("")
    at[0] = k
    return texts


class NodeMetadata:
    """Module class, source and `aten`/`aliases` attrs of a node from its metadata_props, as `module_from_scopes`
    and `source_from_trace` give them: each class list and stack trace parsed once, each name-scope list only
    counted."""

    __slots__ = ("classes", "counts", "traces")

    def __init__(self) -> None:
        self.classes: dict[tuple[str, int], tuple[str, str | None]] = {}  # (text, scope count) -> (class, aten)
        self.counts: dict[str, int] = {}  # a name-scope text no regex counts -> its entries
        self.traces: dict[str, SourceLocation | None] = {}

    def __call__(self, props: Any, attrs: dict[str, Any]) -> tuple[str, SourceLocation | None]:
        meta = dict(map(_KEY_VALUE, props))
        text = meta.get(SCOPES) or ""
        if _TWO_OR_MORE(text) is not None:
            count = text.count(_PLAIN_SEP) + 1  # plain names hold no quote
        else:
            count = self.counts.get(text, -1)
            if count < 0:
                count = self.counts[text] = len(literal_list(text))
        key = (meta.get("pkg.torch.onnx.class_hierarchy") or "", count)
        known = self.classes.get(key)
        if known is None:
            classes = literal_list(key[0])
            # module_from_scopes's class: the second-to-last, where both lists are as long and name a module
            module_class = classes[-2].rsplit(".", 1)[-1] if count >= 2 and len(classes) == count else ""
            known = self.classes[key] = (module_class, classes[-1] if classes and classes[-1].startswith("aten.")
                                         else None)
        module_class, aten = known
        text = meta.get("pkg.torch.onnx.stack_trace") or ""
        source = self.traces.get(text, _MISSING)
        if source is _MISSING:
            source = self.traces[text] = source_from_trace(text)
        if aten is not None:
            attrs["aten"] = aten
        fx = meta.get("pkg.torch.onnx.fx_node", "")
        if fx.startswith("%"):
            attrs["aliases"] = [fx[1:].split(" ", 1)[0]]
        return module_class, source


class DeferredMetadata:
    """The resolver an ONNX load with dynamo metadata hands its graph: fills the nodes' module classes, sources
    and metadata attrs from the protos (`segments`: node container, first proto, first position, count), then
    those `inherited` from a neighbour (position, owner position, same module), after `then` (the types): the
    records it rebuilds carry those types, so the graph rebuilds them no second time."""

    __slots__ = ("nodes", "segments", "inherited", "then")

    def __init__(self, nodes: list[OpNode], segments: list[tuple[Any, int, int, int]],
                 inherited: list[tuple[int, int, bool]], then: Callable[[Progress | None], Any]) -> None:
        self.nodes, self.segments, self.inherited, self.then = nodes, segments, inherited, then

    def __call__(self, progress: Progress | None) -> Any:
        nodes, segments, inherited, then = self.nodes, self.segments, self.inherited, self.then
        self.nodes, self.segments, self.inherited = [], [], []  # the protos are let go with the types' model
        resolved = then(progress)
        ins, outs = resolved if resolved is not None else ([n.inputs for n in nodes], [n.outputs for n in nodes])
        read = NodeMetadata()
        for protos, first, base, count in segments:
            for position, proto in zip(range(base, base + count), protos[first:first + count]):
                props = proto.metadata_props
                if not props:
                    continue
                n = nodes[position]
                attrs = n.attrs
                if len(attrs) == 1:  # the name alone (most nodes)
                    module_class, source = read(props, attrs)
                else:  # the same dict, its keys in the eager read's order: name, aten, aliases, then the walk's
                    later = dict(attrs)  # (module_inferred, domain, subgraphs)
                    attrs.clear()
                    attrs["name"] = later.pop("name")
                    module_class, source = read(props, attrs)
                    attrs.update(later)
                if module_class or source is not None:
                    nodes[position] = op_node(n.id, n.op_type, n.module, n.index, n.kind, ins[position],
                                              outs[position], source, n.phase, module_class, attrs)
        for position, owner_at, same in inherited:
            n, owner = nodes[position], nodes[owner_at]
            nodes[position] = op_node(n.id, n.op_type, n.module, n.index, n.kind, ins[position], outs[position],
                                      owner.source, n.phase, owner.module_class if same else "", n.attrs)
        return resolved


def legacy_modules(modules: NodeNameModules, names: Sequence[str]) -> list[str]:
    """`modules.of_all(names)`: where no name's prefix holds `//`, ends in `/` or folds (`/mlp/mlp.0`: one regex
    over all the prefixes joined; a match across two of them only sends them the long way), each prefix's
    parts joined by dots, with no lookup or call per name (a third less time at 100k legacy names)."""
    heads = [name.rpartition("/")[0] for name in names]
    joined = "\n".join(heads)
    if "//" in joined or "/\n" in joined or joined[-1:] == "/" or _FOLDS.search(joined) is not None:
        return modules.of_all(names)
    return [head[1:].replace("/", ".") if head[:1] == "/" else "" for head in heads]


def common_module(paths: list[str]) -> str:
    """The innermost module path that holds every one of `paths` (`attn` for `attn.qkv` and `attn`)."""
    split = [p.split(".") if p else [] for p in paths]
    common: list[str] = []
    for parts in zip(*split):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return ".".join(common)
