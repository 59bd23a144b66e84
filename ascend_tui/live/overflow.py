"""The live overflow check: the target and reference captures, plus what only a live run can measure.

It observes the runner's two runs: on NPUs in saturation mode the target run reads the
float-status overflow flag after every op (`FlagObserver`); the float32 reference run counts,
per output, the non-zero values the target dtype flushes to zero and the smallest non-zero
magnitude (`EvidenceObserver`). With `--backward` the runner records both runs as training
steps (`recording.capture(backward=True)`: gradient ops in the graph with phase "backward" and
`attrs["forward"]` naming the forward op each belongs to; the flag read after them too). The
check makes its own passes only where those cannot serve: a forward+backward pass when it was
given a forward-only capture (`watch`'s re-run), and the float32 evidence pass when no
low-precision reference run measured it. Settings (`options.settings`): `range_dtype`, `inf_nan_mode`,
`headroom_bits`, `underflow_fraction`, `overflow_evidence` (False skips the evidence).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ascend_tui.checks.effect import OutputEffect, compare_outputs
from ascend_tui.checks.overflow import RangeEvidence, analyze, range_of
from ascend_tui.errors import AscendTuiError
from ascend_tui.live.tensors import call_model, dtype_name
from ascend_tui.live.context import LiveContext, Run, guarded, prepare, torch_dtype
from ascend_tui.live.recording import Call, GradRecorder, Watcher, grad_capture, recording
from ascend_tui.live.recording import default_loss  # noqa: F401 - live.coarse imports it from here
from ascend_tui.live.statistics import SMALL, HostBatch

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation
    from ascend_tui.live.device import Device


class OverflowCheck:
    """The `overflow` live check: Inf/NaN origins, saturation, range risk and underflow, forward and backward."""

    name = "overflow"
    needs_reference = True
    coarse = True  # works on a coarse-to-fine capture (live.coarse): module-level evidence, operators where it matters

    def __init__(self) -> None:
        self.flags: FlagObserver | None = None
        self.evidence: EvidenceObserver | None = None

    def dtype(self, ctx: LiveContext) -> str:
        """The dtype whose range the check judges: `range_dtype` when set, else the run's."""
        dtype = str(ctx.options.setting("range_dtype") or dtype_name(ctx.dtype))
        return dtype if range_of(dtype) is not None else "float32"

    def module_histograms(self, ctx: LiveContext) -> bool:
        """Whether the check reads module-level histograms: only to estimate float16 underflow of outputs stored in a
        wider dtype (`checks.overflow`'s "histogram" source); a coarse capture samples them only when some check
        does."""
        return self.dtype(ctx) == "float16" and not (range_of(dtype_name(ctx.dtype)) or range_of("float32")).low_precision

    def observers(self, ctx: LiveContext, run: Run) -> list[Watcher]:
        if run.role == "target":
            inf_nan = bool(ctx.options.setting("inf_nan_mode", ctx.device.inf_nan_mode))
            if not inf_nan and ctx.device.read_overflow_flag() is not None:
                self.flags = FlagObserver(ctx.device)
                return [self.flags]
        elif run.role == "reference":
            rng = range_of(self.dtype(ctx))
            if rng is not None and rng.low_precision and ctx.options.setting("overflow_evidence", True):
                self.evidence = EvidenceObserver(flush_below=rng.smallest_subnormal, dtype=self.dtype(ctx))
                return [self.evidence]
        return []

    def run(self, ctx: LiveContext, inv: Investigation) -> None:
        """Add overflow, NaN, saturation, range and underflow findings (forward and, if asked, backward)."""
        opts = ctx.options
        dtype = self.dtype(ctx)
        inf_nan = bool(opts.setting("inf_nan_mode", ctx.device.inf_nan_mode))
        flags = self.flags.flags if self.flags is not None else None
        backward_done = ctx.coarse is not None or (ctx.target is not None and ctx.target.backward)
        if opts.backward and not backward_done:  # the runner's captures hold the backward already
            ctx.report("capturing backward", 0, None)
            recorder = GradRecorder(ctx.model, ctx.inputs, cancel=ctx.cancel)
            observers = [*ctx.rerun_observers(), *([self.flags] if self.flags is not None else [])]
            guarded(opts.target, "the backward pass",
                    lambda: grad_capture(recorder, ctx.model, ctx.inputs, opts.loss, observers))
            same = inv.reference is inv.stats
            inv.graph, inv.stats = recorder.graph, recorder.finish_stats()
            inv.histograms = recorder.finish_histograms()
            if same:
                inv.reference = inv.stats
        evidence: dict[tuple[str, int], RangeEvidence] = {}
        low = range_of(dtype)
        if opts.setting("overflow_evidence", True) and opts.reference and low is not None \
                and (low.low_precision or _any_nonfinite(inv)):
            try:
                if self.evidence is not None and ctx.reference is not None \
                        and (not opts.backward or ctx.coarse is not None or ctx.reference.backward):
                    evidence, ref_stats = self.evidence.result(), ctx.reference.stats  # measured in the reference run
                else:
                    ctx.report("measuring underflow in float32", 0, None)
                    evidence, ref_stats = evidence_pass(ctx, dtype)
            except AscendTuiError:
                raise
            except Exception as exc:  # noqa: BLE001 - optional evidence: the check goes on with the captures it has
                inv.run.extra.setdefault("notes", []).append(
                    f"overflow: the float32 evidence pass failed ({type(exc).__name__}: {exc}); underflow is "
                    f"estimated from zero counts only")
            else:
                if inv.reference is not None and inv.reference is not inv.stats:
                    _merge_missing(inv.reference, ref_stats)
        effect = output_effect(ctx, dtype)
        if effect is not None:
            inv.run.extra["output_effect"] = effect.to_json()
        findings = analyze(inv.graph, inv.stats, dtype=dtype, reference=inv.reference, inf_nan_mode=inf_nan,
                           overflow_flags=flags, headroom_bits=float(opts.setting("headroom_bits", 1.0)),
                           evidence=evidence, underflow_fraction=float(opts.setting("underflow_fraction", 0.05)),
                           effect=effect, histograms=inv.histograms)
        inv.replace_findings("overflow", findings)


def output_effect(ctx: LiveContext, dtype: str) -> OutputEffect | None:
    """The target's floating outputs against the reference run's, when both runs kept them (see `checks.effect`)."""
    if ctx.target is None or ctx.reference is None:
        return None
    from torch.utils._pytree import keystr, tree_flatten_with_path

    def floats(outputs: Any) -> tuple[list[str], list[np.ndarray]]:
        names, arrays = [], []
        for path, leaf in tree_flatten_with_path(outputs)[0]:
            if hasattr(leaf, "is_floating_point") and leaf.is_floating_point() and leaf.numel() > 0:
                names.append(f"output {keystr(path).strip('[]') or 0}".replace("'", ""))
                arrays.append(leaf.detach().float().cpu().numpy())
        return names, arrays

    names, targets = floats(ctx.target.outputs)
    ref_names, references = floats(ctx.reference.outputs)
    if names != ref_names:
        return None
    return compare_outputs(targets, references, dtype, names)


def _any_nonfinite(inv: Investigation) -> bool:
    s = inv.stats
    if len(s) == 0:
        return False
    return bool((s.column("nan_count") > 0).any() or (s.column("inf_count") > 0).any()
                or not np.isfinite(s.column("max")).all())


def _merge_missing(into: Any, extra: Any) -> None:
    """Add rows of `extra` whose keys `into` lacks (backward rows of a reference)."""
    keys = [k for k in extra.keys() if k not in into]
    if keys:
        into.add_many(keys, np.array([extra.get(*k).to_row() for k in keys], dtype=np.float64))


# -- NPU float-status flags per op -------------------------------------------------------------


class FlagObserver(Watcher):
    """Clears the device's float-status overflow flag before every op and reads it right after (one sync per op)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.flags: dict[str, bool] = {}
        self._hit = False

    def before(self, call: Call) -> None:
        self.device.clear_overflow_flag()

    def ran(self, call: Call, out: Any) -> None:
        self._hit = bool(self.device.read_overflow_flag())

    def after(self, call: Call, node: str, out: Any) -> None:
        if self._hit:
            self.flags[node] = True


# -- float32 evidence pass ---------------------------------------------------------------------


class EvidenceObserver(Watcher):
    """Counts, per measured tensor, the non-zero values a cast to `dtype` flushes to zero and the smallest |x| > 0."""

    def __init__(self, *, flush_below: float, dtype: str) -> None:
        self.flush_below = flush_below
        self.dtype = dtype
        self.keys: list[tuple[str, int]] = []
        self.rows: list[Any] = []
        # Small contiguous CPU tensors are counted all at once at the end, in a host batch.
        self._batch: HostBatch | None = None
        self._batched: list[tuple[tuple[str, int], int]] = []

    def output(self, node: str, slot: int, t: Any) -> None:
        import torch

        if not t.is_floating_point() or t.numel() == 0 or t.layout != torch.strided or t.device.type == "meta":
            return
        if t.is_cpu and t.numel() <= SMALL and t.is_contiguous() and not t.is_neg():
            if self._batch is None:
                self._batch = HostBatch(torch, flush_below=self.flush_below, flush_dtype=self.dtype)
            row = self._batch.add(t, False)
            if row is not None:
                self._batched.append(((node, slot), row))
                return
        a = t.detach().abs()
        if a.dtype != torch.float32 and a.dtype != torch.float64:
            a = a.float()
        nonzero = a != 0
        low = getattr(torch, self.dtype, None) if self.dtype else None
        if isinstance(low, torch.dtype) and low.is_floating_point:
            # What the cast really flushes: round to nearest even, subnormals and ties included.
            flushed = (nonzero & (a.to(low) == 0)).sum()
        else:  # no such dtype in this torch: at most half the smallest subnormal (the tie included) rounds to 0
            flushed = (nonzero & (a <= self.flush_below / 2)).sum()
        smallest = torch.where(nonzero, a, torch.full((), float("inf"), dtype=a.dtype, device=a.device)).amin()
        self.keys.append((node, slot))
        self.rows.append(torch.stack((flushed.double(), nonzero.sum().double(), smallest.double())))

    def result(self) -> dict[tuple[str, int], RangeEvidence]:
        """The counts, brought to the host in one transfer."""
        found: dict[tuple[str, int], RangeEvidence] = {}
        if self.rows:
            import torch

            rows = torch.stack(self.rows).cpu().numpy()
            found = {k: RangeEvidence(self.dtype, int(r[0]), int(r[1]), float(r[2])) for k, r in zip(self.keys, rows)}
        if self._batch is not None and self._batched:
            batch = self._batch.evidence()
            for key, row in self._batched:
                r = batch[row]
                found[key] = RangeEvidence(self.dtype, int(r[0]), int(r[1]), float(r[2]))
        return found


def evidence_pass(ctx: LiveContext, dtype: str) -> tuple[dict[tuple[str, int], RangeEvidence], Any]:
    """Run the model in float32 on the reference device and measure underflow and tiny magnitudes per output."""
    from ascend_tui.live.device import select

    backend, _, ref_dtype = str(ctx.options.reference).partition(":")
    dev = select(backend or "cpu")
    model, inputs = prepare(ctx.original_model, ctx.original_inputs, dev, torch_dtype(ref_dtype or "float32"),
                            copy_model=True)
    rng = range_of(dtype)
    assert rng is not None
    observer = EvidenceObserver(flush_below=rng.smallest_subnormal, dtype=dtype)
    observers = [observer, *ctx.rerun_observers(model, inputs, dev)]
    recorder = GradRecorder(model, inputs, cancel=ctx.cancel, source=False)
    if ctx.options.backward:
        grad_capture(recorder, model, inputs, ctx.options.loss, observers)
    else:
        with recording(model, recorder, observers):
            call_model(model, inputs)
    return observer.result(), recorder.finish_stats()
