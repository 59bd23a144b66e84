"""Attention masks: constants at ±finfo.max, finfo.min or ±Inf, and the tensors that only carry them.

Masks are built on purpose from a fill (`full`, `masked_fill`, `where`, `scalar_tensor`, a buffer)
and added to the logits; their extreme values are intended. The overflow check asks this module
which outputs are masks so that a mask is never an origin, a hop of an amplification chain or a
root cause, and so that the chain follows the operand that carries data. Pure: no torch, no I/O.
"""

from __future__ import annotations

from typing import Callable

from ascend_tui.graph.opgraph import OpGraph

# Names as `op_name` gives them (no namespace, overload or underscores).
# Ops whose extreme values come from a constant they were given (a fill value, a scalar).
MASK_SOURCES = frozenset("""full fill full_like new_full masked_fill scalar_tensor where lift_fresh lift_fresh_copy
    zeros ones empty new_empty new_ones new_zeros fill_diagonal index_put index_fill masked_scatter""".split())
# Ops that move, select, combine or rescale a mask without computing anything new from data: a mask in, a mask out.
MASK_KEEPERS = frozenset("""add sub rsub mul where masked_fill minimum maximum min max clamp clamp_min clamp_max clip
    expand expand_as view reshape reshape_alias unsafe_view unsqueeze squeeze slice select narrow index permute
    transpose t contiguous clone detach alias to_copy to copy type_as repeat repeat_interleave cat stack
    triu tril flip roll logical_not bitwise_not bitwise_and bitwise_or and or gather index_select
    nan_to_num neg""".split())

# (extreme in every run that measured it: ±Inf or within a bit of the dtype's max; holds NaN;
#  extreme in the checked run alone; every value within [-1, 1])
Extremes = Callable[[str], "tuple[bool, bool, bool, bool]"]


def mask_nodes(graph: OpGraph, order: list[str], extremes: Extremes, op_name: Callable[[str], str]) -> dict[str, str]:
    """{node: the fill or placeholder its mask values came from}, for every output that is an intended mask.

    A node is a mask when its extreme values exist without NaN and come from a constant: a mask source,
    extreme in every run, whose data inputs (if any) hold no extremes; a buffer or closure constant; an
    input shaped like an additive mask (max <= 0 is checked by the caller through `extremes`); a keeper
    op fed by a mask whose other operands are not themselves extreme; or a keeper that scales a 0/1 tensor by such a constant
    (`(1 - m) * finfo.min`: an output near the dtype's max from inputs within [-1, 1] needs a finfo-sized
    constant, never a computation on data).
    """
    masks: dict[str, str] = {}
    for nid in order:
        node = graph.get(nid)
        if node is None:
            continue
        extreme, nan, raw, _ = extremes(nid)
        if nan or not raw:
            continue
        if node.is_placeholder:
            if extreme and node.kind in ("buffer", "const", "input"):
                masks[nid] = nid
            continue
        name = op_name(node.op_type)
        prods = graph.producers(nid)
        mask_in = [e.src for e in prods if e.src in masks]
        others = [extremes(e.src) for e in prods if e.src not in masks]
        if any(n or r for _, n, r, _ in others):
            continue  # data arrived already extreme: that is an overflow upstream, not a mask
        if name in MASK_SOURCES and (extreme or mask_in):
            masks[nid] = masks[mask_in[0]] if mask_in else nid
        elif name in MASK_KEEPERS and mask_in:
            # a mask in and no extreme data in: the extremes out are the mask's (checked in this run alone, since
            # a cast the reference does not need leaves its ids unmatched)
            masks[nid] = masks[mask_in[0]]
        elif name in MASK_KEEPERS and extreme and others and all(unit for *_, unit in others):
            masks[nid] = nid
    return masks
