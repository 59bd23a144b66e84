"""From an investigation's findings to a verified fix: the remedies its hints name, tried; and the smallest float32 set.

`plan_remedies` turns findings into typed remedies (keep the module that introduced an overflow or
a precision loss in float32, upcast its accumulations, normalise an un-normalised input, clamp an
out-of-range index). `find_fix` tries each, and when no single one brings the outputs within the
tolerance, `smallest_float32_set` searches the module tree: it lifts the modules the investigation
blamed towards the root until keeping them in float32 works, then bisects (delta debugging over
the children, ordered by the error the investigation measured in each subtree) down to a small set.
Every run is counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ascend_tui.live.remedies import Outcome, Remedy, Trial, float32_set, measured_normalisation

DEFAULT_TOLERANCE = 0.999


def module_scores(findings: Sequence[Any]) -> dict[str, float]:
    """Per-module error from the overflow and precision findings: introduced ones count fully, inherited half."""
    scores: dict[str, float] = {}
    for f in findings:
        if f.check not in ("overflow", "precision") or not f.module:
            continue
        err = f.metrics.get("error") if f.check == "precision" else 1.0
        try:
            value = float(err) if err is not None else 1.0
        except (TypeError, ValueError):
            value = 1.0
        value = min(max(value, 0.0), 2.0) * (1.0 if f.attribution == "introduced" else 0.5)
        scores[f.module] = max(scores.get(f.module, 0.0), value)
    return scores


def subtree_score(scores: dict[str, float], module: str) -> float:
    """The largest score at `module` or below it."""
    prefix = f"{module}." if module else ""
    return max((v for m, v in scores.items() if m == module or m.startswith(prefix)), default=0.0)


def plan_remedies(findings: Sequence[Any], inputs: Any) -> tuple[list[Remedy], list[Remedy]]:
    """(base remedies that every run needs: clamped indices; single remedies to try: float32, upcast, normalise)."""
    base: list[Remedy] = []
    singles: list[Remedy] = []
    for f in findings:
        if f.severity != "error" or f.attribution != "introduced":
            continue
        m = f.metrics
        if f.check == "memory" and f.kind == "out_of_bounds" and "valid_high" in m:
            r = Remedy("clamp", f.module, low=int(m.get("valid_low", 0)), high=int(m["valid_high"]),
                       reason=f"{f.kind} at `{f.node}`")
            if f.module and not any(b.module == r.module and b.kind == "clamp" for b in base):
                base.append(r)
        elif f.check in ("overflow", "precision"):
            why = f"{f.kind} at `{f.node}`"
            if f.module:
                for kind in ("float32", "upcast"):
                    if not any(s.kind == kind and s.module == f.module for s in singles):
                        singles.append(Remedy(kind, f.module, reason=why))
            rc = f.root_cause
            if rc is not None and rc.node.startswith("input:") and "normal" in rc.reason:
                arg = int(rc.node.split(":", 1)[1]) if rc.node.split(":", 1)[1].isdigit() else 0
                stats = measured_normalisation(inputs, arg)
                if stats is not None:
                    if not any(s.kind == "normalize" and s.argument == arg for s in singles):
                        singles.append(Remedy("normalize", "", argument=arg, mean=stats[0], std=stats[1],
                                              reason=f"{rc.reason} (root cause of {why})"))
    return base, singles


@dataclass
class SearchResult:
    """The float32 set the search settled on (None when even the whole model in float32 is not enough)."""

    modules: list[str] | None
    outcome: Outcome | None
    runs: int
    steps: list[str] = field(default_factory=list)  # what was tried, in order, for the report

    def to_json(self) -> dict[str, Any]:
        return {"modules": self.modules, "runs": self.runs, "steps": self.steps,
                "outcome": self.outcome.to_json() if self.outcome is not None else None}


def _parent(module: str) -> str:
    return module.rpartition(".")[0]


def _minimal(items: list[str], passes: Callable[[list[str]], bool], kept: list[str]) -> list[str]:
    """A small subset R of `items` with passes(kept + R), given passes(kept + items) (delta debugging by halves)."""
    if len(items) <= 1:
        return items
    half = len(items) // 2
    a, b = items[:half], items[half:]
    if passes(kept + a):
        return _minimal(a, passes, kept)
    if passes(kept + b):
        return _minimal(b, passes, kept)
    a2 = _minimal(a, passes, kept + b)
    return a2 + _minimal(b, passes, kept + a2)


def _drop_nested(modules: list[str]) -> list[str]:
    """Modules not inside another one of the list (a module in float32 takes its children with it)."""
    out = []
    for m in dict.fromkeys(modules):
        if not any(o != m and (o == "" or m.startswith(f"{o}.")) for o in modules):
            out.append(m)
    return out


def smallest_float32_set(trial: Trial, model: Any, seeds: Sequence[str], scores: dict[str, float],
                         base: Sequence[Remedy] = (), tolerance: float = DEFAULT_TOLERANCE) -> SearchResult:
    """The smallest set of modules to keep in float32 that brings the outputs within `tolerance`."""
    start = trial.runs
    steps: list[str] = []
    base = tuple(base)
    children = {name: [c for c, _ in mod.named_children()] for name, mod in model.named_modules()}

    def full(prefix: str, kids: list[str]) -> list[str]:
        return [f"{prefix}.{k}" if prefix else k for k in kids]

    def passes(mods: list[str]) -> bool:
        o = trial.measure(base + float32_set(_drop_nested(mods)))
        steps.append(f"{', '.join(f'`{m}`' if m else 'the whole model' for m in _drop_nested(mods)) or 'nothing'}"
                     f" in float32: {_verdict(o, tolerance)}")
        return o.within(tolerance)

    level = _drop_nested([s for s in seeds if s in children]) or [""]
    while not passes(level):
        if level == [""]:
            return SearchResult(None, trial.measure(base + float32_set([""])), trial.runs - start, steps)
        level = _drop_nested([_parent(m) for m in level])
    chosen = _minimal(sorted(level, key=lambda m: -subtree_score(scores, m)), passes, [])
    # refine downwards: a chosen module may be replaceable by a few of its children
    i = 0
    while i < len(chosen):
        mod = chosen[i]
        kids = full(mod, children.get(mod, []))
        others = chosen[:i] + chosen[i + 1:]
        if kids and passes(others + kids):
            ordered = sorted(kids, key=lambda m: -subtree_score(scores, m))
            smaller = _minimal(ordered, passes, others)
            chosen = others[:i] + smaller + others[i:]
            continue  # look again at what replaced it
        i += 1
    chosen = _drop_nested(chosen)
    return SearchResult(chosen, trial.measure(base + float32_set(chosen)), trial.runs - start, steps)


def _verdict(o: Outcome, tolerance: float) -> str:
    if o.error:
        return f"run failed ({o.error})"
    if o.inf_count or o.nan_count:
        return f"{o.inf_count} Inf, {o.nan_count} NaN"
    return f"cosine {o.cosine:.6f} {'≥' if o.within(tolerance) else '<'} {tolerance}"


@dataclass
class FixResult:
    """Everything a fix run found: the baseline, each remedy tried, the search, and the chosen remedies."""

    tolerance: float
    baseline: Outcome
    base: list[Remedy]
    tried: list[Outcome]
    search: SearchResult | None
    chosen: tuple[Remedy, ...] | None
    chosen_outcome: Outcome | None
    runs: int
    reason: str = ""  # when nothing was chosen: why, plainly
    layout: Any = None  # a layout_fix.LayoutResult when a layout finding named conversion pairs

    def to_json(self) -> dict[str, Any]:
        return {"tolerance": self.tolerance, "baseline": self.baseline.to_json(),
                "base_remedies": [r.to_json() for r in self.base], "tried": [o.to_json() for o in self.tried],
                "search": self.search.to_json() if self.search is not None else None,
                "chosen": [r.to_json() for r in self.chosen] if self.chosen is not None else None,
                "chosen_outcome": self.chosen_outcome.to_json() if self.chosen_outcome is not None else None,
                "runs": self.runs, "verified": self.chosen is not None, "reason": self.reason or None,
                "layout": self.layout.to_json() if self.layout is not None else None}


def find_fix(trial: Trial, model: Any, findings: Sequence[Any], inputs: Any,
             tolerance: float = DEFAULT_TOLERANCE, search: bool = True,
             focus: Sequence[Any] | None = None) -> FixResult:
    """Try the findings' remedies one by one, then search for the smallest float32 set; choose what works.

    `focus` (one cause's findings) limits the remedies tried to what those findings name; the base
    remedies (clamped indices) still come from every finding, so the run gets as far as it did.
    """
    from ascend_tui.live.layout_fix import plan_layout, try_layout

    base, singles = plan_remedies(findings, inputs)
    if focus is not None:
        singles = plan_remedies(focus, inputs)[1]
    layout = plan_layout(findings if focus is None else focus)
    baseline = trial.measure(())
    precision = bool(base or singles) or not baseline.within(tolerance)
    if not precision and not layout:
        return FixResult(tolerance, baseline, [], [], None, None, None, trial.runs,
                         f"nothing to fix: no error finding names a remedy, and the outputs already match the "
                         f"float32 reference (cosine {baseline.cosine:.6f})")
    if not precision:  # only the layout: the outputs are right as they are
        lr = try_layout(trial, (), layout, tolerance)
        chosen_l = lr.remedies if lr.accepted else None
        return FixResult(tolerance, baseline, [], [], None, chosen_l, lr.outcome if lr.accepted else None,
                         trial.runs, "" if lr.accepted else lr.reason, lr)
    tried = [trial.measure(tuple(base))] if base else []
    tried += [trial.measure((*base, r)) for r in singles]
    # a remedy that keeps the model's meaning (float32, upcast) is chosen before one that changes it (normalise)
    passing = [o for o in tried if o.within(tolerance)]
    keeps_meaning = [o for o in passing if not any(r.semantic and r not in base for r in o.remedies)]
    result_search = None
    if search and not keeps_meaning and isinstance(model, _module_type()) and (singles or not passing):
        seeds = [r.module for r in singles if r.kind == "float32"]
        result_search = smallest_float32_set(trial, model, seeds, module_scores(findings), base, tolerance)
    chosen: tuple[Remedy, ...] | None = None
    outcome: Outcome | None = None
    if keeps_meaning:
        # fewest remedies; then an upcast (only the accumulations) before a whole module in float32
        outcome = min(keeps_meaning, key=lambda o: (len(o.remedies), sum(r.kind == "float32" for r in o.remedies)))
    elif result_search is not None and result_search.modules is not None:
        outcome = result_search.outcome
    elif passing:
        outcome = passing[0]
    if outcome is not None:
        chosen = outcome.remedies
    lr = try_layout(trial, chosen if chosen is not None else tuple(base), layout, tolerance) if layout else None
    if lr is not None and lr.accepted and chosen is not None:
        chosen, outcome = (*chosen, *lr.remedies), lr.outcome
    reason = "" if chosen is not None else _why_not(baseline, tried, result_search, tolerance)
    return FixResult(tolerance, baseline, base, tried, result_search, chosen, outcome, trial.runs, reason, lr)


def _module_type() -> type:
    import torch

    return torch.nn.Module


def _why_not(baseline: Outcome, tried: list[Outcome], search: SearchResult | None, tolerance: float) -> str:
    """One plain sentence: why no remedy is claimed."""
    last = search.outcome if search is not None and search.outcome is not None else (tried[-1] if tried else baseline)
    if last.reference_bad:
        return (f"no remedy is claimed: the float32 reference itself has {last.reference_bad} Inf/NaN in its "
                f"outputs, so running in higher precision cannot fix this")
    if not tried and search is None:
        return "no remedy to try: the findings name no module, input or index a remedy can act on"
    what = "the whole model in float32" if search is not None else "every remedy tried"
    return f"no remedy brings the outputs within cosine ≥ {tolerance}: with {what}, {_verdict(last, tolerance)}"
