"""One fix run for a model file: investigate (or take an investigation), find the fix, verify it, build the patch.

`run_fix` is what `ascend-tui fix` and `ascend-tui triage --fix` share; it returns the before and
after investigations and the report's `fix` section (plain JSON data, which the story reads).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from ascend_tui.live.fix_patch import Patch, build_patch
from ascend_tui.live.remedy_search import DEFAULT_TOLERANCE, FixResult, find_fix

if TYPE_CHECKING:
    import threading

    from ascend_tui.evidence import Finding
    from ascend_tui.investigation import Investigation
    from ascend_tui.live.targets import Target
    from ascend_tui.live.options import RunOptions
    from ascend_tui.progress import Progress


@dataclass
class FixRun:
    """The investigation before, the one with the fix applied (None when none was chosen), the section, the patch."""

    before: Investigation
    after: Investigation | None
    result: FixResult
    section: dict[str, Any]
    patch: Patch | None


def run_fix(spec: str, options: RunOptions, *, tolerance: float = DEFAULT_TOLERANCE, search: bool = True,
            before: Investigation | None = None, progress: Progress | None = None,
            only: Sequence[Finding] | None = None, cancel: threading.Event | None = None,
            loaded: Target | None = None) -> FixRun:
    """Investigate `spec` (unless `before` is given), try remedies, verify the chosen one by a second investigation.

    `only` (one cause's findings, from the app) limits the fix to what they need; `cancel` stops it
    between re-runs; `loaded` is the target already imported (the app's), else `spec` is loaded.
    """
    import torch

    from ascend_tui.live.context import model_dtype, torch_dtype
    from ascend_tui.live.device import select
    from ascend_tui.live.remedies import Trial, applied
    from ascend_tui.live.runner import run_live
    from ascend_tui.live.targets import load_target

    def say(text: str) -> None:
        if progress is not None:
            progress(text, 0, None)

    if loaded is None:
        say(f"loading {spec}")
    target = loaded if loaded is not None else load_target(spec)
    options = options.but(loss=target.loss, target=spec)
    if before is None:
        before = run_live(target.model, target.inputs, options, progress=progress, cancel=cancel)
    dtype = torch_dtype(options.dtype) or model_dtype(target.model, target.inputs) or torch.float32
    say("trying remedies")
    trial = Trial(target.model, target.inputs, select(options.device), dtype, cancel=cancel, progress=progress)
    result = find_fix(trial, target.model, before.findings, target.inputs, tolerance, search=search, focus=only)
    after = None
    if result.chosen is not None:
        say("verifying the fix")
        fixed = copy.deepcopy(target.model)
        with applied(fixed, result.chosen):
            after = run_live(fixed, target.inputs, options.but(checks=before.run.checks or options.checks),
                             progress=progress, cancel=cancel)
    section = result.to_json()
    gone = findings_gone(before, after, only, layout=result.layout is not None)  # tried: judged, chosen or not
    remaining = [g for g in gone if not g["gone"]]
    fresh = new_errors(before, after)
    section["findings"] = gone
    section["new_findings"] = fresh
    section["verified"] = result.chosen is not None and not remaining and not fresh
    if result.chosen is not None and remaining:
        section["reason"] = (f"{len(remaining)} of {len(gone)} finding(s) remain with the fix applied "
                             f"({remaining[0]['message']})")
    elif result.chosen is not None and fresh:
        section["reason"] = (f"the outputs are within tolerance, but the run with the fix applied has "
                             f"{len(fresh)} error finding(s) the first did not ({fresh[0]['message']})")
    patch = build_patch(target.path, target.factory, result.chosen, before.graph, fits=fitting(before, dtype),
                        dtype=str(dtype).removeprefix("torch.")) if result.chosen else None
    section["patch"] = patch.to_json() if patch is not None else None
    say("timing the fix against the run without it")
    section["cost"] = {**cost(result, trial), **parameter_bytes(target.model, dtype, result.chosen or ())}
    section["summary"] = summary(result, section)
    return FixRun(before, after, result, section, patch)


def fitting(inv: Investigation, dtype: Any) -> dict[str, bool]:
    """Accumulating op -> whether its float32 reference result fits `dtype` (where the capture kept its statistics)."""
    import torch

    from ascend_tui.live.fix_patch import python_name
    from ascend_tui.live.remedies import ACCUMULATING

    if not dtype.is_floating_point:
        return {}
    limit = torch.finfo(dtype).max
    out: dict[str, bool] = {}
    for node in inv.graph:
        if node.is_placeholder or python_name(node.op_type) not in ACCUMULATING:
            continue
        ref = inv.stats_for(node.id)[1]
        if ref is not None and math.isfinite(ref.abs_max):
            out[node.id] = ref.abs_max <= limit
    return out


def findings_gone(before: Investigation, after: Investigation | None,
                  only: Sequence[Finding] | None = None, *, layout: bool = False) -> list[dict[str, Any]]:
    """Each error the fix was for (introduced, before; of `only` when given) and whether the run with the fix
    still has it; with `layout`, the layout-conversion finding too (gone when the run with the fix has none)."""
    keys = set()
    if after is not None:
        keys = {(f.check, f.kind, f.node) for f in after.findings if f.severity == "error"}
    converts = after is not None and any(f.kind == "layout_conversion" for f in after.findings)
    pool = before.findings if only is None else only
    out = []
    for f in pool:
        if f.severity == "error" and f.attribution == "introduced":
            gone = after is not None and (f.check, f.kind, f.node) not in keys
        elif layout and f.check == "profile" and f.kind == "layout_conversion":
            gone = after is not None and not converts
        else:
            continue
        out.append({"check": f.check, "kind": f.kind, "node": f.node, "module": f.module, "message": f.message,
                    "gone": gone})
    return out


def new_errors(before: Investigation, after: Investigation | None) -> list[dict[str, Any]]:
    """Errors the run with the fix has that the run without it did not (a problem the first hid or made look carried)."""
    if after is None:
        return []
    had = {(f.check, f.kind, f.node) for f in before.findings if f.severity == "error"}
    return [{"check": f.check, "kind": f.kind, "node": f.node, "module": f.module, "message": f.message}
            for f in after.findings if f.severity == "error" and (f.check, f.kind, f.node) not in had]


def measured_before(result: FixResult) -> Any:
    """The run the fix is measured against: without remedies, or with only the base ones (clamps) when that failed."""
    if not result.baseline.error:
        return result.baseline
    return next((o for o in result.tried if not o.error and set(o.remedies) <= set(result.base)), result.baseline)


def cost(result: FixResult, trial: Any = None) -> dict[str, Any]:
    """Time per step and peak memory of the fix against the run without it (or with only the base remedies).

    With `trial`, both are timed again in turn, step after step (median and spread of each), so load
    on the machine hits both alike; otherwise the medians of their own measuring runs are used.
    """
    ref, o = measured_before(result), result.chosen_outcome
    if o is None:
        return {}
    before_s, after_s = ref.step_s, o.step_s
    out: dict[str, Any] = {}
    lr = result.layout
    timed = None
    if lr is not None and lr.before is not None and lr.after is not None and set(o.remedies) == set(
            (*lr.remedies, *(r for r in o.remedies if r not in lr.remedies))) and lr.outcome is o:
        timed = (lr.before, lr.after)
    elif trial is not None and not ref.error:
        from ascend_tui.live.layout_fix import LAYOUT_STEPS, StepTimes

        try:
            a, b = trial.step_times([ref.remedies, o.remedies], LAYOUT_STEPS)
            timed = (StepTimes.of(a), StepTimes.of(b))
        except Exception:  # noqa: BLE001 - timing is a cost to report, never a reason to fail the fix
            timed = None
    if timed is not None:
        before_s, after_s = timed[0].median, timed[1].median
        out["step_before"], out["step_after"] = timed[0].to_json(), timed[1].to_json()
        out["step_gain_measured"] = timed[1].high < timed[0].low or timed[1].low > timed[0].high
    out.update(step_seconds_before=_num(before_s), step_seconds_after=_num(after_s))
    if math.isfinite(before_s) and before_s > 0 and math.isfinite(after_s):
        out["step_time_change"] = after_s / before_s - 1.0
    out["peak_bytes_before"], out["peak_bytes_after"] = ref.peak_bytes, o.peak_bytes
    return out


def parameter_bytes(model: Any, dtype: Any, remedies: Any) -> dict[str, int]:
    """Parameter memory in the run dtype, before and with the float32 remedies (a cost every device can state)."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return {}
    size = torch.empty((), dtype=dtype).element_size()
    kept: set[int] = set()
    for r in remedies:
        if r.kind == "float32":
            try:
                kept |= {id(p) for p in model.get_submodule(r.module).parameters()} if r.module else \
                    {id(p) for p in model.parameters()}
            except AttributeError:
                continue
    params = [p for p in model.parameters() if p.is_floating_point()]
    before = sum(p.numel() * size for p in params)
    after = sum(p.numel() * (4 if id(p) in kept else size) for p in params)
    return {"parameter_bytes_before": before, "parameter_bytes_after": after}


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def state(o: Any, tolerance: float) -> str:
    """One outcome in words: the failure, the Inf/NaN, or the cosine and relative error."""
    if o.error:
        return f"run failed: {o.error}"
    if o.reference_bad:
        return f"the float32 reference has {o.reference_bad} Inf/NaN itself"
    if o.inf_count or o.nan_count:
        return f"{o.inf_count} Inf, {o.nan_count} NaN in the outputs"
    mark = "within" if o.within(tolerance) else "outside"
    return f"cosine {o.cosine:.6f}, relative error {o.rel_error:.3g} ({mark} tolerance)"


def names(remedies: Any) -> str:
    """The remedies as the report names them; many layout remedies as one phrase (`... in 13 modules (...)`)."""
    layout = [r for r in remedies if r.kind == "layout"]
    parts = [r.describe() for r in remedies if r.kind != "layout"]
    if len(layout) > 2:
        shown = ", ".join(f"`{r.module}`" for r in layout[:2])
        parts.append(f"the permute/transpose + contiguous() copies in {len(layout)} modules ({shown}, "
                     f"+{len(layout) - 2} more) dropped")
    else:
        parts += [r.describe() for r in layout]
    return " + ".join(parts) or "nothing changed"


def summary(result: FixResult, section: dict[str, Any]) -> str:
    """`fix verified: cosine 0.37 → 0.9995 with `layer2.0` in float32, +12% step time` or `not verified: why`."""
    if not section["verified"]:
        reason = section.get("reason") or "no remedy worked"
        return reason if reason.startswith("nothing to fix") else f"not verified: {reason}"
    o, ref = result.chosen_outcome, measured_before(result)
    assert o is not None
    lr = result.layout
    dropped = lr is not None and lr.accepted and set(lr.remedies) <= set(result.chosen or ())
    if dropped and all(r.kind == "layout" or r in result.base for r in result.chosen or ()):
        return f"fix verified: {names(lr.remedies)}: {lr.describe()}"
    extra = f"; and {names(lr.remedies)}: {lr.describe()}" if dropped else ""
    change = section["cost"].get("step_time_change")
    hooked = "; the upcast's torch function mode's own overhead included" if any(
        r.kind == "upcast" for r in result.chosen or ()) else ""
    steps = section["cost"].get("step_after")
    spread = "" if not steps else (f" (median of {steps['steps']} steps each, in turn"
                                   f"{'' if section['cost'].get('step_gain_measured') else '; within the spread'}"
                                   f"{hooked})")
    timing = f", {change:+.0%} step time{spread or (f' ({hooked[2:]})' if hooked else '')}" if change is not None \
        else ""
    cost = section["cost"]
    grown = cost.get("parameter_bytes_after", 0) - cost.get("parameter_bytes_before", 0)
    memory = f", +{grown:,} parameter bytes" if grown > 0 else ""
    memory += "" if o.peak_bytes is not None else " (peak memory: no counters on this device)"
    was = f"cosine {ref.cosine:.6f}" if math.isfinite(ref.cosine) else state(ref, result.tolerance)
    precise = [r for r in result.chosen or () if r.kind != "layout"]
    return f"fix verified: {was} → cosine {o.cosine:.6f} with {names(precise)}{timing}{memory}{extra}"


def report_lines(target: str, dtype: str | None, fixed: FixRun) -> list[str]:
    """A fix run as a person reads it (the CLI prints it, the app shows it): each run, the search, the verdict, the
    patch."""
    result, section, patch = fixed.result, fixed.section, fixed.patch
    tol = result.tolerance
    lines = [f"fix: {target} in {dtype or 'its own dtype'} against the float32 reference, "
             f"tolerance cosine ≥ {tol}",
             f"  before: {state(result.baseline, tol)}"]
    lines += [f"  tried {names(o.remedies)}: {state(o, tol)}" for o in result.tried]
    if result.search is not None:
        s = result.search
        lines += [f"  search: {step}" for step in s.steps]
        found = ", ".join(f"`{m}`" if m else "the whole model" for m in s.modules) if s.modules is not None else None
        lines.append(f"  search result after {s.runs} re-runs: " + (f"{found} in float32" if found else "none"))
    verdict = section["summary"]
    if section["verified"]:
        verdict += f"; {len(section['findings'])} finding(s) gone; {result.runs} runs in all"
    if result.layout is not None and not result.layout.accepted:
        lines.append(f"  layout: {names(result.layout.remedies)}: {result.layout.describe()}")
    lines.append(verdict)
    if patch is not None and section["verified"]:
        lines.append("patch (apply with `patch -p1`):" if patch.diff else "snippet (add after the model is built):"
                     if patch.snippet else "no patch could be placed: change the code as the notes say")
        lines += (patch.diff or patch.snippet).rstrip("\n").splitlines()
        lines += [f"note: {n}" for n in patch.notes]
    return lines
