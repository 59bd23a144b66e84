"""The light per-step trend `watch()` keeps: a bounded ring of a few scalars per step, turned into `StepSeries`.

Every value comes from the host copy of the step's one transfer (`Watch.step`): nothing here
touches the device but `grad_norm_tensor`, which queues one more reduction into that transfer.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ascend_tui.evidence import StepSeries

TREND_STEPS = 256  # steps the trend ring keeps
TREND_MODULES = 16  # modules whose own max-abs series the trend carries (the first bad one, then the largest)


@dataclass(frozen=True, slots=True)
class StepPoint:
    """One step's scalars in the trend ring (None where the step had none: no gradients, no loss; NaN is a NaN the
    step made); `modules` is shared between steps whose measured modules did not change."""

    step: int
    max_abs: float | None
    grad_max_abs: float | None
    grad_norm: float | None
    loss: float | None
    seconds: float | None
    modules: tuple[str, ...]
    module_max_abs: tuple[float, ...]


def present(ring: list[StepPoint], value: Callable[[StepPoint], float | None]) -> list[tuple[StepPoint, float]]:
    """(point, value) for the points that have the value."""
    return [(p, v) for p in ring if (v := value(p)) is not None]


def _peak(mn: float, mx: float) -> float:
    """max(|min|, |max|), NaN when either is NaN."""
    return math.nan if math.isnan(mn) or math.isnan(mx) else max(abs(mn), abs(mx))


def _nanmax(values: list[float]) -> float | None:
    """The largest value, NaN when any is NaN (a NaN step must show in the trend), None for none."""
    if not values:
        return None
    if any(math.isnan(v) for v in values):
        return math.nan
    return max(values)


def _rank(v: float) -> float:
    return math.inf if math.isnan(v) or math.isinf(v) else v


def grad_norm_tensor(torch: Any, grads: list[Any]) -> Any:
    """The norm of all gradients together, as a 0-d tensor on the device (one foreach kernel, no sync)."""
    try:
        norms = torch._foreach_norm(grads)
    except (AttributeError, RuntimeError, TypeError):  # a backend without the foreach kernel
        norms = [torch.linalg.vector_norm(g.float()) for g in grads]
    devs = {n.device for n in norms}
    if len(devs) > 1:  # parameters on several devices: meet on the first
        first = norms[0].device
        norms = [n.to(first) for n in norms]
    return torch.linalg.vector_norm(torch.stack([n.float() for n in norms]))


def scalar_loss(out: Any) -> Any:
    """A model output that is a loss: a one-element floating tensor, or an output object's `.loss` one."""
    cand = getattr(out, "loss", None) if not hasattr(out, "numel") else out
    if cand is not None and hasattr(cand, "numel") and cand.numel() == 1 and cand.is_floating_point():
        return cand
    return None



class StepTrend:
    """The ring of `StepPoint`s, `size` steps long."""

    def __init__(self, size: int = TREND_STEPS) -> None:
        self.ring: deque[StepPoint] = deque(maxlen=max(1, int(size)))

    def add(self, step: int, names: Sequence[str], values: Sequence[float], grads: int, grad_norm: float,
            loss: Any, took: float) -> None:
        """One step: `values` holds (min, max) per measured module output, then per gradient (the host copy)."""
        n = len(names)
        peaks = [_peak(values[2 * i], values[2 * i + 1]) for i in range(n)]
        gpeaks = [_peak(values[2 * n + 2 * j], values[2 * n + 2 * j + 1]) for j in range(grads)]
        prev = self.ring[-1].modules if self.ring else ()
        kept = prev if tuple(names) == prev else tuple(names)
        per_module: dict[str, float] = {}
        for name, peak in zip(names, peaks):
            per_module[name] = peak if math.isnan(peak) else max(per_module.get(name, 0.0), peak)
        body = [p for name, p in zip(names, peaks) if name]  # the model's own output is its loss, often
        self.ring.append(StepPoint(step, _nanmax(body), _nanmax(gpeaks) if grads else None,
                                   float(grad_norm) if grads else None, None if loss is None else float(loss),
                                   None if math.isnan(took) else took, kept,
                                   tuple(per_module.get(m, math.nan) for m in dict.fromkeys(kept))))

    def series(self, first_bad: str | None = None) -> list[StepSeries]:
        """Module-output max-abs, loss, gradient norm and max-abs, step time, then the max-abs of `first_bad` and of
        the `TREND_MODULES` modules with the largest peaks (a series with no value at all is left out)."""
        ring = list(self.ring)
        if not ring:
            return []
        out = [StepSeries(name, kind, tuple(p.step for p, v in pairs), tuple(v for _, v in pairs), unit)
               for name, kind, unit, pairs in (
                   ("module-output max-abs", "max_abs", "", present(ring, lambda p: p.max_abs)),
                   ("loss", "loss", "", present(ring, lambda p: p.loss)),
                   ("gradient norm", "grad_norm", "", present(ring, lambda p: p.grad_norm)),
                   ("gradient max-abs", "max_abs", "", present(ring, lambda p: p.grad_max_abs)),
                   ("step time", "step_time", "µs",
                    present(ring, lambda p: p.seconds * 1e6 if p.seconds is not None else None)))
               if pairs]
        peak: dict[str, float] = {}
        for p in ring:
            for m, v in zip(dict.fromkeys(p.modules), p.module_max_abs):
                peak[m] = max(_rank(v), peak.get(m, 0.0))
        chosen = sorted(peak, key=lambda m: (m != first_bad, -peak[m]))[:TREND_MODULES]
        for m in chosen:
            pairs = present(ring, lambda p: dict(zip(dict.fromkeys(p.modules), p.module_max_abs)).get(m))
            out.append(StepSeries(f"{m or '<model>'} max-abs", "max_abs", tuple(p.step for p, _ in pairs),
                                  tuple(v for _, v in pairs)))
        return out
