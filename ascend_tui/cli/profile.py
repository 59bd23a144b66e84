"""`ascend-tui profile DIR_OR_TARGET [--baseline DIR] [--json PATH] [--open]`: where the time goes, in a terminal.

A profiler folder, kernel CSV or trace is read offline; a model file (`model.py[:factory]`) is
profiled live. With a baseline, the per-type and per-module diff (`offline.profile_baseline`) is
printed regressions first and stored in the profile (`extra["baseline"]`) so the app's diff view
shows the same numbers; the tables, the report's `profile` section and the app all render the
investigation's one `profile_summary()`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, TextIO

from ascend_tui import fmt
from ascend_tui.cli.exits import keep
from ascend_tui.cli.finish import check_outputs, finish
from ascend_tui.cli.parser import add_gate_options, add_outputs, add_quiet
from ascend_tui.cli.progress import ProgressLine
from ascend_tui.errors import InputError

if TYPE_CHECKING:
    from ascend_tui.checks.profile import Group
    from ascend_tui.investigation import Investigation
    from ascend_tui.progress import Progress


def add_parser(sub: Any) -> None:
    """The `profile` subcommand's arguments."""
    p = sub.add_parser("profile")
    p.add_argument("target", help="*_ascend_pt / PROF_* / OPPROF_* folder, cluster folder, kernel_details.csv, "
                                  "trace JSON, or path/to/model.py[:factory]")
    p.add_argument("--graph", metavar="PATH", help="an investigation or graph to map kernels onto (by op name)")
    add_outputs(p, json="write the report with a `profile` section", junit="write JUnit XML, one failure per error "
                "finding (a regression against --baseline is one)", save="save the investigation for `ascend-tui open`",
                markdown="write the Markdown report")
    add_gate_options(p, baseline_help="an earlier profile (folder, trace, CSV or model file) to diff against, "
                     "regressions first, a step slower than --max-slowdown is an error; or an earlier --json "
                     "report (only findings it did not have fail)")
    p.add_argument("--open", action="store_true", help="browse the profile in the app afterwards")
    p.add_argument("--device", default="auto", help="live runs: auto|cpu|cuda|npu")
    p.add_argument("--steps", type=int, default=3, help="live runs: profiled steps after warm-up")
    p.add_argument("--warmup", type=int, default=1, help="live runs: steps run before profiling")
    p.add_argument("--top", type=int, default=15, help="rows in each printed table")
    p.add_argument("--scheduler", metavar="ADDRESS", help="clusters: a dask.distributed scheduler for the per-rank work")
    add_quiet(p)


def run(args: argparse.Namespace) -> int:
    """The `profile` command: read or run, diff against the baseline, print, write, and open the app if asked."""
    from ascend_tui.gate import is_report

    check_outputs(args, [args.target, args.baseline, args.graph])
    if args.steps < 1 or args.warmup < 0:
        raise InputError("--steps", "needs --steps >= 1 and --warmup >= 0")
    progress = ProgressLine(sys.stderr, args.quiet)
    try:
        inv = load_profile(args.target, args, progress)
        # a profile baseline is read as the target is (live or offline); a report one is the gate's to read
        base = load_profile(args.baseline, argparse.Namespace(**{**vars(args), "graph": None}), progress) \
            if args.baseline and not is_report(args.baseline) else None
    finally:
        progress.done()
    keep((inv, base))  # the process ends after this command: their million rows need not be taken apart
    code = finish(inv, args, before=lambda out: print_summary(inv, out, args.top), baseline=base)
    if args.open:
        from ascend_tui.app.app import InvestigatorApp

        InvestigatorApp(inv).run()
    return code


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
    # every kernel row on an operator node (the layout pairs are read off the graph): the full capture
    options = RunOptions(checks=(ProfileCheck(),), device=device, reference=None, target=spec, detail="full",
                         settings={"profile_steps": steps, "profile_warmup": warmup})
    return investigate(target.model, target.inputs, options, progress=progress)


def _cluster(path: Path, args: argparse.Namespace) -> Investigation:
    from ascend_tui.offline.profile_cluster import load_cluster

    return load_cluster(path, scheduler=args.scheduler)


def print_summary(inv: Investigation, out: TextIO, top: int = 15) -> None:
    """Categories, the top op types, steps, the cluster and the baseline diff as plain text tables."""
    p, s = inv.profile, inv.profile_summary()
    assert p is not None and s is not None
    w = out.write
    cluster = p.extra.get("cluster") or {}
    if cluster.get("per_rank"):  # the cluster's kernel count; the tables are one rank's
        shown = cluster.get("shown_rank")
        w(f"{inv.run.target}: {p.kind}, {fmt.plural(len(cluster['per_rank']), 'rank')}, "
          f"{fmt.plural(int(cluster.get('kernels', s.kernels)), 'kernel')} in all"
          + (f"; the tables show rank {shown}'s {fmt.plural(s.kernels, 'kernel')}, {fmt.duration_us(s.total_us)}"
             if shown is not None else "; no rank has kernel rows") + "\n")
    else:
        w(f"{inv.run.target}: {p.kind}, {fmt.plural(s.kernels, 'kernel')}, {fmt.duration_us(s.total_us)} of kernel "
          f"time, {fmt.plural(s.steps, 'step')}\n")
    if p.unmatched:
        shown = ", ".join(p.unmatched[:8]) + (", ..." if len(p.unmatched) > 8 else "")
        w(f"{fmt.plural(len(p.unmatched), 'op name')} matched no graph node: {shown}\n")
    w("\n")
    _table(w, "category", s.by_category, top, bound=False)
    _table(w, "op type", s.by_type, top, bound=True)
    if s.by_module:
        _table(w, "module", s.by_module, top, bound=False)
    if p.steps and "cluster" not in p.extra:
        w(f"{'step':>6} {'computing':>11} {'comm (exposed)':>15} {'free':>11} {'step time':>11}\n")
        for st in p.steps[:top]:
            w(f"{st.step:>6} {fmt.duration_us(st.computing):>11} "
              f"{fmt.duration_us(st.communication_not_overlapped):>15} {fmt.duration_us(st.free):>11} "
              f"{fmt.duration_us(st.total):>11}\n")
        w("\n")
    if s.cluster is not None and s.cluster.ranks:
        c = s.cluster
        w(f"{'rank':>5} {'computing':>11} {'comm (exposed)':>15} {'free':>11} {'step time':>11}\n")
        for r in c.ranks:
            mark = "  <- slow" if r.rank == c.slow_rank else ""
            w(f"{r.rank:>5} {fmt.duration_us(r.computing):>11} {fmt.duration_us(r.communication):>15} "
              f"{fmt.duration_us(r.free):>11} {fmt.duration_us(r.total):>11}{mark}\n")
        if c.slow_rank >= 0:
            w(f"slow rank {c.slow_rank}: {c.slow_stage} {fmt.duration_us(c.excess_us)} above the median rank\n\n")
        else:
            w("no slow rank: every rank's own time (computing + free) is within 1% of a step of the median\n\n")
    if p.communication:
        _communication(w, p.communication, top)
    base = p.extra.get("baseline")
    if base:
        w(f"against {base['target']} (per step):\n{'op type':<32} {'before':>10} {'after':>10} {'delta':>10} {'x':>7}\n")
        for r in base["type"][:top]:
            d = r["after_us"] - r["before_us"]
            x = fmt.ratio(r["after_us"] / r["before_us"]) if r["before_us"] else "new"
            w(f"{r['key'][:32]:<32} {fmt.duration_us(r['before_us']):>10} {fmt.duration_us(r['after_us']):>10} "
              f"{('+' if d > 0 else '') + fmt.duration_us(d):>10} {x:>7}\n")
        w("\n")


def _communication(w: Callable[[str], Any], comm: Any, top: int) -> None:
    """Each rank's collectives a step: elapse, wait, transit, idle, and the share of it spent waiting."""
    from ascend_tui.checks.communication import per_rank

    ranks = per_rank(comm)
    w(f"{'rank':>5} {'collectives':>12} {'wait':>10} {'transit':>10} {'idle':>10} {'wait ratio':>11}  (a step)\n")
    for r in ranks[:top]:
        w(f"{r.rank:>5} {fmt.duration_us(r.elapse_ms * 1000):>12} {fmt.duration_us(r.wait_ms * 1000):>10} "
          f"{fmt.duration_us(r.transit_ms * 1000):>10} {fmt.duration_us(r.idle_ms * 1000):>10} "
          f"{fmt.percent(r.wait_ratio):>11}\n")
    if len(ranks) > top:
        w(f"... {len(ranks) - top} more ranks in --json\n")
    skipped = f", {comm.skipped} records skipped" if comm.skipped else ""
    w(f"communication from {', '.join(comm.sources)}{skipped}\n\n")


def _table(w: Callable[[str], Any], title: str, groups: Sequence[Group], top: int, *, bound: bool) -> None:
    w(f"{title:<40} {'calls':>8} {'total':>10} {'share':>7} {'mean':>9}" + (f"  {'bound':<9}" if bound else "") + "\n")
    for g in groups[:top]:
        w(f"{(g.key or '(none)')[:40]:<40} {fmt.count(g.count):>8} {fmt.duration_us(g.total_us):>10} "
          f"{fmt.percent(g.share):>7} {fmt.duration_us(g.avg_us):>9}" + (f"  {g.bound:<9}" if bound else "") + "\n")
    if len(groups) > top:
        w(f"... {fmt.plural(len(groups) - top, 'more row')}\n")
    w("\n")
