"""One recorded run: a `Recorder` plus the observers the checks declared, on one dispatch mode.

`recording(model, recorder, observers)` owns everything around a run — module attribution, grad
mode, autocast, cleanup — so no check writes "install hooks / try / call the model / finally
remove them" again. Observers see every aten call: `before` it runs (and may swap the
arguments it runs on, as the sanitizer does to clamp a bad index), right after it `ran`
(before anything else touches the device, as the NPU overflow flag needs), `after` it was
recorded as a node, and every tensor the recorder measures (`output`, placeholders included).
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, Sequence

from ascend_tui.live.aten import overload_facts
from ascend_tui.live.capture import CaptureResult, Recorder, call_model
from ascend_tui.progress import Progress, frozen_gc


@dataclass(slots=True)
class Call:
    """One aten call as observers see it: what the model passed, and what will actually run."""

    recorder: Recorder
    func: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    run_args: tuple[Any, ...]
    run_kwargs: dict[str, Any]


class Observer(Protocol):
    """Watches every aten call of one recorded run; `Watcher` gives no-op defaults."""

    def before(self, call: Call) -> None: ...

    def ran(self, call: Call, out: Any) -> None: ...

    def after(self, call: Call, node: str, out: Any) -> None: ...

    def output(self, node: str, slot: int, tensor: Any) -> None: ...


class Watcher:
    """An observer that does nothing; subclasses override only the hooks they need."""

    def before(self, call: Call) -> None:
        """Called before the op runs; may replace `call.run_args` / `call.run_kwargs`."""

    def ran(self, call: Call, out: Any) -> None:
        """Called right after the op ran, before it is recorded or measured."""

    def after(self, call: Call, node: str, out: Any) -> None:
        """Called once the op is a node of the graph."""

    def output(self, node: str, slot: int, tensor: Any) -> None:
        """Called for every tensor the recorder measures (op outputs and placeholders)."""


def overrides(observer: Any, hook: str) -> bool:
    """Whether `observer` defines its own `hook` (the mode skips no-op defaults)."""
    return getattr(type(observer), hook, None) is not getattr(Watcher, hook)


@functools.cache
def _mode_class() -> type:
    from torch.utils._python_dispatch import TorchDispatchMode

    class RecordingMode(TorchDispatchMode):
        """Records every aten call into a `Recorder`, calling each observer's hooks around it."""

        def __init__(self, recorder: Recorder, observers: Sequence[Any]) -> None:
            super().__init__()
            self.recorder = recorder
            self.befores = [o.before for o in observers if overrides(o, "before")]
            self.rans = [o.ran for o in observers if overrides(o, "ran")]
            self.afters = [o.after for o in observers if overrides(o, "after")]
            self.plain = not (self.befores or self.rans or self.afters)

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            rec = self.recorder
            if overload_facts(func).writes:
                rec.before(func, args, kwargs)
            if self.plain:
                out = func(*args, **kwargs)
                rec.record(func, args, kwargs, out)
                return out
            call = Call(rec, func, args, kwargs, args, kwargs)
            for hook in self.befores:
                hook(call)
            out = func(*call.run_args, **call.run_kwargs)
            for hook in self.rans:
                hook(call, out)
            node = rec.record(func, args, kwargs, out)
            for hook in self.afters:
                hook(call, node, out)
            return out

    return RecordingMode


_NOT_APIS = frozenset({"backward", "__get__", "__set__", "__repr__", "__format__", "__len__", "__bool__", "__index__"})


def _api_mode_class() -> type:
    from torch.overrides import TorchFunctionMode

    class ApiMode(TorchFunctionMode):
        """Tells the recorder which framework API call (outermost only) the next aten ops belong to."""

        def __init__(self, recorder: Recorder) -> None:
            super().__init__()
            self.recorder = recorder

        def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            name = getattr(func, "__name__", None)
            if name is None or name in _NOT_APIS:
                return func(*args, **(kwargs or {}))
            rec = self.recorder
            rec.enter_api(name)
            try:
                return func(*args, **(kwargs or {}))
            finally:
                rec.leave_api()

    return ApiMode


@contextlib.contextmanager
def recording(model: Any, recorder: Recorder, observers: Sequence[Any] = (), *, grad: bool = False,
              autocast: Any = None, mode_class: Callable[[type], type] | None = None) -> Iterator[Any]:
    """Record everything `model` runs inside the block; hooks are removed and modes left whatever happens.

    `autocast` is None (leave the caller's autocast state alone) or an `(device_type, dtype)`
    pair to run under `torch.autocast`. A recorder made with `api_ids=True` also names each
    op's framework API call (`attrs["api"]`, msprobe's ids) through a `TorchFunctionMode`; that
    costs ~15 us per call and turns off torch's fused fast paths (nn.MultiheadAttention's), so
    it is off unless asked. `mode_class` derives the dispatch mode from `RecordingMode` (coarse
    capture's records only inside its window).
    """
    import torch

    recorder.taps = [o.output for o in observers if overrides(o, "output")]
    handles = recorder.attribute_modules(model) if hasattr(model, "named_modules") else []
    base = _mode_class()
    mode = (mode_class(base) if mode_class is not None else base)(recorder, observers)
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(frozen_gc())
            stack.enter_context(torch.set_grad_enabled(grad))
            if autocast is not None:
                stack.enter_context(torch.autocast(device_type=autocast[0], dtype=autocast[1]))
            if recorder.want_api:
                stack.enter_context(_api_mode_class()(recorder))
            stack.enter_context(mode)
            yield mode
    finally:
        for h in handles:
            h.remove()


def capture(
    model: Any,
    inputs: Any,
    *,
    observers: Sequence[Any] = (),
    stats: bool = True,
    source: bool = True,
    progress: Progress | None = None,
    cancel: Any = None,
    phase_label: str = "capturing",
    expected_ops: int | None = None,
    grad: bool = False,
    autocast: Any = None,
    api_ids: bool = False,
    recorder_class: Callable[..., Recorder] | None = None,
) -> CaptureResult:
    """Run `model` on `inputs` once under capture (and `observers`) and return the graph of what executed."""
    recorder = (recorder_class or Recorder)(model, inputs, stats=stats, source=source, progress=progress,
                                            cancel=cancel, phase_label=phase_label, expected_ops=expected_ops,
                                            api_ids=api_ids)
    with recording(model, recorder, observers, grad=grad, autocast=autocast):
        outputs = call_model(model, inputs)
    table = recorder.finish_stats()
    if progress is not None:
        progress(phase_label, recorder.op_count, recorder.op_count)
    return CaptureResult(recorder.graph, table, outputs, recorder.op_count, recorder=recorder,
                         histograms=recorder.finish_histograms())
