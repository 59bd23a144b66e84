"""One recorded run: a `Recorder` plus the observers the checks declared, on one dispatch mode.

`recording(model, recorder, observers)` owns everything around a run — module attribution, grad
mode, autocast, cleanup — so no check writes "install hooks / try / call the model / finally
remove them" again. Observers see every aten call: `before` it runs (and may swap the
arguments it runs on, as the sanitizer does to clamp a bad index), right after it `ran`
(before anything else touches the device, as the NPU overflow flag needs), `after` it was
recorded as a node, and every tensor the recorder measures (`output`, placeholders included).
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, Sequence

from ascend_tui.graph.opgraph import OpNode
from ascend_tui.live.aten import FACTS, overload_facts
from ascend_tui.live.capture import ABSENT, CaptureResult, Recorder
from ascend_tui.live.tensors import call_model, iter_tensors
from ascend_tui.live.frames import stop_at
from ascend_tui.progress import Progress, frozen_gc


@dataclass(slots=True)
class Call:
    """One aten call as observers see it: what the model passed, and what will actually run."""

    recorder: Recorder
    func: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    run_args: tuple[Any, ...]
    run_kwargs: dict[str, Any]


class Observer(Protocol):
    """Watches every aten call of one recorded run; `Watcher` gives no-op defaults."""

    def before(self, call: Call) -> None: ...

    def ran(self, call: Call, out: Any) -> None: ...

    def after(self, call: Call, node: str, out: Any) -> None: ...

    def output(self, node: str, slot: int, tensor: Any) -> None: ...


class Watcher:
    """An observer that does nothing; subclasses override only the hooks they need."""

    def before(self, call: Call) -> None:
        """Called before the op runs; may replace `call.run_args` / `call.run_kwargs`."""

    def ran(self, call: Call, out: Any) -> None:
        """Called right after the op ran, before it is recorded or measured."""

    def after(self, call: Call, node: str, out: Any) -> None:
        """Called once the op is a node of the graph."""

    def output(self, node: str, slot: int, tensor: Any) -> None:
        """Called for every tensor the recorder measures (op outputs and placeholders)."""


def overrides(observer: Any, hook: str) -> bool:
    """Whether `observer` defines its own `hook` (the mode skips no-op defaults)."""
    return getattr(type(observer), hook, None) is not getattr(Watcher, hook)


@functools.cache
def _mode_class() -> type:
    from torch.utils._python_dispatch import TorchDispatchMode

    class RecordingMode(TorchDispatchMode):
        """Records every aten call into a `Recorder`, calling each observer's hooks around it."""

        def __init__(self, recorder: Recorder, observers: Sequence[Any]) -> None:
            super().__init__()
            self.recorder = recorder
            self.befores = [o.before for o in observers if overrides(o, "before")]
            self.rans = [o.ran for o in observers if overrides(o, "ran")]
            self.afters = [o.after for o in observers if overrides(o, "after")]
            self.plain = not (self.befores or self.rans or self.afters)

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            rec = self.recorder
            if (FACTS.get(id(func)) or overload_facts(func)).writes:
                rec.before(func, args, kwargs)
            if self.plain:
                out = func(*args, **kwargs)
                rec.record(func, args, kwargs, out)
                return out
            call = Call(rec, func, args, kwargs, args, kwargs)
            for hook in self.befores:
                hook(call)
            out = func(*call.run_args, **call.run_kwargs)
            for hook in self.rans:
                hook(call, out)
            node = rec.record(func, args, kwargs, out)
            for hook in self.afters:
                hook(call, node, out)
            return out

    return RecordingMode


_NOT_APIS = frozenset({"backward", "__get__", "__set__", "__repr__", "__format__", "__len__", "__bool__", "__index__"})


def _api_mode_class() -> type:
    from torch.overrides import TorchFunctionMode

    class ApiMode(TorchFunctionMode):
        """Tells the recorder which framework API call (outermost only) the next aten ops belong to."""

        def __init__(self, recorder: Recorder) -> None:
            super().__init__()
            self.recorder = recorder

        def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            name = getattr(func, "__name__", None)
            if name is None or name in _NOT_APIS:
                return func(*args, **(kwargs or {}))
            rec = self.recorder
            rec.enter_api(name)
            try:
                return func(*args, **(kwargs or {}))
            finally:
                rec.leave_api()

    return ApiMode


@contextlib.contextmanager
def recording(model: Any, recorder: Recorder, observers: Sequence[Any] = (), *, grad: bool = False,
              autocast: Any = None, mode_class: Callable[[type], type] | None = None) -> Iterator[Any]:
    """Record everything `model` runs inside the block; hooks are removed and modes left whatever happens.

    `autocast` is None (leave the caller's autocast state alone) or an `(device_type, dtype)`
    pair to run under `torch.autocast`. A recorder made with `api_ids=True` also names each
    op's framework API call (`attrs["api"]`, msprobe's ids) through a `TorchFunctionMode`; that
    costs ~15 us per call and turns off torch's fused fast paths (nn.MultiheadAttention's), so
    it is off unless asked. `mode_class` derives the dispatch mode from `RecordingMode` (coarse
    capture's records only inside its window).
    """
    import torch

    recorder.taps = [o.output for o in observers if overrides(o, "output")]
    handles = recorder.attribute_modules(model) if hasattr(model, "named_modules") else []
    base = _mode_class()
    mode = (mode_class(base) if mode_class is not None else base)(recorder, observers)
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(frozen_gc())
            stack.enter_context(torch.set_grad_enabled(grad))
            if autocast is not None:
                stack.enter_context(torch.autocast(device_type=autocast[0], dtype=autocast[1]))
            if recorder.want_api:
                stack.enter_context(_api_mode_class()(recorder))
            stack.enter_context(mode)
            yield mode
    finally:
        for h in handles:
            h.remove()


# -- backward: gradient ops named after their forward op ---------------------------------------


class GradRecorder(Recorder):
    """A recorder that maps each autograd node to the forward op that made it, and labels backward ops with it."""

    def __init__(self, model: Any, inputs: Any, **kwargs: Any) -> None:
        super().__init__(model, inputs, **kwargs)
        self.forward_of: dict[Any, tuple[str, str]] = {}
        self.current: tuple[str, str] | None = None
        self._pending = []  # ((node id, module), weak ref to a float output): `record` adds them in the forward
        self._hooks: list[Any] = []
        self._done: Any = None  # the node whose gradients the engine is adding into a consumer's buffer
        self._backward_api: dict[str, str | None] = {}  # forward node id -> its gradient ops' msprobe API id
        self._base = 0  # 1 while the bottom of the module stack is the running node's owner module (set by `_own`)
        import torch

        self._autograd_node = torch._C._current_autograd_node
        self._graph_task = torch._C._current_graph_task_id
        self._task: int | None = None  # the id of the step's backward graph task, once it runs

    def resolve(self) -> None:
        """Map the grad_fn of the last ops' outputs (set once autograd returned them) to their nodes."""
        forward_of = self.forward_of
        for owner, ref in self._pending:
            t = ref()
            fn = t.grad_fn if t is not None else None
            if fn is not None and fn not in forward_of:
                forward_of[fn] = owner
        self._pending.clear()

    def before(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self._owners is not None:
            self._own()
        super().before(func, args, kwargs)

    def _own(self) -> None:
        """Name the forward op (and module) of the autograd node the engine is running now, if any."""
        task = self._graph_task()
        if self._task != task:
            if self._task is None and task >= 0:
                self._task = task  # the step's own backward
            elif task >= 0:  # a backward run inside a node (a reentrant checkpoint's): its nodes are nobody's,
                return  # so its ops stay with the node that runs it, as that node's hooks would have left them
        node = self._autograd_node()
        owner = None if node is None or node is self._done else self._owners.get(node)  # type: ignore[union-attr]
        self.current = owner
        # The owner's module is the bottom of the stack; module calls the node's own work makes (a
        # checkpointed block recomputed inside it) push and pop above it and are left alone.
        stack = self.module_stack
        module = owner[1] if owner is not None else ""
        if self._base:
            if not module:
                del stack[0]
                self._base = 0
            elif stack[0] != module:
                stack[0] = module
        elif module:
            stack.insert(0, module)
            self._base = 1

    def node_attrs(self, func: Any, facts: Any) -> dict[str, Any] | None:
        """A gradient op's attributes name the forward op it belongs to (and msprobe's `backward:` API id)."""
        current = self.current
        attrs = facts.attrs if self.api is None else self._attrs(func)
        if current is None or self.phase == "forward":
            return attrs
        attrs = {**attrs, "forward": current[0]} if attrs else {"forward": current[0]}
        api = self._backward_api.get(current[0], ABSENT) if self.want_api else None  # (only an API call has an id)
        if api is ABSENT:
            fwd = self.graph.get(current[0])
            api = self._backward_api[current[0]] = (  # as msprobe names the backward of an API call
                f"backward:{fwd.attrs['api']}" if fwd is not None and fwd.attrs and "api" in fwd.attrs else None)
        if api is not None:
            attrs["api"] = api
        return attrs

    def mapped_nodes(self) -> dict[Any, tuple[str, str]]:
        """Every recorded autograd node with its (forward op, module), and each parameter's AccumulateGrad with its own."""
        self.resolve()
        nodes = dict(self.forward_of)
        for fn in list(nodes):
            for nxt, _ in getattr(fn, "next_functions", ()):
                var = getattr(nxt, "variable", None)
                if var is not None and nxt not in nodes:
                    kind, name = self._named.get(id(var), ("", ""))
                    if kind == "param":
                        nodes[nxt] = (f"param:{name}", name.rsplit(".", 1)[0] if "." in name else "")
        return nodes

    def hook_backward(self, root: Any = None) -> None:
        """Map every recorded autograd node (and parameters' AccumulateGrad) to the forward op it belongs to.

        While the engine runs a node, `torch._C._current_autograd_node()` names it: a gradient op
        asks for it instead of a pre and a post hook on every node (two Python calls a node, about
        a third of a bare dispatch mode's cost on a Llama step). After a node ran, the engine adds
        its gradients into the buffers of consumers that get more than one (`add` ops no node
        owns); those are told apart by a post hook, only on the nodes that feed such a buffer
        (all mapped nodes when `root`, the loss's `grad_fn`, is not given to find them).
        """
        if root is None:
            nodes, feeders = self.mapped_nodes(), None
        else:
            nodes, feeders = self._mapped_from(root)
        self._owners = nodes
        for fn in nodes:
            if feeders is None or fn in feeders:
                self._hooks.append(fn.register_hook(functools.partial(self._leave, fn)))

    def _mapped_from(self, root: Any) -> tuple[dict[Any, tuple[str, str]], set[Any]]:
        """`mapped_nodes()`, and the nodes (reachable from `root`) that send a gradient into an input another node
        also sends one to, from one walk of the autograd graph (`next_functions` builds a tuple per call)."""
        self.resolve()
        forward_of = self.forward_of
        nodes = dict(forward_of)
        named = self._named
        senders: dict[tuple[Any, int], list[Any]] = {}
        seen = {root}
        todo = [root]

        def param_of(nxt: Any) -> None:
            var = getattr(nxt, "variable", None)
            if var is not None and nxt not in nodes:
                kind, name = named.get(id(var), ("", ""))
                if kind == "param":
                    nodes[nxt] = (f"param:{name}", name.rsplit(".", 1)[0] if "." in name else "")

        while todo:
            fn = todo.pop()
            mapped = fn in forward_of
            for nxt, slot in getattr(fn, "next_functions", ()):
                if nxt is None:
                    continue
                senders.setdefault((nxt, slot), []).append(fn)
                if mapped:
                    param_of(nxt)
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        for fn in forward_of:  # recorded nodes the loss does not reach: mapped all the same
            if fn not in seen:
                for nxt, _ in getattr(fn, "next_functions", ()):
                    if nxt is not None:
                        param_of(nxt)
        return nodes, {fn for fns in senders.values() if len(fns) > 1 for fn in fns}

    def _leave(self, fn: Any, _grad_inputs: Any, _grad_outputs: Any) -> None:
        self._done = fn
        self.current = None
        self.module_stack.clear()
        self._base = 0

    def remove_hooks(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        self._owners = self._done = self._task = None
        self._base = 0


def default_loss(outputs: Any) -> Any:
    """The sum of every floating output that needs a gradient: a loss when the model file defines none."""
    parts = [t.float().sum() for t in iter_tensors(outputs) if t.is_floating_point() and t.requires_grad]
    if not parts:
        raise ValueError("the model's outputs need no gradient, so there is no backward pass to check")
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def grad_capture(recorder: GradRecorder, model: Any, inputs: Any, loss: Callable[[Any], Any] | None = None,
                 observers: Sequence[Any] = (), *, autocast: Any = None) -> Any:
    """Forward and backward under `recorder`: gradient ops get phase "backward", parameter grads become nodes;
    returns the model's outputs.

    The model's `.grad`s and buffers are put back afterwards, so the user's training state is untouched.
    """
    import torch

    named = model.named_parameters() if hasattr(model, "named_parameters") else ()
    params = [(n, p) for n, p in named if p.requires_grad]
    saved = [(p, p.grad) for _, p in params]
    buffers = [(b, b.detach().clone()) for b in model.buffers()] if hasattr(model, "buffers") else []
    for p, _ in saved:
        p.grad = None
    try:
        with recording(model, recorder, observers, grad=True, autocast=autocast):
            outputs = call_model(model, inputs)
            value = (loss or default_loss)(outputs)
            recorder.hook_backward(getattr(value, "grad_fn", None))
            recorder.phase = "backward"
            recorder.sources.lead = ()  # the gradient ops' walks begin with the engine's callers: learned anew
            value.backward()
        recorder.current = None
        _grad_nodes(recorder, params)
        return outputs
    finally:
        recorder.remove_hooks()
        for p, g in saved:
            p.grad = g
        with torch.no_grad():
            for b, kept in buffers:
                b.copy_(kept)


# The loss and the backward are called from here, not from the model: a gradient op's stack (and the loss's)
# ends here, where the script that started the run would otherwise be named.
stop_at(grad_capture)


def _grad_nodes(recorder: Recorder, params: list[tuple[str, Any]]) -> None:
    """One node per parameter gradient (`grad:fc.weight`), fed by the op that wrote it, with its statistics."""
    for name, p in params:
        if p.grad is None:
            continue
        src = recorder.source_of(p.grad)
        module = name.rsplit(".", 1)[0] if "." in name else ""
        node_id = f"grad:{name}"
        outs = recorder.graph.node(src.node).outputs
        meta = outs[src.slot] if src.slot < len(outs) else None
        recorder.graph.add_node(OpNode(node_id, "grad", module, recorder.op_count, kind="output",
                                       inputs=(meta,), outputs=(meta,), phase="backward",
                                       attrs={"forward": f"param:{name}"}))
        recorder.op_count += 1
        recorder.graph.add_edge(src.node, node_id, src.slot, 0)
        own = recorder.made(p.grad) is src  # the gradient is that op's output itself: its row, not a second read
        recorder.measure(node_id, 0, p.grad, (src.node, src.slot) if own else None)



def capture(
    model: Any,
    inputs: Any,
    *,
    observers: Sequence[Any] = (),
    stats: bool = True,
    source: bool = True,
    progress: Progress | None = None,
    cancel: Any = None,
    phase_label: str = "capturing",
    expected_ops: int | None = None,
    grad: bool = False,
    autocast: Any = None,
    api_ids: bool = False,
    recorder_class: Callable[..., Recorder] | None = None,
    backward: bool = False,
    loss: Callable[[Any], Any] | None = None,
) -> CaptureResult:
    """Run `model` on `inputs` once under capture (and `observers`) and return the graph of what executed.

    `backward`: a training step instead, forward and backward (`loss` of the outputs, by default
    `default_loss`) in one recorded run (`grad_capture`): the observers see the gradient ops too.
    """
    recorder = (recorder_class or (GradRecorder if backward else Recorder))(
        model, inputs, stats=stats, source=source, progress=progress, cancel=cancel, phase_label=phase_label,
        expected_ops=expected_ops, api_ids=api_ids)
    if backward:
        outputs = grad_capture(recorder, model, inputs, loss, observers, autocast=autocast)  # type: ignore[arg-type]
    else:
        with recording(model, recorder, observers, grad=grad, autocast=autocast):
            outputs = call_model(model, inputs)
    table = recorder.finish_stats()
    if progress is not None:
        progress(phase_label, recorder.op_count, recorder.op_count)
    return CaptureResult(recorder.graph, table, outputs, recorder.op_count, recorder=recorder,
                         histograms=recorder.finish_histograms(), backward=backward)
