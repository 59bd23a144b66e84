"""What a model is called with and what an aten call reads: the tensors among them, and their dtype names.

`tensor_leaves` finds the tensors among an aten call's arguments or outputs with a set lookup on
most arguments' types; `call_model` calls a model with positional, keyword or both inputs
(`Inputs`), and source stacks stop at it; `iter_tensors` walks nested outputs. Split from
`live/capture.py`, whose recorder and every live check use them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from ascend_tui.live.frames import stop_at


# The dtype names of floating tensors (`TensorMeta.dtype`).
FLOATING = frozenset({"float32", "float16", "bfloat16", "float64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                      "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2"})
_DTYPE_NAMES: dict[Any, str] = {}


def dtype_name(dtype: Any) -> str:
    """`float16` for `torch.float16`."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name


# Per tensor type: the argument types seen to be tensors and those seen not to be (ints, floats, dtypes, None...),
# so most arguments are told apart by a set lookup on their type (`isinstance` of an int against `torch.Tensor`
# costs three times more: it walks the metaclass's subclass check).
_LEAF_KINDS: dict[type, tuple[set[type], set[type]]] = {}


def tensor_leaves(values: Any, tensor_type: type) -> list[Any]:
    """The tensors among an aten call's arguments (or outputs), in `tree_flatten` order."""
    try:
        tensors, plain = _LEAF_KINDS[tensor_type]
    except KeyError:
        tensors, plain = _LEAF_KINDS[tensor_type] = ({tensor_type}, {int, float, bool, complex, str, type(None)})
    found: list[Any] = []
    for v in values:  # the common kinds inline; a kind seen for the first time is learned by `_new_kind`
        kind = type(v)
        if kind in tensors:
            found.append(v)
        elif kind in plain:
            continue
        elif kind is list or kind is tuple:  # Tensor[] and Tensor?[] arguments, tuple outputs
            for e in v:
                kind = type(e)
                if kind in tensors:
                    found.append(e)
                elif kind not in plain and _new_kind(e, kind, tensor_type, tensors, plain, found):
                    return _deep_leaves(values, tensor_type)
        elif _new_kind(v, kind, tensor_type, tensors, plain, found):
            return _deep_leaves(values, tensor_type)
    return found


def _new_kind(x: Any, kind: type, tensor_type: type, tensors: set[type], plain: set[type], found: list[Any]) -> bool:
    """File `x`'s type under tensors (keeping `x`) or plain values; True for a container nested deeper than one
    level (or a dict, or a list/tuple subclass such as `torch.Size`), which the pytree walk then reads."""
    if isinstance(x, tensor_type):
        tensors.add(kind)
        found.append(x)
        return False
    if isinstance(x, (list, tuple, dict)):
        return True
    plain.add(kind)
    return False


def _deep_leaves(values: Any, tensor_type: type) -> list[Any]:
    from torch.utils._pytree import tree_flatten

    return [x for x in tree_flatten(list(values))[0] if isinstance(x, tensor_type)]


@dataclass(frozen=True, slots=True)
class Inputs:
    """Positional and keyword inputs together, for models called as `model(*args, **kwargs)`."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


def split_inputs(inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`(args, kwargs)` from an `Inputs`, a tuple/list (positional), a dict (keywords) or one value."""
    if isinstance(inputs, Inputs):
        return tuple(inputs.args), dict(inputs.kwargs)
    if isinstance(inputs, dict):
        return (), inputs
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    return (inputs,), {}


def call_model(model: Any, inputs: Any) -> Any:
    """Call `model` with its inputs: positional, keyword, or both (`Inputs`)."""
    args, kwargs = split_inputs(inputs)
    return model(*args, **kwargs)


stop_at(call_model)  # source stacks end at the model's call: what started the run is not the model


def iter_tensors(obj: Any) -> Iterator[Any]:
    """Every tensor inside a nested structure of outputs."""
    import torch
    from torch.utils._pytree import tree_flatten

    for leaf in tree_flatten(obj)[0]:
        if isinstance(leaf, torch.Tensor):
            yield leaf
