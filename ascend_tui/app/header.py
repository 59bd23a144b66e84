"""The header line: what is on screen and the settings that made it, cut to fit the terminal's width.

Parts carry a rank; when the line is too long the least important parts go first, so a narrow
terminal shows fewer words, never a word cut in half.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ascend_tui.fmt import plural

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation

HEADER_CHROME = 18 + 3  # Textual's header icon (8) and clock space (10), and the " — " between title and subtitle
SHORT_CHECK = {"overflow": "ovf", "memory": "mem", "precision": "prec", "profile": "prof"}
SHORT_DTYPE = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64"}


def header_title(inv: Investigation | None) -> str:
    """The name of what is open: the model or file name, the graph's name, or the app's."""
    if inv is None:
        return "ascend-tui"
    return Path(inv.run.target).name if inv.run.target else (inv.graph.name or inv.run.source or "ascend-tui")


def header_parts(inv: Investigation, *, following: bool = False) -> list[tuple[int, str, str]]:
    """(rank, long text, short text) for each part of the subtitle; rank 0 always stays."""
    summary = inv.summary()
    run = inv.run
    parts: list[tuple[int, str, str]] = []
    if following:
        parts.append((0, "● following", "●"))
    errors = plural(summary["errors"], "error")
    parts.append((0, errors, errors.replace(" errors", " err").replace(" error", " err")))
    warnings = plural(summary["warnings"], "warning")
    parts.append((1, warnings, warnings.replace(" warnings", " warn").replace(" warning", " warn")))
    if run.source == "live":
        dtype = SHORT_DTYPE.get(run.dtype, run.dtype)
        ref = run.reference.split(":")[-1] if run.reference else ""
        short_ref = SHORT_DTYPE.get(ref, ref)
        parts.append((1, f"{run.dtype} vs {ref} reference" if ref else run.dtype,
                      f"{dtype}/{short_ref}" if ref else dtype))
        backend = str(run.device.get("backend", "")) if run.device else ""
        if backend and backend != "none":
            parts.append((2, backend, backend))
        if run.checks:
            parts.append((3, ",".join(run.checks), ",".join(SHORT_CHECK.get(c, c) for c in run.checks)))
        if run.iterations > 1:
            parts.append((4, plural(run.iterations, "iteration"), f"{run.iterations} it"))
        if inv.run.extra.get("backward"):
            parts.append((3, "with backward", "+bwd"))
    else:
        parts.append((2, run.source, run.source))
    point = str(run.extra.get("point") or "")  # one step/rank of a dump or profile with several (`i` picks another)
    if point:
        parts.append((0, point, point.rpartition("/")[0] or point))
    ops = len(inv.graph.execution_order())
    parts.append((2, plural(ops, "op"), plural(ops, "op")))
    if any("torch.compile" in str(n) for n in run.extra.get("notes", ()) or ()):
        parts.append((1, "compiled model captured eagerly", "eager, not compiled"))
    return parts


def fit_subtitle(parts: list[tuple[int, str, str]], budget: int) -> str:
    """The subtitle in at most `budget` cells: shorten parts from the least important up, then drop them."""
    sep = " · "
    texts = [long for _rank, long, _short in parts]
    ranks = [rank for rank, _long, _short in parts]

    def fits() -> bool:
        return len(sep.join(t for t in texts if t).replace("● · ", "● ")) <= budget

    for i in sorted(range(len(parts)), key=lambda k: -ranks[k]):
        if fits():
            break
        texts[i] = parts[i][2]
    for i in sorted(range(len(parts)), key=lambda k: (-ranks[k], -k)):
        if fits() or ranks[i] == 0:
            break
        texts[i] = ""
    return sep.join(t for t in texts if t).replace("● · ", "● ") if fits() else ""


def header_for(inv: Investigation | None, width: int, *, following: bool = False) -> tuple[str, str]:
    """(title, subtitle) that fit a header `width` cells wide."""
    title = header_title(inv)
    if inv is None and following:
        return title, fit_subtitle([(0, "● following", "●"), (1, "waiting for the first report line", "waiting")],
                                   max(0, width - HEADER_CHROME - len(title)))
    if inv is None:
        hint = "press O to open a file, ? for keys"
        return title, hint if len(title) + len(hint) <= width - HEADER_CHROME else "? for keys"
    parts = header_parts(inv, following=following)
    subtitle = fit_subtitle(parts, max(0, width - HEADER_CHROME - len(title)))
    if not subtitle:  # too narrow for the name and what must stay: what must stay wins
        title = fit_subtitle([p for p in parts if p[0] == 0], max(0, width - HEADER_CHROME + 3)) or title
    return title, subtitle
