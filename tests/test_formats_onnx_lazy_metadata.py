"""The dynamo exporter's node metadata beyond the module path (class hierarchy, stack trace, FX node) is read when a
node's record is first read, not on open: `ascend-tui graph` reads only name scopes, and what is read later equals
an eager read of every entry."""

from __future__ import annotations

import random
from pathlib import Path

import onnx  # in the test extra: a missing onnx fails, never skips
import pytest
from onnx import TensorProto, helper

from ascend_tui.readers.graphs import onnx_metadata, onnx_model
from ascend_tui.readers.graphs.torch_meta import literal_list, module_from_scopes, source_from_trace
from tests.test_formats_onnx import model_from_sample
from tests.test_formats_onnx_columns import REAL
from tests.test_formats_onnx_lazy_types import _graph

TRACE = 'File "/src/net.py", line {line}, in forward\n    x = self.attn(x)'


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many nodes had their class hierarchy, stack trace and FX node read."""
    calls = {"nodes": 0}
    read = onnx_metadata.NodeMetadata.__call__

    def counted_read(self: onnx_metadata.NodeMetadata, props: object, attrs: dict[str, object]) -> object:
        calls["nodes"] += 1
        return read(self, props, attrs)

    monkeypatch.setattr(onnx_metadata.NodeMetadata, "__call__", counted_read)
    return calls


def _with_metadata(path: Path) -> int:
    return sum(bool(n.metadata_props) for n in onnx.load(str(path), load_external_data=False).graph.node)


def test_the_graph_command_reads_no_class_trace_or_fx_node_and_its_json_reads_each_node_once(
        tmp_path: Path, counted: dict[str, int]) -> None:
    for path in (REAL, model_from_sample(tmp_path)):
        assert path.is_file(), f"fixture missing: {path}"
        counted["nodes"] = 0
        text = _graph(path)
        assert counted["nodes"] == 0
        assert "modules" in text
        _graph(path, tmp_path / "g.json")
        assert counted["nodes"] == _with_metadata(path) > 0


def _eager(props: object) -> tuple[str, str, object, dict[str, object]]:
    """(module, class, source, metadata attrs) of one node as the reader read them on open before."""
    meta = {p.key: p.value for p in props}  # type: ignore[attr-defined]
    scopes = literal_list(meta.get("pkg.torch.onnx.name_scopes") or "")
    classes = literal_list(meta.get("pkg.torch.onnx.class_hierarchy") or "")
    module, module_class = module_from_scopes(scopes, classes)
    attrs: dict[str, object] = {}
    if classes and classes[-1].startswith("aten."):
        attrs["aten"] = classes[-1]
    fx = meta.get("pkg.torch.onnx.fx_node", "")
    if fx.startswith("%"):
        attrs["aliases"] = [fx[1:].split(" ", 1)[0]]
    return module, module_class, source_from_trace(meta.get("pkg.torch.onnx.stack_trace") or ""), attrs


def test_metadata_read_on_first_ask_equals_an_eager_read(tmp_path: Path) -> None:
    for path in (REAL, model_from_sample(tmp_path)):
        protos = {n.name: n for n in onnx.load(str(path), load_external_data=False).graph.node}
        graph = onnx_model.load(path).graph
        assert not any(n.module_class or n.source for n in graph.structure())  # nothing read yet
        checked = 0
        for n in graph:
            proto = protos.get((n.attrs or {}).get("name", ""))
            if n.kind != "op" or proto is None or not proto.metadata_props:
                continue
            module, module_class, source, attrs = _eager(proto.metadata_props)
            assert (n.module, n.module_class, n.source) == (module, module_class, source), n.id
            assert list(n.attrs) == ["name", *attrs, *[k for k in n.attrs if k not in attrs and k != "name"]]
            assert {k: n.attrs[k] for k in attrs} == attrs
            checked += 1
        assert checked == _with_metadata(path)


def _meta(node: onnx.NodeProto, scopes: list[str], classes: list[str], line: int) -> onnx.NodeProto:
    for key, value in (("pkg.torch.onnx.class_hierarchy", repr(classes)), ("pkg.torch.onnx.name_scopes", repr(scopes)),
                       ("pkg.torch.onnx.fx_node", f"%{scopes[-1]} : [num_users=1] = call_function[...]"),
                       ("pkg.torch.onnx.stack_trace", TRACE.format(line=line))):
        node.metadata_props.add(key=key, value=value)
    return node


def test_a_node_the_optimizer_made_takes_its_neighbours_source_and_class_when_they_are_read(tmp_path: Path) -> None:
    nodes = [_meta(helper.make_node("MatMul", ["x", "x"], ["a"], name="node_mm"), ["", "attn", "mm"],
                   ["Net", "my.Attention", "aten.mm.default"], 7),
             helper.make_node("Identity", ["a"], ["b"], name="Identity_0"),  # no metadata, no legacy name
             _meta(helper.make_node("Relu", ["b"], ["y"], name="node_relu"), ["", "attn", "relu"],
                   ["Net", "my.Attention", "aten.relu.default"], 9)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    inv = onnx_model.load(path)
    before = {n.attrs["name"]: n for n in inv.graph.structure() if n.kind == "op"}
    assert [before[k].module for k in ("node_mm", "Identity_0", "node_relu")] == ["attn"] * 3
    assert inv.run.extra["modules_inherited_from_neighbours"] == 1
    after = {n.attrs["name"]: n for n in inv.graph if n.kind == "op"}
    made, owner = after["Identity_0"], after["node_mm"]
    assert (made.module_class, made.source) == ("Attention", owner.source)
    assert owner.source is not None and owner.source.line == 7
    assert owner.attrs == {"name": "node_mm", "aten": "aten.mm.default", "aliases": ["mm"]}
    assert made.attrs == {"name": "Identity_0", "module_inferred": True}


SCOPE_TEXTS = [
    "", "[]", "['']", "['', 'attn']", "['', 'attn', 'attn.qkv', 'mm']", "['a, b', 'c, d', 'e']",
    "['', 'it\\'s', 'op']", '["", "attn", "op"]', "['', 'attn', 'op'", "[1, 2, 3]", "('', 'attn', 'op')",
    "['', 'attn',  'op']", "not a list", "['', 'a\\nb', 'op']", "['x', '']", "[', ']", "[', ', 'x']",
    "['a', 'b'c', 'd']", "['a', 'b', 'c']x", "x['a', 'b']", "['a', 'b']\n", "['a', 'b\u00e9', 'c\tx']",
    "['', 'a.b', 'c', '']", "['', ', ', 'x']", "['', \"', '\", 'x']"]


@pytest.mark.parametrize("text", SCOPE_TEXTS)
def test_scope_modules_give_what_parsing_the_whole_list_gives(text: str) -> None:
    scopes = literal_list(text)
    expected = (module_from_scopes(scopes, [])[0], bool(scopes))
    modules = onnx_metadata.ScopeModules()
    assert modules(text) == expected
    assert modules(text) == expected  # again, from the cache where it was parsed


def test_only_the_first_name_scopes_entry_is_read() -> None:
    node = helper.make_node("Relu", ["x"], ["y"])
    node.metadata_props.add(key="pkg.torch.onnx.class_hierarchy", value="['Net', 'aten.relu.default']")
    node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value="['', 'relu']")
    assert onnx_metadata.name_scopes(node.metadata_props) == "['', 'relu']"
    assert onnx_metadata.name_scopes(helper.make_node("Relu", ["x"], ["y"]).metadata_props) == ""


def test_scope_modules_of_many_texts_equal_each_read_alone() -> None:
    one = onnx_metadata.ScopeModules()
    expected = [one(text) for text in SCOPE_TEXTS]
    plain = [t for t in SCOPE_TEXTS if not any(c in t for c in "\\\r\n\0")]  # the batch split reads them
    for texts in (SCOPE_TEXTS, plain, plain[::-1], ["['', 'a', 'b']"] * 3, []):
        modules, named = onnx_metadata.ScopeModules().modules(list(texts))
        assert list(zip(modules, named)) == [one(text) for text in texts]
    assert expected[SCOPE_TEXTS.index("['', 'attn', 'attn.qkv', 'mm']")] == ("attn.qkv", True)


def test_scope_texts_read_the_entry_where_the_last_node_had_it_else_the_first() -> None:
    def node(*keys: str) -> onnx.NodeProto:
        made = helper.make_node("Relu", ["x"], ["y"])
        for k, key in enumerate(keys):
            made.metadata_props.add(key=key, value=f"{key}#{k}")
        return made

    scopes, other = onnx_metadata.SCOPES, "pkg.torch.onnx.class_hierarchy"
    nodes = [node("namespace", other, "fx", scopes, "trace"), node("namespace", other, "fx", scopes),
             node(scopes), node(), node(other), node(other, "fx", "a", "b", "c"), node("a", scopes, scopes)]
    at = [0]
    texts = onnx_metadata.scope_texts([n.metadata_props for n in nodes], at)
    assert texts == [f"{scopes}#3", f"{scopes}#3", f"{scopes}#0", None, "", "", f"{scopes}#1"]
    assert texts == [onnx_metadata.name_scopes(n.metadata_props) if n.metadata_props else None for n in nodes]
    assert at == [1]


def test_scope_modules_of_many_texts_equal_each_read_alone_on_random_texts_of_brackets_quotes_and_commas() -> None:
    rng = random.Random(21)
    texts = ["['" + "".join(rng.choice("[]', a.") for _ in range(rng.randrange(14))) + "']" for _ in range(4000)]
    one = onnx_metadata.ScopeModules()
    modules, named = onnx_metadata.ScopeModules().modules(texts)
    assert list(zip(modules, named)) == [one(text) for text in texts]
    assert sum(named) > 500  # plain lists are among them


def test_scope_modules_of_small_batches_equal_each_read_alone_where_counts_over_the_batch_decide() -> None:
    """`all_plain` judges a whole batch by counts over the joined text: odd texts alone, in pairs and among plain
    lists (one bracket quote shared, a separator at a bracket or overlapping another, a quote in a name made up
    for by a missing one elsewhere) must read as each read alone, whichever way the batch goes."""
    rng = random.Random(6)
    odd = ["[']", "['a'b']", "[']x', 'y']", "['a', ', ']", "['a', ', ', 'b']", "[', 'a']", "['a', ']", "['']",
           "['', '']", "['a'', 'b']", "['a', ''b']", "['x']", *SCOPE_TEXTS]
    odd += ["['" + "".join(rng.choice("[]', a.") for _ in range(rng.randrange(10))) + "']" for _ in range(300)]
    plain = [t for t in odd if onnx_metadata.all_plain(t, 1) and not any(c in t for c in "\\\r\n\0")]
    one = onnx_metadata.ScopeModules()
    batches = [[t] for t in odd] + [[a, b] for a in odd[:40] for b in odd[:40]]
    batches += [rng.sample(plain, 4) + [rng.choice(odd)] for _ in range(500)]
    went_plain = 0
    for texts in batches:
        went_plain += onnx_metadata.all_plain("\n".join(texts), len(texts))
        modules, named = onnx_metadata.ScopeModules().modules(texts)
        assert list(zip(modules, named)) == [one(text) for text in texts], texts
    assert went_plain > 300 and len(plain) > 30  # both ways taken
    assert not onnx_metadata.all_plain("[']\n['a'b']", 2)  # quotes right in all, wrong in each
