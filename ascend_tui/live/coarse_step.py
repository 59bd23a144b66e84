"""One pass of a coarse-to-fine capture (`live.coarse`): the step run under a `StepRecorder` (`live.coarse_pass`),
with the module wrappers alone (the module pass) or a dispatch mode for the window's operators (a replay)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from ascend_tui.live.coarse_pass import StepRecorder
from ascend_tui.live.coarse_window import WindowClosed, lazy_window_mode, window_mode
from ascend_tui.live.frames import stop_at
from ascend_tui.live.tensors import call_model
from ascend_tui.progress import frozen_gc

if TYPE_CHECKING:
    from ascend_tui.live.device import Device


def step_pass(model: Any, inputs: Any, *, window: tuple[int, int] | None, backward: bool = False,
              loss: Callable[[Any], Any] | None = None, observers: Sequence[Any] = (), progress: Any = None,
              cancel: Any = None, flag_device: Device | None = None, phase_label: str = "capturing",
              module_stats: bool = True, forward_only: bool = False,
              stop_after_window: bool = False, flag_every: int = 1, meter: Any = None,
              histograms: bool = True) -> StepRecorder:
    """One run of the step (forward, and backward when asked) under a `StepRecorder`; a dispatch mode only when there
    is a window to record operators in. `forward_only`: a window in the forward, replayed without the backward (in the
    same grad mode), the dispatch mode entered when the window opens and left when it closes; `stop_after_window`: and
    stopped there (`rec.stopped`; `adopt_rest` gives it the rest of the step from the module pass); `meter`: each
    forward module call's time and bytes on its event (`live.coarse_meter`); `histograms`: sample module-level
    histograms too (the window's operators always get theirs)."""
    from ascend_tui.live.overflow import default_loss

    rec = StepRecorder(model, inputs, window=window, grads=backward and not forward_only, flag_device=flag_device, progress=progress,
                       cancel=cancel, phase_label=phase_label, source=window is not None, module_stats=module_stats,
                       histograms=histograms)
    rec.flag_every = flag_every
    rec.meter = meter

    def body(run_backward: bool) -> None:
        run_step(rec, model, inputs, loss or default_loss if backward and run_backward else None)

    if flag_device is not None:
        flag_device.clear_overflow_flag()
    try:
        _run_pass(rec, model, body, window, backward, forward_only, stop_after_window, observers)
    finally:
        rec.remove_grad_hooks()
    if flag_device is not None:  # what the last batch of events set
        rec.read_flag(len(rec.events) - 1)
    if backward and not forward_only and hasattr(model, "named_parameters"):
        rec.param_grads(model)
    return rec


def _run_pass(rec: StepRecorder, model: Any, body: Callable[[bool], None], window: tuple[int, int] | None,
              backward: bool, forward_only: bool, stop_after_window: bool, observers: Sequence[Any]) -> None:
    """`body` under what the pass needs: the module wrappers alone (pass 1), or a dispatch mode for the window."""
    import torch

    from ascend_tui.live.recording import recording

    if window is None:  # pass 1: no dispatch mode at all
        from ascend_tui.live.recording import overrides

        rec.taps = [o.output for o in observers if overrides(o, "output")]
        handles = rec.attribute_modules(model) if hasattr(model, "named_modules") else []
        try:
            with frozen_gc(), torch.set_grad_enabled(backward):
                body(True)
        finally:
            for h in handles:
                h.remove()
    elif forward_only:  # the dispatch mode pushed only while the window is open
        rec.stop_after_window = stop_after_window
        with recording(model, rec, observers, grad=backward, mode_class=lazy_window_mode) as mode:
            rec.mode = mode
            try:
                if rec.active:
                    rec.mode_on()
                body(False)
            except WindowClosed:
                rec.stopped = True
            finally:
                rec.mode_off()
    else:
        with recording(model, rec, observers, grad=backward, mode_class=window_mode):
            body(True)


def run_step(rec: StepRecorder, model: Any, inputs: Any, loss: Callable[[Any], Any] | None) -> None:
    """The model's forward, then (with a `loss`) its backward: the outer end of every source stack of a recorded step,
    so that gradient ops, run from `value.backward()` here, never name the code that started the investigation."""
    rec.outputs = call_model(model, inputs)
    if loss is not None:
        value = loss(rec.outputs)
        rec.phase = "backward"
        rec.module_stack.clear()
        value.backward()
        rec.module_stack.clear()


stop_at(run_step)
