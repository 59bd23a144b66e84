"""The one number formatter (local copy until the integrator's lands: same names, same output)."""

from __future__ import annotations

import math


def count(n: int) -> str:
    """`1,619`."""
    return f"{int(n):,}"


def nbytes(n: float) -> str:
    """`1.5 MiB`."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def magnitude(x: float) -> str:
    """`3.4e+05` style; `inf`, `-inf`, `nan` for non-finite values."""
    if not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return f"{x:.2g}" if 1e-3 <= abs(x) < 1e4 or x == 0 else f"{x:.1e}"


def ratio(x: float) -> str:
    """`x120`."""
    return f"x{x:.3g}" if math.isfinite(x) else f"x{magnitude(x)}"


def percent(x: float) -> str:
    """`12%`, `0.4%` for a fraction in [0, 1]."""
    return f"{x:.0%}" if abs(x) >= 0.01 or x == 0 else f"{x:.1%}"


def duration_us(us: float) -> str:
    """`12.3 ms` for microseconds."""
    if us < 1000:
        return f"{us:.1f} us"
    if us < 1e6:
        return f"{us / 1000:.1f} ms"
    return f"{us / 1e6:.2f} s"


def plural(n: int, word: str) -> str:
    """`1 error`, `2 errors`."""
    return f"{count(n)} {word}{'' if n == 1 else 's'}"
