"""Run the live checks: capture the target (and a reference) on a device, then each check in turn.

Checks plug in through `LIVE_CHECKS`: a check name maps to `module:function` taking
`(LiveContext, Investigation)` and adding its findings and evidence to the investigation.
"""

from __future__ import annotations

import copy
import importlib
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from ascend_tui.errors import InputError
from ascend_tui.investigation import CHECK_NAMES, Investigation, Progress, RunInfo
from ascend_tui.live.capture import CaptureResult, capture, dtype_name
from ascend_tui.live.device import Device, select

LIVE_CHECKS: dict[str, str] = {
    "overflow": "ascend_tui.live.overflow_live:run",
    "memory": "ascend_tui.live.sanitize:run",
}
DTYPES = ("float16", "bfloat16", "float32")
NEEDS_REFERENCE = frozenset({"overflow", "precision"})  # checks that compare against the float32 reference
# Checks that measure more during the reference run itself, instead of running the model again:
# "module:function" taking the run's dtype name and returning a Recorder class, or None.
REFERENCE_RECORDERS: dict[str, str] = {"overflow": "ascend_tui.live.overflow_live:reference_recorder"}


@dataclass(slots=True)
class LiveContext:
    """What a live check needs: the prepared model and inputs, the device and the run options."""

    model: Any
    inputs: Any
    device: Device
    dtype: Any
    reference_spec: str | None
    iterations: int = 1
    backward: bool = False
    loss: Callable[[Any], Any] | None = None
    progress: Progress | None = None
    cancel: threading.Event | None = None
    target: CaptureResult | None = None
    reference: CaptureResult | None = None
    options: dict[str, Any] = field(default_factory=dict)
    original_model: Any = None
    original_inputs: Any = None

    def report(self, phase: str, done: int, total: int | None = None) -> None:
        if self.progress is not None:
            self.progress(phase, done, total)


def available_checks() -> tuple[str, ...]:
    """Checks that can run live in this version."""
    return tuple(c for c in CHECK_NAMES if c in LIVE_CHECKS)


def parse_checks(spec: str | tuple[str, ...]) -> tuple[str, ...]:
    """`overflow,memory` -> ('overflow', 'memory'); `none` -> (); unknown names raise InputError."""
    names = spec if isinstance(spec, tuple) else tuple(s.strip() for s in spec.split(",") if s.strip())
    if names in ((), ("none",)):
        return ()
    for name in names:
        if name not in CHECK_NAMES:
            raise InputError("--checks", f"unknown check {name!r} (choose from {', '.join(CHECK_NAMES)}, none)")
        if name not in LIVE_CHECKS:
            raise InputError("--checks", f"the {name} check is not part of this version yet "
                                         f"(available: {', '.join(available_checks())})")
    return names


def torch_dtype(name: str | None) -> Any:
    import torch

    if name is None:
        return None
    if name not in DTYPES:
        raise InputError("--dtype", f"unknown dtype {name!r} (choose from {', '.join(DTYPES)})")
    return getattr(torch, name)


def prepare(model: Any, inputs: Any, device: Device, dtype: Any, *, copy_model: bool) -> tuple[Any, Any]:
    """Put `model` and the floating-point `inputs` on `device` in `dtype` (a copy when asked)."""
    import torch
    from torch.utils._pytree import tree_map

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

    return model, tree_map(move, inputs)


def model_dtype(model: Any, inputs: Any) -> Any:
    """The floating dtype the model computes in: its first floating parameter's, else its inputs'."""
    import torch
    from torch.utils._pytree import tree_flatten

    if isinstance(model, torch.nn.Module):
        for p in model.parameters():
            if p.is_floating_point():
                return p.dtype
    for leaf in tree_flatten(inputs)[0]:
        if isinstance(leaf, torch.Tensor) and leaf.is_floating_point():
            return leaf.dtype
    return torch.float32


def _capture_reference(model: Any, inputs: Any, device: Device, *, sanitized: bool, progress: Progress | None,
                       cancel: threading.Event | None, expected_ops: int,
                       recorder_class: Callable[..., Any] | None = None) -> CaptureResult:
    """The float32 reference run; sanitized (indices clamped) when the target run was, so it cannot crash."""
    if sanitized:
        from ascend_tui.live.sanitize import capture_sanitized

        return capture_sanitized(model, inputs, progress=progress, cancel=cancel, device=device,
                                 phase_label="capturing reference (sanitized)", expected_ops=expected_ops)
    return capture(model, inputs, progress=progress, cancel=cancel, phase_label="capturing reference",
                   expected_ops=expected_ops, recorder_class=recorder_class)


def _reference_recorder(checks: tuple[str, ...], run_dtype: Any) -> Callable[..., Any] | None:
    """The recorder class a requested check wants the reference run to use (the first that asks)."""
    for name in checks:
        ref = REFERENCE_RECORDERS.get(name)
        if ref is not None:
            module_name, _, func = ref.partition(":")
            found = getattr(importlib.import_module(module_name), func)(dtype_name(run_dtype))
            if found is not None:
                return found
    return None


def user_model(model: Any) -> tuple[Any, list[str]]:
    """(the module to capture, notes for the report) for any callable: see `live.callables.as_module`."""
    from ascend_tui.live.callables import as_module

    try:
        return as_module(model)
    except TypeError as exc:
        raise InputError("model", str(exc)) from None


def _guarded(target: str, during: str, fn: Callable[[], Any]) -> Any:
    """Run user code; its exceptions become a `TargetError` naming the file and line."""
    from ascend_tui.errors import AscendTuiError
    from ascend_tui.targets import model_error

    try:
        return fn()
    except AscendTuiError:
        raise
    except Exception as exc:  # noqa: BLE001 - anything the model raises is the user's error
        raise model_error(exc, target, during) from None


def run_live(
    model: Any,
    inputs: Any,
    *,
    checks: tuple[str, ...],
    device: str,
    dtype: str | None,
    reference: str | None,
    iterations: int = 1,
    backward: bool = False,
    loss: Callable[[Any], Any] | None = None,
    target: str = "",
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    options: dict[str, Any] | None = None,
    on_partial: Callable[[Investigation], None] | None = None,
) -> Investigation:
    """Capture `model` on the device (and the reference), then run each check; see `investigate`."""
    checks = parse_checks(tuple(checks))
    model, notes = user_model(model)
    dev = select(device)
    want = torch_dtype(dtype)
    natural = model_dtype(model, inputs)
    run_dtype = want or natural
    if want is not None and not dev.supports_dtype(want):
        raise InputError("--dtype", f"{dtype_name(want)} does not run on {dev.backend} here")
    moved = dev.backend != "cpu" or want is not None
    t_model, t_inputs = prepare(model, inputs, dev, want, copy_model=moved) if moved else (model, inputs)
    ctx = LiveContext(t_model, t_inputs, dev, run_dtype, reference, iterations, backward, loss, progress, cancel,
                      options=dict(options or {}), original_model=model, original_inputs=inputs)
    if "memory" in checks:
        from ascend_tui.live.sanitize import capture_sanitized

        # The sanitizer clamps bad indices, so a model with an out-of-range index still runs to the end.
        ctx.target = _guarded(target, "the model's forward", lambda: capture_sanitized(
            t_model, t_inputs, progress=progress, cancel=cancel, phase_label="capturing target (sanitized)",
            iterations=iterations, device=dev))
    else:
        ctx.target = _guarded(target, "the model's forward", lambda: capture(
            t_model, t_inputs, progress=progress, cancel=cancel, phase_label="capturing target"))
    ref_stats = None
    if reference and NEEDS_REFERENCE.intersection(checks):
        ref_backend, _, ref_dtype = reference.partition(":")
        same = ref_backend == dev.backend and (ref_dtype or "float32") == dtype_name(run_dtype)
        if not same:
            r_dev = select(ref_backend)
            r_model, r_inputs = prepare(model, inputs, r_dev, torch_dtype(ref_dtype or "float32"), copy_model=True)
            ctx.reference = _guarded(target, "the reference forward", lambda: _capture_reference(
                r_model, r_inputs, r_dev, sanitized="memory" in checks, progress=progress, cancel=cancel,
                expected_ops=ctx.target.op_count, recorder_class=_reference_recorder(checks, run_dtype)))
            ref_stats = ctx.reference.stats
        else:
            ref_stats = ctx.target.stats
    info = dev.info()
    run = RunInfo(target=target, device=info.to_json(), checks=checks, dtype=dtype_name(run_dtype),
                  reference=reference, iterations=iterations, source="live",
                  extra={"backward": backward} if backward else {})
    inv = Investigation(ctx.target.graph, stats=ctx.target.stats, reference=ref_stats, run=run,
                        histograms=ctx.target.histograms)
    if notes:
        inv.run.extra.setdefault("notes", []).extend(notes)
    for i, name in enumerate(checks):
        if on_partial is not None:
            on_partial(inv.snapshot())
        module_name, _, func = LIVE_CHECKS[name].partition(":")
        ctx.report(f"checking {name} ({i + 1} of {len(checks)})", 0, None)
        getattr(importlib.import_module(module_name), func)(ctx, inv)
    return inv
