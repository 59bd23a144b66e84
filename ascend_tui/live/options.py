"""`RunOptions`: the one set of settings a live run takes, from the CLI or the app to the checks.

Plain data (no torch), so the interfaces build it without importing torch, and the runner
hands the same object to every check.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Mapping

DTYPES = ("float16", "bfloat16", "float32", "float64")  # float64: a reference on request (cpu:float64)
# The check settings (`RunOptions.settings`) the built-in checks read; a check of your own passes its
# knobs inside `settings={...}`, which is taken as it is.
KNOWN_SETTINGS = frozenset({"api_ids", "headroom_bits", "inf_nan_mode", "overflow_evidence", "precision_replays",
                            "precision_thresholds", "profile_coarse", "profile_steps", "profile_warmup", "range_dtype",
                            "underflow_fraction"})


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What to run, where, in which dtype, against which reference, and each check's own knobs.

    `checks` holds check names (`"overflow"`, `"memory"`) or `LiveCheck` objects (a check the
    runner has never heard of runs just the same). `settings` carries check-specific knobs
    (`headroom_bits`, `underflow_fraction`, `range_dtype`, `inf_nan_mode`, ...) and `api_ids`
    (name each op's framework API call as msprobe does; see `live.recording`). `detail` is
    "module" (coarse-to-fine: module-level evidence, operators only around the first bad module;
    see `live.coarse`) or "full" (every operator of the step recorded).
    """

    checks: tuple[Any, ...] = ("overflow",)
    device: str = "auto"
    dtype: str | None = None
    reference: str | None = "cpu:float32"
    iterations: int = 1
    backward: bool = False
    loss: Callable[[Any], Any] | None = None
    target: str = ""
    detail: str = "module"
    settings: Mapping[str, Any] = field(default_factory=dict)

    def but(self, **changes: Any) -> RunOptions:
        """A copy with some fields changed (unknown names raise `TypeError`)."""
        return replace(self, **changes)

    def setting(self, name: str, default: Any = None) -> Any:
        """A check-specific knob, or `default`."""
        return self.settings.get(name, default)

    @property
    def check_names(self) -> tuple[str, ...]:
        """The names of the requested checks, in order."""
        return tuple(c if isinstance(c, str) else str(getattr(c, "name", type(c).__name__)) for c in self.checks)


def as_run_options(options: Any = None, **settings: Any) -> RunOptions:
    """`options` (a `RunOptions`, a mapping of settings, or None) with keyword settings applied on top.

    A name that is a `RunOptions` field (`checks`, `dtype`, ...) sets that field; a built-in check's
    knob (`KNOWN_SETTINGS`: `inf_nan_mode=False`, `{"headroom_bits": 2}`) goes into `settings`, as
    before there was a `RunOptions`; any other name is a `TypeError` (a typo must not pass silently),
    and so is anything else as `options`.
    """
    if options is None:
        base = RunOptions()
    elif isinstance(options, RunOptions):
        base = options
    elif isinstance(options, Mapping):
        if not all(isinstance(k, str) for k in options):
            raise TypeError("options: the mapping's keys must be setting names (str)")
        base, settings = RunOptions(), {**options, **settings}
    else:
        raise TypeError(f"options must be a RunOptions, a mapping of settings (e.g. {{'inf_nan_mode': False}}) "
                        f"or None, not {type(options).__name__}; settings can also be given as keywords")
    if not settings:
        return base
    names = {f.name for f in fields(RunOptions)}
    changes = {k: v for k, v in settings.items() if k in names}
    knobs = {k: v for k, v in settings.items() if k not in names}
    unknown = sorted(k for k in knobs if k not in KNOWN_SETTINGS)
    if unknown:
        raise TypeError(f"unknown run option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}: "
                        f"expected a RunOptions field ({', '.join(sorted(names))}) or a check setting "
                        f"({', '.join(sorted(KNOWN_SETTINGS))}); a check of your own takes settings={{...}}")
    if isinstance(changes.get("checks"), (list, str)):
        checks = changes["checks"]
        changes["checks"] = (checks,) if isinstance(checks, str) else tuple(checks)
    if isinstance(changes.get("settings"), Mapping):
        knobs = {**changes.pop("settings"), **knobs}
    if knobs:
        changes["settings"] = {**base.settings, **knobs}
    return base.but(**changes)
