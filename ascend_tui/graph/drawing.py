"""The drawing as cells: boxes and edge cells of a laid-out graph, and one row of it painted as characters.

`Scene` is what `Layout.scene` composes; `paint_row` turns one row of it into characters plus, per
cell, the box it belongs to, so a front-end styles and shows only the rows on screen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

from ascend_tui.graph.hierarchy import BOTH, GOLDEN, TARGET

N, S, E, W = 1, 2, 4, 8  # the directions an edge cell connects to


@dataclass(frozen=True, slots=True)
class Box:
    """A box on the drawing, in absolute cells: an operator, a closed module, or an opened module's frame."""

    key: str
    kind: Literal["op", "module", "frame"]
    x: int
    y: int
    w: int
    h: int
    sides: int
    depth: int
    has_in: bool = False
    has_out: bool = False


@dataclass(slots=True)
class Scene:
    """Every box and edge cell of the drawing, indexed by row so a line is painted from its own row only."""

    width: int
    height: int
    boxes: list[Box]
    box_of: dict[str, int]
    rows: list[list[int]]  # row -> indices of the operator and closed-module boxes that cross it
    cells: dict[int, dict[int, tuple[int, int, bool]]]  # row -> column -> (target's bits, golden's, all back)
    frames: list[int] = field(default_factory=list)  # indices of the opened modules' frames, outermost first
    back_edges: int = 0
    edges: int = 0
    routes: dict[str, list[list[tuple[int, int]]]] = field(default_factory=dict)  # box -> its edges' points


def edge_cells(scene: Scene, key: str) -> set[tuple[int, int]]:
    """The cells (x, y) of the edges into and out of box `key`: what a front-end highlights at the cursor."""
    out: set[tuple[int, int]] = set()
    for pts in scene.routes.get(key, ()):
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            if x0 == x1:
                out.update((x0, y) for y in range(min(y0, y1), max(y0, y1) + 1))
            else:
                out.update((x, y0) for x in range(min(x0, x1), max(x0, x1) + 1))
    return out


def raster(cells: dict[int, dict[int, tuple[int, int, bool]]], pts: list[tuple[int, int]], sides: int,
            back: bool) -> None:
    """Set the direction bits of every cell an orthogonal polyline passes through (it runs on into both boxes)."""
    t, g = (sides & TARGET) != 0, (sides & GOLDEN) != 0

    def mark(cx: int, cy: int, bits: int) -> None:
        row = cells.setdefault(cy, {})
        old = row.get(cx, (0, 0, True))
        row[cx] = (old[0] | (bits if t else 0), old[1] | (bits if g else 0), back and old[2])

    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 == x1:
            lo, hi = min(y0, y1), max(y0, y1)
            for yy in range(lo, hi + 1):
                mark(x0, yy, (N if yy > lo else 0) | (S if yy < hi else 0))
        else:
            lo, hi = min(x0, x1), max(x0, x1)
            for xx in range(lo, hi + 1):
                mark(xx, y0, (W if xx > lo else 0) | (E if xx < hi else 0))
    mark(pts[0][0], pts[0][1], N)
    mark(pts[-1][0], pts[-1][1], S)


GLYPHS = {0: " ", N: "│", S: "│", N | S: "│", E: "─", W: "─", E | W: "─", S | E: "╭", S | W: "╮", N | E: "╰",
          N | W: "╯", N | S | E: "├", N | S | W: "┤", E | W | S: "┬", E | W | N: "┴", N | S | E | W: "┼"}


def glyph(bits: int) -> str:
    """The box-drawing character for a cell connecting in the `bits` directions."""
    return GLYPHS.get(bits, "┼")


EDGE, BLANK, EDGE_ONLY = -2, -1, -3  # what `paint_row` says a cell holds besides a box's index (EDGE_ONLY: an
# edge of this side that the other side does not have)
_LINES = {"op": "╭─╮│╰╯┴┬", "frame": "╭─╮│╰╯┴┬", "module": "┏━┓┃┗┛┷┯", "absent": "╭╌╮╎╰╯╌╌"}


def paint_row(scene: Scene, y: int, x0: int, width: int, text: Callable[[Box], str],
              side: int = BOTH) -> tuple[list[str], list[int]]:
    """Row `y` of the drawing from column `x0`, `width` cells: the characters and, per cell, the index of the
    box it belongs to (`EDGE`, `BLANK`). Boxes and edges not on `side` are drawn as dashed outlines / left out."""
    chars = [" "] * width
    who = [BLANK] * width
    for cx, (bits_t, bits_g, _back) in scene.cells.get(y, {}).items():
        bits = (bits_t if side & TARGET else 0) | (bits_g if side & GOLDEN else 0)
        if bits and x0 <= cx < x0 + width:
            chars[cx - x0] = glyph(bits)
            other = bits_g if side == TARGET else bits_t if side == GOLDEN else bits
            who[cx - x0] = EDGE if bits & ~other == 0 else EDGE_ONLY
    if not 0 <= y < len(scene.rows):
        return chars, who
    crossing = [i for i in scene.frames if scene.boxes[i].y <= y < scene.boxes[i].y + scene.boxes[i].h]
    for i in [*crossing, *scene.rows[y]]:
        b = scene.boxes[i]
        if b.x >= x0 + width or b.x + b.w <= x0:
            continue
        here = bool(b.sides & side)
        lines = _LINES[b.kind if here else "absent"]
        if y == b.y or y == b.y + b.h - 1:
            top = y == b.y
            row = [lines[1]] * b.w
            row[0], row[-1] = (lines[0], lines[2]) if top else (lines[4], lines[5])
            if here and (b.has_in if top else b.has_out) and b.w > 2:
                row[b.w // 2] = lines[6] if top else lines[7]
            if top and b.kind == "frame":
                title = f" {text(b)} "[: max(0, b.w - 4)]
                row[2:2 + len(title)] = list(title)
            cells = row
        elif b.kind == "frame":
            cells = None
            for cx in (b.x, b.x + b.w - 1):
                if x0 <= cx < x0 + width:
                    chars[cx - x0] = lines[3]
                    who[cx - x0] = i
        else:
            inner = text(b) if here and y == b.y + 1 else ""
            inner = inner[: b.w - 4].ljust(b.w - 4)
            cells = [lines[3], " ", *inner, " ", lines[3]]
        if cells is None:
            continue
        for k, ch in enumerate(cells):
            cx = b.x + k
            if x0 <= cx < x0 + width:
                chars[cx - x0] = ch
                who[cx - x0] = i
    return chars, who
