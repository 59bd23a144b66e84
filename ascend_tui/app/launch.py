"""Entry points the CLI calls: the app on paths, the bundled demo, and the app in a browser."""

from __future__ import annotations

import ipaddress
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ascend_tui.errors import InputError

if TYPE_CHECKING:
    from ascend_tui.live.options import RunOptions

DEMO_CHECKS = ("overflow", "memory")
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def _existing(paths: Sequence[str]) -> list[str]:
    """The paths as given; a missing one is bad input before the app starts (model.py:factory allowed)."""
    from ascend_tui.live.targets import split_spec

    for p in paths:
        if not Path(p).exists() and not split_spec(p)[0].exists():
            raise InputError(p, "no such file or folder")
    return [str(p) for p in paths]


def run_app(paths: Sequence[str], theme: str | None = None, live: RunOptions | None = None,
            follow: bool = False) -> int:
    """`ascend-tui open PATH...`: the first path is read (or run with `live`), later sanitizer logs map onto it.

    With `follow`, the one path (a growing sanitizer log or a `watch()` folder) is read again as it grows.
    """
    from ascend_tui.app.app import InvestigatorApp

    # A followed log may not exist yet (the tool has not started): like `tail -F`, wait for it.
    InvestigatorApp([str(p) for p in paths] if follow else _existing(paths), theme=theme, live=live,
                    follow=follow, story=not follow).run()
    return 0


def demo_path() -> Path:
    """The bundled demo model: `samples/demo.py` in a checkout, `ascend_tui/_samples/demo.py` in a wheel."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "_samples" / "demo.py", package.parent / "samples" / "demo.py"):
        if candidate.is_file():
            return candidate
    raise InputError("samples/demo.py", "the bundled demo is missing from this installation")


def run_demo(theme: str | None = None) -> int:
    """`ascend-tui demo`: run the demo model live on the CPU in float16 with the overflow and memory checks."""
    from ascend_tui.app.app import InvestigatorApp

    InvestigatorApp([str(demo_path())], theme=theme, live=demo_options(), story=True).run()
    return 0


def demo_options() -> RunOptions:
    """The demo's run: CPU, float16 against a float32 reference, overflow and memory checks, three
    iterations so the leak shows (the reference run is sanitized too, so the bad index cannot crash it).
    """
    from ascend_tui.live.options import RunOptions

    return RunOptions(checks=DEMO_CHECKS, device="cpu", dtype="float16", iterations=3, reference="cpu:float32")


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses: the only places `serve` listens."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve(paths: Sequence[str], host: str = "localhost", port: int = 8000) -> int:
    """`ascend-tui serve`: the same app in a browser through textual-serve, on localhost only.

    The app can run model files, so it never listens beyond this machine; reach it from a
    laptop with `ssh -L 8000:localhost:8000 server`.
    """
    if not is_loopback(host):
        raise InputError("--host", f"{host!r} is not a loopback address: serve listens on localhost only "
                                   f"(use `ssh -L {port}:localhost:{port} <server>` to reach it)")
    if not 0 < port < 65536:
        raise InputError("--port", f"{port} is not a TCP port")
    try:
        from textual_serve.server import Server
    except ModuleNotFoundError:
        raise InputError("serve", "textual-serve is not installed (pip install 'ascend-tui[serve]')") from None
    absolute = [str(Path(p).resolve()) if Path(p).exists() else p for p in _existing(paths)]
    command = shlex.join([sys.executable, "-m", "ascend_tui", "open", *absolute])
    Server(command, host=host, port=port, title="ascend-tui").serve()
    return 0
