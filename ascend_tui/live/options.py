"""`RunOptions`: the one set of settings a live run takes, from the CLI or the app to the checks.

Plain data (no torch), so the interfaces build it without importing torch, and the runner
hands the same object to every check.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

DTYPES = ("float16", "bfloat16", "float32", "float64")  # float64: a reference on request (cpu:float64)


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
