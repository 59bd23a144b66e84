"""The kernels of a profile: each kernel's time category, and the graph of one node per distinct kernel.

The category comes from the kernel's name, type and core alone, so it is part of the model: the
profile readers put it on the kernel graph, and `checks.profile` sums time by it.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

from ascend_tui.graph.opgraph import OpGraph, OpNode
from ascend_tui.graph.profile import Codes, KernelTable, Profile

CATEGORIES = ("compute", "vector", "layout", "memcpy", "communication", "aicpu", "host", "other")
_COMPUTE = re.compile(r"matmul|conv|gemm|flashattention|attention|^(aten::)?(b?mm|addmm|baddbmm|linear|einsum)$|"
                      r"cube|convolution|_convolution|sgemm|cutlass|wgmma|hgemm", re.I)
_LAYOUT = re.compile(r"^(transdata\w*|transpose\w*|npuformatcast|formatcast|permute|contiguous|"
                     r"aten::(contiguous|permute|transpose|to_copy|_to_copy)|asstrided|viewcopy|"
                     r"channelshuffle|nchw|nhwc|confusiontranspose\w*)$", re.I)
_MEMCPY = re.compile(r"^(memcpy\w*|memset\w*|memcopy|tensormove|aten::copy_|aten::to|h2d|d2h|"
                     r"aclrtmemcpy\w*)$", re.I)
_COMM = re.compile(r"^(hcom\w*|hccl\w*|nccl\w*|allreduce|allgather|reducescatter|broadcast|send|recv|"
                   r"batchsendrecv|alltoall\w*|c10d::\w+)$", re.I)

def category_of(op_type: str, name: str = "", core: str = "") -> str:
    """The time category of one kernel: compute, vector, layout, memcpy, communication, aicpu, host or other."""
    core_u = core.upper()
    base = op_type or name
    if core_u in ("HCCL", "COMMUNICATION") or _COMM.match(base) or _COMM.match(name.split("_")[0] if name else ""):
        return "communication"
    if core_u == "AI_CPU":
        return "aicpu"
    if core_u in ("MEMCPY", "MEMSET") or _MEMCPY.match(base):
        return "memcpy"
    if _LAYOUT.match(base) or _LAYOUT.match(name):
        return "layout"
    if _COMPUTE.search(base):
        return "compute"
    if core_u in ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "GPU", "CUDA", "CPU", "DSA_SQE"):
        return "vector"
    if core_u == "HOST":
        return "host"
    return "other"


def categories(table: KernelTable) -> Codes:
    """The category of every row, computed once per distinct (name, type, core), and once per table."""
    for seen, codes in _CATEGORIES:
        if seen is table:
            return codes
    out = _categories(table)
    _CATEGORIES[:] = [(table, out), *_CATEGORIES[:1]]
    return out


_CATEGORIES: list[tuple[KernelTable, Codes]] = []  # the last two tables': the advice rules each ask again


def _categories(table: KernelTable) -> Codes:
    if table.n == 0:
        return Codes()
    name, typ, core = table.text["name"], table.text["type"], table.text["core"]
    uniq, inverse = unique_rows([name, typ, core])
    labels = [category_of(typ.values[t], name.values[n], core.values[c]) for n, t, c in uniq]
    index = {c: i for i, c in enumerate(dict.fromkeys(labels))}
    codes = np.array([index[c] for c in labels], np.int32)[inverse.reshape(-1)]
    return Codes(codes, list(index))


def unique_rows(columns: Sequence[Codes]) -> tuple[np.ndarray, np.ndarray]:
    """(distinct code combinations as rows, the index of each row's combination): one int64 key per row,
    not a sort over a 2-D array."""
    key = np.zeros(len(columns[0]), np.int64)
    for c in columns:
        key = key * max(len(c.values), 1) + c.codes
    if len(columns) > 1 and math.prod(max(len(c.values), 1) for c in columns) >= 2**62:
        uniq2, inverse = np.unique(np.stack([c.codes for c in columns], axis=1), axis=0, return_inverse=True)
        return uniq2, inverse.reshape(-1)
    # the distinct keys of the first rows usually are all of them: then a lookup replaces a sort of every row
    uniq, first = np.unique(key[:4096], return_index=True)
    inverse = np.searchsorted(uniq, key) if len(uniq) else np.zeros(len(key), np.int64)
    if len(key) and not np.array_equal(uniq[np.minimum(inverse, len(uniq) - 1)], key):
        uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return np.stack([c.codes[first] for c in columns], axis=1), inverse.reshape(-1)


def kernel_graph(profile: Profile, name: str) -> OpGraph:
    """One node per distinct kernel name, in order of first launch, with its type, module, category and time."""
    t = profile.kernels
    graph = OpGraph(name)
    if t.n == 0:
        return graph
    codes = t.text["name"].codes
    k = len(t.text["name"].values)
    first = np.full(k, t.n, np.int64)
    np.minimum.at(first, codes, np.arange(t.n))
    total = np.bincount(codes, weights=t.dur_us, minlength=k)
    calls = np.bincount(codes, minlength=k)
    cats = categories(t)
    starts = t.start_ns
    order = sorted((c for c in range(k) if calls[c]), key=lambda c: (int(starts[first[c]]), int(first[c])))
    for i, c in enumerate(order):
        row = int(first[c])
        graph.add_node(OpNode(id=t.text["name"].values[c], op_type=t.label("type", row) or t.text["name"].values[c],
                              module=t.label("module", row), index=i,
                              attrs={"category": cats.at(row), "core": t.label("core", row), "calls": int(calls[c]),
                                     "total_us": round(float(total[c]), 3)}))
    return graph
