"""`FixScreen`: a fix run for one cause, while it runs (progress, esc cancels) and after (numbers, verdict, patch).

The app's `X` on a finding or a story cause starts `live.fix_run.run_fix` for that cause's findings
in the job worker and opens this screen; the worker's progress and its result arrive here. `y`
copies the patch: to the terminal's clipboard (OSC 52, which reaches an SSH client whose terminal
allows it) and, since nothing confirms that, to a file as well; the notification says where.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Static

from ascend_tui.app.widgets.footer import KeyFooter
from ascend_tui.app.widgets.progress import RunProgress
from ascend_tui.checks.story import Cause, finding_ids, tell

if TYPE_CHECKING:
    from ascend_tui.evidence import Finding
    from ascend_tui.investigation import Investigation
    from ascend_tui.live.fix_run import FixRun


def offline_reason(inv: Investigation) -> str:
    """Why an investigation without a model file behind it cannot be fixed, and what to run instead."""
    source = inv.run.target or inv.run.source or "files"
    return (f"a fix re-runs the model with a remedy, and this investigation is offline evidence ({source}): "
            f"nothing here can be re-run. Open the model file instead (`ascend-tui open path/to/model.py`, "
            f"then X) or run `ascend-tui fix path/to/model.py` (or `triage model.py --fix`)")


def cause_findings(inv: Investigation, cause: Cause) -> list[Finding]:
    """The findings a story cause explains."""
    by_id = dict(zip(finding_ids(inv.findings), inv.findings))
    return [by_id[f] for f in cause.explains if f in by_id]


def cause_for_node(inv: Investigation, node: str) -> Cause | None:
    """The story cause that explains the most severe finding on `node` (None when it has none)."""
    mine = inv.findings_for(node)
    if not mine:
        return None
    ids = dict(zip(map(id, inv.findings), finding_ids(inv.findings)))
    want = ids[id(mine[0])]
    return next((c for c in tell(inv.graph, inv.findings) if want in c.explains), None)


def chosen_cause(app: Any, inv: Investigation) -> tuple[Cause | None, str]:
    """The cause `X` fixes where the user stands (the story's cursor, or the graph's focused finding), or why none."""
    from ascend_tui.app.screens.story import StoryScreen

    screen = app.screen
    if isinstance(screen, StoryScreen):
        cause = screen.cause_at_cursor()
        return cause, "" if cause else "no cause at the cursor: nothing to fix here"
    if screen is not app.main:
        return None, "X fixes the cause of a finding on the graph, or a cause in the story (S)"
    node = app.main.ops.current
    cause = cause_for_node(inv, node) if node else None
    return cause, "" if cause else f"no finding at {node or 'the graph'}: nothing to fix here (f goes to the first one)"


class FixScreen(Screen[None]):
    """One fix run: running (its progress; esc cancels it) or done (before/after, verdict, cost, re-runs, patch)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "back", id="view.close"),
        Binding("y", "copy_patch", "copy patch", id="fix.copy-patch"),
    ]

    DEFAULT_CSS = """
    FixScreen #fix-summary { height: auto; padding: 0 1; background: $panel; }
    FixScreen #fix-body { padding: 0 1; }
    """

    def __init__(self, title: str, spec: str, dtype: str | None, findings: Sequence[Finding] = ()) -> None:
        super().__init__()
        self.cause_title = title
        self.spec = spec
        self.dtype = dtype
        self.findings = list(findings)
        self.fixed: FixRun | None = None
        self.running = True

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(self._summary(), id="fix-summary", markup=False)
        yield RunProgress()
        with VerticalScroll(id="fix-scroll"):
            yield Static(self._body(), id="fix-body", markup=False)
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        if self.running:
            self.query_one(RunProgress).start(f"fixing {self.cause_title}")
        self.query_one("#fix-scroll").focus()

    def _summary(self) -> str:
        if self.running:
            return f"fix for: {self.cause_title} — re-running {self.spec} with remedies; esc cancels"
        if self.fixed is None:
            return f"fix for: {self.cause_title} — stopped"
        verdict = "verified" if self.fixed.section.get("verified") else "not verified"
        patch = "; y copies the patch" if self.patch_text() else ""
        return f"fix for: {self.cause_title} — {verdict}{patch}; esc back"

    def _body(self) -> str:
        if self.fixed is None:
            lines = [f"the findings this fix is for ({len(self.findings)}):"]
            lines += [f"  {f.severity} {f.check}/{f.kind} at {f.node or 'the run'}: {f.message}"
                      for f in self.findings[:12]]
            return "\n".join(lines)
        from ascend_tui.live.fix_run import report_lines

        return "\n".join(report_lines(self.spec, self.dtype, self.fixed))

    def _refresh(self) -> None:
        self.query_one("#fix-summary", Static).update(self._summary())
        self.query_one("#fix-body", Static).update(self._body())

    # -- what the app tells it -------------------------------------------------------------------------

    def report(self, text: str, done: int, total: int | None) -> None:
        """The worker's progress line."""
        bar = self.query_one(RunProgress)
        if bar.running:
            bar.report(text, done, total)

    def show_result(self, fixed: FixRun) -> None:
        """The fix run ended: show its numbers and patch."""
        self.fixed, self.running = fixed, False
        self.query_one(RunProgress).stop()
        self._refresh()

    def ended(self, why: str) -> None:
        """The worker stopped without a result (failed or cancelled)."""
        if self.running:
            self.running = False
            self.query_one(RunProgress).stop()
            self._refresh()
            self.query_one("#fix-body", Static).update(f"{self._body()}\n\nthe fix run {why}")

    # -- keys ------------------------------------------------------------------------------------------

    def patch_text(self) -> str:
        """The verified fix's diff (or snippet); "" when there is none to offer."""
        fixed = self.fixed
        if fixed is None or fixed.patch is None or not fixed.section.get("verified"):
            return ""
        return fixed.patch.diff or fixed.patch.snippet

    def action_copy_patch(self) -> None:
        """Copy the patch: OSC 52 to the terminal's clipboard and a file beside the exports, and say where."""
        from ascend_tui.live.fix_patch import save_patch

        text = self.patch_text()
        if not text:
            why = "the fix is still running" if self.running else (
                (self.fixed.section.get("summary") if self.fixed is not None else "") or "no fix was found")
            self.notify(f"no patch to copy: {why}", markup=False, severity="warning")
            return
        app: Any = self.app
        app.copy_to_clipboard(text)
        try:
            path = save_patch(text, app.export_dir)
        except OSError as exc:
            self.notify(f"copied the patch to the clipboard (OSC 52); writing a copy failed: {exc}", markup=False,
                        severity="warning")
            return
        kind = "diff, apply with `patch -p1`" if self.fixed is not None and self.fixed.patch.diff else "snippet"
        self.notify(f"copied the patch ({kind}) to the terminal clipboard (OSC 52) and wrote it to {path}",
                    title="patch copied", markup=False, timeout=10)

    def action_close(self) -> None:
        """Back; a fix still running is cancelled."""
        app: Any = self.app
        if self.running and app.busy:
            app.action_cancel()
        self.dismiss(None)
