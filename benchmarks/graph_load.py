"""Benchmark: loading a 100,000-node ONNX model into `OpGraph` against `onnx.load` alone, a full upstream walk,
and `ascend-tui graph` on it end to end.

Run: `PYTHONPATH=. python benchmarks/graph_load.py [--nodes 100000] [--no-types] [--dynamo] [--rounds 3]
[--count-nodes 5000] [--instructions]`. Each round times `onnx.load`, our load, the first read of an edge
(which makes the edges the reader only counted) and the walk, and every round's numbers are printed (the
machines these run on are shared: read the spread, not one number), then their median. The model is a stack of
blocks named like the legacy exporter names them (`/layers.N/mlp/MatMul`), each block
with a branch (two ops reading one tensor) and a join (an Add of both); tensor types are written
as exporters write them (`value_info`), or left out with `--no-types` so that shape inference is
needed. Either way the nodes' tensor types are read when first asked for (inference too where
needed), timed on its own. `--dynamo` names nodes as `torch.onnx.export(dynamo=True)` does and
gives each the `metadata_props` it writes, in its order (namespace, class hierarchy, FX node, name
scopes, stack trace), so the module paths come from metadata instead of names. Then the command
the user waits for, `ascend-tui graph -q big.onnx`, in fresh processes, `--rounds` times, with its
start-up (the same command on a 10-node model, also `--rounds` times, their median) taken off; and
once `graph --json`, which needs every node's tensors. The command's primary figure is
its CPU time beyond `onnx.load` as a user's script meets it, timed inside a fresh process (the
command runs in one, touching its memory first), with the figure beyond the in-process rounds'
median beside it (those rounds reuse memory the round before freed, so their `onnx.load` is
warm and cheaper). Beside the
times, counts the machine's load does not move: the page faults of each command run beyond start-up
(memory first touched, which costs system time here), and the command's work on a `--count-nodes`
model of the same kind counted per node (Python calls, calls of C functions from Python, bytecodes
run; with `--instructions` the machine instructions, C code's work included, counted by valgrind), so a
change is judged by them when the VM drifts. Goals (issues 12 and 21): the load, and the
command beyond its start-up, under 1 s (CPU) beyond `onnx.load`; an upstream walk from the last node
over the whole graph in under 100 ms.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent


_CLASSES = {"mlp": "torch.nn.modules.linear.Linear", "act": "torch.nn.modules.activation.ReLU",
            "gate": "torch.nn.modules.activation.Sigmoid", "": ""}


def dynamo_metadata(node: object, block: int, scope: str, op: str, k: int) -> None:
    """Give `node` the metadata_props the dynamo exporter writes for op `op` (the `k`-th of the model)."""
    fx = f"{op.lower()}_{k}"
    scopes = ["", f"layers.{block}"] + ([f"layers.{block}.{scope}"] if scope else []) + [fx]
    classes = ["bench.Net", "bench.Block"] + ([_CLASSES[scope]] if scope else []) + [f"aten.{op.lower()}.default"]
    trace = (f'File "/src/bench.py", line {20 + len(scope)}, in forward\n    x = self.{scope or "join"}(x)\n'
             f'  File "/usr/lib/python3/site-packages/torch/nn/modules/module.py", line 1775, in _call_impl\n'
             f'    return forward_call(*args, **kwargs)')
    namespace = ": " + classes[0] + "".join(f"/{s}: {c}" for s, c in zip(scopes[1:], classes[1:]))
    # in the order torch writes them (sorted by key: the name scopes are the fourth entry)
    for key, value in (("namespace", namespace), ("pkg.torch.onnx.class_hierarchy", repr(classes)),
                       ("pkg.torch.onnx.fx_node", f"%{fx} : [num_users=1] = call_function[target=torch.ops.aten."
                                                  f"{op.lower()}.default](args = (%x,), kwargs = {{}})"),
                       ("pkg.torch.onnx.name_scopes", repr(scopes)), ("pkg.torch.onnx.stack_trace", trace)):
        node.metadata_props.add(key=key, value=value)  # type: ignore[attr-defined]


def generate(path: Path, nodes: int, typed: bool = True, dynamo: bool = False) -> int:
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
        if dynamo:
            for k, (node, scope) in enumerate(zip(graph_nodes[-5:], ("mlp", "act", "gate", "", ""))):
                op = node.op_type
                node.name = f"node_{op}_{5 * b + k}"
                dynamo_metadata(node, b, scope, op, 5 * b + k)
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


def fresh_cpu(script: str, path: Path) -> float:
    """The CPU seconds `python -c SCRIPT PATH` prints: what it timed inside a fresh process."""
    import subprocess

    return float(subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True,
                                check=True).stdout)


def _env() -> dict[str, str]:
    import os

    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))


def command(args: list[str]) -> tuple[float, float, int]:
    """(CPU, wall) seconds and page faults (memory first touched: a count the machine's speed does not change)
    of `ascend-tui ARGS` in a fresh process."""
    import os
    import subprocess

    w0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ascend_tui", *args], stdout=subprocess.DEVNULL, env=_env())
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"ascend-tui {' '.join(args)} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - w0, usage.ru_minflt


# What the command runs (`cli.graph.run_graph`), its work counted: a first run on a tiny model imports and warms
# everything, then the model's run counts Python function calls and calls of C functions from Python code, and
# another the bytecodes Python executes (C loops such as `map` count as the one call that runs them).
_CALLS = """
import argparse, io, sys
from ascend_tui.cli.graph import run_graph

def graph(path):
    run_graph(argparse.Namespace(path=path, evidence=[], json=None, quiet=True, fail_on="error"), io.StringIO())

graph(sys.argv[2])
counts = {"call": 0, "c_call": 0}

def count(frame, event, arg):
    if event in counts:
        counts[event] += 1

sys.setprofile(count)
graph(sys.argv[1])
sys.setprofile(None)
opcodes = [0]

def each_opcode(frame, event, arg):
    opcodes[0] += event == "opcode"
    return each_opcode

def trace(frame, event, arg):
    frame.f_trace_opcodes = True
    return each_opcode

sys.settrace(trace)
graph(sys.argv[1])
sys.settrace(None)
print(counts["call"], counts["c_call"], opcodes[0])
"""


def calls(path: Path, tiny: Path) -> tuple[int, int, int]:
    """(Python calls, C calls from Python, bytecodes run) of `ascend-tui graph PATH`'s work, in a fresh process:
    counts that stay put when the machine is loaded, so a change is judged by them where the times drift."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", _CALLS, str(path), str(tiny)], capture_output=True, text=True,
                         check=True, env=_env()).stdout.split()
    return int(out[0]), int(out[1]), int(out[2])


def instructions(args: list[str]) -> int | None:
    """Machine instructions `ascend-tui ARGS` runs in a fresh process, counted by valgrind (`cachegrind`, no cache
    simulation; ~30x slower): a count of the work C code does too (protobuf, dicts, strings), which bytecodes miss
    and the machine's load does not move. None where valgrind is not installed."""
    import re
    import shutil
    import subprocess

    if shutil.which("valgrind") is None:
        return None
    out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                          sys.executable, "-m", "ascend_tui", *args], capture_output=True, text=True, env=_env()).stderr
    found = re.search(r"I\s+refs:\s+([\d,]+)", out)
    return int(found.group(1).replace(",", "")) if found else None


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--no-types", action="store_true", help="leave tensor types out, so shape inference runs")
    ap.add_argument("--dynamo", action="store_true", help="dynamo exporter names and metadata_props on every node")
    ap.add_argument("--rounds", type=int, default=3, help="time everything this many times; every run is printed")
    ap.add_argument("--count-nodes", type=int, default=5_000,
                    help="size of the model whose Python calls per node are counted (profiling is slow)")
    ap.add_argument("--instructions", action="store_true",
                    help="also count the command's machine instructions per node under valgrind (~30 s at 5k nodes)")
    args = ap.parse_args(argv)
    rounds_n = max(1, args.rounds)
    sys.path.insert(0, str(ROOT))
    import gc

    import onnx

    from ascend_tui.readers.graphs import onnx_model

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.onnx"
        n = generate(path, args.nodes, typed=not args.no_types, dynamo=args.dynamo)
        print(f"generated {n:,}-node ONNX model ({path.stat().st_size / 1e6:.1f} MB, "
              f"{'no tensor types' if args.no_types else 'typed'}{', dynamo metadata' if args.dynamo else ''}); "
              f"{rounds_n} rounds, every one printed")
        runs: list[dict[str, tuple[float, float]]] = []
        for k in range(rounds_n):
            loop = machine_speed()
            rounds = {"onnx": timed(lambda: onnx.load(str(path), load_external_data=False))}
            loaded: list[object] = []
            rounds["ours"] = timed(lambda: loaded.append(onnx_model.load(path)))
            inv = loaded.pop()
            g = inv.graph  # type: ignore[attr-defined]
            last = g.execution_order()[-1]
            up: list[str] = []
            # the first read of an edge makes the edges the reader only counted (`OpGraph.adopt_unlinked`)
            rounds["link"] = timed(lambda: g.in_degree(last))
            rounds["walk"] = timed(lambda: up.extend(g.upstream(last)))
            runs.append(rounds)
            t_onnx, t_ours, t_walk = rounds["onnx"], rounds["ours"], rounds["walk"]
            print(f"[round {k + 1}, CPU (wall)] onnx.load alone {t_onnx[0]:.3f} s ({t_onnx[1]:.3f}); ours (load into "
                  f"OpGraph) {t_ours[0]:.3f} s ({t_ours[1]:.3f}); beyond onnx.load {t_ours[0] - t_onnx[0]:.3f} s "
                  f"({t_ours[1] - t_onnx[1]:.3f}) (goal < 1 s), x{t_ours[0] / t_onnx[0]:.1f} onnx.load; edges made on "
                  f"first read {rounds['link'][0] * 1000:.0f} ms; upstream walk {t_walk[0] * 1000:.0f} ms "
                  f"({t_walk[1] * 1000:.0f}) (goal < 100 ms); machine: a 1M-iteration loop {loop:.3f} s "
                  f"(~0.04 s on an idle modern core)")
            del inv, g
            gc.collect()
        for i, kind in ((0, "CPU"), (1, "wall")):
            beyond = median([r["ours"][i] - r["onnx"][i] for r in runs])
            print(f"[median of {rounds_n}, {kind}] onnx.load alone {median([r['onnx'][i] for r in runs]):.3f} s; "
                  f"ours {median([r['ours'][i] for r in runs]):.3f} s; beyond onnx.load {beyond:.3f} s; "
                  f"upstream walk {median([r['walk'][i] for r in runs]) * 1000:.0f} ms")
        again = onnx_model.load(path)
        inference = again.run.extra["shape_inference"] == "pending"
        pending = again.graph.shapes_pending
        shapes = timed(again.graph.resolve_shapes)  # what the first reader of a node's tensors pays, once
        ran = again.run.extra["shape_inference"]
        del again
        how = f"(shape inference: {'ran' if ran is True else 'failed'}) " if inference else ""
        print(f"graph: {n:,} ops + placeholders; walk from {last} reached {len(up):,} nodes; "
              + (f"tensor types {how}{'and dynamo metadata past the module path ' if args.dynamo else ''}"
                 f"read on the first read of a node's tensors, which took {shapes[0]:.3f} s CPU "
                 f"({shapes[1]:.3f} s wall)" if pending else "tensor types read on open"))
        # what the user waits for: the command end to end, its start-up (the same command on a tiny model) taken off
        tiny = Path(tmp) / "tiny.onnx"
        generate(tiny, 10, typed=not args.no_types, dynamo=args.dynamo)
        starts = [command(["graph", "-q", str(tiny)]) for _ in range(rounds_n)]
        print("[ascend-tui graph on a 10-node model: start-up] "
              + "; ".join(f"{w:.2f} s wall ({c:.2f} s CPU, {f:,} page faults)" for c, w, f in starts))
        startup = (median([c for c, _, _ in starts]), median([w for _, w, _ in starts]),
                   median([f for _, _, f in starts]))
        small = Path(tmp) / "small.onnx"
        m = generate(small, args.count_nodes, typed=not args.no_types, dynamo=args.dynamo)
        py_calls, c_calls, opcodes = calls(small, tiny)
        print(f"[ascend-tui graph's work on a {m:,}-node model of the same kind, counted (deterministic)] "
              f"per node {py_calls / m:.2f} Python calls, {c_calls / m:.2f} calls of C functions from Python, "
              f"{opcodes / m:.1f} bytecodes ({py_calls:,}, {c_calls:,}, {opcodes:,})")
        if args.instructions:
            start_ir, model_ir = instructions(["graph", "-q", str(tiny)]), instructions(["graph", "-q", str(small)])
            print("[ascend-tui graph's work on it, machine instructions (valgrind, deterministic)] "
                  + (f"{(model_ir - start_ir) / m:,.0f} a node beyond start-up ({model_ir - start_ir:,})"
                     if start_ir is not None and model_ir is not None else "valgrind not found"))
        t_onnx = median([r["onnx"][0] for r in runs])
        # onnx.load as a user's script meets it: in a fresh process, its memory first touched as the command's is
        # (the in-process rounds reuse what the round before freed), timed inside that process (import onnx is not)
        script = ("import sys, time, onnx; t = time.process_time(); onnx.load(sys.argv[1], load_external_data=False); "
                  "print(time.process_time() - t)")
        fresh = [fresh_cpu(script, path) for _ in range(rounds_n)]
        t_fresh = median(fresh)
        print("[onnx.load alone in a fresh process, CPU] " + "; ".join(f"{c:.3f} s" for c in fresh))
        for _ in range(rounds_n):
            total = command(["graph", "-q", str(path)])
            beyond = (total[0] - startup[0], total[1] - startup[1])
            faults = total[2] - startup[2]
            print(f"[ascend-tui graph, end to end] {total[1]:.2f} s wall ({total[0]:.2f} s CPU); beyond start-up "
                  f"{beyond[1]:.2f} s wall ({beyond[0]:.2f} s CPU) = {beyond[0] - t_fresh:.2f} s CPU beyond onnx.load "
                  f"in a fresh process (goal < 1 s; the user's command runs in one), x{beyond[0] / t_fresh:.1f} it; "
                  f"{beyond[0] - t_onnx:.2f} s CPU beyond the warm in-process onnx.load rounds; "
                  f"{faults:,} page faults beyond start-up ({faults / n:.2f} a node, "
                  f"{faults * resource.getpagesize() / 2**20:,.0f} MB first touched)")
        total = command(["graph", "-q", str(path), "--json", str(Path(tmp) / "bench.json")])
        print(f"[ascend-tui graph --json, end to end: every node's tensors] {total[1]:.2f} s wall ({total[0]:.2f} s "
              f"CPU); beyond start-up {total[1] - startup[1]:.2f} s wall ({total[0] - startup[0]:.2f} s CPU)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
