"""Memory check: turn live sanitizer evidence into findings with messages and root causes.

The live sanitizer (`live/memory.py`) records what it saw at the operator level: an index
outside its valid range, a read of elements an `empty` allocation never had written, tensors
that outlive the call that made them. This module knows what those mean: it walks the graph
upstream through index arithmetic to the op that pushed an index out of range, names the
allocation behind an uninitialized read, and tells a leak (growth across iterations) from
state a model keeps on purpose. Pure: graph and numbers in, `Finding` records out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

import numpy as np

from ascend_tui.fmt import nbytes
from ascend_tui.evidence import ChainLink, Finding, MemoryEvent, MemorySample, RootCause, Severity, StatsTable
from ascend_tui.graph.opgraph import OpGraph, OpNode

CHECK = "memory"
INTEGER_DTYPES = frozenset({"int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64"})
# Ops through which a float value becomes an index: the walk may leave integer tensors through these.
TO_INDEX_OPS = frozenset({"_to_copy", "to", "floor", "ceil", "round", "trunc", "floor_divide", "div",
                          "_local_scalar_dense", "clamp", "argmax", "argmin", "searchsorted", "bucketize"})
SCALE_OPS = frozenset({"mul", "mul_", "div", "div_", "floor_divide", "remainder", "pow", "bitwise_left_shift"})
ROOT_WALK_HOPS = 32
LEAK_MIN_ITERATIONS = 2
LEAK_ERROR_ITERATIONS = 3
TREND_MIN_GROWTH_BYTES = 1024


@dataclass(frozen=True, slots=True)
class IndexViolation:
    """Indices outside their valid range, seen by the sanitizer before an indexing op ran."""

    node: str
    slot: int
    arg: str
    value: int
    low: int
    high: int
    bad_count: int
    numel: int
    bad_min: int
    bad_max: int
    indexed: str
    dim: int | None
    mode: str = "dim"
    indexed_slot: int = -1
    ignore_index: int | None = None
    clamped: bool = True
    iteration: int = 0


@dataclass(frozen=True, slots=True)
class UninitRead:
    """A read of elements of an `empty`-family allocation that nothing had written yet."""

    node: str
    slot: int
    alloc_node: str
    alloc_op: str
    alloc: str
    unwritten: int
    read_numel: int
    alloc_numel: int
    written: int
    first_unwritten: tuple[int, ...] | None = None
    last_unwritten: tuple[int, ...] | None = None
    iteration: int = 0


@dataclass(frozen=True, slots=True)
class LeakRecord:
    """Tensors one op made in several iterations that are all still alive after the last one."""

    node: str
    module: str
    op_type: str
    tensor: str
    iterations: tuple[int, ...]
    bytes_per_iteration: tuple[int, ...]
    holders: tuple[str, ...] = ()
    via: tuple[str, ...] = ()


# -- what aten ops do to memory (keyed by `func.overloadpacket.__name__`) -------------------------

ALLOC_OPS = frozenset({"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided", "empty_permuted"})
# In-place ops that overwrite every element of `self` without reading it.
FULL_WRITE_OPS = frozenset({"fill_", "zero_", "copy_", "normal_", "uniform_", "random_", "bernoulli_",
                            "exponential_", "geometric_", "log_normal_", "cauchy_"})
# In-place ops that write some elements of `self`; with accumulation they also read those elements.
PARTIAL_WRITE_OPS = frozenset({"index_put_", "_index_put_impl_", "scatter_", "scatter_add_", "scatter_reduce_",
                               "index_copy_", "index_fill_", "index_add_", "index_reduce_", "masked_fill_",
                               "masked_scatter_", "put_", "fill_diagonal_"})
# Ops that look only at the shape, dtype or storage of their tensor arguments, never at the values.
METADATA_OPS = frozenset({"empty_like", "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full",
                          "zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "randint_like",
                          "resize_", "resize_as_", "set_", "detach", "detach_", "alias", "lift_fresh", "lift",
                          "_unsafe_view", "record_stream", "is_same_size", "_reshape_alias", "sym_size",
                          "sym_stride", "sym_numel", "sym_storage_offset", "empty_strided", "empty"})
# `beta * self + ...`: with beta == 0 the op ignores `self` entirely (Hugging Face attention passes torch.empty).
BETA_OPS = frozenset({"addmm", "addmm_", "addmv", "addmv_", "addbmm", "addbmm_", "baddbmm", "baddbmm_",
                      "addr", "addr_"})

IndexMode = Literal["dim", "rows", "list", "flat", "target"]


@dataclass(frozen=True, slots=True)
class IndexRule:
    """Where an op's index lives and what bounds it, by schema argument name."""

    index: str
    indexed: str
    mode: IndexMode
    negative: bool = False


def _rules(names: str, rule: IndexRule) -> dict[str, IndexRule]:
    return {n: rule for n in names.split()}


INDEX_RULES: dict[str, IndexRule] = {
    **_rules("index_select gather scatter scatter_ scatter_add scatter_add_ scatter_reduce scatter_reduce_ "
             "index_add index_add_ index_copy index_copy_ index_reduce index_reduce_",
             IndexRule("index", "self", "dim")),
    **_rules("index_fill index_fill_", IndexRule("index", "self", "dim", negative=True)),
    **_rules("embedding embedding_bag _embedding_bag _embedding_bag_forward_only",
             IndexRule("indices", "weight", "rows")),
    **_rules("index index_put index_put_ _index_put_impl_ _unsafe_index _unsafe_index_put",
             IndexRule("indices", "self", "list", negative=True)),
    **_rules("take put put_", IndexRule("index", "self", "flat", negative=True)),
    **_rules("nll_loss nll_loss_forward nll_loss2d nll_loss2d_forward nll_loss_nd cross_entropy_loss",
             IndexRule("target", "self", "target")),
}

# Indexing ops that write through their index (the index says where to store, not where to load).
WRITING_INDEX_OPS = frozenset({"scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill",
                               "index_reduce", "index_put", "_index_put_impl", "_unsafe_index_put", "put"})

WriteKind = Literal["full", "partial", "accumulate", "rmw"]


def write_kind(op: str, flags: Mapping[str, Any]) -> WriteKind:
    """How an in-place op treats the old contents of `self`: overwritten, partly written, partly read, or read.

    `flags` holds the op's bound `accumulate`, `include_self`, `reduce` and `beta` arguments.
    """
    if op in FULL_WRITE_OPS or (op in BETA_OPS and flags.get("beta") == 0):
        return "full"
    if op in PARTIAL_WRITE_OPS:
        if op in ("scatter_add_", "index_add_") or flags.get("accumulate") is True:
            return "accumulate"
        if op in ("scatter_reduce_", "index_reduce_") and flags.get("include_self", True):
            return "accumulate"
        if op == "scatter_" and flags.get("reduce") is not None:
            return "accumulate"
        return "partial"
    return "rmw"


# -- helpers -------------------------------------------------------------------------------------


def _where(node: OpNode | None) -> str:
    if node is None:
        return "the model"
    text = f"{node.op_type} in {node.module or 'the root module'}"
    if node.source is not None:
        text += f" ({node.source.short()})"
    return text


def _coords(c: tuple[int, ...] | None) -> str:
    return "[" + ", ".join(str(v) for v in c) + "]" if c is not None else "?"


def place(graph: OpGraph, node: str, module: str = "", op_type: str = "") -> str | None:
    """`node` when the graph has it, else the nearest match (same op in the same module) or None.

    Later iterations name their ops like the first; a data-dependent branch may not, so their
    evidence lands on the closest operator the user can see.
    """
    if node in graph:
        return node
    same_module = [n for n in graph.module_nodes(module) if graph.node(n).module == module] if module else []
    for nid in same_module:
        if graph.node(nid).op_type == op_type:
            return nid
    if same_module:
        return same_module[-1]
    return None


# -- out of bounds -------------------------------------------------------------------------------


def _violates(stats: StatsTable, node: str, slot: int, low: int, high: int, above: bool) -> float | None:
    """The extreme value of output `slot` of `node` when it is outside [low, high) on the side that matters."""
    s = stats.get(node, slot)
    if s is None:
        return None
    if above:
        return s.max if s.max >= high else None
    return s.min if s.min < low else None


def _output_dtype(graph: OpGraph, node: str, slot: int) -> str:
    outs = graph.node(node).outputs
    meta = outs[slot] if slot < len(outs) else None
    return meta.dtype if meta is not None else ""


def index_root_cause(
    graph: OpGraph,
    node: str,
    slot: int,
    low: int,
    high: int,
    stats: StatsTable | None,
    *,
    above: bool = True,
    value: float | None = None,
    max_hops: int = ROOT_WALK_HOPS,
) -> RootCause | None:
    """Walk upstream from input `slot` of `node` to the op whose output first leaves [low, high).

    Each hop follows a producer whose recorded output range is also out of range on the same
    side (integer tensors, or floats feeding a conversion to an index); the walk ends where every
    producer is in range: that op shifted, scaled or made the bad index. None when nothing
    recorded produced the index.
    """
    start = graph.producer(node, slot)
    if start is None:
        return None
    victim = graph.node(node)
    first_value = float(value) if value is not None else float(high if above else low - 1)
    chain = [ChainLink(node, victim.module, victim.op_type, first_value)]
    if stats is None or _violates(stats, start, _out_slot(graph, node, slot), low, high, above) is None:
        n = graph.node(start)
        chain.append(ChainLink(start, n.module, n.op_type, first_value))
        return RootCause(start, n.module, f"{_where(n)} produced the index", tuple(chain))
    cur, cur_slot = start, _out_slot(graph, node, slot)
    for _ in range(max_hops):
        value = _violates(stats, cur, cur_slot, low, high, above)
        n = graph.node(cur)
        chain.append(ChainLink(cur, n.module, n.op_type, float(value if value is not None else first_value)))
        best: tuple[float, int, str, int] | None = None
        allow_float = n.short_op in TO_INDEX_OPS
        for edge in graph.producers(cur):
            dtype = _output_dtype(graph, edge.src, edge.out_slot)
            if dtype not in INTEGER_DTYPES and not allow_float:
                continue
            v = _violates(stats, edge.src, edge.out_slot, low, high, above)
            if v is None:
                continue
            excess = v - high if above else low - v
            is_op = 0 if graph.node(edge.src).is_placeholder else 1
            if best is None or (excess, is_op) > (best[0], best[1]):
                best = (excess, is_op, edge.src, edge.out_slot)
        if best is None or best[2] in {c.node for c in chain}:
            break
        cur, cur_slot = best[2], best[3]
    return RootCause(cur, graph.node(cur).module, _index_reason(graph, cur, low, high, stats, above), tuple(chain))


def _out_slot(graph: OpGraph, node: str, slot: int) -> int:
    for edge in graph.producers(node):
        if edge.in_slot == slot:
            return edge.out_slot
    return 0


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.4g}"


def _span(lo: float, hi: float) -> str:
    return _num(lo) if lo == hi else f"{_num(lo)}..{_num(hi)}"


def _index_reason(graph: OpGraph, root: str, low: int, high: int, stats: StatsTable, above: bool) -> str:
    n = graph.node(root)
    out = stats.get(root, 0)
    rng = _span(out.min, out.max) if out is not None else "?"
    valid = f"valid [{low}, {high})"
    if n.is_placeholder:
        what = {"input": "the model's input", "param": "a parameter", "buffer": "a buffer",
                "const": "a constant tensor"}.get(n.kind, "a tensor")
        return f"{root} ({what}) already holds indices {rng}, outside the {valid}"
    ins = [stats.get(e.src, e.out_slot) for e in graph.producers(root)]
    in_ranges = ", ".join(_span(s.min, s.max) for s in ins if s is not None)
    how = {"add": "adds an offset that takes", "add_": "adds an offset that takes", "sub": "subtracts an offset "
           "that takes", "sub_": "subtracts an offset that takes", "rsub": "subtracts, taking"}.get(n.short_op)
    if how is None:
        how = "scales" if n.short_op in SCALE_OPS else ("creates" if not ins else "turns")
    side = "past the end" if above else "below the start"
    source = f" from inputs in {in_ranges}" if in_ranges else ""
    return f"{_where(n)} {how} the index to {rng}{source}, {side} of the {valid}"


def _indexed_name(graph: OpGraph, v: IndexViolation) -> str:
    """`param:embed.weight float32[512,32]` — the tensor being indexed, as the graph names it."""
    src = graph.producer(v.node, v.indexed_slot) if v.indexed_slot >= 0 else None
    return f"{src} {v.indexed}" if src else v.indexed


def out_of_bounds_finding(graph: OpGraph, v: IndexViolation, stats: StatsTable | None) -> Finding:
    """An `out_of_bounds` error on the indexing op, with the upstream op that made the bad index."""
    n = graph.node(v.node)
    above = v.bad_max >= v.high
    root = index_root_cause(graph, v.node, v.slot, v.low, v.high, stats, above=above,
                            value=v.bad_max if above else v.bad_min)
    table = _indexed_name(graph, v)
    if v.mode == "rows":
        what = f"looks up row {v.value} of {table}, which has {v.high} rows"
    elif v.mode == "target":
        what = f"gets target class {v.value} but {table} scores {v.high} classes"
    elif v.mode == "flat":
        what = f"takes element {v.value} of {table} ({v.high} elements)"
    else:
        verb = "writes at" if n.short_op.rstrip("_") in WRITING_INDEX_OPS else "reads"
        what = f"{verb} index {v.value} on dim {v.dim} of {table} (size {v.high})"
    ignore = f", ignore_index {v.ignore_index}" if v.ignore_index is not None else ""
    clamp = "; the run went on with them clamped into range" if v.clamped else ""
    when = f" (iteration {v.iteration + 1})" if v.iteration else ""
    message = (f"{n.op_type} {what}: valid range is [{v.low}, {v.high}){ignore}; {v.bad_count} of {v.numel} "
               f"`{v.arg}` values are out of range ({_span(v.bad_min, v.bad_max)}){clamp}{when}")
    hint = None
    if root is not None and root.node != v.node:
        if v.mode == "target":
            hint = f"fix the targets at {root.node}: classes run from 0 to {v.high - 1}"
        elif above:
            hint = (f"fix the index at {root.node}, or make dim {v.dim if v.dim is not None else 0} of "
                    f"{table.split(' ')[0]} at least {v.bad_max + 1} long")
        else:
            hint = f"fix the index at {root.node}: {n.short_op} does not wrap negative indices"
    metrics: dict[str, Any] = {
        "index_value": v.value, "valid_low": v.low, "valid_high": v.high, "bad_count": v.bad_count,
        "index_numel": v.numel, "bad_min": v.bad_min, "bad_max": v.bad_max, "indexed": v.indexed,
        "dim": v.dim, "argument": v.arg, "clamped": v.clamped, "iteration": v.iteration + 1,
    }
    if v.ignore_index is not None:
        metrics["ignore_index"] = v.ignore_index
    # "introduced": the violation happens at this op; where the bad index came from is root_cause.
    return Finding(CHECK, "out_of_bounds", "error", v.node, n.op_type, n.module, n.index, message,
                   attribution="introduced", metrics=metrics,
                   root_cause=root, hint=hint)


# -- uninitialized reads -------------------------------------------------------------------------


def uninitialized_finding(graph: OpGraph, u: UninitRead) -> Finding:
    """An `uninitialized_read` error on the reading op; the root cause is the allocation."""
    n = graph.node(u.node)
    alloc = graph.get(u.alloc_node)
    span = ""
    if u.first_unwritten is not None:
        span = f", first never-written element {_coords(u.first_unwritten)}"
        if u.last_unwritten is not None and u.last_unwritten != u.first_unwritten:
            span += f", last {_coords(u.last_unwritten)}"
    when = f" (iteration {u.iteration + 1})" if u.iteration else ""
    message = (f"{n.op_type} reads {u.unwritten} never-written elements of {u.alloc} "
               f"allocated by {u.alloc_op} at {u.alloc_node} ({u.written} of {u.alloc_numel} written so far{span})"
               f"{when}")
    reason = (f"{_where(alloc) if alloc else u.alloc_op} allocates {u.alloc} without initializing it; "
              f"only {u.written} of {u.alloc_numel} elements were written before {n.op_type} read it")
    chain = (ChainLink(u.node, n.module, n.op_type, float(u.unwritten)),
             ChainLink(u.alloc_node, alloc.module if alloc else "", alloc.op_type if alloc else u.alloc_op,
                       float(u.alloc_numel - u.written)))
    root = RootCause(u.alloc_node, alloc.module if alloc else "", reason, chain)
    metrics = {"unwritten_read": u.unwritten, "read_numel": u.read_numel, "alloc_numel": u.alloc_numel,
               "written": u.written, "allocation": u.alloc, "alloc_node": u.alloc_node, "iteration": u.iteration + 1}
    if u.first_unwritten is not None:
        metrics["first_unwritten"] = list(u.first_unwritten)
    hint = (f"write every element of the {u.alloc_op.rsplit('.', 1)[-1]} buffer before reading it, "
            "or allocate it with zeros")
    return Finding(CHECK, "uninitialized_read", "error", u.node, n.op_type, n.module, n.index, message,
                   attribution="introduced", metrics=metrics, root_cause=root, hint=hint)


# -- leaks ---------------------------------------------------------------------------------------


def growth_per_iteration(samples: Sequence[MemorySample]) -> float:
    """Least-squares slope of allocated bytes over iterations (0 with fewer than two samples)."""
    if len(samples) < 2:
        return 0.0
    x = np.array([s.time for s in samples], dtype=np.float64)
    y = np.array([s.allocated_bytes for s in samples], dtype=np.float64)
    if np.ptp(x) == 0:
        return 0.0
    return float(np.polyfit(x, y, 1)[0])


def leak_findings(
    graph: OpGraph,
    leaks: Sequence[LeakRecord],
    iterations: int,
    samples: Sequence[MemorySample] = (),
    counter: str = "device.memory_allocated",
) -> list[Finding]:
    """`leak` findings: tensors piling up with every iteration; info when one call cannot tell.

    With one iteration, surviving tensors may be state kept on purpose (a cache filled once),
    so they are info. With several, an op whose tensors from every iteration are all still alive
    is a leak (an error from three iterations on); state made once, the last call's activations,
    or a window of the last few calls (the oldest already freed) is not.
    """
    findings: list[Finding] = []
    slope = growth_per_iteration(samples)
    explained = 0.0
    for leak in leaks:
        node = place(graph, leak.node, leak.module, leak.op_type)
        if node is None:
            continue
        n = graph.node(node)
        kept = len(leak.iterations)
        per_iter = int(round(float(np.mean(leak.bytes_per_iteration)))) if leak.bytes_per_iteration else 0
        total = int(sum(leak.bytes_per_iteration))
        held = f", held by {', '.join(leak.holders)}" if leak.holders else ""
        via = f" through {', '.join(leak.via)}" if leak.via else ""
        if iterations < LEAK_MIN_ITERATIONS:
            severity: Severity = "info"
            message = (f"{leak.tensor} made by {n.op_type} ({nbytes(total)}) is still alive after the call"
                       f"{held}{via}; run with --iterations 3 to tell a leak from state kept on purpose")
        elif kept >= LEAK_MIN_ITERATIONS and kept == iterations:
            severity = "error" if iterations >= LEAK_ERROR_ITERATIONS else "warning"
            explained += per_iter
            message = (f"{leak.tensor} made by {n.op_type} stays alive across calls: tensors from all {kept} "
                       f"iterations are still held, {nbytes(per_iter)} per iteration "
                       f"({nbytes(total)} in all){held}{via}")
        else:
            continue
        reason = (f"{_where(n)} creates tensors that are kept after the call returns"
                  f"{held or ' (by something outside the model: a global, a closure or the caller)'}")
        chain = tuple(ChainLink(node, n.module, n.op_type, float(b)) for b in leak.bytes_per_iteration[:1])
        metrics: dict[str, Any] = {
            "bytes_per_iteration": per_iter, "total_bytes": total, "iterations_retained": kept,
            "iterations": iterations, "retained_in": [i + 1 for i in leak.iterations],
            "holders": list(leak.holders), "counter": counter, "growth_per_iteration": round(slope, 1),
        }
        hint = ("keep only what the next call needs (detach, slice, or a fixed-size buffer) and clear the "
                "cache between sequences") if severity != "info" else None
        findings.append(Finding(CHECK, "leak", severity, node, n.op_type, n.module, n.index, message,
                                metrics=metrics, root_cause=RootCause(node, n.module, reason, chain), hint=hint))
    trend = _trend_finding(graph, samples, iterations, counter, slope, explained)
    if trend is not None:
        findings.append(trend)
    return findings


def _trend_finding(graph: OpGraph, samples: Sequence[MemorySample], iterations: int, counter: str,
                   slope: float, explained: float) -> Finding | None:
    """A warning when the device counter grows every iteration but no surviving tensor explains it."""
    if counter != "device.memory_allocated" or iterations < 3:
        return None
    steady = [s.allocated_bytes for s in samples if s.time >= 1]
    if len(steady) < 3 or not all(b > a for a, b in zip(steady, steady[1:])):
        return None
    if slope < TREND_MIN_GROWTH_BYTES or explained >= 0.5 * slope:
        return None
    order = graph.execution_order()
    if not order:
        return None
    n = graph.node(order[-1])
    message = (f"device allocated memory grows by {nbytes(slope)} per iteration ({counter}) with no "
               f"surviving tensor seen at the operator level: memory is held below the dispatcher or outside "
               f"the model call")
    return Finding(CHECK, "leak", "warning", n.id, n.op_type, n.module, n.index, message,
                   metrics={"growth_per_iteration": round(slope, 1), "counter": counter, "iterations": iterations},
                   hint="look for allocations outside the forward (caller caches, custom kernels)")


# -- events --------------------------------------------------------------------------------------


def memory_event(f: Finding, size: int | None = None) -> MemoryEvent:
    """The `MemoryEvent` the memory timeline and event list show for one live finding."""
    extra = {k: v for k, v in f.metrics.items() if isinstance(v, (int, float, str, bool, list)) or v is None}
    return MemoryEvent(kind=f.kind, tool="live", message=f.message, size=size, kernel=f.op_type, node=f.node,
                       confidence=1.0, extra=extra)


def dedupe(findings: Sequence[Finding]) -> list[Finding]:
    """One finding per (kind, node, cause): later iterations repeat what the first one saw."""
    seen: set[tuple[str, str, str]] = set()
    out: list[Finding] = []
    for f in findings:
        key = (f.kind, f.node, f.root_cause.node if f.root_cause else "")
        if key in seen:
            continue
        seen.add(key)
        out.append(f)
    return out
