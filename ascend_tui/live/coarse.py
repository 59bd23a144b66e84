"""Coarse-to-fine capture: module-level evidence for the whole step, operators recorded only where it matters.

Pass 1 (`live.coarse_step.step_pass`, no dispatch mode at all) measures each module call's
outputs (and, with backward, the gradient that reaches each of them) through `BatchStats` and
brings the rows to the host together at the end of the pass; each measurement is an *event*,
numbered in the order it happened. `checks.suspects.first_bad_event` names the first event whose
values went bad (NaN, Inf, saturation, the NPU overflow flag). Pass 2 replays the same step —
same inputs, the RNG states saved before pass 1, buffers and gradients put back, the same grad
mode, autocast and train/eval mode — recording operators only in the *window* between the event
before that one and that one (every op that ran there, whichever module owns it), and
module-level nodes everywhere else (`attrs["detail"] == "module"`); a forward window's replay
stops where the window closes and takes the rest of the step from pass 1
(`live.coarse_merge.adopt_rest`). If the window's inputs are already bad (the bad value came
from code that ran before the event in front of it) the window widens to the enclosing
module's call and the step is replayed again.

The timing and memory checks add a `live.coarse_meter.Meter` to pass 1 (each forward module call's own time and
allocated bytes on its event) and name a whole module call as their suspect — the call that stands out against its
peers — with a window of its own, `(start, end)`: every operator of that call is recorded. The memory check also
wraps every pass in its guard mode (`live.memory_guard`: bad indices found and clamped everywhere, in every pass).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Sequence

from ascend_tui.live.capture import CaptureResult
from ascend_tui.live.coarse_merge import adopt_rest, first_bad, merged, result_of, widened, window_inputs_bad, zeroed
from ascend_tui.live.coarse_pass import FLAG_READS, MODULE, Event, StepRecorder
from ascend_tui.live.coarse_step import step_pass

if TYPE_CHECKING:
    from ascend_tui.live.device import Device

__all__ = ["MODULE", "CoarseCapture", "Event", "Side", "StepState", "coarse_capture", "saturation_limit", "step_pass"]


@dataclass(slots=True)
class StepState:
    """What a step changes that a replay must undo: RNG states, buffers (BatchNorm's running stats), `.grad`s."""

    device: Any
    rng: Any
    buffers: list[tuple[Any, Any]]
    grads: list[tuple[Any, Any]]

    @classmethod
    def save(cls, model: Any, device: Device) -> StepState:
        import torch

        buffers: list[tuple[Any, Any]] = []
        params: list[Any] = []
        if isinstance(model, torch.nn.Module):  # one walk for both (`buffers()` and `parameters()` would make two)
            seen: dict[int, None] = {}
            stack, walked = [model], {model: None}
            while stack:  # the order does not matter; `modules()`'s nested generators cost ~10 calls a module
                mod = stack.pop()
                for b in mod._buffers.values():
                    if b is not None and (i := id(b)) not in seen:
                        seen[i] = None
                        buffers.append((b, b.detach().clone()))
                for p in mod._parameters.values():
                    if p is not None and p.requires_grad and (i := id(p)) not in seen:
                        seen[i] = None
                        params.append(p)
                for child in mod._modules.values():
                    if child is not None and child not in walked:  # modules are hashable (`named_modules` needs it)
                        walked[child] = None
                        stack.append(child)
        else:
            buffers = [(b, b.detach().clone()) for b in model.buffers()] if hasattr(model, "buffers") else []
            params = [p for p in model.parameters() if p.requires_grad] if hasattr(model, "parameters") else []
        return cls(device, device.rng_state(), buffers, [(p, p.grad) for p in params])

    def restore(self, *, grads_cleared: bool = False) -> None:
        """Put the RNG and buffers back, and the `.grad`s (None when `grads_cleared`: a pass is about to run)."""
        import torch

        self.device.set_rng_state(self.rng)
        with torch.no_grad():
            for b, kept in self.buffers:
                b.copy_(kept)
        for p, g in self.grads:
            p.grad = None if grads_cleared else g


@dataclass(slots=True)
class CoarseCapture:
    """The capture a coarse-to-fine run ends with, and how it got there (for the report)."""

    result: CaptureResult
    recorder: StepRecorder
    window: tuple[int, int] | None
    passes: int
    flag_set: bool = False
    notes: list[str] = field(default_factory=list)
    reference: CaptureResult | None = None
    why: list[dict[str, Any]] = field(default_factory=list)  # the checks' reasons for their suspects
    meter: str = ""  # what the module pass's bytes are, when it measured them
    measured: tuple[str, ...] = ()  # what the module pass measured per forward call beside values: time, memory
    module_histograms: bool = True  # False: module-level histograms not sampled (no check of the run reads them)

    def describe(self) -> dict[str, Any]:
        """`run.extra["capture"]`: what was recorded operator by operator and what only per module."""
        ev = self.recorder.events
        data: dict[str, Any] = {"detail": "module", "passes": self.passes, "module_events": len(ev),
                                "operators": sum(1 for n in self.result.graph.nodes
                                                 if n.kind == "op" and not _is_module(n))}
        if self.window is not None:
            end = ev[self.window[1]]
            start = ev[self.window[0]] if self.window[0] >= 0 else None
            data["window"] = {"suspect": end.module or "<model>", "phase": end.phase,
                              "after": (start.module or "<model>") if start is not None else None,
                              "events": [self.window[0], self.window[1]],
                              "recorded_modules": sorted({e.module or "<model>" for e in ev[self.window[0] + 1:
                                                                                        self.window[1] + 1]})}
            if self.why:
                data["window"]["why"] = [dict(w) for w in self.why]
        if self.measured:
            data["module_level"] = {"calls": sum(1 for e in ev if e.phase == "forward"),
                                    "measured": list(self.measured), **({"bytes": self.meter} if self.meter else {})}
        if not self.module_histograms:
            data["module_histograms"] = False  # the app shows histograms of the recorded operators only
        if self.notes:
            data["notes"] = list(self.notes)
        return data


def _is_module(node: Any) -> bool:
    return bool(node.attrs) and node.attrs.get("detail") == MODULE


@dataclass(frozen=True, slots=True)
class Side:
    """One run a coarse-to-fine capture replays: the model, its inputs, its device and the observers of its window."""

    model: Any
    inputs: Any
    device: Device
    observers: Sequence[Any] = ()


def coarse_capture(model: Any, inputs: Any, device: Device, *, backward: bool = False,
                   loss: Callable[[Any], Any] | None = None, observers: Sequence[Any] = (),
                   saturation_limit: float | None = None, progress: Any = None, cancel: Any = None,
                   reference: Side | None = None, max_widen: int = 4,
                   suspects: Sequence[Callable[[list[Event]], int | tuple[int, int] | None]] = (),
                   on_target: Callable[[CaptureResult], None] | None = None, meter: Any = None,
                   around: Callable[[int, str], ContextManager[Any]] | None = None,
                   outliers: Sequence[Callable[[list[Event]], int | tuple[int, int] | None]] = (),
                   histograms: bool = True) -> CoarseCapture:
    """Pass 1 at module level (on the reference too, when given: a module whose float32 values leave the checked
    dtype's range is as suspect as one that went bad); if some event is, replay the step with operators recorded in
    its window (both runs, the same window). `suspects` are the checks' own verdicts on pass 1 (the precision
    check's first module out of band), each given the target's events after the reference's pass 1; `on_target`
    sees each target capture before the reference replays it (the precision check reads the target's graph). A
    suspect given as `(start, end)` is recorded from event `start` on (a whole module call). `outliers` (the timing and
    memory checks' call that stands out) are asked only when no suspect was found: a bad value outranks a slow or
    hungry module. `meter` measures pass 1
    of the target (`live.coarse_meter.Meter`); `around(side, stage)` is entered around each pass of side 0 (the
    target) or 1 (the reference), `stage` one of "module", "flag" (the pass that looks for the overflow flag) and
    "window" (a replay). `histograms`: sample module-level histograms (False when no check reads them: the window's
    operators get theirs either way)."""
    sides = [Side(model, inputs, device, observers)] + ([reference] if reference is not None else [])
    states = [StepState.save(s.model, s.device) for s in sides]
    passes = 1
    flag_set = False
    notes: list[str] = []
    first: list[tuple[StepRecorder, Any]] = []
    starts: dict[int, int] = {}  # a suspect event -> where its window starts, when not at the event before it

    def run(i: int, window: tuple[int, int] | None, **kw: Any) -> tuple[StepRecorder, Any]:
        side = sides[i]
        # A window in the forward is replayed up to where it closes (pass 1 measured the rest), recording only while
        # it is open.
        forward = window is not None and first[i][0].events[window[1]].phase == "forward"
        stage = "window" if window is not None else "flag" if "flag_device" in kw else "module"
        for lazy in ((True, False) if forward else (False,)):
            states[i].restore(grads_cleared=True)
            with (around(i, stage) if around is not None else contextlib.nullcontext()):
                rec = step_pass(side.model, side.inputs, window=window, backward=backward, loss=loss,
                                observers=side.observers, progress=progress if i == 0 else None,
                                cancel=cancel, forward_only=lazy, stop_after_window=lazy, histograms=histograms, **kw)
            if not lazy or adopt_rest(rec, first[i][0]):
                break
            notes.append("the replay's forward made other module calls than the module pass's: replayed whole")
        return rec, rec.finish_stats()

    try:
        if device.read_overflow_flag() is not None:
            device.clear_overflow_flag()
        recs = [run(0, None, phase_label="module pass", **({"meter": meter} if meter is not None else {}))]
        first[:] = recs
        if recs[0][0].unmeasured:
            notes.append(f"{recs[0][0].unmeasured} module outputs could not be measured: no statistics for them")
        flag_set = bool(device.read_overflow_flag())
        if on_target is not None:
            on_target(result_of(*recs[0]))
        if len(sides) > 1:
            recs.append(run(1, None, phase_label="module pass of the reference"))
            first.append(recs[1])
        bads = [first_bad(*recs[0], saturation_limit)]
        if len(recs) > 1 and len(recs[1][0].events) == len(recs[0][0].events):
            bads.append(first_bad(*recs[1], saturation_limit))
            bads.append(zeroed(recs[0], recs[1]))
        if all(b is None for b in bads) and flag_set:  # saturation mode: the flag says something overflowed, not where
            every = max(1, len(recs[0][0].events) // FLAG_READS)
            flagged, _ = run(0, None, flag_device=device, flag_every=every, phase_label="finding the overflow flag")
            passes += 1
            reads = flagged.flag_reads
            hit = next((k for k, (_, flag) in enumerate(reads) if flag), None)
            if hit is None or reads[hit][0] < 0:
                notes.append("the overflow flag was set outside every module call")
            else:  # the window: the events since the read before
                bads.append(reads[hit][0])
                starts[reads[hit][0]] = reads[hit - 1][0] if hit else -1
        for judges in (suspects, outliers):
            if judges is outliers and any(b is not None for b in bads):
                break
            for judge in judges:
                got = judge(recs[0][0].events)
                if isinstance(got, tuple):  # a whole call: its window starts where the call did
                    starts[got[1]] = min(got[0], starts.get(got[1], got[0]))
                    got = got[1]
                bads.append(got)
        bad = min((b for b in bads if b is not None), default=None)
        window = None if bad is None else (starts.get(bad, bad - 1), bad)
        for attempt in range(max_widen + 1):
            if window is None:
                break
            recs[0] = run(0, window, phase_label="recording the suspect module", module_stats=False)
            passes += 1
            if on_target is not None:
                on_target(result_of(*recs[0]))
            if window[0] < 0 or not window_inputs_bad(*recs[0]) or attempt == max_widen:
                break
            window = widened(recs[0][0].events, window)
        if window is not None and len(recs) > 1:
            recs[1] = run(1, window, phase_label="recording the suspect module in the reference", module_stats=False)
        results = [result_of(r, st) if r is f[0] else merged(f, (r, st)) for (r, st), f in zip(recs, first)]
        out = CoarseCapture(results[0], recs[0][0], window, passes, flag_set, notes,
                            meter=meter.source if meter is not None and meter.nbytes else "",
                            measured=() if meter is None else tuple(
                                m for m, on in (("time", meter.seconds), ("memory", meter.nbytes)) if on),
                            module_histograms=histograms)
        out.reference = results[1] if len(results) > 1 else None
        return out
    finally:
        for state in states:
            state.restore()


def saturation_limit(dtype: Any) -> float | None:
    """The largest finite magnitude of the dtype the check judges: a module output there has saturated (a device in
    saturation mode clamps to it) or, in a wider run dtype, would overflow the checked one."""
    from ascend_tui.checks.overflow import range_of
    from ascend_tui.live.tensors import dtype_name

    rng = range_of(dtype if isinstance(dtype, str) else dtype_name(dtype))
    return rng.max if rng is not None else None
