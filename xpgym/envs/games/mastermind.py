r"""Mastermind: crack a hidden code of coloured pegs from black/white-peg feedback.

Episode rules:

* `reset()` draws a secret code of `code_length` pegs, each a colour ``1..num_colors``
  drawn independently and uniformly with `np_random` (repeated colours are allowed).
* Every `step()` is one turn, whatever the action holds. The guess is the content of the
  **last** ``\boxed{...}`` of the action: `code_length` digits, each ``1..num_colors``,
  separated by spaces and/or commas, e.g. ``\boxed{1 3 5 2}`` or ``\boxed{1,3,5,2}``; the
  digits may also be written together, ``\boxed{1352}``. Text around the box is ignored.
* The feedback for a valid guess is the number of **black** pegs (right colour in the right
  position) and **white** pegs (right colour in a wrong position, counting each secret peg
  at most once), as in the classic game.
* The episode terminates when the guess equals the code. If the last allowed turn
  (``turn == max_turns``) is not a correct guess, it is truncated (``terminated=False,
  truncated=True``) and the observation reveals the code.

Rewards, per turn:

======================================================  =======  ======================
Action                                                  reward   ``info``
======================================================  =======  ======================
correct guess                                           ``1.0``  ``correct=True``
valid wrong guess (observation: black and white pegs)   ``0.0``
no ``\boxed{}``, wrong number of pegs, a peg that is    ``-0.1`` ``invalid_action=True``
not a digit in ``1..num_colors``
======================================================  =======  ======================

There is no shaping (black/white pegs are information, not reward): a solved episode returns
``1.0`` minus ``0.1`` per invalid turn. Reaching the turn limit costs nothing extra.

The observation after each step repeats the whole guess history (one line per valid guess
with its pegs) and the turns left, so the model needs no memory of earlier observations.

``info`` after every step: ``correct`` (bool), ``invalid_action`` (bool), ``parsed_action``
(the stripped text inside the last ``\boxed{}``, or `None`), ``turn`` (``1..max_turns``),
``black`` and ``white`` (ints, `None` for an invalid guess).

Difficulty presets (`DIFFICULTIES`): ``"easy"`` is 3 pegs of 6 colours in 8 turns,
``"hard"`` 5 pegs of 8 colours in 12 turns; ``"random"`` draws one of the two at every reset.
Without a difficulty: classic 4 pegs of 6 colours in 10 turns. A solver that always guesses
a code consistent with all feedback so far wins every preset within its limit on the seeds
tested.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, NamedTuple

from xpgym.envs.common.presets import PresetEnv, override_preset, resolve_presets

__all__ = [
    "CORRECT_REWARD",
    "DIFFICULTIES",
    "INVALID_REWARD",
    "WRONG_GUESS_REWARD",
    "MastermindEnv",
    "Settings",
    "parse_code",
    "score_guess",
]

CORRECT_REWARD = 1.0
WRONG_GUESS_REWARD = 0.0
INVALID_REWARD = -0.1

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_SEPARATORS = re.compile(r"[\s,]+")


class Settings(NamedTuple):
    """One game size: `code_length` pegs of ``1..num_colors``, at most `max_turns` guesses."""

    code_length: int
    num_colors: int
    max_turns: int


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(code_length=3, num_colors=6, max_turns=8),
    "hard": Settings(code_length=5, num_colors=8, max_turns=12),
}
"""Presets selected by `MastermindEnv(difficulty=...)`."""

_DEFAULT = Settings(code_length=4, num_colors=6, max_turns=10)


def parse_code(action: str, code_length: int, num_colors: int) -> tuple[str | None, Any]:
    r"""Parse the code in `action`.

    Returns:
        ``(boxed, result)``: `boxed` is the stripped content of the last ``\boxed{...}`` (or
        `None`); `result` is the guess as a tuple of ints when valid, else a short `str`
        saying why it is not (also when `boxed` is `None`). Never raises.
    """
    matches = _BOXED.findall(action)
    if not matches:
        return None, "no \\boxed{} found"
    boxed = matches[-1].strip()
    tokens = [t for t in _SEPARATORS.split(boxed) if t]
    if len(tokens) == 1 and len(tokens[0]) == code_length:
        tokens = list(tokens[0])
    if len(tokens) != code_length:
        return boxed, f"the code has {code_length} pegs, got {len(tokens)}"
    pegs = []
    for token in tokens:
        if len(token) != 1 or not "1" <= token <= str(num_colors):
            return boxed, f"each peg is a digit from 1 to {num_colors}, got {token[:10]!r}"
        pegs.append(ord(token) - 48)
    return boxed, tuple(pegs)


def score_guess(secret: tuple[int, ...], guess: tuple[int, ...]) -> tuple[int, int]:
    """Return ``(black, white)``: exact matches, and colour matches in other positions."""
    black = 0
    secret_rest: dict[int, int] = {}
    guess_rest: dict[int, int] = {}
    for s, g in zip(secret, guess, strict=True):
        if s == g:
            black += 1
        else:
            secret_rest[s] = secret_rest.get(s, 0) + 1
            guess_rest[g] = guess_rest.get(g, 0) + 1
    white = sum(min(n, secret_rest.get(c, 0)) for c, n in guess_rest.items())
    return black, white


def _turns(n: int) -> str:
    return "1 turn" if n == 1 else f"{n} turns"


def _code_text(code: tuple[int, ...]) -> str:
    return " ".join(map(str, code))


class MastermindEnv(PresetEnv[Settings]):
    r"""Guess a hidden code from black/white-peg feedback; the guess goes in ``\boxed{}``.

    Args:
        code_length: Pegs in the code (1..10).
        num_colors: Colours ``1..num_colors`` (2..9, one digit each).
        max_turns: Turns before the episode is truncated (at least 1).
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"``. A preset from
            `DIFFICULTIES` gives the defaults; numbers passed explicitly replace the preset's
            (for ``"random"``, in both presets). Without one: 4 pegs, 6 colours, 10 turns.

    Attributes:
        code_length, num_colors, max_turns: This episode's settings.
        episode_difficulty: This episode's preset name (`None` without a difficulty).
        secret: The hidden code (tuple of ints). turn: Turns taken.
        history: ``(guess, black, white)`` for every valid guess of this episode.

    Raises:
        ValueError: unknown difficulty or a number out of its range. TypeError: not an int.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(
        self,
        code_length: int | None = None,
        num_colors: int | None = None,
        max_turns: int | None = None,
        difficulty: str | None = None,
    ) -> None:
        presets = resolve_presets(difficulty, DIFFICULTIES, _DEFAULT)
        super().__init__(
            difficulty,
            {
                name: _validated(preset, code_length, num_colors, max_turns)
                for name, preset in presets.items()
            },
        )
        self.secret: tuple[int, ...] = (1,) * self.code_length
        self.turn = 0
        self.history: list[tuple[tuple[int, ...], int, int]] = []

    def _apply_preset(self, settings: Settings) -> None:
        self.code_length, self.num_colors, self.max_turns = settings

    def _example(self) -> str:
        return "\\boxed{" + _code_text(tuple(range(1, self.code_length + 1))) + "}"

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Draw a new code (and, for ``difficulty="random"``, first the preset).

        Returns:
            The instructions, and info ``{"difficulty", "code_length", "num_colors",
            "max_turns"}``.
        """
        super().reset(seed=seed)
        draws = self.np_random.integers(1, self.num_colors + 1, size=self.code_length)
        self.secret = tuple(int(x) for x in draws)
        self.turn = 0
        self.history = []
        obs = (
            f"Mastermind: I picked a secret code of {self.code_length} pegs, each a colour "
            f"from 1 to {self.num_colors} (colours may repeat). You have "
            f"{_turns(self.max_turns)}. After each guess I tell you how many pegs are black "
            "(right colour, right position) and white (right colour, wrong position). Put your "
            f"guess in \\boxed{{}} as {self.code_length} digits separated by spaces, e.g. "
            f"{self._example()}; only the last \\boxed{{}} in your reply counts."
        )
        info = {
            "difficulty": self.episode_difficulty,
            "code_length": self.code_length,
            "num_colors": self.num_colors,
            "max_turns": self.max_turns,
        }
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take one turn; see the module docstring for the rules and rewards."""
        self.turn += 1
        boxed, result = parse_code(action, self.code_length, self.num_colors)
        prefix = f"Turn {self.turn}/{self.max_turns}:"
        correct = invalid = False
        black = white = None
        if isinstance(result, str):
            invalid = True
            reward = INVALID_REWARD
            feedback = f"{prefix} invalid guess ({result}); write e.g. {self._example()}."
        else:
            black, white = score_guess(self.secret, result)
            self.history.append((result, black, white))
            if black == self.code_length:
                correct = True
                reward = CORRECT_REWARD
                feedback = f"{prefix} {_code_text(result)} is correct! You cracked the code."
            else:
                reward = WRONG_GUESS_REWARD
                feedback = f"{prefix} {_code_text(result)} -> {black} black, {white} white."
        truncated = not correct and self.turn >= self.max_turns
        if not correct and self.history:
            lines = "\n".join(
                f"  {i}. {_code_text(g)} -> {b} black, {w} white"
                for i, (g, b, w) in enumerate(self.history, 1)
            )
            feedback += f"\nGuesses so far:\n{lines}"
        if truncated:
            feedback += f"\nNo turns left; the code was {_code_text(self.secret)}."
        elif not correct:
            feedback += f"\n{_turns(self.max_turns - self.turn)} left."
        info = {
            "correct": correct,
            "invalid_action": invalid,
            "parsed_action": boxed,
            "turn": self.turn,
            "black": black,
            "white": white,
        }
        return feedback, reward, correct, truncated, info

    def sample_random_action(self) -> str:
        r"""``\boxed{...}`` with a uniformly random code, drawn from `np_random`."""
        code = self.np_random.integers(1, self.num_colors + 1, size=self.code_length)
        return "\\boxed{" + " ".join(str(int(x)) for x in code) + "}"

    def _episode_state(self) -> dict[str, Any]:
        """For `get_state()`: code, turn and history (a fresh list)."""
        return {
            "secret": self.secret,
            "turn": self.turn,
            "history": list(self.history),  # entries are immutable tuples
        }

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        """Restore what `_episode_state` took."""
        self.secret = tuple(state["secret"])
        self.turn = state["turn"]
        self.history = list(state["history"])


def _validated(
    preset: Settings, code_length: int | None, num_colors: int | None, max_turns: int | None
) -> Settings:
    settings = override_preset(preset, (code_length, num_colors, max_turns), "MastermindEnv")
    if not 1 <= settings.code_length <= 10:
        raise ValueError(f"MastermindEnv: code_length must be 1..10, got {settings.code_length}")
    if not 2 <= settings.num_colors <= 9:
        raise ValueError(f"MastermindEnv: num_colors must be 2..9, got {settings.num_colors}")
    if settings.max_turns < 1:
        raise ValueError(f"MastermindEnv: max_turns must be >= 1, got {settings.max_turns}")
    return settings
