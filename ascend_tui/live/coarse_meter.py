"""What a coarse-to-fine module pass measures for the timing and memory checks: each forward module call's own time
and the bytes it allocated, put on its `coarse_pass.Event`; and the choice of the call that stands out.

Time is, on the CPU, the calling thread's CPU time during the call (`thread_time`: not the moments a loaded machine
took the core away, which made a random layer "slow" by 80 ms on the 2-CPU VM, nor intra-op worker threads spinning
after a parallel region, which `process_time` charged to whatever call came next; the calling thread does its share
of every parallel operator, so peers compare alike); on an accelerator, the host's `perf_counter` with the device
synchronised when a call starts and ends (a sync per module call, only in a run that asked for the timing check);
either way the recorder's own bookkeeping for the calls inside it (their module nodes and measurements) is taken
out. Bytes are, on CUDA and NPU, the allocator's peak during the call above what was allocated when it started
(`memory_allocated` / `max_memory_allocated`, the peak counter reset at each call and the enclosing call's peak
carried over; with no peak counter, the net change of `memory_allocated`); on the CPU, which has no counter, the
bytes of the storages the operators inside the call created (counted by the memory check's guard mode,
`live.memory_guard`), or, without it, of the call's outputs that are not its inputs'. `Meter.source` says which.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ascend_tui.checks.suspects import Standout, standout
from ascend_tui.live.tensors import tensor_leaves

if TYPE_CHECKING:
    from ascend_tui.live.coarse_pass import Event
    from ascend_tui.live.device import Device

TIME = "time"
MEMORY = "memory"


class Meter:
    """Times and sizes each forward module call of one module pass (`StepRecorder.meter`)."""

    def __init__(self, device: Device, *, seconds: bool, nbytes: bool,
                 created: Callable[[], int] | None = None) -> None:
        import torch

        self._tensor = torch.Tensor
        self.seconds, self.nbytes = seconds, nbytes
        self.device = device
        self.sync = seconds and device.backend != "cpu"
        self.clock = time.perf_counter if device.backend != "cpu" else time.thread_time
        self.peak: Any = None  # (max_memory_allocated, reset_peak_memory_stats) on an accelerator
        if nbytes and device.has_memory_counters:
            mod = getattr(torch, device.backend, None)
            if mod is not None and hasattr(mod, "max_memory_allocated") and hasattr(mod, "reset_peak_memory_stats"):
                self.peak = (mod.max_memory_allocated, mod.reset_peak_memory_stats)
        self.created = created if device.backend == "cpu" else None
        self.net = nbytes and self.peak is None and device.has_memory_counters  # no peak counter: the net change
        self.overhead = 0.0  # seconds of bookkeeping (the recorder's, after each call) so far
        self.made_overhead = 0  # bytes the bookkeeping's own operators created (the CPU's count)
        self._end = 0.0
        self._made_end = 0
        self._frames: list[list[int]] = []  # per open call on an accelerator: [allocated at its start, peak so far]
        self.calls = 0  # calls ended so far (forward module events)
        self.started = 0  # calls started so far
        self.ordinals: list[int] = []  # per call, in the order they ended: its place in the order they started

    @property
    def source(self) -> str:
        """What the bytes are, for the report."""
        if self.peak is not None:
            return "the allocator's peak during the call above what it held at the call's start"
        if self.net:
            return "bytes the allocator held after the call more than before it (no peak counter here)"
        if self.created is not None:
            return "bytes of the storages the call's operators created (the CPU has no allocated-memory counter)"
        return "bytes of the call's outputs that are not its inputs' (the CPU has no allocated-memory counter)"

    def enter(self) -> tuple[float, float, int, int]:
        self.started += 1
        if self.sync:
            self.device.synchronize()
        made = 0
        if self.nbytes:
            if self.peak is not None:
                start = self.device.memory_allocated()
                if self._frames:  # the peak so far belongs to the enclosing call too
                    self._frames[-1][1] = max(self._frames[-1][1], int(self.peak[0](self.device.index)))
                self.peak[1](self.device.index)
                self._frames.append([start, start])
            elif self.net:
                made = self.device.memory_allocated()
            elif self.created is not None:
                made = self.created()
        return self.clock(), self.overhead, made - self.made_overhead, self.started - 1

    def exit(self, token: tuple[float, float, int, int], args: Any, kwargs: Any, out: Any) -> tuple[float, int]:
        """(the call's own seconds, its bytes) once it returned; `done` after the recorder's bookkeeping of it."""
        if self.sync:
            self.device.synchronize()
        end = self.clock()
        start, overhead, made, ordinal = token
        seconds = end - start - (self.overhead - overhead)
        nbytes = -1
        if self.nbytes:
            if self.peak is not None:
                base, peak = self._frames.pop()
                peak = max(peak, int(self.peak[0](self.device.index)))
                if self._frames:
                    self._frames[-1][1] = max(self._frames[-1][1], peak)
                nbytes = peak - base
            elif self.net:
                nbytes = self.device.memory_allocated() - made
            elif self.created is not None:
                self._made_end = self.created()
                nbytes = self._made_end - self.made_overhead - made
            else:
                nbytes = self._new_output_bytes(args, kwargs, out)
        self.calls += 1
        self.ordinals.append(ordinal)
        self._end = end
        return seconds, nbytes

    def where(self) -> str:
        """Where the run is between module calls: `<calls ended>:<calls started>` (`live.memory_guard` labels)."""
        return f"{self.calls}:{self.started}"

    def done(self) -> None:
        self.overhead += self.clock() - self._end
        if self.created is not None and self.nbytes:
            self.made_overhead += self.created() - self._made_end

    def _new_output_bytes(self, args: Any, kwargs: Any, out: Any) -> int:
        tensor = self._tensor
        held = {t.untyped_storage().data_ptr() for t in tensor_leaves([args, kwargs], tensor)}
        seen: set[int] = set()
        total = 0
        for t in tensor_leaves([out], tensor):
            s = t.untyped_storage()
            ptr = s.data_ptr()
            if ptr not in held and ptr not in seen:
                seen.add(ptr)
                total += int(s.nbytes())
        return total


def forward_calls(events: Sequence[Event]) -> list[Event]:
    """The events of forward module calls that a meter measured, in the order they ended."""
    return [e for e in events if e.phase == "forward" and e.seconds is not None]


def choose(events: Sequence[Event], what: str) -> tuple[Event, Standout] | None:
    """The forward module call whose time (`TIME`) or bytes (`MEMORY`) stands out (`checks.suspects.standout`)."""
    calls = forward_calls(events)
    values = [(e.seconds if what == TIME else (e.nbytes if e.nbytes is not None and e.nbytes >= 0 else float("nan")))
              for e in calls]
    found = standout(values, [e.module_class for e in calls], [e.entered_at for e in calls],
                     [e.index for e in calls])
    return None if found is None else (calls[found.index], found)


def call_window(event: Event) -> tuple[int, int]:
    """The window of events that records every operator of one forward module call."""
    return event.entered_at - 1, event.index


def reason(event: Event, found: Standout, what: str) -> dict[str, Any]:
    """Why the call was chosen, for `run.extra["capture"]["window"]["why"]`."""
    unit = (lambda x: f"{x * 1e3:.3g} ms") if what == TIME else _bytes
    name = event.module or "<model>"
    data: dict[str, Any] = {"measure": what, "module": name, "value": float(found.value),
                            "share": round(float(found.share), 4) if found.share == found.share else None,
                            "peer_median": float(found.median) if found.median == found.median else None,
                            "peers": int(found.peers), "outlier": found.outlier}
    if found.outlier:
        data["text"] = (f"{name} ({event.module_class}) took {unit(found.value)} against a median of "
                        f"{unit(found.median)} over its {found.peers} peers (the same class at the same depth), "
                        f"{found.share:.0%} of the step") if what == TIME else (
            f"{name} ({event.module_class}) allocated {unit(found.value)} against a median of {unit(found.median)} "
            f"over its {found.peers} peers (the same class at the same depth), {found.share:.0%} of the step")
    else:
        peers = f"; its {found.peers} peers' median {unit(found.median)}" if found.peers else ""
        verb = "took" if what == TIME else "allocated"
        data["text"] = (f"no module call stood out against its peers: {name} ({event.module_class}) has the largest "
                        f"share of its own, {verb} {unit(found.value)} ({found.share:.0%} of the step){peers}")
    return data


def outlier(events: Sequence[Event], what: str) -> tuple[tuple[int, int], dict[str, Any]] | None:
    """The window of the forward module call whose `what` stands out (`choose`), and why (`reason`, with its events)."""
    found = choose(events, what)
    if found is None:
        return None
    window = call_window(found[0])
    return window, {**reason(*found, what), "events": list(window)}


def _bytes(n: float) -> str:
    from ascend_tui.fmt import nbytes

    return nbytes(int(n)) if n == n else "?"
