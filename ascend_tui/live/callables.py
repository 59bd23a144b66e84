"""Models as users write them: any callable, positional plus keyword inputs, `torch.compile`d modules.

Capture needs an `nn.Module` called with one tuple or one dict of inputs. This module turns what a
user hands over into that shape without changing node ids: a plain function becomes a parameterless
module whose ops belong to the root; `(model, args, kwargs)` becomes one dict of inputs (`"0"`, `"1"`,
... for the positional ones, so placeholders read `input:0` and `input:attention_mask`) and a model
that splits it again; a compiled module is replaced by the original module it wraps, with a note
saying that the compiled kernels were not what ran.
"""

from __future__ import annotations

from typing import Any, Callable

COMPILED_NOTE = ("the model is torch.compile'd: ascend-tui captured the original module eagerly (op by op), so the "
                 "compiled kernels were not what ran; fused kernels may round and overflow differently")
FUNCTION_NOTE = ("the model is a plain function: tensors it reads from closures or globals appear as `const:` "
                 "inputs and are not moved or cast by --device/--dtype")

_SPLIT_CLASSES: dict[type, type] = {}


def unwrap_compiled(model: Any) -> tuple[Any, bool]:
    """(the original module or function behind a `torch.compile` wrapper, whether there was one)."""
    found = False
    for _ in range(8):  # compile of a compile
        inner = getattr(model, "_orig_mod", None)
        if inner is None:
            inner = getattr(model, "_torchdynamo_orig_callable", None)
        if inner is None or inner is model:
            break
        model, found = inner, True
    return model, found


def function_module(fn: Callable[..., Any]) -> Any:
    """An `nn.Module` with no parameters whose forward calls `fn`: its ops are the root module's."""
    import torch

    class FunctionModel(torch.nn.Module):
        """A plain function as a model."""

        def __init__(self) -> None:
            super().__init__()
            object.__setattr__(self, "fn", fn)

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return self.fn(*args, **kwargs)

    FunctionModel.__name__ = FunctionModel.__qualname__ = getattr(fn, "__name__", "function")
    return FunctionModel()


def _split_class(cls: type) -> type:
    """`cls` with a `__call__` that turns the `"0"`, `"1"`, ... keywords back into positional arguments."""
    found = _SPLIT_CLASSES.get(cls)
    if found is None:
        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N807 - the call protocol
            n = self.__dict__.get("_atui_positional", 0)
            pos = [kwargs.pop(str(i)) for i in range(n) if str(i) in kwargs]
            return super(found, self).__call__(*pos, *args, **kwargs)  # type: ignore[misc]

        found = type(cls.__name__, (cls,), {"__call__": __call__, "__module__": cls.__module__,
                                           "__qualname__": cls.__qualname__})
        _SPLIT_CLASSES[cls] = found
    return found


def bind_call(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(a model, one dict of inputs) that calls `model(*args, **kwargs)` when called with `**inputs`.

    The model is a shallow copy of the user's with the same submodules and parameters (so node ids and
    `param:` names are unchanged) whose class splits the inputs again; the user's object is not touched.
    """
    import copy

    clash = [k for k in kwargs if k.isdigit()]
    if clash:
        raise ValueError(f"keyword inputs named like positions ({', '.join(clash)}) cannot be told apart")
    model, notes = as_module(model)
    bound = copy.copy(model)
    bound.__class__ = _split_class(type(model))
    bound.__dict__["_atui_positional"] = len(args)
    bound.__dict__["_atui_notes"] = notes
    return bound, {**{str(i): a for i, a in enumerate(args)}, **kwargs}


def as_module(model: Any) -> tuple[Any, list[str]]:
    """(an `nn.Module` to capture, notes for the report) for whatever callable the user gave."""
    import torch

    if isinstance(model, torch.nn.Module) and "_atui_notes" in model.__dict__:
        return model, list(model.__dict__["_atui_notes"])  # already prepared by `bind_call`
    notes: list[str] = []
    model, compiled = unwrap_compiled(model)
    if compiled:
        notes.append(COMPILED_NOTE)
    if not isinstance(model, torch.nn.Module):
        if not callable(model):
            raise TypeError(f"the model is not callable ({type(model).__name__})")
        model = function_module(model)
        notes.append(FUNCTION_NOTE)
    return model, notes
