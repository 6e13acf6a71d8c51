r"""Sudoku: fill a 4x4 or 9x9 grid so that every row, column and box holds each digit once.

Puzzle generation (all randomness from `np_random`):

1. A random full grid is built by backtracking: cells are filled most-constrained first and
   each cell tries its candidate digits in an order drawn from `np_random`.
2. Cells are visited in a random order and each is removed (emptied) if the puzzle still
   has exactly one solution (checked by a complete backtracking search for a second one),
   until exactly ``givens`` cells remain filled. If one pass over all cells cannot get down
   to ``givens``, a new full grid is drawn (this is rare for the allowed ranges). Every
   puzzle therefore has a **unique** solution, and ``givens`` is the number of GIVEN
   (pre-filled) cells, not the number removed.

The 4x4 game has 2x2 boxes, the 9x9 game 3x3 boxes.

Episode rules:

* `reset()` generates a puzzle; the observation states the rules, the action format and
  the grid (``.`` marks an empty cell, rows and columns are numbered from 1).
* Every `step()` is one turn. The move is the **last** ``\boxed{...}`` of the action holding
  three integers ``row col value`` separated by spaces and/or commas, all 1-based, e.g.
  ``\boxed{2 3 4}`` writes 4 in row 2, column 3. ``value`` 0 erases a cell you filled.
* A move is valid when the cell is not a given and the value does not repeat a digit
  already in the same row, column or box (checked against the **rules**, not against the
  hidden solution). A valid move writes (or overwrites, or erases) the cell. A value that
  obeys the rules but differs from the solution is accepted; it only blocks the win until
  it is overwritten, because the puzzle's solution is unique: a full grid that obeys the
  rules and keeps the givens *is* the solution.
* The episode terminates, solved, when every cell is filled (a full grid is always valid,
  since invalid moves are never written). If the last allowed turn (``turn ==
  max_turns``) does not solve it, the episode is truncated (``terminated=False,
  truncated=True``).

Rewards, per turn:

==============================================================  =======  ====================
Action                                                          reward   ``info``
==============================================================  =======  ====================
valid move that completes the grid                              ``1.0``  ``correct=True``
any other valid move (write, overwrite, erase)                  ``0.0``
row/col/value out of range, or erasing an empty cell            ``-0.1`` ``invalid_action``
writing into a given cell                                       ``-0.1`` ``invalid_action``
value already in the cell's row, column or box                  ``-0.1`` ``invalid_action``
no ``\boxed{}``, or its content is not three integers           ``-0.1`` ``invalid_action``
==============================================================  =======  ====================

``info`` after every step: ``correct`` (bool), ``invalid_action`` (bool), ``parsed_action``
(the stripped text inside the last ``\boxed{}``, or `None`), ``turn`` (turns taken) and
``empty_cells`` (cells still empty).

Difficulty presets (`DIFFICULTIES`): ``"easy"`` is 4x4 with 8 givens (8 cells to fill) in
20 turns, ``"hard"`` 9x9 with 30 givens (51 to fill) in 100 turns; ``"random"`` draws easy
or hard with equal probability at every reset. Without a difficulty: 9x9, 36 givens, 100
turns. ``givens`` must lie in ``6..16`` for 4x4 and ``26..81`` for 9x9.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, NamedTuple

import numpy as np

from xpgym.envs.common.presets import PresetEnv, override_preset, resolve_presets

__all__ = [
    "DIFFICULTIES",
    "INVALID_REWARD",
    "MIN_GIVENS",
    "SOLVED_REWARD",
    "Settings",
    "SudokuEnv",
    "count_solutions",
    "generate_puzzle",
    "parse_move",
    "render_grid",
    "solve",
]

SOLVED_REWARD = 1.0
INVALID_REWARD = -0.1

MIN_GIVENS: dict[int, int] = {4: 6, 9: 26}
"""Smallest allowed ``givens`` per board size (keeps generation fast)."""
_BOX = {4: (2, 2), 9: (3, 3)}
_MAX_ATTEMPTS = 1000

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_MOVE = re.compile(r"([0-9]{1,3})\s*[,\s]\s*([0-9]{1,3})\s*[,\s]\s*([0-9]{1,3})")


class Settings(NamedTuple):
    """One game: a `size` x `size` board (4 or 9) with `givens` filled cells, `max_turns`."""

    size: int
    givens: int
    max_turns: int


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(size=4, givens=8, max_turns=20),
    "hard": Settings(size=9, givens=30, max_turns=100),
}
"""Presets selected by `SudokuEnv(difficulty=...)`."""

_DEFAULT = Settings(size=9, givens=36, max_turns=100)


class _Geometry:
    """Index tables for one board size: the box of each cell."""

    def __init__(self, size: int) -> None:
        box_h, box_w = _BOX[size]
        self.size = size
        self.box_h, self.box_w = box_h, box_w
        self.full = sum(1 << v for v in range(1, size + 1))
        self.row_of = [i // size for i in range(size * size)]
        self.col_of = [i % size for i in range(size * size)]
        self.box_of = [
            (r // box_h) * (size // box_w) + c // box_w
            for r, c in zip(self.row_of, self.col_of, strict=True)
        ]


_GEOMETRIES = {size: _Geometry(size) for size in _BOX}


def _search(
    grid: list[int],
    size: int,
    limit: int,
    prefs: np.ndarray | None = None,
    forbid: tuple[int, int] = (-1, 0),
) -> tuple[int, list[int] | None]:
    """Backtracking search on `grid` (row-major, 0 = empty).

    Args:
        grid: The cells; not modified.
        size: 4 or 9.
        limit: Stop after this many solutions.
        prefs: Optional ``(size*size, size)`` array; cell ``i`` tries digits in the order
            ``prefs[i]`` (each a permutation of ``0..size-1``, meaning digits ``1..size``).
        forbid: ``(cell, value)``: that cell may not take that value (``cell=-1``: none).

    Returns:
        ``(count, first)``: solutions found (at most `limit`) and the first one (or `None`).
        A grid whose filled cells already break the rules has no solution.
    """
    geo = _GEOMETRIES[size]
    row_of, col_of, box_of, full = geo.row_of, geo.col_of, geo.box_of, geo.full
    rows, cols, boxes = [0] * size, [0] * size, [0] * size
    cells = list(grid)
    empties: list[int] = []
    for i, v in enumerate(cells):
        if v:
            bit = 1 << v
            r, c, b = row_of[i], col_of[i], box_of[i]
            if (rows[r] | cols[c] | boxes[b]) & bit:
                return 0, None
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
        else:
            empties.append(i)
    forbid_cell, forbid_bit = forbid[0], (1 << forbid[1]) if forbid[1] else 0
    found = 0
    first: list[int] | None = None

    def recurse() -> bool:
        nonlocal found, first
        best, best_mask, best_count = -1, 0, size + 1
        for i in empties:
            if cells[i]:
                continue
            mask = full & ~(rows[row_of[i]] | cols[col_of[i]] | boxes[box_of[i]])
            if i == forbid_cell:
                mask &= ~forbid_bit
            count = mask.bit_count()
            if count < best_count:
                best, best_mask, best_count = i, mask, count
                if count <= 1:
                    break
        if best < 0:
            found += 1
            if first is None:
                first = list(cells)
            return found >= limit
        if best_count == 0:
            return False
        r, c, b = row_of[best], col_of[best], box_of[best]
        order = range(1, size + 1) if prefs is None else (int(d) + 1 for d in prefs[best])
        for v in order:
            bit = 1 << v
            if not best_mask & bit:
                continue
            cells[best] = v
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
            done = recurse()
            rows[r] &= ~bit
            cols[c] &= ~bit
            boxes[b] &= ~bit
            cells[best] = 0
            if done:
                return True
        return False

    recurse()
    return found, first


def count_solutions(grid: list[int], size: int, limit: int = 2) -> int:
    """Number of solutions of `grid` (row-major, 0 = empty), counting at most `limit`."""
    return _search(grid, size, limit)[0]


def solve(grid: list[int], size: int) -> list[int] | None:
    """A solution of `grid` (row-major, 0 = empty), or `None` if it has none."""
    return _search(grid, size, 1)[1]


def _forced(cells: list[int], i: int, geo: _Geometry) -> bool:
    """Whether empty-to-be cell `i` admits only its current value given its peers."""
    size = geo.size
    r, c = geo.row_of[i], geo.col_of[i]
    seen = 0
    for k in range(size):
        seen |= 1 << cells[r * size + k]
        seen |= 1 << cells[k * size + c]
    r0, c0 = r - r % geo.box_h, c - c % geo.box_w
    for dr in range(geo.box_h):
        for dc in range(geo.box_w):
            seen |= 1 << cells[(r0 + dr) * size + c0 + dc]
    return (geo.full & ~seen).bit_count() == 1


def generate_puzzle(
    rng: np.random.Generator, size: int, givens: int
) -> tuple[list[int], list[int]]:
    """A puzzle with exactly `givens` filled cells and a unique solution.

    Returns:
        ``(puzzle, solution)``, both row-major lists of ``size*size`` ints (0 = empty).

    Raises:
        RuntimeError: no such puzzle was found in many attempts (not expected for
            ``givens >= MIN_GIVENS[size]``).
    """
    geo = _GEOMETRIES[size]
    n_cells = size * size
    for _ in range(_MAX_ATTEMPTS):
        prefs = rng.random((n_cells, size)).argsort(axis=1)
        _, solution = _search([0] * n_cells, size, 1, prefs=prefs)
        assert solution is not None
        cells = list(solution)
        filled = n_cells
        for i in rng.permutation(n_cells).tolist():
            if filled == givens:
                break
            value = cells[i]
            cells[i] = 0
            if _forced(cells, i, geo) or _search(cells, size, 1, forbid=(i, value))[0] == 0:
                filled -= 1
            else:
                cells[i] = value
        if filled == givens:
            return cells, solution
    raise RuntimeError(f"no {size}x{size} Sudoku with {givens} givens found")


def parse_move(action: str) -> tuple[str | None, tuple[int, int, int] | None]:
    r"""Parse ``\boxed{row col value}`` from the last ``\boxed{}`` of `action`.

    Returns:
        ``(boxed, move)``: `boxed` is the stripped content of the last ``\boxed{...}`` (or
        `None`); `move` is ``(row, col, value)`` as written (not range-checked), or `None`
        if the content is not three integers separated by spaces and/or commas.
    """
    matches = _BOXED.findall(action)
    if not matches:
        return None, None
    boxed = matches[-1].strip()
    m = _MOVE.fullmatch(boxed)
    if m is None:
        return boxed, None
    row, col, value = (int(g) for g in m.groups())
    return boxed, (row, col, value)


def render_grid(cells: list[int], size: int) -> str:
    """The grid as text: numbered rows and columns, box separators, ``.`` for empty."""
    box_h, box_w = _BOX[size]
    header_parts = []
    for c in range(size):
        if c and c % box_w == 0:
            header_parts.append(" ")
        header_parts.append(str(c + 1))
    rule = "   +" + "+".join("-" * (2 * box_w + 1) for _ in range(size // box_w)) + "+"
    lines = ["     " + " ".join(header_parts), rule]
    for r in range(size):
        parts = []
        for c in range(size):
            if c % box_w == 0:
                parts.append("|")
            v = cells[r * size + c]
            parts.append(str(v) if v else ".")
        lines.append(f"{r + 1:>2} " + " ".join(parts) + " |")
        if (r + 1) % box_h == 0:
            lines.append(rule)
    return "\n".join(lines)


def _turns(n: int) -> str:
    return "1 turn" if n == 1 else f"{n} turns"


class SudokuEnv(PresetEnv[Settings]):
    r"""Sudoku on a 4x4 or 9x9 board with a unique solution; moves are ``\boxed{row col value}``.

    Args:
        size: 4 or 9.
        givens: Pre-filled cells (``MIN_GIVENS[size]..size*size``).
        max_turns: Turns before the episode is truncated (at least 1).
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"``. A preset from
            `DIFFICULTIES` gives the defaults; numbers passed explicitly replace the
            preset's (for ``"random"``, in both presets). Without a difficulty the defaults
            are 9x9 with 36 givens in 100 turns.

    Attributes:
        size, givens, max_turns: This episode's settings.
        episode_difficulty: This episode's preset name (`None` without a difficulty).
        puzzle, solution, board: Row-major lists of ``size*size`` ints (0 = empty): the
            givens, the unique solution and the current grid. turn: Turns taken.

    Raises:
        ValueError: unknown difficulty, size not 4 or 9, givens out of range, max_turns < 1.
        TypeError: a number is not an int.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(
        self,
        size: int | None = None,
        givens: int | None = None,
        max_turns: int | None = None,
        difficulty: str | None = None,
    ) -> None:
        presets = resolve_presets(difficulty, DIFFICULTIES, _DEFAULT)
        super().__init__(
            difficulty,
            {name: _validated(preset, size, givens, max_turns) for name, preset in presets.items()},
        )
        self.puzzle = [0] * (self.size * self.size)
        self.solution = list(self.puzzle)
        self.board = list(self.puzzle)
        self.turn = 0

    def _apply_preset(self, settings: Settings) -> None:
        self.size, self.givens, self.max_turns = settings

    def _empty_cells(self) -> int:
        return self.board.count(0)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Generate a new puzzle (for ``difficulty="random"``, first draw the preset).

        Returns:
            The instructions with the grid, and info ``{"difficulty", "size", "givens",
            "max_turns"}`` for this episode.
        """
        super().reset(seed=seed)
        self.puzzle, self.solution = generate_puzzle(self.np_random, self.size, self.givens)
        self.board = list(self.puzzle)
        self.turn = 0
        n = self.size
        box_h, box_w = _BOX[n]
        obs = (
            f"Sudoku {n}x{n}: fill every empty cell (.) so that each row, each column and each "
            f"{box_h}x{box_w} box (outlined) contains every digit from 1 to {n} exactly once. "
            f"The puzzle has exactly one solution. You have {_turns(self.max_turns)}. "
            "Each turn, write one digit as \\boxed{row column digit} (1-based), e.g. "
            "\\boxed{1 2 3} puts 3 in row 1, column 2; digit 0 erases a cell you filled. "
            "Givens cannot be changed and a digit already in the same row, column or box is "
            "rejected. Only the last \\boxed{} in your reply counts.\n\n"
            + render_grid(self.board, n)
        )
        info = {
            "difficulty": self.episode_difficulty,
            "size": n,
            "givens": self.givens,
            "max_turns": self.max_turns,
        }
        return obs, info

    def _rejection(self, move: tuple[int, int, int] | None, boxed: str | None) -> str | None:
        """Why `move` is invalid, or `None` if it is valid."""
        n = self.size
        if move is None:
            if boxed is None:
                return "no \\boxed{} found"
            return f"{boxed!r:.40} is not three integers 'row column digit'"
        row, col, value = move
        if not (1 <= row <= n and 1 <= col <= n):
            return f"row and column must be from 1 to {n}"
        if not 0 <= value <= n:
            return f"the digit must be from 1 to {n} (or 0 to erase)"
        i = (row - 1) * n + col - 1
        if self.puzzle[i]:
            return f"row {row}, column {col} is a given and cannot be changed"
        if value == 0:
            return None if self.board[i] else f"row {row}, column {col} is already empty"
        geo = _GEOMETRIES[n]
        for j in range(n * n):
            if j != i and self.board[j] == value:
                if geo.row_of[j] == row - 1:
                    return f"{value} is already in row {row}"
                if geo.col_of[j] == col - 1:
                    return f"{value} is already in column {col}"
                if geo.box_of[j] == geo.box_of[i]:
                    return f"{value} is already in the box of row {row}, column {col}"
        return None

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take one turn; see the module docstring for the rules and rewards."""
        self.turn += 1
        boxed, move = parse_move(action)
        prefix = f"Turn {self.turn}/{self.max_turns}:"
        rejection = self._rejection(move, boxed)
        invalid = rejection is not None
        solved = False
        if rejection is not None:
            reward = INVALID_REWARD
            feedback = f"{prefix} invalid move: {rejection}. The grid is unchanged."
        else:
            assert move is not None
            row, col, value = move
            self.board[(row - 1) * self.size + col - 1] = value
            solved = 0 not in self.board
            reward = SOLVED_REWARD if solved else 0.0
            what = (
                f"erased row {row}, column {col}"
                if value == 0
                else (f"wrote {value} in row {row}, column {col}")
            )
            feedback = f"{prefix} {what}."
            if solved:
                feedback += " The puzzle is solved!"
        truncated = not solved and self.turn >= self.max_turns
        if truncated:
            feedback += " No turns left."
        elif not solved:
            feedback += (
                f" {self._empty_cells()} empty cells, {_turns(self.max_turns - self.turn)} left."
            )
        feedback += "\n\n" + render_grid(self.board, self.size)
        info = {
            "correct": solved,
            "invalid_action": invalid,
            "parsed_action": boxed,
            "turn": self.turn,
            "empty_cells": self._empty_cells(),
        }
        return feedback, reward, solved, truncated, info

    def sample_random_action(self) -> str:
        r"""``\boxed{row col digit}``, each uniform over ``1..size``, drawn from `np_random`."""
        row, col, value = (int(x) for x in self.np_random.integers(1, self.size + 1, size=3))
        return f"\\boxed{{{row} {col} {value}}}"

    def _episode_state(self) -> dict[str, Any]:
        """For `get_state()`: puzzle, solution, board and turn (fresh lists)."""
        return {
            "puzzle": list(self.puzzle),
            "solution": list(self.solution),
            "board": list(self.board),
            "turn": self.turn,
        }

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        """Restore what `_episode_state` took."""
        self.puzzle = list(state["puzzle"])
        self.solution = list(state["solution"])
        self.board = list(state["board"])
        self.turn = state["turn"]


def _validated(
    preset: Settings, size: int | None, givens: int | None, max_turns: int | None
) -> Settings:
    settings = override_preset(preset, (size, givens, max_turns), "SudokuEnv")
    if settings.size not in _BOX:
        raise ValueError(f"SudokuEnv: size must be 4 or 9, got {settings.size}")
    lo, hi = MIN_GIVENS[settings.size], settings.size**2
    if not lo <= settings.givens <= hi:
        raise ValueError(
            f"SudokuEnv: givens must be from {lo} to {hi} for size {settings.size}, "
            f"got {settings.givens}"
        )
    if settings.max_turns < 1:
        raise ValueError(f"SudokuEnv: max_turns must be >= 1, got {settings.max_turns}")
    return settings
