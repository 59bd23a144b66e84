"""`ascend-tui profile DIR_OR_TARGET [--baseline DIR] [--json PATH] [--open]`: where the time goes, in a terminal.

A profiler folder, kernel CSV or trace is read offline; a model file (`model.py[:factory]`) is
profiled live. With a baseline, the per-type and per-module diff is printed regressions first and
stored in the profile (`extra["baseline"]`) so the app's diff view shows the same numbers.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TextIO

from ascend_tui import fmt
from ascend_tui.errors import InputError

if TYPE_CHECKING:
    from ascend_tui.checks.profile import DiffRow
    from ascend_tui.investigation import Investigation
    from ascend_tui.progress import Progress


def add_parser(sub: Any) -> None:
    """The `profile` subcommand's arguments."""
    p = sub.add_parser("profile", help="where the time goes: a profiler folder, trace or kernel CSV offline, "
                                       "or a model file profiled live")
    p.add_argument("target", help="*_ascend_pt / PROF_* / OPPROF_* folder, cluster folder, kernel_details.csv, "
                                  "trace JSON, or path/to/model.py[:factory]")
    p.add_argument("--baseline", metavar="DIR", help="an earlier profile to diff against (regressions first)")
    p.add_argument("--graph", metavar="PATH", help="an investigation or graph to map kernels onto (by op name)")
    p.add_argument("--json", metavar="PATH", help="write the report with a `profile` section")
    p.add_argument("--save", metavar="PATH", help="save the investigation for `ascend-tui open`")
    p.add_argument("--open", action="store_true", help="browse the profile in the app afterwards")
    p.add_argument("--device", default="auto", help="live runs: auto|cpu|cuda|npu")
    p.add_argument("--steps", type=int, default=3, help="live runs: profiled steps after warm-up")
    p.add_argument("--warmup", type=int, default=1, help="live runs: steps run before profiling")
    p.add_argument("--top", type=int, default=15, help="rows in each printed table")
    p.add_argument("--scheduler", metavar="ADDRESS", help="clusters: a dask.distributed scheduler for the per-rank work")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")


def load_profile(target: str, args: argparse.Namespace, progress: Progress | None = None) -> Investigation:
    """The investigation of `target`: read offline when it is an artifact, profiled live when it is a model file."""
    from ascend_tui.offline.open import open_path

    from ascend_tui.live.targets import split_spec

    path = Path(target)
    if not path.exists() and not split_spec(target)[0].exists():
        raise InputError(target, "no such file or folder")
    if path.exists() and not (path.is_file() and path.suffix == ".py"):
        inv = open_path(path, progress=progress) if not getattr(args, "scheduler", None) else _cluster(path, args)
    else:
        inv = profile_target(target, device=args.device, steps=args.steps, warmup=args.warmup, progress=progress)
    if inv.profile is None:
        raise InputError(target, f"holds no timing evidence (it reads as {inv.run.source or 'an investigation'})")
    if getattr(args, "graph", None):
        from ascend_tui.offline.profile import on_graph

        inv = on_graph(inv.profile, open_path(args.graph, progress=progress), target)
    return inv


def profile_target(spec: str, *, device: str = "auto", steps: int = 3, warmup: int = 1,
                   progress: Progress | None = None) -> Investigation:
    """`ascend-tui profile model.py`: capture the graph, then profile `steps` steps and attribute ops to nodes."""
    from ascend_tui.live.options import RunOptions
    from ascend_tui.live.profile import ProfileCheck
    from ascend_tui.live.runner import investigate
    from ascend_tui.live.targets import load_target

    target = load_target(spec)
    options = RunOptions(checks=(ProfileCheck(),), device=device, reference=None, target=spec,
                         settings={"profile_steps": steps, "profile_warmup": warmup})
    return investigate(target.model, target.inputs, options, progress=progress)


def _cluster(path: Path, args: argparse.Namespace) -> Investigation:
    from ascend_tui.offline.profile_cluster import load_cluster

    return load_cluster(path, scheduler=args.scheduler)


def attach_baseline(inv: Investigation, base: Investigation, share: float | None = None) -> list[dict[str, Any]]:
    """Diff `inv` against `base` per type and module, store it in the profile and add regression findings
    (an error when a step is more than `share` slower; 5% by default)."""
    from ascend_tui.checks.profile import diff, step_count
    from ascend_tui.checks.profile_advice import REGRESSION_SHARE, regressions

    assert inv.profile is not None and base.profile is not None
    new, old = inv.profile, base.profile
    steps = (step_count(old.kernels, old.steps), step_count(new.kernels, new.steps))
    tables = {by: diff(old.kernels, new.kernels, by, per_step=steps) for by in ("type", "module", "category")}
    new.extra["baseline"] = {"target": base.run.target, "steps": list(steps),
                             **{by: [_row(r) for r in rows] for by, rows in tables.items()}}
    found = regressions(tables["type"], old.kernels.total_us() / steps[0], new.kernels.total_us() / steps[1],
                        inv.graph, REGRESSION_SHARE if share is None else share)
    inv.replace_findings("profile", [*[f for f in inv.findings if f.check == "profile"], *found])
    return new.extra["baseline"]["type"]


def _row(r: DiffRow) -> dict[str, Any]:
    return {"key": r.key, "before_us": r.before_us, "after_us": r.after_us, "before_count": r.before_count,
            "after_count": r.after_count}


def summary_json(inv: Investigation, top: int = 50) -> dict[str, Any]:
    """The `profile` section of the JSON report."""
    from ascend_tui.checks.profile import step_count, summarize

    p = inv.profile
    assert p is not None
    t = p.kernels
    def groups(by: str) -> list[dict[str, Any]]:
        return [{"key": g.key, "count": g.count, "total_us": g.total_us, "share": g.share, "avg_us": g.avg_us,
                 "max_us": g.max_us, "category": g.category, "bound": g.bound} for g in summarize(t, by)[:top]]
    out: dict[str, Any] = {"kind": p.kind, "kernels": t.n, "total_us": t.total_us(),
                           "steps": step_count(t, p.steps), "by_category": groups("category"),
                           "by_type": groups("type"), "by_module": groups("module") if any(t.names("module")) else []}
    if p.steps:
        out["step_trace"] = [{"step": s.step, "rank": s.rank, "computing": s.computing,
                              "communication_not_overlapped": s.communication_not_overlapped, "free": s.free,
                              "total": s.total} for s in p.steps]
    if "baseline" in p.extra:
        out["baseline"] = p.extra["baseline"]
    if "cluster" in p.extra:
        out["cluster"] = p.extra["cluster"]
    return out


def print_summary(inv: Investigation, out: TextIO, top: int = 15) -> None:
    """Categories, the top op types, steps, the cluster and the baseline diff as plain text tables."""
    from ascend_tui.checks.profile import cluster_summary, step_count, summarize

    p = inv.profile
    assert p is not None
    t = p.kernels
    w = out.write
    w(f"{inv.run.target}: {p.kind}, {fmt.plural(t.n, 'kernel')}, {fmt.duration_us(t.total_us())} of kernel time, "
      f"{fmt.plural(step_count(t, p.steps), 'step')}\n")
    if p.unmatched:
        shown = ", ".join(p.unmatched[:8]) + (", ..." if len(p.unmatched) > 8 else "")
        w(f"{fmt.plural(len(p.unmatched), 'op name')} matched no graph node: {shown}\n")
    w("\n")
    _table(w, "category", summarize(t, "category"), top, bound=False)
    _table(w, "op type", summarize(t, "type"), top, bound=True)
    if any(t.names("module")):
        _table(w, "module", summarize(t, "module"), top, bound=False)
    if p.steps and "cluster" not in p.extra:
        w(f"{'step':>6} {'computing':>11} {'comm (exposed)':>15} {'free':>11} {'step time':>11}\n")
        for s in p.steps[:top]:
            w(f"{s.step:>6} {fmt.duration_us(s.computing):>11} {fmt.duration_us(s.communication_not_overlapped):>15} "
              f"{fmt.duration_us(s.free):>11} {fmt.duration_us(s.total):>11}\n")
        w("\n")
    if "cluster" in p.extra:
        c = cluster_summary(p.steps)
        w(f"{'rank':>5} {'computing':>11} {'comm (exposed)':>15} {'free':>11} {'step time':>11}\n")
        for r in c.ranks:
            mark = "  <- slow" if r.rank == c.slow_rank else ""
            w(f"{r.rank:>5} {fmt.duration_us(r.computing):>11} {fmt.duration_us(r.communication):>15} "
              f"{fmt.duration_us(r.free):>11} {fmt.duration_us(r.total):>11}{mark}\n")
        w(f"slow rank {c.slow_rank}: {c.slow_stage} {fmt.duration_us(c.excess_us)} above the median rank\n\n")
    base = p.extra.get("baseline")
    if base:
        w(f"against {base['target']} (per step):\n{'op type':<32} {'before':>10} {'after':>10} {'delta':>10} {'x':>7}\n")
        for r in base["type"][:top]:
            d = r["after_us"] - r["before_us"]
            x = fmt.ratio(r["after_us"] / r["before_us"]) if r["before_us"] else "new"
            w(f"{r['key'][:32]:<32} {fmt.duration_us(r['before_us']):>10} {fmt.duration_us(r['after_us']):>10} "
              f"{('+' if d > 0 else '') + fmt.duration_us(d):>10} {x:>7}\n")
        w("\n")


def _table(w: Callable[[str], Any], title: str, groups: list, top: int, *, bound: bool) -> None:
    w(f"{title:<40} {'calls':>8} {'total':>10} {'share':>7} {'mean':>9}" + (f"  {'bound':<9}" if bound else "") + "\n")
    for g in groups[:top]:
        w(f"{(g.key or '(none)')[:40]:<40} {fmt.count(g.count):>8} {fmt.duration_us(g.total_us):>10} "
          f"{fmt.percent(g.share):>7} {fmt.duration_us(g.avg_us):>9}" + (f"  {g.bound:<9}" if bound else "") + "\n")
    if len(groups) > top:
        w(f"... {fmt.plural(len(groups) - top, 'more row')}\n")
    w("\n")


def write_json(inv: Investigation, path: str) -> None:
    from ascend_tui.graph.opgraph import write_json_atomic
    from ascend_tui.report import build_report

    report = build_report(inv)
    report["profile"] = summary_json(inv)
    write_json_atomic(Path(path), report)


def run_profile(args: argparse.Namespace, progress: Any, finish: Callable[[Any, argparse.Namespace], int]) -> int:
    """The `profile` command: read or run, diff against the baseline, print, write, and open the app if asked."""
    import sys

    if args.steps < 1 or args.warmup < 0:
        raise InputError("--steps", "needs --steps >= 1 and --warmup >= 0")
    try:
        inv = load_profile(args.target, args, progress)
        base = load_profile(args.baseline, argparse.Namespace(**{**vars(args), "graph": None}), progress) \
            if args.baseline else None
    finally:
        progress.done()
    if base is not None:
        attach_baseline(inv, base)
    print_summary(inv, sys.stdout, args.top)
    # the shared finish writes --save and prints the findings; our --baseline is a profile, not a report of
    # known findings, and our --json carries a profile section, so neither goes through it
    code = finish(inv, argparse.Namespace(**{**vars(args), "json": None, "junit": None, "baseline": None}))
    if args.json:
        write_json(inv, args.json)
    if args.open:
        from ascend_tui.app.app import InvestigatorApp

        InvestigatorApp(inv).run()
    return code
