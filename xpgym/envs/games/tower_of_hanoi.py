r"""Tower of Hanoi: move a stack of disks from peg A to peg C, one disk at a time.

Episode rules:

* `reset()` puts `num_disks` disks on peg A, largest (``num_disks``) at the bottom, smallest
  (``1``) on top; pegs B and C are empty. The start is always the same, so the episode uses
  no randomness (``difficulty="random"`` still draws its preset from `np_random`).
* Every `step()` is one turn, whatever the action holds. The move is the content of the
  **last** ``\boxed{...}`` of the action: a source peg and a target peg, letters ``A``, ``B``
  or ``C`` (either case), e.g. ``\boxed{A C}``; ``\boxed{AC}``, ``\boxed{A,C}``,
  ``\boxed{A->C}`` and ``\boxed{A to C}`` are read the same. It moves the top disk of the
  source peg onto the target peg. Text around the box is ignored.
* A move is illegal when the source peg is empty, source and target are the same peg, or
  the disk would land on a smaller one; an illegal or unparsable move changes nothing.
* The episode terminates when all disks are on peg C. If the last allowed turn
  (``turn == max_turns``) does not solve it, it is truncated (``terminated=False,
  truncated=True``).

Rewards, per turn:

=================================================  =======  ======================
Action                                             reward   ``info``
=================================================  =======  ======================
legal move that completes the tower on peg C       ``1.0``  ``correct=True``
other legal move                                   ``0.0``
illegal move (empty source, same peg, big on       ``-0.1`` ``invalid_action=True``
small), no ``\boxed{}``, or unparsable content
=================================================  =======  ======================

There is no shaping: solving returns ``1.0`` minus ``0.1`` per invalid turn, whatever the
number of legal moves (the optimum is ``2**num_disks - 1``; the turn limit is twice that).

The observation after each step shows every peg bottom to top, the moves made and the turns
left. ``info`` after every step: ``correct`` (bool), ``invalid_action`` (bool),
``parsed_action`` (the stripped text inside the last ``\boxed{}``, or `None`), ``turn``
(``1..max_turns``) and ``moves`` (legal moves made so far).

Difficulty presets (`DIFFICULTIES`): ``"easy"`` is 3 disks in 14 turns, ``"hard"`` 5 disks in
62 turns; ``"random"`` draws one of the two at every reset. Without a difficulty: 4 disks in
30 turns.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, NamedTuple

from xpgym.envs.common.presets import PresetEnv, override_preset, resolve_presets

__all__ = [
    "DIFFICULTIES",
    "INVALID_REWARD",
    "MOVE_REWARD",
    "PEGS",
    "SOLVED_REWARD",
    "Settings",
    "TowerOfHanoiEnv",
    "parse_move",
]

SOLVED_REWARD = 1.0
MOVE_REWARD = 0.0
INVALID_REWARD = -0.1
PEGS = "ABC"

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_MOVE = re.compile(r"([ABC])\s*(?:,|->|→|to|\s)?\s*([ABC])", re.IGNORECASE)


class Settings(NamedTuple):
    """One game size: `num_disks` disks, at most `max_turns` turns."""

    num_disks: int
    max_turns: int


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(num_disks=3, max_turns=14),
    "hard": Settings(num_disks=5, max_turns=62),
}
"""Presets selected by `TowerOfHanoiEnv(difficulty=...)`."""

_DEFAULT = Settings(num_disks=4, max_turns=30)


def parse_move(action: str) -> tuple[str | None, tuple[int, int] | None]:
    r"""Parse the move in `action`.

    Returns:
        ``(boxed, move)``: `boxed` is the stripped content of the last ``\boxed{...}`` (or
        `None`); `move` is ``(source, target)`` as peg indices 0..2 (A..C), or `None` if the
        content is not two peg letters. Never raises.
    """
    matches = _BOXED.findall(action)
    if not matches:
        return None, None
    boxed = matches[-1].strip()
    found = _MOVE.fullmatch(boxed)
    if found is None:
        return boxed, None
    return boxed, (PEGS.index(found[1].upper()), PEGS.index(found[2].upper()))


def _turns(n: int) -> str:
    return "1 turn" if n == 1 else f"{n} turns"


class TowerOfHanoiEnv(PresetEnv[Settings]):
    r"""Move the tower from peg A to peg C; each move ``\boxed{A C}`` goes in ``\boxed{}``.

    Args:
        num_disks: Disks in the tower (1..12).
        max_turns: Turns before the episode is truncated (at least 1).
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"``. A preset from
            `DIFFICULTIES` gives the defaults; numbers passed explicitly replace the preset's.
            Without one: 4 disks in 30 turns.

    Attributes:
        num_disks, max_turns: This episode's settings.
        episode_difficulty: This episode's preset name (`None` without a difficulty).
        pegs: Three lists of disk sizes, bottom to top. turn: Turns taken. moves: Legal moves.

    Raises:
        ValueError: unknown difficulty or a number out of its range. TypeError: not an int.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(
        self,
        num_disks: int | None = None,
        max_turns: int | None = None,
        difficulty: str | None = None,
    ) -> None:
        presets = resolve_presets(difficulty, DIFFICULTIES, _DEFAULT)
        super().__init__(
            difficulty,
            {name: _validated(preset, num_disks, max_turns) for name, preset in presets.items()},
        )
        self.pegs: list[list[int]] = [list(range(self.num_disks, 0, -1)), [], []]
        self.turn = 0
        self.moves = 0

    def _apply_preset(self, settings: Settings) -> None:
        self.num_disks, self.max_turns = settings

    def _board(self) -> str:
        return "\n".join(
            f"  {name}: " + (" ".join(map(str, peg)) if peg else "(empty)")
            for name, peg in zip(PEGS, self.pegs, strict=True)
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Stack the tower on peg A (for ``difficulty="random"``, first draw the preset).

        Returns:
            The instructions and board, and info ``{"difficulty", "num_disks", "max_turns"}``.
        """
        super().reset(seed=seed)
        self.pegs = [list(range(self.num_disks, 0, -1)), [], []]
        self.turn = 0
        self.moves = 0
        obs = (
            f"Tower of Hanoi: move all {self.num_disks} disks from peg A to peg C. Move one "
            "disk at a time, the top disk of a peg, and never put a disk on a smaller one. "
            f"You have {_turns(self.max_turns)}. Write each move as the source and target peg "
            "in \\boxed{}, e.g. \\boxed{A C}; only the last \\boxed{} in your reply counts.\n"
            f"Pegs (bottom to top, disk 1 is the smallest):\n{self._board()}"
        )
        info = {
            "difficulty": self.episode_difficulty,
            "num_disks": self.num_disks,
            "max_turns": self.max_turns,
        }
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take one turn; see the module docstring for the rules and rewards."""
        self.turn += 1
        boxed, move = parse_move(action)
        prefix = f"Turn {self.turn}/{self.max_turns}:"
        correct = invalid = False
        problem = None
        if move is None:
            problem = (
                "no \\boxed{} found"
                if boxed is None
                else f"{boxed!r:.40} is not a move like \\boxed{{A C}}"
            )
        else:
            source, target = self.pegs[move[0]], self.pegs[move[1]]
            src, dst = PEGS[move[0]], PEGS[move[1]]
            if move[0] == move[1]:
                problem = f"source and target are both peg {src}"
            elif not source:
                problem = f"peg {src} is empty"
            elif target and target[-1] < source[-1]:
                problem = f"disk {source[-1]} cannot go on the smaller disk {target[-1]}"
        if problem is not None:
            invalid = True
            reward = INVALID_REWARD
            feedback = f"{prefix} illegal move: {problem}; nothing moved."
        else:
            disk = source.pop()
            target.append(disk)
            self.moves += 1
            correct = len(self.pegs[2]) == self.num_disks
            reward = SOLVED_REWARD if correct else MOVE_REWARD
            feedback = f"{prefix} moved disk {disk} from {src} to {dst}."
            if correct:
                feedback += f" Solved in {self.moves} moves!"
        feedback += f"\nPegs (bottom to top):\n{self._board()}"
        truncated = not correct and self.turn >= self.max_turns
        if truncated:
            feedback += "\nNo turns left."
        elif not correct:
            feedback += f"\n{_turns(self.max_turns - self.turn)} left."
        info = {
            "correct": correct,
            "invalid_action": invalid,
            "parsed_action": boxed,
            "turn": self.turn,
            "moves": self.moves,
        }
        return feedback, reward, correct, truncated, info

    def sample_random_action(self) -> str:
        r"""``\boxed{X Y}`` with two distinct pegs drawn from `np_random` (may be illegal)."""
        source = int(self.np_random.integers(3))
        target = (source + 1 + int(self.np_random.integers(2))) % 3
        return f"\\boxed{{{PEGS[source]} {PEGS[target]}}}"

    def _episode_state(self) -> dict[str, Any]:
        """For `get_state()`: pegs and counters (fresh lists)."""
        return {
            "pegs": [list(peg) for peg in self.pegs],
            "turn": self.turn,
            "moves": self.moves,
        }

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        """Restore what `_episode_state` took."""
        self.pegs = [list(peg) for peg in state["pegs"]]
        self.turn = state["turn"]
        self.moves = state["moves"]


def _validated(preset: Settings, num_disks: int | None, max_turns: int | None) -> Settings:
    settings = override_preset(preset, (num_disks, max_turns), "TowerOfHanoiEnv")
    if not 1 <= settings.num_disks <= 12:
        raise ValueError(f"TowerOfHanoiEnv: num_disks must be 1..12, got {settings.num_disks}")
    if settings.max_turns < 1:
        raise ValueError(f"TowerOfHanoiEnv: max_turns must be >= 1, got {settings.max_turns}")
    return settings
