"""The torch function mode of the layout remedy: a permuted/transposed view is returned as it is where `.contiguous()`
would copy it, inside one module (entered by its forward pre-hook, left by its forward hook)."""

from __future__ import annotations

from typing import Any

_VIEWS = ("permute", "transpose", "t", "swapaxes", "swapdims", "movedim")


def _layout_mode() -> Any:
    """A torch function mode that returns a permuted/transposed view as it is where `.contiguous()` would copy it."""
    import weakref

    import torch
    from torch.overrides import TorchFunctionMode

    class SkipLayoutCopies(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.views: dict[int, Any] = {}
            self.skipped = 0

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name == "contiguous" and args and not kwargs and len(args) == 1:
                ref = self.views.get(id(args[0]))
                if ref is not None and ref() is args[0]:
                    self.skipped += 1
                    return args[0]
            out = func(*args, **kwargs)
            if name in _VIEWS and isinstance(out, torch.Tensor) and out.is_floating_point():
                self.views[id(out)] = weakref.ref(out)
            return out

    return SkipLayoutCopies()


def layout_pre(module: Any, args: Any, kwargs: Any) -> None:
    mode = _layout_mode()
    mode.__enter__()
    module.__dict__.setdefault("_ascend_layout_stack", []).append(mode)


def layout_post(module: Any, args: Any, kwargs: Any, output: Any) -> None:
    stack = module.__dict__.get("_ascend_layout_stack") or []
    if stack:
        stack.pop().__exit__(None, None, None)
