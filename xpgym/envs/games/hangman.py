r"""Hangman: find a hidden word one letter at a time before the lives run out.

Episode rules:

* `reset()` draws the secret uniformly (with `np_random`) from the words of
  ``min_length..max_length`` letters in the word list (by default the shipped
  ``xpgym/data/words_en.jsonl``). The observation shows the pattern (one ``_`` per hidden
  letter, e.g. ``_ a _ _ e``), the lives, the turn limit and the action format.
* Every `step()` is one turn, whatever the action holds. The action is the content of the
  **last** ``\boxed{...}``, stripped and lower-cased:

  * one ASCII letter, e.g. ``\boxed{e}``: a letter guess. If the secret contains it, every
    occurrence is revealed; otherwise one life is lost.
  * two or more ASCII letters, e.g. ``\boxed{apple}``: a guess of the whole word. If it is
    the secret, the game is won; otherwise one life is lost (any length is allowed).
* A letter already guessed, a word already guessed, an empty box, anything that is not
  only ASCII letters, or no ``\boxed{}`` is invalid: it uses up the turn, costs no life and
  changes nothing else.
* The episode terminates when every letter is revealed or the word is guessed
  (``correct=True``), or when the last life is lost (``correct=False``). If neither happened
  by the last allowed turn (``turn == max_turns``), it is truncated (``terminated=False,
  truncated=True``). The word is revealed whenever the episode ends without a win.

Rewards, per turn:

=====================================================  =======  ======================
Action                                                 reward   ``info``
=====================================================  =======  ======================
win (last letter revealed, or right word guessed)      ``1.0``  ``correct=True``
new letter in the word (not the last one)              ``0.1``
new letter not in the word, or wrong word guess        ``0.0``
repeated letter or word, or malformed action           ``-0.1`` ``invalid_action=True``
=====================================================  =======  ======================

Shaping: ``0.1`` per revealing letter guess (a letter, not a position count), so a won
episode returns between ``1.0`` and ``1.0 + 0.1 * (distinct letters - 1)``, minus ``0.1``
per invalid turn. A lost or truncated episode keeps what it earned. Losing costs nothing
extra.

``info`` after every step: ``correct`` (bool), ``invalid_action`` (bool), ``parsed_action``
(the stripped, lower-cased content of the last ``\boxed{}``, or `None`), ``turn`` (turns
taken), ``lives`` (lives left) and ``pattern`` (the revealed pattern, without spaces, e.g.
``_a__e``).

Difficulty presets (`DIFFICULTIES`): ``"easy"`` is 6..8-letter words with 8 lives,
``"hard"`` 4..5-letter words (fewer letters: fewer hits, less to go on) with 5 lives;
``"random"`` draws easy or hard with equal probability at every reset. Without a difficulty:
4..8 letters, 6 lives. The turn limit is 30 in every preset.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, ClassVar, NamedTuple

from xpgym.envs.common.presets import PresetEnv, override_preset, resolve_presets
from xpgym.envs.games.wordle import checked_words

__all__ = [
    "DIFFICULTIES",
    "HIT_REWARD",
    "INVALID_REWARD",
    "MISS_REWARD",
    "WIN_REWARD",
    "HangmanEnv",
    "Settings",
]

WIN_REWARD = 1.0
HIT_REWARD = 0.1
MISS_REWARD = 0.0
INVALID_REWARD = -0.1

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_LETTERS = re.compile(r"[a-z]+")
_ALPHABET = "abcdefghijklmnopqrstuvwxyz"


class Settings(NamedTuple):
    """One game size: secrets of ``min_length..max_length`` letters, `lives` misses allowed."""

    min_length: int
    max_length: int
    lives: int
    max_turns: int


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(min_length=6, max_length=8, lives=8, max_turns=30),
    "hard": Settings(min_length=4, max_length=5, lives=5, max_turns=30),
}
"""Presets selected by `HangmanEnv(difficulty=...)`."""

_DEFAULT = Settings(min_length=4, max_length=8, lives=6, max_turns=30)


def _plural(n: int, word: str, plural: str) -> str:
    return f"1 {word}" if n == 1 else f"{n} {plural}"


class HangmanEnv(PresetEnv[tuple[Settings, tuple[str, ...]]]):
    r"""Guess a hidden word letter by letter (``\boxed{e}``) or whole (``\boxed{apple}``).

    Args:
        min_length, max_length: Secret length range (inclusive).
        lives: Wrong guesses allowed; the one that takes the last life ends the game.
        max_turns: Turns before the episode is truncated (at least 1).
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"``; a preset from
            `DIFFICULTIES` gives the defaults, and values passed explicitly replace the
            preset's (for ``"random"``, in both presets).
        words: Secret candidates (lower-case ASCII letters); default: `load_words()`.

    Attributes:
        min_length, max_length, lives_per_game, max_turns: This episode's settings.
        episode_difficulty: This episode's preset name (`None` without a difficulty).
        secret: The hidden word. turn: Turns taken. lives: Lives left.
        guessed: Letters and words guessed so far, in order.

    Raises:
        ValueError: unknown difficulty, a bad range, ``lives < 1``, ``max_turns < 1``, a
            bad word, or no word in the length range.
        TypeError: a number is not an int.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(
        self,
        min_length: int | None = None,
        max_length: int | None = None,
        lives: int | None = None,
        max_turns: int | None = None,
        difficulty: str | None = None,
        words: Iterable[str] | None = None,
    ) -> None:
        presets = resolve_presets(difficulty, DIFFICULTIES, _DEFAULT)
        vocabulary = checked_words(words, "HangmanEnv")
        choices: dict[str | None, tuple[Settings, tuple[str, ...]]] = {}
        for name, preset in presets.items():
            s = _validated(preset, min_length, max_length, lives, max_turns)
            candidates = tuple(
                sorted({w for w in vocabulary if s.min_length <= len(w) <= s.max_length})
            )
            if not candidates:
                raise ValueError(f"HangmanEnv: no word of {s.min_length}..{s.max_length} letters")
            choices[name] = (s, candidates)
        super().__init__(difficulty, choices)
        self.secret = self.candidates[0]
        self.turn = 0
        self.lives = self.lives_per_game
        self.guessed: list[str] = []

    def _apply_preset(self, preset: tuple[Settings, tuple[str, ...]]) -> None:
        settings, self.candidates = preset
        self.min_length, self.max_length, self.lives_per_game, self.max_turns = settings

    @property
    def pattern(self) -> str:
        """The secret with unguessed letters as ``_`` (no spaces), e.g. ``"_a__e"``."""
        return "".join(c if c in self.guessed else "_" for c in self.secret)

    def _status(self) -> str:
        letters = sorted(g for g in self.guessed if len(g) == 1)
        tried = ", ".join(letters) if letters else "none"
        return (
            f"Word: {' '.join(self.pattern)} ({len(self.secret)} letters). "
            f"Letters tried: {tried}. {_plural(self.lives, 'life', 'lives')} left, "
            f"{_plural(self.max_turns - self.turn, 'turn', 'turns')} left."
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Draw a new secret (and, for ``difficulty="random"``, first the preset).

        Returns:
            The instructions, and info ``{"difficulty", "word_length", "lives",
            "max_turns"}``.
        """
        super().reset(seed=seed)
        self.secret = self.candidates[int(self.np_random.integers(len(self.candidates)))]
        self.turn = 0
        self.lives = self.lives_per_game
        self.guessed = []
        obs = (
            "Hangman: find my secret English word. Guess one letter per turn, e.g. "
            "\\boxed{e}, or the whole word, e.g. \\boxed{apple}; only the last \\boxed{} in "
            "your reply counts. A wrong letter or a wrong word costs a life; repeating a "
            "guess is invalid. " + self._status()
        )
        info = {
            "difficulty": self.episode_difficulty,
            "word_length": len(self.secret),
            "lives": self.lives,
            "max_turns": self.max_turns,
        }
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take one turn; see the module docstring for the rules and rewards."""
        self.turn += 1
        matches = _BOXED.findall(action)
        guess = matches[-1].strip().lower() if matches else None
        prefix = f"Turn {self.turn}/{self.max_turns}:"
        correct = invalid = terminated = False
        reward = MISS_REWARD
        if guess is None or not _LETTERS.fullmatch(guess):
            invalid = True
            reward = INVALID_REWARD
            what = "no \\boxed{} found" if guess is None else f"{guess!r:.40} is not a guess"
            text = f"{prefix} {what}; put one letter (or the whole word) in \\boxed{{}}."
        elif guess in self.guessed:
            invalid = True
            reward = INVALID_REWARD
            text = f"{prefix} you already guessed {guess}."
        else:
            self.guessed.append(guess)
            if len(guess) == 1:
                if guess in self.secret:
                    correct = "_" not in self.pattern
                    reward = WIN_REWARD if correct else HIT_REWARD
                    count = self.secret.count(guess)
                    times = "once" if count == 1 else f"{count} times"
                    text = f"{prefix} yes, {guess} occurs {times}."
                else:
                    self.lives -= 1
                    text = f"{prefix} no, there is no {guess}."
            elif guess == self.secret:
                correct = True
                reward = WIN_REWARD
                text = f"{prefix} {guess} is right!"
            else:
                self.lives -= 1
                text = f"{prefix} no, the word is not {guess}."
            terminated = correct or self.lives <= 0
        truncated = not terminated and self.turn >= self.max_turns
        if correct:
            text += f" You found the word: {self.secret}."
        elif terminated:
            text += f" No lives left; the word was {self.secret}."
        elif truncated:
            text += f" No turns left; the word was {self.secret}."
        else:
            text += " " + self._status()
        info = {
            "correct": correct,
            "invalid_action": invalid,
            "parsed_action": guess,
            "turn": self.turn,
            "lives": self.lives,
            "pattern": self.pattern,
        }
        return text, reward, terminated, truncated, info

    def sample_random_action(self) -> str:
        r"""``\boxed{c}`` with `c` a uniform letter a-z (may repeat a guess)."""
        return f"\\boxed{{{_ALPHABET[int(self.np_random.integers(26))]}}}"

    def _episode_state(self) -> dict[str, Any]:
        """For `get_state()`: secret, turn, lives and guesses (a fresh list)."""
        return {
            "secret": self.secret,
            "turn": self.turn,
            "lives": self.lives,
            "guessed": list(self.guessed),
        }

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        """Restore what `_episode_state` took."""
        self.secret = state["secret"]
        self.turn = state["turn"]
        self.lives = state["lives"]
        self.guessed = list(state["guessed"])


def _validated(
    preset: Settings,
    min_length: int | None,
    max_length: int | None,
    lives: int | None,
    max_turns: int | None,
) -> Settings:
    settings = override_preset(preset, (min_length, max_length, lives, max_turns), "HangmanEnv")
    if not 1 <= settings.min_length <= settings.max_length:
        raise ValueError(
            f"HangmanEnv: need 1 <= min_length <= max_length, got {settings.min_length} "
            f"and {settings.max_length}"
        )
    if settings.lives < 1:
        raise ValueError(f"HangmanEnv: lives must be >= 1, got {settings.lives}")
    if settings.max_turns < 1:
        raise ValueError(f"HangmanEnv: max_turns must be >= 1, got {settings.max_turns}")
    return settings
