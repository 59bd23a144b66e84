"""The rounding band: random tensors cast to float16/bfloat16 never leave it, on statistics, tensors and cosine."""

from __future__ import annotations

import math

import numpy as np
import torch  # in the test command: bfloat16 rounding needs it

from ascend_tui.checks.precision import tensor_metrics
from ascend_tui.checks.precision_band import band, narrower, stats_error, tensor_error, unit_roundoff


def _stats(x: np.ndarray) -> tuple[float, float, float, float]:
    """msprobe's statistics of a tensor (computed in float32 as msprobe does for low-precision dumps)."""
    t = torch.from_numpy(x).float()
    return float(t.max()), float(t.min()), float(t.mean()), float(t.norm())


def test_unit_roundoffs_and_the_narrower_dtype() -> None:
    assert unit_roundoff("torch.bfloat16") == 2.0 ** -8 and unit_roundoff("float16") == 2.0 ** -11
    assert unit_roundoff("float32") == 2.0 ** -24 and math.isnan(unit_roundoff("int64"))
    assert narrower("torch.float32", "torch.bfloat16") == "bfloat16" and narrower("float16", "bf16") == "bfloat16"


def test_random_tensors_cast_to_a_lower_dtype_never_leave_the_band() -> None:
    worst = {"float16": 0.0, "bfloat16": 0.0}
    for seed in range(300):
        rng = np.random.default_rng(seed)
        shape = tuple(int(d) for d in rng.integers(1, 40, size=rng.integers(1, 4)))
        scale = 10.0 ** rng.uniform(-6, 4)
        kind = seed % 3
        x = (rng.standard_normal(shape) if kind == 0 else rng.uniform(0, 1, shape) if kind == 1
             else rng.standard_exponential(shape) * rng.choice([-1, 1], shape)) * scale + (seed % 5 == 0) * scale
        x = x.astype(np.float32)
        for dtype, tdt in (("float16", torch.float16), ("bfloat16", torch.bfloat16)):
            if dtype == "float16" and np.abs(x).max() > 6e4:
                continue  # beyond float16's range a cast overflows: that is no rounding
            low = torch.from_numpy(x).to(tdt).float().numpy()
            b = band(f"torch.{dtype}", "torch.float32", x.size)
            e = stats_error(_stats(low), _stats(x), x.size, b.tiny)
            assert e <= b.stats, (seed, dtype, e, b.stats)
            m = tensor_metrics(low, x)
            te = tensor_error(m.value("cosine"), m.value("euc_dist"), float(np.linalg.norm(x.astype(np.float64))),
                              x.size, b.tiny)
            assert x.size == 1 or te <= b.rel_l2 * (1 + 1e-6), (seed, dtype, te)  # msprobe: no L2 of a 0-d tensor
            if x.size > 1 and not isinstance(m.cosine, str) and np.abs(x).min() > 1e-4:
                assert m.value("cosine") >= b.cosine_min - 1e-6, (seed, dtype, m.cosine)
            worst[dtype] = max(worst[dtype], e / b.u)
    # the band is tight, not vacuous: rounding uses a good part of it
    assert worst["bfloat16"] > 0.2 and worst["float16"] > 0.2


def test_a_few_percent_off_leaves_the_band() -> None:
    x = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
    b = band("bfloat16", "float32", x.size)
    assert stats_error(_stats(x * 1.03), _stats(x), x.size) > 5 * b.stats
