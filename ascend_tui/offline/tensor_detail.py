"""The tensor-pair detail of two dumped tensor files (`.pt` read with weights_only, `.npy` without pickle), in chunks."""

from __future__ import annotations

import threading

import numpy as np

from ascend_tui.checks.tensor_pair import TOP_K, PairAccumulator, PairDetail
from ascend_tui.errors import InputError
from ascend_tui.readers.msprobe.tensors import open_tensor

CHUNK = 1 << 20


def pair_detail_of_files(target: str, golden: str, *, k: int = TOP_K, chunk: int = CHUNK,
                         cancel: threading.Event | None = None) -> PairDetail:
    """Histograms, worst elements and statistics of the tensors in two files; indices are in the target's shape.

    A file that cannot be read, or two tensors of different shapes (size-1 dimensions aside, as msprobe
    squeezes them), is an `InputError` naming the file.
    """
    n, b = open_tensor(target), open_tensor(golden)
    if tuple(d for d in n.shape if d != 1) != tuple(d for d in b.shape if d != 1):
        raise InputError(golden, f"shape {list(b.shape)} differs from the target's {list(n.shape)}: no element pairs")
    kinds = [np.dtype(d) for d in (n.compare_dtype, b.compare_dtype) if np.dtype(d).kind == "f"]
    eps = float(np.finfo(np.result_type(*kinds, np.float32)).eps) if kinds else float(np.finfo(np.float64).eps)
    acc = PairAccumulator(tuple(n.shape), eps, k)
    for cn, cb in zip(n.chunks(chunk), b.chunks(chunk)):
        if cancel is not None and cancel.is_set():
            break
        acc.feed(cn, cb)
    return acc.result()
