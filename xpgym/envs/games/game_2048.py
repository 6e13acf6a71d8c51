r"""2048: slide and merge tiles on a square board until one reaches the target.

Episode rules:

* `reset()` places two tiles on an empty ``size`` x ``size`` board. Every new tile appears
  on an empty cell chosen uniformly with `np_random` and is a 2 (probability 0.9) or a 4
  (0.1). The observation states the rules, the target, the turn limit and the board
  (``.`` marks an empty cell).
* Every `step()` is one turn. The move is the **last** ``\boxed{...}`` of the action holding
  one of ``up``, ``down``, ``left``, ``right`` (case-insensitive, surrounding spaces
  ignored), e.g. ``\boxed{left}``.
* A move slides every tile as far as possible in that direction. Two equal tiles that meet
  merge into one tile of their sum; a merged tile does not merge again in the same move,
  and merging starts from the side the tiles move towards: sliding left, ``[2, 2, 2, 2]``
  becomes ``[4, 4, 0, 0]``, ``[2, 2, 4, 0]`` becomes ``[4, 4, 0, 0]`` and ``[2, 2, 2, 0]``
  becomes ``[4, 2, 0, 0]``. The score grows by the sum of the merged tiles.
* A move that changes nothing is invalid (the board stays, no tile is added). After a
  valid move one new tile appears.
* The episode terminates when a tile reaches ``target`` (won, ``correct=True``) or when no
  move can change the board (lost). If the last allowed turn (``turn == max_turns``) ends
  neither way, the episode is truncated (``terminated=False, truncated=True``).

Rewards, per turn (no shaping; the score is reported in ``info`` for those who want it):

==========================================================  =======  ======================
Action                                                      reward   ``info``
==========================================================  =======  ======================
valid move that makes a tile reach ``target``               ``1.0``  ``correct=True``
any other valid move (including one that loses the game)    ``0.0``
a move that changes nothing                                 ``-0.1`` ``invalid_action=True``
no ``\boxed{}``, or its content is not a direction          ``-0.1`` ``invalid_action=True``
==========================================================  =======  ======================

``info`` after every step: ``correct`` (bool), ``invalid_action`` (bool), ``parsed_action``
(the stripped text inside the last ``\boxed{}``, or `None`), ``turn`` (turns taken),
``score`` (sum of all merged tiles so far), ``merged`` (this move's share of it) and
``max_tile``.

Difficulty presets (`DIFFICULTIES`): ``"easy"`` is a 4x4 board with target 256 in 500
turns, ``"hard"`` a 4x4 board with target 2048 in 3000 turns; ``"random"`` draws easy or
hard with equal probability at every reset. Without a difficulty: 4x4, target 2048, 3000
turns. Each valid move adds about 2.2 to the tile sum, so reaching a target ``t`` takes at
least about ``t / 2.2`` valid moves (about 116 for 256 and 930 for 2048).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, NamedTuple

from xpgym.envs.common.presets import PresetEnv, override_preset, resolve_presets

__all__ = [
    "DIFFICULTIES",
    "DIRECTIONS",
    "INVALID_REWARD",
    "WIN_REWARD",
    "Game2048Env",
    "Settings",
    "legal_moves",
    "merge_line",
    "move_board",
    "parse_direction",
    "render_board",
]

WIN_REWARD = 1.0
INVALID_REWARD = -0.1
DIRECTIONS = ("up", "down", "left", "right")
"""The four moves, in the order `sample_random_action` indexes them."""
FOUR_PROBABILITY = 0.1
"""Probability that a new tile is a 4 rather than a 2."""

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


class Settings(NamedTuple):
    """One game: a `size` x `size` board, won at a `target` tile within `max_turns`."""

    size: int
    target: int
    max_turns: int


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(size=4, target=256, max_turns=500),
    "hard": Settings(size=4, target=2048, max_turns=3000),
}
"""Presets selected by `Game2048Env(difficulty=...)`."""

_DEFAULT = Settings(size=4, target=2048, max_turns=3000)


def merge_line(line: list[int]) -> tuple[list[int], int]:
    """Slide `line` towards index 0 and merge equal neighbours once.

    Returns:
        ``(new_line, merged)``: the line (same length, zeros at the end) and the sum of the
        tiles created by merging.
    """
    tiles = [v for v in line if v]
    out: list[int] = []
    merged = 0
    k = 0
    while k < len(tiles):
        if k + 1 < len(tiles) and tiles[k] == tiles[k + 1]:
            out.append(2 * tiles[k])
            merged += 2 * tiles[k]
            k += 2
        else:
            out.append(tiles[k])
            k += 1
    return out + [0] * (len(line) - len(out)), merged


def _lines(size: int, direction: str) -> list[list[int]]:
    """Cell indices of each line, ordered from the edge the tiles move towards."""
    rows = [[r * size + c for c in range(size)] for r in range(size)]
    cols = [[r * size + c for r in range(size)] for c in range(size)]
    return {
        "left": rows,
        "right": [row[::-1] for row in rows],
        "up": cols,
        "down": [col[::-1] for col in cols],
    }[direction]


_LINE_CACHE: dict[tuple[int, str], list[list[int]]] = {}


def move_board(board: list[int], size: int, direction: str) -> tuple[list[int], int]:
    """Apply one move to `board` (row-major, 0 = empty); `board` is not modified.

    Returns:
        ``(new_board, merged)``; `new_board == board` when the move changes nothing.
    """
    key = (size, direction)
    lines = _LINE_CACHE.get(key)
    if lines is None:
        lines = _LINE_CACHE[key] = _lines(size, direction)
    out = list(board)
    merged = 0
    for idx in lines:
        new, gained = merge_line([board[i] for i in idx])
        merged += gained
        for i, v in zip(idx, new, strict=True):
            out[i] = v
    return out, merged


def legal_moves(board: list[int], size: int) -> list[str]:
    """The directions (in `DIRECTIONS` order) that change `board`."""
    return [d for d in DIRECTIONS if move_board(board, size, d)[0] != board]


def parse_direction(action: str) -> tuple[str | None, str | None]:
    r"""Parse the direction in the last ``\boxed{}`` of `action`.

    Returns:
        ``(boxed, direction)``: `boxed` is the stripped content of the last ``\boxed{...}``
        (or `None`); `direction` is one of `DIRECTIONS`, or `None` if the content is not.
    """
    matches = _BOXED.findall(action)
    if not matches:
        return None, None
    boxed = matches[-1].strip()
    direction = boxed.lower()
    return boxed, direction if direction in DIRECTIONS else None


def render_board(board: list[int], size: int) -> str:
    """The board as right-aligned text rows, ``.`` for an empty cell."""
    width = max(4, max(len(str(v)) for v in board))
    return "\n".join(
        " ".join(
            (str(board[r * size + c]) if board[r * size + c] else ".").rjust(width)
            for c in range(size)
        )
        for r in range(size)
    )


def _turns(n: int) -> str:
    return "1 turn" if n == 1 else f"{n} turns"


class Game2048Env(PresetEnv[Settings]):
    r"""The sliding-tile game 2048; moves are ``\boxed{up|down|left|right}``.

    Args:
        size: Board side, 2 to 8.
        target: Tile that wins; a power of two, at least 8.
        max_turns: Turns before the episode is truncated (at least 1).
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"``. A preset from
            `DIFFICULTIES` gives the defaults; numbers passed explicitly replace the
            preset's (for ``"random"``, in both presets). Without a difficulty the defaults
            are 4x4 with target 2048 in 3000 turns.

    Attributes:
        size, target, max_turns: This episode's settings.
        episode_difficulty: This episode's preset name (`None` without a difficulty).
        board: Row-major list of ``size*size`` ints (0 = empty). score: Sum of merged
            tiles. turn: Turns taken.

    Raises:
        ValueError: unknown difficulty, size outside 2..8, target not a power of two >= 8,
            max_turns < 1.
        TypeError: a number is not an int.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(
        self,
        size: int | None = None,
        target: int | None = None,
        max_turns: int | None = None,
        difficulty: str | None = None,
    ) -> None:
        presets = resolve_presets(difficulty, DIFFICULTIES, _DEFAULT)
        super().__init__(
            difficulty,
            {name: _validated(preset, size, target, max_turns) for name, preset in presets.items()},
        )
        self.board = [0] * (self.size * self.size)
        self.score = 0
        self.turn = 0

    def _apply_preset(self, settings: Settings) -> None:
        self.size, self.target, self.max_turns = settings

    def _spawn(self) -> None:
        empty = [i for i, v in enumerate(self.board) if v == 0]
        cell = empty[int(self.np_random.integers(len(empty)))]
        self.board[cell] = 4 if self.np_random.random() < FOUR_PROBABILITY else 2

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start a new board with two tiles (for ``"random"``, first draw the preset).

        Returns:
            The instructions with the board, and info ``{"difficulty", "size", "target",
            "max_turns"}`` for this episode.
        """
        super().reset(seed=seed)
        self.board = [0] * (self.size * self.size)
        self.score = 0
        self.turn = 0
        self._spawn()
        self._spawn()
        n = self.size
        obs = (
            f"2048 on a {n}x{n} board: each turn, slide all tiles up, down, left or right. "
            "Two equal tiles that collide merge into their sum (each tile merges at most once "
            "per move). After every move that changes the board, a new 2 or 4 appears on an "
            f"empty cell. Reach a {self.target} tile to win; the game is lost when no move "
            f"changes the board. You have {_turns(self.max_turns)}. Put your move in "
            "\\boxed{}, e.g. \\boxed{left}; a move that changes nothing is rejected. Only the "
            "last \\boxed{} in your reply counts.\n\n" + render_board(self.board, n)
        )
        info = {
            "difficulty": self.episode_difficulty,
            "size": n,
            "target": self.target,
            "max_turns": self.max_turns,
        }
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take one turn; see the module docstring for the rules and rewards."""
        self.turn += 1
        boxed, direction = parse_direction(action)
        prefix = f"Turn {self.turn}/{self.max_turns}:"
        won = lost = invalid = False
        merged = 0
        reward = 0.0
        if direction is None:
            invalid = True
            reward = INVALID_REWARD
            what = "no \\boxed{} found" if boxed is None else f"{boxed!r:.40} is not a move"
            feedback = (
                f"{prefix} invalid move: {what}; answer \\boxed{{up}}, \\boxed{{down}}, "
                "\\boxed{left} or \\boxed{right}."
            )
        else:
            new_board, merged = move_board(self.board, self.size, direction)
            if new_board == self.board:
                invalid = True
                reward = INVALID_REWARD
                feedback = f"{prefix} invalid move: {direction} changes nothing."
            else:
                self.board = new_board
                self.score += merged
                self._spawn()
                feedback = f"{prefix} moved {direction}" + (
                    f", merged tiles worth {merged}." if merged else "."
                )
                if max(self.board) >= self.target:
                    won = True
                    reward = WIN_REWARD
                    feedback += f" You reached {self.target} and won!"
                elif not legal_moves(self.board, self.size):
                    lost = True
                    feedback += " No move can change the board: game over."
        terminated = won or lost
        truncated = not terminated and self.turn >= self.max_turns
        if truncated:
            feedback += " No turns left."
        elif not terminated:
            feedback += f" {_turns(self.max_turns - self.turn)} left."
        feedback += f" Score: {self.score}.\n\n" + render_board(self.board, self.size)
        info = {
            "correct": won,
            "invalid_action": invalid,
            "parsed_action": boxed,
            "turn": self.turn,
            "score": self.score,
            "merged": merged if not invalid else 0,
            "max_tile": max(self.board),
        }
        return feedback, reward, terminated, truncated, info

    def sample_random_action(self) -> str:
        r"""``\boxed{d}`` with `d` uniform over `DIRECTIONS`, drawn from `np_random`."""
        return f"\\boxed{{{DIRECTIONS[int(self.np_random.integers(len(DIRECTIONS)))]}}}"

    def _episode_state(self) -> dict[str, Any]:
        """For `get_state()`: board, score and turn (a fresh list)."""
        return {
            "board": list(self.board),
            "score": self.score,
            "turn": self.turn,
        }

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        """Restore what `_episode_state` took."""
        self.board = list(state["board"])
        self.score = state["score"]
        self.turn = state["turn"]


def _validated(
    preset: Settings, size: int | None, target: int | None, max_turns: int | None
) -> Settings:
    settings = override_preset(preset, (size, target, max_turns), "Game2048Env")
    if not 2 <= settings.size <= 8:
        raise ValueError(f"Game2048Env: size must be from 2 to 8, got {settings.size}")
    if settings.target < 8 or settings.target & (settings.target - 1):
        raise ValueError(f"Game2048Env: target must be a power of two >= 8, got {settings.target}")
    if settings.max_turns < 1:
        raise ValueError(f"Game2048Env: max_turns must be >= 1, got {settings.max_turns}")
    return settings
