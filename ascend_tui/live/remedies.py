"""Typed remedies a fix run applies without editing the user's code, and the measured outcome of a run with them.

A `Remedy` is data (what to change, on which module); `applied` installs it on a model as forward
hooks (so it survives the runner's deep copy and cast of the model) and removes it afterwards.
`Trial` runs the model in the target dtype with a set of remedies and measures the outputs against
the float32 reference: Inf/NaN count, cosine, relative error, time per step and peak memory.
"""

from __future__ import annotations

import contextlib
import functools
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

REMEDY_KINDS = ("float32", "upcast", "normalize", "clamp", "layout")
SEMANTIC = frozenset({"normalize", "clamp"})
"""Remedies that change what the model computes (not only how precisely): the reference gets them too."""


@dataclass(frozen=True, slots=True)
class Remedy:
    """One change: keep `module` in float32, upcast its accumulations, normalise an input, clamp an index, or drop
    the copy of a permute/transpose + contiguous() pair (`layout`)."""

    kind: str
    module: str = ""  # dotted path as `named_modules()` spells it; "" is the whole model
    argument: int = 0  # the positional input a `normalize` or `clamp` acts on
    low: int = 0  # clamp: the valid range is [low, high)
    high: int = 0
    mean: tuple[float, ...] = ()  # normalize: per-feature statistics measured on the input (last dimension)
    std: tuple[float, ...] = ()
    reason: str = field(default="", compare=False)  # the finding it answers (not part of what the remedy is)

    @property
    def semantic(self) -> bool:
        """Whether it changes what the model computes, so the reference must get it too."""
        return self.kind in SEMANTIC

    def describe(self) -> str:
        """`head` in float32, input 0 normalised, ... — how the report names it."""
        where = f"`{self.module}`" if self.module else "the whole model"
        if self.kind == "float32":
            return f"{where} in float32"
        if self.kind == "upcast":
            return f"accumulations (softmax, norms, sums) of {where} in float32"
        if self.kind == "normalize":
            return f"input {self.argument} normalised with its measured mean/std ({len(self.mean)} features)"
        if self.kind == "layout":
            return f"the permute/transpose + contiguous() copies in {where} dropped"
        return f"the index into {where} clamped to [{self.low}, {self.high - 1}]"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "module": self.module, "description": self.describe()}
        if self.kind in ("normalize", "clamp"):
            out["argument"] = self.argument
        if self.kind == "clamp":
            out.update(low=self.low, high=self.high)
        if self.kind == "normalize":
            out.update(mean=list(self.mean), std=list(self.std))
        if self.reason:
            out["reason"] = self.reason
        return out


def float32_set(modules: Sequence[str], reason: str = "") -> tuple[Remedy, ...]:
    """One float32 remedy per module."""
    return tuple(Remedy("float32", m, reason=reason) for m in modules)


# -- the hooks ------------------------------------------------------------------------------------------

def _floating(x: Any) -> bool:
    import torch

    return isinstance(x, torch.Tensor) and x.is_floating_point()


def _map(fn: Any, value: Any) -> Any:
    from torch.utils._pytree import tree_map

    return tree_map(fn, value)


def _first_float_dtype(value: Any) -> Any:
    from torch.utils._pytree import tree_flatten

    return next((x.dtype for x in tree_flatten(value)[0] if _floating(x)), None)


def _cast_back(x: Any, dtype: Any) -> Any:
    """`x` in `dtype` when its finite values fit there; otherwise left in float32 (casting would make Inf)."""
    import torch

    if not _floating(x) or dtype is None or x.dtype == dtype:
        return x
    y = x.to(dtype)
    inf = torch.isinf(y)
    if bool(inf.any()) and int(inf.sum()) > int(torch.isinf(x).sum()):  # a finite value past the dtype's range
        return x
    return y


def _float32_pre(module: Any, args: Any, kwargs: Any) -> Any:
    import torch

    stack = module.__dict__.setdefault("_ascend_fix_stack", [])
    dtype = _first_float_dtype((args, kwargs))
    device = next((t.device.type for t in _leaves((args, kwargs)) if isinstance(t, torch.Tensor)), "cpu")
    ctx = torch.autocast(device_type=device, enabled=False)
    ctx.__enter__()
    stack.append((dtype, ctx))
    module.float()  # parameters and buffers (a no-op after the first call)
    return _map(_to_float32, args), _map(_to_float32, kwargs)


def _to_float32(x: Any) -> Any:
    import torch

    return x.to(torch.float32) if _floating(x) and x.dtype != torch.float32 else x


def _leaves(value: Any) -> list[Any]:
    from torch.utils._pytree import tree_flatten

    return tree_flatten(value)[0]


def _float32_post(module: Any, args: Any, kwargs: Any, output: Any) -> Any:
    stack = module.__dict__.get("_ascend_fix_stack") or []
    if not stack:
        return output
    dtype, ctx = stack.pop()
    ctx.__exit__(None, None, None)
    return _map(lambda x: _cast_back(x, dtype), output)


ACCUMULATING = ("softmax", "log_softmax", "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm",
                 "mean", "sum", "var", "std", "var_mean", "norm", "logsumexp", "cumsum", "prod")


def _upcast_mode() -> Any:
    """A torch function mode that runs accumulating functions in float32 and casts their results back."""
    import torch
    from torch.overrides import TorchFunctionMode

    class Upcast(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name not in ACCUMULATING:
                return func(*args, **kwargs)
            dtype = _first_float_dtype((args, kwargs))
            if dtype is None or dtype == torch.float32 or dtype == torch.float64:
                return func(*args, **kwargs)
            kwargs = {k: v for k, v in kwargs.items() if k != "dtype"}
            out = func(*_map(_to_float32, args), **_map(_to_float32, kwargs))
            return _map(lambda x: _cast_back(x, dtype), out)

    return Upcast()


def _upcast_pre(module: Any, args: Any, kwargs: Any) -> None:
    mode = _upcast_mode()
    mode.__enter__()
    module.__dict__.setdefault("_ascend_upcast_stack", []).append(mode)


def _upcast_post(module: Any, args: Any, kwargs: Any, output: Any) -> None:
    stack = module.__dict__.get("_ascend_upcast_stack") or []
    if stack:
        stack.pop().__exit__(None, None, None)


def _normalize_pre(argument: int, mean: tuple[float, ...], std: tuple[float, ...], module: Any, args: Any,
                   kwargs: Any) -> Any:
    import torch

    if argument >= len(args) or not _floating(args[argument]):
        return None
    x = args[argument]
    m = torch.tensor(mean, dtype=torch.float32, device=x.device)
    s = torch.tensor(std, dtype=torch.float32, device=x.device)
    y = ((x.float() - m) / s).to(x.dtype)
    return (*args[:argument], y, *args[argument + 1:]), kwargs


def _clamp_pre(argument: int, low: int, high: int, module: Any, args: Any, kwargs: Any) -> Any:
    import torch

    ints = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and not a.is_floating_point()
            and a.dtype != torch.bool]
    if not ints:
        return None
    i = argument if argument in ints else ints[0]
    fixed = args[i].clamp(low, high - 1)
    return (*args[:i], fixed, *args[i + 1:]), kwargs


def submodule(model: Any, path: str) -> Any:
    """The module at dotted `path` (`layer2.0.norm`), the model itself for ""; `LookupError` when absent."""
    if not path:
        return model
    try:
        return model.get_submodule(path)
    except AttributeError:
        raise LookupError(f"the model has no module `{path}`") from None


def install(model: Any, remedies: Sequence[Remedy]) -> list[Any]:
    """Register each remedy's hooks on `model` (an `nn.Module`); the handles to remove them."""
    handles: list[Any] = []
    for r in remedies:
        mod = submodule(model, r.module)
        if r.kind == "float32":
            handles.append(mod.register_forward_pre_hook(_float32_pre, with_kwargs=True))
            handles.append(mod.register_forward_hook(_float32_post, with_kwargs=True, always_call=True))
        elif r.kind == "upcast":
            handles.append(mod.register_forward_pre_hook(_upcast_pre, with_kwargs=True))
            handles.append(mod.register_forward_hook(_upcast_post, with_kwargs=True, always_call=True))
        elif r.kind == "layout":
            from ascend_tui.live.layout_mode import layout_post, layout_pre

            handles.append(mod.register_forward_pre_hook(layout_pre, with_kwargs=True))
            handles.append(mod.register_forward_hook(layout_post, with_kwargs=True, always_call=True))
        elif r.kind == "normalize":
            hook = functools.partial(_normalize_pre, r.argument, r.mean, r.std)
            handles.append(mod.register_forward_pre_hook(hook, with_kwargs=True, prepend=True))
        elif r.kind == "clamp":
            hook = functools.partial(_clamp_pre, r.argument, r.low, r.high)
            handles.append(mod.register_forward_pre_hook(hook, with_kwargs=True, prepend=True))
        else:
            raise ValueError(f"unknown remedy kind {r.kind!r} (one of {', '.join(REMEDY_KINDS)})")
    return handles


@contextlib.contextmanager
def applied(model: Any, remedies: Sequence[Remedy]) -> Iterator[Any]:
    """`model` with the remedies' hooks installed for the duration of the block."""
    handles = install(model, remedies)
    try:
        yield model
    finally:
        for h in handles:
            h.remove()


# -- running and measuring ------------------------------------------------------------------------------

def call(model: Any, inputs: Any) -> Any:
    """`model(*args, **kwargs)` for a tuple, a dict, one value or an `Inputs(args, kwargs)`."""
    if hasattr(inputs, "args") and hasattr(inputs, "kwargs"):
        return model(*inputs.args, **inputs.kwargs)
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def output_tensors(output: Any) -> list[Any]:
    """The floating tensors of a model's output (a tensor, tuple, dict or a transformers ModelOutput)."""
    if hasattr(output, "to_tuple") and callable(output.to_tuple):
        output = output.to_tuple()
    return [t for t in _leaves(output) if _floating(t)]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one run with a set of remedies gave, against the float32 reference."""

    remedies: tuple[Remedy, ...]
    inf_count: int = 0
    nan_count: int = 0
    cosine: float = math.nan
    rel_error: float = math.nan
    step_s: float = math.nan
    peak_bytes: int | None = None
    error: str = ""  # the run failed: why
    reference_bad: int = 0  # Inf/NaN in the reference outputs themselves

    def within(self, tolerance: float) -> bool:
        """No run error, no Inf/NaN, and the output cosine at least `tolerance`."""
        return (not self.error and self.inf_count == 0 and self.nan_count == 0 and not self.reference_bad
                and math.isfinite(self.cosine) and self.cosine >= tolerance)

    def to_json(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {"remedies": [r.to_json() for r in self.remedies], "inf_count": self.inf_count,
                "nan_count": self.nan_count, "cosine": num(self.cosine), "relative_error": num(self.rel_error),
                "step_seconds": num(self.step_s), "peak_bytes": self.peak_bytes, "error": self.error or None,
                "reference_inf_nan": self.reference_bad}


def compare(outputs: Sequence[Any], reference: Sequence[Any]) -> tuple[int, int, float, float]:
    """(Inf count, NaN count, cosine, relative error) of the outputs against the reference, as one vector."""
    import torch

    if not outputs or len(outputs) != len(reference):
        return 0, 0, math.nan, math.nan
    a = torch.cat([t.detach().reshape(-1).to("cpu", torch.float64) for t in outputs])
    b = torch.cat([t.detach().reshape(-1).to("cpu", torch.float64) for t in reference])
    if a.numel() != b.numel():
        return 0, 0, math.nan, math.nan
    inf, nan = int(torch.isinf(a).sum()), int(torch.isnan(a).sum())
    if inf or nan or not bool(torch.isfinite(b).all()):
        return inf, nan, math.nan, math.nan
    na, nb = float(a.norm()), float(b.norm())
    cosine = 1.0 if na == nb == 0.0 else (float(a @ b) / (na * nb) if na and nb else 0.0)
    rel = float((a - b).norm()) / nb if nb else (0.0 if na == 0.0 else math.inf)
    return inf, nan, cosine, rel


@dataclass
class Trial:
    """The model, its inputs and where/in which dtype it runs; `measure` counts every re-run it makes."""

    model: Any
    inputs: Any
    device: Any  # a live.device.Device
    dtype: Any  # torch dtype of the target run
    steps: int = 3
    runs: int = 0
    cancel: Any = None  # a threading.Event: set, the next re-run raises `Cancelled`
    progress: Any = None  # a `Progress`: told of every re-run
    _refs: dict[tuple[Remedy, ...], Any] = field(default_factory=dict)
    _cache: dict[frozenset[Remedy], Outcome] = field(default_factory=dict)

    def _prepared(self, device: Any, dtype: Any) -> tuple[Any, Any]:
        from ascend_tui.live.context import prepare

        return prepare(self.model, self.inputs, device, dtype, copy_model=True)

    def reference(self, remedies: Sequence[Remedy]) -> tuple[list[Any] | None, str]:
        """The float32 reference outputs (on the CPU) with the semantic remedies applied; or (None, why)."""
        import torch

        from ascend_tui.live.device import select

        key = tuple(r for r in remedies if r.semantic)
        if key not in self._refs:
            model, inputs = self._prepared(select("cpu"), torch.float32)
            try:
                with applied(model, key), torch.no_grad():
                    self._refs[key] = ([t.clone() for t in output_tensors(call(model, inputs))], "")
            except Exception as exc:  # noqa: BLE001 - the user's model failing is an outcome to report
                self._refs[key] = (None, _one_line(exc))
        return self._refs[key]

    def measure(self, remedies: Sequence[Remedy]) -> Outcome:
        """Run the model in the target dtype with `remedies` (cached per set) and compare with the reference."""
        key = frozenset(remedies)
        if key in self._cache:
            return self._cache[key]
        remedies = tuple(remedies)
        if self.cancel is not None and self.cancel.is_set():
            from ascend_tui.errors import Cancelled

            raise Cancelled("fix cancelled")
        ref, why = self.reference(remedies)
        self.runs += 1
        if self.progress is not None:
            self.progress(f"fix: re-run {self.runs} ({' + '.join(r.describe() for r in remedies) or 'as it is'})",
                          0, None)
        outcome = self._run(remedies, ref) if ref is not None else Outcome(remedies, error=f"the float32 reference "
                                                                                         f"run failed: {why}")
        self._cache[key] = outcome
        return outcome

    def _run(self, remedies: tuple[Remedy, ...], ref: list[Any]) -> Outcome:
        import torch

        model, inputs = self._prepared(self.device, self.dtype)
        try:
            with applied(model, remedies), torch.no_grad():
                out = output_tensors(call(model, inputs))  # the warm-up run is the one compared
                times = []
                peak = _reset_peak(self.device)
                for _ in range(self.steps):
                    start = time.perf_counter()
                    call(model, inputs)
                    self.device.synchronize()
                    times.append(time.perf_counter() - start)
                peak = _read_peak(self.device) if peak else None
        except LookupError as exc:
            return Outcome(remedies, error=str(exc))
        except Exception as exc:  # noqa: BLE001
            return Outcome(remedies, error=_one_line(exc))
        inf, nan, cosine, rel = compare(out, ref)
        bad = sum(int((~torch.isfinite(t)).sum()) for t in ref)
        return Outcome(remedies, inf, nan, cosine, rel, statistics.median(times), peak, reference_bad=bad)


    def outputs(self, remedies: Sequence[Remedy]) -> list[Any]:
        """The floating outputs (on the CPU) of one run in the target dtype with `remedies` (a counted re-run)."""
        import torch

        self.runs += 1
        model, inputs = self._prepared(self.device, self.dtype)
        with applied(model, remedies), torch.no_grad():
            return [t.detach().to("cpu").clone() for t in output_tensors(call(model, inputs))]

    def step_times(self, sets: Sequence[Sequence[Remedy]], steps: int) -> list[list[float]]:
        """Seconds per step of each set of remedies, the sets run in turn each step (drift hits all alike)."""
        import torch

        models = [self._prepared(self.device, self.dtype) for _ in sets]
        self.runs += len(sets)  # one timed re-run per set (its steps interleaved with the others')
        times: list[list[float]] = [[] for _ in sets]
        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.no_grad())
            for (model, _), remedies in zip(models, sets):
                stack.enter_context(applied(model, remedies))
            for model, inputs in models:  # warm-up
                call(model, inputs)
            for _ in range(steps):
                if self.cancel is not None and self.cancel.is_set():
                    from ascend_tui.errors import Cancelled

                    raise Cancelled("fix cancelled")
                for k, (model, inputs) in enumerate(models):
                    start = time.perf_counter()
                    call(model, inputs)
                    self.device.synchronize()
                    times[k].append(time.perf_counter() - start)
        return times


def _one_line(exc: BaseException) -> str:
    """`IndexError: index out of range in self`: the exception's type and first line."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def _reset_peak(device: Any) -> bool:
    """Reset the device's peak-memory counter; False where the backend has none (the CPU)."""
    import torch

    if device.backend == "cuda":
        torch.cuda.reset_peak_memory_stats(device.index)
        return True
    if device.backend == "npu":
        torch.npu.reset_peak_memory_stats(device.index)  # type: ignore[attr-defined]
        return True
    return False


def _read_peak(device: Any) -> int | None:
    import torch

    if device.backend == "cuda":
        return int(torch.cuda.max_memory_allocated(device.index))
    if device.backend == "npu":
        return int(torch.npu.max_memory_allocated(device.index))  # type: ignore[attr-defined]
    return None


def measured_normalisation(inputs: Any, argument: int = 0) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """Per-feature (last dimension) mean and std of positional input `argument`, or None if it is not floating."""
    import torch

    args = inputs.args if hasattr(inputs, "args") else inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    if argument >= len(args) or not _floating(args[argument]):
        return None
    x = args[argument].detach().to("cpu", torch.float64)
    flat = x.reshape(-1, x.shape[-1]) if x.dim() > 1 else x.reshape(-1, 1)
    mean = flat.mean(dim=0)
    std = flat.std(dim=0, unbiased=False).clamp_min(1e-6) if flat.shape[0] > 1 else flat.abs().clamp_min(1.0)
    return tuple(round(float(v), 6) for v in mean), tuple(round(float(v), 6) for v in std)

