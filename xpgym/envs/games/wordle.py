r"""Wordle: find a hidden word from per-letter feedback.

Episode rules:

* `reset()` draws the secret uniformly (with `np_random`) from the words of ``word_length``
  letters in the word list (by default the shipped ``xpgym/data/words_en.jsonl``). The
  observation states the length, the turn limit, the feedback notation and the action
  format.
* Every `step()` is one turn, whatever the action holds. The guess is the content of the
  **last** ``\boxed{...}`` of the action, stripped and lower-cased, e.g. ``\boxed{crane}``
  or ``\boxed{ CRANE }``. It must be exactly ``word_length`` ASCII letters. Any such string
  is accepted: it need not be in the word list (the shipped list is small).
* Feedback is one symbol per letter, written under the guess:

  * ``G`` (green): the letter is in the word at this position;
  * ``Y`` (yellow): the letter is in the word, but elsewhere;
  * ``_`` (gray): the letter is not in the word, or not that many times.

  Duplicate letters follow the official rules: greens are marked first; then, from left to
  right, a letter is yellow only while the secret still has copies of it that were not
  matched by a green or an earlier yellow. E.g. secret ``apple``, guess ``paper`` gives
  ``YYGY_``; secret ``those``, guess ``geese`` gives ``___GG`` (the one ``e`` of
  ``those`` is matched by the green, so the other two ``e`` are gray). See `feedback`.
* The episode terminates on a correct guess. If the last allowed turn
  (``turn == max_turns``) is not a correct guess, it is truncated (``terminated=False,
  truncated=True``) and the observation reveals the word.

Rewards, per turn:

=====================================================  =======  ======================
Action                                                 reward   ``info``
=====================================================  =======  ======================
correct guess                                          ``1.0``  ``correct=True``
valid wrong guess (observation: the feedback)          ``0.0``
a word already guessed this episode                    ``-0.1`` ``invalid_action=True``
wrong length, or not only ASCII letters                ``-0.1`` ``invalid_action=True``
no ``\boxed{}``                                        ``-0.1`` ``invalid_action=True``
=====================================================  =======  ======================

There is no shaping: the return is ``1.0`` if the word is found, minus ``0.1`` per invalid
turn. Invalid turns still use up a turn and give no feedback. Reaching the turn limit costs
nothing extra.

``info`` after every step: ``correct`` (bool), ``invalid_action`` (bool), ``parsed_action``
(the stripped, lower-cased text in the last ``\boxed{}``, or `None`), ``turn`` (turns
taken, ``1..max_turns``) and ``feedback`` (the ``G``/``Y``/``_`` string of a valid guess,
else `None`).

Difficulty presets (`DIFFICULTIES`): ``"easy"`` is 4-letter words in 8 turns, ``"hard"``
6-letter words in 6 turns; ``"random"`` draws easy or hard with equal probability at every
reset. Without a difficulty: 5-letter words in 6 turns (the classic game).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from importlib import resources
from typing import Any, ClassVar, NamedTuple

from xpgym.envs.common.presets import PresetEnv, override_preset, resolve_presets

__all__ = [
    "CORRECT_REWARD",
    "DIFFICULTIES",
    "INVALID_REWARD",
    "WRONG_GUESS_REWARD",
    "Settings",
    "WordleEnv",
    "feedback",
    "load_words",
]

CORRECT_REWARD = 1.0
WRONG_GUESS_REWARD = 0.0
INVALID_REWARD = -0.1

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_LETTERS = re.compile(r"[a-z]+")


@functools.lru_cache(maxsize=1)
def _shipped_words() -> tuple[str, ...]:
    path = resources.files("xpgym.data").joinpath("words_en.jsonl")
    with path.open("r", encoding="utf-8") as file:
        return tuple(json.loads(line)["word"] for line in file if line.strip())


def load_words(length: int | None = None) -> tuple[str, ...]:
    """The shipped English word list (lower-case ASCII, 4 to 8 letters), sorted.

    Args:
        length: If given, only the words of this many letters.
    """
    words = _shipped_words()
    return words if length is None else tuple(w for w in words if len(w) == length)


def checked_words(words: Iterable[str] | None, owner: str) -> tuple[str, ...]:
    """`words` as a tuple, or the shipped list (`load_words`) when `None`.

    Raises:
        ValueError: a word is not lower-case ASCII letters, naming `owner` (the env).
    """
    checked = load_words() if words is None else tuple(words)
    for word in checked:
        if not isinstance(word, str) or not _LETTERS.fullmatch(word):
            raise ValueError(f"{owner}: words must be lower-case ASCII, got {word!r}")
    return checked


def feedback(guess: str, secret: str) -> str:
    """Wordle feedback of `guess` against `secret` (same length), e.g. ``"G_Y__"``.

    ``G``: right letter, right place. ``Y``: the letter occurs elsewhere in `secret` and
    not all its copies are already accounted for by greens or by yellows further left.
    ``_``: otherwise.
    """
    marks = ["_"] * len(guess)
    remaining: dict[str, int] = {}
    for i, (g, s) in enumerate(zip(guess, secret, strict=True)):
        if g == s:
            marks[i] = "G"
        else:
            remaining[s] = remaining.get(s, 0) + 1
    for i, g in enumerate(guess):
        if marks[i] != "G" and remaining.get(g, 0) > 0:
            marks[i] = "Y"
            remaining[g] -= 1
    return "".join(marks)


class Settings(NamedTuple):
    """One game size: secrets of `word_length` letters, at most `max_turns` guesses."""

    word_length: int
    max_turns: int


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(word_length=4, max_turns=8),
    "hard": Settings(word_length=6, max_turns=6),
}
"""Presets selected by `WordleEnv(difficulty=...)`."""

_DEFAULT = Settings(word_length=5, max_turns=6)


def _turns(n: int) -> str:
    return "1 turn" if n == 1 else f"{n} turns"


def parse_word(action: str) -> str | None:
    r"""The stripped, lower-cased content of the last ``\boxed{...}``, or `None`."""
    matches = _BOXED.findall(action)
    return matches[-1].strip().lower() if matches else None


class WordleEnv(PresetEnv[tuple[Settings, tuple[str, ...]]]):
    r"""Guess a hidden word from ``G``/``Y``/``_`` letter feedback; the guess goes in ``\boxed{}``.

    Args:
        word_length: Letters in the secret (words of that length must be in the list).
        max_turns: Turns before the episode is truncated (at least 1).
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"``; a preset from
            `DIFFICULTIES` gives the defaults for `word_length` and `max_turns`, and values
            passed explicitly replace the preset's (for ``"random"``, in both presets).
        words: Secret candidates (lower-case ASCII letters); default: `load_words()`.

    Attributes:
        word_length, max_turns: This episode's settings (for ``"random"``, the preset drawn
            at the last reset; "easy" before the first).
        episode_difficulty: This episode's preset name (`None` without a difficulty).
        secret: The hidden word. turn: Turns taken. guesses: Valid guesses so far, each
            with its feedback, as ``(guess, feedback)`` pairs.

    Raises:
        ValueError: unknown difficulty, ``max_turns < 1``, a bad word, or no word of the
            requested length.
        TypeError: a number is not an int.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(
        self,
        word_length: int | None = None,
        max_turns: int | None = None,
        difficulty: str | None = None,
        words: Iterable[str] | None = None,
    ) -> None:
        presets = resolve_presets(difficulty, DIFFICULTIES, _DEFAULT)
        vocabulary = checked_words(words, "WordleEnv")
        choices: dict[str | None, tuple[Settings, tuple[str, ...]]] = {}
        for name, preset in presets.items():
            settings = _validated(preset, word_length, max_turns)
            candidates = tuple(sorted({w for w in vocabulary if len(w) == settings.word_length}))
            if not candidates:
                raise ValueError(f"WordleEnv: no word of {settings.word_length} letters")
            choices[name] = (settings, candidates)
        super().__init__(difficulty, choices)
        self.secret = self.candidates[0]
        self.turn = 0
        self.guesses: list[tuple[str, str]] = []

    def _apply_preset(self, preset: tuple[Settings, tuple[str, ...]]) -> None:
        settings, self.candidates = preset
        self.word_length, self.max_turns = settings

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Draw a new secret (and, for ``difficulty="random"``, first the preset).

        Returns:
            The instructions, and info ``{"difficulty", "word_length", "max_turns"}``.
        """
        super().reset(seed=seed)
        self.secret = self.candidates[int(self.np_random.integers(len(self.candidates)))]
        self.turn = 0
        self.guesses = []
        n = self.word_length
        obs = (
            f"Wordle: guess my secret English word of {n} letters in at most "
            f"{_turns(self.max_turns)}. After each guess I show one symbol per letter: G = "
            "right letter in the right place, Y = the letter is in the word but elsewhere, "
            "_ = the letter is not in the word (or not that many times). Put your guess in "
            f"\\boxed{{}}, e.g. \\boxed{{{self.candidates[0]}}}; only the last \\boxed{{}} in "
            "your reply counts. Repeating a guess is invalid."
        )
        info = {
            "difficulty": self.episode_difficulty,
            "word_length": n,
            "max_turns": self.max_turns,
        }
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take one turn; see the module docstring for the rules and rewards."""
        self.turn += 1
        guess = parse_word(action)
        prefix = f"Turn {self.turn}/{self.max_turns}:"
        correct = invalid = False
        marks: str | None = None
        n = self.word_length
        if guess is None:
            invalid = True
            text = f"{prefix} no \\boxed{{}} found; put your guess in \\boxed{{}}."
        elif len(guess) != n or not _LETTERS.fullmatch(guess):
            invalid = True
            text = f"{prefix} {guess!r:.40} is not a word of {n} letters a-z."
        elif any(guess == g for g, _ in self.guesses):
            invalid = True
            text = f"{prefix} you already guessed {guess}."
        else:
            marks = feedback(guess, self.secret)
            self.guesses.append((guess, marks))
            correct = guess == self.secret
            if correct:
                text = f"{prefix} {guess} is correct! You found the word."
            else:
                board = "\n".join(f"{g}  {' '.join(m)}" for g, m in self.guesses)
                spaced = " ".join(marks)
                text = f"{prefix} feedback for {guess}: {spaced}\nGuesses so far:\n{board}"
        reward = CORRECT_REWARD if correct else INVALID_REWARD if invalid else WRONG_GUESS_REWARD
        truncated = not correct and self.turn >= self.max_turns
        if truncated:
            text += f"\nNo turns left; the word was {self.secret}."
        elif not correct:
            text += f"\n{_turns(self.max_turns - self.turn)} left."
        info = {
            "correct": correct,
            "invalid_action": invalid,
            "parsed_action": guess,
            "turn": self.turn,
            "feedback": marks,
        }
        return text, reward, correct, truncated, info

    def sample_random_action(self) -> str:
        r"""``\boxed{w}`` with `w` a uniformly drawn candidate word (may repeat a guess)."""
        return f"\\boxed{{{self.candidates[int(self.np_random.integers(len(self.candidates)))]}}}"

    def _episode_state(self) -> dict[str, Any]:
        """For `get_state()`: secret, turn and guesses (a fresh list)."""
        return {
            "secret": self.secret,
            "turn": self.turn,
            "guesses": list(self.guesses),
        }

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        """Restore what `_episode_state` took."""
        self.secret = state["secret"]
        self.turn = state["turn"]
        self.guesses = [tuple(pair) for pair in state["guesses"]]


def _validated(preset: Settings, word_length: int | None, max_turns: int | None) -> Settings:
    settings = override_preset(preset, (word_length, max_turns), "WordleEnv")
    if settings.max_turns < 1:
        raise ValueError(f"WordleEnv: max_turns must be >= 1, got {settings.max_turns}")
    if settings.word_length < 1:
        raise ValueError(f"WordleEnv: word_length must be >= 1, got {settings.word_length}")
    return settings
