"""Property test: `analyze` survives any statistics table (0, negatives, Inf, NaN everywhere) on random graphs.

A check that raises on a strange number loses the user's whole run; every derived quantity must be defined.
"""

from __future__ import annotations

import json
import math
import random

import pytest

from ascend_tui.checks import overflow
from ascend_tui.checks.overflow import RangeEvidence, analyze
from ascend_tui.evidence import STAT_FIELDS, Finding, StatsTable, TensorMeta
from ascend_tui.graph.opgraph import OpGraph, OpNode
from ascend_tui.investigation import Investigation
from ascend_tui.report import build_report

VALUES = (0.0, -0.0, 1.0, -1.0, 3.0, -7.5, 1e-30, 2.0 ** -25, 6e-8, 65504.0, -65504.0, 7e4, 3.4e38, -3.4e38, 1e39,
          math.inf, -math.inf, math.nan, 1e300, -1e300, 448.0, 12.0, -2.0)
OPS = ("mm", "add", "sub", "mul", "div", "exp", "log", "rsqrt", "sqrt", "full", "where", "masked_fill",
       "scalar_tensor", "fill", "softmax", "sum", "matmul", "relu", "pow", "layer_norm", "clamp", "arange", "bmm")
NEAR = (*VALUES, 1e38, 5e37, 1.2e38, 4e307, 3e4, 200.0)  # within a few bits of some dtype's max
DTYPES = ("float16", "bfloat16", "float32", "int64", "bool", "float8_e4m3fn", None)


def random_table(rng: random.Random, keys: list[tuple[str, int]], values: tuple[float, ...] = VALUES) -> StatsTable:
    table = StatsTable()
    for key in keys:
        if rng.random() < 0.15:
            continue
        table.add_many([key], [[rng.choice(values) for _ in STAT_FIELDS]])
    return table


def random_case(rng: random.Random, dtypes: tuple[str | None, ...] = DTYPES) -> tuple[OpGraph, list[tuple[str, int]]]:
    g = OpGraph()
    ids: list[str] = []
    keys: list[tuple[str, int]] = []
    for i in range(rng.randint(1, 4)):
        kind = rng.choice(("input", "param", "buffer", "const"))
        nid = f"{kind}:{i}"
        dt = rng.choice(dtypes)
        g.add_node(OpNode(nid, kind, "", -1, kind=kind,  # type: ignore[arg-type]
                          outputs=(TensorMeta((4, 4), dt) if dt else None,)))
        ids.append(nid)
        keys.append((nid, 0))
    for i in range(rng.randint(0, 14)):
        op = rng.choice(OPS)
        module = rng.choice(("", "layer.0", "layer.1.attn"))
        nid = f"{module + '/' if module else ''}{op}.{i}"
        phase = "backward" if rng.random() < 0.15 else "forward"
        if phase == "backward":
            nid = f"backward:{nid}"
        outs = tuple(TensorMeta((4, 4), dt) if (dt := rng.choice(dtypes)) else None for _ in range(rng.randint(1, 2)))
        g.add_node(OpNode(nid, f"aten.{op}", module, i, outputs=outs, phase=phase,
                          attrs={"forward": rng.choice(ids)} if phase == "backward" and rng.random() < 0.5 else None))
        for slot in range(rng.randint(0, 3)):
            g.add_edge(rng.choice(ids), nid, 0, slot)
        ids.append(nid)
        keys.extend((nid, s) for s in range(len(outs)))
    return g, keys


def test_analyze_never_raises_on_any_statistics() -> None:
    rng = random.Random(20261130)
    for case in range(1500):
        g, keys = random_case(rng)
        target = random_table(rng, keys)
        reference = random_table(rng, keys) if rng.random() < 0.7 else None
        evidence = {k: RangeEvidence(rng.choice(("float16", "bfloat16", "float32")),
                                     rng.choice((0, 1, 5, -3)), rng.choice((0, 1, 64, -1)),
                                     rng.choice(VALUES)) for k in keys if rng.random() < 0.3}
        kwargs = dict(dtype=rng.choice(("float16", "bfloat16", "float32", "float8_e5m2")), reference=reference,
                      inf_nan_mode=rng.random() < 0.7, headroom_bits=rng.choice((0.0, 1.0, 3.5)),
                      overflow_flags={k[0]: True for k in keys if rng.random() < 0.1}, evidence=evidence,
                      underflow_fraction=rng.choice((0.0, 0.05, 1.0)),
                      phase=rng.choice((None, "forward", "backward")))
        try:
            findings = analyze(g, target, **kwargs)  # type: ignore[arg-type]
        except Exception as exc:  # pragma: no cover - the failure message names the case to replay
            raise AssertionError(f"case {case}: analyze raised {type(exc).__name__}: {exc}") from exc
        assert all(isinstance(f, Finding) and f.severity in ("error", "warning", "info") for f in findings)
        assert all(f.node in g and f.message and f.check == "overflow" for f in findings)
        inv = Investigation(g, stats=target, reference=reference)
        inv.replace_findings("overflow", findings)
        report = build_report(inv)
        text = json.dumps(report, allow_nan=False)  # strict JSON: non-finite numbers are strings
        assert json.loads(text)["summary"] == inv.summary()


def test_rows_set_aside_change_no_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    """`rows_to_check` sets aside rows far inside every range without reading them: the findings (every field, in
    order) are those of reading every row, in float32 graphs (where it sets rows aside) and mixed ones alike."""
    rng = random.Random(20261202)
    cases = []
    for case in range(600):
        g, keys = random_case(rng, ("float32", "float64", "int64", None) if case % 2 else DTYPES)
        target = random_table(rng, keys, NEAR)
        reference = random_table(rng, keys, NEAR) if rng.random() < 0.5 else None
        kwargs = dict(dtype=rng.choice(("float32", "float64", "float16")), reference=reference,
                      inf_nan_mode=rng.random() < 0.6, headroom_bits=rng.choice((0.0, 1.0, 3.5, 200.0, -1.0)),
                      overflow_flags={k[0]: True for k in keys if rng.random() < 0.1},
                      phase=rng.choice((None, "forward", "backward")))
        cases.append((g, target, kwargs))
    kept = 0

    def counted(t, *args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal kept
        rows = rows_to_check(t, *args, **kwargs)
        kept += len(t.rows) - len(rows)
        return rows

    rows_to_check = overflow.rows_to_check
    monkeypatch.setattr(overflow, "rows_to_check", counted)
    fast = [json.dumps([f.to_json() for f in analyze(g, t, **kw)]) for g, t, kw in cases]  # type: ignore[arg-type]
    monkeypatch.setattr(overflow, "rows_to_check", lambda t, *a, **kw: list(t.rows.items()))
    every = [json.dumps([f.to_json() for f in analyze(g, t, **kw)]) for g, t, kw in cases]  # type: ignore[arg-type]
    assert fast == every
    assert kept > 50  # rows were set aside (small values in a float32 graph): the comparison tested something
