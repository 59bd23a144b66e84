"""`Investigation`: the graph, its evidence and findings, and the walks both user interfaces drive.

The CLI and the app hold one `Investigation` each; neither knows how the evidence was made
(a live run, an msprobe dump, a sanitizer log), only how to walk it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from ascend_tui.errors import InputError
from ascend_tui.evidence import (
    SEVERITY_RANK,
    Finding,
    HistogramTable,
    MemoryEvent,
    MemorySample,
    RootCause,
    StatsTable,
    TensorStats,
)
from ascend_tui.graph.movers import moves_values
from ascend_tui.graph.opgraph import OpGraph, read_json, write_json_atomic
from ascend_tui.progress import paused_gc

if TYPE_CHECKING:
    from ascend_tui.checks.profile import ProfileSummary
    from ascend_tui.graph.profile import Profile

INVESTIGATION_SCHEMA = "ascend-tui.investigation/1"
CHECK_NAMES = ("overflow", "precision", "memory", "profile")


@dataclass(slots=True)
class RunInfo:
    """How the evidence was made: what ran where, in which dtype, against which reference."""

    target: str = ""
    device: Mapping[str, Any] = field(default_factory=lambda: {"backend": "none", "name": "offline", "inf_nan_mode": True})
    checks: tuple[str, ...] = ()
    dtype: str = "float32"
    reference: str | None = None
    iterations: int = 1
    source: str = "live"
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "device": dict(self.device), "checks": list(self.checks),
                "dtype": self.dtype, "reference": self.reference, "iterations": self.iterations,
                "source": self.source, "extra": self.extra}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RunInfo:
        return cls(str(d.get("target", "")), dict(d.get("device") or {}), tuple(d.get("checks") or ()),
                   str(d.get("dtype", "float32")), d.get("reference"), int(d.get("iterations", 1)),
                   str(d.get("source", "live")), dict(d.get("extra") or {}))


class Investigation:
    """Graph + evidence + findings, and the walks over them; where a user stands is the interface's `Navigator`."""

    def __init__(
        self,
        graph: OpGraph,
        *,
        stats: StatsTable | None = None,
        reference: StatsTable | None = None,
        findings: Iterable[Finding] = (),
        memory_events: Iterable[MemoryEvent] = (),
        memory_samples: Iterable[MemorySample] = (),
        run: RunInfo | None = None,
        histograms: HistogramTable | None = None,
        profile: Profile | None = None,
        reference_histograms: HistogramTable | None = None,
    ) -> None:
        self.graph = graph
        self.profile = profile
        self.histograms = histograms if histograms is not None else HistogramTable()
        self.reference_histograms = reference_histograms
        self.stats = stats if stats is not None else StatsTable()
        self.reference = reference
        self.findings: list[Finding] = []
        self.memory_events: list[MemoryEvent] = list(memory_events)
        self.memory_samples: list[MemorySample] = list(memory_samples)
        self.run = run or RunInfo()
        # report sections made by an analysis beside the findings (a compare's cross-rank summary), as JSON
        # data; the report builder writes them as top-level keys
        self.sections: dict[str, Any] = {}
        self._profile_summary: tuple[Profile, ProfileSummary] | None = None
        self._by_node: dict[str, list[Finding]] = {}
        self.add_findings(findings)

    # -- findings ---------------------------------------------------------------------------

    def add_findings(self, findings: Iterable[Finding]) -> None:
        """Add findings, keeping them in execution order (errors first within an operator)."""
        for f in findings:
            self.findings.append(f)
            self._by_node.setdefault(f.node, []).append(f)
        self.findings.sort(key=self._finding_order)

    def replace_findings(self, check: str, findings: Iterable[Finding]) -> None:
        """Drop a check's earlier findings and add new ones (a re-run from the app)."""
        kept = [f for f in self.findings if f.check != check]
        self.findings = []
        self._by_node = {}
        self.add_findings([*kept, *findings])

    def _finding_order(self, f: Finding) -> tuple[int, int, str]:
        return (f.index if f.index >= 0 else 1 << 40, SEVERITY_RANK.get(f.severity, 9), f.kind)

    def findings_for(self, node: str) -> list[Finding]:
        """Findings on one operator, most severe first."""
        return sorted(self._by_node.get(node, []), key=lambda f: SEVERITY_RANK.get(f.severity, 9))

    def badges(self, node: str) -> dict[str, str]:
        """The worst severity per check on `node`: what the graph view paints as badges."""
        out: dict[str, str] = {}
        for f in self._by_node.get(node, ()):
            cur = out.get(f.check)
            if cur is None or SEVERITY_RANK[f.severity] < SEVERITY_RANK[cur]:
                out[f.check] = f.severity
        return out

    def flagged_nodes(self) -> set[str]:
        return {n for n, fs in self._by_node.items() if fs}

    def summary(self) -> dict[str, int]:
        return {
            "errors": sum(1 for f in self.findings if f.severity == "error"),
            "warnings": sum(1 for f in self.findings if f.severity == "warning"),
        }

    def profile_summary(self) -> ProfileSummary | None:
        """The profile's summary (`checks.profile.profile_summary`), computed once for all who render it."""
        if self.profile is None:
            return None
        if self._profile_summary is None or self._profile_summary[0] is not self.profile:
            from ascend_tui.checks.profile import profile_summary

            p = self.profile
            self._profile_summary = (p, profile_summary(p.kernels, p.steps, cluster="cluster" in p.extra))
        return self._profile_summary[1]

    def first_finding(self, check: str | None = None) -> Finding | None:
        """The earliest error in execution order (the earliest warning when there is none)."""
        pool = [f for f in self.findings if check is None or f.check == check]
        for severity in ("error", "warning", "info"):
            for f in pool:
                if f.severity == severity:
                    return f
        return None

    def next_finding(self, node: str | None, step: int = 1) -> Finding | None:
        """The next (or, with step=-1, previous) finding after `node` in execution order, wrapping."""
        pool = [f for f in self.findings if f.node in self.graph]
        if not pool:
            return None
        if node is None or node not in self.graph:
            return pool[0] if step > 0 else pool[-1]
        here = self._position(node)
        ordered = sorted({f.node: f for f in reversed(pool)}.values(), key=lambda f: self._position(f.node))
        if step > 0:
            return next((f for f in ordered if self._position(f.node) > here), ordered[0])
        return next((f for f in reversed(ordered) if self._position(f.node) < here), ordered[-1])

    def _position(self, node: str) -> int:
        n = self.graph.node(node)
        return n.index if n.index >= 0 else -1

    # -- walking --------------------------------------------------------------------------

    def step(self, delta: int, node: str | None) -> str | None:
        """The operator `delta` steps away in execution order from `node` (the first or last when None)."""
        order = self.graph.execution_order()
        if not order:
            return None
        if node is None or self.graph.node(node).is_placeholder:
            return order[0] if delta >= 0 else order[-1]
        i = self.graph.node(node).index
        pos = _index_in_order(order, self.graph, i)
        pos = max(0, min(len(order) - 1, pos + delta))
        return order[pos]

    def next(self, node: str | None) -> str | None:
        return self.step(1, node)

    def previous(self, node: str | None) -> str | None:
        return self.step(-1, node)

    def step_into_producer(self, slot: int, node: str) -> str | None:
        """The operator that produced input `slot` of `node`."""
        return self.graph.producer(node, slot)

    def producer_that_computes(self, slot: int, node: str) -> tuple[str | None, list[str]]:
        """The operator behind input `slot` of `node` that computes, and the ones stepped over to reach it.

        Views, reshapes, copies and value-keeping casts show the same values as their input, so
        a walk towards a cause passes through them; it stops before a model input or parameter.
        """
        target = self.graph.producer(node, slot)
        skipped: list[str] = []
        while target is not None and moves_values(self.graph.node(target)):
            nxt = self.graph.producer(target, 0)
            if nxt is None or self.graph.node(nxt).is_placeholder or nxt in skipped:
                break
            skipped.append(target)
            target = nxt
        return target, skipped

    def trace_root_cause(self, node: str) -> RootCause | None:
        """The root cause recorded by the most severe finding on `node` that has one."""
        for f in self.findings_for(node):
            if f.root_cause is not None:
                return f.root_cause
        return None

    def stats_for(self, node: str, slot: int = 0) -> tuple[TensorStats | None, TensorStats | None]:
        """(target, reference) statistics of output `slot` of `node`."""
        ref = self.reference.get(node, slot) if self.reference is not None else None
        return self.stats.get(node, slot), ref

    def snapshot(self) -> Investigation:
        """A copy sharing graph and statistics but owning its lists, safe to hand to another thread."""
        copy = Investigation(self.graph, stats=self.stats, reference=self.reference, findings=(),
                             memory_events=self.memory_events, memory_samples=self.memory_samples, run=self.run,
                             histograms=self.histograms, profile=self.profile,
                             reference_histograms=self.reference_histograms)
        copy.findings = list(self.findings)
        copy.sections = dict(self.sections)
        copy._by_node = {k: list(v) for k, v in self._by_node.items()}
        return copy

    # -- persistence -------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        self.graph.resolve_shapes()  # first: a deferred inference says in run.extra that it ran
        return {
            "schema": INVESTIGATION_SCHEMA,
            "run": self.run.to_json(),
            "graph": self.graph.to_json(),
            "stats": self.stats.to_json(),
            "reference": self.reference.to_json() if self.reference is not None else None,
            "histograms": self.histograms.to_json(),
            **({"reference_histograms": self.reference_histograms.to_json()}
               if self.reference_histograms is not None else {}),
            "findings": [f.to_json() for f in self.findings],
            "memory_events": [_event_json(e) for e in self.memory_events],
            "memory_samples": [asdict(s) for s in self.memory_samples],
            **({"profile": self.profile.to_json()} if self.profile is not None else {}),
            **({"sections": dict(self.sections)} if self.sections else {}),
        }

    def save(self, path: str | Path) -> None:
        """Write everything needed to reopen this investigation without rerunning the model."""
        write_json_atomic(Path(path), self.to_json())

    @classmethod
    def from_json(cls, data: Any, *, path: str = "") -> Investigation:
        if not isinstance(data, Mapping) or data.get("schema") != INVESTIGATION_SCHEMA:
            raise InputError(path, f"not an ascend-tui investigation (expected schema {INVESTIGATION_SCHEMA!r})")
        try:
            graph = OpGraph.from_json(data["graph"], path=path)
            ref = data.get("reference")
            inv = cls(
                graph,
                stats=StatsTable.from_json(data.get("stats") or {}),
                reference=StatsTable.from_json(ref) if ref else None,
                findings=[Finding.from_json(f) for f in data.get("findings", [])],
                memory_events=[_event_from_json(e) for e in data.get("memory_events", [])],
                memory_samples=[MemorySample(**s) for s in data.get("memory_samples", [])],
                run=RunInfo.from_json(data.get("run") or {}),
                histograms=HistogramTable.from_json(data.get("histograms") or {}),
                profile=_profile(data["profile"]) if data.get("profile") else None,
                reference_histograms=HistogramTable.from_json(data["reference_histograms"])
                if data.get("reference_histograms") else None,
            )
            inv.sections = dict(data.get("sections") or {})
            return inv
        except InputError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(path, f"investigation file is malformed: {type(exc).__name__}: {exc}") from None

    @classmethod
    def load(cls, path: str | Path) -> Investigation:
        with paused_gc():  # ~10 objects an operator, none freed: collections were a third of the time
            return cls.from_json(read_json(Path(path)), path=str(path))


def _index_in_order(order: Sequence[str], graph: OpGraph, index: int) -> int:
    lo, hi = 0, len(order)
    while lo < hi:
        mid = (lo + hi) // 2
        if graph.node(order[mid]).index < index:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _event_json(e: MemoryEvent) -> dict[str, Any]:
    d = asdict(e)
    d["frames"] = list(e.frames)
    d["extra"] = dict(e.extra)
    return d


def _event_from_json(d: Mapping[str, Any]) -> MemoryEvent:
    d = dict(d)
    d["frames"] = tuple(d.get("frames") or ())
    return MemoryEvent(**d)


def _profile(data: Any) -> Profile:
    """A saved profile's tables (imported here: a compare or overflow investigation has none)."""
    from ascend_tui.graph.profile import Profile

    return Profile.from_json(data)
