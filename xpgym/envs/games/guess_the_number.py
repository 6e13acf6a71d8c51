r"""GuessTheNumber: find a hidden integer from higher/lower feedback.

Episode rules:

* `reset()` draws the target uniformly from ``min_number..max_number`` (both inclusive) with
  `np_random`. The observation states the range, the turn limit and the action format.
* Every `step()` is one turn, whatever the action holds. The guess is the integer inside the
  **last** ``\boxed{...}`` of the action: optional spaces, an optional ``+``/``-`` sign and
  ASCII digits, e.g. ``\boxed{12}``, ``\boxed{ -3 }``. Text around it is ignored.
* The episode terminates on a correct guess. If the last allowed turn
  (``turn == max_turns``) is not a correct guess, it is truncated (``terminated=False,
  truncated=True``) and the observation reveals the target.

Rewards, per turn:

=====================================================  =======  ======================
Action                                                 reward   ``info``
=====================================================  =======  ======================
correct guess                                          ``1.0``  ``correct=True``
valid wrong guess (observation: higher or lower)       ``0.0``
integer outside ``min_number..max_number``             ``-0.1`` ``invalid_action=True``
no ``\boxed{}``, or its content is not an integer      ``-0.1`` ``invalid_action=True``
=====================================================  =======  ======================

There is no shaping: a wrong guess earns nothing, so an episode's return is ``1.0`` minus
``0.1`` per invalid turn if the target is found, else ``-0.1`` per invalid turn. Reaching
the turn limit costs nothing extra. (GEM adds ``1 - distance/range`` at the limit and sets
both `terminated` and `truncated` there; this env does neither.)

``info`` after every step: ``correct`` (bool), ``invalid_action`` (bool), ``parsed_action``
(the stripped text inside the last ``\boxed{}``, or `None` when there is none), ``turn``
(turns taken, ``1..max_turns``) and ``state_key`` (also after `reset`;
`xpgym.core.env.STATE_KEY`). The observation is only the last feedback, so it does not say
what the player knows; the key does: the range the feedback so far leaves for the target
and the turns left, ``"<low>-<high>/<turns left>"``. Two episodes of a group (one target)
that narrowed the range alike, by whatever guesses, are in the same state.

Difficulty presets (`DIFFICULTIES`): ``"easy"`` is 1..10 in 4 turns, ``"hard"`` 1..50 in 7
turns; ``"random"`` draws easy or hard with equal probability at every reset. A binary
search needs at most ``floor(log2(n)) + 1`` turns for ``n`` numbers, which fits every preset.
"""

from __future__ import annotations

import functools
import re
from typing import Any, ClassVar, NamedTuple

from xpgym.core.env import STATE_KEY
from xpgym.envs.common.presets import PresetEnv, override_preset, resolve_presets

__all__ = [
    "CORRECT_REWARD",
    "DIFFICULTIES",
    "FORMAT_ERROR_REWARD",
    "OUT_OF_RANGE_REWARD",
    "WRONG_GUESS_REWARD",
    "GuessTheNumberEnv",
    "Settings",
    "parse_guess",
]

CORRECT_REWARD = 1.0
WRONG_GUESS_REWARD = 0.0
OUT_OF_RANGE_REWARD = -0.1
FORMAT_ERROR_REWARD = -0.1

# The last \boxed{...} whose content has no braces; the content is checked separately.
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_MAX_DIGITS = 30  # longer integers are out of range anyway; int() refuses > 4300 digits


class Settings(NamedTuple):
    """One game size: targets in ``min_number..max_number``, at most `max_turns` guesses."""

    min_number: int
    max_number: int
    max_turns: int


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(min_number=1, max_number=10, max_turns=4),
    "hard": Settings(min_number=1, max_number=50, max_turns=7),
}
"""Presets selected by `GuessTheNumberEnv(difficulty=...)`."""

_DEFAULT = Settings(min_number=1, max_number=20, max_turns=7)


def parse_guess(action: str) -> tuple[str | None, int | None]:
    r"""Parse the guess in `action`.

    Returns:
        ``(boxed, guess)``: `boxed` is the stripped content of the last ``\boxed{...}`` (or
        `None` if there is none); `guess` is its integer value, or `None` if the content is
        not an optionally signed ASCII integer.
    """
    matches = _BOXED.findall(action)
    if not matches:
        return None, None
    boxed = matches[-1].strip()
    # ASCII digits (the usual guess) are an integer without the regex.
    if not (boxed.isascii() and boxed.isdigit()) and not _INTEGER.fullmatch(boxed):
        return boxed, None
    if len(boxed) <= _MAX_DIGITS:  # a checked ASCII integer: int() reads it as is
        return boxed, int(boxed)
    sign = -1 if boxed[0] == "-" else 1
    digits = boxed.lstrip("+-").lstrip("0") or "0"
    if len(digits) > _MAX_DIGITS:  # still an integer, just far out of any range
        return boxed, sign * 10**_MAX_DIGITS
    return boxed, sign * int(digits)


def _turns(n: int) -> str:
    return "1 turn" if n == 1 else f"{n} turns"


@functools.lru_cache(maxsize=64)
def _instructions(lo: int, hi: int, max_turns: int) -> str:
    """The first observation of an episode (cached: it depends on the settings alone)."""
    return (
        f"Guess the number: I picked an integer from {lo} to {hi} (inclusive). You have "
        f"{_turns(max_turns)}. After each guess I tell you whether the number is "
        f"higher or lower. Put your guess in \\boxed{{}}, e.g. \\boxed{{{(lo + hi) // 2}}}; "
        "only the last \\boxed{} in your reply counts."
    )


@functools.lru_cache(maxsize=4096)
def _state_key(low: int, high: int, turns_left: int) -> str:
    """The state key: the range the feedback leaves for the target, and the turns left
    (cached: a game has few of them)."""
    return f"{low}-{high}/{turns_left}"


def _turn_text(feedback: str, turn: int, max_turns: int, target: int) -> str:
    """The observation after a turn that did not find the number:
    ``"Turn t/T: <feedback> <turns left, or the answer after the last turn>"``."""
    if turn >= max_turns:
        return f"Turn {turn}/{max_turns}: {feedback} No turns left; the number was {target}."
    return f"Turn {turn}/{max_turns}: {feedback} {_turns(max_turns - turn)} left."


@functools.lru_cache(maxsize=4096)
def _guess_feedback(guess: int, target: int, turn: int, max_turns: int) -> str:
    """The observation after an in-range guess (cached: it depends on these numbers alone)."""
    if guess == target:
        return f"Turn {turn}/{max_turns}: {guess} is correct! You found the number."
    direction = "higher" if target > guess else "lower"
    return _turn_text(f"the number is {direction} than {guess}.", turn, max_turns, target)


class GuessTheNumberEnv(PresetEnv[Settings]):
    r"""Find a hidden integer from higher/lower feedback; the guess goes in ``\boxed{}``.

    Args:
        min_number: Smallest possible target.
        max_number: Largest possible target (greater than `min_number`).
        max_turns: Turns before the episode is truncated (at least 1).
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"``. A preset from
            `DIFFICULTIES` gives the defaults for the three numbers; numbers passed
            explicitly replace the preset's (for ``"random"``, in both presets). Without a
            difficulty the defaults are 1..20 in 7 turns.

    Attributes:
        min_number, max_number, max_turns: This episode's settings (for ``"random"``, the
            preset drawn at the last reset; "easy" before the first).
        episode_difficulty: This episode's preset name (`None` without a difficulty).
        target: The hidden integer. turn: Turns taken in this episode. low, high: The range
            the feedback so far leaves for the target (the state key, module docstring).

    Raises:
        ValueError: unknown difficulty, ``min_number >= max_number`` or ``max_turns < 1``.
        TypeError: a number is not an int.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(
        self,
        min_number: int | None = None,
        max_number: int | None = None,
        max_turns: int | None = None,
        difficulty: str | None = None,
    ) -> None:
        presets = resolve_presets(difficulty, DIFFICULTIES, _DEFAULT)
        super().__init__(
            difficulty,
            {
                name: _validated(preset, min_number, max_number, max_turns)
                for name, preset in presets.items()
            },
        )
        self.target = self.min_number
        self.turn = 0
        self.low, self.high = self.min_number, self.max_number

    def _apply_preset(self, settings: Settings) -> None:
        self.min_number, self.max_number, self.max_turns = settings

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Draw a new target (and, for ``difficulty="random"``, first the preset).

        Returns:
            The instructions, and info ``{"difficulty", "min_number", "max_number",
            "max_turns"}`` for this episode.
        """
        super().reset(seed=seed)
        self.target = int(self.np_random.integers(self.min_number, self.max_number + 1))
        self.turn = 0
        lo, hi = self.min_number, self.max_number
        self.low, self.high = lo, hi
        max_turns = self.max_turns
        info = {
            "difficulty": self.episode_difficulty,
            "min_number": lo,
            "max_number": hi,
            "max_turns": max_turns,
            STATE_KEY: _state_key(lo, hi, max_turns),
        }
        return _instructions(lo, hi, max_turns), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take one turn; see the module docstring for the rules and rewards."""
        self.turn = turn = self.turn + 1
        boxed, guess = parse_guess(action)
        lo, hi, max_turns, target = self.min_number, self.max_number, self.max_turns, self.target
        correct = invalid = False
        if guess is None:
            invalid = True
            reward = FORMAT_ERROR_REWARD
            what = "no \\boxed{} found" if boxed is None else f"{boxed!r:.40} is not an integer"
            feedback = _turn_text(
                f"{what}; put your guess in \\boxed{{}}, e.g. \\boxed{{{(lo + hi) // 2}}}.",
                turn,
                max_turns,
                target,
            )
        elif not lo <= guess <= hi:
            invalid = True
            reward = OUT_OF_RANGE_REWARD
            feedback = _turn_text(
                f"{boxed:.40} is out of range; guess from {lo} to {hi}.", turn, max_turns, target
            )
        else:
            correct = guess == target
            reward = CORRECT_REWARD if correct else WRONG_GUESS_REWARD
            if target > guess >= self.low:  # the feedback raises the lower bound
                self.low = guess + 1
            elif target < guess <= self.high:  # or lowers the upper one
                self.high = guess - 1
            feedback = _guess_feedback(guess, target, turn, max_turns)
        truncated = not correct and turn >= max_turns
        info = {
            "correct": correct,
            "invalid_action": invalid,
            "parsed_action": boxed,
            "turn": turn,
            STATE_KEY: _state_key(self.low, self.high, max_turns - turn),
        }
        return feedback, reward, correct, truncated, info

    def sample_random_action(self) -> str:
        r"""``\boxed{k}`` with `k` uniform over this episode's range, drawn from `np_random`."""
        return f"\\boxed{{{int(self.np_random.integers(self.min_number, self.max_number + 1))}}}"

    def _episode_state(self) -> dict[str, Any]:
        """For `get_state()`: target, turn and the range the feedback left."""
        return {
            "target": self.target,
            "turn": self.turn,
            "low": self.low,
            "high": self.high,
        }

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        """Restore what `_episode_state` took."""
        self.target = state["target"]
        self.turn = state["turn"]
        self.low = state["low"]
        self.high = state["high"]


def _validated(
    preset: Settings, min_number: int | None, max_number: int | None, max_turns: int | None
) -> Settings:
    settings = override_preset(preset, (min_number, max_number, max_turns), "GuessTheNumberEnv")
    if settings.min_number >= settings.max_number:
        raise ValueError(
            f"GuessTheNumberEnv: min_number ({settings.min_number}) must be less than "
            f"max_number ({settings.max_number})"
        )
    if settings.max_turns < 1:
        raise ValueError(f"GuessTheNumberEnv: max_turns must be >= 1, got {settings.max_turns}")
    return settings
