"""`ascend-tui fix TARGET`: investigate a model file, try the remedies its findings name, verify, print a patch.

The remedies run without editing the user's code (`live.remedies`); when none alone brings the
outputs within the tolerance, `live.remedy_search` finds the smallest set of modules to keep in
float32. The chosen fix is verified twice: its outputs against the float32 reference, and a second
investigation with it applied, whose findings decide the exit code. The report's `fix` section
carries the numbers, the re-run count and the patch.
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
from pathlib import Path
from typing import Any

from ascend_tui.cli.finish import check_outputs, finish
from ascend_tui.cli.parser import add_gate_options, add_outputs, add_quiet
from ascend_tui.cli.progress import ProgressLine
from ascend_tui.cli.settings import add_run_settings, run_options
from ascend_tui.errors import InputError


def add_parser(sub: Any) -> None:
    fix = sub.add_parser("fix")
    fix.add_argument("target", help="path/to/model.py[:factory] (the factory returns (model, inputs))")
    add_run_settings(fix, checks="overflow,precision,memory")
    fix.add_argument("--tolerance", type=float, default=0.999,
                     help="output cosine against the float32 reference a fix must reach (default 0.999)")
    fix.add_argument("--no-search", action="store_true",
                     help="only try the findings' own remedies, not the search for the smallest float32 set")
    fix.add_argument("--patch", metavar="PATH", help="write the patch (a unified diff for `patch -p1`) here")
    add_outputs(fix, json="write the report, with the fix section (before/after, re-runs, patch)", junit=None,
                save=None, markdown=None)
    add_gate_options(fix)
    add_quiet(fix)


def run(args: argparse.Namespace) -> int:
    import torch

    from ascend_tui.live.context import model_dtype, torch_dtype
    from ascend_tui.live.device import select
    from ascend_tui.live.fix_patch import build_patch
    from ascend_tui.live.remedies import Trial, applied
    from ascend_tui.live.remedy_search import find_fix
    from ascend_tui.live.runner import run_live
    from ascend_tui.live.targets import load_target, split_spec

    if not 0.0 < args.tolerance <= 1.0:
        raise InputError("--tolerance", f"must be a cosine in (0, 1], got {args.tolerance}")
    options = run_options(args, target=args.target)
    path = split_spec(args.target)[0]
    check_outputs(args, [args.target, path])
    if args.patch:
        from ascend_tui.outputs import check_output_path

        check_output_path(args.patch, [args.target, path], option="--patch")
    progress = ProgressLine(sys.stderr, args.quiet)
    try:
        progress(f"loading {args.target}", 0, None)
        target = load_target(args.target)
        options = options.but(loss=target.loss)
        before = run_live(target.model, target.inputs, options, progress=progress)
        dev = select(options.device)
        dtype = torch_dtype(options.dtype) or model_dtype(target.model, target.inputs) or torch.float32
        progress("trying remedies", 0, None)
        trial = Trial(target.model, target.inputs, dev, dtype)
        result = find_fix(trial, target.model, before.findings, target.inputs, args.tolerance,
                          search=not args.no_search)
        after = None
        if result.chosen is not None:
            progress("verifying the fix", 0, None)
            fixed = copy.deepcopy(target.model)
            with applied(fixed, result.chosen):
                after = run_live(fixed, target.inputs, options, progress=progress)
    finally:
        progress.done()
    section = result.to_json()
    gone = _findings_gone(before, after)
    section["findings"] = gone
    remaining = [g for g in gone if not g["gone"]]
    verified = result.chosen is not None and not remaining
    section["verified"] = verified
    if result.chosen is not None and remaining:
        section["reason"] = (f"{len(remaining)} of {len(gone)} finding(s) remain with the fix applied "
                             f"({remaining[0]['message']})")
    patch = build_patch(target.path, target.factory, result.chosen, before.graph) if result.chosen else None
    section["patch"] = patch.to_json() if patch is not None else None
    section["cost"] = _cost(result)
    inv = after if after is not None else before
    inv.sections["fix"] = section
    if args.patch and patch is not None:
        Path(args.patch).write_text(patch.diff or patch.snippet, encoding="utf-8")
    return finish(inv, args, before=_lines(args, options, section, result, patch))


def _findings_gone(before: Any, after: Any) -> list[dict[str, Any]]:
    """Each error the fix was for (introduced, before) and whether the run with the fix still has it."""
    keys = set()
    if after is not None:
        keys = {(f.check, f.kind, f.node) for f in after.findings if f.severity == "error"}
    out = []
    for f in before.findings:
        if f.severity == "error" and f.attribution == "introduced":
            out.append({"check": f.check, "kind": f.kind, "node": f.node, "message": f.message,
                        "gone": after is not None and (f.check, f.kind, f.node) not in keys})
    return out


def _before(result: Any) -> Any:
    """The run the fix is measured against: without remedies, or with only the base ones (clamps) when that failed."""
    if not result.baseline.error:
        return result.baseline
    return next((o for o in result.tried if not o.error and set(o.remedies) <= set(result.base)), result.baseline)


def _cost(result: Any) -> dict[str, Any]:
    """Time per step and peak memory of the fix against the run without it (or with only the base remedies)."""
    ref = _before(result)
    o = result.chosen_outcome
    if o is None or ref is None:
        return {}
    out: dict[str, Any] = {"step_seconds_before": _num(ref.step_s), "step_seconds_after": _num(o.step_s)}
    if math.isfinite(ref.step_s) and ref.step_s > 0 and math.isfinite(o.step_s):
        out["step_time_change"] = o.step_s / ref.step_s - 1.0
    out["peak_bytes_before"], out["peak_bytes_after"] = ref.peak_bytes, o.peak_bytes
    return out


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _state(o: Any, tolerance: float) -> str:
    if o.error:
        return f"run failed: {o.error}"
    if o.reference_bad:
        return f"the float32 reference has {o.reference_bad} Inf/NaN itself"
    if o.inf_count or o.nan_count:
        return f"{o.inf_count} Inf, {o.nan_count} NaN in the outputs"
    mark = "within" if o.within(tolerance) else "outside"
    return f"cosine {o.cosine:.6f}, relative error {o.rel_error:.3g} ({mark} tolerance)"


def _names(remedies: Any) -> str:
    return " + ".join(r.describe() for r in remedies) or "nothing changed"


def _lines(args: argparse.Namespace, options: Any, section: dict[str, Any], result: Any, patch: Any) -> list[str]:
    tol = result.tolerance
    lines = [f"fix: {args.target} in {options.dtype or 'its own dtype'} against the float32 reference, "
             f"tolerance cosine ≥ {tol}",
             f"  before: {_state(result.baseline, tol)}"]
    for o in result.tried:
        lines.append(f"  tried {_names(o.remedies)}: {_state(o, tol)}")
    if result.search is not None:
        s = result.search
        lines += [f"  search: {step}" for step in s.steps]
        found = ", ".join(f"`{m}`" if m else "the whole model" for m in s.modules) if s.modules is not None else None
        lines.append(f"  search result after {s.runs} re-runs: " + (f"{found} in float32" if found else "none"))
    cost = section.get("cost") or {}
    if section["verified"]:
        o = result.chosen_outcome
        change = cost.get("step_time_change")
        timing = f", {change:+.0%} step time" if change is not None else ""
        memory = "" if o.peak_bytes is not None else " (peak memory: no counters on this device)"
        ref = _before(result)
        was = f"cosine {ref.cosine:.6f}" if math.isfinite(ref.cosine) else _state(ref, tol)
        lines.append(f"fix verified: {was} → cosine {o.cosine:.6f} with {_names(result.chosen)}{timing}{memory}; "
                     f"{len(section['findings'])} finding(s) gone; {result.runs} runs in all")
    else:
        lines.append(f"not verified: {section.get('reason') or 'no remedy worked'}")
    if patch is not None and section["verified"]:
        lines.append("patch (apply with `patch -p1`):" if patch.diff else "snippet (add after the model is built):")
        lines += (patch.diff or patch.snippet).rstrip("\n").splitlines()
        lines += [f"note: {n}" for n in patch.notes]
    return lines
