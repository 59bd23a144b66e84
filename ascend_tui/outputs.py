"""The one guard every output path passes before we write: never over, or inside, what the user gave us to read.

Reports, JUnit files, saved investigations, CSV and Markdown exports all go through
`check_output_path`, from the CLI and from the app alike, so no option can replace an msprobe
dump, a log or a model file with our own output.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from ascend_tui.errors import InputError

# Files that make up a multi-file artifact: given one of them, its whole folder is the input.
ARTIFACT_FILES = frozenset({"dump.json", "construct.json", "stack.json", "debug.json", "overflow_check_result.json",
                            "memory_record.csv", "operator_memory.csv", "kernel_details.csv", "op_summary.csv",
                            "trace_view.json", "profiler_info.json"})


def protected_roots(inputs: Iterable[str | Path | None]) -> tuple[list[Path], list[Path]]:
    """(folders nothing may be written inside, files nothing may be written over) for the given inputs.

    A folder input protects everything inside it; a file that belongs to a multi-file artifact
    (`dump.json`, `construct.json`, profiler CSVs) protects its folder; any other file protects itself.
    `model.py:factory` names the file `model.py`.
    """
    folders: list[Path] = []
    files: list[Path] = []
    for item in inputs:
        if not item:
            continue
        path = Path(item)
        if not path.exists() and ":" in str(item):
            path = Path(str(item).rsplit(":", 1)[0])
        if not path.exists():
            continue
        resolved = path.resolve()
        if resolved.is_dir():
            folders.append(resolved)
        else:
            files.append(resolved)
            if resolved.name in ARTIFACT_FILES:
                folders.append(resolved.parent)
    return folders, files


def check_output_path(path: str | Path, inputs: Iterable[str | Path | None], *, option: str = "output") -> Path:
    """The resolved `path` when writing there is safe; otherwise InputError (one line, the CLI's exit 2).

    Refused: a path equal to an input file (through links too) or inside an input folder or artifact
    folder, a path that names a folder, a path whose folder does not exist, and one we cannot write.
    """
    out = Path(path)
    resolved = out.resolve()
    folders, files = protected_roots(inputs)
    for f in files:
        if resolved == f or (out.exists() and _same_file(out, f)):
            raise InputError(out, f"{option} would overwrite an input file; choose another path")
    for d in folders:
        if resolved == d or d in resolved.parents:
            raise InputError(out, f"{option} is inside the input folder {d}; write the report somewhere else")
    if out.is_dir():
        raise InputError(out, f"{option} names a folder; give a file path")
    if not resolved.parent.is_dir():
        raise InputError(out, f"{option}: its folder does not exist ({resolved.parent})")
    _probe_writable(resolved, option)
    return resolved


def _probe_writable(path: Path, option: str) -> None:
    """Raise InputError naming `option` unless a file can be written at `path` (and its `.tmp` beside it).

    Tried for real (an existing file opened for update, a new one created and removed, as the
    atomic writers' `.tmp` is), since permission bits say nothing for root or a read-only mount.
    """
    try:
        if path.exists():
            with open(path, "r+b"):
                pass
        probe = path.with_name(path.name + ".tmp")
        existed = probe.exists()
        with open(probe, "ab"):
            pass
        if not existed:
            probe.unlink()
    except OSError as exc:
        raise InputError(path, f"{option}: cannot write here ({exc.strerror or exc}); choose another path") from None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
