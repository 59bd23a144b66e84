"""The story: hand-built graphs with known interactions, one per folding rule, and independent causes kept apart."""

from __future__ import annotations

from ascend_tui.checks.story import finding_ids, tell
from ascend_tui.evidence import Finding, RootCause, TensorMeta
from ascend_tui.graph.opgraph import OpGraph, OpNode


def chain(*ids: str, branch: dict[str, str] | None = None) -> OpGraph:
    """input:0 -> ids[0] -> ids[1] -> ...; `branch` maps extra node -> its producer."""
    g = OpGraph()
    meta = (TensorMeta((4, 4), "float16"),)
    g.add_node(OpNode("input:0", "input", "", -1, kind="input", outputs=meta))
    prev = "input:0"
    nodes = list(ids) + list((branch or {}).keys())
    for i, nid in enumerate(nodes):
        module = nid.rsplit("/", 1)[0] if "/" in nid else ""
        g.add_node(OpNode(nid, f"aten.{nid.rsplit('/', 1)[-1].split('.')[0]}", module, i, inputs=meta, outputs=meta))
        src = (branch or {}).get(nid, prev)
        g.add_edge(src, nid, 0, 0)
        if nid in ids:
            prev = nid
    return g


def f(g: OpGraph, check: str, kind: str, node: str, severity: str = "error", attribution: str | None = "introduced",
      root: str | None = None, **metrics: object) -> Finding:
    n = g.node(node)
    rc = RootCause(root, g.node(root).module, "cause") if root else None
    return Finding(check, kind, severity, node, n.op_type, n.module, n.index, f"{kind} at {node}",
                   attribution, dict(metrics), rc)  # type: ignore[arg-type]


def test_nan_after_an_out_of_bounds_read_is_the_memory_cause() -> None:
    g = chain("emb/embedding.0", "add.0", "exp.0", "sum.0")
    found = [f(g, "memory", "out_of_bounds", "emb/embedding.0"), f(g, "overflow", "nan", "exp.0"),
             f(g, "overflow", "nan", "sum.0", "info", "inherited", root="exp.0", origin="exp.0")]
    story = tell(g, found)
    assert len(story) == 1
    cause = story[0]
    assert (cause.check, cause.node, cause.kind) == ("memory", "emb/embedding.0", "out_of_bounds")
    assert set(cause.explains) == set(finding_ids(found))
    assert "memory-first" in cause.rules and cause.checks == ("memory", "overflow")


def test_precision_introduced_where_inputs_overflowed_is_the_overflow_cause() -> None:
    g = chain("scale/mul.0", "attn/mm.0", "attn/softmax.0", "out/linear.0")
    found = [f(g, "overflow", "inf", "attn/mm.0", root="scale/mul.0"),
             f(g, "precision", "precision-loss", "attn/softmax.0"),
             f(g, "precision", "precision-loss", "out/linear.0", "warning", "inherited")]
    story = tell(g, found)
    assert [c.node for c in story] == ["scale/mul.0"], "named at the overflow's root cause"
    assert story[0].check == "overflow" and "overflow-explains-precision" in story[0].rules
    assert len(story[0].explains) == 3


def test_layout_conversions_for_a_module_that_loses_precision_are_named_together() -> None:
    g = chain("block1/permute.0", "block1/contiguous.0", "block1/norm.0", "head/linear.0")
    found = [f(g, "precision", "precision-loss", "block1/norm.0", "warning"),
             f(g, "profile", "layout_conversion", "block1/contiguous.0", "warning", None, modules=["block1"])]
    story = tell(g, found)
    assert len(story) == 1 and story[0].module == "block1"
    assert story[0].checks == ("precision", "profile") and "layout-with-precision" in story[0].rules


def test_independent_causes_both_stay_and_errors_rank_first() -> None:
    g = chain("a/mm.0", "a/exp.0", branch={"b/linear.0": "input:0", "b/var.0": "b/linear.0"})
    found = [f(g, "precision", "precision-loss", "b/var.0", "warning"), f(g, "overflow", "inf", "a/exp.0")]
    story = tell(g, found)
    assert [(c.check, c.node) for c in story] == [("overflow", "a/exp.0"), ("precision", "b/var.0")]
    assert [c.id for c in story] == ["cause-1", "cause-2"]


def test_two_origins_of_one_unscaled_input_are_one_cause_and_ids_are_unique() -> None:
    g = chain("x/mul.0", "a/mm.0", "b/mm.0")
    found = [f(g, "overflow", "inf", "a/mm.0", root="x/mul.0"), f(g, "overflow", "inf", "b/mm.0", root="x/mul.0"),
             f(g, "overflow", "inf", "b/mm.0", "warning")]
    ids = finding_ids(found)
    assert len(set(ids)) == 3 and ids[2] == "overflow.inf@b/mm.0#1"
    story = tell(g, found)
    assert len(story) == 2 and story[0].node == "x/mul.0" and len(story[0].explains) == 2


def test_no_findings_no_story_and_info_notes_are_not_causes() -> None:
    g = chain("a.0")
    assert tell(g, []) == []
    assert tell(g, [f(g, "memory", "unprinted_errors", "a.0", "info", None)]) == []


def test_a_clamped_index_cannot_explain_the_nan_of_the_same_run() -> None:
    """The live sanitizer clamps bad indices, so a NaN in that run has its own cause."""
    g = chain("emb/embedding.0", "add.0", "exp.0")
    found = [f(g, "memory", "out_of_bounds", "emb/embedding.0", clamped=True), f(g, "overflow", "nan", "exp.0")]
    assert [c.check for c in tell(g, found)] == ["memory", "overflow"]


def test_wrong_numbers_rank_before_a_leak_of_the_same_severity() -> None:
    g = chain("cache/relu.0", "mm.0", "exp.0", "sum.0")
    found = [f(g, "memory", "leak", "cache/relu.0"), f(g, "overflow", "inf", "exp.0"),
             f(g, "overflow", "inf", "sum.0", "info", "inherited", root="exp.0", origin="exp.0")]
    assert [c.kind for c in tell(g, found)] == ["inf", "leak"], "the Inf reaches the outputs; the leak does not"
