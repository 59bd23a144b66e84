"""Live profiling: warm-up plus N profiled steps, each op attributed to its module path and to graph nodes.

On the CPU and CUDA `torch.profiler` records the run; forward pre/post hooks open a
`record_function("module::<path>")` range around every submodule, so each top-level aten op's
nearest module range is its module. On an NPU `torch_npu.profiler` writes its usual folder
(imported lazily), which the Ascend profiler reader turns into kernel rows with PMU counters and
module paths from the trace. Ops map to captured graph nodes by module, normalised op name and
occurrence; those that match nothing are listed in `Profile.unmatched`, never dropped.
"""

from __future__ import annotations

import contextlib
import re

import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from ascend_tui.checks import layout_pairs
from ascend_tui.checks.profile import normalize
from ascend_tui.checks.profile_advice import advise
from ascend_tui.errors import Cancelled
from ascend_tui.live.tensors import call_model
from ascend_tui.graph.profile import Codes, KernelTable, Profile

if TYPE_CHECKING:
    from ascend_tui.graph.opgraph import OpGraph
    from ascend_tui.investigation import Investigation
    from ascend_tui.live.context import LiveContext, Run
    from ascend_tui.live.device import Device
    from ascend_tui.progress import Progress

MODULE_PREFIX = "module::"
STEP_PREFIX = "ascend_tui.step#"  # torch renames ProfilerStep#N ranges to ProfilerStep*


class ProfileCheck:
    """The live profile check: records its own profiled steps after the capture, then advises on them."""

    name = "profile"
    needs_reference = False
    coarse = True  # pass 1 times every module call; the one that stands out is recorded operator by operator
    measures = ("time",)  # what pass 1 measures per module call (`live.coarse_meter`)

    def __init__(self) -> None:
        self.why: dict[str, Any] | None = None

    @staticmethod
    def coarse_when(options: Any) -> bool:
        """Coarse-to-fine only when asked (setting `profile_coarse`): the fix workflow patches the layout pairs'
        source lines, which only a capture of every operator in those modules has."""
        return bool(options.setting("profile_coarse", False))

    def coarse_outlier(self, ctx: LiveContext, events: Sequence[Any]) -> tuple[int, int] | None:
        """The window of the forward module call whose time stands out against its peers' (`coarse_meter.choose`)."""
        from ascend_tui.live.coarse_meter import TIME, outlier

        found = outlier(events, TIME)
        if found is None:
            return None
        window, self.why = found
        return window

    def observers(self, ctx: LiveContext, run: Run) -> list[Any]:
        return []  # profiling runs its own steps: observers on the capture would time the capture instead

    def run(self, ctx: LiveContext, inv: Investigation) -> None:
        from ascend_tui.errors import AscendTuiError
        from ascend_tui.evidence import Finding
        from ascend_tui.live.context import guarded

        steps = int(ctx.options.setting("profile_steps", 3))
        warmup = int(ctx.options.setting("profile_warmup", 1))

        def profiled() -> Profile:
            return profile_model(ctx.model, ctx.inputs, ctx.device, steps=steps, warmup=warmup,
                                 progress=ctx.progress, cancel=ctx.cancel)

        if all(c is self for c in ctx.checks):
            profile = guarded(ctx.options.target, "the profiled steps", profiled)
        else:
            # beside other checks the profiled steps run the model bare, without the guards their passes carry
            # (the memory check clamps bad indices): a model that then raises is theirs to explain
            try:
                profile = profiled()
            except AscendTuiError:
                raise
            except Exception as exc:  # noqa: BLE001 - the user's model raised
                inv.replace_findings(self.name, [Finding(
                    self.name, "not_profiled", "info", "", "", "", -1,
                    f"not profiled: the model raised {type(exc).__name__} ({exc}) when run without the other "
                    "checks' guards; fix what they found, then profile again")])
                return
        profile = attribute_nodes(profile, inv.graph)
        inv.profile = profile
        found = advise(profile)
        structural = layout_pairs.finding(inv.graph, profile)  # the graph says whether layout is a problem
        if ctx.coarse is not None and any(f.kind == "layout_conversion" for f in found):
            structural = self._layout_over_every_operator(ctx, inv, profile) or structural
        if structural is not None:
            found = [f for f in found if f.kind != "layout_conversion"] + [structural]
        if ctx.coarse is not None and profile.extra.get("module_level_rows"):
            inv.run.extra.setdefault("notes", []).append(
                f"profile: {profile.extra['module_level_rows']} profiled operator rows belong to module calls whose "
                "operators were not recorded (coarse-to-fine: operators only in the suspect module); the graph's "
                "layout-pair check saw only the suspect's: --detail full records every operator")
        inv.replace_findings("profile", found)


    def _layout_over_every_operator(self, ctx: LiveContext, inv: Investigation, profile: Profile) -> Any:
        """The layout-pair finding read off a capture of every operator (a coarse graph holds the suspect's only),
        put on `inv.graph`: the pair's own node when the window recorded it, else its module call's node."""
        import dataclasses

        from ascend_tui.live.context import guarded
        from ascend_tui.live.recording import capture

        whole = guarded(ctx.options.target, "the layout pass", lambda: capture(
            ctx.model, ctx.inputs, observers=ctx.rerun_observers(), cancel=ctx.cancel, phase_label="layout pass"))
        found = layout_pairs.finding(whole.graph, profile)
        if found is None:
            return None
        graph = inv.graph
        if found.node in graph and graph.node(found.node).op_type == found.op_type:
            return found
        calls = {n.module: n.id for n in graph if n.attrs and n.attrs.get("detail") == "module"}
        node = _module_call(found.module, calls)
        if node is None:
            return None
        n = graph.node(node)
        return dataclasses.replace(found, node=node, op_type=n.op_type, index=n.index)


def profile_model(model: Any, inputs: Any, device: Device, *, steps: int = 3, warmup: int = 1,
                  progress: Progress | None = None, cancel: threading.Event | None = None) -> Profile:
    """A `Profile` of `steps` forward passes after `warmup` unprofiled ones, on `device`."""
    if device.backend == "npu":
        return _npu_profile(model, inputs, device, steps=steps, warmup=warmup, progress=progress, cancel=cancel)
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    with torch.no_grad():
        for i in range(warmup):
            _check(cancel)
            if progress is not None:
                progress("profiling: warm-up", i, warmup)
            call_model(model, inputs)
        device.synchronize()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.backend == "cuda" else [])
        hooks = module_ranges(model)
        try:
            with native_log_filtered(), profile(activities=activities, record_shapes=True) as prof:
                for i in range(steps):
                    _check(cancel)
                    if progress is not None:
                        progress("profiling", i, steps)
                    with record_function(f"{STEP_PREFIX}{i}"):
                        call_model(model, inputs)
                    device.synchronize()
        finally:
            for h in hooks:
                h.remove()
    return profile_of_events(prof.events(), cuda=device.backend == "cuda")


_NATIVE_LOG = re.compile(r"^(?:USDT|STAGE):\S+ \S+ \d+:\d+ \S+\.cpp:\d+\]")


@contextlib.contextmanager
def native_log_filtered() -> Iterator[None]:
    """Keep Kineto's `USDT: ... profiler_start` lines off the terminal; pass every other stderr line on.

    Kineto writes them straight to file descriptor 2 with no setting that turns them off; in the
    app they would be painted over the screen, in the CLI they read like errors.
    """
    import os
    import sys
    import tempfile

    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (embedded interpreters): nothing to protect
        yield
        return
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            rest = [line for line in caught.read().decode("utf-8", "replace").splitlines(keepends=True)
                    if not _NATIVE_LOG.match(line)]
            if rest:
                os.write(2, "".join(rest).encode("utf-8"))


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled()


def module_ranges(model: Any) -> list[Any]:
    """Forward hooks that open a profiler range named `module::<path>` around every submodule call."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return []
    stack: list[Any] = []
    handles = []
    for path, module in model.named_modules():
        if not path:
            continue

        def pre(_m: Any, _args: Any, path: str = path) -> None:
            rf = torch.profiler.record_function(MODULE_PREFIX + path)
            rf.__enter__()
            stack.append(rf)

        def post(_m: Any, _args: Any, _out: Any) -> None:
            if stack:
                stack.pop().__exit__(None, None, None)

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))
    return handles


def profile_of_events(events: Sequence[Any], *, cuda: bool = False) -> Profile:
    """Rows of the top-level aten ops (an op inside another aten op is part of it), with module and step."""
    rows: list[tuple[str, str, int, float, str, int]] = []
    aliases: dict[str, list[str]] = {}
    for e in events:
        name = str(e.name)
        if not name.startswith("aten::"):
            continue
        module, step, inner = "", -1, False
        parent = e.cpu_parent
        while parent is not None:
            pname = str(parent.name)
            if pname.startswith("aten::"):
                inner = True
                break
            if pname.startswith(MODULE_PREFIX) and not module:
                module = pname[len(MODULE_PREFIX):]
            elif pname.startswith(STEP_PREFIX):
                step = int(pname[len(STEP_PREFIX):])
            parent = parent.cpu_parent
        if inner or step < 0:
            continue
        if name not in aliases:
            aliases[name] = _descendants(e)
        dur = float(getattr(e, "device_time_total", 0.0) or 0.0) if cuda else 0.0
        dur = dur or float(e.cpu_time_total)
        shapes = ";".join(",".join(str(d) for d in s) for s in (e.input_shapes or ()) if isinstance(s, (list, tuple)))
        rows.append((name, module, int(e.time_range.start * 1000), dur, shapes, step))
    rows.sort(key=lambda r: r[2])
    n = len(rows)
    table = KernelTable(n, {"name": Codes.of(r[0] for r in rows), "type": Codes.of(r[0] for r in rows),
                            "core": Codes.constant("CUDA" if cuda else "CPU", n),
                            "module": Codes.of(r[1] for r in rows), "input_shapes": Codes.of(r[4] for r in rows)},
                        {"start_ns": np.array([r[2] for r in rows], np.int64), "step": np.array([r[5] for r in rows],
                                                                                              np.int64)},
                        {"dur_us": np.array([r[3] for r in rows], np.float64)})
    return Profile("live", table, extra={"steps_profiled": len({r[5] for r in rows}), "aliases": aliases})


def _descendants(event: Any, depth: int = 4) -> list[str]:
    """The aten ops a composite op ran (`aten::conv2d` -> convolution, _convolution, ...), nearest first."""
    out: list[str] = []
    level = list(event.cpu_children)
    for _ in range(depth):
        nxt = []
        for child in level:
            if str(child.name).startswith("aten::") and str(child.name) not in out:
                out.append(str(child.name))
            nxt.extend(child.cpu_children)
        level = nxt
    return out


def attribute_nodes(profile: Profile, graph: OpGraph) -> Profile:
    """Fill the node column: the k-th call of an op in a module within a step is that module's k-th matching node."""
    t = profile.kernels
    if t.n == 0 or len(graph) == 0:
        return profile
    by_key: dict[tuple[str, str], list[str]] = {}
    calls: dict[str, str] = {}  # module path -> its first module-level node (a coarse-to-fine capture)
    for node in graph:
        if node.is_placeholder or node.phase != "forward":
            continue
        if node.attrs and node.attrs.get("detail") == "module":
            calls.setdefault(node.module, node.id)
            continue
        by_key.setdefault((node.module, normalize(node.op_type)), []).append(node.id)
    seen: dict[tuple[int, str, str], int] = {}
    names, modules, steps = t.text["name"], t.text["module"], t.ints["step"]
    aliases: dict[str, list[str]] = profile.extra.get("aliases", {})
    out: list[str] = []
    unmatched: dict[str, int] = {}
    at_module = 0
    for i in range(t.n):
        name, module = names.values[names.codes[i]], modules.values[modules.codes[i]]
        key = next(((module, normalize(a)) for a in (name, *aliases.get(name, ())) if (module, normalize(a)) in by_key),
                   (module, normalize(name)))
        k = seen.get((int(steps[i]), *key), 0)
        seen[(int(steps[i]), *key)] = k + 1
        ids = by_key.get(key)
        call = _module_call(module, calls) if not ids and calls else None
        if ids:
            out.append(ids[k % len(ids)])
        elif call is not None:  # its operators were not recorded: the row belongs to the whole call
            out.append(call)
            at_module += 1
        else:
            out.append("")
            where = f"{module}/{name}" if module else name
            unmatched[where] = unmatched.get(where, 0) + 1
    profile.kernels = t.with_text("node", Codes.of(out))
    profile.unmatched = tuple(sorted(unmatched))
    if at_module:
        profile.extra["module_level_rows"] = at_module
    return profile


def _module_call(module: str, calls: dict[str, str]) -> str | None:
    """The module-level node of `module`'s call, or of the nearest enclosing module that has one."""
    path = module
    while True:
        if path in calls:
            return calls[path]
        if not path:
            return None
        path = path.rsplit(".", 1)[0] if "." in path else ""


def _npu_profile(model: Any, inputs: Any, device: Device, *, steps: int, warmup: int,
                 progress: Progress | None, cancel: threading.Event | None) -> Profile:
    """torch_npu.profiler into a temporary folder, read back with the Ascend profiler reader."""
    import torch
    import torch_npu  # type: ignore[import-not-found]

    from ascend_tui.readers.profiler.ascend_pt import output_dir, read_folder

    npu_prof = torch_npu.profiler
    config = npu_prof._ExperimentalConfig(profiler_level=npu_prof.ProfilerLevel.Level1,
                                          aic_metrics=npu_prof.AiCMetrics.PipeUtilization)
    with tempfile.TemporaryDirectory(prefix="ascend-tui-prof-") as out, torch.no_grad():
        for i in range(warmup):
            _check(cancel)
            call_model(model, inputs)
        device.synchronize()
        with npu_prof.profile(activities=[npu_prof.ProfilerActivity.CPU, npu_prof.ProfilerActivity.NPU],
                              with_modules=True, record_shapes=True, experimental_config=config,
                              schedule=npu_prof.schedule(wait=0, warmup=0, active=steps, repeat=1),
                              on_trace_ready=npu_prof.tensorboard_trace_handler(out)) as prof:
            for i in range(steps):
                _check(cancel)
                if progress is not None:
                    progress("profiling on the NPU", i, steps)
                call_model(model, inputs)
                device.synchronize()
                prof.step()
        runs = sorted(Path(out).glob("*_ascend_pt"))
        folder = output_dir(runs[-1]) if runs else None
        if folder is None:
            raise Cancelled("torch_npu.profiler wrote no *_ascend_pt folder")
        profile = read_folder(folder, cancel=cancel, progress=progress)
    profile.kind = "live npu"
    return profile
