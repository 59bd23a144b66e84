"""Reference-free precision check of one msprobe tensor dump: every replayable API against float64 on the CPU.

With no golden run, each `Functional.*` / `Torch.*` / `Tensor.*` forward record whose inputs were dumped
is re-run twice with torch on the CPU: on its inputs in float64 (the reference) and on its inputs as
dumped, in the run's dtype (what a correct kernel of that dtype gives). The dumped output's error against
float64, in units of its dtype's roundoff, ranks the APIs; one far beyond both its dtype's band and the
CPU kernel's own error in that dtype is less precise than its dtype allows (msprobe's acc_check, done for
the user from the dump alone).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ascend_tui.checks.precision_band import OP_BAND, unit_roundoff
from ascend_tui.errors import InputError
from ascend_tui.readers.msprobe import dump as msprobe
from ascend_tui.readers.msprobe.graph import API_NAME


@dataclass(frozen=True, slots=True)
class ApiPrecision:
    """One replayed API: its dumped output's error against float64 and a CPU kernel's, in units of u."""

    entry: str
    dtype: str
    numel: int
    error: float  # ||dumped - float64|| / ||float64||
    units: float  # error / u of the output dtype
    kernel_units: float  # the same for the op re-run on the CPU in the dumped dtype
    imprecise: bool

    @property
    def excess(self) -> float:
        """How many times the CPU kernel's own error in this dtype (at least one roundoff) the dumped error is.

        A sum that cancels to about 0 is far from float64 in any dtype; only beyond what a correct kernel
        of the same dtype does is the dumped kernel to blame.
        """
        k = self.kernel_units if not math.isnan(self.kernel_units) else 0.0
        return self.units / max(k, 1.0)

    def to_json(self) -> dict[str, Any]:
        return {"excess": self.excess, "entry": self.entry, "dtype": self.dtype, "numel": self.numel,
                "error": self.error,
                "units": self.units, "kernel_units": self.kernel_units, "imprecise": self.imprecise}


def _rel(a: np.ndarray, ref: np.ndarray) -> float:
    a, ref = a.astype(np.float64).reshape(-1), ref.astype(np.float64).reshape(-1)
    if a.shape != ref.shape or not (np.isfinite(a).all() and np.isfinite(ref).all()):
        return math.nan
    n = float(np.linalg.norm(ref))
    d = float(np.linalg.norm(a - ref))
    return d / n if n > 0 else (0.0 if d == 0 else math.inf)


def _first_tensor(x: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (list, tuple)):
        return next((t for t in (_first_tensor(i) for i in x) if t is not None), None)
    return None


def _np(t: Any) -> np.ndarray:
    import torch

    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def check_api(entry: str, record: Mapping[str, Any], data_dir: Path) -> ApiPrecision | None:
    """Replay one forward API record in float64 and in its dtype (None: not replayable or not floating)."""
    import torch

    from ascend_tui.offline.replay import golden_outputs, record_value, resolve

    fn = resolve(entry)
    if fn is None:
        return None
    try:
        outs = golden_outputs(record, data_dir)
        if not outs or not outs[0].is_floating_point():
            return None
        dumped = outs[0]
        u = unit_roundoff(str(dumped.dtype))
        if math.isnan(u):
            return None
        results = []
        for dtype in (torch.float64, None):
            args = [record_value(v, data_dir, dtype) for v in record.get("input_args") or ()]
            kwargs = {k: record_value(v, data_dir, dtype) for k, v in (record.get("input_kwargs") or {}).items()}
            with torch.no_grad():
                results.append(_first_tensor(fn(*args, **kwargs)))
    except (ValueError, TypeError, RuntimeError, InputError, IndexError, AttributeError, KeyError):
        return None
    ref, kernel = results
    if ref is None or kernel is None or tuple(ref.shape) != tuple(dumped.shape):
        return None
    err = _rel(_np(dumped), ref.numpy())
    kerr = _rel(_np(kernel.to(dumped.dtype)), ref.numpy())
    if math.isnan(err):
        return None
    units, kunits = err / u, kerr / u
    imprecise = units > OP_BAND * max(kunits if not math.isnan(kunits) else 0.0, 1.0)
    return ApiPrecision(entry, str(dumped.dtype).removeprefix("torch."), int(dumped.numel()), err, units, kunits,
                        imprecise)


def check_dump(path: Path, limit: int = 2000) -> tuple[list[ApiPrecision], int]:
    """Every replayable API of a tensor dump, worst first, and how many forward API records could not be replayed."""
    ranks, _notes = msprobe.rank_folders(Path(path))
    rank = ranks[0]
    header, data = msprobe.read_dump(rank / "dump.json")
    if str(header.get("task") or "") != "tensor":
        raise InputError(rank / "dump.json", "a reference-free check needs a `task: tensor` dump (the inputs' "
                                             "values); this one has statistics only")
    data_dir = rank / "dump_tensor_data"
    out: list[ApiPrecision] = []
    skipped = 0
    for entry, record in list(data.items())[:limit]:
        m = API_NAME.match(str(entry))
        if m is None or m["dir"] != "forward" or not isinstance(record, dict):
            continue
        r = check_api(str(entry), record, data_dir)
        if r is None:
            skipped += 1
        else:
            out.append(r)
    out.sort(key=lambda r: (not r.imprecise, -r.excess, -r.units))
    return out, skipped


def investigate(path: Path) -> tuple[Any, list[ApiPrecision], int]:
    """The dump's investigation with a finding per API less precise than its dtype allows; (inv, ranking, skipped)."""
    from ascend_tui.evidence import Finding
    from ascend_tui.readers.msprobe.graph import PARAM_GRAD, Builder

    rows, skipped = check_dump(path)
    inv = msprobe.load(Path(path))  # the reader runs no checks: the findings here are the only ones
    ranks, _ = msprobe.rank_folders(Path(path))
    rank = ranks[0]
    _header, data = msprobe.read_dump(rank / "dump.json")
    entries = [e for name, rec in data.items()
               if (e := msprobe.parse_entry(str(name), rec, rank / "dump.json")) is not None]
    builder = Builder(entries, msprobe.read_construct(rank / "construct.json"),
                      msprobe.read_stacks(rank / "stack.json"))
    builder.build(None, None)
    builder.finish(sum(1 for n in data if not PARAM_GRAD.match(str(n))) - len(entries))
    found = []
    for r in rows:
        nid = builder.ids.get(r.entry, "")
        if not r.imprecise or nid not in inv.graph:
            continue
        n = inv.graph.node(nid)
        found.append(Finding(
            "precision", "imprecise-kernel", "error", nid, n.op_type, n.module, n.index,
            f"{r.entry}: output is {r.units:.0f}u from float64 in {r.dtype}, {r.excess:.0f}x what the op computed "
            f"on the CPU in {r.dtype} gives ({r.kernel_units:.2g}u): the kernel is less precise than its dtype allows",
            attribution="introduced", metrics=r.to_json(),
            hint="run this op in a wider dtype or report the kernel; `compare` against a float32 run confirms it"))
    inv.add_findings(found)
    inv.run.extra["reference_free"] = {"apis": [r.to_json() for r in rows], "skipped": skipped}
    return inv, rows, skipped
