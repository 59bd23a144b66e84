"""`compare --csv` writes its lines itself (quoting each shared stack once): byte for byte what `csv.writer` writes."""

from __future__ import annotations

import csv
import io
import random

from ascend_tui.offline.msprobe_result import _csv_line

CELLS = ["", "N/A", "0.5", " inf", "-inf", "[2, 16]", "a,b", 'say "hi"', '"', ",", "line\nbreak", "cr\rhere",
         "crlf\r\n", "  lead", "trail  ", "tab\tin", "[]", '["error: x"]', "ü ñ 漢", "'q'", "None", "\\"]


def _reference(rows: list[list[object]]) -> str:
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


def test_lines_equal_csv_writer_on_tricky_cells() -> None:
    rng = random.Random(0)
    pool: list[object] = [*CELLS, None, 3, 2.5]
    rows = [[rng.choice(pool) for _ in range(rng.randint(2, 9))] for _ in range(500)]
    rows.append(CELLS)
    ours = "".join(_csv_line(r) + "\r\n" for r in rows)
    assert ours == _reference(rows)
    assert list(csv.reader(io.StringIO(ours, newline=""))) == [["" if c is None else str(c) for c in r] for r in rows]
