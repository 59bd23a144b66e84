"""Models as users write them: any callable, `torch.compile`d modules.

Capture hooks an `nn.Module`. This module turns what a user hands over into one without changing
node ids: a plain function becomes a parameterless module whose ops belong to the root; a compiled
module is replaced by the original module it wraps, with a note saying that the compiled kernels
were not what ran. (Positional plus keyword inputs are `live.tensors.Inputs`.)
"""

from __future__ import annotations

from typing import Any, Callable

COMPILED_NOTE = ("the model is torch.compile'd: ascend-tui captured the original module eagerly (op by op), so the "
                 "compiled kernels were not what ran; fused kernels may round and overflow differently")
FUNCTION_NOTE = ("the model is a plain function: tensors it reads from closures or globals appear as `const:` "
                 "inputs and are not moved or cast by --device/--dtype")


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


def as_module(model: Any) -> tuple[Any, list[str]]:
    """(an `nn.Module` to capture, notes for the report) for whatever callable the user gave."""
    import torch

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
