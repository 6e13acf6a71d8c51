r"""FifteenPuzzle: slide numbered tiles into order on an ``n x n`` board with one blank.

Episode rules:

* The solved board holds ``1 .. n*n - 1`` row by row, the blank (``_``) last.
* `reset()` scrambles the solved board with ``scramble_moves`` random legal moves of the
  blank drawn from `np_random` (never undoing the move just made), plus more while the
  board is still solved; every instance is therefore solvable in at most the number of
  scramble moves (`scramble` holds them). The observation shows the board, the legal
  moves, the turn limit and the action format.
* Every `step()` is one turn, whatever the action holds: one move, the content of the
  **last** ``\boxed{...}``, stripped, case-insensitive:

  * a direction in which the **blank** moves: ``up``, ``down``, ``left``, ``right`` (or
    ``u``, ``d``, ``l``, ``r``). ``\boxed{up}`` swaps the blank with the tile above it
    (that tile slides down);
  * or the number of a tile next to the blank, e.g. ``\boxed{7}``: that tile slides into
    the blank.
* A move off the board, a tile not next to the blank (or not on the board), anything else
  in the box, or no ``\boxed{}`` is invalid: it uses up the turn and leaves the board as
  it was.
* The episode terminates when the board is solved. If it is not solved after the last
  allowed turn (``turn == max_turns``), it is truncated (``terminated=False,
  truncated=True``).

Rewards, per turn:

=====================================================  =======  ======================
Action                                                 reward   ``info``
=====================================================  =======  ======================
legal move that solves the board                       ``1.0``  ``correct=True``
other legal move                                       ``0.0``
illegal move (off the board, tile not adjacent)        ``-0.1`` ``invalid_action=True``
no ``\boxed{}``, or content not a direction or number  ``-0.1`` ``invalid_action=True``
=====================================================  =======  ======================

There is no shaping: the return is ``1.0`` if the board is solved, minus ``0.1`` per
invalid turn.

``info`` after every step: ``correct`` (bool), ``invalid_action`` (bool), ``parsed_action``
(the stripped content of the last ``\boxed{}``, or `None`), ``turn`` (turns taken) and
``move`` (the blank's direction of a legal move, else `None`).

Difficulty presets (`DIFFICULTIES`): ``"easy"`` is the 3x3 board scrambled by 8 moves with
30 turns, ``"hard"`` the 4x4 board scrambled by 40 moves with 100 turns; ``"random"`` draws
easy or hard with equal probability at every reset. Without a difficulty: 4x4, 20 scramble
moves, 60 turns.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, NamedTuple

from xpgym.envs.common.presets import PresetEnv, override_preset, resolve_presets

__all__ = [
    "DIFFICULTIES",
    "INVALID_REWARD",
    "MOVE_REWARD",
    "SOLVED_REWARD",
    "FifteenPuzzleEnv",
    "Settings",
    "solved_board",
]

SOLVED_REWARD = 1.0
MOVE_REWARD = 0.0
INVALID_REWARD = -0.1

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_DIRECTIONS: dict[str, tuple[int, int]] = {
    "up": (-1, 0),
    "down": (1, 0),
    "left": (0, -1),
    "right": (0, 1),
}
_ALIASES = {"u": "up", "d": "down", "l": "left", "r": "right", **{k: k for k in _DIRECTIONS}}
_OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}
_ORDER = ("up", "down", "left", "right")


class Settings(NamedTuple):
    """One game size: a `size` x `size` board, `scramble_moves`, at most `max_turns` moves."""

    size: int
    scramble_moves: int
    max_turns: int


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(size=3, scramble_moves=8, max_turns=30),
    "hard": Settings(size=4, scramble_moves=40, max_turns=100),
}
"""Presets selected by `FifteenPuzzleEnv(difficulty=...)`."""

_DEFAULT = Settings(size=4, scramble_moves=20, max_turns=60)


def solved_board(size: int) -> list[int]:
    """The solved board, row-major: ``1 .. size*size - 1`` then ``0`` (the blank)."""
    return [*range(1, size * size), 0]


def _turns(n: int) -> str:
    return "1 turn" if n == 1 else f"{n} turns"


class FifteenPuzzleEnv(PresetEnv[Settings]):
    r"""Sliding-tile puzzle; one move per turn in ``\boxed{}`` (``up`` moves the blank up).

    Args:
        size: Board side (at least 2).
        scramble_moves: Random blank moves applied to the solved board at reset (>= 1).
        max_turns: Turns before the episode is truncated (at least 1).
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"``; a preset from
            `DIFFICULTIES` gives the defaults, and values passed explicitly replace the
            preset's (for ``"random"``, in both presets).

    Attributes:
        size, scramble_moves, max_turns: This episode's settings.
        episode_difficulty: This episode's preset name (`None` without a difficulty).
        board: Row-major tiles, ``0`` for the blank. blank: The blank's index in `board`.
        scramble: The blank moves that made this episode's board from the solved one;
            undoing them in reverse order solves it. turn: Turns taken.

    Raises:
        ValueError: unknown difficulty, ``size < 2``, ``scramble_moves < 1`` or
            ``max_turns < 1``.
        TypeError: a number is not an int.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(
        self,
        size: int | None = None,
        scramble_moves: int | None = None,
        max_turns: int | None = None,
        difficulty: str | None = None,
    ) -> None:
        presets = resolve_presets(difficulty, DIFFICULTIES, _DEFAULT)
        super().__init__(
            difficulty,
            {
                name: _validated(preset, size, scramble_moves, max_turns)
                for name, preset in presets.items()
            },
        )
        self.board = solved_board(self.size)
        self.blank = self.size * self.size - 1
        self.scramble: list[str] = []
        self.turn = 0

    def _apply_preset(self, settings: Settings) -> None:
        self.size, self.scramble_moves, self.max_turns = settings
        self._solved = solved_board(self.size)

    def _target(self, direction: str) -> int | None:
        """Index the blank moves to in `direction`, or `None` if that leaves the board."""
        row, col = divmod(self.blank, self.size)
        drow, dcol = _DIRECTIONS[direction]
        row, col = row + drow, col + dcol
        if 0 <= row < self.size and 0 <= col < self.size:
            return row * self.size + col
        return None

    def legal_moves(self) -> list[str]:
        """The blank's legal directions, in the order up, down, left, right."""
        return [d for d in _ORDER if self._target(d) is not None]

    def _move(self, direction: str) -> None:
        target = self._target(direction)
        assert target is not None
        self.board[self.blank], self.board[target] = self.board[target], 0
        self.blank = target

    def render_board(self) -> str:
        """The board as text rows, the blank as ``_``."""
        width = len(str(self.size * self.size - 1))
        cells = [str(t) if t else "_" for t in self.board]
        n = self.size
        return "\n".join(
            " ".join(c.rjust(width) for c in cells[r * n : (r + 1) * n]) for r in range(n)
        )

    def _status(self) -> str:
        return f"{self.render_board()}\nLegal moves of the blank: {', '.join(self.legal_moves())}."

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Scramble a new board (and, for ``difficulty="random"``, first draw the preset).

        Returns:
            The instructions with the board, and info ``{"difficulty", "size",
            "scramble_moves", "max_turns"}``.
        """
        super().reset(seed=seed)
        self.board = list(self._solved)
        self.blank = len(self.board) - 1
        self.scramble = []
        self.turn = 0
        while len(self.scramble) < self.scramble_moves or self.board == self._solved:
            options_ = self.legal_moves()
            if self.scramble:
                options_.remove(_OPPOSITE[self.scramble[-1]])
            direction = options_[int(self.np_random.integers(len(options_)))]
            self._move(direction)
            self.scramble.append(direction)
        n = self.size
        obs = (
            f"Sliding puzzle ({n}x{n}): put the tiles in order 1..{n * n - 1}, row by row, "
            f"with the blank (_) in the bottom-right corner, in at most "
            f"{_turns(self.max_turns)}. Each turn make one move in \\boxed{{}}: the direction "
            "the blank moves (\\boxed{up}, \\boxed{down}, \\boxed{left}, \\boxed{right}; "
            "\\boxed{up} slides the tile above the blank down into it), or the number of a "
            "tile next to the blank, e.g. \\boxed{7}, to slide it into the blank. Only the "
            "last \\boxed{} in your reply counts.\n" + self._status()
        )
        info = {
            "difficulty": self.episode_difficulty,
            "size": n,
            "scramble_moves": len(self.scramble),
            "max_turns": self.max_turns,
        }
        return obs, info

    def _parse(self, boxed: str) -> tuple[str | None, str]:
        """The blank's direction for `boxed` (or `None`) and, if `None`, why not."""
        word = boxed.lower()
        direction = _ALIASES.get(word)
        if direction is not None:
            if self._target(direction) is None:
                return None, f"the blank cannot move {direction}"
            return direction, ""
        if word.isascii() and word.isdigit() and len(word) <= 6:
            tile = int(word)
            for d in _ORDER:
                target = self._target(d)
                if target is not None and self.board[target] == tile and tile != 0:
                    return d, ""
            return None, f"tile {tile} is not next to the blank"
        return None, f"{boxed!r:.40} is not a move"

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take one turn; see the module docstring for the rules and rewards."""
        self.turn += 1
        matches = _BOXED.findall(action)
        boxed = matches[-1].strip() if matches else None
        prefix = f"Turn {self.turn}/{self.max_turns}:"
        correct = False
        if boxed is None:
            direction, why = None, "no \\boxed{} found"
        else:
            direction, why = self._parse(boxed)
        if direction is None:
            reward = INVALID_REWARD
            text = f"{prefix} invalid move: {why}; the board is unchanged."
        else:
            self._move(direction)
            correct = self.board == self._solved
            reward = SOLVED_REWARD if correct else MOVE_REWARD
            text = f"{prefix} the blank moved {direction}."
        truncated = not correct and self.turn >= self.max_turns
        if correct:
            text += " Solved!\n" + self.render_board()
        else:
            left = self.max_turns - self.turn
            text += f" {'No turns left.' if truncated else _turns(left) + ' left.'}\n"
            text += self._status()
        info = {
            "correct": correct,
            "invalid_action": direction is None,
            "parsed_action": boxed,
            "turn": self.turn,
            "move": direction,
        }
        return text, reward, correct, truncated, info

    def sample_random_action(self) -> str:
        r"""``\boxed{d}`` with `d` uniform over the four directions (may be illegal)."""
        return f"\\boxed{{{_ORDER[int(self.np_random.integers(4))]}}}"

    def _episode_state(self) -> dict[str, Any]:
        """For `get_state()`: board, scramble and turn (fresh lists)."""
        return {
            "board": list(self.board),
            "scramble": list(self.scramble),
            "turn": self.turn,
        }

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        """Restore what `_episode_state` took."""
        self.board = list(state["board"])
        self.blank = self.board.index(0)
        self.scramble = list(state["scramble"])
        self.turn = state["turn"]


def _validated(
    preset: Settings, size: int | None, scramble_moves: int | None, max_turns: int | None
) -> Settings:
    settings = override_preset(preset, (size, scramble_moves, max_turns), "FifteenPuzzleEnv")
    if settings.size < 2:
        raise ValueError(f"FifteenPuzzleEnv: size must be >= 2, got {settings.size}")
    if settings.scramble_moves < 1:
        raise ValueError(
            f"FifteenPuzzleEnv: scramble_moves must be >= 1, got {settings.scramble_moves}"
        )
    if settings.max_turns < 1:
        raise ValueError(f"FifteenPuzzleEnv: max_turns must be >= 1, got {settings.max_turns}")
    return settings
