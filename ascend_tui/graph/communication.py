"""Communication evidence: collectives, their transports, rank-to-rank links and HCCL tasks, from any rank.

A step has tens to hundreds of collectives a rank, so a cluster of 64 ranks holds some ten thousand
`CommOp`s: small frozen records in lists, not columns. Times are in the units the profilers write
(ms for op and link times, µs for start stamps and task durations), sizes in MB for ops and links
and in bytes for tasks, so a number in a finding can be found again in the file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

TRANSPORTS = ("HCCS", "PCIE", "RDMA", "SDMA", "SIO", "LOCAL")
TOTAL_OP = "Total Op Info"


@dataclass(frozen=True, slots=True)
class Transport:
    """One transport's share of a collective: bytes, time, bandwidth and its packet sizes."""

    transport: str
    size_mb: float
    time_ms: float
    bandwidth_gbs: float
    large_packet_ratio: float = 0.0
    packets: tuple[tuple[float, int, float], ...] = ()  # (packet MB, count, total ms)


@dataclass(frozen=True, slots=True)
class CommOp:
    """One collective or p2p op on one rank in one step, split the way communication.json splits it."""

    rank: int
    step: str
    kind: str  # "collective" or "p2p"
    name: str
    group: str
    start_us: float
    elapse_ms: float
    transit_ms: float
    wait_ms: float
    sync_ms: float
    idle_ms: float
    transports: tuple[Transport, ...] = ()
    retries: int = 0

    def transport(self, name: str) -> Transport | None:
        return next((t for t in self.transports if t.transport == name), None)


@dataclass(frozen=True, slots=True)
class CommLink:
    """Bytes and time from `src` to `dst` over one transport, for one op or an op family in one step."""

    step: str
    group: str
    op: str
    src: int
    dst: int
    transport: str
    size_mb: float
    time_ms: float
    bandwidth_gbs: float


@dataclass(frozen=True, slots=True)
class CommTask:
    """One HCCL task (a Memcpy, Reduce_Inline, RDMA send) of an op: its size, link and duration."""

    rank: int
    op: str
    name: str
    transport: str
    link_type: str
    size_bytes: int
    dur_us: float
    src: int
    dst: int


@dataclass(slots=True)
class Communication:
    """Everything read about communication in one rank folder or one cluster; `skipped` counts bad records."""

    ops: list[CommOp] = field(default_factory=list)
    links: list[CommLink] = field(default_factory=list)
    tasks: list[CommTask] = field(default_factory=list)
    skipped: int = 0
    sources: list[str] = field(default_factory=list)
    groups: dict[str, list[int]] = field(default_factory=dict)
    parallel: dict[str, Any] = field(default_factory=dict)  # profiler_metadata's distributed_args (pp, tp, dp sizes)

    def __bool__(self) -> bool:
        return bool(self.ops or self.links or self.tasks)

    def extend(self, other: Communication) -> None:
        self.ops += other.ops
        self.links += other.links
        self.tasks += other.tasks
        self.skipped += other.skipped
        self.sources += other.sources
        self.groups.update(other.groups)
        self.parallel = self.parallel or other.parallel

    def to_json(self) -> dict[str, Any]:
        return {"ops": [asdict(o) for o in self.ops], "links": [asdict(k) for k in self.links],
                "tasks": [asdict(t) for t in self.tasks], "skipped": self.skipped, "sources": self.sources,
                "groups": self.groups, "parallel": self.parallel}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Communication:
        ops = [CommOp(**{**o, "transports": tuple(Transport(**{**t, "packets": tuple(map(tuple, t["packets"]))})
                                                   for t in o.get("transports", ()))}) for o in d.get("ops", ())]
        return cls(ops, [CommLink(**k) for k in d.get("links", ())], [CommTask(**t) for t in d.get("tasks", ())],
                   int(d.get("skipped", 0)), list(d.get("sources", ())), dict(d.get("groups") or {}),
                   dict(d.get("parallel") or {}))
