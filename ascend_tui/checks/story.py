"""One story from symptom to cause: the few causes that explain every check's findings, ranked by effect.

Each check reports on its own; an engineer reads them together, in order — where it goes
wrong (precision), why (overflow), whether memory is corrupt (memory), where time goes
(profile) — and each answer narrows the next. The rules below do that reading, explicitly:

- `memory-first`: a NaN/Inf that first appears downstream of an out-of-bounds access, an
  illegal address or a read of unwritten memory is that memory error's consequence — unless
  the run repaired the access (the live sanitizer clamps bad indices: `metrics.clamped`), in
  which case the NaN that run saw cannot come from it and both stay causes.
- `overflow-explains-precision`: precision lost at an op whose inputs (or itself) overflowed,
  saturated or underflowed is the overflow's consequence, not a precision problem.
- `inherited-follows-origin`: a finding a check itself marks `inherited` (an op that only
  carries an upstream problem) goes under the cause of the finding it inherits from.
- `layout-with-precision`: layout conversions inserted for a module that also loses
  precision are named together, on that module.
- Anything else is a cause of its own: independent problems stay separate.

Causes are ranked by effect: errors before warnings; causes that change the outputs (wrong
numbers, corrupt memory) before those that do not (time, leaks); then by how many errors, and
how many findings, they explain; then by how early they happen. Pure: graph and findings in, records out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ascend_tui.evidence import SEVERITY_RANK, Finding
from ascend_tui.graph.opgraph import OpGraph

MEMORY_CORRUPTION = frozenset({"out_of_bounds", "illegal_access", "uninitialized_read", "use_after_free",
                               "illegal_free", "misaligned", "race"})
NONFINITE = frozenset({"nan", "inf"})
RANGE_KINDS = frozenset({"nan", "inf", "saturation", "overflow", "underflow"})
LAYOUT_KINDS = frozenset({"layout_conversion"})
OFF_OUTPUT_KINDS = frozenset({"leak", "unprinted_errors"})  # problems that never change what the model computes
WAITING_KINDS = ("comm_wait", "exposed_communication")  # communication findings a slow rank explains
ORDER = ("memory", "overflow", "precision", "profile")  # the order a cause lists the checks behind it
_MAX_WALK = 100_000


@dataclass(frozen=True, slots=True)
class Cause:
    """One cause: where it is, what it is, the evidence from each check and the findings it explains."""

    id: str
    node: str
    module: str
    check: str
    kind: str
    severity: str
    title: str
    checks: tuple[str, ...]
    evidence: tuple[str, ...]
    explains: tuple[str, ...]
    rules: tuple[str, ...] = ()
    index: int = -1

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "node": self.node, "module": self.module, "check": self.check, "kind": self.kind,
                "severity": self.severity, "title": self.title, "checks": list(self.checks),
                "evidence": list(self.evidence), "explains": list(self.explains), "rules": list(self.rules)}


@dataclass(slots=True)
class _Draft:
    lead: Finding
    lead_id: str
    node: str
    module: str
    members: list[tuple[str, Finding]] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)
    folded_into: _Draft | None = None

    def root(self) -> _Draft:
        d = self
        while d.folded_into is not None:
            d = d.folded_into
        return d


def finding_ids(findings: Sequence[Finding]) -> list[str]:
    """A stable id per finding: `check.kind@node`, with `#k` for the k-th repeat (the report's `id`)."""
    seen: dict[str, int] = {}
    out = []
    for f in findings:
        base = f"{f.check}.{f.kind}@{f.node or '-'}"
        k = seen.get(base, 0)
        seen[base] = k + 1
        out.append(base if k == 0 else f"{base}#{k}")
    return out


def tell(graph: OpGraph, findings: Sequence[Finding]) -> list[Cause]:
    """The causes behind `findings`, most effect first; every error and warning is explained by exactly one."""
    ids = finding_ids(findings)
    pairs = [(i, f) for i, f in zip(ids, findings) if f.severity in ("error", "warning") or
             (f.attribution == "inherited" and f.check in ("overflow", "precision"))]
    drafts: list[_Draft] = []
    by_finding: dict[str, _Draft] = {}

    def new(fid: str, f: Finding, node: str | None = None) -> _Draft:
        n = node if node and node in graph else f.node
        d = _Draft(f, fid, n, graph.node(n).module if n in graph else f.module, [(fid, f)])
        drafts.append(d)
        by_finding[fid] = d
        return d

    # Leads: findings that start something (introduced, or a check with no attribution).
    inherited: list[tuple[str, Finding]] = []
    for fid, f in pairs:
        if f.attribution == "inherited":
            inherited.append((fid, f))
        else:
            cause = f.root_cause.node if f.root_cause is not None and f.check == "overflow" else None
            new(fid, f, cause)
    _merge_same_place(drafts)

    # inherited-follows-origin
    for fid, f in inherited:
        home = _origin_of(f, drafts, graph)
        if home is None:
            if f.severity == "info":
                continue
            new(fid, f)
            continue
        home.members.append((fid, f))
        by_finding[fid] = home
        if "inherited-follows-origin" not in home.rules:
            home.rules.append("inherited-follows-origin")

    live = [d for d in drafts if d.folded_into is None]
    memory = [d for d in live if d.lead.check == "memory" and d.lead.kind in MEMORY_CORRUPTION
              and not _repaired(d.lead)]
    ranges = [d for d in live if d.lead.check == "overflow" and d.lead.kind in RANGE_KINDS]

    # memory-first: NaN/Inf downstream of a memory error is its consequence.
    for m in memory:
        below = _reach(graph, m.lead.node or m.node, down=True)
        for d in ranges:
            if d.folded_into is None and d.lead.kind in NONFINITE and d.lead.node in below:
                _fold(d, m, "memory-first")

    # overflow-explains-precision: precision lost where the inputs already overflowed.
    range_nodes: dict[str, _Draft] = {}
    for d in ranges:
        for _fid, f in d.members:
            if f.check == "overflow" and f.kind in RANGE_KINDS and f.node:
                range_nodes.setdefault(f.node, d)
    if range_nodes:
        for d in [d for d in live if d.lead.check == "precision" and d.folded_into is None]:
            up = _reach(graph, d.lead.node, down=False) | {d.lead.node}
            hit = next((range_nodes[n] for n in graph.execution_order() if n in up and n in range_nodes), None) \
                if len(up) > 1 else range_nodes.get(d.lead.node)
            if hit is not None and hit.root() is not d:
                _fold(d, hit.root(), "overflow-explains-precision")

    # layout-with-precision: conversions for a module that also loses precision, named together.
    precision = [d for d in drafts if d.folded_into is None and d.lead.check == "precision"]
    for d in [d for d in drafts if d.folded_into is None and d.lead.check == "profile" and d.lead.kind in LAYOUT_KINDS]:
        modules = _modules_of(d.lead)
        for p in precision:
            if any(_inside(p.module, m) or _inside(m, p.module) for m in modules if m):
                _fold(d, p, "layout-with-precision")
                break

    # waiting-follows-slow-rank: ranks that wait in collectives are held by the slow rank, not slow themselves.
    slow = next((d for d in drafts if d.folded_into is None and d.lead.check == "profile"
                 and d.lead.kind == "slow_rank"), None)
    if slow is not None:
        for d in [d for d in drafts if d.folded_into is None and d.lead.check == "profile"
                  and d.lead.kind in WAITING_KINDS]:
            _fold(d, slow, "waiting-follows-slow-rank")

    return _rank([d for d in drafts if d.folded_into is None], graph)


def _merge_same_place(drafts: list[_Draft]) -> None:
    """Leads of one check that name the same cause node are one cause (two origins of one unscaled input)."""
    seen: dict[tuple[str, str], _Draft] = {}
    for d in drafts:
        if d.lead.check == "profile":
            continue
        key = (d.lead.check, d.node)
        first = seen.get(key)
        if first is None:
            seen[key] = d
        else:
            _fold(d, first, "same-cause")


def _fold(child: _Draft, parent: _Draft, rule: str) -> None:
    parent = parent.root()
    if child is parent:
        return
    child.folded_into = parent
    parent.members.extend(child.members)
    child.members = []
    for r in (rule, *child.rules):
        if r not in parent.rules and r != "same-cause":
            parent.rules.append(r)


def _origin_of(f: Finding, drafts: list[_Draft], graph: OpGraph) -> _Draft | None:
    """The draft whose lead this inherited finding points at (its root cause node, or an upstream origin)."""
    targets = []
    if f.root_cause is not None:
        targets.append(f.root_cause.node)
    origin = f.metrics.get("origin") if isinstance(f.metrics, dict) or hasattr(f.metrics, "get") else None
    if isinstance(origin, str):
        targets.append(origin)
    for d in drafts:
        if d.lead.check == f.check and (d.node in targets or d.lead.node in targets):
            return d.root()
    up = _reach(graph, f.node, down=False) if f.node in graph else set()
    same = [d for d in drafts if d.lead.check == f.check and d.lead.node in up]
    if same:
        return max(same, key=lambda d: graph.node(d.lead.node).index if d.lead.node in graph else -1).root()
    return None


def _repaired(f: Finding) -> bool:
    """The run read clamped (valid) values instead of what the bad access would have read."""
    return bool(f.metrics.get("clamped")) if hasattr(f.metrics, "get") else False


def _reach(graph: OpGraph, node: str, *, down: bool) -> set[str]:
    if not node or node not in graph:
        return set()
    walk = graph.downstream(node) if down else graph.upstream(node)
    return set(walk[:_MAX_WALK])


def _modules_of(f: Finding) -> list[str]:
    mods = f.metrics.get("modules") if hasattr(f.metrics, "get") else None
    out = [str(m) for m in mods] if isinstance(mods, (list, tuple)) else []
    return out + ([f.module] if f.module else [])


def _inside(module: str, outer: str) -> bool:
    return module == outer or module.startswith(outer + ".")


def _rank(drafts: Iterable[_Draft], graph: OpGraph) -> list[Cause]:
    def score(d: _Draft) -> tuple[int, int, int, int, int]:
        severity = min(SEVERITY_RANK.get(f.severity, 9) for _, f in d.members)
        errors = sum(1 for _, f in d.members if f.severity == "error")
        index = d.lead.index if d.lead.index >= 0 else 1 << 40
        # Wrong numbers come before slowness and held memory: they are what reaches the outputs.
        off_outputs = int(d.lead.check == "profile" or d.lead.kind in OFF_OUTPUT_KINDS)
        return (severity, off_outputs, -errors, -len(d.members), index)

    causes = []
    for k, d in enumerate(sorted(drafts, key=score), 1):
        members = d.members
        severity = min((f.severity for _, f in members), key=lambda s: SEVERITY_RANK.get(s, 9))
        checks = tuple(dict.fromkeys(c for c in ORDER if any(f.check == c for _, f in members))) + \
            tuple(dict.fromkeys(f.check for _, f in members if f.check not in ORDER))
        evidence = tuple(f"{f.check}/{f.kind} at {f.node or 'the run'}: {f.message}"
                         for _, f in members if f.severity in ("error", "warning"))[:12]
        causes.append(Cause(
            id=f"cause-{k}", node=d.node, module=d.module, check=d.lead.check, kind=d.lead.kind, severity=severity,
            title=_title(d, checks), checks=checks, evidence=evidence, explains=tuple(fid for fid, _ in members),
            rules=tuple(d.rules), index=graph.node(d.node).index if d.node in graph else d.lead.index))
    return causes


def _title(d: _Draft, checks: tuple[str, ...]) -> str:
    f = d.lead
    where = f"`{d.module}`" if d.module else f"`{d.node}`" if d.node else "the run"
    seen = f"`{f.module or f.node}`" if f.node else where
    if f.check == "profile" and f.kind == "slow_rank" and hasattr(f.metrics, "get"):
        kernels = [str(k.get("type")) for k in f.metrics.get("kernels") or () if isinstance(k, dict)][:3]
        return f"time: rank {f.metrics.get('rank')} is the slow rank" + (f" ({', '.join(kernels)})" if kernels else "")
    if f.check == "profile" and f.kind == "slow_link" and hasattr(f.metrics, "get"):
        return f"time: slow {f.metrics.get('transport')} link {f.metrics.get('src')}->{f.metrics.get('dst')}"
    text = {
        "memory": f"memory: {f.kind.replace('_', ' ')} at {where}",
        "overflow": f"overflow: {f.kind} at {seen}" + (f", from `{d.node}`" if d.node and d.node != f.node else ""),
        "precision": f"precision lost at {where}",
        "profile": f"time: {f.kind.replace('_', ' ')} in {where}",
    }.get(f.check, f"{f.check}: {f.kind} at {where}")
    others = [c for c in checks if c != f.check]
    return text + (f" (also explains the {', '.join(others)} findings)" if others else "")


def fix_verdicts(causes: Sequence[Cause], fix: Mapping[str, Any]) -> dict[str, str]:
    """Cause id -> what a fix run (the report's `fix` section) says of it: `fix verified: ...` or `not verified: why`.

    Only the causes whose origin is an error the fix run was for get a verdict; the others were not tried.
    """
    targeted = {f.get("node"): f for f in fix.get("findings") or ()}
    summary = str(fix.get("summary") or "not verified")
    out: dict[str, str] = {}
    for c in causes:
        f = targeted.get(c.node)
        if f is None:
            continue
        if fix.get("verified") or (fix.get("chosen") and f.get("gone")):
            out[c.id] = summary if f.get("gone") else "not verified: the fix leaves this finding in place"
        else:
            out[c.id] = summary if summary.startswith("not verified") else f"not verified: {summary}"
    return out
