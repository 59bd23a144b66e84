"""`RunSettingsDialog`: the settings of a live run (checks, dtype, device, iterations, backward), prefilled.

`x` opens it before re-running the model, with what made the investigation on screen, so a
float32 look can become a float16 run without leaving the app; the same settings as the
`check` and `open` flags.
"""

from __future__ import annotations

from typing import ClassVar, Sequence

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Select

from ascend_tui.live.options import DTYPES, RunOptions

KEEP_DTYPE = "as the model is"


class Mark(Checkbox):
    """A checkbox whose on and off differ by their mark (`✓` or blank), not by colour alone."""

    @property  # type: ignore[override]
    def BUTTON_INNER(self) -> str:  # noqa: N802 - Textual's name for the mark
        return "✓" if self.value else " "


class RunSettingsDialog(ModalScreen[RunOptions | None]):
    """Edit `RunOptions` and dismiss with the new ones (enter or Run), or None (escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="dialog.close"),
        Binding("ctrl+r", "run", "run", id="dialog.run"),
    ]
    DEFAULT_CSS = """
    RunSettingsDialog { align: center middle; }
    RunSettingsDialog > Vertical { width: 64; max-width: 100%; height: auto; border: round $accent;
                                   background: $surface; padding: 0 1; }
    RunSettingsDialog .row { height: 1; margin-bottom: 1; }
    RunSettingsDialog .row Label { width: 12; color: $text-muted; }
    RunSettingsDialog .row Input, RunSettingsDialog .row Select { width: 1fr; }
    RunSettingsDialog #checks-row { height: auto; }
    RunSettingsDialog #checks { height: auto; width: 1fr; layout: grid; grid-size: 2; grid-rows: 1; }
    RunSettingsDialog #checks Checkbox { width: 1fr; }
    RunSettingsDialog #buttons { height: 1; align-horizontal: right; }
    RunSettingsDialog #buttons Button { margin-left: 2; }
    RunSettingsDialog #error { color: $error; height: auto; }
    """

    def __init__(self, options: RunOptions, checks: Sequence[str]) -> None:
        super().__init__()
        self.options = options
        self.checks = tuple(checks)

    def compose(self) -> ComposeResult:
        o = self.options
        wanted = set(self.checks if "all" in o.check_names else o.check_names)
        with Vertical():
            yield Label("run the model again with", markup=False)
            with Horizontal(classes="row", id="checks-row"):
                yield Label("checks", markup=False)
                with Horizontal(id="checks"):
                    for name in self.checks:
                        yield Mark(name, name in wanted, id=f"check-{name}", compact=True)
            with Horizontal(classes="row"):
                yield Label("dtype", markup=False)
                yield Select([(d, d) for d in (KEEP_DTYPE, *DTYPES)], value=o.dtype or KEEP_DTYPE,
                             allow_blank=False, id="dtype", compact=True)
            with Horizontal(classes="row"):
                yield Label("device", markup=False)
                yield Input(o.device, placeholder="auto, cpu, cuda, npu, npu:1", id="device", compact=True)
            with Horizontal(classes="row"):
                yield Label("iterations", markup=False)
                yield Input(str(o.iterations), type="integer", id="iterations", compact=True)
            with Horizontal(classes="row"):
                yield Label("reference", markup=False)
                yield Input(o.reference or "none", placeholder="cpu:float32 or none", id="reference", compact=True)
            with Horizontal(classes="row"):
                yield Label("backward", markup=False)
                yield Mark("also check gradients", o.backward, id="backward", compact=True)
            yield Label("", id="error", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel", compact=True)
                yield Button("Run", id="run", variant="primary", compact=True)

    def chosen(self) -> RunOptions | str:
        """The options the form holds, or a sentence saying what is wrong with them."""
        checks = tuple(n for n in self.checks if self.query_one(f"#check-{n}", Checkbox).value)
        try:
            iterations = int(self.query_one("#iterations", Input).value or "1")
        except ValueError:
            return "iterations must be a whole number"
        if iterations < 1:
            return "iterations must be at least 1"
        dtype = self.query_one("#dtype", Select).value
        device = self.query_one("#device", Input).value.strip() or "auto"
        reference = self.query_one("#reference", Input).value.strip()
        return self.options.but(checks=checks, dtype=None if dtype == KEEP_DTYPE else str(dtype), device=device,
                                iterations=iterations, backward=self.query_one("#backward", Checkbox).value,
                                reference=None if reference in ("", "none") else reference)

    def action_run(self) -> None:
        result = self.chosen()
        if isinstance(result, str):
            self.query_one("#error", Label).update(result)
            return
        self.dismiss(result)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_run()

    @on(Button.Pressed, "#run")
    def _run(self) -> None:
        self.action_run()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.action_cancel()
