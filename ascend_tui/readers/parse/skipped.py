"""Records a reader could not use: counted, the first one named, and said once where notes are shown.

A profiler that crashed mid-write leaves a short last row; a hand-edited CSV a row with a stray
comma. One such record must not refuse the file: the readers skip it, count it here, and the
count with the first bad record's number goes into the investigation's notes (the CLI prints
them, `--json` carries them, the app shows them as a notification). Only a file with no usable
record is refused.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ascend_tui.errors import InputError


@dataclass(slots=True)
class Skipped:
    """How many records of `path` were skipped (and cells read as missing), and the first of each with its problem."""

    path: str
    records: int = 0
    first: str = ""
    cells: int = 0
    first_cell: str = ""
    first_number: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, number: int, problem: str, count: int = 1) -> None:
        """Count `count` skipped records, the first being record `number` (1 is the header)."""
        with self._lock:
            if not self.records or number < self.first_number:  # blocks may be read out of order
                self.first, self.first_number = f"record {number}: {problem}", number
            self.records += count

    def cell(self, number: int, problem: str) -> None:
        """Count a cell that could not be decoded and is read as missing (its record is kept)."""
        with self._lock:
            if not self.cells:
                self.first_cell = f"record {number}: {problem}"
            self.cells += 1

    def __bool__(self) -> bool:
        return bool(self.records or self.cells)

    def note(self) -> str:
        """One line for the notes: what was skipped and where the first bad record is."""
        name = Path(self.path).name
        parts = []
        if self.records:
            parts.append(f"skipped {self.records} unreadable record{'s' if self.records != 1 else ''} "
                         f"(first: {self.first})")
        if self.cells:
            parts.append(f"read {self.cells} undecodable cell{'s' if self.cells != 1 else ''} as missing "
                         f"(first: {self.first_cell})")
        return f"{name}: " + "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.path, "skipped_records": self.records, "first_bad_record": self.first,
                "missing_cells": self.cells, "first_bad_cell": self.first_cell, "note": self.note()}

    def refuse_if_empty(self, usable: int) -> None:
        """InputError when no record was usable and some were skipped (a file of nothing but bad rows)."""
        if usable == 0 and self.records:
            raise InputError(self.path, f"no usable record: all {self.records} skipped (first: {self.first})")


def report(extra: dict[str, Any], skips: list[Skipped]) -> None:
    """Add the notes and the `skipped` JSON entries of `skips` (those that skipped anything) to a run's extra."""
    found = [s for s in skips if s]
    if not found:
        return
    extra.setdefault("notes", []).extend(s.note() for s in found)
    extra.setdefault("skipped", []).extend(s.to_json() for s in found)
