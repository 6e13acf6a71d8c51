r"""What the text worlds share: reading a command, the turn loop, admissible actions.

A world env (``world:*``) is a long-horizon text world driven by short commands
(``craft 4 planks using 1 oak log``, ``turn left``, ``heat water on stove``). The model writes
its command in the **last** ``\boxed{...}`` of its reply, as in the games; `parse_command`
reads it. `WorldEnv` owns the loop every world follows, so each world implements only its
rules:

* `reset()` reseeds `np_random`, draws the episode's preset (``difficulty="random"``), and
  calls `_generate()`, which builds the world from `np_random` and returns the task text.
* `step()` counts the turn, reads the command and calls `_execute(command)` with it (or, when
  the reply has no ``\boxed{}``, reports that without calling it). `_execute` returns a
  `Outcome`. A command the world does not understand, or one not admissible now, is an
  *invalid action*: it changes nothing, gives `Outcome.reward` (worlds use ``0.0``) and sets
  ``info["invalid_action"] = True``; the observation says why and suggests ``\boxed{help}``.
* The episode terminates when `_execute` says so (``Outcome.done``); otherwise a turn with
  ``turn == max_turns`` truncates it.
* Every info carries ``turn``, ``correct``, ``invalid_action``, ``parsed_action`` (the
  normalised command, or `None`) and, while the episode runs, ``available_actions`` (the
  list `available_actions()` returns, always non-empty for a world).

The command ``help`` is understood by every world: it lists the admissible actions, costs a
turn and is not invalid (AgentGym's BabyAI offers the same as "check available actions").
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple, TypeVar

from xpgym.envs.common.answers import last_boxed
from xpgym.envs.common.presets import PresetEnv

__all__ = ["HELP_COMMAND", "Outcome", "WorldEnv", "normalize_command", "parse_command"]

HELP_COMMAND = "help"

_SPACES = re.compile(r"\s+")
P = TypeVar("P")


def normalize_command(text: str) -> str:
    """`text` lower-cased, with runs of whitespace made one space and the ends stripped."""
    return _SPACES.sub(" ", text).strip().lower()


def parse_command(action: str) -> str | None:
    r"""The normalised command in the last ``\boxed{...}`` of `action`, else `None`.

    An empty box gives ``""``. Never raises.
    """
    boxed = last_boxed(action)
    return None if boxed is None else normalize_command(boxed)


class Outcome(NamedTuple):
    """What one command did.

    Attributes:
        text: What the model reads about it (the world's reply, then its view of the world).
        reward: This turn's reward.
        valid: `False` for a command the world does not understand or that is not
            admissible now (nothing changed).
        done: The task is over (solved, or failed for good): the episode terminates.
        correct: The task was solved on this turn.
    """

    text: str
    reward: float = 0.0
    valid: bool = True
    done: bool = False
    correct: bool = False


def _turns(n: int) -> str:
    return "1 turn" if n == 1 else f"{n} turns"


class WorldEnv(PresetEnv[P]):
    """Base of the text worlds: the turn loop and info keys of the module docstring.

    Subclasses set `max_turns` in `_apply_preset` and implement `_generate`, `_execute`,
    `available_actions`, `_episode_state` / `_restore_episode_state` (their world only; the
    turn counter is saved here) and `sample_random_action`.

    Attributes:
        turn: Turns taken this episode.
        max_turns: This episode's turn limit (set by the preset).
    """

    max_turns: int
    turn: int = 0

    def _generate(self) -> str:
        """Build a new world from `np_random` and return the task text (the first observation
        without the turn budget, which `reset` appends)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _generate()")

    def _execute(self, command: str) -> Outcome:
        """Apply a normalised, non-empty command other than ``help``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _execute()")

    def available_actions(self) -> list[str]:
        raise NotImplementedError(f"{type(self).__name__} does not implement available_actions()")

    def _help_text(self) -> str:
        return "Available actions: " + "; ".join(self.available_actions()) + "."

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Build a new world (see the module docstring).

        Returns:
            The task and first view with the turn budget, and info ``{"difficulty",
            "max_turns", "available_actions"}``.
        """
        super().reset(seed=seed)
        self.turn = 0
        task = self._generate()
        obs = (
            f"{task}\nYou have {_turns(self.max_turns)}. Write one command per reply in "
            "\\boxed{}, e.g. \\boxed{help} to list the actions you can take now; only the "
            "last \\boxed{} in your reply counts."
        )
        info = {
            "difficulty": self.episode_difficulty,
            "max_turns": self.max_turns,
            "available_actions": self.available_actions(),
        }
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take one turn; see the module docstring."""
        self.turn += 1
        command = parse_command(action)
        if command is None:
            outcome = Outcome("No \\boxed{} found: write one command as \\boxed{...}.", valid=False)
        elif not command:
            outcome = Outcome("The \\boxed{} is empty: write one command in it.", valid=False)
        elif command == HELP_COMMAND:
            outcome = Outcome(self._help_text())
        else:
            outcome = self._execute(command)
        text = outcome.text
        if not outcome.valid:
            text += " Nothing changed; \\boxed{help} lists the actions you can take."
        truncated = not outcome.done and self.turn >= self.max_turns
        if truncated:
            text += "\nNo turns left."
        elif not outcome.done:
            text += f"\n{_turns(self.max_turns - self.turn)} left."
        info: dict[str, Any] = {
            "turn": self.turn,
            "correct": outcome.correct,
            "invalid_action": not outcome.valid,
            "parsed_action": command,
        }
        if not (outcome.done or truncated):
            info["available_actions"] = self.available_actions()
        return text, float(outcome.reward), outcome.done, truncated, info

    def get_state(self) -> dict[str, Any]:
        """Snapshot: the preset, the turn counter, the world and the RNG (a fresh dict)."""
        return {**super().get_state(), "turn": self.turn}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a `get_state()` snapshot taken from an env with the same arguments."""
        super().set_state(state)
        self.turn = state["turn"]
