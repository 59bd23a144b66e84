"""Open an SQLite file the tools wrote without writing anything beside it (no -shm, -wal or -journal).

`mode=ro` alone still creates `-shm`/`-wal` next to a WAL-mode database (msprobe's `.vis.db`, the
profiler's db exports), and fails on a read-only mount. A finished file is opened as
`file:...?mode=ro&immutable=1`, which takes no locks and creates no side files; a file that may
still be written (a non-empty `-wal` or a `-journal` beside it, or changed in the last few seconds)
is copied with its side files into a private temporary folder first and read there, so what a live
writer has committed is seen and nothing is written beside the input. A file that is not SQLite,
is shorter than its header says, or cannot be read is one `InputError` line.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Iterator

from ascend_tui.errors import InputError

MAGIC = b"SQLite format 3\x00"
RECENT_S = 5.0  # a file changed this recently may still be written: it is copied before reading
SIDE_FILES = ("-wal", "-journal")


def is_sqlite(path: Path) -> bool:
    """Whether `path` is a regular file starting with the SQLite header."""
    try:
        with path.open("rb") as fh:
            return fh.read(16) == MAGIC
    except OSError:
        return False


def _check_header(path: Path) -> None:
    """InputError unless `path` is an SQLite file at least as long as its header says."""
    try:
        with path.open("rb") as fh:
            header = fh.read(100)
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    if header[:16] != MAGIC:
        raise InputError(path, "not an SQLite database (no 'SQLite format 3' header)")
    if len(header) < 100:
        raise InputError(path, f"truncated SQLite database ({size} bytes, shorter than its 100-byte header)")
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(header[28:32], "big")
    valid = header[24:28] == header[92:96]  # the page count is trusted only when written with this change counter
    if valid and page and pages and size < page * pages:
        raise InputError(path, f"truncated SQLite database ({size} bytes, its header says {pages} pages of {page})")


def _busy(path: Path) -> bool:
    """Whether a writer may still be at work on `path`: a non-empty -wal, a -journal, or a very recent change."""
    for suffix in SIDE_FILES:
        side = path.with_name(path.name + suffix)
        with contextlib.suppress(OSError):
            if side.is_file() and side.stat().st_size > 0:
                return True
    try:
        return time.time() - path.stat().st_mtime < RECENT_S
    except OSError:
        return False


@contextlib.contextmanager
def connect(path: str | Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the SQLite file `path` that writes nothing beside it; closed (and any copy
    removed) on exit. InputError when the file is not SQLite, truncated, locked or unreadable."""
    path = Path(path)
    _check_header(path)
    copy_dir = None
    try:
        if _busy(path):
            copy_dir = tempfile.mkdtemp(prefix="ascend-tui-db-")
            target = Path(copy_dir) / path.name
            shutil.copyfile(path, target)
            for suffix in SIDE_FILES:
                side = path.with_name(path.name + suffix)
                if side.is_file():
                    shutil.copyfile(side, target.with_name(target.name + suffix))
            uri = f"file:{urllib.parse.quote(str(target))}?mode=ro"
        else:
            uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro&immutable=1"
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        try:
            conn.execute("select count(*) from sqlite_master").fetchone()
            yield conn
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        problem = "locked by another process" if "locked" in str(exc) else f"unreadable SQLite database ({exc})"
        raise InputError(path, problem) from None
    except sqlite3.DatabaseError as exc:
        raise InputError(path, f"unreadable SQLite database ({exc})") from None
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    finally:
        if copy_dir is not None:
            shutil.rmtree(copy_dir, ignore_errors=True)


def tables(conn: sqlite3.Connection) -> set[str]:
    """The names of the tables in the database."""
    return {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    """The column names of `table` (empty when there is no such table)."""
    return [r[1] for r in conn.execute(f'pragma table_info("{table}")')]
