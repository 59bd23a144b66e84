"""Live capture: run an eager `nn.Module` under a dispatch mode and build the graph of what executed.

One node per aten call, named `<module path>/<op>.<k>`; edges follow the tensor that each
input slot read, through views and in-place writes; placeholders stand for user inputs,
parameters, buffers and tensors from elsewhere. Statistics of every output are reduced on
the device and brought to the host in one transfer at the end of the run.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from ascend_tui.errors import Cancelled
from ascend_tui.evidence import (
    HIST_BINS,
    HIST_EDGES_LOG2,
    HIST_SAMPLE,
    STAT_FIELDS,
    HistogramTable,
    SourceLocation,
    StatsTable,
    TensorMeta,
)
from ascend_tui.graph.ids import IdMinter, api_op
from ascend_tui.graph.opgraph import OpGraph, OpNode
from ascend_tui.progress import Progress


_TORCH_DIR = ""
_OUR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_STACK_DEPTH = 8


@dataclass(slots=True)
class CaptureResult:
    """What one captured run produced: the graph, per-output statistics and the model's outputs."""

    graph: OpGraph
    stats: StatsTable
    outputs: Any
    op_count: int
    phases: dict[str, int] = field(default_factory=dict)
    recorder: Recorder | None = None
    histograms: HistogramTable | None = None


@dataclass(slots=True)
class _Ref:
    node: str
    slot: int
    index: int


def dtype_name(dtype: Any) -> str:
    """`float16` for `torch.float16`."""
    return str(dtype).removeprefix("torch.")


def _is_user_frame(filename: str) -> bool:
    return not (filename.startswith(_TORCH_DIR) or filename.startswith(_OUR_DIR) or filename.startswith("<"))


def user_source(skip: int = 2) -> SourceLocation | None:
    """The innermost frames of the user's code that led to the current call."""
    frame = sys._getframe(skip)
    lines: list[str] = []
    first: tuple[str, int, str] | None = None
    while frame is not None and len(lines) < _STACK_DEPTH:
        code = frame.f_code
        if _is_user_frame(code.co_filename):
            if first is None:
                first = (code.co_filename, frame.f_lineno, code.co_name)
            lines.append(f"{code.co_filename}:{frame.f_lineno} in {code.co_name}")
        frame = frame.f_back
    if first is None:
        return None
    return SourceLocation(first[0], first[1], first[2], tuple(lines))


class Recorder:
    """Builds an `OpGraph` from aten calls; shared by the capture mode and the sanitizer mode."""

    def __init__(
        self,
        model: Any,
        inputs: Any,
        *,
        stats: bool = True,
        source: bool = True,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        phase_label: str = "capturing",
        expected_ops: int | None = None,
    ) -> None:
        import torch
        from torch.utils._pytree import tree_flatten_with_path, keystr
        from torch.utils.weak import WeakIdKeyDictionary

        global _TORCH_DIR
        if not _TORCH_DIR:
            _TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
        self._torch = torch
        self.graph = OpGraph()
        self.want_stats = stats
        self.want_source = source
        self.progress = progress
        self.cancel = cancel
        self.phase_label = phase_label
        self.expected_ops = expected_ops
        self.op_count = 0
        self.phase = "forward"
        self.module_stack: list[str] = []
        self._module_class: dict[str, str] = {}
        self.ids = IdMinter()
        self.api_ids = IdMinter()
        self.api: str | None = None
        self.api_module = ""
        self.api_id: str | None = None
        self.taps: list[Callable[[str, int, Any], None]] = []
        self._producers: Any = WeakIdKeyDictionary()
        self._writers: dict[int, _Ref] = {}
        self._stat_keys: list[tuple[str, int]] = []
        self._stat_rows: list[Any] = []
        self._stat_numel: list[int] = []
        self._hist_keys: list[tuple[str, int]] = []
        self._hist_rows: list[Any] = []
        self._same_as: tuple[str, int] | None = None
        self._stat_copies: list[tuple[tuple[str, int], tuple[str, int]]] = []
        self._const_count = 0
        self._named: dict[int, tuple[str, str]] = {}
        self._keepalive: list[Any] = []
        if hasattr(model, "named_parameters"):
            for name, p in model.named_parameters(remove_duplicate=True):
                self._named[id(p)] = ("param", name)
                self._keepalive.append(p)
            for name, b in model.named_buffers(remove_duplicate=True):
                self._named[id(b)] = ("buffer", name)
                self._keepalive.append(b)
            for name, mod in model.named_modules():
                self._module_class[name] = type(mod).__name__
        for part in split_inputs(inputs):
            for path, leaf in tree_flatten_with_path(part)[0]:
                if isinstance(leaf, torch.Tensor):
                    label = keystr(path).replace("][", ".").strip("[]").replace("'", "")
                    self._named.setdefault(id(leaf), ("input", label or "0"))
                    self._keepalive.append(leaf)

    # -- module attribution -----------------------------------------------------------------

    @property
    def module(self) -> str:
        return self.module_stack[-1] if self.module_stack else ""

    def install_hooks(self, model: Any) -> list[Any]:
        """Forward pre/post hooks on every module, so each op knows its innermost module."""
        handles = []
        for name, mod in model.named_modules():
            if name == "":
                continue
            handles.append(mod.register_forward_pre_hook(self._make_pre(name)))
            handles.append(mod.register_forward_hook(self._make_post(name), always_call=True))
        return handles

    def _make_pre(self, name: str) -> Callable[..., None]:
        def pre(_mod: Any, _args: Any) -> None:
            self.module_stack.append(name)
        return pre

    def _make_post(self, name: str) -> Callable[..., None]:
        def post(_mod: Any, _args: Any, _out: Any) -> None:
            if self.module_stack and self.module_stack[-1] == name:
                self.module_stack.pop()
        return post

    # -- recording ---------------------------------------------------------------------------

    def next_id(self, module: str, op: str) -> str:
        return self.ids.mint(module, op, self.phase)

    def enter_api(self, name: str) -> None:
        """A framework API call (`F.conv2d`, `Tensor.__add__`) starts; the aten ops it runs belong to it."""
        self.api, self.api_module, self.api_id = api_op(name), self.module, None

    def leave_api(self) -> None:
        self.api = self.api_id = None

    def current_api(self) -> str | None:
        """The API-level id of the call running now (`conv1/conv2d.0`, as msprobe's dumps are named), minted on
        its first aten op so calls that run none (`size`, `dim`) take no number."""
        if self.api is None:
            return None
        if self.api_id is None:
            self.api_id = self.api_ids.mint(self.api_module, self.api, self.phase)
        return self.api_id

    def _storage_key(self, t: Any) -> int | None:
        try:
            storage = t.untyped_storage()
            if storage.nbytes() == 0:
                return None
            return storage.data_ptr()
        except Exception:  # noqa: BLE001 - sparse, meta and wrapper tensors have no plain storage
            return None

    def source_of(self, t: Any) -> _Ref:
        """The node and slot that last wrote the data `t` reads, creating a placeholder if none did."""
        ref = self._producers.get(t)
        skey = self._storage_key(t)
        if skey is not None:
            writer = self._writers.get(skey)
            if writer is not None and (ref is None or writer.index > ref.index):
                return writer
        if ref is None:
            ref = self._placeholder(t)
        return ref

    def _placeholder(self, t: Any) -> _Ref:
        kind, name = self._named.get(id(t), ("", ""))
        if not kind:
            kind, name = "const", str(self._const_count)
            self._const_count += 1
        node_id = f"{kind}:{name}"
        if node_id in self.graph:
            node_id = f"{node_id}#{self._const_count}"
            self._const_count += 1
        module = name.rsplit(".", 1)[0] if kind in ("param", "buffer") and "." in name else ""
        if kind == "const":
            module = self.module
        meta = TensorMeta(tuple(t.shape), dtype_name(t.dtype))
        self.graph.add_node(OpNode(node_id, kind, module, -1, kind=kind, outputs=(meta,),  # type: ignore[arg-type]
                                   module_class=self._module_class.get(module, "")))
        ref = _Ref(node_id, 0, -1)
        self._producers[t] = ref
        self.measure(node_id, 0, t)
        return ref

    def measure(self, node_id: str, slot: int, t: Any) -> None:
        """Queue on-device statistics of `t` for output `slot` of `node_id` (and show it to the observers' taps)."""
        for tap in self.taps:
            tap(node_id, slot, t)
        if not self.want_stats:
            return
        if self._same_as is not None:  # a view or copy holding exactly its input's values
            self._stat_copies.append(((node_id, slot), self._same_as))
            return
        row = tensor_stats_row(self._torch, t)
        if row is not None:
            self._stat_keys.append((node_id, slot))
            self._stat_rows.append(row)
            self._stat_numel.append(t.numel())
            hist = histogram_row(self._torch, t)
            if hist is not None:
                self._hist_keys.append((node_id, slot))
                self._hist_rows.append(hist)

    def before(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Resolve the tensors an op is about to write, so a first-seen input is measured before it changes."""
        for t in _written_args(func, args, kwargs):
            if isinstance(t, self._torch.Tensor):
                self.source_of(t)

    def record(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> str:
        """Add the node for one finished aten call and wire its inputs."""
        torch = self._torch
        from torch.utils._pytree import tree_flatten

        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("capture cancelled")
        op = func.overloadpacket.__name__
        module = self.module
        node_id = self.next_id(module, op)
        in_leaves, _ = tree_flatten((args, kwargs))
        in_tensors = [x for x in in_leaves if isinstance(x, torch.Tensor)]
        refs = [self.source_of(x) for x in in_tensors]
        out_leaves, _ = tree_flatten(out)
        out_tensors = [x for x in out_leaves if isinstance(x, torch.Tensor)]
        index = self.op_count
        self.op_count += 1
        node = OpNode(
            id=node_id, op_type=f"aten.{op}", module=module, index=index,
            inputs=tuple(TensorMeta(tuple(x.shape), dtype_name(x.dtype)) for x in in_tensors),
            outputs=tuple(TensorMeta(tuple(x.shape), dtype_name(x.dtype)) for x in out_tensors),
            source=user_source(3) if self.want_source else None,
            phase=self.phase, module_class=self._module_class.get(module, ""),
            attrs=self._attrs(func),
        )
        self.graph.add_node(node)
        for slot, ref in enumerate(refs):
            self.graph.add_edge(ref.node, node_id, ref.slot, slot)
        written = _written_args(func, args, kwargs)
        if (op in SAME_VALUES and len(out_tensors) == 1 and in_tensors and refs
                and out_tensors[0].numel() == in_tensors[0].numel() and out_tensors[0].dtype == in_tensors[0].dtype):
            self._same_as = (refs[0].node, refs[0].slot)
        for slot, t in enumerate(out_tensors):
            ref = _Ref(node_id, slot, index)
            self._producers[t] = ref
            self.measure(node_id, slot, t)
        self._same_as = None
        for t in written:
            if isinstance(t, torch.Tensor):
                if t not in self._producers or self._producers[t].node != node_id:
                    self._producers[t] = _Ref(node_id, 0, index)
                skey = self._storage_key(t)
                if skey is not None:
                    self._writers[skey] = _Ref(node_id, 0, index)
        if self.progress is not None and (index & 15) == 0:
            self.progress(self.phase_label, index, self.expected_ops)
        return node_id

    def _attrs(self, func: Any) -> dict[str, Any] | None:
        api = self.current_api()
        attrs = {"api": api} if api is not None else {}
        if func._overloadname != "default":
            attrs["overload"] = func._overloadname
        return attrs or None

    def finish_stats(self) -> StatsTable:
        """Bring every queued statistic to the host at once: two transfers per device, whatever the op count."""
        table = StatsTable()
        if not self._stat_rows:
            return table
        torch = self._torch
        by_device: dict[Any, list[int]] = {}
        for i, (values, _counts) in enumerate(self._stat_rows):
            by_device.setdefault(values.device, []).append(i)
        raw = np.empty((len(self._stat_rows), 7), dtype=np.float64)
        for rows in by_device.values():
            raw[rows, :4] = torch.stack([self._stat_rows[i][0] for i in rows]).cpu().double().numpy()
            raw[rows, 4:] = torch.stack([self._stat_rows[i][1] for i in rows]).cpu().numpy()
        table.add_many(self._stat_keys, finish_rows(raw, np.asarray(self._stat_numel, dtype=np.float64)))
        for key, source in self._stat_copies:  # in recording order, so a view of a view finds its row
            found = table.get(*source)
            if found is not None:
                table.add(key[0], key[1], found)
        return table


    def finish_histograms(self) -> HistogramTable:
        """Bring every queued histogram to the host at once."""
        if not self._hist_rows:
            return HistogramTable()
        torch = self._torch
        data = np.zeros((len(self._hist_rows), HIST_BINS + 1), dtype=np.int64)
        by_device: dict[Any, list[int]] = {}
        for i, row in enumerate(self._hist_rows):
            if isinstance(row, np.ndarray):
                data[i] = row
            else:
                by_device.setdefault(row.device, []).append(i)
        for rows in by_device.values():
            data[rows] = torch.stack([self._hist_rows[i] for i in rows]).cpu().numpy()
        keys = list(self._hist_keys)
        position = {k: i for i, k in enumerate(keys)}
        extra = []
        for key, source in self._stat_copies:
            if source in position:
                position[key] = position[source]
                keys.append(key)
                extra.append(position[source])
        return HistogramTable(keys, np.concatenate([data, data[extra]]) if extra else data)


# Ops whose single output holds exactly the values of their first input (same elements, same
# dtype): views that reorder or reshape, and plain copies. Their statistics are copied from the
# input's row instead of measured again.
SAME_VALUES = frozenset({
    "view", "_unsafe_view", "_reshape_alias", "reshape", "t", "transpose", "permute", "squeeze", "unsqueeze",
    "detach", "alias", "clone", "contiguous", "flatten", "view_as", "lift_fresh",
})


def histogram_row(torch: Any, t: Any) -> Any | None:
    """log2|x| bin counts of an evenly strided sample of a floating tensor, then the sample's size.

    A sample keeps the cost per op small and fixed. On accelerators the counts are queued on the
    device like the statistics (a torch tensor); on the CPU numpy does it without torch's per-op
    overhead (a numpy array). Zeros and NaN are left out (the statistics count them); Inf falls
    in the top bin.
    """
    if not t.is_floating_point() or t.numel() == 0 or not t.is_contiguous() or t.device.type == "meta":
        return None
    flat = t.detach().reshape(-1)
    n = flat.numel()
    if flat.device.type == "cpu":
        # Never call .numpy() on the user's tensor: sharing its storage with numpy makes it
        # non-resizable (resize_ would then fail); gather or copy a sample of our own first.
        if n > HIST_SAMPLE:  # 64 evenly spaced runs of 64: a few cache lines each, not 4096 scattered reads
            sample = flat.index_select(0, _sample_index(torch, n)).float()
        else:
            sample = flat.to(torch.float32, copy=True)
        a = np.abs(sample.numpy())
        a = a[a > 0]  # drops zeros and NaN
        row = np.empty(HIST_BINS + 1, dtype=np.int64)
        row[:HIST_BINS] = np.bincount(_BIN_OF_EXPONENT[a.view(np.uint32) >> 23], minlength=HIST_BINS)
        row[HIST_BINS] = a.size
        return row
    sample = flat[:: max(1, n // HIST_SAMPLE)][:HIST_SAMPLE]
    sample = torch.nan_to_num(sample.float().abs(), nan=0.0, posinf=math.inf)
    bins = torch.bucketize(sample, _hist_edges(torch, sample.device), right=True)
    counts = torch.bincount(bins, minlength=HIST_BINS + 1)[: HIST_BINS + 1].clone()
    zeros = (sample == 0).sum()
    counts[0] -= zeros  # zeros (and NaN) landed in the first bin
    counts[HIST_BINS] = sample.numel() - zeros
    return counts


# The bin of every float32 biased exponent (a positive float's bits >> 23): floor(log2|x|) = e - 127.
_BIN_OF_EXPONENT = np.clip((np.arange(256) - 127 - HIST_EDGES_LOG2[0]) // (HIST_EDGES_LOG2[1] - HIST_EDGES_LOG2[0]) + 1,
                           0, HIST_BINS - 1)
_RUN = 64


@functools.lru_cache(maxsize=256)
def _sample_index(torch: Any, n: int) -> Any:
    """Indices of `HIST_SAMPLE // _RUN` evenly spaced runs of `_RUN` consecutive elements of `n`."""
    starts = np.linspace(0, n - _RUN, HIST_SAMPLE // _RUN).astype(np.int64)
    return torch.from_numpy((starts[:, None] + np.arange(_RUN)).ravel())
_EDGES: dict[Any, Any] = {}


def _hist_edges(torch: Any, device: Any) -> Any:
    edges = _EDGES.get(device)
    if edges is None:
        edges = _EDGES[device] = torch.tensor([2.0 ** e for e in HIST_EDGES_LOG2], device=device)
    return edges


def _written_args(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """Arguments the op's schema marks as written (`Tensor(a!)`): in-place and out= targets."""
    written: list[Any] = []
    for i, name in _write_positions(func):
        value = args[i] if i < len(args) else kwargs.get(name)
        if isinstance(value, (list, tuple)):
            written.extend(value)
        elif value is not None:
            written.append(value)
    return written


_WRITES: dict[Any, tuple[tuple[int, str], ...]] = {}


def _write_positions(func: Any) -> tuple[tuple[int, str], ...]:
    """(position, name) of the written arguments of an overload; schemas never change, so read each once."""
    found = _WRITES.get(func)
    if found is None:
        found = _WRITES[func] = tuple((i, a.name) for i, a in enumerate(func._schema.arguments)
                                      if a.alias_info is not None and a.alias_info.is_write)
    return found


def tensor_stats_row(torch: Any, t: Any) -> tuple[Any, Any] | None:
    """Reductions of `t` on its own device: min, max, sum, L2 norm, and the zero, NaN and Inf counts.

    Returns (float32 [min, max, sum, norm], int64 [nan, inf, zeros]), or None for tensors without
    numbers to reduce (empty, complex, meta). On accelerators every reduction stays queued on
    the device (no sync). On the CPU, where reading a value is free, the counts (most of the
    cost) are taken only where the other numbers say they can be non-zero.
    """
    if t.is_complex() or t.device.type == "meta" or t.layout != torch.strided:
        return None
    n = t.numel()
    if n == 0:
        return None
    x = t.detach()
    if x.dtype != torch.float32:
        x = x.float()  # float64 too: one dtype for every row, and NPUs have no float64 reductions
    count = torch.int32 if n < 2**31 else torch.int64  # a bool sum into int32 is 4x faster than int64
    mn, mx = torch.aminmax(x)
    values = torch.stack((mn, mx, x.sum(), torch.linalg.vector_norm(x)))
    if x.device.type != "cpu":
        counts = torch.stack((torch.isnan(x).sum(dtype=count), torch.isinf(x).sum(dtype=count),
                              (x == 0).sum(dtype=count)))
    else:
        counts = torch.tensor([0, 0, _cpu_zeros(torch, x, float(mn), float(mx), count)])
        if not math.isfinite(float(values[2])):
            counts[0], counts[1] = int(torch.isnan(x).sum()), int(torch.isinf(x).sum())
    # Counts stay integers: float32 is exact only up to 2**24, and activations are larger than that.
    return values, counts.long()


def _cpu_zeros(torch: Any, x: Any, mn: float, mx: float, count: Any) -> int:
    """Zeros in a CPU tensor, by the cheapest exact route its range allows."""
    if mn > 0 or mx < 0:
        return 0  # no zero can lie strictly on one side of it
    if mn == 0 or mx == 0:
        return int((x == 0).sum(dtype=count))  # ReLU-like: many zeros, where count_nonzero mispredicts
    return x.numel() - int(torch.count_nonzero(x))  # mixed signs, few zeros: count_nonzero is 2x faster


def finish_rows(raw: np.ndarray, numel: np.ndarray) -> np.ndarray:
    """Turn device rows (min, max, sum, norm, nan, inf, zeros) and host numels into `STAT_FIELDS` order."""
    out = np.empty((raw.shape[0], len(STAT_FIELDS)), dtype=np.float64)
    mn, mx, total, norm, nan, inf, zeros = (raw[:, i] for i in range(7))
    with np.errstate(invalid="ignore", divide="ignore"):
        out[:, 0] = mn
        out[:, 1] = mx
        out[:, 2] = total / numel
        out[:, 3] = norm
        out[:, 4] = np.fmax(np.abs(mn), np.abs(mx))
        out[:, 4] = np.where(np.isnan(mn) | np.isnan(mx), np.nan, out[:, 4])
    out[:, 5] = nan
    out[:, 6] = inf
    out[:, 7] = zeros
    out[:, 8] = numel
    return out


@dataclass(frozen=True, slots=True)
class Inputs:
    """Positional and keyword inputs together, for models called as `model(*args, **kwargs)`."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


def split_inputs(inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`(args, kwargs)` from an `Inputs`, a tuple/list (positional), a dict (keywords) or one value."""
    if isinstance(inputs, Inputs):
        return tuple(inputs.args), dict(inputs.kwargs)
    if isinstance(inputs, dict):
        return (), inputs
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    return (inputs,), {}


def call_model(model: Any, inputs: Any) -> Any:
    """Call `model` with its inputs: positional, keyword, or both (`Inputs`)."""
    args, kwargs = split_inputs(inputs)
    return model(*args, **kwargs)


def iter_tensors(obj: Any) -> Iterator[Any]:
    """Every tensor inside a nested structure of outputs."""
    import torch
    from torch.utils._pytree import tree_flatten

    for leaf in tree_flatten(obj)[0]:
        if isinstance(leaf, torch.Tensor):
            yield leaf
