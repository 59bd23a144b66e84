"""msSanitizer and NVIDIA compute-sanitizer logs: reports into `MemoryEvent` records, line by line.

msSanitizer report lines start `====== ` (six `=`), compute-sanitizer lines `========= ` (nine);
everything else is the program's own output and is skipped. The parser is fed one line at a
time, so a live tool's stdout can be streamed through it as well as a file.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Iterator

from ascend_tui.progress import Progress
from ascend_tui.errors import Cancelled, InputError
from ascend_tui.evidence import MemoryEvent
from ascend_tui.readers.base import head
from ascend_tui.readers.sanitizer.words import describe


MSSAN, CSAN = "mssanitizer", "compute-sanitizer"
TOOL_TITLES = {MSSAN: "msSanitizer", CSAN: "compute-sanitizer"}
SNIFF_BYTES = 64 * 1024

_N = r"(\d[\d,]*)"
_HEX = r"(0x[0-9a-fA-F]+)"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_BINARY = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f]")
_PREFIX = re.compile(r"^(={6,})\s*(.*)$")
_CHATTER = re.compile(r"^\[mssanitizer\]\s*(.*)$")

# msSanitizer (csrc/address_sanitizer/mem_error_def.h, race_info_display.h, sync_info_display.h).
_MS_ACCESS = re.compile(r"^(ERROR|WARNING):\s*(illegal read|illegal write|out of bounds|misaligned access|"
                        r"uninitialized read) of size (\d+)$")
_MS_FREE = re.compile(r"^(ERROR|WARNING):\s*illegal free\(\)$")
_MS_UNUSED = re.compile(r"^(ERROR|WARNING):\s*Unused memory of (\d+)\s*byte\(s\)$")
_MS_INTERNAL = re.compile(r"^(ERROR|WARNING):\s*internal errors? \(serialNo:(\d+)\)$")
_MS_LEAKS = re.compile(r"^(ERROR|WARNING):\s*LeakCheck: detected memory leaks$")
_MS_LEAK = re.compile(r"^(Direct|Indirect) leak of (\d+)\s*byte\(s\)$")
_MS_RACE = re.compile(r"^(ERROR|WARNING):\s*Potential (RAW|WAR|WAW) hazard detected at (\S+) in (.+?) "
                      r"on device (\d+):?$")
_MS_SYNC = re.compile(r"^(ERROR|WARNING):\s*(Unpaired|Redundant) (set_flag|wait_flag) instructions detected$")
_MS_AT = re.compile(r"^at (?:0x)?([0-9a-fA-F]+) on (\w+)(?: by module (\S+))?(?: when (writing|reading) data)?"
                    r"(?: allocated in (.+?):(\d+) \(serialNo:(\d+)\))?(?: in (.+))?$")
_MS_BLOCK = re.compile(r"^(?:by thread \(([\d, ]+)\)\s*)?in block\s*(.*?) on device (\d+)$")
_MS_PIPES = re.compile(r"^from (\S+) to (\S+) in (.+)$")
_MS_PC = re.compile(r"^code in pc current (0x[0-9a-fA-F]+)(?: \(serialNo:(\d+)\))?$")
_MS_CODE = re.compile(r"^(?:code|allocated) in (.+?):(\d+) \(serialNo:(\d+)\)$")
_MS_FRAME = re.compile(r"^#(\d+)\s+(.+)$")
_MS_RACE_ACCESS = re.compile(
    r"^(?:(PIPE_\w+)\s+)?(Read|Write)\s*(?:Thread\s*\(([\d, ]+)\))?\s*at (RAW|WAR|WAW)\(\)\+(0x[0-9a-fA-F]+) "
    r"in block (\d+)\s*\((\w+)\) on device (\d+)"
    r"(?: at pc current (0x[0-9a-fA-F]+)(?: \(serialNo:(\d+)\))?| at (.+?):(\d+) \(serialNo:(\d+)\))?$")
_MS_SUMMARY = re.compile(r"^SUMMARY: (\d+)\s*byte\(s\) (leaked|unused memory) in (\d+) allocation\(s\)$")
_MS_REGISTER = re.compile(r"^Warning:\s*Register (\S+) was not reset to default in block (\S+) on kernel (\S+)\.?"
                          r"(.*)$")

# compute-sanitizer (NVIDIA Compute Sanitizer user manual, "Understanding ... errors").
_CS_INVALID = re.compile(rf"^Invalid (__\w+__) (read|write) of size {_N} bytes?$")
_CS_HW = re.compile(r"^(Out-of-range|Misaligned) Shared or Local Address$")
_CS_MALLOC = re.compile(r"^Malloc/Free error encountered\s*:\s*(.+)$")
_CS_API = re.compile(r"^Program hit (.+?) \(error (\d+)\)(?: due to \"(.*?)\")? on CUDA API call to (\w+)\.?$")
_CS_API_NOTE = re.compile(r"^CUDA API (Warning|Error):\s*(.+)$")
_CS_LEAK = re.compile(rf"^Leaked {_N} bytes? at {_HEX}( on the device heap)?$")
_CS_HAZARD = re.compile(rf"^(ERROR|WARNING|Error|Warning): Potential (RAW|WAR|WAW) hazard detected at (__\w+__) "
                        rf"{_HEX} in block \(([\d, ]+)\)\s*:?$")
_CS_RACE = re.compile(r"^(ERROR|WARNING|Error|Warning): Race reported between (Read|Write) access at (.+?) in (\S+)$")
_CS_UNINIT = re.compile(rf"^Uninitialized (__\w+__) memory read of size {_N} bytes?$")
_CS_UNUSED = re.compile(rf"^Unused (__\w+__) memory in allocation(?: {_HEX})? of size {_N} bytes?"
                        r"(?: in block \(([\d, ]+)\))?$")
_CS_BARRIER = re.compile(r"^Barrier error detected\.?\s*(.*)$")
_CS_AT = re.compile(r"^at (.*?)(?:(?:\+|:)(0x[0-9a-fA-F]+))?(?: in (\S+))?$")
_CS_THREAD = re.compile(r"^by thread \(([\d, ]+)\) in block \(([\d, ]+)\)$")
_CS_ADDRESS = re.compile(rf"^Address {_HEX}(?: (.+))?$")
_CS_NEAREST = re.compile(rf"^and is {_N} bytes? (before|after|inside) the nearest allocation at {_HEX} "
                         rf"of size {_N} bytes?$")
_CS_FRAME = re.compile(r"^(Host|Device) Frame:\s*(.+)$")
_CS_AND = re.compile(r"^and (Read|Write) access at (.+?) in (\S+?)(?: \[(\d+) hazards?\])?$")
_CS_HAZ_ACCESS = re.compile(r"^(Read|Write) Thread \(([\d, ]+)\) at (.+?) in (\S+)$")
_CS_VALUES = re.compile(r"^Current Value\s*:\s*([^,]+),\s*Incoming Value\s*:\s*(.+)$")
_CS_ERRSUM = re.compile(rf"^ERROR SUMMARY: {_N} errors?")
_CS_LEAKSUM = re.compile(rf"^LEAK SUMMARY: {_N} bytes? leaked in {_N} allocations?")
_CS_RACESUM = re.compile(r"^RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")

_MS_KINDS = {"illegal read": "illegal_access", "illegal write": "illegal_access", "out of bounds": "out_of_bounds",
             "misaligned access": "misaligned", "uninitialized read": "uninitialized_read"}
_SPACES = {"__global__": "global", "__shared__": "shared", "__local__": "local"}


@dataclass(frozen=True, slots=True)
class LogSummary:
    """A trailer line of one sanitizer run: its error, leak, unused-memory or hazard totals."""

    tool: str
    kind: str
    line_no: int
    session: int
    count: int
    bytes: int | None = None
    errors: int | None = None
    warnings: int | None = None


@dataclass(slots=True)
class SanitizerLog:
    """Everything one log held: events in order, the per-run summaries and the tool's chatter."""

    source: str
    events: list[MemoryEvent] = field(default_factory=list)
    summaries: list[LogSummary] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    sessions: int = 0
    log_files: list[str] = field(default_factory=list)
    program_lines: int = 0
    report_lines: int = 0
    unrecognized: list[int] = field(default_factory=list)

    def hidden_errors(self) -> list[tuple[int, int, int, int]]:
        """(session, line, errors counted, errors printed) for each run whose ERROR SUMMARY exceeds what it printed."""
        return hidden_errors(self.summaries, self.events)


def hidden_errors(summaries: Iterable[LogSummary], events: Iterable[MemoryEvent]) -> list[tuple[int, int, int, int]]:
    """(session, line, errors counted, errors printed) for each run whose ERROR SUMMARY exceeds what it printed."""
    printed = Counter((e.tool, e.extra.get("session")) for e in events)
    return [(s.session, s.line_no, s.count, printed[(s.tool, s.session)]) for s in summaries
            if s.kind == "errors" and s.count > printed[(s.tool, s.session)]]


@dataclass(slots=True)
class _Record:
    tool: str
    kind: str
    severity: str
    line_no: int
    session: int
    needs: str | None = None
    size: int | None = None
    address: int | None = None
    space: str | None = None
    kernel: str | None = None
    block: str | None = None
    thread: str | None = None
    frames: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _xyz(text: str) -> str:
    """`(1,0,0)` from `1, 0, 0`."""
    return f"({text.replace(' ', '')})"


class SanitizerParser:
    """Streaming parser: `feed` one line at a time, then `finish` for the `SanitizerLog`."""

    def __init__(self, source: str = "", *, strict: bool = True) -> None:
        self.log = SanitizerLog(source)
        self.strict = strict
        self.line_no = 0
        self._rec: _Record | None = None
        self._leak_group: int | None = None
        self._ms_session = 0
        self._cs_open = False

    def feed(self, raw: str) -> bool:
        """Read one line; True when it was a sanitizer line (False: the program's own output, or unreadable)."""
        self.line_no += 1
        line = _ANSI.sub("", raw.rstrip("\r\n"))
        chatter = _CHATTER.match(line)
        if chatter:
            self._chatter(chatter.group(1).strip())
            return True
        m = _PREFIX.match(line)
        if m is None:
            self.log.program_lines += 1
            return False
        self.log.report_lines += 1
        tool = CSAN if len(m.group(1)) >= 9 else MSSAN
        body, unrecognized = (m.group(2) or "").strip(), len(self.log.unrecognized)
        header, detail = (self._cs_top, self._cs_detail) if tool == CSAN else (self._ms_header, self._ms_detail)
        if not body:
            self._close()
        elif not header(body):
            if self._rec is None:
                self.log.unrecognized.append(self.line_no)
            elif not detail(self._rec, body):
                self._rec.extra.setdefault("notes", []).append(body)
        return len(self.log.unrecognized) == unrecognized

    def feed_all(self, lines: Iterable[str], cancel: threading.Event | None = None) -> SanitizerLog:
        """Feed every line of `lines`, checking `cancel` now and then, and finish."""
        for i, line in enumerate(lines):
            if cancel is not None and not i % 4096 and cancel.is_set():
                raise Cancelled()
            self.feed(line)
        return self.finish()

    def finish(self) -> SanitizerLog:
        """Close the last record (a record cut off mid-way is an error in strict mode)."""
        self._close()
        self._close_leak_group()
        return self.log

    # -- shared record handling ---------------------------------------------------------------

    def _saw(self, tool: str) -> None:
        """`tool` wrote a line we understood: the log is its output."""
        if tool not in self.log.tools:
            self.log.tools.append(tool)
        if tool == MSSAN:
            self.log.sessions = max(self.log.sessions, 1)

    def _open(self, tool: str, kind: str, severity: str, needs: str | None = None, **fields: Any) -> _Record:
        self._close()
        self._saw(tool)
        session = self._cs_session() if tool == CSAN else max(self._ms_session, 1)
        self._rec = _Record(tool, kind, severity.lower(), self.line_no, session, needs, **fields)
        return self._rec

    def _close(self) -> None:
        rec, self._rec = self._rec, None
        if rec is None:
            return
        if rec.needs is not None and self.strict:
            raise InputError(self.log.source, f"{TOOL_TITLES[rec.tool]} {rec.kind} report is cut off: "
                                              f"expected {rec.needs} after it", where=str(rec.line_no))
        self.log.events.append(_event(rec))

    def _close_leak_group(self) -> None:
        if self._leak_group is not None and self.strict:
            raise InputError(self.log.source, "msSanitizer leak report is cut off: expected "
                                              "'Direct leak of N byte(s)' lines after it", where=str(self._leak_group))
        self._leak_group = None

    def _unrecognized(self) -> None:
        self.log.unrecognized.append(self.line_no)

    def _summary(self, tool: str, kind: str, count: int, **counts: int) -> None:
        self._close()
        self._saw(tool)
        session = self._cs_session() if tool == CSAN else max(self._ms_session, 1)
        self.log.summaries.append(LogSummary(tool, kind, self.line_no, session, count, **counts))
        if tool == CSAN and kind in ("errors", "hazards"):
            self._cs_open = False

    def _chatter(self, text: str) -> None:
        self._saw(MSSAN)
        if text.startswith("logging to file:"):
            self._ms_session += 1
            self.log.sessions = max(self.log.sessions, self._ms_session)
            self.log.log_files.append(text.partition(":")[2].strip())
            return
        reg = _MS_REGISTER.match(text)
        if reg:
            rec = self._open(MSSAN, "register_not_reset", "warning", kernel=reg.group(3), block=reg.group(2))
            rec.extra["register"] = reg.group(1)
            rec.extra["detail"] = reg.group(4).strip()
            self._close()

    # -- msSanitizer ---------------------------------------------------------------------------

    def _ms_header(self, body: str) -> bool:
        if (m := _MS_LEAK.match(body)) is not None:
            self._leak_group = None
            rec = self._open(MSSAN, "leak", "error", "the 'at 0x... on GM' line", size=int(m.group(2)))
            rec.extra["leak"] = m.group(1).lower()
            return True
        if not body.startswith(("ERROR", "WARNING", "SUMMARY")):
            return False
        self._close()
        if body.startswith("SUMMARY"):
            if (m := _MS_SUMMARY.match(body)) is not None:
                self._summary(MSSAN, "leaks" if m.group(2) == "leaked" else "unused", int(m.group(3)),
                              bytes=int(m.group(1)))
            else:
                self._unrecognized()
            return True
        self._close_leak_group()
        if (m := _MS_ACCESS.match(body)) is not None:
            rec = self._open(MSSAN, _MS_KINDS[m.group(2)], m.group(1), "the 'at 0x... on <space>' line",
                             size=int(m.group(3)))
            rec.extra["access"] = {"illegal write": "write", "out of bounds": "write"}.get(m.group(2), "read")
            if m.group(2) == "out of bounds":
                rec.extra["stomping"] = True
        elif (m := _MS_FREE.match(body)) is not None:
            self._open(MSSAN, "illegal_free", m.group(1), "the 'at 0x... on GM' line")
        elif (m := _MS_UNUSED.match(body)) is not None:
            self._open(MSSAN, "unused_memory", m.group(1), "the 'at ... on GM' line", size=int(m.group(2)))
        elif (m := _MS_INTERNAL.match(body)) is not None:
            self._open(MSSAN, "internal_error", "warning").extra["serial_no"] = int(m.group(2))
        elif _MS_LEAKS.match(body):
            self._saw(MSSAN)
            self._leak_group = self.line_no
        elif (m := _MS_RACE.match(body)) is not None:
            rec = self._open(MSSAN, "race", m.group(1), "the two racing accesses", space=m.group(3),
                             kernel=m.group(4))
            rec.extra.update(hazard=m.group(2), device=int(m.group(5)), accesses=[])
        elif (m := _MS_SYNC.match(body)) is not None:
            rec = self._open(MSSAN, "sync", m.group(1), "the 'from PIPE_x to PIPE_y' line")
            rec.extra.update(problem=m.group(2).lower(), instruction=m.group(3))
        else:
            self._unrecognized()
        return True

    def _ms_detail(self, rec: _Record, body: str) -> bool:
        if (m := _MS_RACE_ACCESS.match(body)) is not None and rec.kind == "race":
            access = {"pipe": m.group(1), "access": m.group(2).lower(), "offset": m.group(5),
                      "block": f"{m.group(7)}({m.group(6)})", "frames": []}
            if m.group(3):
                access["thread"] = _xyz(m.group(3))
            if m.group(9):
                access["pc"] = m.group(9)
            if m.group(11):
                access["frames"].append(f"{m.group(11)}:{m.group(12)}")
            rec.extra["accesses"].append(access)
            rec.block = rec.block or access["block"]
            rec.needs = None
        elif (m := _MS_AT.match(body)) is not None and rec.address is None:
            rec.address, rec.space = int(m.group(1), 16), m.group(2)
            if m.group(3):
                rec.extra["module"] = m.group(3)
            if m.group(5):
                rec.frames.append(f"{m.group(5)}:{m.group(6)}")
                rec.extra["serial_no"] = int(m.group(7))
            if m.group(8):
                rec.kernel = m.group(8).strip()
            rec.needs = None
        elif (m := _MS_BLOCK.match(body)) is not None:
            rec.block = m.group(2).strip() or None
            rec.extra["device"] = int(m.group(3))
            if m.group(1):
                rec.thread = _xyz(m.group(1))
        elif (m := _MS_PIPES.match(body)) is not None and rec.kind == "sync":
            rec.extra.update(src_pipe=m.group(1), dst_pipe=m.group(2))
            rec.kernel = m.group(3).strip()
            rec.needs = None
        elif (m := _MS_PC.match(body)) is not None:
            rec.extra["pc"] = m.group(1)
            if m.group(2):
                rec.extra["serial_no"] = int(m.group(2))
        elif (m := _MS_CODE.match(body)) is not None:
            rec.frames.append(f"{m.group(1)}:{m.group(2)}")
            rec.extra["serial_no"] = int(m.group(3))
        elif (m := _MS_FRAME.match(body)) is not None:
            accesses = rec.extra.get("accesses")
            (accesses[-1]["frames"] if accesses else rec.frames).append(m.group(2).strip())
        else:
            return False
        return True

    # -- compute-sanitizer ---------------------------------------------------------------------

    def _cs_session(self) -> int:
        """The current compute-sanitizer run; a line after a run's ERROR SUMMARY starts the next one."""
        if not self._cs_open:
            self.log.sessions += 1
            self._cs_open = True
        return self.log.sessions

    def _cs_top(self, body: str) -> bool:
        if body == "COMPUTE-SANITIZER":
            self._close()
            self._saw(CSAN)
            self._cs_open = False
            self._cs_session()
        elif (m := _CS_ERRSUM.match(body)) is not None:
            self._summary(CSAN, "errors", _int(m.group(1)))
        elif (m := _CS_LEAKSUM.match(body)) is not None:
            self._summary(CSAN, "leaks", _int(m.group(2)), bytes=_int(m.group(1)))
        elif (m := _CS_RACESUM.match(body)) is not None:
            self._summary(CSAN, "hazards", int(m.group(1)), errors=int(m.group(2)), warnings=int(m.group(3)))
        elif (m := _CS_INVALID.match(body)) is not None:
            rec = self._open(CSAN, "illegal_access", "error", "the 'at <kernel>' line", size=_int(m.group(3)),
                             space=_SPACES.get(m.group(1), m.group(1)))
            rec.extra["access"] = m.group(2)
        elif (m := _CS_HW.match(body)) is not None:
            kind = "out_of_bounds" if m.group(1) == "Out-of-range" else "misaligned"
            self._open(CSAN, kind, "error", "the 'at <kernel>' line", space="shared or local")
        elif (m := _CS_MALLOC.match(body)) is not None:
            problem = m.group(1).strip()
            rec = self._open(CSAN, "illegal_free" if "free" in problem.lower() else "heap_error", "error",
                             "the 'at ...' line", space="device heap")
            rec.extra["problem"] = problem
        elif (m := _CS_API.match(body)) is not None:
            rec = self._open(CSAN, "api_error", "error")
            rec.extra.update(error=m.group(1), code=int(m.group(2)), reason=m.group(3) or "", api=m.group(4))
        elif (m := _CS_API_NOTE.match(body)) is not None:
            self._open(CSAN, "api_error", m.group(1)).extra["reason"] = m.group(2).strip()
        elif (m := _CS_LEAK.match(body)) is not None:
            self._open(CSAN, "leak", "error", size=_int(m.group(1)), address=int(m.group(2), 16),
                       space="device heap" if m.group(3) else "global")
        elif (m := _CS_HAZARD.match(body)) is not None:
            rec = self._open(CSAN, "race", m.group(1), "the racing accesses", space=_SPACES.get(m.group(3)),
                             address=int(m.group(4), 16), block=_xyz(m.group(5)))
            rec.extra.update(hazard=m.group(2), accesses=[])
        elif (m := _CS_RACE.match(body)) is not None:
            rec = self._open(CSAN, "race", m.group(1), space="shared")
            rec.extra["accesses"] = [{"access": m.group(2).lower(), "at": m.group(3), "frames": [m.group(4)]}]
            rec.kernel = _cs_function(m.group(3))
            rec.extra["hazards"] = 0
        elif (m := _CS_UNINIT.match(body)) is not None:
            self._open(CSAN, "uninitialized_read", "error", "the 'at <kernel>' line", size=_int(m.group(2)),
                       space=_SPACES.get(m.group(1), m.group(1)))
        elif (m := _CS_UNUSED.match(body)) is not None:
            self._open(CSAN, "unused_memory", "warning", space=_SPACES.get(m.group(1), m.group(1)),
                       address=int(m.group(2), 16) if m.group(2) else None, size=_int(m.group(3)),
                       block=_xyz(m.group(4)) if m.group(4) else None)
        elif (m := _CS_BARRIER.match(body)) is not None:
            self._open(CSAN, "sync", "error", "the 'at <kernel>' line").extra["problem"] = m.group(1).strip()
        else:
            return False
        return True

    def _cs_detail(self, rec: _Record, body: str) -> bool:
        if (m := _CS_THREAD.match(body)) is not None:
            rec.thread, rec.block = _xyz(m.group(1)), _xyz(m.group(2))
        elif (m := _CS_ADDRESS.match(body)) is not None:
            if rec.address is None:
                rec.address = int(m.group(1), 16)
            verdict = (m.group(2) or "").strip()
            if verdict:
                rec.extra["verdict"] = verdict
            if rec.kind == "illegal_access" and "out of bounds" in verdict:
                rec.kind = "out_of_bounds"
            elif rec.kind == "illegal_access" and "misaligned" in verdict:
                rec.kind = "misaligned"
        elif (m := _CS_NEAREST.match(body)) is not None:
            rec.extra["allocation"] = {"distance": _int(m.group(1)), "relation": m.group(2),
                                       "address": m.group(3), "size": _int(m.group(4))}
        elif (m := _CS_FRAME.match(body)) is not None:
            rec.frames.append(f"{m.group(1).lower()}: {m.group(2).strip()}")
        elif (m := _CS_AND.match(body)) is not None and rec.kind == "race":
            rec.extra["accesses"].append({"access": m.group(1).lower(), "at": m.group(2), "frames": [m.group(3)]})
            rec.extra["hazards"] = rec.extra.get("hazards", 0) + int(m.group(4) or 1)
        elif (m := _CS_HAZ_ACCESS.match(body)) is not None and rec.kind == "race":
            rec.extra["accesses"].append({"access": m.group(1).lower(), "thread": _xyz(m.group(2)),
                                          "at": m.group(3), "frames": [m.group(4)]})
            rec.kernel = rec.kernel or _cs_function(m.group(3))
            rec.needs = None
        elif (m := _CS_VALUES.match(body)) is not None:
            rec.extra.update(current_value=m.group(1).strip(), incoming_value=m.group(2).strip())
        elif (m := _CS_AT.match(body)) is not None and "at_seen" not in rec.extra:
            func, pc, where = m.group(1).strip(), m.group(2), m.group(3)
            if re.fullmatch(r"0x[0-9a-fA-F]+", func):
                func, pc = "", func
            rec.extra["at_seen"] = True
            if func:
                rec.kernel = func
            if pc:
                rec.extra["pc"] = pc
            if where:
                rec.frames.insert(0, where)
            rec.needs = None
        elif body.startswith("Saved host backtrace"):
            pass
        else:
            return False
        return True


def _cs_function(at: str) -> str:
    """`blockReduceArray(int *, int *)` from `blockReduceArray(int *, int *)+0xf0`."""
    return re.sub(r"(?:\+|:)0x[0-9a-fA-F]+$", "", at.strip())


def _event(rec: _Record) -> MemoryEvent:
    extra = {k: v for k, v in rec.extra.items() if k != "at_seen"}
    extra.update(severity=rec.severity if rec.severity in ("error", "warning") else "info", session=rec.session)
    event = MemoryEvent(kind=rec.kind, tool=rec.tool, message="", size=rec.size, address=rec.address,
                        memory_space=rec.space, kernel=rec.kernel, block=rec.block, thread=rec.thread,
                        frames=tuple(rec.frames), line_no=rec.line_no, extra=extra)
    return replace(event, message=describe(event))


def parse_lines(lines: Iterable[str], source: str = "", *, strict: bool = True,
                cancel: threading.Event | None = None) -> SanitizerLog:
    """Parse any iterable of lines (a file, a list, a live process's stdout)."""
    return SanitizerParser(source, strict=strict).feed_all(lines, cancel)


def _decoded_lines(path: Path) -> Iterable[str]:
    """The file's lines as text; control bytes that no log line holds mean it is not a text log."""
    with path.open("rb") as fh:
        for no, raw in enumerate(fh, 1):
            line = raw.decode("utf-8", errors="replace")
            if _BINARY.search(line):
                raise InputError(path, "binary data, not a sanitizer log", where=str(no))
            yield line


def parse_file(path: str | Path, progress: Progress | None = None,
               cancel: threading.Event | None = None) -> SanitizerLog:
    """Parse a log file; an empty file, binary data, a log without any report line or a cut-off record is an `InputError`."""
    p = Path(path)
    if p.is_dir():
        raise InputError(p, "is a folder, expected a sanitizer log file")
    try:
        if p.stat().st_size == 0:
            raise InputError(p, "empty file, expected msSanitizer or compute-sanitizer output")
        if progress is not None:
            progress(f"reading {p.name}", 0, None)
        read = [0]  # every line, the tool's chatter and its report lines too, for the refusal below

        def counted(lines: Iterable[str]) -> Iterator[str]:
            for line in lines:
                read[0] += 1
                yield line

        log = parse_lines(counted(_decoded_lines(p)), str(p), cancel=cancel)
    except FileNotFoundError:
        raise InputError(p, "no such file") from None
    except OSError as exc:
        raise InputError(p, exc.strerror or str(exc)) from None
    if not log.tools:
        seen = f"; {log.report_lines} start like report lines but hold no report" if log.report_lines else ""
        raise InputError(p, "no msSanitizer ('====== ') or compute-sanitizer ('========= ') report "
                            f"in its {read[0]} line{'s' if read[0] != 1 else ''}{seen}")
    return log


def sniff(path: Path) -> bool:
    """True when the first KBs of `path` hold a sanitizer report line or the tool's banner."""
    text = head(path, SNIFF_BYTES).decode("utf-8", errors="replace")
    return bool(re.search(r"^(?:={6} +(?:ERROR|WARNING|SUMMARY)\b|={9} +\S|\[mssanitizer\])", text, re.MULTILINE))
