"""Readers of what the real tools wrote; `reader_for` picks the reader for a path.

`READERS` is an ordinary list of `LazyReader`s, tried in order: the first whose `sniff` accepts a
path reads it. Each names the module that holds its `Reader` (see `base.py`); that module is
imported only when a path reaches its sniff, so start-up imports none of them. Plug-in readers
(entry point group `ascend_tui.readers`) come after the built-in ones. Adding a format is one
module in `readers/<family>/` plus one line here. Readers translate files into the model and
never run checks: `offline.open.open_path` reads a path and runs the analyses on it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ascend_tui.errors import AscendTuiError, InputError
from ascend_tui.readers.base import Reader

if TYPE_CHECKING:
    from ascend_tui.investigation import Investigation
    from ascend_tui.progress import Progress


@dataclass(frozen=True, slots=True)
class Takes:
    """What a reader's sniff can accept at most, judged by the path's name alone (no bytes read, no import):
    folders or not, and files whose names end (case aside) in one of `endings` (None: a file of any name).
    It must never refuse what the sniff accepts (`tests/test_reader_takes.py` checks every fixture)."""

    folders: bool = False
    endings: tuple[str, ...] | None = None

    def could(self, path: Path) -> bool:
        """False when the reader's sniff surely refuses `path`."""
        if path.is_dir():
            return self.folders
        return self.endings is None or path.name.lower().endswith(self.endings)


ANY = Takes(folders=True)  # what a reader without a `Takes` (a plug-in) is asked about: everything


@dataclass(frozen=True, slots=True)
class LazyReader:
    """A reader known by name, imported from `target` (`module:attribute`) the first time it is needed."""

    name: str
    target: str
    plugin: str = ""  # the distribution that declared it, for a plug-in
    takes: Takes = ANY  # the paths worth asking its sniff about

    def reader(self) -> Reader:
        """The `Reader` itself (importing its module)."""
        if self.plugin:
            from ascend_tui.plugins import READERS as GROUP
            from ascend_tui.plugins import Plugin

            return Plugin(GROUP, self.name, self.target, self.plugin).load()
        import importlib

        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def sniff(self, path: Path) -> bool:
        if not self.takes.could(path):
            return False
        if not self.plugin:
            return bool(self.reader().sniff(path))
        return bool(self._foreign("sniff", path, self.reader().sniff, path))

    def load(self, path: Path, **kwargs: Any) -> Investigation:
        if not self.plugin:
            return self.reader().load(path, **kwargs)
        return self._foreign("load", path, self.reader().load, path, **kwargs)

    def _foreign(self, what: str, path: Path, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a plug-in's code: its own `InputError`s pass, anything else it raises is one naming it."""
        try:
            return fn(*args, **kwargs)
        except AscendTuiError:
            raise
        except Exception as exc:  # noqa: BLE001 - foreign code may raise anything
            raise InputError(path, f"the {self.name!r} plug-in's {what} failed "
                                   f"({type(exc).__name__}: {exc})") from None

    @property
    def streams(self) -> bool:
        return bool(getattr(self.reader(), "streams", False))


FILES = Takes()  # a file of any name: the sniff reads its first bytes
FOLDERS = Takes(folders=True, endings=())
READERS: list[LazyReader] = [
    LazyReader("investigation", "ascend_tui.readers.native:INVESTIGATION_READER", takes=FILES),
    LazyReader("graph", "ascend_tui.readers.native:GRAPH_READER", takes=FILES),
    LazyReader("msprobe dump", "ascend_tui.readers.msprobe.dump:READER", takes=Takes(True, ("dump.json",))),
    LazyReader("msprobe compare result", "ascend_tui.readers.msprobe.compare_result:READER",
               takes=Takes(False, (".csv", ".xlsx"))),
    LazyReader("msprobe overflow_check", "ascend_tui.readers.msprobe.overflow:READER", takes=Takes(True, (".json",))),
    LazyReader("sanitizer log", "ascend_tui.readers.sanitizer.investigation:READER", takes=FILES),
    LazyReader("profiler", "ascend_tui.readers.profiler.ascend_pt:READER",
               takes=Takes(True, (".db", ".csv", ".csv.gz", ".json", ".json.gz"))),
    LazyReader("msprof op", "ascend_tui.readers.profiler.msprof_op:READER", takes=FOLDERS),
    LazyReader("profiler memory", "ascend_tui.readers.profiler.memory:READER", takes=Takes(True, (".csv", ".csv.gz"))),
    LazyReader("GE graph dump", "ascend_tui.readers.graphs.ge_dump:READER",
               takes=Takes(False, (".txt", ".pbtxt", ".prototxt", ".json"))),
    LazyReader("ONNX model", "ascend_tui.readers.graphs.onnx_model:READER", takes=Takes(False, (".onnx",))),
    LazyReader("torch.export archive", "ascend_tui.readers.graphs.torch_export:READER", takes=Takes(False, (".pt2",))),
    LazyReader("MindSpore IR", "ascend_tui.readers.graphs.mindspore_ir:READER", takes=Takes(False, (".ir",))),
    LazyReader("msprobe graph_visualize", "ascend_tui.readers.msprobe.vis:READER",
               takes=Takes(False, (".vis", ".vis.db"))),
]


def plugin_readers() -> list[LazyReader]:
    """The readers other installed packages declare (entry point group `ascend_tui.readers`), not yet imported."""
    from ascend_tui.plugins import READERS as GROUP
    from ascend_tui.plugins import plugins

    builtin = {r.name for r in READERS}
    return [LazyReader(p.name, p.value, p.dist or "?") for p in plugins(GROUP) if p.name not in builtin]


def all_readers() -> list[LazyReader]:
    """The built-in readers, then the plug-ins."""
    return [*READERS, *plugin_readers()]


def reader_for(path: str | Path, readers: Sequence[LazyReader] | None = None) -> LazyReader | None:
    """The reader (of `readers`, all of them by default) that would open `path`, or None."""
    p = Path(path)
    return next((r for r in (all_readers() if readers is None else readers) if r.sniff(p)), None)


def kind_of(path: str | Path, readers: Sequence[LazyReader] | None = None) -> str | None:
    """The name of the format of `path`, or None."""
    reader = reader_for(path, readers)
    return reader.name if reader is not None else None


def choose(path: str | Path, readers: Sequence[LazyReader] | None = None) -> LazyReader:
    """The reader for `path`; a missing path or one no reader takes is an `InputError` naming the formats."""
    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file or folder")
    readers = all_readers() if readers is None else readers
    reader = reader_for(p, readers)
    if reader is None:
        whole = _enclosing(p, readers) if p.is_file() else None
        if whole is not None:  # one file of a dump or profiler folder: the folder is what reads
            raise InputError(p, f"one file of a {whole[1]} folder, not read alone: open {whole[0]}")
        names = ", ".join(r.name for r in readers)
        raise InputError(p, f"not a format ascend-tui reads (expected one of: {names})")
    return reader


def read_with(reader: LazyReader, path: str | Path, progress: Progress | None = None,
              cancel: threading.Event | None = None,
              on_partial: Callable[[Investigation], None] | None = None) -> Investigation:
    """What `reader` reads from `path` (no analyses run); readers that stream also hand partial
    investigations to `on_partial` while they read."""
    p = Path(path)
    if on_partial is not None and reader.streams:
        return reader.load(p, progress=progress, cancel=cancel, on_partial=on_partial)
    return reader.load(p, progress=progress, cancel=cancel)


def read_path(path: str | Path, progress: Progress | None = None,
              cancel: threading.Event | None = None) -> Investigation:
    """What the reader for `path` reads from it, without the analyses (`offline.open.open_path` adds those)."""
    return read_with(choose(path), path, progress, cancel)


def _enclosing(p: Path, readers: Sequence[LazyReader]) -> tuple[Path, str] | None:
    """The folder a reader opens that holds the file `p` (its own folder, or the one above it), and its format's name.

    Two levels cover the layouts the tools write (`proc*/dump_tensor_data/x.pt`, `*_ascend_pt/ASCEND_PROFILER_OUTPUT/
    x.csv`); a cluster folder counts only as the file's own folder, since the rank folders two levels up are
    themselves what reads (a loose CSV beside them is no part of the cluster)."""
    for level, folder in enumerate(list(p.absolute().parents)[:2]):  # as the user named it, links kept
        reader = reader_for(folder, readers)
        if reader is not None and not (level and reader.name == "cluster profile"):
            return folder, reader.name
    return None
