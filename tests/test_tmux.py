"""One scripted terminal session, as a user over SSH would run it: `ascend-tui open` in tmux, keys in, screen out."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
from live_investigations import nan_investigation, saved

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"),
]
DEADLINE_S = 300.0  # bounds a hang only: a loaded 2-core CI box may take a minute to start the app


class Tmux:
    """A private tmux server with one 100x30 session running a command (COLUMNS/LINES unset: the pane decides)."""

    def __init__(self, command: list[str], env: dict[str, str], size: tuple[int, int] = (100, 30)) -> None:
        self.socket = f"ascend-tui-test-{os.getpid()}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        self._tmux("new-session", "-d", "-s", "app", "-x", str(size[0]), "-y", str(size[1]),
                   f"env -u COLUMNS -u LINES {exports} {shlex.join(command)}; echo EXITED; sleep 30")

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=False)
        return done.stdout

    def keys(self, *keys: str) -> None:
        for key in keys:
            self._tmux("send-keys", "-t", "app", key)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "app")

    def wait_for(self, what: Callable[[str], bool], label: str) -> str:
        """Poll the pane until `what` holds (the deadline only bounds a hang; no step depends on speed)."""
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end:
            text = self.screen()
            if what(text):
                return text
            time.sleep(0.1)
        raise AssertionError(f"never saw {label}; the screen was:\n{self.screen()}")

    def resize(self, width: int, height: int) -> None:
        self._tmux("resize-window", "-t", "app", "-x", str(width), "-y", str(height))

    def close(self) -> None:
        self._tmux("kill-server")


def _breadcrumb(text: str) -> str:
    return text.splitlines()[1].strip()


def test_open_walk_and_quit_in_a_real_terminal(tmp_path: Path) -> None:
    path = saved(nan_investigation(), tmp_path)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    session = Tmux([sys.executable, "-m", "ascend_tui", "open", str(path)], env)
    try:
        # The header's summary and the list repaint independently: wait for both, never assume an order.
        session.wait_for(lambda t: "operators 6 of 6" in t and "6 ops" in t.splitlines()[0],
                         "the operator list and the header's summary")
        session.keys("G")
        session.wait_for(lambda t: _breadcrumb(t).endswith("sum.0"), "the last operator focused")
        session.keys("p")
        session.wait_for(lambda t: _breadcrumb(t).endswith("proj/addmm.0"), "the producer of sum.0")
        session.keys("1", "p", "p")
        session.wait_for(lambda t: _breadcrumb(t).endswith("mul.0 › log.0") and _nan_count(t) == "32",
                         "the NaN origin with its 32 NaNs in the statistics")
        session.keys("/")  # the search box takes the keys only once it is shown and focused
        session.wait_for(lambda t: "search id, module or op type" in t, "the search box")
        session.keys("sub")
        session.wait_for(lambda t: 'operators 1 of 6 · "sub"' in t, "the search result count")
        session.keys("Escape")  # alone: a terminal reads Escape followed at once by q as alt+q
        session.wait_for(lambda t: "operators 6 of 6" in t, "the search cleared")
        session.keys("q")
        session.wait_for(lambda t: "EXITED" in t, "the app to quit")
    finally:
        session.close()


def _nan_count(screen: str) -> str | None:
    """The target's NaN count in the detail pane's statistics, when it is on screen."""
    for line in screen.splitlines():
        if line.strip().startswith("NaN") and len(line.split()) > 1:
            return line.split()[1]
    return None


def _line(screen: str, index: int) -> str:
    """One line of the pane ("" while the pane is still empty)."""
    lines = screen.splitlines()
    return lines[index] if lines else ""


def _fits(screen: str, width: int) -> bool:
    """Header and footer whole at this width: no `…`-cut word, and the footer ends with the palette key."""
    lines = screen.splitlines()
    if len(lines) < 3:
        return False
    header, footer = lines[0], lines[-1]
    return ("…" not in header and "…" not in footer and footer.rstrip().endswith("palette")
            and len(footer) <= width)


def test_the_demo_fits_80x24_and_other_widths_without_cut_words_or_stray_cells(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    session = Tmux([sys.executable, "-m", "ascend_tui", "demo"], env, size=(80, 24))
    try:
        session.wait_for(lambda t: re.search(r"\b[1-9]\d* err", _line(t, 0)) is not None and "behind the findings" in t,
                         "the demo opening on its story, findings in the header")
        session.wait_for(lambda t: _fits(t, 80), "a whole header and footer on the story at 80x24")
        session.keys("Escape")
        session.wait_for(lambda t: "operators" in t and _fits(t, 80), "the graph with a whole header and footer")
        session.keys("s")
        session.wait_for(lambda t: "→ next op" in _line(t, -1) and _fits(t, 80), "step mode's keys in the footer")
        session.keys("Escape")
        for width in (60, 100, 80):
            session.resize(width, 24)
            session.wait_for(lambda t, w=width: len(_line(t, 0)) <= w and _fits(t, w),
                             f"a whole header and footer at {width} columns")
        session.keys("q")
        session.wait_for(lambda t: "EXITED" in t, "the app to quit")
    finally:
        session.close()
