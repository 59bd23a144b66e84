"""`InvestigatorApp`: the Textual app over one `Investigation`, with its background jobs.

Thread workers read files and run models; they post messages, and the handlers here (on
the UI thread) swap in the results. One `Worker.StateChanged` handler turns every worker
failure into a notification (user errors) or a dialog (our bugs), never a crash.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence

from textual import events, on, work
from textual.app import App
from textual.binding import BindingType
from textual.worker import Worker, WorkerState, get_current_worker

from ascend_tui.app.commands import GraphCommands, InvestigatorCommands
from ascend_tui.app.config import DEFAULT_THEME, THEME_ALIASES, load_keymap, load_themes, variable_defaults
from ascend_tui.app.header import header_for
from ascend_tui.app.keys import APP_BINDINGS
from ascend_tui.app.messages import ChecksFinished, FixFinished, InvestigationLoaded, ProgressReported, ResultsArrived
from ascend_tui.app.screens.main import MainScreen
from ascend_tui.app.views import VIEWS, view_by_id
from ascend_tui.app.widgets.detail import Detail
from ascend_tui.app.widgets.progress import RunProgress
from ascend_tui.app.workers import ProgressPoster
from ascend_tui.errors import AscendTuiError, Cancelled, InputError, TargetError
from ascend_tui.export import default_export_stem, op_summary, write_export
from ascend_tui.fmt import plural
from ascend_tui.investigation import Investigation
from ascend_tui.live.options import RunOptions

if TYPE_CHECKING:
    from ascend_tui.app.screens.check_view import CheckView
    from ascend_tui.app.follow import Follower
    from ascend_tui.live.targets import Target

JOB_GROUP = "job"
FOLLOW_GROUP = "follow"
FOLLOW_INTERVAL = 0.5
FALLBACK_THEME = "textual-dark"


class InvestigatorApp(App[None]):
    """Walk an operator graph and its evidence from the keyboard."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "ascend-tui"
    BINDINGS: ClassVar[list[BindingType]] = list(APP_BINDINGS)

    def __init__(
        self,
        source: Sequence[str | Path] | Investigation | None = None,
        *,
        theme: str | None = None,
        live: RunOptions | None = None,
        export_dir: str | Path | None = None,
        follow: bool = False,
        story: bool = False,
    ) -> None:
        self.paths: list[str] = [] if source is None or isinstance(source, Investigation) else [str(p) for p in source]
        self.inv: Investigation | None = source if isinstance(source, Investigation) else None
        self.live = live or RunOptions(checks=("all",))
        self.export_dir = Path(export_dir) if export_dir is not None else Path.cwd()
        self.target: Target | None = None
        self.follow = follow
        self.open_on_story = story  # the first investigation with a story opens on it (the CLI's launches)
        self._follower: Follower | None = None
        self._ran: Investigation | None = None  # the investigation this app ran with `self.live`, if on screen
        self._kept: dict[str, CheckView] = {}  # views kept once built (`CheckView.KEEP`), by view id
        self.config_warnings: list[str] = []
        self.COMMANDS = App.COMMANDS | {InvestigatorCommands, GraphCommands}
        super().__init__()
        self._setup_themes(theme)
        self.set_keymap(load_keymap(self.config_warnings))
        self.main = MainScreen()

    # -- configuration ------------------------------------------------------------------------

    def _setup_themes(self, wanted: str | None) -> None:
        """Register the bundled and user themes (Textual's ansi-dark/ansi-light are built in) and pick one."""
        for theme in load_themes(self.config_warnings):
            self.register_theme(theme)
        default = DEFAULT_THEME
        name = THEME_ALIASES.get(wanted, wanted) if wanted else default
        if self.get_theme(name) is None:
            if wanted:
                self.config_warnings.append(f"unknown theme {wanted!r}; available: {', '.join(sorted(self.available_themes))}")
            name = default if self.get_theme(default) is not None else FALLBACK_THEME
        self.theme = name

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """Our own theme variables (`$metric-bad`, `$badge-error`, ...) for themes that do not set them."""
        return variable_defaults(self.current_theme)

    async def on_mount(self) -> None:
        await self.push_screen(self.main)
        for warning in self.config_warnings:
            self.notify(warning, severity="warning", markup=False, timeout=8)
        if self.inv is not None:
            self._show(self.inv)
        elif self.follow and self.paths:
            self.start_following(self.paths[0])
        elif self.paths:
            self.open_paths(self.paths)
        else:
            self.paint_header()

    def on_resize(self, event: events.Resize) -> None:
        self.paint_header(event.size.width)

    def paint_header(self, width: int | None = None) -> None:
        """Title and subtitle: what is on screen and the settings that made it, fitted to the width."""
        self.title, self.sub_title = header_for(self.inv, width or self.size.width, following=self.following)

    @property
    def following(self) -> bool:
        """True while follow mode keeps reading the opened path."""
        return self._follower is not None

    # -- follow mode --------------------------------------------------------------------------

    def start_following(self, path: str | Path) -> None:
        """Read `path` (a growing sanitizer log or a watch() folder) now and every `FOLLOW_INTERVAL` seconds."""
        from ascend_tui.app.follow import follower_for

        self._follower = follower_for(path)
        self.main.query_one(Detail).note(f"following {path}: waiting for the first report line …")
        self.paint_header()
        self._poll_follow()
        self.set_interval(FOLLOW_INTERVAL, self._poll_follow)

    def _poll_follow(self) -> None:
        if self._follower is not None and not any(w.group == FOLLOW_GROUP and not w.is_finished
                                                  for w in self.workers):
            self._follow_job()

    @work(thread=True, group=FOLLOW_GROUP, exit_on_error=False, description="following")
    def _follow_job(self) -> None:
        assert self._follower is not None
        inv = self._follower.poll()
        if inv is not None:
            self.call_from_thread(self._followed, inv)

    def _followed(self, inv: Investigation) -> None:
        """A newer investigation from the followed path: shown in place, the focus kept, new findings announced."""
        before = len(self.inv.findings) if self.inv is not None else 0
        self._show(inv, self.main.ops.current if self.inv is not None else None)
        added = len(inv.findings) - before
        if added > 0 and before:
            self.notify(f"{plural(added, 'new finding')} from {Path(self._follower.path).name if self._follower else ''}",
                        markup=False, timeout=3)

    # -- showing results ----------------------------------------------------------------------

    def _show(self, inv: Investigation, focus: str | None = None, *, final: bool = True) -> None:
        self.inv = inv
        for view_id, kept in list(self._kept.items()):  # an older investigation's views are not kept alive
            if kept.inv is not inv and kept not in self.screen_stack:
                self._drop_kept(view_id)
        self.main.set_investigation(inv, focus)
        self.paint_header()
        self.refresh_bindings()
        if final and self.open_on_story:
            self.open_on_story = False
            self.call_after_refresh(self._open_story)

    def _open_story(self) -> None:
        """Open on the story: the few causes behind the findings, each opening onto its evidence."""
        from ascend_tui.app.screens.story import StoryScreen

        if self.inv is None or not StoryScreen.available(self.inv) or self.screen is not self.main:
            return
        view = StoryScreen(self.inv)
        if view.causes:
            self.push_screen(view, lambda node: self.main.go(node) if node else None)

    @on(InvestigationLoaded)
    def _loaded(self, message: InvestigationLoaded) -> None:
        self.target = message.target or self.target
        self._ran = message.inv if message.target is not None else None
        self._show(message.inv)
        for note in message.notes:
            self.notify(note, markup=False)

    @on(ChecksFinished)
    def _checks_finished(self, message: ChecksFinished) -> None:
        self.target = message.target or self.target
        focus = self.main.ops.current
        self._ran = message.inv
        self._show(message.inv, focus)
        found = len(message.inv.findings)
        self.notify(f"{', '.join(message.checks) or 'capture'}: {plural(found, 'finding')}", markup=False)

    @on(ResultsArrived)
    def _partial(self, message: ResultsArrived) -> None:
        """Show what a running job has so far (the graph, then each check's findings), keeping the focus."""
        if self.workers and any(w.group == JOB_GROUP and w.is_running for w in self.workers):
            self._show(message.inv, self.main.ops.current, final=False)

    @on(ProgressReported)
    def _progress(self, message: ProgressReported) -> None:
        bar = self.main.query_one(RunProgress)
        if bar.running:
            bar.report(message.text(), message.done, message.total)
        if message.job == "fix":
            from ascend_tui.app.screens.fix import FixScreen

            if isinstance(self.screen, FixScreen):
                self.screen.report(message.text(), message.done, message.total)

    @on(FixFinished)
    def _fixed(self, message: FixFinished) -> None:
        """A fix run ended: its screen shows the result (opened again if the user left it)."""
        from ascend_tui.app.screens.fix import FixScreen

        screen = self.screen if isinstance(self.screen, FixScreen) else None
        if screen is None:
            screen = FixScreen(message.title, message.spec, message.dtype)
            screen.running = False
            screen.fixed = message.fixed
            self.push_screen(screen)
        else:
            screen.show_result(message.fixed)
        self.notify(f"fix for {message.title}: {message.fixed.section.get('summary', '')}", markup=False, timeout=8)

    # -- background jobs ----------------------------------------------------------------------

    def open_paths(self, paths: Sequence[str | Path]) -> None:
        """Read (or run) `paths` in a worker; the first is the investigation, later ones map onto it."""
        self._open_job([str(p) for p in paths])

    @work(thread=True, exclusive=True, group=JOB_GROUP, exit_on_error=False, description="opening")
    def _open_job(self, paths: list[str]) -> None:
        from ascend_tui.app import workers

        worker = get_current_worker()
        loaded = workers.load_paths(paths, self.live, ProgressPoster(self.post_message, "open"),
                                    worker.cancelled_event, self._poster("open"))
        if not worker.is_cancelled:
            self.post_message(InvestigationLoaded(loaded.inv, source=paths[0], target=loaded.target,
                                                  notes=tuple(loaded.notes)))

    @work(thread=True, exclusive=True, group=JOB_GROUP, exit_on_error=False, description="running checks")
    def _checks_job(self, target: Target | None, spec: str, checks: tuple[str, ...] | None) -> None:
        from ascend_tui.app import workers

        worker = get_current_worker()
        progress = ProgressPoster(self.post_message, "checks")
        model = target if target is not None else workers.load_model(spec, progress)
        names, missing = workers.split_checks(checks if checks is not None else self.live.checks)
        if missing:
            raise InputError("--checks", f"not part of this version yet: the {', '.join(missing)} check")
        inv = workers.run_checks(model, self.live, names, progress, worker.cancelled_event, self._poster("checks"))
        if not worker.is_cancelled:
            self.post_message(ChecksFinished(inv, names, model))

    def _poster(self, job: str) -> Callable[[Investigation], None]:
        """A callback for domain code in a worker thread: post each partial result to the UI thread."""
        return lambda inv: self.post_message(ResultsArrived(inv, job))

    @on(Worker.StateChanged)
    def _worker_changed(self, event: Worker.StateChanged) -> None:
        """Progress bar for job workers; every failure becomes a message a person can act on."""
        worker = event.worker
        if worker.group == FOLLOW_GROUP and event.state == WorkerState.ERROR and worker.error is not None:
            self._follower = None  # one message, not one every half second
            self.paint_header()
            self.show_error(worker.error, "following")
        if worker.group != JOB_GROUP:
            return
        bar = self.main.query_one(RunProgress)
        if event.state == WorkerState.RUNNING:
            bar.start(worker.description)
            if self.inv is None:
                self.main.query_one(Detail).note(f"{worker.description} {' '.join(self.paths)} …")
            return
        if event.state in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            if not any(w.group == JOB_GROUP and not w.is_finished and w is not worker for w in self.workers):
                bar.stop()
        if event.state in (WorkerState.ERROR, WorkerState.CANCELLED) and self.inv is None:
            self.main.query_one(Detail).show(None, None)
        from ascend_tui.app.screens.fix import FixScreen

        if event.state in (WorkerState.ERROR, WorkerState.CANCELLED) and isinstance(self.screen, FixScreen):
            self.screen.ended("was cancelled" if event.state == WorkerState.CANCELLED else "failed (see the notification)")
        if event.state == WorkerState.CANCELLED:
            self.notify(f"{worker.description}: cancelled", markup=False)
        elif event.state == WorkerState.ERROR and worker.error is not None:
            self.show_error(worker.error, worker.description)

    def show_error(self, error: BaseException, doing: str) -> None:
        """User and environment errors become one notification; anything else is a bug, shown in a dialog."""
        if isinstance(error, Cancelled):
            self.notify(f"{doing}: cancelled", markup=False)
        elif isinstance(error, TargetError):
            detail = f"\n{error.user_traceback}" if error.user_traceback else ""
            self.notify(f"{error.line()}{detail}", title=f"{doing} failed", severity="error", markup=False,
                        timeout=12)
        elif isinstance(error, (InputError, AscendTuiError)):
            self.notify(str(error), title=f"{doing} failed", severity="error", markup=False, timeout=10)
        else:
            from ascend_tui.app.screens.dialogs import ErrorDialog

            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            self.push_screen(ErrorDialog(f"{doing} failed: {type(error).__name__}: {error}", text))

    @property
    def busy(self) -> bool:
        """True while a job worker runs."""
        return any(w.group == JOB_GROUP and not w.is_finished for w in self.workers)

    # -- actions the keys, the palette and the views call --------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """False hides a binding (a part of the app not installed, a view with no evidence); None dims it."""
        if action == "copy_summary":
            return self.inv is not None or None
        if action == "open_view":
            # a built-in view's key always answers (saying how to get its evidence when there is none)
            view = view_by_id(str(parameters[0]))
            return view is not None and (self.inv is not None or view.available(self.inv))
        if action in ("export_report", "focus_node"):
            return self.inv is not None or None
        return True

    def action_cancel(self) -> None:
        """Stop the running job; with none running, close search / step mode on the graph view."""
        if self.busy:
            self.workers.cancel_group(self, JOB_GROUP)
        elif self.screen is self.main:
            self.main.escape()

    def action_help(self) -> None:
        from ascend_tui.app.screens.help import HelpScreen

        self.push_screen(HelpScreen(self.screen))

    def action_open_dialog(self) -> None:
        from ascend_tui.app.screens.dialogs import OpenDialog

        def chosen(path: str | None) -> None:
            if path:
                self.open_paths([path])

        self.push_screen(OpenDialog(), chosen)

    def action_pick_point(self) -> None:
        """List the steps and ranks on screen; the one chosen is opened in a background job."""
        from ascend_tui.app.screens.dialogs import PointPicker
        from ascend_tui.offline.trends import PROFILE_STEP, picks_of

        picks = picks_of(self.inv)
        if len(picks) < 2:
            why = "one step and one rank in this dump: nothing to pick" if picks or (
                self.inv is not None and self.inv.run.source == "msprobe") else "no steps or ranks to pick here"
            self.notify(f"{why} (open an msprobe dump root with step*/rank*/ folders, a cluster profile's rank "
                        f"folders or a profile of several steps)", markup=False, severity="warning", timeout=8)
            return

        def chosen(key: str | None) -> None:
            here = self.inv.run.extra.get("rank_dir") if self.inv is not None else None
            if not key or self.inv is None:
                return
            if key.startswith(PROFILE_STEP):
                self._pick_job(self.inv, key)
            elif not (here and Path(key).resolve() == Path(str(here)).resolve()):
                self.open_paths([key])

        self.push_screen(PointPicker(self.inv, picks), chosen)

    @work(thread=True, exclusive=True, group=JOB_GROUP, exit_on_error=False, description="opening the step")
    def _pick_job(self, inv: Investigation, key: str) -> None:
        from ascend_tui.offline.trends import open_pick

        worker = get_current_worker()
        out = open_pick(inv, key, ProgressPoster(self.post_message, "open"), worker.cancelled_event)
        if not worker.is_cancelled:
            self.post_message(InvestigationLoaded(out, source=key, notes=tuple(out.run.extra.get("notes", ())[-1:])))

    def action_focus_node(self, node_id: str) -> None:
        """Show the graph view with `node_id` focused (what views and palette commands call)."""
        if self.screen is not self.main:
            self.switch_screen_to_main()
        self.main.go(node_id)

    def show_module(self, module: str) -> None:
        """Show the graph view with only `module`'s operators listed (what the palette's module entries call)."""
        if self.screen is not self.main:
            self.switch_screen_to_main()
        self.main.show_module(module)

    def switch_screen_to_main(self) -> None:
        while len(self.screen_stack) > 1 and self.screen is not self.main:
            self.pop_screen()

    def action_open_view(self, view_id: str) -> None:
        """Open a per-check view from the registry; it dismisses with the operator to focus."""
        try:
            view = view_by_id(view_id)
        except InputError as exc:  # a plug-in view that does not import
            self.notify(str(exc), severity="error", markup=False)
            return
        if view is None or self.inv is None:
            self.notify(f"no view named {view_id!r}", severity="warning", markup=False)
            return
        if not view.available(self.inv):
            how = f": {view.HOW_TO_GET}" if view.HOW_TO_GET else ""
            self.notify(f"no {view.TITLE.lower()} evidence in this investigation{how}", markup=False,
                        severity="warning", timeout=8)
            return

        def chosen(node: str | None) -> None:
            if node:
                self.main.go(node)

        self.push_screen(self._view_screen(view_id, view), chosen)

    def _view_screen(self, view_id: str, view: type[CheckView]) -> CheckView:
        """The view's screen on this investigation: the one kept from its last opening if it still shows it, else
        a new one (kept, when the view says so: composing and styling the profile view is most of `T`'s 120-200 ms)."""
        kept = self._kept.get(view_id)
        if kept is not None and kept in self.screen_stack:  # open beneath: a second one, as before
            return view(self.inv)
        if kept is not None and kept.inv is self.inv and kept.reusable():
            return kept
        if kept is not None:  # an older investigation's, or one still waiting on its advice
            self._drop_kept(view_id)
        screen = view(self.inv)
        if view.KEEP:
            self.install_screen(screen, f"kept-view:{view_id}")
            self._kept[view_id] = screen
        return screen

    def build_views_ahead(self, inv: Investigation) -> None:
        """Compose the kept views of the investigation shown before they are opened (the prepare worker calls it once
        its job is done): their first opening then only lays them out and paints (`T` at 100k kernels 133 -> 63 ms)."""
        if inv is not self.inv:
            return
        for view in VIEWS:
            kept = self._kept.get(view.VIEW_ID)
            if not view.KEEP or not view.available(inv) or (kept is not None and (
                    kept in self.screen_stack or (kept.inv is inv and kept.reusable()))):
                continue
            screen = self._view_screen(view.VIEW_ID, view)
            # Textual composes, mounts and styles a screen when it is first pushed; started here with push_screen's
            # own two calls (textual is pinned), the push finds it running
            self._get_screen(screen)
            self._load_screen_css(screen)

    def _drop_kept(self, view_id: str) -> None:
        """Forget a kept view (not on the screen stack) and remove its widgets."""
        kept = self._kept.pop(view_id)
        self.uninstall_screen(kept)
        kept.remove()

    def action_story_cause(self) -> None:
        """Open the story on the cause that explains the focused operator's most severe finding."""
        from ascend_tui.app.screens.story import StoryScreen
        from ascend_tui.checks.story import finding_ids

        node = self.main.ops.current
        if self.inv is None or node is None:
            return
        ids = dict(zip(map(id, self.inv.findings), finding_ids(self.inv.findings)))
        mine = self.inv.findings_for(node)
        if not mine:
            self.notify(f"no finding on {node}: nothing for the story to explain here", markup=False)
            return

        def chosen(target: str | None) -> None:
            if target:
                self.main.go(target)

        self.push_screen(StoryScreen(self.inv, select=ids[id(mine[0])]), chosen)

    def action_fix(self) -> None:
        """Fix the cause under the cursor (story) or of the focused operator's finding: re-run, verify, patch."""
        from ascend_tui.app.screens.fix import FixScreen, cause_findings, chosen_cause, offline_reason

        if self.inv is None:
            return
        spec = self.target.spec if self.target is not None else self._model_spec()
        cause, why = chosen_cause(self, self.inv)
        if spec is None or self.busy or cause is None:
            self.notify(offline_reason(self.inv) if spec is None else "a job is running: wait for it, or esc to "
                        "cancel it" if self.busy else why, markup=False, severity="warning", timeout=12)
            return
        findings = cause_findings(self.inv, cause)
        options = self.settings_on_screen()
        self.push_screen(FixScreen(cause.title, spec, options.dtype, findings))
        self._fix_job(spec, options, findings, cause.title)

    @work(thread=True, exclusive=True, group=JOB_GROUP, exit_on_error=False, description="fixing")
    def _fix_job(self, spec: str, options: RunOptions, findings: list[Any], title: str) -> None:
        from ascend_tui.app import workers

        worker = get_current_worker()
        assert self.inv is not None
        fixed = workers.fix_findings(self.target, spec, options, self.inv, findings,
                                     ProgressPoster(self.post_message, "fix"), worker.cancelled_event)
        if not worker.is_cancelled:
            self.post_message(FixFinished(fixed, title, spec, options.dtype))

    def action_run_checks(self) -> None:
        """Ask for the run's settings (prefilled with those on screen), then run the model again with them."""
        spec = self.target.spec if self.target is not None else self._model_spec()
        if spec is None:
            self.action_run_check(None)  # says there is no model to run
            return
        from ascend_tui.app.screens.run_settings import RunSettingsDialog
        from ascend_tui.app.workers import available_checks

        def chosen(options: RunOptions | None) -> None:
            if options is not None:
                self.live = options
                self._checks_job(self.target, spec, tuple(options.check_names))

        self.push_screen(RunSettingsDialog(self.settings_on_screen(), available_checks()), chosen)

    def settings_on_screen(self) -> RunOptions:
        """The run settings that made the investigation on screen (for a live one), else the app's."""
        run = self.inv.run if self.inv is not None else None
        if run is None or run.source != "live" or self.inv is self._ran:
            return self.live
        # float32 is what a model runs in unless told otherwise: keep "as the model is" (no cast, no copy)
        # the device the run used (`cpu`, `npu:1`), not the `auto` that picked it
        backend, index = str(run.device.get("backend") or ""), int(run.device.get("index") or 0)
        device = self.live.device
        if backend in ("npu", "cuda", "cpu"):
            device = f"{backend}:{index}" if index else backend
        return self.live.but(checks=tuple(run.checks) or self.live.checks,
                             dtype=None if run.dtype == "float32" else run.dtype,
                             iterations=run.iterations, backward=bool(run.extra.get("backward")),
                             reference=run.reference, device=device)

    def action_run_check(self, name: str | None) -> None:
        """Run one live check (None: all available) on the model behind this investigation."""
        spec = self.target.spec if self.target is not None else self._model_spec()
        if spec is None:
            self.notify("no model to run: open a model file (model.py) to run checks live", severity="warning",
                        markup=False)
            return
        self._checks_job(self.target, spec, (name,) if name else None)

    def _model_spec(self) -> str | None:
        from ascend_tui.app.workers import is_model_file

        for candidate in (*self.paths[:1], self.inv.run.target if self.inv else ""):
            if candidate and is_model_file(candidate) and Path(candidate.rsplit(":", 1)[0]).exists():
                return candidate
        return None

    def action_export_report(self, fmt: str = "all") -> None:
        """Ask where to write the report (JSON, Markdown or both), showing the default first, then write it."""
        if self.inv is None:
            return
        from ascend_tui.app.screens.dialogs import ExportDialog

        formats = ("json", "markdown") if fmt == "all" else (fmt,)
        base = default_export_stem(self.export_dir, formats)
        default = str(base) if len(formats) > 1 else str(base.with_suffix(".md" if fmt == "markdown" else ".json"))
        what = "the JSON and Markdown reports (.json and .md)" if len(formats) > 1 else f"the {fmt} report"

        def chosen(path: str | None) -> None:
            if path:
                self._write_export(Path(path).expanduser(), formats)

        self.push_screen(ExportDialog(default, what), chosen)

    def _write_export(self, path: Path, formats: tuple[str, ...]) -> None:
        suffix = {".json": "json", ".md": "markdown", ".markdown": "markdown"}.get(path.suffix.lower())
        targets = [(path, suffix)] if suffix else [(path.with_name(path.name + (".json" if k == "json" else ".md")), k)
                                                    for k in formats]
        written: list[str] = []
        try:
            for out, kind in targets:
                written.append(str(write_export(self.inv, out, kind, inputs=self.paths)))
        except (InputError, OSError) as exc:
            self.notify(str(exc), title="export failed", severity="error", markup=False)
            return
        self.notify("wrote " + ", ".join(written), title="report exported", markup=False)

    def action_copy_summary(self) -> None:
        """Copy the focused operator's summary to the clipboard (OSC 52 reaches the SSH client)."""
        node = self.main.ops.current
        if self.inv is None or node is None:
            return
        self.copy_to_clipboard(op_summary(self.inv, node))
        self.notify(f"copied the summary of {node}", markup=False)
