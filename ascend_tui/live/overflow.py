"""The live overflow check: the target and reference captures, plus what only a live run can measure.

It observes the runner's two runs: on NPUs in saturation mode the target run reads the
float-status overflow flag after every op (`FlagObserver`); the float32 reference run counts,
per output, the non-zero values the target dtype flushes to zero and the smallest non-zero
magnitude (`EvidenceObserver`). It makes its own passes only where those cannot serve:
with `--backward`, a forward+backward pass whose gradient ops join the graph (phase
"backward", `attrs["forward"]` naming the forward op each gradient belongs to), and then the
float32 evidence pass. Settings (`options.settings`): `range_dtype`, `inf_nan_mode`,
`headroom_bits`, `underflow_fraction`, `overflow_evidence` (False skips the evidence).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ascend_tui.checks.effect import OutputEffect, compare_outputs
from ascend_tui.checks.overflow import RangeEvidence, analyze, range_of
from ascend_tui.errors import AscendTuiError
from ascend_tui.graph.opgraph import OpNode, derive
from ascend_tui.live.capture import Recorder, call_model, dtype_name, iter_tensors
from ascend_tui.live.context import LiveContext, Run, guarded, prepare, torch_dtype
from ascend_tui.live.recording import Call, Watcher, recording
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
        if opts.backward and ctx.coarse is None:  # a coarse-to-fine capture holds the backward already
            ctx.report("capturing backward", 0, None)
            recorder = GradRecorder(ctx.model, ctx.inputs, cancel=ctx.cancel)
            guarded(opts.target, "the backward pass",
                    lambda: grad_capture(recorder, ctx.model, ctx.inputs, opts.loss, ctx.rerun_observers()))
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
                if self.evidence is not None and (not opts.backward or ctx.coarse is not None) \
                        and ctx.reference is not None:
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


# -- backward: gradient ops named after their forward op ---------------------------------------


class GradRecorder(Recorder):
    """A recorder that maps each autograd node to the forward op that made it, and labels backward ops with it."""

    def __init__(self, model: Any, inputs: Any, **kwargs: Any) -> None:
        super().__init__(model, inputs, **kwargs)
        self.forward_of: dict[Any, tuple[str, str]] = {}
        self.current: tuple[str, str] | None = None
        self._pending: list[tuple[str, Any]] = []
        self._hooks: list[Any] = []

    def resolve(self) -> None:
        """Map the grad_fn of the last ops' outputs (set once autograd returned them) to their nodes."""
        for node_id, ref in self._pending:
            t = ref()
            fn = getattr(t, "grad_fn", None) if t is not None else None
            if fn is not None and fn not in self.forward_of:
                self.forward_of[fn] = (node_id, self.graph.node(node_id).module)
        self._pending.clear()

    def record(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> str:
        if self.phase == "forward":
            self.resolve()
        node_id = super().record(func, args, kwargs, out)
        if self.phase == "forward":
            for t in iter_tensors(out):
                if t.is_floating_point():
                    self._pending.append((node_id, weakref.ref(t)))
        elif self.current is not None:
            node = self.graph.node(node_id)
            attrs = {**(node.attrs or {}), "forward": self.current[0]}
            fwd = self.graph.get(self.current[0])
            if fwd is not None and fwd.attrs and "api" in fwd.attrs:
                attrs["api"] = f"backward:{fwd.attrs['api']}"  # as msprobe names the backward of an API call
            self.graph.replace_node(derive(node, attrs=attrs))
        return node_id

    def hook_backward(self) -> None:
        """Pre/post hooks on every mapped autograd node (and parameters' AccumulateGrad) naming the forward op."""
        self.resolve()
        nodes = dict(self.forward_of)
        for fn in list(nodes):
            for nxt, _ in getattr(fn, "next_functions", ()):
                var = getattr(nxt, "variable", None)
                if var is not None and nxt not in nodes:
                    kind, name = self._named.get(id(var), ("", ""))
                    if kind == "param":
                        nodes[nxt] = (f"param:{name}", name.rsplit(".", 1)[0] if "." in name else "")
        for fn, owner in nodes.items():
            self._hooks.append(fn.register_prehook(self._enter(owner)))
            self._hooks.append(fn.register_hook(self._leave))

    def _enter(self, owner: tuple[str, str]) -> Callable[..., None]:
        def pre(_grad_outputs: Any) -> None:
            self.current = owner
            self.module_stack[:] = [owner[1]] if owner[1] else []
        return pre

    def _leave(self, _grad_inputs: Any, _grad_outputs: Any) -> None:
        self.current = None
        self.module_stack.clear()

    def remove_hooks(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()


def default_loss(outputs: Any) -> Any:
    """The sum of every floating output that needs a gradient: a loss when the model file defines none."""
    parts = [t.float().sum() for t in iter_tensors(outputs) if t.is_floating_point() and t.requires_grad]
    if not parts:
        raise ValueError("the model's outputs need no gradient, so there is no backward pass to check")
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def grad_capture(recorder: GradRecorder, model: Any, inputs: Any, loss: Callable[[Any], Any] | None = None,
                 observers: Sequence[Any] = ()) -> None:
    """Forward and backward under `recorder`: gradient ops get phase "backward", parameter grads become nodes.

    The model's `.grad`s and buffers are put back afterwards, so the user's training state is untouched.
    """
    import torch

    named = model.named_parameters() if hasattr(model, "named_parameters") else ()
    params = [(n, p) for n, p in named if p.requires_grad]
    saved = [(p, p.grad) for _, p in params]
    buffers = [(b, b.detach().clone()) for b in model.buffers()] if hasattr(model, "buffers") else []
    for p, _ in saved:
        p.grad = None
    try:
        with recording(model, recorder, observers, grad=True):
            outputs = call_model(model, inputs)
            value = (loss or default_loss)(outputs)
            recorder.hook_backward()
            recorder.phase = "backward"
            value.backward()
        recorder.current = None
        _grad_nodes(recorder, params)
    finally:
        recorder.remove_hooks()
        for p, g in saved:
            p.grad = g
        with torch.no_grad():
            for b, kept in buffers:
                b.copy_(kept)


def _grad_nodes(recorder: Recorder, params: list[tuple[str, Any]]) -> None:
    """One node per parameter gradient (`grad:fc.weight`), fed by the op that wrote it, with its statistics."""
    for name, p in params:
        if p.grad is None:
            continue
        src = recorder.source_of(p.grad)
        module = name.rsplit(".", 1)[0] if "." in name else ""
        node_id = f"grad:{name}"
        outs = recorder.graph.node(src.node).outputs
        meta = outs[src.slot] if src.slot < len(outs) else None
        recorder.graph.add_node(OpNode(node_id, "grad", module, recorder.op_count, kind="output",
                                       inputs=(meta,), outputs=(meta,), phase="backward",
                                       attrs={"forward": f"param:{name}"}))
        recorder.op_count += 1
        recorder.graph.add_edge(src.node, node_id, src.slot, 0)
        recorder.measure(node_id, 0, p.grad)


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
