"""The versioned JSON report (`ascend-tui.report/1`) and a JUnit XML view of it for CI jobs.

`build_report` is the only place a report is assembled: the profile section comes from the
investigation's profile summary, and sections an analysis left on it (a compare's `ranks`) are
written as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from ascend_tui.checks.story import finding_ids, tell
from ascend_tui.graph.opgraph import write_json_atomic

if TYPE_CHECKING:
    from ascend_tui.checks.profile import Group
    from ascend_tui.graph.communication import Communication
    from ascend_tui.evidence import Finding
    from ascend_tui.investigation import Investigation

REPORT_SCHEMA = "ascend-tui.report/1"


def build_report(inv: Investigation) -> dict[str, Any]:
    """The report dict; its names are a contract with the tools that read it (`id` and `story` were added)."""
    run = inv.run
    return {
        "schema": REPORT_SCHEMA,
        "target": run.target,
        "device": dict(run.device),
        "run": {"checks": list(run.checks), "dtype": run.dtype, "reference": run.reference,
                "iterations": run.iterations, "notes": [str(n) for n in run.extra.get("notes", ()) or ()],
                **({"capture": run.extra["capture"]} if "capture" in run.extra else {})},
        "graph": {"nodes": len(inv.graph), "edges": inv.graph.edge_count()},
        "findings": [{"id": fid, **f.to_json(), **_detail(inv, f.node)}
                     for fid, f in zip(finding_ids(inv.findings), inv.findings)],
        "summary": inv.summary(),
        "story": [c.to_json() for c in tell(inv.graph, inv.findings)],
        **({"profile": profile_json(inv)} if inv.profile is not None else {}),
        **inv.sections,
    }


def _detail(inv: Investigation, node: str) -> dict[str, str]:
    """`{"detail": "module"}` for a finding on a node that stands for a whole module call (coarse-to-fine capture)."""
    found = inv.graph.get(node) if node else None
    return {"detail": "module"} if found is not None and (found.attrs or {}).get("detail") == "module" else {}


def profile_json(inv: Investigation, top: int = 50) -> dict[str, Any]:
    """The report's `profile` section: the investigation's one profile summary, the steps, baseline and cluster."""
    p, s = inv.profile, inv.profile_summary()
    assert p is not None and s is not None

    def groups(rows: tuple[Group, ...]) -> list[dict[str, Any]]:
        return [{"key": g.key, "count": g.count, "total_us": g.total_us, "share": g.share, "avg_us": g.avg_us,
                 "max_us": g.max_us, "category": g.category, "bound": g.bound} for g in rows[:top]]
    out: dict[str, Any] = {"kind": p.kind, "kernels": s.kernels, "total_us": s.total_us, "steps": s.steps,
                           "by_category": groups(s.by_category), "by_type": groups(s.by_type),
                           "by_module": groups(s.by_module)}
    if p.steps:
        out["step_trace"] = [{"step": st.step, "rank": st.rank, "computing": st.computing,
                              "communication_not_overlapped": st.communication_not_overlapped, "free": st.free,
                              "total": st.total} for st in p.steps]
    for key in ("baseline", "cluster"):
        if key in p.extra:
            out[key] = p.extra[key]
    if inv.run.extra.get("skipped"):  # records the readers could not use, per file
        out["skipped"] = list(inv.run.extra["skipped"])
    if p.communication is not None:
        out["communication"] = communication_json(p.communication)
    return out


def communication_json(comm: Communication) -> dict[str, Any]:
    """Per-rank wait/transit and the link bandwidths (the records themselves are in a saved investigation)."""
    from ascend_tui.checks.communication import link_table, per_rank, real_ops

    links = link_table(comm.links)
    return {"collectives": len(real_ops(comm.ops)), "skipped": comm.skipped, "sources": comm.sources,
            "ranks": [{"rank": r.rank, "steps": r.steps, "elapse_ms": r.elapse_ms, "transit_ms": r.transit_ms,
                       "wait_ms": r.wait_ms, "idle_ms": r.idle_ms, "wait_ratio": r.wait_ratio} for r in per_rank(comm)],
            "links": [{"src": a, "dst": b, "transport": t, "size_mb": mb, "time_ms": ms,
                       "bandwidth_gbs": mb / 1024 / (ms / 1000) if ms else 0.0}
                      for (a, b, t), (mb, ms) in sorted(links.items())]}


def write_json(inv: Investigation, path: str | Path) -> None:
    write_json_atomic(Path(path), build_report(inv))


def write_junit(inv: Investigation, path: str | Path, failing: Iterable[Finding] | None = None) -> None:
    """One test suite per check, one failing case per finding that fails the run, so CI dashboards show them.

    `failing` is what the gate failed (`--fail-on`, less what `--baseline` knew); every error finding
    when not given.
    """
    from xml.sax.saxutils import escape, quoteattr  # pulls in urllib, http and ssl: only for --junit

    checks = list(inv.run.checks) or ["graph"]
    failed = list(failing) if failing is not None else [f for f in inv.findings if f.severity == "error"]
    suites = []
    for check in checks:
        errors = [f for f in failed if f.check == check]
        cases = []
        for f in errors:
            body = escape(f.message + (f"\nhint: {f.hint}" if f.hint else ""))
            suite_class = quoteattr(f"{check}.{f.module or 'root'}")
            cases.append(f'    <testcase classname={suite_class} '
                         f'name={quoteattr(f"{f.node} {f.kind}")}>\n'
                         f'      <failure type={quoteattr(f.kind)} message={quoteattr(f.message)}>{body}</failure>\n'
                         f'    </testcase>')
        if not errors:
            cases.append(f'    <testcase classname={quoteattr(check)} name={quoteattr(f"{check}: no errors")}/>')
        suites.append(f'  <testsuite name={quoteattr(f"ascend-tui.{check}")} tests="{len(cases)}" '
                      f'failures="{len(errors)}">\n' + "\n".join(cases) + "\n  </testsuite>")
    xml = '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n' + "\n".join(suites) + "\n</testsuites>\n"
    out = Path(path)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(xml, encoding="utf-8")
    tmp.replace(out)


def format_findings(inv: Investigation, limit: int = 20) -> list[str]:
    """Errors and warnings as lines a person reads in a terminal; info findings are only counted."""
    lines = [f"note: {n}" for n in inv.run.extra.get("notes", ()) or ()]
    shown = sorted((f for f in inv.findings if f.severity in ("error", "warning")),
                   key=lambda f: (f.severity != "error", f.index))
    for f in shown[:limit]:
        where = f" at {f.node}" if f.node else ""
        lines.append(f"{f.severity.upper():7} {f.check}/{f.kind}{where}: {f.message}")
        if f.hint:
            lines.append(f"        hint: {f.hint}")
    if len(shown) > limit:
        lines.append(f"... and {len(shown) - limit} more (see --json or the app)")
    info = sum(1 for f in inv.findings if f.severity == "info")
    if info:
        lines.append(f"{info} info findings (ops that only carry an upstream problem, notes) are in --json and the app")
    return lines
