"""How long the graph view's layout takes on big graphs: the hierarchy, the collapsed drawing, opening modules.

The graph is `app_scale.synthetic(n)` (transformer-like layers under `model.layers.K`); each step is
timed on `--ops` operators and on `--baseline` operators in the same run, every run printed, with the
ratio of the medians. What a user waits for: the first (collapsed) drawing, and each module they open.
Run: `python benchmarks/graph_layout.py [--ops 100000] [--baseline 1000] [--repeat 3]`.
With `--app` the graph view itself is timed in the app (120x40, headless): `V` from the list, moving the
cursor, opening and closing modules, a walk (`n`), each press printed, on both sizes.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

from benchmarks.app_scale import synthetic
from ascend_tui.graph.drawing import paint_row
from ascend_tui.graph.hierarchy import Hierarchy
from ascend_tui.graph.layout import Layout


def _steps(n: int) -> list[tuple[str, Callable[[], object]]]:
    inv = synthetic(n)
    state: dict[str, object] = {}
    last = inv.graph.execution_order()[-1]

    def hierarchy() -> object:
        state["h"] = Hierarchy.of(inv.graph)
        state["lay"] = Layout(state["h"])  # type: ignore[arg-type]
        return state["h"]

    def lay() -> Layout:
        return state["lay"]  # type: ignore[return-value]

    def screen(opened: tuple[str, ...]) -> object:
        sc = lay().scene(opened)
        for y in range(40):  # one 160x40 screen painted
            paint_row(sc, y, 0, 160, lambda b: b.key)
        return sc

    chain = tuple(Hierarchy.chain(state.get("h") or hierarchy(), last))  # type: ignore[arg-type]
    hierarchy()
    return [("hierarchy (arrays, module tree)", hierarchy),
            ("collapsed: top modules", lambda: screen(())),
            ("open model", lambda: screen(("model",))),
            ("open model.layers (n/12 layers)", lambda: screen(("model", "model.layers"))),
            ("open the last layer too", lambda: screen(chain)),
            ("again (cached layouts)", lambda: screen(chain))]


def _time(n: int, repeat: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for _ in range(repeat):
        for name, fn in _steps(n):
            t = time.perf_counter()
            fn()
            out.setdefault(name, []).append(time.perf_counter() - t)
    return out


APP_KEYS = (("open the view (V)", "V"), ("cursor down (j)", "j"), ("close module (-)", "minus"),
            ("close module (-)", "minus"), ("open module (enter)", "enter"), ("cursor down (j)", "j"),
            ("next finding (n)", "n"), ("producer (p)", "p"), ("back to the list (esc)", "escape"))


def _app_times(n: int) -> list[tuple[str, float]]:
    import asyncio

    from ascend_tui.app.app import InvestigatorApp

    async def run() -> list[tuple[str, float]]:
        app = InvestigatorApp(synthetic(n), theme="ascend-dark")
        out = []
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            for name, key in APP_KEYS:
                t = time.perf_counter()
                await pilot.press(key)
                await pilot.pause()
                out.append((name, time.perf_counter() - t))
        return out

    return asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--baseline", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--app", action="store_true", help="time the view's keys in the app instead")
    args = ap.parse_args()
    if args.app:
        base, big = _app_times(args.baseline), _app_times(args.ops)
        for (name, b), (_n, t) in zip(base, big):
            print(f"{name:<28} {args.ops:,} ops: {t * 1000:.0f} ms | {args.baseline:,} ops: {b * 1000:.0f} ms")
        return
    import networkx  # noqa: F401 - imported once before timing, as the app has it by the time a module opens
    base, big = _time(args.baseline, args.repeat), _time(args.ops, args.repeat)
    for name in big:
        runs = ", ".join(f"{s * 1000:.1f}" for s in big[name])
        b = ", ".join(f"{s * 1000:.1f}" for s in base[name])
        ratio = statistics.median(big[name]) / max(1e-9, statistics.median(base[name]))
        print(f"{name:<36} {args.ops:,} ops: {runs} ms | {args.baseline:,} ops: {b} ms | x{ratio:.1f}")


if __name__ == "__main__":
    main()
