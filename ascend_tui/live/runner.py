"""Run live checks: capture the target (and a reference) on a device with every check's observers, then each check.

`investigate` is the public entry point (re-exported as `ascend_tui.investigate`). The runner
knows checks only through the `LiveCheck` protocol: it asks each for its observers on the
target and reference runs, records both runs once each, and calls `run` in order.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping

from ascend_tui.errors import InputError
from ascend_tui.investigation import CHECK_NAMES, Investigation, RunInfo
from ascend_tui.live.tensors import dtype_name
from ascend_tui.live.coarse import Side, coarse_capture, saturation_limit
from ascend_tui.live.context import COARSE, LiveCheck, LiveContext, Run, guarded, model_dtype, prepare, torch_dtype
from ascend_tui.live.device import select
from ascend_tui.live.options import RunOptions, as_run_options
from ascend_tui.live.overflow import OverflowCheck
from ascend_tui.live.precision import PrecisionCheck
from ascend_tui.live.profile import ProfileCheck
from ascend_tui.live.recording import capture
from ascend_tui.live.memory import MemoryCheck
from ascend_tui.plugins import CHECKS as CHECKS_GROUP
from ascend_tui.plugins import Plugin, plugins
from ascend_tui.progress import Progress

LIVE_CHECKS: list[type[LiveCheck]] = [PrecisionCheck, OverflowCheck, MemoryCheck, ProfileCheck]
"""The checks that run live, by name; any object following `LiveCheck` may be passed in `RunOptions.checks` too.
Installed packages add more as entry points (group `ascend_tui.checks`, the name of a `LiveCheck` class)."""


def plugin_checks() -> dict[str, Plugin]:
    """The live checks other installed packages declare, by name (not imported until a run asks for one)."""
    builtin = {c.name for c in LIVE_CHECKS}
    return {p.name: p for p in plugins(CHECKS_GROUP) if p.name not in builtin}


def available_checks() -> tuple[str, ...]:
    """Names of the checks that run live in this version, in the order they are listed (plug-ins last)."""
    return (*(c.name for c in LIVE_CHECKS), *plugin_checks())


def parse_checks(spec: str | tuple[Any, ...]) -> tuple[Any, ...]:
    """`"overflow,memory"` -> ('overflow', 'memory'); `none` -> (); `all` -> every live check; unknown names
    raise `InputError`. Check objects pass through unchanged.
    """
    names = spec if isinstance(spec, tuple) else tuple(s.strip() for s in spec.split(",") if s.strip())
    if names in ((), ("none",)):
        return ()
    live = available_checks()
    if names == ("all",):
        return live
    for name in names:
        if not isinstance(name, str):
            continue
        if name not in CHECK_NAMES and name not in live:
            known = ", ".join(dict.fromkeys((*CHECK_NAMES, *live)))
            raise InputError("--checks", f"unknown check {name!r} (choose from {known}, all, none)")
        if name not in live:
            raise InputError("--checks", f"the {name} check is not part of this version yet "
                                         f"(available: {', '.join(live)})")
    return names


def resolve_checks(checks: tuple[Any, ...]) -> tuple[LiveCheck, ...]:
    """A fresh check object per name (checks keep what their observers saw), objects as they are."""
    by_name: dict[str, Callable[[], LiveCheck]] = {c.name: c for c in LIVE_CHECKS}
    extra = plugin_checks()
    return tuple((by_name[c] if c in by_name else extra[c].load())() if isinstance(c, str) else c
                 for c in parse_checks(tuple(checks)))


def user_model(model: Any) -> tuple[Any, list[str]]:
    """(the module to capture, notes for the report) for any callable: see `live.callables.as_module`."""
    from ascend_tui.live.callables import as_module

    try:
        return as_module(model)
    except TypeError as exc:
        raise InputError("model", str(exc)) from None


def run_live(model: Any, inputs: Any, options: RunOptions, *, progress: Progress | None = None,
             cancel: threading.Event | None = None,
             on_partial: Callable[[Investigation], None] | None = None) -> Investigation:
    """Capture `model` on the device (and the reference) with every check's observers, then run each check."""
    checks = resolve_checks(tuple(options.checks))
    model, notes = user_model(model)
    dev = select(options.device)
    want = torch_dtype(options.dtype)
    run_dtype = want or model_dtype(model, inputs)
    if want is not None and not dev.supports_dtype(want):
        raise InputError("--dtype", f"{dtype_name(want)} does not run on {dev.backend} here")
    moved = dev.backend != "cpu" or want is not None
    t_model, t_inputs = prepare(model, inputs, dev, want, copy_model=moved) if moved else (model, inputs)
    ctx = LiveContext(options, dev, run_dtype, t_model, t_inputs, model, inputs, progress, cancel, checks=checks)
    target_run = Run("target", t_model, t_inputs, dev)
    observers = [o for c in checks for o in c.observers(ctx, target_run)]
    api_ids = bool(options.setting("api_ids", False))
    coarse = options.detail != "full" and bool(checks) and options.iterations == 1 and not api_ids \
        and all(getattr(c, COARSE, False) and (not hasattr(c, "coarse_when") or c.coarse_when(options))
                for c in checks)
    ref_stats = None
    ref_spec = None
    if options.reference and any(c.needs_reference for c in checks):
        ref_backend, _, ref_dtype = options.reference.partition(":")
        if ref_backend == dev.backend and (ref_dtype or "float32") == dtype_name(run_dtype):
            ref_spec = "same"  # the reference would repeat the target run
        else:
            ref_spec = (ref_backend, ref_dtype or "float32")
    ref_side = None
    if ref_spec not in (None, "same"):
        r_dev = select(ref_spec[0])
        r_model, r_inputs = prepare(model, inputs, r_dev, torch_dtype(ref_spec[1]), copy_model=True)
        ref_run = Run("reference", r_model, r_inputs, r_dev)
        ref_side = Side(r_model, r_inputs, r_dev, [o for c in checks for o in c.observers(ctx, ref_run)])
    if coarse:
        meter, around = _coarse_hooks(checks, ctx)
        ctx.coarse = guarded(options.target, "the model's step", lambda: coarse_capture(
            t_model, t_inputs, dev, backward=options.backward, loss=options.loss, observers=observers,
            saturation_limit=saturation_limit(options.setting("range_dtype") or run_dtype), progress=progress,
            cancel=cancel, reference=ref_side, on_target=lambda r: setattr(ctx, "target", r),
            suspects=[_suspect(c, ctx) for c in checks if hasattr(c, "coarse_suspect")], meter=meter,
            around=around, outliers=[_outlier(c, ctx) for c in checks if hasattr(c, "coarse_outlier")],
            histograms=any(c.module_histograms(ctx) if hasattr(c, "module_histograms") else True for c in checks)))
        ctx.target, ctx.reference = ctx.coarse.result, ctx.coarse.reference
        end = ctx.coarse.window[1] if ctx.coarse.window is not None else None
        ctx.coarse.why.extend(w for c in checks if isinstance(w := getattr(c, "why", None), dict)
                              and w.get("events", (None, None))[1] == end)
    else:
        step = {"backward": options.backward, "loss": options.loss}  # a training step: forward and backward at once
        ctx.target = guarded(options.target, "the model's step" if options.backward else "the model's forward",
                             lambda: capture(t_model, t_inputs, observers=observers, progress=progress, cancel=cancel,
                                             phase_label="capturing target", api_ids=api_ids, **step))
        if ref_side is not None:
            side = ref_side
            ctx.reference = guarded(options.target, "the reference step" if options.backward else
                                    "the reference forward", lambda: capture(
                side.model, side.inputs, observers=side.observers, progress=progress, cancel=cancel,
                phase_label="capturing reference", expected_ops=ctx.target.op_count, api_ids=api_ids, **step))
    if ref_spec == "same":
        ref_stats = ctx.target.stats
    elif ctx.reference is not None:
        ref_stats = ctx.reference.stats
    run = RunInfo(target=options.target, device=dev.info().to_json(), checks=tuple(c.name for c in checks),
                  dtype=dtype_name(run_dtype), reference=options.reference, iterations=options.iterations,
                  source="live", extra={"backward": options.backward} if options.backward else {})
    inv = Investigation(ctx.target.graph, stats=ctx.target.stats, reference=ref_stats, run=run,
                        histograms=ctx.target.histograms,
                        reference_histograms=ctx.reference.histograms if ctx.reference is not None else None)
    if notes:
        inv.run.extra.setdefault("notes", []).extend(notes)
    if ctx.coarse is not None:
        inv.run.extra["capture"] = ctx.coarse.describe()
        for why in ctx.coarse.why:  # the report's notes say where operators were recorded, and why there
            inv.run.extra.setdefault("notes", []).append(
                f"operators recorded only in {why.get('module') or '<model>'} (every other module call is module "
                f"level): {why.get('text', '')}")
    for i, check in enumerate(checks):
        if on_partial is not None:
            on_partial(inv.snapshot())
        ctx.report(f"checking {check.name} ({i + 1} of {len(checks)})", 0, None)
        check.run(ctx, inv)
    return inv


def _suspect(check: Any, ctx: LiveContext) -> Callable[[Any], int | tuple[int, int] | None]:
    return lambda events: check.coarse_suspect(ctx, events)


def _outlier(check: Any, ctx: LiveContext) -> Callable[[Any], int | tuple[int, int] | None]:
    return lambda events: check.coarse_outlier(ctx, events)


def _coarse_hooks(checks: tuple[LiveCheck, ...], ctx: LiveContext) -> tuple[Any, Any]:
    """The module pass's meter (when a check measures time or memory per module call) and the checks' wrappers
    around each pass (`coarse_capture`'s `meter` and `around`)."""
    import contextlib

    from ascend_tui.live.coarse_meter import MEMORY, TIME, Meter

    measures = {m for c in checks for m in getattr(c, "measures", ())}
    meter = Meter(ctx.device, seconds=TIME in measures, nbytes=MEMORY in measures) if measures else None
    if meter is not None:
        for c in checks:
            if hasattr(c, "use_meter"):
                c.use_meter(meter)
    wrappers = [c.coarse_around for c in checks if hasattr(c, "coarse_around")]
    if not wrappers:
        return meter, None

    @contextlib.contextmanager
    def around(side: int, stage: str) -> Any:
        with contextlib.ExitStack() as stack:
            for wrap in wrappers:
                stack.enter_context(wrap(ctx, side, stage))
            yield

    return meter, around


def investigate(model: Any, inputs: Any = (), options: RunOptions | Mapping[str, Any] | None = None, *,
                progress: Progress | None = None, cancel: threading.Event | None = None,
                on_partial: Callable[[Investigation], None] | None = None, **settings: Any) -> Investigation:
    """Run `model` on `inputs` on a device under capture and the requested checks.

    `options` (a `RunOptions`, or a mapping of settings) says which checks, where, in which dtype
    and against which reference (`"cpu:float32"`, or None; skipped when it would repeat the target
    run); any of its fields or check settings may also be given as keywords (`checks=("overflow",),
    dtype="float16", inf_nan_mode=False`), which override `options`; anything else is a TypeError. `inputs` is a tuple of positional inputs, a dict of keyword inputs,
    one tensor, or `live.tensors.Inputs(args, kwargs)`. `on_partial` receives a snapshot once
    the graph is captured and again after each check but the last, so an interface can show
    results as they come; `cancel` stops the run at the next operator.
    """
    opts = as_run_options(options, **settings)
    return run_live(model, inputs, opts, progress=progress, cancel=cancel, on_partial=on_partial)
