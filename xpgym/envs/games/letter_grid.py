"""Text rendering shared by the letter-grid games (WordSearch, Crosswords)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["render_letter_grid"]


def render_letter_grid(rows: Sequence[str]) -> str:
    """`rows` (at least one; equal-length strings, one character per cell) as a numbered grid.

    The first line holds the column numbers (1-based), every other line starts with its row
    number; numbers are right-aligned to the width of the largest one, cells are separated
    by spaces. E.g. ``["ab", "cd"]`` gives ``"  1 2\\n1 a b\\n2 c d"``.
    """
    cols = len(rows[0])
    width = len(str(max(len(rows), cols)))
    header = " " * width + " " + " ".join(f"{c:>{width}}" for c in range(1, cols + 1))
    lines = [header]
    for r, row in enumerate(rows, start=1):
        lines.append(f"{r:>{width}} " + " ".join(f"{ch:>{width}}" for ch in row))
    return "\n".join(lines)
