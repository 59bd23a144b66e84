"""Capture cost per operator, side by side with msprobe's statistics dump, in one process.

Run: python benchmarks/capture_vs_msprobe.py [--reps 5] [--threads N] [--clock wall|cpu] [--no-msprobe] [--detail full]

Three models defined here (nothing is downloaded): a 300-layer `Linear(16,16)+ReLU` net (900
tiny aten ops, where per-operator overhead is everything), an 8-block CNN and a 6-block
transformer stack. Each is timed plain (eager, no_grad), under a bare `TorchDispatchMode`
(the floor any operator-level tool pays), under our capture with the overflow check and no
reference run (`investigate(model, inputs, checks=("overflow",), reference=None)`, coarse-to-fine
by default, every operator with `--detail full`), and, when
`mindstudio-probe` (msprobe) is installed, under its statistics dump (`task: statistics`,
`level: L1`, files written to a temporary directory). msprobe patches torch's API for the rest
of the process once started, so it is timed last. `ours` keeps unchanged weights' statistics
from run to run (`live/weights.py`), as an inference loop or a repeated investigation does;
`cold` clears them before every run, as if each were a training step. Times are the best of `--reps` runs (the
least disturbed by other load); per-operator figures divide by the aten operator count.
Goals: at most 30 us/op on the tiny net, and at most half of msprobe's time on all three.

`--llama` times a 16-layer Llama training step instead (transformers `LlamaConfig`, random weights,
hidden 128 by default, `--hidden 128 --hidden 512` for both the default config and a wider one whose
plain step is nearer the issue's; forward and backward): plain, a bare dispatch mode, our default coarse-to-fine
overflow investigation, the same with a planted bug (two passes), `--detail full`, and msprobe's
statistics dump of the same step, alternating every variant but msprobe each round (msprobe's API
patches stay in the process, so it runs after the others, followed by one more plain step to show
what its patches cost when idle). Every run's time is printed, and the host syncs (`.item()`,
`.cpu()`, `.tolist()` calls) of one investigation of each kind, and the work of one default and one planted-bug
investigation in counts a drifting VM does not change (tensors measured, values read, gradient hooks registered and
fired, Python calls). Goals: default <= 1.5x plain and
<= 0.3x msprobe; planted bug <= 3x plain; full <= msprobe; full's fixed cost <= 3x the bare mode's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's ascend_tui and benchmarks
from benchmarks.capture_overhead import TransformerBlock  # noqa: E402

TINY_GOAL_US = 30.0
ISSUE_BARE_US = 6.0  # what the issue measured a bare TorchDispatchMode at, on the machine the 30 us goal is from
MSPROBE_GOAL = 0.5


class ConvBlock(nn.Module):
    """3x3 conv, batch norm, ReLU, with a residual connection."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x))) + x


class CNN8(nn.Module):
    """A stem, eight residual conv blocks, pooling and a classifier."""

    def __init__(self, channels: int = 32, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = nn.Sequential(*(ConvBlock(channels) for _ in range(8)))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


class Transformer6(nn.Module):
    """Six pre-norm transformer blocks and a final norm."""

    def __init__(self, dim: int = 256, heads: int = 4) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*(TransformerBlock(dim, heads) for _ in range(6)))
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.blocks(x))


def models() -> list[tuple[str, nn.Module, tuple[torch.Tensor, ...]]]:
    torch.manual_seed(0)
    tiny = nn.Sequential(*(m for _ in range(300) for m in (nn.Linear(16, 16), nn.ReLU()))).eval()
    return [
        ("tiny-linear", tiny, (torch.randn(8, 16),)),
        ("cnn-8", CNN8().eval(), (torch.randn(4, 3, 32, 32),)),
        ("transformer-6", Transformer6().eval(), (torch.randn(4, 64, 256),)),
    ]


CLOCK: Callable[[], float] = time.perf_counter


def best(fn: Callable[[], Any], reps: int) -> float:
    """Best time (`CLOCK`) of `reps` calls after one warm-up."""
    fn()
    times = []
    for _ in range(reps):
        t0 = CLOCK()
        fn()
        times.append(CLOCK() - t0)
    return min(times)


def bare_mode() -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Bare(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    return Bare


DETAIL = "module"  # `--detail`: the capture the non-Llama tables time (`full`: every operator recorded)


def measure_ours(model: nn.Module, inputs: tuple[torch.Tensor, ...], reps: int) -> dict[str, float]:
    from ascend_tui import investigate
    from ascend_tui.live.recording import capture
    from ascend_tui.live.weights import WEIGHTS

    ops = capture(model, inputs, stats=False, source=False).op_count
    bare = bare_mode()

    def plain() -> None:
        with torch.no_grad():
            model(*inputs)

    def dispatch() -> None:
        with torch.no_grad(), bare():
            model(*inputs)

    def ours() -> None:
        investigate(model, inputs, checks=("overflow",), reference=None, detail=DETAIL)

    def cold() -> None:  # as if every weight had changed since the last run (a training step)
        WEIGHTS.clear()
        investigate(model, inputs, checks=("overflow",), reference=None, detail=DETAIL)

    # Interleaved, so drift (other load, thermal) hits every variant alike.
    runs: dict[str, list[float]] = {"plain": [], "bare": [], "ours": [], "cold": []}
    for _ in range(reps):
        runs["plain"].append(best(plain, 1))
        runs["bare"].append(best(dispatch, 1))
        runs["ours"].append(best(ours, 1))
        runs["cold"].append(best(cold, 1))
    return {"ops": ops, **{k: min(v) / ops * 1e6 for k, v in runs.items()}}


def msprobe_available() -> bool:
    try:
        import msprobe.pytorch  # noqa: F401
    except Exception:  # noqa: BLE001 - not installed, or fails to import on this machine
        return False
    return True


def measure_msprobe(entries: list[tuple[str, nn.Module, tuple[torch.Tensor, ...]]], ops: dict[str, int],
                    reps: int) -> dict[str, float]:
    """msprobe's statistics dump (L1: every torch API call) per operator, for each model."""
    import logging

    from msprobe.pytorch import PrecisionDebugger

    logging.disable(logging.INFO)
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        config = {"task": "statistics", "dump_path": os.path.join(tmp, "dump"), "rank": [], "step": [],
                  "level": "L1", "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                                "summary_mode": "statistics"}}
        path = os.path.join(tmp, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        PrecisionDebugger(config_path=path)
        for name, model, inputs in entries:
            def dumped(model: nn.Module = model, inputs: tuple[torch.Tensor, ...] = inputs) -> None:
                PrecisionDebugger.start(model)
                with torch.no_grad():
                    model(*inputs)
                PrecisionDebugger.stop()
                PrecisionDebugger.step()

            out[name] = best(dumped, reps) / ops[name] * 1e6
    return out


LLAMA_GOALS = {"default/plain": 1.5, "default/msprobe": 0.3, "bug/plain": 3.0, "full/msprobe": 1.0,
               "full fixed/bare fixed": 3.0}


LLAMA_HIDDEN = 128  # the default config's hidden size (`--hidden`): the step the goals were first measured on


def llama(layers: int = 16, hidden: int = LLAMA_HIDDEN) -> nn.Module:
    """A random-weight Llama decoder stack from a transformers config: `layers` layers, `hidden` wide (4 heads of
    hidden / 4, 2 key-value heads), an MLP twice as wide."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=2 * hidden, vocab_size=512,
                                   max_position_embeddings=128, attn_implementation="eager")
    return transformers.LlamaModel(cfg).train()


def llama_loss(out: Any) -> Any:
    return out.last_hidden_state.float().pow(2).mean()


def count_syncs(fn: Callable[[], Any]) -> int:
    """Calls of `Tensor.item`, `.cpu` and `.tolist` (each a host sync on an accelerator) while `fn` runs."""
    counts = [0]
    saved = {name: getattr(torch.Tensor, name) for name in ("item", "cpu", "tolist")}

    def counted(orig: Any) -> Any:
        def call(self: Any, *a: Any, **kw: Any) -> Any:
            counts[0] += 1
            return orig(self, *a, **kw)
        return call

    for name, orig in saved.items():
        setattr(torch.Tensor, name, counted(orig))
    try:
        fn()
    finally:
        for name, orig in saved.items():
            setattr(torch.Tensor, name, orig)
    return counts[0]


def count_work(fn: Callable[[], Any]) -> dict[str, int]:
    """Deterministic counts of one investigation (a drifting VM's timings aside): module-level tensors measured
    (`BatchStats.add` rows) and the values they hold, gradient hooks registered and fired, and Python function calls
    (cProfile's count, builtins included)."""
    import cProfile
    import pstats

    from ascend_tui.live.batch_stats import BatchStats

    counts = {"measured": 0, "values": 0, "hooks": 0, "fired": 0}
    add, register = BatchStats.add, torch.Tensor.register_hook

    def counted_add(self: Any, t: Any, **kw: Any) -> Any:
        row = add(self, t, **kw)
        if row is not None:
            counts["measured"] += 1
            counts["values"] += t.numel()
        return row

    def counted_register(self: Any, hook: Any) -> Any:
        counts["hooks"] += 1

        def fired(grad: Any) -> Any:
            counts["fired"] += 1
            return hook(grad)
        return register(self, fired)

    BatchStats.add, torch.Tensor.register_hook = counted_add, counted_register  # type: ignore[method-assign]
    try:
        fn()
    finally:
        BatchStats.add, torch.Tensor.register_hook = add, register  # type: ignore[method-assign]
    profile = cProfile.Profile()
    profile.runcall(fn)
    counts["python calls"] = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
    return counts


def llama_bench(reps: int, with_msprobe: bool, hiddens: list[int] | None = None) -> None:
    """The 16-layer Llama training step of each config, every variant in one process; every run printed. msprobe
    runs after every config's own variants (its API patches stay in the process)."""
    configs = [_llama_runs(reps, hidden) for hidden in hiddens or [LLAMA_HIDDEN]]
    if with_msprobe:
        for c in configs:
            c["runs"]["msprobe"], c["runs"]["plain after msprobe"] = [], []
            for t in llama_msprobe(c["model"], c["inputs"], reps):
                c["runs"]["msprobe"].append(t)
            for _ in range(reps):
                t0 = CLOCK()
                c["step"]()
                c["runs"]["plain after msprobe"].append(CLOCK() - t0)
    for c in configs:
        _llama_report(c, reps)


def _llama_runs(reps: int, hidden: int) -> dict[str, Any]:
    import copy

    from ascend_tui import investigate

    model = llama(hidden=hidden)
    ids = torch.randint(3, 512, (2, 64), generator=torch.Generator().manual_seed(0))
    inputs = {"input_ids": ids}
    buggy = copy.deepcopy(model)
    with torch.no_grad():  # the planted bug: layer 8's MLP overflows float32 (gate * up)
        buggy.layers[8].mlp.gate_proj.weight.mul_(1e37)
        buggy.layers[8].mlp.up_proj.weight.mul_(1e37)
    bare = bare_mode()

    def step(m: nn.Module = model) -> None:
        for p in m.parameters():
            p.grad = None
        llama_loss(m(**inputs)).backward()

    def bare_step() -> None:
        with bare():
            step()

    def ours(m: nn.Module = model, detail: str = "module") -> Any:
        return investigate(m, inputs, checks=("overflow",), reference=None, backward=True, loss=llama_loss,
                           device="cpu", detail=detail)

    from ascend_tui.live.recording import capture
    ops = capture(model, inputs, stats=False, source=False).op_count
    inv = ours(buggy)
    first = next((f for f in inv.findings if f.severity == "error"), None)
    title = (f"llama-16, hidden {hidden}{' (the default config)' if hidden == LLAMA_HIDDEN else ''}, intermediate "
             f"{2 * hidden}: {ops} forward aten ops; planted bug found at "
             f"{first.node if first else None} ({inv.run.extra.get('capture', {}).get('passes')} passes)")
    print(f"timing {title}", flush=True)
    variants: dict[str, Callable[[], Any]] = {"plain": step, "bare": bare_step, "default": ours,
                                               "bug": lambda: ours(buggy), "full": lambda: ours(detail="full")}
    syncs = {k: count_syncs(v) for k, v in variants.items() if k in ("default", "bug", "full")}
    work = {k: count_work(variants[k]) for k in ("default", "bug")}
    runs: dict[str, list[float]] = {k: [] for k in variants}
    for fn in variants.values():
        fn()  # warm-up
    for _ in range(reps):
        for name, fn in variants.items():
            t0 = CLOCK()
            fn()
            runs[name].append(CLOCK() - t0)
    return {"title": title, "runs": runs, "syncs": syncs, "work": work, "model": model, "inputs": inputs,
            "step": step}


def _llama_report(config: dict[str, Any], reps: int) -> None:
    runs, syncs = config["runs"], config["syncs"]
    print(config["title"])
    for name, times in runs.items():
        median = sorted(times)[len(times) // 2]
        print(f"  {name:20} " + " ".join(f"{t:6.3f}" for t in times) + f"   (median {median:.3f} s)")
    # Ratios within a round (the variants ran back to back), then the median over rounds and the worst round;
    # msprobe, which cannot alternate, against the median plain step.
    def per_round(a: str, b: str) -> list[float]:
        return [x / y for x, y in zip(runs[a], runs[b])]

    def fixed(i: int) -> float:
        bare_cost = runs["bare"][i] - runs["plain"][i]
        return (runs["full"][i] - runs["plain"][i]) / bare_cost if bare_cost > 0 else float("nan")

    ratios = {"default/plain": per_round("default", "plain"), "bug/plain": per_round("bug", "plain"),
              "full fixed/bare fixed": [fixed(i) for i in range(reps)]}
    if "msprobe" in runs:
        ms = sorted(runs["msprobe"])[len(runs["msprobe"]) // 2]
        ratios["default/msprobe"] = [x / ms for x in runs["default"]]
        ratios["full/msprobe"] = [x / ms for x in runs["full"]]
    for k, vs in ratios.items():
        known = sorted(x for x in vs if x == x)  # a round whose bare mode ran faster than plain has no fixed ratio
        if not known:
            print(f"  {k:22} " + " ".join(f"{x:6.2f}" for x in vs) + "   (no round to judge)")
            continue
        v, worst = known[len(known) // 2], known[-1]
        print(f"  {k:22} " + " ".join(f"{x:6.2f}" for x in vs) + f"   median {v:6.2f}x, worst {worst:6.2f}x  (goal "
              f"<= {LLAMA_GOALS[k]}x: median {'met' if v <= LLAMA_GOALS[k] else 'NOT met'}, every round "
              f"{'met' if worst <= LLAMA_GOALS[k] else 'NOT met'})")
    print("  host syncs per investigation (.item/.cpu/.tolist): " + ", ".join(f"{k} {v}" for k, v in syncs.items()))
    for k, counts in config["work"].items():
        print(f"  {k} investigation's work (deterministic): " + ", ".join(f"{n} {v}" for n, v in counts.items()))


def llama_msprobe(model: nn.Module, inputs: dict[str, Any], reps: int) -> list[float]:
    """msprobe's statistics dump (L1) of the same training step, each run's time."""
    import logging

    from msprobe.pytorch import PrecisionDebugger

    logging.disable(logging.INFO)
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        config = {"task": "statistics", "dump_path": os.path.join(tmp, "dump"), "rank": [], "step": [],
                  "level": "L1", "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                                "summary_mode": "statistics"}}
        path = os.path.join(tmp, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        PrecisionDebugger(config_path=path)
        for i in range(reps + 1):
            t0 = CLOCK()
            PrecisionDebugger.start(model)
            for p in model.parameters():
                p.grad = None
            llama_loss(model(**inputs)).backward()
            PrecisionDebugger.stop()
            PrecisionDebugger.step()
            if i:  # the first is the warm-up
                times.append(CLOCK() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--no-msprobe", action="store_true", help="skip msprobe even when it is installed")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall time, or this process's CPU time (steadier on a shared machine; with one "
                             "torch thread it is the work done)")
    parser.add_argument("--llama", action="store_true", help="the 16-layer Llama training step instead")
    parser.add_argument("--hidden", type=int, action="append", default=None,
                        help=f"the Llama step's hidden size (intermediate twice that); repeat for several configs, "
                             f"each timed in turn, msprobe after all of them (default {LLAMA_HIDDEN}; 512 brings the plain step nearer the "
                             f"issue's 0.41 s)")
    parser.add_argument("--detail", choices=("module", "full"), default="module",
                        help="the capture the tiny/CNN/transformer tables time: the default coarse-to-fine one, or "
                             "`full` (every operator recorded: what the per-operator figures and goals are about)")
    args = parser.parse_args()
    global CLOCK, DETAIL
    DETAIL = args.detail
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.llama:
        with_ms = not args.no_msprobe and msprobe_available()
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.reps} rounds ({args.clock} "
              f"clock); msprobe: {'yes' if with_ms else 'no'}; a shared VM: other work runs beside this")
        llama_bench(args.reps, with_ms, args.hidden)
        return
    entries = models()
    with_msprobe = not args.no_msprobe and msprobe_available()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, best of {args.reps} ({args.clock} clock), "
          f"--detail {DETAIL}; msprobe: {'yes' if with_msprobe else 'not installed (pip install mindstudio-probe==26.2.0)'}")
    ours = {name: measure_ours(model, inputs, args.reps) for name, model, inputs in entries}
    ms = measure_msprobe(entries, {n: int(r["ops"]) for n, r in ours.items()}, args.reps) if with_msprobe else {}
    print(f"{'model':14} {'ops':>5} {'plain':>8} {'bare':>8} {'ours':>8} {'cold':>8} {'msprobe':>8}   "
          f"{'ours/plain':>10} {'ours-bare':>9} {'ours/msprobe':>12} {'cold/msprobe':>12}   (us per operator)")
    met = True
    for name, r in ours.items():
        m = ms.get(name)
        vs = r["ours"] / m if m else None
        cvs = f"{r['cold'] / m:11.2f}x" if m else ""
        print(f"{name:14} {int(r['ops']):5} {r['plain']:8.1f} {r['bare']:8.1f} {r['ours']:8.1f} {r['cold']:8.1f} "
              f"{m if m else float('nan'):8.1f}   {r['ours'] / r['plain']:9.2f}x {r['ours'] - r['bare']:9.1f} "
              f"{'' if vs is None else f'{vs:11.2f}x'} {cvs}")
        if vs is not None and vs > MSPROBE_GOAL:
            met = False
    tiny, bare = ours["tiny-linear"]["ours"], ours["tiny-linear"]["bare"]
    print(f"tiny net: {tiny:.1f} us/op (goal <= {TINY_GOAL_US:.0f}): {'met' if tiny <= TINY_GOAL_US else 'NOT met'}"
          f"; a bare dispatch mode costs {bare:.1f} us/op on this machine, so ours is {tiny / bare:.1f}x the bare "
          f"mode (the issue measured the bare mode at {ISSUE_BARE_US:.0f} us/op on its machine, where "
          f"{TINY_GOAL_US:.0f} us/op is {TINY_GOAL_US / ISSUE_BARE_US:.1f}x)")
    if ms:
        print(f"ours vs msprobe (goal <= {MSPROBE_GOAL:.1f}x on every model): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
