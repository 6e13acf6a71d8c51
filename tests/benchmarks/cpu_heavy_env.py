r"""A CPU-heavy text env for benchmarks: `LatinSquareEnv`, whose `reset` generates a puzzle.

It stands in for envs like GEM's Sudoku, whose `reset` costs about 374 us of pure Python
on the benchmark machine, and is what the process backend is for. Import it as
``cpu_heavy_env`` (pytest puts ``tests/benchmarks`` on ``sys.path``; `scripts/bench_vs_gem.py`
does too); the class is module-level, so it pickles by reference into worker processes.

Rules:

* `reset()` builds a random `size` x `size` Latin square (every row and every column holds
  ``1..size`` once) by depth-first backtracking: cells are filled in row-major order, each
  cell trying the values of a fresh ``np_random.permutation`` until one fits, and
  backtracking to the previous cell when none does. The square is then validated (every
  row and column is a permutation; `AssertionError` otherwise) and `holes` distinct cells,
  drawn with `np_random`, are blanked. With the default ``size=8`` a reset takes about
  300-500 us here (mean about 380 us over 5,000 resets; p99 about 0.8 ms). All
  randomness comes from `np_random`, so ``reset(seed=s)`` is reproducible.
* `step(action)`: the action is ``\boxed{row col value}`` (1-based). Filling a blank cell
  with its solution value earns ``1.0`` and reveals the cell; anything else earns ``0.0``
  (``-0.1`` if the action does not parse). The episode terminates when every blank is
  filled and is truncated after `max_turns` steps. Steps are cheap (a regex and a board
  rendering of a few microseconds), so with the defaults the reset dominates the cost per
  step, as in GEM's ``game:Sudoku-v0-easy`` (15 turns, reset about 25 us per step).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import xpgym
from xpgym.core.env import Env

__all__ = ["ENV_ID", "LatinSquareEnv", "generate_latin_square", "register"]

ENV_ID = "bench:LatinSquare-v0"
"""The id `register` gives `LatinSquareEnv` (defaults: size 8, 10 holes, 15 turns)."""

_ACTION = re.compile(r"\\boxed\{\s*(\d+)\s+(\d+)\s+(\d+)\s*\}")


def generate_latin_square(rng: Any, size: int) -> list[list[int]]:
    """A random `size` x `size` Latin square over ``1..size``, by backtracking.

    Args:
        rng: A `numpy.random.Generator` (the env's `np_random`).
        size: Side length.

    Returns:
        The rows, each a list of ints.
    """
    grid = [[0] * size for _ in range(size)]
    in_row = [set() for _ in range(size)]
    in_col = [set() for _ in range(size)]
    candidates: list[list[int] | None] = [None] * (size * size)
    pos = 0
    while pos < size * size:
        r, c = divmod(pos, size)
        if candidates[pos] is None:
            candidates[pos] = [int(v) + 1 for v in rng.permutation(size)]
        options = candidates[pos]
        assert options is not None
        while options:
            value = options.pop()
            if value not in in_row[r] and value not in in_col[c]:
                grid[r][c] = value
                in_row[r].add(value)
                in_col[c].add(value)
                pos += 1
                break
        else:  # no value fits: undo the previous cell and try its next candidate
            candidates[pos] = None
            pos -= 1
            r, c = divmod(pos, size)
            value = grid[r][c]
            in_row[r].discard(value)
            in_col[c].discard(value)
            grid[r][c] = 0
    return grid


def _validate(grid: list[list[int]], size: int) -> None:
    full = set(range(1, size + 1))
    for i in range(size):
        assert set(grid[i]) == full, f"row {i} is not a permutation: {grid[i]}"
        assert {row[i] for row in grid} == full, f"column {i} is not a permutation"


class LatinSquareEnv(Env[str]):
    r"""Fill the blanks of a random Latin square; `reset` is CPU-heavy (see module docstring).

    Args:
        size: Side of the square (default 8: a reset costs about 380 us).
        holes: Cells blanked at reset.
        max_turns: Steps before truncation.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(self, size: int = 8, holes: int = 10, max_turns: int = 15) -> None:
        if not 0 < holes <= size * size:
            raise ValueError(f"holes must be in 1..{size * size}, got {holes}")
        self.size = size
        self.holes = holes
        self.max_turns = max_turns
        self.solution: list[list[int]] = []
        self.board: list[list[int]] = []
        self.turn = 0

    def _render(self) -> str:
        return "\n".join(" ".join(str(v) if v else "." for v in row) for row in self.board)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Generate, validate and blank a new square; the observation is the board."""
        super().reset(seed=seed)
        n = self.size
        self.solution = generate_latin_square(self.np_random, n)
        _validate(self.solution, n)
        self.board = [row[:] for row in self.solution]
        for cell in self.np_random.choice(n * n, size=self.holes, replace=False):
            r, c = divmod(int(cell), n)
            self.board[r][c] = 0
        self.turn = 0
        return self._render(), {"holes": self.holes}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        r"""Fill one cell given as ``\boxed{row col value}``."""
        self.turn += 1
        match = _ACTION.search(action)
        reward, invalid = 0.0, match is None
        if match is None:
            reward = -0.1
        else:
            r, c, v = (int(g) - 1 for g in match.groups())
            n = self.size
            if 0 <= r < n and 0 <= c < n and self.board[r][c] == 0 and self.solution[r][c] == v + 1:
                self.board[r][c] = v + 1
                reward = 1.0
        solved = all(all(row) for row in self.board)
        truncated = not solved and self.turn >= self.max_turns
        info = {"invalid_action": invalid, "correct": reward > 0, "turn": self.turn}
        return self._render(), reward, solved, truncated, info

    def sample_random_action(self) -> str:
        r"""``\boxed{r c v}`` with each number uniform over ``1..size``."""
        r, c, v = (int(x) for x in self.np_random.integers(1, self.size + 1, size=3))
        return f"\\boxed{{{r} {c} {v}}}"

    def get_state(self) -> dict[str, Any]:
        """Snapshot of the board, solution, turn and RNG state."""
        return {
            "solution": [row[:] for row in self.solution],
            "board": [row[:] for row in self.board],
            "turn": self.turn,
            "rng": self.np_random.bit_generator.state,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a `get_state` snapshot."""
        self.solution = [row[:] for row in state["solution"]]
        self.board = [row[:] for row in state["board"]]
        self.turn = state["turn"]
        self.np_random.bit_generator.state = state["rng"]


def register() -> str:
    """Register `LatinSquareEnv` as `ENV_ID` (idempotent); return the id."""
    xpgym.register(
        ENV_ID,
        LatinSquareEnv,
        override=True,
        description="Benchmark env: fill a random 8x8 Latin square; reset costs ~380 us.",
    )
    return ENV_ID
