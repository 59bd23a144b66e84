"""Band attribution on a hand-made chain: rounding is silent, the op that leaves the band introduces, the rest inherit."""

from __future__ import annotations

import math

from ascend_tui.checks.precision_growth import NodeError, attribute_growth, growth_findings
from ascend_tui.graph.node import OpNode
from ascend_tui.graph.opgraph import OpGraph

U = 2.0 ** -8  # bfloat16


def _chain(n: int) -> OpGraph:
    g = OpGraph("chain")
    for i in range(n):
        g.add_node(OpNode(f"op{i}", "aten.mul", f"layer{i}", i))
        if i:
            g.add_edge(f"op{i - 1}", f"op{i}")
    return g


def _node(name: str, out: float, ins: tuple[float, ...]) -> NodeError:
    return NodeError(name, out, ins, U, U)


def test_accumulated_rounding_gives_no_verdict_at_all() -> None:
    g = _chain(4)
    errs = [0.5 * U, 1.5 * U, 3 * U, 5 * U]  # grows, but never more than twice what came in plus the op band
    nodes = [_node(f"op{i}", e, (errs[i - 1],) if i else ()) for i, e in enumerate(errs)]
    assert attribute_growth(g, nodes) == {}


def test_the_op_leaving_the_band_introduces_and_the_ones_after_inherit() -> None:
    g = _chain(5)
    errs = [U, 2 * U, 60 * U, 70 * U, 75 * U]
    nodes = [_node(f"op{i}", e, (errs[i - 1],) if i else ()) for i, e in enumerate(errs)]
    v = attribute_growth(g, nodes)
    assert v["op2"].attribution == "introduced" and v["op2"].severity == "error"
    assert [v[f"op{i}"].attribution for i in (3, 4)] == ["inherited", "inherited"]
    assert {v[f"op{i}"].cause for i in (3, 4)} == {"op2"}
    found = growth_findings(g, v, dtype="bfloat16")
    assert [f.severity for f in found] == ["error", "info", "info"] and "op band" not in found[0].message
    assert "bfloat16 band" in found[0].message and found[0].metrics["times_band"] > 5


def test_a_nan_output_from_finite_inputs_is_introduced_and_nan_inputs_carry_it() -> None:
    g = _chain(3)
    nodes = [_node("op0", U, ()), _node("op1", math.inf, (U,)), _node("op2", math.inf, (math.inf,))]
    v = attribute_growth(g, nodes)
    assert v["op1"].attribution == "introduced" and v["op2"].attribution == "inherited"
    assert "NaN/Inf" in growth_findings(g, v, dtype="bfloat16")[0].message


def test_a_replay_that_stays_in_its_band_makes_a_steep_op_inherit() -> None:
    g = _chain(3)
    nodes = [_node("op0", 2 * U, ()), _node("op1", 2 * U, (2 * U,)), _node("op2", 40 * U, (2 * U,))]
    assert attribute_growth(g, nodes)["op2"].attribution == "introduced"
    v = attribute_growth(g, nodes, confirm=lambda node: False)
    assert v["op2"].attribution == "inherited" and v["op2"].evidence == "replay" and v["op2"].cause == "op0"


def test_a_difference_no_compared_op_owns_is_reported_where_it_is_first_seen() -> None:
    # op1 replays in band on the golden inputs, but its inputs already differ and nothing upstream was paired
    g = _chain(2)
    nodes = [_node("op1", math.inf, (40 * U,))]
    v = attribute_growth(g, nodes, confirm=lambda node: False)
    assert v["op1"].attribution == "introduced" and v["op1"].evidence == "unpaired" and v["op1"].severity == "error"
    found = growth_findings(g, v, dtype="bfloat16")
    assert "first seen here" in found[0].message and "could not pair" in found[0].message
    assert "--fuzzy" in (found[0].hint or "")


def test_a_real_nan_made_by_an_unpaired_op_is_an_error_not_a_pass() -> None:
    # made by tests/data/msprobe_nan_tensor/make_dump.py with msprobe 26.2.0: the target's sqrt reads y - 0.05 from
    # a Tensor.__sub__ the golden run does not have (it takes abs), so NaN appears where the golden side is finite
    from pathlib import Path

    from ascend_tui.offline.compare import compare

    data = Path(__file__).parent / "data" / "msprobe_nan_tensor"
    inv = compare(data / "target", data / "golden", workers=1).investigation
    errors = [f for f in inv.findings if f.severity == "error" and f.kind == "precision-loss"]
    assert [f.node.split("/")[-1] for f in errors] == ["sqrt.0"]
    assert "NaN/Inf where the golden run is finite" in errors[0].message
    assert any(f.kind == "unmatched" for f in inv.findings)  # and the rows it could not pair are still said
