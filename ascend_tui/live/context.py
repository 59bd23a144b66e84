"""What a live check is and what it gets: the `LiveCheck` protocol and the `LiveContext` of one run.

A check declares the observers it wants on the target run and on the reference run (the
runner puts all of them on one dispatch mode per run), then turns what they saw into
findings in `run`. Adding a check is adding a module with one class; the runner never
names checks.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, Sequence

from ascend_tui.live.options import DTYPES, RunOptions

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation
    from ascend_tui.live.capture import CaptureResult
    from ascend_tui.live.device import Device
    from ascend_tui.live.recording import Observer
    from ascend_tui.progress import Progress

Role = Literal["target", "reference", "rerun"]


@dataclass(frozen=True, slots=True)
class Run:
    """One recorded run a check may observe: the target, the reference, or an extra pass a check makes itself."""

    role: Role
    model: Any
    inputs: Any
    device: Device


class LiveCheck(Protocol):
    """One live check: its name, whether it compares against the reference run, what it observes, and `run`."""

    @property
    def name(self) -> str: ...

    @property
    def needs_reference(self) -> bool: ...

    def observers(self, ctx: LiveContext, run: Run) -> Sequence[Observer]:
        """What this check watches during `run`; for a "rerun" (an extra pass another check makes), only what
        keeps that pass safe (the memory check's index clamping)."""
        ...

    def run(self, ctx: LiveContext, inv: Investigation) -> None: ...


COARSE = "coarse"
"""A check class with `coarse = True` works on a coarse-to-fine capture (`live.coarse`): module-level evidence,
operators only where the first bad values appeared; the runner captures that way when every check asked does."""


@dataclass(slots=True)
class LiveContext:
    """One live run: its options, the device, the prepared model and inputs, and the captures once made."""

    options: RunOptions
    device: Device
    dtype: Any
    model: Any
    inputs: Any
    original_model: Any
    original_inputs: Any
    progress: Progress | None = None
    cancel: threading.Event | None = None
    target: CaptureResult | None = None
    reference: CaptureResult | None = None
    checks: tuple[LiveCheck, ...] = field(default_factory=tuple)
    coarse: Any = None  # the `live.coarse.CoarseCapture` when the target was captured coarse-to-fine

    def rerun_observers(self, model: Any = None, inputs: Any = None, device: Device | None = None) -> list[Observer]:
        """Observers every extra pass must carry (what other checks need to keep a run of this model safe)."""
        run = Run("rerun", self.model if model is None else model, self.inputs if inputs is None else inputs,
                  device or self.device)
        return [o for check in self.checks for o in check.observers(self, run)]

    def report(self, phase: str, done: int, total: int | None = None) -> None:
        if self.progress is not None:
            self.progress(phase, done, total)

    @property
    def reference_spec(self) -> str | None:
        return self.options.reference


def torch_dtype(name: str | None) -> Any:
    """`torch.float16` for "float16"; None stays None; anything else is an `InputError`."""
    import torch

    from ascend_tui.errors import InputError

    if name is None:
        return None
    if name not in DTYPES:
        raise InputError("--dtype", f"unknown dtype {name!r} (choose from {', '.join(DTYPES)})")
    return getattr(torch, name)


def prepare(model: Any, inputs: Any, device: Device, dtype: Any, *, copy_model: bool) -> tuple[Any, Any]:
    """Put `model` and the floating-point `inputs` on `device` in `dtype` (a copy when asked).

    Any callable is a model; only `nn.Module`s (and their parameters) are moved and cast.
    """
    import torch
    from torch.utils._pytree import tree_map

    from ascend_tui.live.tensors import Inputs

    if copy_model:
        model = copy.deepcopy(model)
    if isinstance(model, torch.nn.Module):
        model = model.to(device.torch_device)
        if dtype is not None:
            model = model.to(dtype)

    def move(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            x = x.to(device.torch_device)
            if dtype is not None and x.is_floating_point():
                x = x.to(dtype)
        return x

    if isinstance(inputs, Inputs):
        return model, Inputs(tree_map(move, tuple(inputs.args)), tree_map(move, dict(inputs.kwargs)))
    return model, tree_map(move, inputs)


def model_dtype(model: Any, inputs: Any) -> Any:
    """The floating dtype the model computes in: its first floating parameter's, else its inputs'."""
    import torch
    from torch.utils._pytree import tree_flatten

    from ascend_tui.live.tensors import split_inputs

    if isinstance(model, torch.nn.Module):
        for p in model.parameters():
            if p.is_floating_point():
                return p.dtype
    for leaf in tree_flatten(split_inputs(inputs))[0]:
        if isinstance(leaf, torch.Tensor) and leaf.is_floating_point():
            return leaf.dtype
    return torch.float32


def guarded(target: str, during: str, fn: Any) -> Any:
    """Run user code; its exceptions become a `TargetError` naming the file and line."""
    from ascend_tui.errors import AscendTuiError
    from ascend_tui.live.targets import model_error

    try:
        return fn()
    except AscendTuiError:
        raise
    except Exception as exc:  # noqa: BLE001 - anything the model raises is the user's error
        raise model_error(exc, target, during) from None
