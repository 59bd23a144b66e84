"""The one number formatter: counts, bytes, magnitudes, ratios and durations, as every screen and the CLI print them.

One place so the same number never reads two ways (`1,619` next to `1619`, `x1e+02` next to `x120`).
The rule: every number printed in plain notation whose integer part reaches 1,000 has comma thousands
separators (counts, magnitudes, ratios, sizes, percentages, durations); scientific notation is kept
for magnitudes from 1e6 on (and below 1e-4) where the digits would not be significant.
"""

from __future__ import annotations

import math
from typing import Any

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def count(n: Any) -> str:
    """`1,619` — whole counts with thousands separators; `-` for missing."""
    if n is None:
        return "-"
    value = float(n)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{int(value):,}"


def plural(n: int, noun: str, plural_form: str | None = None) -> str:
    """`1 error`, `2 errors` (count formatted with separators)."""
    word = noun if n == 1 else (plural_form or (noun + "es" if noun.endswith(("s", "x", "ch", "sh")) else noun + "s"))
    return f"{count(n)} {word}"


def nbytes(n: Any) -> str:
    """`1.5 MiB` — sizes as memory tools print them; no `-0 B`."""
    if n is None:
        return "-"
    value = float(n)
    if not math.isfinite(value):
        return magnitude(value)
    sign = "-" if value < 0 and round(abs(value)) != 0 else ""
    value = abs(value)
    for unit in _BYTE_UNITS:
        if value < 1024 or unit == _BYTE_UNITS[-1]:
            return f"{sign}{value:,.0f} {unit}" if unit == "B" else f"{sign}{value:,.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def magnitude(x: Any, digits: int = 4) -> str:
    """A measured value: integers as counts, others to `digits` significant digits; `inf`, `-inf`, `nan` spelled out."""
    if x is None:
        return "-"
    if isinstance(x, bool) or not isinstance(x, (int, float)) and not hasattr(x, "__float__"):
        return str(x)
    value = float(x)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < 1e15:
        return count(value)
    if 1e-4 <= abs(value) < 1e6:
        short = f"{value:.{digits}g}"
        if abs(float(short)) < 1000:
            return short
        # 1000 <= |x| < 1e6: grouped like a count, keeping `digits` significant digits where there are decimals
        decimals = max(digits - len(str(int(abs(float(short))))), 0)
        grouped = f"{value:,.{decimals}f}"
        return grouped.rstrip("0").rstrip(".") if "." in grouped else grouped  # trailing zeros dropped, as `g` does
    return f"{value:.{max(digits - 1, 1)}e}"


def ratio(x: Any) -> str:
    """`x120`, `x1.5`, `x3.4e+39` — growth factors, the same way everywhere."""
    if x is None:
        return "-"
    value = float(x)
    if math.isnan(value):
        return "x nan"
    if math.isinf(value):
        return "x inf"
    if abs(value) >= 1e6 or (value != 0 and abs(value) < 1e-3):
        return f"x{value:.2g}"
    if abs(value) >= 100:
        return f"x{value:,.0f}"
    return f"x{value:.3g}"


def percent(share: Any, digits: int = 1) -> str:
    """`12.5%` from a share in [0, 1]; `<0.1%` for tiny non-zero shares."""
    if share is None:
        return "-"
    value = float(share) * 100
    if math.isnan(value):
        return "nan"
    if 0 < abs(value) < 10 ** -digits:
        return f"<{10 ** -digits:g}%"
    return f"{value:,.{digits}f}%"


def duration_us(us: Any) -> str:
    """`850 us`, `12.3 ms`, `4.20 s` from microseconds."""
    if us is None:
        return "-"
    value = float(us)
    if not math.isfinite(value):
        return magnitude(value)
    a = abs(value)
    if a < 1000:
        return f"{value:.3g} us" if a < 10 else f"{value:,.0f} us"
    if a < 1_000_000:
        return f"{value / 1000:.3g} ms" if a < 100_000 else f"{value / 1000:,.0f} ms"
    seconds = value / 1_000_000
    return f"{seconds:.3g} s" if abs(seconds) < 1000 else f"{seconds:,.0f} s"
