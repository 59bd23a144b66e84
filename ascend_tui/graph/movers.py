"""Which operators only move values: views, reshapes, transposes, copies and casts that keep every value.

Walking a graph from a symptom to its cause, these hops show nothing new (the values are the
input's), so the interfaces step over them to the next operator that computes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ascend_tui.graph.opgraph import OpNode

MOVES_VALUES = frozenset({
    "view", "unsafe_view", "reshape_alias", "reshape", "t", "transpose", "permute", "squeeze", "unsqueeze",
    "expand", "expand_as", "contiguous", "clone", "copy", "detach", "alias", "flatten", "unflatten", "view_as",
    "reshape_as", "lift_fresh", "as_strided", "movedim", "swapaxes", "swapdims", "repeat", "broadcast_to",
})
CASTS = frozenset({"to_copy", "to", "type", "type_as", "float", "half", "double", "bfloat16", "npu_dtype_cast"})

# Each dtype and the dtypes that hold all its values (a cast along these changes nothing).
_WIDENS: dict[str, frozenset[str]] = {
    "float16": frozenset({"float16", "float32", "float64"}),
    "bfloat16": frozenset({"bfloat16", "float32", "float64"}),
    "float32": frozenset({"float32", "float64"}),
    "float64": frozenset({"float64"}),
    "int8": frozenset({"int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"}),
    "uint8": frozenset({"uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"}),
    "int16": frozenset({"int16", "int32", "int64", "float32", "float64"}),
    "int32": frozenset({"int32", "int64", "float64"}),
    "int64": frozenset({"int64"}),
    "bool": frozenset({"bool", "int8", "uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
                       "float64"}),
}


def op_name(op_type: str) -> str:
    """`view` for `aten.view.default`, `Tensor.view` and `aten._unsafe_view`; `copy` for `aten.copy_`."""
    parts = op_type.split(".")
    if len(parts) >= 2 and parts[0] in ("aten", "prims", "torch", "Torch", "Tensor", "Functional", "npu", "NPU"):
        name = parts[1]
    else:
        name = parts[-1]
    return name.strip("_")


def keeps_values(src: str, dst: str) -> bool:
    """True when every value of dtype `src` is exactly representable in `dst`."""
    return dst in _WIDENS.get(src, frozenset({src}))


def moves_values(node: OpNode) -> bool:
    """True for an operator whose outputs hold exactly its (first) input's values, moved or reshaped."""
    if node.is_placeholder:
        return False
    name = op_name(node.op_type)
    if name in MOVES_VALUES:
        return True
    if name in CASTS and node.inputs and node.outputs and node.inputs[0] is not None and node.outputs[0] is not None:
        return keeps_values(node.inputs[0].dtype, node.outputs[0].dtype)
    return False
