"""Every key binding of the app, each with an id so a user's keymap can move it.

Plain letters first: function keys and most ctrl combinations get lost over SSH and tmux.
Ids are `area.verb`; `config.load_keymap()` maps ids to keys (`"graph.producer" = "u"`).
"""

from __future__ import annotations

from textual.binding import Binding

APP_BINDINGS: list[Binding] = [
    Binding("question_mark", "help", "help", id="app.help"),
    Binding("ctrl+p,colon", "command_palette", "palette", id="app.palette", priority=True, show=False),
    Binding("q,ctrl+q", "quit", "quit", id="app.quit", show=False),
    Binding("x", "run_checks", "re-run", id="app.run-checks", show=False,
            tooltip="run the model again: a form with checks, dtype, device, iterations, backward"),
    Binding("e", "export_report('all')", "export report", id="app.export", show=False),
    Binding("y", "copy_summary", "copy summary", id="app.copy-summary", show=False),
    Binding("O", "open_dialog", "open file", id="app.open", show=False),
    Binding("X", "fix", "fix", id="app.fix", show=False,
            tooltip="re-run the model with the remedy for the focused finding's cause (or the story's cause under "
                    "the cursor), verify it and show the patch"),
    Binding("i", "pick_point", "steps/ranks", id="app.pick-point", show=False,
            tooltip="pick another step or rank of the dump or profile on screen: one line each, opened in the background"),
    Binding("escape", "cancel", "cancel", id="app.cancel", show=False),
]

GRAPH_BINDINGS: list[Binding] = [
    # Step keys first: they exist only in step mode, and then the footer shows them before the rest.
    Binding("right,l", "step(1)", "next op", id="graph.step-forward"),
    Binding("left,h", "step(-1)", "previous op", id="graph.step-back"),
    Binding("f", "first_finding", "first finding", id="graph.first-finding"),
    Binding("n", "next_finding", "next", id="graph.next-finding"),
    Binding("N", "previous_finding", "previous finding", id="graph.previous-finding", show=False),
    Binding("p", "producer", "producer", id="graph.producer",
            tooltip="the producer that computes, over views, reshapes and copies"),
    Binding("P", "producer_every_op", "producer (every op)", id="graph.producer-every-op", show=False),
    Binding("c", "consumer", "consumer", id="graph.consumer", show=False),
    Binding("r", "root_cause", "root cause", id="graph.root-cause"),
    Binding("R", "app.story_cause", "cause in story", id="graph.story-cause", show=False),
    Binding("b,backspace", "back", "back", id="graph.back"),
    Binding("s", "step_mode", "step", id="graph.step-mode"),
    Binding("slash", "search", "search", id="graph.search"),
    Binding("F", "toggle_flagged", "flagged", id="graph.flagged"),
    Binding("t", "module_tree", "modules", id="graph.module-tree"),
    Binding("enter", "focus_cursor", "focus", id="graph.focus", show=False),
    Binding("right_square_bracket", "detail_page(1)", "detail down", id="graph.detail-down", show=False),
    Binding("left_square_bracket", "detail_page(-1)", "detail up", id="graph.detail-up", show=False),
    Binding("z", "zoom", "zoom pane", id="graph.zoom", show=False,
            tooltip="the focused pane (the list, or the detail after tab) fills the screen; z again restores"),
    Binding("plus", "resize_list(1)", "list bigger", id="graph.list-bigger", show=False),
    Binding("minus", "resize_list(-1)", "list smaller", id="graph.list-smaller", show=False),
    *[Binding(str(d), f"slot({d})", f"input slot {d}", id=f"graph.slot-{d}", show=False) for d in range(10)],
]

LIST_BINDINGS: list[Binding] = [
    Binding("j,down", "cursor(1)", "down", id="list.down", show=False),
    Binding("k,up", "cursor(-1)", "up", id="list.up", show=False),
    Binding("pagedown,space", "page(1)", "page down", id="list.page-down", show=False),
    Binding("pageup", "page(-1)", "page up", id="list.page-up", show=False),
    Binding("g,home", "edge(0)", "first row", id="list.top", show=False),
    Binding("G,end", "edge(1)", "last row", id="list.bottom", show=False),
]


def view_binding(view_id: str, key: str, title: str) -> Binding:
    """The binding that opens a per-check view from the registry (`o` overflow, `m` memory)."""
    return Binding(key, f"app.open_view('{view_id}')", title.lower(), id=f"view.{view_id}")
