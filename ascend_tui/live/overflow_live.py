"""The live overflow check: the target and reference captures, plus what only a live run can measure.

On top of the runner's captures it may run three more passes, each only when it adds evidence:
- a float32 evidence pass (on the reference device) measuring, per output, how many non-zero
  values the target dtype flushes to zero and the smallest non-zero magnitude;
- on NPUs in saturation mode, a pass reading the float-status overflow flag after every op;
- with `--backward`, a forward+backward pass whose gradient ops join the graph (phase
  "backward", `attrs["forward"]` naming the forward op each gradient belongs to).
Options (`ctx.options`): `range_dtype`, `inf_nan_mode`, `headroom_bits`, `underflow_fraction`,
`overflow_evidence` (False skips the evidence pass).
"""

from __future__ import annotations

import functools
import weakref
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ascend_tui.checks.overflow import RangeEvidence, analyze, range_of
from ascend_tui.errors import AscendTuiError
from ascend_tui.graph.opgraph import OpNode, derive
from ascend_tui.live.capture import Recorder, _dispatch_mode_class, call_model, dtype_name, iter_tensors
from ascend_tui.live.statistics import HostBatch

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation
    from ascend_tui.live.device import Device
    from ascend_tui.live.runner import LiveContext


def run(ctx: LiveContext, inv: Investigation) -> None:
    """Add overflow, NaN, saturation, range and underflow findings (forward and, if asked, backward)."""
    from ascend_tui.live.runner import _guarded

    opts = ctx.options
    dtype = str(opts.get("range_dtype") or dtype_name(ctx.dtype))
    if range_of(dtype) is None:
        dtype = "float32"
    inf_nan = bool(opts.get("inf_nan_mode", ctx.device.inf_nan_mode))
    flags = None
    if not inf_nan and ctx.device.read_overflow_flag() is not None:
        ctx.report("reading the overflow flag per op", 0, None)
        flags = _guarded(inv.run.target, "the overflow-flag pass",
                         lambda: flag_pass(ctx.device, ctx.model, ctx.inputs))
    if ctx.backward:
        ctx.report("capturing backward", 0, None)
        recorder = GradRecorder(ctx.model, ctx.inputs, cancel=ctx.cancel)
        sanitized = "memory" in inv.run.checks
        _guarded(inv.run.target, "the backward pass",
                 lambda: grad_capture(recorder, ctx.model, ctx.inputs, ctx.loss, sanitized=sanitized))
        same = inv.reference is inv.stats
        inv.graph, inv.stats = recorder.graph, recorder.finish_stats()
        inv.histograms = recorder.finish_histograms()
        if same:
            inv.reference = inv.stats
    evidence: dict[tuple[str, int], RangeEvidence] = {}
    low = range_of(dtype)
    if opts.get("overflow_evidence", True) and ctx.reference_spec and low is not None \
            and (low.low_precision or _any_nonfinite(inv)):
        shared = ctx.reference.recorder if ctx.reference is not None else None
        try:
            if isinstance(shared, EvidenceRecorder) and not ctx.backward and shared.dtype == dtype:
                evidence, ref_stats = shared.evidence(dtype), ctx.reference.stats  # measured in the reference run
            else:
                ctx.report("measuring underflow in float32", 0, None)
                evidence, ref_stats = evidence_pass(ctx, dtype, sanitized="memory" in inv.run.checks)
        except AscendTuiError:
            raise
        except Exception as exc:  # noqa: BLE001 - optional evidence: the check goes on with the captures it has
            inv.run.extra.setdefault("notes", []).append(
                f"overflow: the float32 evidence pass failed ({type(exc).__name__}: {exc}); underflow is estimated "
                f"from zero counts only")
        else:
            if inv.reference is not None and inv.reference is not inv.stats:
                _merge_missing(inv.reference, ref_stats)
    findings = analyze(inv.graph, inv.stats, dtype=dtype, reference=inv.reference, inf_nan_mode=inf_nan,
                       overflow_flags=flags, headroom_bits=float(opts.get("headroom_bits", 1.0)),
                       evidence=evidence, underflow_fraction=float(opts.get("underflow_fraction", 0.05)))
    inv.replace_findings("overflow", findings)


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


def flag_pass(device: Device, model: Any, inputs: Any) -> dict[str, bool]:
    """Run the forward once, clearing and reading the device's overflow flag around every op."""
    import torch

    recorder = Recorder(model, inputs, stats=False, source=False)
    flags: dict[str, bool] = {}
    base = _dispatch_mode_class()

    class FlagMode(base):  # type: ignore[misc, valid-type]
        """Capture mode that reads the float-status flag after each op (one sync per op)."""

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            device.clear_overflow_flag()
            out = func(*args, **kwargs)
            hit = device.read_overflow_flag()
            node = self.recorder.record(func, args, kwargs, out)
            if hit:
                flags[node] = True
            return out

    handles = recorder.install_hooks(model)
    try:
        with torch.no_grad(), FlagMode(recorder):
            call_model(model, inputs)
    finally:
        for h in handles:
            h.remove()
    return flags


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
            self.graph.replace_node(derive(node, attrs={**(node.attrs or {}), "forward": self.current[0]}))
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


def capture_mode(recorder: Recorder, model: Any, inputs: Any, *, sanitized: bool = False) -> Any:
    """The dispatch mode that records into `recorder`: the sanitizer's (bad indices clamped, so a model the
    memory check is looking at cannot crash this run) or plain capture's."""
    if sanitized:
        from ascend_tui.live.sanitize import Sanitizer, _sanitize_mode_class

        return _sanitize_mode_class()(recorder, Sanitizer(model, inputs))
    return _dispatch_mode_class()(recorder)


def grad_capture(recorder: GradRecorder, model: Any, inputs: Any, loss: Callable[[Any], Any] | None = None, *,
                 sanitized: bool = False) -> None:
    """Forward and backward under `recorder`: gradient ops get phase "backward", parameter grads become nodes.

    The model's `.grad`s and buffers are put back afterwards, so the user's training state is untouched.
    """
    import torch

    handles = recorder.install_hooks(model)
    mode = capture_mode(recorder, model, inputs, sanitized=sanitized)
    named = model.named_parameters() if hasattr(model, "named_parameters") else ()
    params = [(n, p) for n, p in named if p.requires_grad]
    saved = [(p, p.grad) for _, p in params]
    buffers = [(b, b.detach().clone()) for b in model.buffers()] if hasattr(model, "buffers") else []
    for p, _ in saved:
        p.grad = None
    try:
        with torch.enable_grad(), mode:
            outputs = call_model(model, inputs)
            value = (loss or default_loss)(outputs)
            for h in handles:
                h.remove()
            handles = []
            recorder.hook_backward()
            recorder.phase = "backward"
            value.backward()
        recorder.current = None
        _grad_nodes(recorder, params)
    finally:
        for h in handles:
            h.remove()
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


class EvidenceRecorder(GradRecorder):
    """Also counts, per output, the non-zero values below a dtype's smallest subnormal and the smallest |x| > 0."""

    def __init__(self, model: Any, inputs: Any, *, flush_below: float = 0.0, dtype: str = "", **kwargs: Any) -> None:
        super().__init__(model, inputs, **kwargs)
        self.flush_below = flush_below
        self.dtype = dtype
        self.extra_keys: list[tuple[str, int]] = []
        self.extra_rows: list[Any] = []
        # Small CPU outputs: counted with their statistics in the host batch (slot per key);
        # views and copies: the same counts as the output whose values they hold.
        self._batch = HostBatch(self._torch, flush_below=flush_below)
        self._batched: list[tuple[tuple[str, int], int]] = []
        self._copied: list[tuple[tuple[str, int], tuple[str, int]]] = []

    def measure(self, node_id: str, slot: int, t: Any) -> None:
        copies, rows = len(self._stat_copies), len(self._stat_rows)
        super().measure(node_id, slot, t)
        torch = self._torch
        if not t.is_floating_point() or t.numel() == 0 or t.layout != torch.strided or t.device.type == "meta":
            return
        if len(self._stat_copies) > copies:
            self._copied.append(((node_id, slot), self._stat_copies[-1][1]))
            return
        if len(self._stat_rows) > rows and type(self._stat_rows[-1]) is int:
            self._batched.append(((node_id, slot), self._stat_rows[-1]))
            return
        a = t.detach().abs()
        if a.dtype != torch.float32 and a.dtype != torch.float64:
            a = a.float()
        nonzero = a != 0
        flushed = (nonzero & (a < self.flush_below)).sum()
        smallest = torch.where(nonzero, a, torch.full((), float("inf"), dtype=a.dtype, device=a.device)).amin()
        self.extra_keys.append((node_id, slot))
        self.extra_rows.append(torch.stack((flushed.double(), nonzero.sum().double(), smallest.double())))

    def evidence(self, dtype: str) -> dict[tuple[str, int], RangeEvidence]:
        """The counts, brought to the host in one transfer."""
        found: dict[tuple[str, int], RangeEvidence] = {}
        if self.extra_rows:
            rows = self._torch.stack(self.extra_rows).cpu().numpy()
            found = {k: RangeEvidence(dtype, int(r[0]), int(r[1]), float(r[2])) for k, r in zip(self.extra_keys, rows)}
        if self._batched:
            batch = self._batch.evidence()
            for key, row in self._batched:
                r = batch[row]
                found[key] = RangeEvidence(dtype, int(r[0]), int(r[1]), float(r[2]))
        for key, source in self._copied:  # in recording order, so a view of a view finds its counts
            if source in found:
                found[key] = found[source]
        return found


def reference_recorder(dtype: str) -> Callable[..., EvidenceRecorder] | None:
    """For the runner's float32 reference run: a recorder that also measures underflow into `dtype`.

    Measuring there saves the separate evidence pass, a whole extra forward on the reference device.
    """
    rng = range_of(dtype)
    if rng is None or not rng.low_precision:
        return None
    return functools.partial(EvidenceRecorder, flush_below=rng.smallest_subnormal, dtype=dtype)


def evidence_pass(ctx: LiveContext, dtype: str, *, sanitized: bool = False
                  ) -> tuple[dict[tuple[str, int], RangeEvidence], Any]:
    """Run the model in float32 on the reference device and measure underflow and tiny magnitudes per output."""
    import torch

    from ascend_tui.live.device import select
    from ascend_tui.live.runner import prepare, torch_dtype

    backend, _, ref_dtype = str(ctx.reference_spec).partition(":")
    dev = select(backend or "cpu")
    model, inputs = prepare(ctx.original_model, ctx.original_inputs, dev, torch_dtype(ref_dtype or "float32"),
                            copy_model=True)
    rng = range_of(dtype)
    assert rng is not None
    recorder = EvidenceRecorder(model, inputs, cancel=ctx.cancel, flush_below=rng.smallest_subnormal, dtype=dtype,
                                source=False)
    if ctx.backward:
        grad_capture(recorder, model, inputs, ctx.loss, sanitized=sanitized)
    else:
        handles = recorder.install_hooks(model)
        try:
            with torch.no_grad(), capture_mode(recorder, model, inputs, sanitized=sanitized):
                call_model(model, inputs)
        finally:
            for h in handles:
                h.remove()
    return recorder.evidence(dtype), recorder.finish_stats()
