"""Sanitizer-log events on an operator graph: kernel name to operator, pool false positives, findings.

Pure: events and a graph in, events and findings out. A kernel name is matched to aten op
types (CUDA kernels of PyTorch, CANN / Ascend C kernels of msSanitizer) with a stated
confidence; when several operators of that type ran, allocation sizes from the log pick
among them, and otherwise the confidence is shared between them.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, replace
from typing import Any, Iterable, Sequence

from ascend_tui.evidence import ChainLink, Finding, MemoryEvent, RootCause, user_frame
from ascend_tui.graph.opgraph import OpGraph, OpNode

POOL_SEGMENT = 2 * 1024 * 1024
POOL_ENV = "PYTORCH_NO_CUDA_MEMORY_CACHING=1 (CUDA) or PYTORCH_NO_NPU_MEMORY_CACHING=1 (torch_npu)"
NOT_FINDINGS = frozenset({"allocation", "free"})
_REUSE_KINDS = frozenset({"illegal_access", "out_of_bounds", "illegal_free", "uninitialized_read", "use_after_free"})
_INDEX_SLOT = {"embedding": 1, "index_select": 2, "gather": 2, "scatter": 2, "scatter_add": 2, "take": 1,
               "index": 1, "index_put": 1, "nll_loss_forward": 1, "nll_loss": 1, "one_hot": 0}
_PASS_THROUGH = frozenset({"view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "expand", "clone", "contiguous",
                           "_to_copy", "to", "flatten", "t", "transpose", "permute", "detach", "alias", "lift_fresh"})
_ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
             "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16, "float8_e4m3fn": 1, "float8_e5m2": 1}
_MATMUL = ("addmm", "mm", "bmm", "matmul", "linear", "baddbmm", "_scaled_mm")
_CONV = ("convolution", "_convolution", "cudnn_convolution", "conv2d", "conv1d", "conv3d")
_GATHER = ("index_select", "embedding", "gather")
_SCATTER = ("scatter", "scatter_add", "scatter_reduce", "index_put", "index_add")

# PyTorch CUDA kernel names (aten/src/ATen/native/cuda): pattern -> (op types, confidence).
_CUDA_TABLE: list[tuple[re.Pattern[str], tuple[str, ...], float]] = [(re.compile(p), ops, c) for p, ops, c in [
    (r"indexSelect(Large|Small)Index", ("index_select", "embedding"), 0.9),
    (r"embedding_backward|embedding_dense_backward", ("embedding_dense_backward", "embedding_backward"), 0.85),
    (r"EmbeddingBag|embedding_bag", ("_embedding_bag", "embedding_bag"), 0.85),
    (r"index_put_kernel|indexing_backward_kernel|index_put_with_sort", ("index_put", "_index_put_impl_"), 0.8),
    (r"index_elementwise_kernel|index_kernel", ("index", "index_put"), 0.7),
    (r"_scatter_gather_elementwise_kernel|scatter_gather", ("gather", "scatter", "scatter_add", "scatter_reduce"), 0.6),
    (r"take_kernel|put_kernel", ("take", "put"), 0.8),
    (r"nll_loss_forward|nll_loss2d_forward", ("nll_loss_forward", "nll_loss", "nll_loss2d_forward"), 0.9),
    (r"nll_loss_backward|nll_loss2d_backward", ("nll_loss_backward", "nll_loss2d_backward"), 0.9),
    (r"cunn_SoftMaxForward|softmax_warp_forward|SoftMaxForward", ("_softmax", "softmax", "_log_softmax"), 0.8),
    (r"cunn_SoftMaxBackward|softmax_warp_backward", ("_softmax_backward_data", "_log_softmax_backward_data"), 0.8),
    (r"layer_norm|LayerNorm|RowwiseMoments|ComputeInternalGradients", ("native_layer_norm", "layer_norm",
                                                                       "native_layer_norm_backward"), 0.8),
    (r"batch_norm|BatchNorm", ("native_batch_norm", "_native_batch_norm_legit", "cudnn_batch_norm",
                               "_native_batch_norm_legit_no_training", "batch_norm"), 0.8),
    (r"group_norm|GroupNorm", ("native_group_norm", "group_norm"), 0.8),
    (r"CatArrayBatchedCopy", ("cat",), 0.9),
    (r"max_pool|MaxPool", ("max_pool2d_with_indices", "max_pool2d", "max_pool3d_with_indices"), 0.85),
    (r"avg_pool|adaptive_average_pool|AvgPool", ("avg_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool2d"), 0.8),
    (r"fused_dropout|dropout", ("native_dropout", "dropout"), 0.85),
    (r"flash_fwd|flash_bwd|fmha|efficient_attention|attention_kernel",
     ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
      "scaled_dot_product_attention"), 0.8),
    (r"gemm|gemv|Gemm|cutlass|cublas|splitKreduce|\bKernel2\b", _MATMUL, 0.6),
    (r"[cC]onv(?!ert)|implicit_convolve|fprop|dgrad|wgrad|winograd|cudnn", _CONV, 0.6),
    (r"sum_functor", ("sum",), 0.8), (r"MeanOps", ("mean",), 0.8), (r"WelfordOps", ("var_mean", "var", "std"), 0.7),
    (r"ArgMaxOps", ("argmax",), 0.8), (r"ArgMinOps", ("argmin",), 0.8), (r"MaxOps|MaxNanFunctor", ("amax", "max"), 0.7),
    (r"MinOps|MinNanFunctor", ("amin", "min"), 0.7), (r"NormOps|NormTwoOps|NormOneOps", ("linalg_vector_norm", "norm"), 0.7),
    (r"direct_copy_kernel|copy_device_to_device|CopyFunctor|copy_kernel", ("copy_", "_to_copy", "clone", "contiguous"), 0.7),
    (r"FillFunctor|fill_kernel", ("fill_", "zero_", "zeros", "ones", "full", "new_zeros"), 0.7),
    (r"tensor_kernel_scan", ("cumsum", "cumprod"), 0.7), (r"triu_tril_kernel", ("triu", "tril"), 0.8),
    (r"masked_fill", ("masked_fill",), 0.8), (r"where_kernel", ("where",), 0.8),
    (r"elementwise_kernel_with_index|arange", ("arange",), 0.7),
    (r"gatherTopK|topk", ("topk",), 0.8), (r"(?<![a-z])sort|Sort", ("sort", "argsort"), 0.6),
    (r"launch_clamp_scalar|clamp_(min_|max_)?scalar", ("clamp", "clamp_min", "clamp_max", "relu", "hardtanh"), 0.6),
]]
_CUDA_GENERIC = frozenset({"binary", "unary", "opmath", "compare", "vectorized_elementwise", "unrolled_elementwise",
                           "elementwise", "reduce", "index_elementwise", "launch", "gpu", "cuda", "func_wrapper"})
# CANN op types / Ascend C kernel names (normalized: lower case, no separators, no version suffix).
_CANN_TABLE: dict[str, tuple[str, ...]] = {
    "add": ("add",), "addv2": ("add",), "sub": ("sub", "rsub"), "mul": ("mul",), "realdiv": ("div",), "div": ("div",),
    "matmul": _MATMUL, "batchmatmul": ("bmm", "matmul", "baddbmm"), "gemm": _MATMUL, "linear": _MATMUL,
    "gather": _GATHER, "gatherv": _GATHER, "gatherelements": ("gather",), "embedding": ("embedding",),
    "indexselect": ("index_select",), "index": ("index",), "indexput": ("index_put",), "scatter": _SCATTER,
    "scatterelements": _SCATTER, "scatternd": _SCATTER, "scatterupdate": _SCATTER, "scatteradd": ("scatter_add",),
    "conv": _CONV, "convd": _CONV, "convolution": _CONV, "relu": ("relu",), "gelu": ("gelu",),
    "fastgelu": ("gelu",), "silu": ("silu",), "swish": ("silu",), "sigmoid": ("sigmoid",), "tanh": ("tanh",),
    "exp": ("exp",), "log": ("log",), "sqrt": ("sqrt",), "rsqrt": ("rsqrt",), "pow": ("pow",),
    "softmax": ("_softmax", "softmax"), "logsoftmax": ("_log_softmax", "log_softmax"),
    "layernorm": ("native_layer_norm", "layer_norm"), "rmsnorm": ("rms_norm", "_fused_rms_norm"),
    "batchnorm": ("native_batch_norm", "_native_batch_norm_legit"), "reducesum": ("sum",), "reducemean": ("mean",),
    "reducemax": ("amax", "max"), "reducemin": ("amin", "min"), "argmax": ("argmax",), "argmin": ("argmin",),
    "cast": ("_to_copy", "to"), "transpose": ("transpose", "permute", "contiguous", "clone"),
    "concat": ("cat",), "split": ("split", "split_with_sizes"), "stridedslice": ("slice",), "slice": ("slice",),
    "fill": ("fill_", "full"), "fills": ("fill_", "full"), "zeroslike": ("zeros_like", "zero_"),
    "onehot": ("one_hot",), "topk": ("topk",), "sort": ("sort",), "cumsum": ("cumsum",),
    "maskedfill": ("masked_fill",), "select": ("where",), "dropoutdomask": ("native_dropout",),
    "nllloss": ("nll_loss_forward", "nll_loss"), "maxpool": ("max_pool2d_with_indices", "max_pool2d"),
    "maxpoolwithargmax": ("max_pool2d_with_indices",), "avgpool": ("avg_pool2d", "_adaptive_avg_pool2d"),
    "flashattentionscore": ("_npu_flash_attention", "npu_fusion_attention", "scaled_dot_product_attention"),
}
_CANN_CUSTOM = frozenset({"custom", "kernel", "vec", "aiv", "aic", "mix", "triton", "simt"})
_CANN_NOISE = _CANN_CUSTOM | {"op", "npu", "aclnn", "tik", "float", "half", "fp16", "fp32", "bf16", "d"}


@dataclass(frozen=True, slots=True)
class KernelMatch:
    """The aten op types a kernel name points to (most likely first) and how sure the name alone makes us."""

    op_types: tuple[str, ...]
    confidence: float
    rule: str


def short_op(op_type: str) -> str:
    """`add` for `aten.add`, `aten.add_`, `aten.add.Tensor`, `Tensor.__add__`, `Functional.linear`."""
    name = re.sub(r"^(aten\.|aten::|Functional\.|Torch\.|Tensor\.|torch\.|NPU\.)", "", op_type).split(".", 1)[0]
    if name.startswith("__") and name.endswith("__"):
        name = name[2:-2]
    return name.rstrip("_").lower()


def _snake(camel: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", camel).lower()


def match_kernel(kernel: str) -> KernelMatch | None:
    """Which operators a CUDA (PyTorch) or CANN / Ascend C kernel name belongs to, or None when it says nothing."""
    if "::" in kernel or "<" in kernel or "(" in kernel:
        return _match_cuda(kernel)
    cann = _match_cann(kernel)
    if cann is not None and cann.confidence >= 0.5:
        return cann
    return _match_cuda(kernel) or cann


def _match_cuda(kernel: str) -> KernelMatch | None:
    for pattern, ops, conf in _CUDA_TABLE:  # also cuBLAS / cuDNN library kernels such as ampere_sgemm_*
        if pattern.search(kernel):
            return KernelMatch(ops, conf, f"CUDA kernel name matches {pattern.pattern!r}")
    if "at::" not in kernel:
        return None
    functors = re.findall(r"CUDAFunctor(?:OnSelf|OnOther)?_(\w+?)\b", kernel)
    functors += [_snake(f) for f in re.findall(r"(\w+?)Functor\b", kernel.replace("::", " "))]
    functors = [f for f in functors if f and f not in _CUDA_GENERIC]
    if functors:
        return KernelMatch((functors[-1],), 0.8, f"functor {functors[-1]!r} in the CUDA kernel's template")
    named = [_snake(n) for n in re.findall(r"(\w+?)(?:_kernel_cuda|_kernel_impl|CUDAKernelImpl|_kernel)\b", kernel)]
    named = [n.split("::")[-1] for n in named if n and n not in _CUDA_GENERIC]
    if named:
        return KernelMatch((named[-1],), 0.7, f"CUDA kernel function {named[-1]!r}")
    return None


def _stem(kernel: str) -> str:
    """`MatMulV2` from `MatMulV2_9a8f1c0d..._0`: the op type without the build hash and launch index."""
    return re.sub(r"(_(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{6,})?(_\d+)*$", "", kernel)


def _match_cann(kernel: str) -> KernelMatch | None:
    stem = _stem(kernel)
    fused = re.search(r"fused_(\w+)", stem)
    if fused:
        ops = tuple(dict.fromkeys(t for t in fused.group(1).split("_") if t and not t.isdigit()))
        return KernelMatch(ops, 0.4, "ops named in a fused Triton kernel") if ops else None
    tokens = [t.lower() for t in re.split(r"_|(?<=[a-z0-9])(?=[A-Z])", stem) if t]
    custom = any(t in _CANN_CUSTOM for t in tokens)
    key = "".join(t for t in tokens if t not in _CANN_NOISE and not re.fullmatch(r"v\d+|\d+", t))
    if re.sub(r"\d", "", key) in _CANN_TABLE:
        key = re.sub(r"\d", "", key)
    if not key:
        return None
    if key in _CANN_TABLE:
        conf = 0.6 if custom else 0.85
        return KernelMatch(_CANN_TABLE[key], conf, f"CANN kernel {stem!r} is op type {key!r}")
    return KernelMatch((key,), 0.4, f"kernel {stem!r} named after {key!r}")


def tensor_bytes(node: OpNode) -> set[int]:
    """Byte sizes of every tensor the operator read or wrote (what an allocation of it would hold)."""
    out: set[int] = set()
    for meta in (*node.inputs, *node.outputs):
        if meta is not None and meta.dtype in _ITEMSIZE:
            out.add(math.prod(meta.shape) * _ITEMSIZE[meta.dtype])
    return out


def _event_bytes(event: MemoryEvent) -> int | None:
    alloc = event.extra.get("allocation")
    if isinstance(alloc, dict) and alloc.get("size"):
        return int(alloc["size"])
    if event.kind in ("leak", "unused_memory", "allocation") and event.size:
        return event.size
    return None




class _OpIndex:
    """Operators of a graph by short op type, exact op type and tensor size, plus placements already made."""

    def __init__(self, graph: OpGraph) -> None:
        self.by_short: dict[str, list[OpNode]] = {}
        self.by_type: dict[str, list[OpNode]] = {}
        self.by_out_bytes: dict[int, list[OpNode]] = {}
        self.by_bytes: dict[int, list[OpNode]] = {}
        self.placed: dict[tuple[str | None, int | None], tuple[str | None, float | None, dict[str, Any]] | None] = {}
        for n in sorted((n for n in graph if not n.is_placeholder), key=lambda n: n.index):
            self.by_short.setdefault(short_op(n.op_type), []).append(n)
            self.by_type.setdefault(n.op_type.lower(), []).append(n)
            if (nbytes := _out_bytes(n)) is not None:
                self.by_out_bytes.setdefault(nbytes, []).append(n)
            for nbytes in tensor_bytes(n):
                self.by_bytes.setdefault(nbytes, []).append(n)


MIN_CONFIDENCE = 0.5  # below it a mapping is a guess: the event is listed as unmapped, with its candidates


def map_event(graph: OpGraph, event: MemoryEvent, index: _OpIndex | None = None) -> MemoryEvent:
    """The event with `node` and `confidence` set from its kernel name (and sizes), or unchanged when nothing fits.

    A mapping below `MIN_CONFIDENCE` leaves `node` empty and lists the guesses in `extra["candidate_nodes"]`.
    """
    if event.node is not None and event.node in graph:
        return event
    index = index or _OpIndex(graph)
    key = (event.kernel, _event_bytes(event))
    if key not in index.placed:
        index.placed[key] = _place(index, *key)
    placed = index.placed[key]
    if placed is None:
        return event
    node, confidence, notes = placed
    if node is not None and confidence is not None and confidence < MIN_CONFIDENCE:
        # Too weak to state as fact: the event stays unmapped, with its candidates for the user to judge.
        guesses = [node, *notes.get("other_nodes", [])]
        return replace(event, node=None, confidence=confidence,
                       extra={**event.extra, **notes, "candidate_nodes": guesses, "unmapped": True})
    return replace(event, node=node, confidence=confidence, extra={**event.extra, **notes})


def _place(index: _OpIndex, kernel: str | None, nbytes: int | None
           ) -> tuple[str | None, float | None, dict[str, Any]] | None:
    """(node, confidence, notes for `extra`) for a kernel name and allocation size; None when nothing is said."""
    match = match_kernel(kernel) if kernel else None
    if match is not None:
        wanted = dict.fromkeys(short_op(o) for o in match.op_types)
        candidates = sorted((n for op in wanted for n in index.by_short.get(op, ())), key=lambda n: n.index)
        if not candidates and kernel:
            candidates = list(index.by_type.get(_stem(kernel).lower(), ()))
        rule, conf = match.rule, match.confidence
    elif nbytes is not None and kernel is None:
        candidates, rule, conf = list(index.by_out_bytes.get(nbytes, ())), "allocation size", 0.3
        if len(candidates) != 1:
            return None
    elif kernel:
        return None, None, {"mapping": f"kernel name {kernel!r} names no operator"}
    else:
        return None
    if not candidates:
        return None, None, {"mapping": f"{rule}; no such operator in the graph"}
    if nbytes is not None and match is not None:
        sized = [n for n in index.by_bytes.get(nbytes, ()) if short_op(n.op_type) in wanted]
        if sized and len(sized) < len(candidates):
            candidates, conf, rule = sized, min(0.95, conf + 0.1), f"{rule}; tensor of {nbytes} bytes"
    notes = {"mapping": rule, "candidates": len(candidates), "other_nodes": [n.id for n in candidates[1:5]]}
    return candidates[0].id, round(conf / len(candidates), 3), notes


def _out_bytes(node: OpNode) -> int | None:
    meta = node.outputs[0] if node.outputs else None
    if meta is None or meta.dtype not in _ITEMSIZE:
        return None
    return math.prod(meta.shape) * _ITEMSIZE[meta.dtype]


def map_events(graph: OpGraph, events: Iterable[MemoryEvent]) -> list[MemoryEvent]:
    """`map_event` over a log's events."""
    events = list(events)
    if all(e.node is not None and e.node in graph for e in events):
        return events
    index = _OpIndex(graph)
    return [map_event(graph, e, index) for e in events]


def mark_pool_reuse(events: Sequence[MemoryEvent], *, pool_enabled: bool | None = None) -> list[MemoryEvent]:
    """Mark reports that a memory pool's address reuse most likely caused, lowering them to warnings.

    Two rules, both about caching allocators (PyTorch's CUDA allocator, torch_npu's NPU allocator) that
    take large segments from the driver and hand out and take back pieces of them without the tool
    seeing it:

    1. Re-issued range: an illegal access, out-of-bounds access (not msSanitizer's multi-core
       "stomping"), uninitialized read, use-after-free or illegal free whose address range lies inside
       a block the same log shows being handed out *after* the report (a later leak record, unused-memory
       record, nearest-allocation note or allocation record). The address was free when the tool looked
       and then re-allocated, which is what a pool that frees and re-issues the same range produces;
       a genuine stray pointer rarely lands inside a block that is about to be allocated again.
    2. Pool segments: a leak whose size is a whole number of 2 MiB segments, unless the run is known
       to have had the caching allocator disabled (`pool_enabled=False`): the allocator keeps such
       segments until the process exits, and the leak check reports them.

    Marked events keep their kind; `likely_false_positive` is set, `extra["severity"]` becomes
    "warning" and `extra["false_positive_reason"]` says why.
    """
    blocks: list[tuple[int, int, int, str]] = []
    for e in events:
        alloc = e.extra.get("allocation")
        if isinstance(alloc, dict) and alloc.get("address") and alloc.get("size"):
            blocks.append((int(str(alloc["address"]), 16), int(alloc["size"]), e.line_no or 0, "nearest allocation"))
        if e.kind in ("leak", "unused_memory", "allocation") and e.address is not None and e.size:
            blocks.append((e.address, e.size, e.line_no or 0, f"{e.kind.replace('_', ' ')} record"))
    latest: dict[tuple[int, int], tuple[int, int, int, str]] = {}
    for b in blocks:  # the same range re-issued many times: its last issue decides
        if b[:2] not in latest or b[2] > latest[b[:2]][2]:
            latest[b[:2]] = b
    blocks = sorted(latest.values())
    starts = [b[0] for b in blocks]
    widest = max((b[1] for b in blocks), default=0)
    out: list[MemoryEvent] = []
    for e in events:
        reason = None if e.likely_false_positive else _pool_reason(e, blocks, starts, widest, pool_enabled)
        if reason is None:
            out.append(e)
            continue
        out.append(replace(e, likely_false_positive=True,
                           extra={**e.extra, "severity": "warning", "false_positive_reason": reason}))
    return out


def _pool_reason(e: MemoryEvent, blocks: list[tuple[int, int, int, str]], starts: list[int], widest: int,
                 pool_enabled: bool | None) -> str | None:
    if e.kind in _REUSE_KINDS and e.address is not None and not e.extra.get("stomping"):
        lo, hi = e.address, e.address + max(e.size or 1, 1)
        for k in range(bisect.bisect_right(starts, lo) - 1, -1, -1):
            start, size, line, source = blocks[k]
            if start < lo - widest:
                break
            if line > (e.line_no or 0) and hi <= start + size:
                return (f"{hex(e.address)} lies inside the block of {size} bytes at {hex(start)} that was "
                        f"allocated again later ({source}, line {line}): a memory pool re-issuing the range")
    if e.kind == "leak" and e.size and e.size % POOL_SEGMENT == 0 and pool_enabled is not False:
        return (f"{e.size} bytes is a whole number of 2 MiB segments, which a framework's caching allocator "
                f"keeps until the process exits")
    return None


def prepare_events(graph: OpGraph, events: Iterable[MemoryEvent], *,
                   pool_enabled: bool | None = None) -> list[MemoryEvent]:
    """Map events onto `graph` and mark likely pool false positives (idempotent)."""
    return mark_pool_reuse(map_events(graph, events), pool_enabled=pool_enabled)


def findings_from_events(graph: OpGraph, events: Iterable[MemoryEvent], *,
                         pool_enabled: bool | None = None) -> list[Finding]:
    """One memory finding per reported problem, on its operator where the mapping found one."""
    findings = []
    for e in prepare_events(graph, events, pool_enabled=pool_enabled):
        if e.kind in NOT_FINDINGS:
            continue
        node = graph.get(e.node)
        severity = str(e.extra.get("severity", "error"))
        message = e.message
        if e.likely_false_positive:
            message += f" — likely a false positive: {e.extra.get('false_positive_reason')}"
        if e.extra.get("unmapped") and e.extra.get("candidate_nodes"):
            cands = list(e.extra["candidate_nodes"])
            message += (f" — not placed on an operator: the best guess `{cands[0]}` has confidence "
                        f"{e.confidence or 0:.2f} (below {MIN_CONFIDENCE}; {e.extra.get('mapping')}); candidates: "
                        + ", ".join(f"`{c}`" for c in cands[:5]))
        hint = _hint(e)
        root = _index_cause(graph, node) if node is not None and e.kind in ("out_of_bounds", "illegal_access") else None
        if root is not None:
            hint = (f"the indexing op {node.id} read out of range: check the index values, which come from "
                    f"{root.node}")
        findings.append(Finding(
            check="memory", kind=e.kind, severity=severity if severity in ("error", "warning") else "info",
            node=node.id if node is not None else "", op_type=node.op_type if node is not None else "",
            module=node.module if node is not None else "", index=node.index if node is not None else -1,
            message=message, metrics=_metrics(e), root_cause=root, hint=hint,
        ))
    return findings


def _metrics(e: MemoryEvent) -> dict[str, Any]:
    m: dict[str, Any] = {"tool": e.tool, "log_line": e.line_no, "size": e.size,
                         "address": hex(e.address) if e.address is not None else None,
                         "memory_space": e.memory_space, "kernel": e.kernel, "block": e.block, "thread": e.thread,
                         "source": user_frame(e.frames), "confidence": e.confidence,
                         "mapping": e.extra.get("mapping"), "candidates": e.extra.get("candidates"),
                         "likely_false_positive": e.likely_false_positive,
                         "unmapped": True if e.extra.get("unmapped") else None,
                         "candidate_nodes": list(e.extra["candidate_nodes"]) if e.extra.get("candidate_nodes") else None}
    return {k: v for k, v in m.items() if v is not None}


def _hint(e: MemoryEvent) -> str | None:
    if e.likely_false_positive:
        return f"rerun with {POOL_ENV} so the tool sees every allocation, and check whether the report remains"
    return {
        "out_of_bounds": "the access runs past its buffer: check the size the kernel was launched for against the "
                         "tensor it was given" if not e.extra.get("stomping") else
                         "cores (or threads) write overlapping ranges: split the output by block index or "
                         "synchronize the cores",
        "illegal_access": "the address is outside any live allocation: check the buffer's size and that it is "
                          "still allocated when the kernel runs",
        "misaligned": "align the address and length to the memory space's access granularity",
        "uninitialized_read": "write the buffer before reading it (zeros instead of empty, or fill the tail)",
        "leak": "free the buffer, or release the tensor that holds it, before the next iteration",
        "race": "add the missing synchronization between the two accesses (set_flag/wait_flag, PipeBarrier, "
                "__syncthreads)",
        "illegal_free": "free each allocation exactly once, with the pointer the allocator returned",
    }.get(e.kind)


def _index_cause(graph: OpGraph, node: OpNode) -> RootCause | None:
    """For an indexing op: the upstream op that computed its index tensor (through views and copies)."""
    slot = _INDEX_SLOT.get(short_op(node.op_type))
    if slot is None:
        return None
    chain = [ChainLink(node.id, node.module, node.op_type, math.nan)]
    src = graph.producer(node.id, slot)
    seen = {node.id}
    while src is not None and src not in seen:
        seen.add(src)
        n = graph.node(src)
        chain.append(ChainLink(n.id, n.module, n.op_type, math.nan))
        if n.is_placeholder or short_op(n.op_type) not in _PASS_THROUGH:
            break
        src = graph.producer(src, 0)
    if len(chain) < 2:
        return None
    cause = graph.node(chain[-1].node)
    what = "the graph input" if cause.is_placeholder else f"{cause.id} ({cause.op_type})"
    return RootCause(cause.id, cause.module, f"the index tensor of {node.id} was computed by {what}", tuple(chain))


def hidden_error_findings(hidden: Iterable[tuple[int, int, int, int]], tool: str) -> list[Finding]:
    """An info finding per run whose ERROR SUMMARY counts more errors than it printed."""
    return [Finding(check="memory", kind="unprinted_errors", severity="info", node="", op_type="", module="",
                    index=-1, message=f"{tool} counted {counted} errors in run {session} but printed {printed}; "
                                      f"rerun with a larger --print-limit to see them all",
                    metrics={"log_line": line, "counted": counted, "printed": printed})
            for session, line, counted, printed in hidden]
