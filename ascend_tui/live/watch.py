"""`ascend_tui.watch(model)`: overflow and NaN detection inside the user's own loop, at low cost.

    with ascend_tui.watch(model) as w:
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            if w.step():                 # this step's findings: skip the update, as GradScaler does
                optimizer.zero_grad()
                continue
            optimizer.step()
            optimizer.zero_grad()
    print(w.bad_steps, w.saved)

Every module's output (but those of `BOUNDED` ones like ReLU, which cannot make a finite value
bad) and every parameter gradient is reduced on the device to its min and max (one `aminmax`,
which NaN and Inf reach, each); `step()` brings them all to
the host in one transfer, the step's only synchronization. On the first bad step the model is
re-run on that step's inputs under the coarse-to-fine capture (`live.coarse`: module level, then
operators around the first bad module; `detail="full"` records every operator), buffers and RNG
restored, so the run is undisturbed, and the investigation is saved for `ascend-tui open`. Call
`step()` before `optimizer.step()` so the re-run sees the parameters that produced the bad values.

Every step, good or bad, also leaves a few scalars in a bounded ring (`trend_steps` long): the
largest module-output max-abs and each module's, the gradients' max-abs and norm, the loss (given
to `step(loss=...)` or returned by the model as a 0-d tensor) and the time since the previous
`step()`; they travel in the same transfer. `w.trend` turns them into `StepSeries` and the saved
investigation carries them (`sections["trend"]`) for the app's trend view.
"""

from __future__ import annotations

import math
import time
import warnings
import weakref
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ascend_tui.checks.overflow import CHECK, num, range_of
from ascend_tui.evidence import Finding, RootCause, StepSeries
from ascend_tui.live.tensors import dtype_name, iter_tensors
from ascend_tui.live.step_trend import TREND_STEPS, StepTrend, grad_norm_tensor, scalar_loss

DEFAULT_SAVE = "ascend-tui-watch-step{step}.atui.json"
# Modules whose output is finite and no larger than their input when the input is: not measured, so
# the first appearance of a bad value is still caught by the module that made it, at less cost.
BOUNDED = frozenset("""ReLU ReLU6 Hardtanh Sigmoid Tanh Hardsigmoid Softmax Softmin Identity Flatten Unflatten
    MaxPool1d MaxPool2d MaxPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d""".split())


class Watch:
    """Context manager that watches a model's module outputs and gradients once per step.

    `bad_steps`: 0-based indices of steps with NaN, Inf or saturation; `findings`: every finding;
    `saved` / `investigation`: the re-run of the first bad step (when its inputs were seen).
    Options: `save` (a path, `{step}` filled in; False: no re-run), `dtype` (range to check when
    outputs carry none), `headroom_bits`, `grads` (check parameter gradients), `loss` (re-run the
    backward too), `inf_nan_mode` (override the device's answer), `detail` (the re-run's capture:
    "module", coarse-to-fine, or "full", every operator), `trend_steps` (length of the trend ring).
    """

    def __init__(
        self,
        model: Any,
        *,
        save: str | Path | bool = True,
        dtype: str | None = None,
        headroom_bits: float = 1.0,
        grads: bool = True,
        loss: Callable[[Any], Any] | None = None,
        inf_nan_mode: bool | None = None,
        detail: str = "module",
        trend_steps: int = TREND_STEPS,
    ) -> None:
        import torch

        if detail not in ("module", "full"):
            raise ValueError(f"detail must be 'module' or 'full', not {detail!r}")
        self._torch = torch
        self.model = model
        self.save = save
        self.headroom_bits = headroom_bits
        self.grads = grads
        self.loss = loss
        self.bad_steps: list[int] = []
        self.findings: list[Finding] = []
        self.saved: Path | None = None
        self.investigation: Any = None
        self.steps = 0
        self.detail = detail
        self._trend = StepTrend(trend_steps)
        self._clock: float | None = None
        self._model_loss: Any = None
        params = list(model.parameters())
        first = next((p for p in params if p.is_floating_point()), None)
        self._dtype = dtype or (dtype_name(first.dtype) if first is not None else "float32")
        self._params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self._names: list[str] = []
        self._classes: list[str] = []
        self._dtypes: list[Any] = []
        self._low: str | None = None
        self._values: list[Any] = []
        self._last: Any = _dead
        self._handles: list[Any] = []
        self._inputs: Any = None
        self._modes: CallState | None = None
        self._rng: Any = None
        self._warned: set[str] = set()
        self._device: Any = None
        self._inf_nan = inf_nan_mode
        self._paused = False
        self._backend = first.device.type if first is not None else "cpu"
        self._index = (first.device.index or 0) if first is not None else 0

    # -- hooks -----------------------------------------------------------------------------------

    def __enter__(self) -> Watch:
        for name, mod in self.model.named_modules():
            if type(mod).__name__ not in BOUNDED or mod is self.model:
                self._handles.append(mod.register_forward_hook(self._make_hook(name, type(mod).__name__)))
        self._handles.append(self.model.register_forward_pre_hook(self._remember, with_kwargs=True))
        self.device.clear_overflow_flag()
        self._clock = time.perf_counter()  # the first step's time runs from here
        return self

    def __exit__(self, *exc: Any) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        if self._values and exc[0] is None:
            self.step()

    def _make_hook(self, name: str, cls: str) -> Callable[..., None]:
        torch = self._torch

        root = name == ""

        def hook(_mod: Any, _args: Any, out: Any) -> None:
            if self._paused:
                return
            if root:
                self._model_loss = scalar_loss(out)
            for t in iter_tensors(out):
                if t is self._last() or not t.is_floating_point() or t.numel() == 0:
                    continue
                d = t.detach()
                try:
                    r = torch.aminmax(d)
                    self._values += (r.min, r.max)
                except RuntimeError:  # a backend without aminmax for this dtype: two reductions instead
                    self._values += (d.min(), d.max())
                self._names.append(name)
                self._classes.append(cls)
                self._dtypes.append(t.dtype)
                self._last = weakref.ref(t)  # a parent returning its child's output is not measured twice
        return hook

    def _remember(self, _mod: Any, args: Any, kwargs: Any) -> None:
        if self._paused:
            return
        self._inputs = (args, kwargs)
        self._modes = call_state(self._torch, self._backend, self.model)
        if self._backend in ("cpu", "cuda"):
            torch = self._torch
            cuda = torch.cuda.get_rng_state(self._index) if self._backend == "cuda" else None
            self._rng = (torch.get_rng_state(), cuda)

    @property
    def device(self) -> Any:
        """The ascend-tui `Device` the model lives on (for the NPU overflow flag and the re-run's report)."""
        if self._device is None:
            from ascend_tui.live.device import Device

            self._device = Device(self._backend, self._index)
        return self._device

    @property
    def dtype(self) -> str:
        """The dtype the range check uses: the first float16/bfloat16 output seen, else the parameters'."""
        return self._low or self._dtype

    # -- the per-step check ------------------------------------------------------------------------

    def step(self, inputs: Any = None, *, loss: Any = None) -> list[Finding]:
        """Check this step (one synchronization); its findings when it is bad (NaN, Inf, saturation), else [].

        Bad steps land in `bad_steps`; every finding, low-headroom warnings included, in `findings`.
        `loss` (a tensor or a number) goes into the trend; without it a 0-d tensor the model returned is used.
        """
        torch = self._torch
        step = self.steps
        self.steps += 1
        now = time.perf_counter()
        took, self._clock = (now - self._clock if self._clock is not None else math.nan), now
        grads = [(n, p.grad) for n, p in self._params if p.grad is not None] if self.grads else []
        parts = list(self._values)
        if grads:
            for _, g in grads:
                parts += torch.aminmax(g.detach())
            parts.append(grad_norm_tensor(torch, [g.detach() for _, g in grads]))
        loss = self._model_loss if loss is None else loss
        self._model_loss = None
        loss_on_device = isinstance(loss, torch.Tensor) and loss.numel() == 1
        if loss_on_device:  # into the same transfer, on the device the rest is on (a CPU loss: a copy, no sync)
            parts.append(loss.detach().reshape(()).to(parts[0].device) if parts else loss.detach().reshape(()))
        values = torch.stack([p.float() for p in parts]).cpu().tolist() if parts else []
        if loss_on_device:
            loss = values.pop()
        grad_norm = values.pop() if grads else math.nan
        device = self.device
        flag = device.read_overflow_flag()
        found = self._findings(step, values, [n for n, _ in grads], bool(flag))
        self._trend.add(step, self._names, values, len(grads), grad_norm, loss, took)
        self._values, self._names, self._classes, self._dtypes, self._last = [], [], [], [], _dead
        if flag is not None:
            device.clear_overflow_flag()
        self.findings += found
        if not any(f.severity == "error" for f in found):
            return []
        self.bad_steps.append(step)
        if len(self.bad_steps) == 1 and self.save is not False:
            self._rerun(step, inputs)
            self._clock = time.perf_counter()  # the next step's time leaves the re-run out
        return found

    @property
    def trend(self) -> list[StepSeries]:
        """The trend ring as series (see `live.step_trend.StepTrend.series`), the first bad module's first."""
        first_bad = next((f.module for f in self.findings if f.severity == "error" and f.check == CHECK
                          and not f.node.startswith("grad:") and f.node != "<device>"), None)
        return self._trend.series(first_bad)

    def _findings(self, step: int, values: list[float], grad_names: list[str], flag: bool) -> list[Finding]:
        out: list[Finding] = []
        inf_nan = self._inf_nan if self._inf_nan is not None else self.device.inf_nan_mode
        first: Finding | None = None
        n = len(self._names)
        for i, (name, cls, dt) in enumerate(zip(self._names, self._classes, self._dtypes)):
            mn, mx = values[2 * i], values[2 * i + 1]
            rng = range_of(dtype_name(dt))
            if rng is not None and rng.low_precision and self._low is None:
                self._low = rng.name
            label, node = _module(name), name or "<model>"
            if math.isnan(mn) or math.isnan(mx) or math.isinf(mn) or math.isinf(mx):
                kind = "nan" if math.isnan(mn) or math.isnan(mx) else "inf"
                if first is None:
                    first = Finding(CHECK, kind, "error", node, cls, name, i,
                                    f"step {step}: {_word(kind)} first appears in the output of {label} ({cls})",
                                    "introduced", {"step": step, "min": mn, "max": mx})
                    out.append(first)
                else:
                    out.append(Finding(CHECK, kind, "info", node, cls, name, i,
                                       f"step {step}: {_word(kind)} in {label} follows from {_module(first.module)}",
                                       "inherited",
                                       {"step": step}, RootCause(first.node, first.module, "first non-finite module")))
                continue
            peak = max(abs(mn), abs(mx))
            if rng is None or peak == 0:
                continue
            if not inf_nan and peak >= rng.max * (1 - 1e-6):
                out.append(Finding(CHECK, "saturation", "error", node, cls, name, i,
                                   f"step {step}: {label} ({cls}) sits at ±{num(rng.max)}, the {rng.name} max: "
                                   f"saturated", "introduced", {"step": step, "abs_max": peak}))
                continue
            headroom = math.log2(rng.max / peak)
            if headroom < self.headroom_bits and name not in self._warned and peak < rng.max:
                self._warned.add(name)
                out.append(Finding(CHECK, "overflow", "warning", node, cls, name, i,
                                   f"step {step}: {label} ({cls}) peaks at {num(peak)}, only {headroom:.2f} bits "
                                   f"below the {rng.name} max {num(rng.max)}", "introduced",
                                   {"step": step, "abs_max": peak, "headroom_bits": headroom}))
        gvals = values[2 * n:]
        bad_grads = [g for j, g in enumerate(grad_names)
                     if not (math.isfinite(gvals[2 * j]) and math.isfinite(gvals[2 * j + 1]))]
        if bad_grads:
            kind = "nan" if any(math.isnan(v) for v in gvals) else "inf"
            where = "the forward was finite" if first is None else f"after {_word(first.kind)} in the forward"
            out.append(Finding(CHECK, kind, "error" if first is None else "info", f"grad:{bad_grads[0]}", "grad",
                               bad_grads[0].rpartition(".")[0], n,
                               f"step {step}: {len(bad_grads)} parameter gradient(s) hold {_word(kind)}, first "
                               f"`{bad_grads[0]}` ({where})", "introduced" if first is None else "inherited",
                               {"step": step, "parameters": len(bad_grads)}))
        if flag and not any(f.kind == "saturation" for f in out):
            out.append(Finding(CHECK, "saturation", "error", "<device>", "overflow flag", "", -1,
                               f"step {step}: the NPU overflow flag was set (saturation mode clamps instead of "
                               f"giving Inf, so no module output shows it)", "introduced", {"step": step}))
        return out

    # -- the re-run with full capture ----------------------------------------------------------------

    def _rerun(self, step: int, inputs: Any) -> None:
        """Capture the bad step op by op on its inputs and save the investigation (a failure only warns)."""
        from ascend_tui.live.tensors import Inputs

        if inputs is None and self._inputs is not None:
            a, kw = self._inputs
            inputs = Inputs(tuple(a), dict(kw)) if a and kw else (kw if kw else a)
        if inputs is None:
            return
        try:
            inv = self._capture(step, inputs if isinstance(inputs, (tuple, list, dict, Inputs)) else (inputs,))
            path = Path(str(Path(DEFAULT_SAVE if self.save is True else str(self.save)).expanduser())
                        .replace("{step}", str(step)))
            inv.save(path)
        except Exception as exc:  # noqa: BLE001 - the user's loop must go on; the step's findings stand
            warnings.warn(f"ascend-tui: could not re-run step {step} under capture: {type(exc).__name__}: {exc}",
                          RuntimeWarning, stacklevel=3)
            return
        self.saved, self.investigation = path, inv

    def _capture(self, step: int, inputs: Any) -> Any:
        """The re-run itself, under the autocast state, grad mode and train/eval mode the step ran with, with the
        model's buffers and the RNG put back as they were."""
        from ascend_tui.investigation import Investigation, RunInfo
        from ascend_tui.live.context import LiveContext
        from ascend_tui.live.options import RunOptions
        from ascend_tui.live.overflow import OverflowCheck
        from ascend_tui.live.recording import capture

        torch = self._torch
        cuda = self._backend == "cuda"
        buffers = [(b, b.detach().clone()) for b in self.model.buffers()]
        rng_now = (torch.get_rng_state(), torch.cuda.get_rng_state(self._index) if cuda else None)
        self._paused = True
        try:
            if self._rng is not None:
                torch.set_rng_state(self._rng[0])
                if cuda:
                    torch.cuda.set_rng_state(self._rng[1], self._index)
            modes = self._modes or call_state(torch, self._backend, self.model)
            coarse = None
            if self.detail == "full":
                with modes.applied(self.model):
                    result = capture(self.model, inputs, phase_label=f"re-running step {step}", grad=modes.grad,
                                     autocast=(modes.device_type, modes.autocast_dtype) if modes.autocast else None)
            else:
                from ascend_tui.live.coarse import coarse_capture, saturation_limit

                cast = torch.autocast(device_type=modes.device_type, dtype=modes.autocast_dtype) \
                    if modes.autocast else nullcontext()
                with modes.applied(self.model), cast:
                    # no module histograms: this investigation keeps none (its overflow check reads none either)
                    coarse = coarse_capture(self.model, inputs, self.device, backward=self.loss is not None,
                                            loss=self.loss, saturation_limit=saturation_limit(self.dtype),
                                            histograms=False)
                result = coarse.result
            device = self.device
            info = device.info().to_json() if device.backend in ("cpu", "cuda", "npu") else \
                {"backend": device.backend, "name": device.backend, "inf_nan_mode": True}
            inv = Investigation(result.graph, stats=result.stats, run=RunInfo(
                target=type(self.model).__name__, device=info, checks=("overflow",), dtype=self.dtype,
                reference=None, source="watch", extra={"step": step, "rng_restored": self._rng is not None,
                                                       "modes": modes.describe()}))
            if coarse is not None:
                inv.run.extra["capture"] = coarse.describe()
            inv.sections["trend"] = [t.to_json() for t in self.trend]
            settings: dict[str, Any] = {"headroom_bits": self.headroom_bits, "overflow_evidence": False}
            if self._inf_nan is not None:
                settings["inf_nan_mode"] = self._inf_nan
            options = RunOptions(checks=("overflow",), reference=None, backward=self.loss is not None,
                                 loss=self.loss, settings=settings)
            ctx = LiveContext(options, device, getattr(torch, self.dtype, torch.float32), self.model, inputs,
                              self.model, inputs, target=result)
            ctx.coarse = coarse
            OverflowCheck().run(ctx, inv)
            return inv
        finally:
            self._paused = False
            with torch.no_grad():
                for b, saved in buffers:
                    b.copy_(saved)
            torch.set_rng_state(rng_now[0])
            if cuda:
                torch.cuda.set_rng_state(rng_now[1], self._index)


@dataclass(frozen=True, slots=True)
class CallState:
    """The modes a forward ran under: autocast (enabled, dtype) for the device, grad mode and train/eval."""

    device_type: str
    autocast: bool
    autocast_dtype: Any
    grad: bool
    training: bool

    @contextmanager
    def applied(self, model: Any) -> Iterator[None]:
        """Put the model in the train/eval mode the step ran in, and back afterwards (autocast and grad mode go to
        `recording`)."""
        was = bool(getattr(model, "training", False))
        if hasattr(model, "train"):
            model.train(self.training)
        try:
            yield
        finally:
            if hasattr(model, "train"):
                model.train(was)

    def describe(self) -> str:
        cast = f"autocast {dtype_name(self.autocast_dtype)}" if self.autocast else "no autocast"
        return f"{cast}, grad {'on' if self.grad else 'off'}, {'train' if self.training else 'eval'} mode"


def call_state(torch: Any, backend: str, model: Any) -> CallState:
    """The modes in force right now, for the device the model lives on."""
    device_type = backend if backend in ("cpu", "cuda", "npu", "xpu", "mps") else "cpu"
    try:
        enabled = bool(torch.is_autocast_enabled(device_type))
        dtype = torch.get_autocast_dtype(device_type)
    except (AttributeError, RuntimeError, TypeError):  # older torch or a backend autocast does not know
        enabled, dtype = False, None
    return CallState(device_type, enabled, dtype, bool(torch.is_grad_enabled()), bool(getattr(model, "training",
                                                                                                False)))


def _dead() -> None:
    """A weak reference to nothing."""
    return None


def _module(name: str) -> str:
    return f"`{name}`" if name else "the model"


def _word(kind: str) -> str:
    return {"nan": "NaN", "inf": "Inf"}.get(kind, kind)
