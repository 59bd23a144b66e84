"""Benchmark: loading a 100,000-node ONNX model into `OpGraph` against `onnx.load` alone, and a full upstream walk.

Run: `PYTHONPATH=. python benchmarks/graph_load.py [--nodes 100000] [--no-types]`. The model is
a stack of blocks named like the legacy exporter names them (`/layers.N/mlp/MatMul`), each
block with a branch (two ops reading one tensor) and a join (an Add of both); tensor types are
written as exporters write them (`value_info`), or left out with `--no-types` so that shape
inference runs. Goals (issue 12): ready in under 1 s beyond `onnx.load`; an upstream walk from
the last node over the whole graph in under 100 ms.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent


def generate(path: Path, nodes: int, typed: bool = True) -> int:
    """Write the model; returns its node count. Every block is 5 nodes: MatMul, Relu | Sigmoid, Add, Mul."""
    from onnx import TensorProto, helper, save

    width = 8
    graph_nodes = []
    value_info = []
    prev = "x"
    blocks = nodes // 5
    for b in range(blocks):
        p = f"/layers.{b}"
        mm, r, s, j, m = (f"t{b}_{k}" for k in ("mm", "relu", "sig", "join", "out"))
        graph_nodes += [
            helper.make_node("MatMul", [prev, "w"], [mm], name=f"{p}/mlp/MatMul"),
            helper.make_node("Relu", [mm], [r], name=f"{p}/act/Relu"),        # branch: two readers of mm
            helper.make_node("Sigmoid", [mm], [s], name=f"{p}/gate/Sigmoid"),
            helper.make_node("Add", [r, s], [j], name=f"{p}/Add"),             # join
            helper.make_node("Mul", [j, prev], [m], name=f"{p}/Mul"),          # skip connection joins too
        ]
        if typed:
            value_info += [helper.make_tensor_value_info(t, TensorProto.FLOAT, [1, width]) for t in (mm, r, s, j)]
        prev = m
    graph = helper.make_graph(
        graph_nodes, "bench", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, width])],
        [helper.make_tensor("w", TensorProto.FLOAT, [width, width], [0.1] * (width * width))],
        value_info=value_info)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    save(model, str(path))
    return len(graph_nodes)


def machine_speed() -> float:
    """Seconds a 1M-iteration Python loop takes here (~0.04 s on an idle modern core): scale the times by it."""
    t0 = time.perf_counter()
    total = 0
    for i in range(1_000_000):
        total += i
    return time.perf_counter() - t0


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(CPU seconds of this process, wall seconds) `fn()` took; CPU time stays put when other jobs load the machine."""
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--no-types", action="store_true", help="leave tensor types out, so shape inference runs")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import onnx

    from ascend_tui.formats import onnx_model

    print(f"machine: a 1M-iteration Python loop takes {machine_speed():.3f} s (~0.04 s on an idle core)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.onnx"
        n = generate(path, args.nodes, typed=not args.no_types)
        print(f"generated {n:,}-node ONNX model ({path.stat().st_size / 1e6:.1f} MB, "
              f"{'no tensor types' if args.no_types else 'typed'})")
        t_onnx = timed(lambda: onnx.load(str(path), load_external_data=False))
        loaded: list[object] = []
        t_ours = timed(lambda: loaded.append(onnx_model.load(path)))
        inv = loaded[0]
        g = inv.graph  # type: ignore[attr-defined]
        last = g.execution_order()[-1]
        up: list[str] = []
        t_walk = timed(lambda: up.extend(g.upstream(last)))
        inferred = inv.run.extra["shape_inference"]  # type: ignore[attr-defined]
        for i, kind in ((0, "CPU"), (1, "wall")):
            print(f"[{kind} time] onnx.load alone {t_onnx[i]:.3f} s; ours (load into OpGraph) {t_ours[i]:.3f} s; "
                  f"beyond onnx.load {t_ours[i] - t_onnx[i]:.3f} s (goal < 1 s); ratio x{t_ours[i] / t_onnx[i]:.1f}; "
                  f"upstream walk {t_walk[i] * 1000:.0f} ms (goal < 100 ms)")
        print(f"graph: {len(g):,} nodes, {g.edge_count():,} edges; walk from {last} reached {len(up):,} nodes; "
              f"shape inference {'ran' if inferred else 'not needed'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
