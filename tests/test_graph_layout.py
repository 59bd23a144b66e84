"""The graph view's layout (`graph/layout.py`): boxes never overlap, edges run between adjacent layers and
around boxes, a closed module is one box, and the same graph always gives the same drawing."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from app_fixtures import attention_investigation, overflow_investigation

from ascend_tui.graph.drawing import Scene, paint_row
from ascend_tui.graph.hierarchy import BOTH, GOLDEN, TARGET, Hierarchy
from ascend_tui.graph.layout import Layout, layer_of
from ascend_tui.graph.opgraph import OpGraph, OpNode

ROOT = Path(__file__).resolve().parents[1]


def _graph(edges: list[tuple[str, str]], modules: dict[str, str] | None = None) -> OpGraph:
    """Ops named by id (`m/x.0`) in the order first named; module from the id's prefix unless given."""
    g = OpGraph("t")
    for nid in dict.fromkeys(n for e in edges for n in e):
        module = (modules or {}).get(nid, nid.rpartition("/")[0].replace("/", "."))
        g.add_node(OpNode(nid, "aten.add.Tensor", module, len(g)))
    for slot, (a, b) in enumerate(edges):
        g.add_edge(a, b, 0, slot)
    return g


def _random_graph(seed: int, n: int = 60) -> OpGraph:
    """A random DAG in execution order, ops spread over nested modules (`m0`, `m0.s1`, ...)."""
    rnd = random.Random(seed)
    g = OpGraph(f"random-{seed}")
    for i in range(n):
        depth = rnd.randrange(3)
        module = ".".join(f"m{rnd.randrange(3)}" if k == 0 else f"s{rnd.randrange(2)}" for k in range(depth))
        nid = f"{module}/op.{i}" if module else f"op.{i}"
        g.add_node(OpNode(nid, "aten.mul.Tensor", module, i))
        for j in rnd.sample(range(i), min(i, rnd.randrange(3))):
            g.add_edge(g.nodes[j].id, nid, 0, len(g.producers(nid)))
    return g


def _all_modules(g: OpGraph) -> list[str]:
    return g.modules()


def _inside(b: object, x: int, y: int) -> bool:
    return b.x <= x < b.x + b.w and b.y <= y < b.y + b.h  # type: ignore[attr-defined]


def _check_scene(sc: Scene, h: Hierarchy | None = None) -> None:
    """No two boxes overlap unless a frame holds the other whole; no edge cell lies inside a box."""
    boxes = sc.boxes
    for i, a in enumerate(boxes):
        assert a.x >= 0 and a.y >= 0 and a.x + a.w <= sc.width and a.y + a.h <= sc.height, a
        for b in boxes[i + 1:]:
            apart = a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y
            if apart:
                continue
            outer, inner = (a, b) if a.w * a.h >= b.w * b.h else (b, a)
            assert outer.kind == "frame", f"{a.key} overlaps {b.key}"
            # held whole, inside the frame's border
            assert outer.x < inner.x and inner.x + inner.w < outer.x + outer.w, (outer, inner)
            assert outer.y < inner.y and inner.y + inner.h < outer.y + outer.h, (outer, inner)
            if h is not None:  # and it is the frame of a module that holds it
                assert inner.key.startswith(outer.key + ".") if inner.kind != "op" else outer.key in h.chain(inner.key)
    solid = [b for b in boxes if b.kind != "frame"]
    for y, row in sc.cells.items():
        for x in row:
            hit = [b.key for b in solid if _inside(b, x, y)]
            assert not hit, f"edge cell ({x}, {y}) inside {hit}"
            frames = [b for b in boxes if b.kind == "frame" and _inside(b, x, y)]
            for f in frames:  # never on a frame's border: edges into a module end at its top
                assert f.x < x < f.x + f.w - 1 and f.y < y < f.y + f.h - 1, f"edge cell ({x}, {y}) on {f.key}'s border"


@pytest.mark.parametrize("make", [overflow_investigation, attention_investigation])
def test_fixture_graphs_closed_and_open_have_no_overlaps(make: object) -> None:
    g = make().graph  # type: ignore[operator]
    lay = Layout(Hierarchy.of(g))
    for opened in ([], _all_modules(g)):
        _check_scene(lay.scene(opened))


@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_have_no_overlaps_at_any_depth_opened(seed: int) -> None:
    g = _random_graph(seed)
    h = Hierarchy.of(g)
    lay = Layout(h)
    mods = _all_modules(g)
    for opened in ([], [m for m in mods if "." not in m], mods):
        sc = lay.scene(opened)
        _check_scene(sc, h)
        assert all(b.key in sc.box_of for b in sc.boxes)


@pytest.mark.parametrize("seed", range(6))
def test_edges_go_down_between_adjacent_layers_and_orthogonally(seed: int) -> None:
    g = _random_graph(seed)
    h = Hierarchy.of(g)
    lay = Layout(h)
    for module in ["", *g.modules()]:
        ml = lay.module(module, frozenset())
        layer = {it.key: it.layer for it in ml.items}
        box = {it.key: it for it in ml.items}
        for r in ml.routes:
            top, bottom = (r.dst, r.src) if r.back else (r.src, r.dst)
            assert layer[top] < layer[bottom], r
            pts = r.points
            assert pts[0][1] == box[top].y + box[top].h and pts[-1][1] == box[bottom].y - 1, r
            for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
                assert x0 == x1 or y0 == y1, r  # orthogonal
                assert y1 >= y0, r  # downward only
            # one layer apart after the virtual points: every layer between them has a bend-free run through it
            for k in range(layer[top] + 1, layer[bottom]):
                ys = [it.y for it in ml.items if it.layer == k]
                assert any(x0 == x1 and min(y0, y1) <= ys[0] <= max(y0, y1)
                           for (x0, y0), (x1, y1) in zip(pts, pts[1:])), (r, k)


def test_a_long_edge_goes_round_the_box_in_between_through_a_virtual_point() -> None:
    g = _graph([("a.0", "b.0"), ("b.0", "c.0"), ("a.0", "c.0")])
    ml = Layout(Hierarchy.of(g)).module("", frozenset())
    assert {it.key: it.layer for it in ml.items} == {"a.0": 0, "b.0": 1, "c.0": 2}
    long = next(r for r in ml.routes if (r.src, r.dst) == ("a.0", "c.0"))
    b = next(it for it in ml.items if it.key == "b.0")
    xs_in_b_layer = {x for (x, y0), (x1, y1) in zip(long.points, long.points[1:]) if x == x1
                     and min(y0, y1) <= b.y + 1 <= max(y0, y1)}
    assert xs_in_b_layer and all(not b.x <= x < b.x + b.w for x in xs_in_b_layer)
    _check_scene(Layout(Hierarchy.of(g)).scene())


def test_a_closed_module_is_one_box_with_one_edge_per_neighbour() -> None:
    edges = [("in.0", "blk/a.0"), ("in.0", "blk/b.0"), ("blk/a.0", "blk/c.0"), ("blk/b.0", "blk/c.0"),
             ("blk/c.0", "blk.sub/d.0"), ("blk.sub/d.0", "out.0"), ("blk/c.0", "out.0")]
    lay = Layout(Hierarchy.of(_graph(edges)))
    closed = lay.scene()
    assert sorted((b.key, b.kind) for b in closed.boxes) == [("blk", "module"), ("in.0", "op"), ("out.0", "op")]
    assert closed.edges == 2  # in -> blk and blk -> out, each once though four and two op edges run there
    assert "▸ blk ·4" in lay.label("blk", "module")
    opened = lay.scene(["blk"])
    kinds = {b.key: b.kind for b in opened.boxes}
    assert kinds["blk"] == "frame" and kinds["blk.sub"] == "module" and "blk.sub/d.0" not in kinds
    deep = lay.scene(["blk", "blk.sub"])
    assert {b.key: b.kind for b in deep.boxes}["blk.sub/d.0"] == "op"
    assert "blk.sub/d.0" not in {b.key for b in lay.scene(["blk.sub"]).boxes}  # a parent closed hides it
    _check_scene(deep)


def test_modules_that_feed_their_caller_back_are_drawn_without_a_cycle() -> None:
    # blk runs a.0, the model's r.0 reads it, and blk's b.0 reads r.0: blk <-> r.0 as closed boxes
    g = _graph([("blk/a.0", "r.0"), ("r.0", "blk/b.0")])
    h = Hierarchy.of(g)
    layers, back = layer_of(Layout(h).graph(""))
    assert sorted(layers) == [0, 1] and back.count(True) == 1
    sc = Layout(h).scene()
    assert sc.back_edges == 1 and sc.edges == 2
    _check_scene(sc)


def _digest(sc: Scene) -> list[object]:
    return [sc.width, sc.height, [(b.key, b.kind, b.x, b.y, b.w, b.h) for b in sc.boxes],
            sorted((y, x, v) for y, row in sc.cells.items() for x, v in row.items())]


def test_the_same_graph_gives_the_same_drawing_in_any_process() -> None:
    g = _random_graph(3, 80)
    mods = g.modules()
    assert _digest(Layout(Hierarchy.of(g)).scene(mods)) == _digest(Layout(Hierarchy.of(g)).scene(mods))
    code = ("import sys; sys.path.insert(0, 'tests'); from test_graph_layout import _random_graph, _digest; "
            "from ascend_tui.graph.hierarchy import Hierarchy; from ascend_tui.graph.layout import Layout; "
            "g = _random_graph(3, 80); "
            "print(repr(_digest(Layout(Hierarchy.of(g)).scene(g.modules()))))")
    runs = {subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}).stdout for seed in ("1", "2")}
    assert len(runs) == 1 and runs.pop().startswith("[")


def test_a_pair_matches_by_id_and_says_which_side_holds_each_node_and_edge() -> None:
    target = _graph([("a.0", "b.0"), ("b.0", "c.0")])
    golden = _graph([("a.0", "b.0"), ("b.0", "d.0"), ("a.0", "d.0")])
    h = Hierarchy.pair(target, golden)
    sides = {nid: int(h.sides[h.pos[nid]]) for nid in h.ids}
    assert sides == {"a.0": BOTH, "b.0": BOTH, "c.0": TARGET, "d.0": GOLDEN}
    edge = {(h.ids[int(a)], h.ids[int(b)]): int(s) for a, b, s in zip(h.src, h.dst, h.edge_sides)}
    assert edge == {("a.0", "b.0"): BOTH, ("b.0", "c.0"): TARGET, ("b.0", "d.0"): GOLDEN, ("a.0", "d.0"): GOLDEN}
    sc = Layout(h).scene()
    _check_scene(sc)
    # one drawing, two panes: the golden pane outlines the target-only op dashed and leaves out its edge
    c = sc.boxes[sc.box_of["c.0"]]
    gold, _ = paint_row(sc, c.y, 0, sc.width, lambda b: b.key, GOLDEN)
    tgt, _ = paint_row(sc, c.y, 0, sc.width, lambda b: b.key, TARGET)
    assert "╭" in "".join(tgt[c.x:c.x + c.w]) and "╌" in "".join(gold[c.x:c.x + c.w])


def test_placeholders_are_left_out_and_the_labels_are_the_call_names() -> None:
    inv = overflow_investigation()
    h = Hierarchy.of(inv.graph)
    assert "input:0" not in h.pos and "param:proj.weight" not in h.pos
    assert h.label("attn[0]/exp.0") == "exp.0" and h.chain("attn[0]/exp.0") == ["attn[0]"]
    assert h.first_op("attn[0]") == "attn[0]/exp.0" and h.ops_under("") == len(inv.graph.execution_order())


def test_a_module_with_more_children_than_a_group_opens_a_group_at_a_time() -> None:
    n = 250  # a flat chain: 250 ops in the model itself
    g = _graph([(f"op.{i}", f"op.{i + 1}") for i in range(n - 1)])
    h = Hierarchy.of(g)
    lay = Layout(h)
    closed = lay.scene()
    assert [(b.key, b.kind) for b in closed.boxes] == [("⋯1-100", "module"), ("⋯101-200", "module"),
                                                        ("⋯201-250", "module")]
    assert closed.edges == 2 and h.ops_under("⋯201-250") == 50
    assert h.chain("op.150") == ["⋯101-200"] and lay.label("⋯101-200", "module") == "▸ ⋯101-200 ·100"
    opened = lay.scene(["⋯101-200"])
    assert sum(b.kind == "op" for b in opened.boxes) == 100
    _check_scene(opened, h)
    # child modules are grouped the same way, their own paths kept below the group
    wide = _graph([(f"blocks.{i}/op.0", f"blocks.{i + 1}/op.0") for i in range(149)])
    hw = Hierarchy.of(wide)
    assert hw.chain("blocks.120/op.0") == ["blocks", "blocks.⋯101-150", "blocks.120"]
    assert "layers" not in hw.modules and Layout(hw).label("blocks.120", "module").startswith("▸ blocks.120")


def test_the_order_within_a_layer_undoes_crossings_the_execution_order_has() -> None:
    # a and b run first, then c (reads b) and d (reads a): in execution order the two edges cross
    g2 = OpGraph("t")
    for i, nid in enumerate(["a.0", "b.0", "c.0", "d.0"]):
        g2.add_node(OpNode(nid, "aten.add.Tensor", "", i))
    g2.add_edge("a.0", "d.0", 0, 0)
    g2.add_edge("b.0", "c.0", 0, 0)
    ml = Layout(Hierarchy.of(g2)).module("", frozenset())
    x = {it.key: it.x for it in ml.items}
    assert (x["a.0"] < x["b.0"]) == (x["d.0"] < x["c.0"])  # each consumer on its producer's side
    sc = Layout(Hierarchy.of(g2)).scene()
    assert not any(bits == 15 for row in sc.cells.values() for bits, _g, _b in row.values())  # no ┼


def test_an_op_with_no_edge_in_its_module_sits_where_it_ran_not_at_the_top() -> None:
    g = _graph([("a.0", "b.0"), ("b.0", "c.0")])
    g.add_node(OpNode("optimizer:add_.0", "aten.add_.Tensor", "", 9, phase="optimizer"))
    h = Hierarchy.of(g)
    layers = {it.key: it.layer for it in Layout(h).module("", frozenset()).items}
    assert layers["optimizer:add_.0"] == layers["c.0"] == 2
    assert h.label("optimizer:add_.0") == "opt:add_.0"
