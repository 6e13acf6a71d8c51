r"""Minesweeper: reveal every safe cell of a grid without stepping on a mine.

Episode rules:

* The grid has `rows` x `cols` cells and `mines` hidden mines. Rows and columns are numbered
  from 1 (row 1 at the top, column 1 at the left), as labelled in the observation.
* The mines are placed with `np_random` at the **first reveal**, so the first reveal is never
  a mine: the revealed cell and, when the grid has room for all mines outside them, its
  neighbours are kept free (the first reveal then always opens an area). Until then
  `mine_cells` is `None`.
* Every `step()` is one turn, whatever the action holds. The move is the content of the
  **last** ``\boxed{...}`` of the action, case-insensitive: ``\boxed{reveal R C}`` reveals the
  cell in row ``R``, column ``C``; ``\boxed{flag R C}`` puts a flag on a hidden cell, or
  removes it if the cell is flagged (flags only help the player; they are never required).
  Spaces, commas or parentheses may separate the numbers: ``\boxed{reveal 2,3}``.
* Revealing a cell shows how many of its 8 neighbours are mines; a cell with none
  (shown ``.``) also reveals its neighbours, repeatedly (flood fill; flags there are
  removed).
* The episode terminates when a mine is revealed (lost) or every safe cell is revealed
  (won). If the last allowed turn (``turn == max_turns``) does neither, it is truncated
  (``terminated=False, truncated=True``). Boards are random: winning may need a guess.

Rewards, per turn:

===========================================================  ========  ======================
Action                                                       reward    ``info``
===========================================================  ========  ======================
reveal that uncovers the last safe cell (won)                ``1.0``   ``correct=True``
reveal of a mine (lost; the observation shows all mines)     ``-1.0``
other reveal of a hidden, unflagged cell; flag / unflag      ``0.0``
cell outside the grid, reveal or flag of a revealed cell,    ``-0.1``  ``invalid_action=True``
reveal of a flagged cell, no ``\boxed{}``, unparsable move
===========================================================  ========  ======================

There is no shaping: a won episode returns ``1.0`` and a lost one ``-1.0``, minus ``0.1`` per
invalid turn; reaching the turn limit costs nothing extra. An invalid move changes nothing.

The observation after each step shows the whole board (``#`` hidden, ``F`` flagged, ``.`` no
adjacent mine, ``1``-``8`` adjacent mines, ``*`` mines once lost), the mine and flag counts
and the turns left. ``info`` after every step: ``correct`` (bool), ``invalid_action`` (bool),
``parsed_action`` (the stripped text inside the last ``\boxed{}``, or `None`), ``turn``
(``1..max_turns``) and ``hit_mine`` (bool).

Difficulty presets (`DIFFICULTIES`): ``"easy"`` is 5x5 with 3 mines, ``"hard"`` 8x8 with 10
mines; ``"random"`` draws one of the two at every reset. Without a difficulty: 6x6 with 5
mines. Every size allows one turn per cell, enough to reveal each safe cell one by one.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, ClassVar, NamedTuple

from xpgym.envs.common.presets import PresetEnv, override_preset, resolve_presets

__all__ = [
    "DIFFICULTIES",
    "INVALID_REWARD",
    "MINE_REWARD",
    "SAFE_REWARD",
    "WIN_REWARD",
    "MinesweeperEnv",
    "Settings",
    "parse_move",
]

WIN_REWARD = 1.0
MINE_REWARD = -1.0
SAFE_REWARD = 0.0
INVALID_REWARD = -0.1

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_MOVE = re.compile(
    r"(reveal|flag)[\s,(]*([0-9]{1,6})[\s,]+([0-9]{1,6})[\s)]*", re.IGNORECASE | re.ASCII
)


class Settings(NamedTuple):
    """One game size: a `rows` x `cols` grid with `mines` mines, `max_turns` turns."""

    rows: int
    cols: int
    mines: int
    max_turns: int


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(rows=5, cols=5, mines=3, max_turns=25),
    "hard": Settings(rows=8, cols=8, mines=10, max_turns=64),
}
"""Presets selected by `MinesweeperEnv(difficulty=...)`."""

_DEFAULT = Settings(rows=6, cols=6, mines=5, max_turns=36)


def parse_move(action: str) -> tuple[str | None, tuple[str, int, int] | None]:
    r"""Parse the move in `action`.

    Returns:
        ``(boxed, move)``: `boxed` is the stripped content of the last ``\boxed{...}`` (or
        `None`); `move` is ``(verb, row, col)`` with `verb` ``"reveal"`` or ``"flag"`` and
        1-based `row`, `col` as written (not checked against the grid), or `None` if the
        content is not a move. Never raises.
    """
    matches = _BOXED.findall(action)
    if not matches:
        return None, None
    boxed = matches[-1].strip()
    found = _MOVE.fullmatch(boxed)
    if found is None:
        return boxed, None
    return boxed, (found[1].lower(), int(found[2]), int(found[3]))


@lru_cache(maxsize=64)
def _neighbours(rows: int, cols: int) -> tuple[tuple[int, ...], ...]:
    """For each flat cell index ``r * cols + c``, the indices of its (up to 8) neighbours."""
    out = []
    for r in range(rows):
        for c in range(cols):
            out.append(
                tuple(
                    rr * cols + cc
                    for rr in range(max(r - 1, 0), min(r + 2, rows))
                    for cc in range(max(c - 1, 0), min(c + 2, cols))
                    if (rr, cc) != (r, c)
                )
            )
    return tuple(out)


def _turns(n: int) -> str:
    return "1 turn" if n == 1 else f"{n} turns"


class MinesweeperEnv(PresetEnv[Settings]):
    r"""Reveal all safe cells; moves ``\boxed{reveal R C}`` / ``\boxed{flag R C}``.

    Args:
        rows, cols: Grid size (each 2..30).
        mines: Number of mines (1..rows * cols - 1).
        max_turns: Turns before the episode is truncated (at least 1).
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"``. A preset from
            `DIFFICULTIES` gives the defaults; numbers passed explicitly replace the preset's.
            Without one: 6x6 with 5 mines in 36 turns.

    Attributes:
        rows, cols, mines, max_turns: This episode's settings.
        episode_difficulty: This episode's preset name (`None` without a difficulty).
        mine_cells: Flat indices ``r * cols + c`` (0-based) of the mines, a sorted tuple, or
            `None` before the first reveal. revealed, flagged: Lists of bools per flat cell.
        turn: Turns taken.

    Raises:
        ValueError: unknown difficulty or a number out of its range. TypeError: not an int.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(
        self,
        rows: int | None = None,
        cols: int | None = None,
        mines: int | None = None,
        max_turns: int | None = None,
        difficulty: str | None = None,
    ) -> None:
        presets = resolve_presets(difficulty, DIFFICULTIES, _DEFAULT)
        super().__init__(
            difficulty,
            {
                name: _validated(preset, rows, cols, mines, max_turns)
                for name, preset in presets.items()
            },
        )
        self._clear()

    def _apply_preset(self, settings: Settings) -> None:
        self.rows, self.cols, self.mines, self.max_turns = settings
        self._neigh = _neighbours(self.rows, self.cols)

    def _clear(self) -> None:
        n = self.rows * self.cols
        self.mine_cells: tuple[int, ...] | None = None
        self._is_mine = [False] * n
        self._counts = [0] * n
        self.revealed = [False] * n
        self.flagged = [False] * n
        self._num_revealed = 0
        self._lost = False
        self.turn = 0

    def _place_mines(self, cells: tuple[int, ...]) -> None:
        self.mine_cells = tuple(sorted(cells))
        self._is_mine = [False] * (self.rows * self.cols)
        for cell in self.mine_cells:
            self._is_mine[cell] = True
        self._counts = [sum(self._is_mine[j] for j in nb) for nb in self._neigh]

    def _board(self) -> str:
        width = len(str(max(self.rows, self.cols)))
        header = " " * width + " " + " ".join(f"{c:>{width}}" for c in range(1, self.cols + 1))
        lines = [header]
        for r in range(self.rows):
            cells = []
            for i in range(r * self.cols, (r + 1) * self.cols):
                if self.revealed[i]:
                    count = self._counts[i]
                    ch = "*" if self._is_mine[i] else (str(count) if count else ".")
                elif self._lost and self._is_mine[i]:
                    ch = "*"
                else:
                    ch = "F" if self.flagged[i] else "#"
                cells.append(f"{ch:>{width}}")
            lines.append(f"{r + 1:>{width}} " + " ".join(cells))
        return "\n".join(lines)

    def _status(self) -> str:
        return f"Mines: {self.mines}, flags placed: {sum(self.flagged)}."

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Clear the board (for ``difficulty="random"``, first draw the preset).

        Mines are placed at the first reveal, not here. Returns the instructions and board,
        and info ``{"difficulty", "rows", "cols", "mines", "max_turns"}``.
        """
        super().reset(seed=seed)
        self._clear()
        obs = (
            f"Minesweeper: a {self.rows}x{self.cols} grid hides {self.mines} mines. Reveal "
            "every safe cell without revealing a mine; a revealed number counts the mines "
            "among the 8 neighbouring cells. Your first reveal is never a mine. You have "
            f"{_turns(self.max_turns)}. Moves: \\boxed{{reveal R C}} reveals row R, column C "
            "(numbered from 1); \\boxed{flag R C} flags or unflags a hidden cell. Only the "
            "last \\boxed{} in your reply counts.\n"
            f"{self._board()}\n{self._status()}"
        )
        info = {
            "difficulty": self.episode_difficulty,
            "rows": self.rows,
            "cols": self.cols,
            "mines": self.mines,
            "max_turns": self.max_turns,
        }
        return obs, info

    def _reveal(self, cell: int) -> None:
        """Reveal a safe `cell`, flood-filling from cells with no adjacent mine."""
        revealed, flagged, counts, neigh = self.revealed, self.flagged, self._counts, self._neigh
        stack = [cell]
        revealed[cell] = True
        flagged[cell] = False
        self._num_revealed += 1
        while stack:
            i = stack.pop()
            if counts[i]:
                continue
            for j in neigh[i]:
                if not revealed[j]:  # a zero cell's neighbours are never mines
                    revealed[j] = True
                    flagged[j] = False
                    self._num_revealed += 1
                    stack.append(j)

    def _first_reveal(self, cell: int) -> None:
        n = self.rows * self.cols
        keep_free = {cell, *self._neigh[cell]}
        if n - len(keep_free) < self.mines:
            keep_free = {cell}
        candidates = [i for i in range(n) if i not in keep_free]
        picks = self.np_random.choice(len(candidates), size=self.mines, replace=False)
        self._place_mines(tuple(candidates[int(k)] for k in picks))

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take one turn; see the module docstring for the rules and rewards."""
        self.turn += 1
        boxed, move = parse_move(action)
        prefix = f"Turn {self.turn}/{self.max_turns}:"
        correct = invalid = hit = False
        problem = None
        reward = SAFE_REWARD
        if move is None:
            problem = (
                "no \\boxed{} found"
                if boxed is None
                else f"{boxed!r:.40} is not a move like \\boxed{{reveal 2 3}}"
            )
        else:
            verb, row, col = move
            cell = (row - 1) * self.cols + (col - 1)
            if not (1 <= row <= self.rows and 1 <= col <= self.cols):
                problem = f"cell ({row}, {col}) is outside the {self.rows}x{self.cols} grid"
            elif self.revealed[cell]:
                problem = f"cell ({row}, {col}) is already revealed"
            elif verb == "flag":
                self.flagged[cell] = not self.flagged[cell]
                what = "flagged" if self.flagged[cell] else "unflagged"
                feedback = f"{prefix} {what} cell ({row}, {col})."
            elif self.flagged[cell]:
                problem = f"cell ({row}, {col}) is flagged; unflag it first"
            else:
                if self.mine_cells is None:
                    self._first_reveal(cell)
                if self._is_mine[cell]:
                    hit = self._lost = True
                    self.revealed[cell] = True
                    reward = MINE_REWARD
                    feedback = f"{prefix} cell ({row}, {col}) is a mine! You lost."
                else:
                    self._reveal(cell)
                    correct = self._num_revealed == self.rows * self.cols - self.mines
                    if correct:
                        reward = WIN_REWARD
                        feedback = f"{prefix} revealed ({row}, {col}). All safe cells! You won."
                    else:
                        feedback = f"{prefix} revealed ({row}, {col})."
        if problem is not None:
            invalid = True
            reward = INVALID_REWARD
            feedback = f"{prefix} invalid move: {problem}; nothing changed."
        terminated = correct or hit
        truncated = not terminated and self.turn >= self.max_turns
        feedback += f"\n{self._board()}\n{self._status()}"
        if truncated:
            feedback += " No turns left."
        elif not terminated:
            feedback += f" {_turns(self.max_turns - self.turn)} left."
        info = {
            "correct": correct,
            "invalid_action": invalid,
            "parsed_action": boxed,
            "turn": self.turn,
            "hit_mine": hit,
        }
        return feedback, reward, terminated, truncated, info

    def sample_random_action(self) -> str:
        r"""A reveal (3 in 4) or flag of a uniformly random cell, drawn from `np_random`."""
        verb = "flag" if int(self.np_random.integers(4)) == 0 else "reveal"
        row = int(self.np_random.integers(1, self.rows + 1))
        col = int(self.np_random.integers(1, self.cols + 1))
        return f"\\boxed{{{verb} {row} {col}}}"

    def _episode_state(self) -> dict[str, Any]:
        """For `get_state()`: mines, revealed and flagged cells, lost, turn (fresh lists)."""
        return {
            "mine_cells": self.mine_cells,
            "revealed": list(self.revealed),
            "flagged": list(self.flagged),
            "lost": self._lost,
            "turn": self.turn,
        }

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        """Restore what `_episode_state` took."""
        self._clear()
        if state["mine_cells"] is not None:
            self._place_mines(tuple(state["mine_cells"]))
        self.revealed = list(state["revealed"])
        self.flagged = list(state["flagged"])
        self._num_revealed = sum(self.revealed)
        self._lost = state["lost"]
        self.turn = state["turn"]


def _validated(
    preset: Settings,
    rows: int | None,
    cols: int | None,
    mines: int | None,
    max_turns: int | None,
) -> Settings:
    settings = override_preset(preset, (rows, cols, mines, max_turns), "MinesweeperEnv")
    for name in ("rows", "cols"):
        if not 2 <= getattr(settings, name) <= 30:
            raise ValueError(f"MinesweeperEnv: {name} must be 2..30, got {getattr(settings, name)}")
    if not 1 <= settings.mines < settings.rows * settings.cols:
        raise ValueError(f"MinesweeperEnv: mines must be 1..rows*cols-1, got {settings.mines}")
    if settings.max_turns < 1:
        raise ValueError(f"MinesweeperEnv: max_turns must be >= 1, got {settings.max_turns}")
    return settings
