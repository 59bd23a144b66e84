"""How the precision view copes with a 100,000-row compare: open, sort by a column, filter by result and by name.

Every key is timed on the big table and on a 1,000-row one in the same run and the ratio printed: rows
are built only when drawn, so a key should cost about the same whatever the size (goal: ratios near 1;
the Pilot round trip and the redraw are most of each number, at any size). The filters and sorts alone
are timed too (goal: under 50 ms at 100k once a column's array is built; the first use builds it). The table is synthetic but has every msprobe column (`compare_columns`), tensor-mode
cells like the offline compare writes, results 90% pass / 8% warning / 2% error and 1% unmatched.
The eager cost the view avoids (building every Row for each key, as it did before) is printed beside.
Run: `python benchmarks/precision_view.py [--rows 100000] [--baseline 1000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ascend_tui.graph.opgraph import OpGraph
from ascend_tui.investigation import Investigation, RunInfo
from ascend_tui.offline.compare import VIEW_COLUMNS
from ascend_tui.readers.msprobe.compare_columns import EXTRA_KEYS

SIZE = (160, 48)
KEYS = (("sort: name", "s"), ("sort: cosine", "s"), ("sort: max abs err", "s"), ("reverse", "S"),
        ("result: error", "f"), ("result: warning", "f"), ("result: pass", "f"), ("result: unmatched", "f"),
        ("result: all", "f"), ("page down", "pagedown"), ("last row", "G"), ("name filter opens", "slash"),
        ("type l", "l"), ("type i", "i"), ("type n", "n"), ("type e", "e"), ("filter kept", "enter"),
        ("columns dialog", "c"), ("columns applied", "enter"))


def synthetic(n: int) -> Investigation:
    """A compare of `n` rows with every column filled as the offline compare fills a tensor-mode row."""
    rng = np.random.default_rng(0)
    cosine = 1 - np.abs(rng.standard_normal(n)) * 1e-4
    max_abs = np.abs(rng.standard_normal(n)) * 10.0 ** rng.uniform(-6, 1, n)
    results = rng.choice(["pass", "warning", "error"], n, p=[0.9, 0.08, 0.02])
    rows = []
    for i in range(n):
        name = f"Functional.linear.{i}.forward.output.0" if i % 3 else f"Module.layers.{i}.mlp.MLP.forward.0.input.0"
        base = [name, None, 0, float(cosine[i]), float(max_abs[i]), float(max_abs[i] * 3), float(max_abs[i] / 5),
                float(rng.uniform()), str(results[i]), "introduced" if results[i] == "error" and i % 7 == 0 else ""]
        extra = {"bench_name": name, "npu_dtype": "torch.bfloat16", "bench_dtype": "torch.float32",
                 "npu_shape": "[8, 512, 1024]", "bench_shape": "[8, 512, 1024]", "npu_requires_grad": "False",
                 "bench_requires_grad": "False", "euc_dist": float(max_abs[i] * 40),
                 "five_thousandths": float(rng.uniform()), "npu_max": 3.25, "npu_min": -3.5, "npu_mean": 0.01,
                 "npu_norm": 812.5, "bench_max": 3.2512, "bench_min": -3.4987, "bench_mean": 0.0101,
                 "bench_norm": 812.49, "requires_grad_consistent": "True", "err_message": "N/A", "stack": "N/A",
                 "npu_data_name": f"{name}.pt", "bench_data_name": f"{name}.pt"}
        rows.append(base + [extra.get(k, "N/A") for k in EXTRA_KEYS])
    unmatched = [["target", f"Functional.dropout.{i}.forward.output.0", f"Functional.dropout.{i}.forward",
                  "torch.bfloat16", "[8, 512, 1024]"] for i in range(max(1, n // 100))]
    run = RunInfo(target=f"synthetic-{n}", source="msprobe compare", checks=("precision",), dtype="bfloat16",
                  reference="golden",
                  extra={"mode": "tensor",
                         "precision": {"columns": [*VIEW_COLUMNS, *EXTRA_KEYS], "rows": rows, "rows_total": n},
                         "precision_unmatched": {"columns": ["side", "name", "record", "dtype", "shape"],
                                                 "rows": unmatched}})
    return Investigation(OpGraph(f"synthetic-{n}"), run=run)


async def _timings(inv: Investigation) -> dict[str, float]:
    """Open the view on `inv` and time each key of KEYS (seconds, key processed and the screen refreshed)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_app_views import Host

    from ascend_tui.app.screens.precision import PrecisionScreen

    out: dict[str, float] = {}
    t0 = time.perf_counter()
    app = Host(lambda: PrecisionScreen(inv))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        out["open"] = time.perf_counter() - t0
        for label, key in KEYS:
            t = time.perf_counter()
            await pilot.press(key)
            await pilot.pause()
            out[label] = time.perf_counter() - t
    return out


def _eager(inv: Investigation) -> float:
    """Building every row of the table once, as the view did on each key before its rows became lazy."""
    from ascend_tui.app.screens.precision import PrecisionScreen

    screen: Any = PrecisionScreen(inv)
    t = time.perf_counter()
    for i in range(len(screen.data)):
        screen._make_row(i)
    return time.perf_counter() - t


def _model(inv: Investigation) -> dict[str, float]:
    """The part of each key that grows with the rows: filters and sorts on the columns (`PrecisionRows`)."""
    from ascend_tui.app.screens.precision import unmatched_table
    from ascend_tui.app.screens.precision_rows import PrecisionRows

    raw = inv.run.extra["precision"]
    out: dict[str, float] = {}

    def timed(label: str, fn: Any) -> Any:
        t = time.perf_counter()
        r = fn()
        out[label] = time.perf_counter() - t
        return r

    data = timed("rows in", lambda: PrecisionRows(raw["columns"], raw["rows"], unmatched_table(inv), "tensor"))
    idx = timed("select all", lambda: data.select("all"))
    timed("result error (first)", lambda: data.select("error"))
    timed("result error", lambda: data.select("error"))
    timed("name 'line' (first)", lambda: data.select("all", needle="line"))
    timed("name 'linea' (narrows)", lambda: data.select("all", needle="linea"))
    timed("name 'mlp'", lambda: data.select("all", needle="mlp"))
    timed("sort cosine (first)", lambda: data.sort(idx, "cosine", False))
    timed("sort cosine", lambda: data.sort(idx, "cosine", True))
    timed("sort name (first)", lambda: data.sort(idx, "name", False))
    timed("sort name", lambda: data.sort(idx, "name", True))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--baseline", type=int, default=1_000)
    args = parser.parse_args()
    import os
    import tempfile

    os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="atui-bench-")  # no saved column choice
    t = time.perf_counter()
    big = synthetic(args.rows)
    print(f"built {args.rows:,} synthetic rows in {time.perf_counter() - t:.2f} s (not part of any timing)")
    small = synthetic(args.baseline)
    base = asyncio.run(_timings(small))
    measured = asyncio.run(_timings(big))
    print(f"{'step':<22}{args.rows:>10,} rows{args.baseline:>10,} rows{'ratio':>8}")
    for label in measured:
        ratio = measured[label] / base[label] if base[label] else float("nan")
        print(f"{label:<22}{measured[label] * 1000:>11.1f} ms{base[label] * 1000:>11.1f} ms{ratio:>8.1f}")
    model, model_base = _model(big), _model(small)
    print("the filters and sorts alone (what grows with the rows):")
    for label in model:
        ratio = model[label] / model_base[label] if model_base[label] else float("nan")
        print(f"  {label:<24}{model[label] * 1000:>9.1f} ms{model_base[label] * 1000:>11.2f} ms{ratio:>8.0f}")
    keys = [v for k, v in measured.items() if k != "open"]
    ratios = [measured[k] / base[k] for k in measured if k != "open" and base[k]]
    print(f"slowest key at {args.rows:,} rows: {max(keys) * 1000:.1f} ms; key ratios {min(ratios):.1f}-"
          f"{max(ratios):.1f} (goal: near 1)")
    print(f"building every row eagerly (the cost each key avoids): {_eager(big) * 1000:.0f} ms at {args.rows:,} rows")


if __name__ == "__main__":
    main()
