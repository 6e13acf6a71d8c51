"""CountIslands: count the islands of a hidden 0/1 grid, with a flood-fill tool.

Config: ``{"grid": [[0 or 1, ...], ...]}`` (1..30 rows of equal length 1..30). ``Observe``
shows the grid's size; ``GetCell(row, col)`` reads a cell (1 is land); ``FloodFill(row,
col)`` marks every land cell connected to a land cell (up, down, left, right) as visited and
returns how many it marked; ``IsVisited(row, col)`` says whether a cell was marked. The
answer is the number of islands (groups of connected land cells).

The oracle reads every cell, and floods each land cell not yet visited:
``rows * cols + land + islands + 2`` calls.

Sizes (rows and columns): easy 3..4, medium 5..7, hard 9..11; each cell is land with
probability 0.4.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from xpgym.core.tools.decorator import ToolError, tool
from xpgym.envs.toolgym.base import ToolGymEnv, check_index, draw_length

__all__ = ["SIZES", "CountIslandsEnv", "count_islands"]

SIZES: dict[str, tuple[int, int]] = {"easy": (3, 4), "medium": (5, 7), "hard": (9, 11)}
"""Inclusive bounds of the number of rows and of columns per difficulty."""
_MAX_SIDE = 30
_STEPS = ((1, 0), (-1, 0), (0, 1), (0, -1))


def _flood(grid: list[list[int]], seen: list[list[bool]], row: int, col: int) -> int:
    """Mark the island holding land cell (row, col) in `seen`; the number of cells marked."""
    seen[row][col] = True
    stack, marked = [(row, col)], 1
    while stack:
        r, c = stack.pop()
        for dr, dc in _STEPS:
            nr, nc = r + dr, c + dc
            inside = 0 <= nr < len(grid) and 0 <= nc < len(grid[0])
            if inside and grid[nr][nc] == 1 and not seen[nr][nc]:
                seen[nr][nc] = True
                marked += 1
                stack.append((nr, nc))
    return marked


def count_islands(grid: list[list[int]]) -> int:
    """Number of 4-connected groups of 1s: flood each unseen land cell in row-major order."""
    seen = [[False] * len(grid[0]) for _ in grid]
    islands = 0
    for r, row in enumerate(grid):
        for c, cell in enumerate(row):
            if cell == 1 and not seen[r][c]:
                _flood(grid, seen, r, c)
                islands += 1
    return islands


class CountIslandsEnv(ToolGymEnv):
    """Count the islands of a hidden grid with a flood-fill tool."""

    name: ClassVar[str] = "CountIslands"
    answer_type: ClassVar[Any] = int
    answer_doc: ClassVar[str] = "The number of islands."

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """A grid of SIZES[difficulty] rows and columns, land with probability 0.4."""
        rows, cols = (draw_length(rng, SIZES[difficulty]) for _ in range(2))
        return {"grid": (rng.random((rows, cols)) < 0.4).astype(int).tolist()}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check the config; the state: ``{"visited": rows x cols of false}``."""
        grid = config["grid"]
        if not isinstance(grid, list) or not 1 <= len(grid) <= _MAX_SIDE:
            raise ValueError(f"'grid' must be a list of 1..{_MAX_SIDE} rows")
        width = len(grid[0]) if isinstance(grid[0], list) else 0
        if not 1 <= width <= _MAX_SIDE:
            raise ValueError(f"'grid' rows must hold 1..{_MAX_SIDE} cells")
        for row in grid:
            if not isinstance(row, list) or len(row) != width:
                raise ValueError("'grid' rows must all have the same length")
            if not all(type(cell) is int and cell in (0, 1) for cell in row):
                raise ValueError("'grid' cells must be 0 or 1")
        return {"visited": [[False] * width for _ in grid]}

    def visible(self) -> dict[str, Any]:
        """The numbers of rows and columns."""
        return {"rows": len(self.config["grid"]), "cols": len(self.config["grid"][0])}

    def statement(self) -> str:
        """The task in two sentences."""
        return (
            "A hidden grid of 0s (water) and 1s (land) is given. Count its islands: groups of "
            "land cells connected up, down, left or right. Submit the count with Done."
        )

    def reference_answer(self) -> int:
        """`count_islands` of the grid."""
        return count_islands(self.config["grid"])

    def _check_cell(self, row: int, col: int) -> None:
        grid = self.config["grid"]
        check_index(row, len(grid), "row")
        check_index(col, len(grid[0]), "col")

    @tool
    def get_cell(self, row: int, col: int) -> str:
        """Read a cell: 1 for land, 0 for water.

        Args:
            row: The row, 0-based.
            col: The column, 0-based.
        """
        self._check_cell(row, col)
        return json.dumps(self.config["grid"][row][col])

    @tool
    def is_visited(self, row: int, col: int) -> str:
        """Whether a cell was marked visited by a flood fill; returns true or false.

        Args:
            row: The row, 0-based.
            col: The column, 0-based.
        """
        self._check_cell(row, col)
        return json.dumps(self.state["visited"][row][col])

    @tool
    def flood_fill(self, row: int, col: int) -> str:
        """Mark the land cell and every land cell connected to it as visited; returns how
        many cells it marked.

        Args:
            row: The row of a land cell not yet visited, 0-based.
            col: Its column, 0-based.
        """
        self._check_cell(row, col)
        if self.config["grid"][row][col] != 1:
            raise ToolError(f"cell ({row}, {col}) is water")
        if self.state["visited"][row][col]:
            raise ToolError(f"cell ({row}, {col}) is already visited")
        return json.dumps(_flood(self.config["grid"], self.state["visited"], row, col))

    def oracle(self) -> None:
        """Scan the grid; flood every land cell that no earlier flood reached."""
        size = json.loads(self.call("Observe"))
        islands = 0
        for row in range(size["rows"]):
            for col in range(size["cols"]):
                if json.loads(self.call("GetCell", row=row, col=col)) == 0:
                    continue
                if not json.loads(self.call("IsVisited", row=row, col=col)):
                    self.call("FloodFill", row=row, col=col)
                    islands += 1
        self.call("Done", answer=islands)
