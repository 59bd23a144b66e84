"""`InvestigatorCommands`: the command palette's "area: verb object" entries.

Each entry names an action (`first_finding`, `app.export_report('json')`) and runs it with
`run_action`, so the palette knows no screen's internals; entries whose action does not
exist where the palette was opened, or is disabled right now, are not offered.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.dom import DOMNode

from ascend_tui.app.views import all_views


@dataclass(frozen=True, slots=True)
class Command:
    """One palette entry: its text, a line of help, and the action it runs on the app or the screen."""

    text: str
    help: str
    action: str
    on_app: bool = False


GRAPH_COMMANDS: tuple[Command, ...] = (
    Command("graph: go to first finding", "the earliest error in execution order", "first_finding"),
    Command("graph: go to next finding", "the next flagged operator after the focused one", "next_finding"),
    Command("graph: go to previous finding", "the flagged operator before the focused one", "previous_finding"),
    Command("graph: go to root cause", "where the focused operator's finding comes from", "root_cause"),
    Command("graph: go to producer", "the operator that made the focused operator's input", "producer"),
    Command("graph: go to consumer", "an operator that reads the focused operator's output", "consumer"),
    Command("graph: go back", "the operator focused before this one", "back"),
    Command("graph: toggle step mode", "step through execution order with statistics updating", "step_mode"),
    Command("graph: show flagged only", "hide (or show again) operators without findings", "toggle_flagged"),
    Command("graph: search operators", "by id, module or op type", "search"),
    Command("graph: show module tree", "fold the operators by module", "module_tree"),
)

APP_COMMANDS: tuple[Command, ...] = (
    Command("report: export JSON", "ask where (default ./ascend-tui-report.json), then write the report "
            "(schema ascend-tui.report/1)",
            "export_report('json')", on_app=True),
    Command("report: export Markdown", "ask where (default ./ascend-tui-report.md), then write it, ready to paste "
            "into an issue",
            "export_report('markdown')", on_app=True),
    Command("operator: copy summary", "the focused operator's shapes, statistics and findings, to the clipboard",
            "copy_summary", on_app=True),
    Command("check: run all checks", "every live check on the loaded model, in the background", "run_checks",
            on_app=True),
    Command("finding: fix its cause", "re-run the model with the remedy for the focused finding's cause, verify it, "
            "show the patch (X)", "fix", on_app=True),
    Command("file: open", "an investigation, a dump folder, a sanitizer log or a model file", "open_dialog",
            on_app=True),
    Command("steps: pick a step or rank", "the steps and ranks of the dump or profile on screen, one line each",
            "pick_point", on_app=True),
    Command("help: show keys", "every key that works here, with the id to remap it", "help", on_app=True),
)


def _split(action: str) -> tuple[str, tuple[Any, ...]]:
    """`export_report('json')` -> ("export_report", ("json",))."""
    from textual.actions import parse

    _namespace, name, params = parse(action)
    return name, params


class InvestigatorCommands(Provider):
    """Walks, views, checks, exports and themes, offered where they can run."""

    def _offered(self, target: DOMNode, action: str) -> bool:
        name, params = _split(action)
        if not callable(getattr(target, f"action_{name}", None)):
            return False
        return bool(target.check_action(name, params))

    def _runner(self, target: DOMNode, action: str) -> Callable[[], Any]:
        return partial(self.app.run_action, action, target)

    def commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        """Every entry that can run now: (text, help, callback)."""
        app, screen = self.app, self.screen
        out: list[tuple[str, str, Callable[[], Any]]] = []
        for cmd in GRAPH_COMMANDS:
            if self._offered(screen, cmd.action):
                out.append((cmd.text, cmd.help, self._runner(screen, cmd.action)))
        inv = getattr(app, "inv", None)
        for view in all_views():
            action = f"open_view('{view.VIEW_ID}')"
            if view.available(inv) and self._offered(app, action):
                out.append((f"{view.VIEW_ID}: open view", f"the {view.TITLE.lower()} view (key {view.KEY})",
                            self._runner(app, action)))
        for name in _live_checks():
            action = f"run_check('{name}')"
            if self._offered(app, action):
                out.append((f"check: run {name}", f"run the {name} check on the loaded model in the background",
                            self._runner(app, action)))
        for cmd in APP_COMMANDS:
            if self._offered(app, cmd.action):
                out.append((cmd.text, cmd.help, self._runner(app, cmd.action)))
        current = app.theme
        for name in sorted(app.available_themes):
            if name != current:
                out.append((f"theme: switch to {name}", "colours for the whole app",
                            partial(setattr, app, "theme", name)))
        return out

    async def discover(self) -> Hits:
        for text, help_text, callback in self.commands():
            yield DiscoveryHit(text, callback, text=text, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, callback in self.commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, text=text, help=help_text)


def _live_checks() -> tuple[str, ...]:
    """Live checks installed in this version, without importing torch."""
    try:
        from ascend_tui.app.workers import available_checks
    except ImportError:
        return ()
    return tuple(available_checks())


PALETTE_OPS_SCANNED = 5_000  # beyond this many operators, only those whose text holds the query are scored


class GraphCommands(Provider):
    """Jump targets by fuzzy name: findings, modules and operators of the investigation on screen."""

    def _targets(self, query: str) -> list[tuple[str, str, Callable[[], Any]]]:
        app = self.app
        inv = getattr(app, "inv", None)
        if inv is None:
            return []
        go = getattr(app, "action_focus_node")
        show_module = getattr(app, "show_module")
        out: list[tuple[str, str, Callable[[], Any]]] = []
        for f in inv.findings:
            out.append((f"finding: {f.severity} {f.check}/{f.kind} at {f.node}", f.message, partial(go, f.node)))
        graph = inv.graph
        ids, counts = self._index(inv)
        for module, n in counts.items():
            out.append((f"module: {module}", f"show its {n} operators", partial(show_module, module)))
        needle = query.strip().lower()
        for nid in ids:
            if len(ids) > PALETTE_OPS_SCANNED and needle not in nid.lower():
                continue
            node = graph.node(nid)
            out.append((f"op: {nid}", f"#{node.index} {node.op_type}", partial(go, nid)))
        return out

    def _index(self, inv: Any) -> tuple[list[str], dict[str, int]]:
        """Operator ids in execution order and operators per module, built once per palette and investigation."""
        cached = getattr(self, "_cached", None)
        if cached is not None and cached[0] is inv:
            return cached[1], cached[2]
        graph = inv.graph
        ids = [n for n in graph.execution_order() if not graph.node(n).is_placeholder]
        counts: dict[str, int] = {}
        for nid in ids:
            module = graph.node(nid).module
            if module:
                counts[module] = counts.get(module, 0) + 1
        self._cached = (inv, ids, counts)
        return ids, counts

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, callback in self._targets(query):
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, text=text, help=help_text)
