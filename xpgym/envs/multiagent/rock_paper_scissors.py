r"""Iterated Rock-Paper-Scissors: two agents move simultaneously for `rounds` rounds (parallel).

Episode rules:

* Agents ``"player_0"`` and ``"player_1"`` both act in every `step()`; one step is one round.
  `reset()` uses no randomness (only `sample_random_action` draws from `np_random`).
* The move is the content of the **last** ``\boxed{...}`` of an action: ``rock``, ``paper``
  or ``scissors`` (any case, surrounding spaces ignored), or the initials ``R``, ``P``,
  ``S``; e.g. ``\boxed{paper}``. Text around the box is ignored. Rock beats scissors,
  scissors beat paper, paper beats rock.
* An action with no ``\boxed{}`` or with other content is **invalid** and forfeits the round
  (it never raises and never ends the episode early).
* After round `rounds` both agents terminate (never truncated). Agents see each other's
  moves only after the round, in the observation.

Rewards, per round and per agent:

==========================================================  ========  ===================
This round                                                  reward    ``info["outcome"]``
==========================================================  ========  ===================
my move beats the opponent's, or only the opponent invalid  ``+1.0``  ``"win"``
same move, both valid                                       ``0.0``   ``"tie"``
the opponent's move beats mine                              ``-1.0``  ``"loss"``
my move invalid (whatever the opponent did)                 ``-1.0``  ``"invalid"``
==========================================================  ========  ===================

So the game is zero-sum except when both moves are invalid (both get ``-1.0``). The total
reward of an agent over the episode is its wins minus its losses and invalid rounds.

``info`` for each agent after every step: ``round`` (``1..rounds``), ``parsed_action`` (the
stripped text inside its last ``\boxed{}``, or `None`), ``move`` (``"rock"``/``"paper"``/
``"scissors"``, or `None` if invalid), ``invalid_action`` (bool), ``opponent_move`` (the
same for the opponent), ``outcome`` (see the table) and ``score`` (its total reward so far).

The observation of an agent shows the rules, the round number, every finished round (its
move, the opponent's, the result) and both scores.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from xpgym.core.multiagent import MultiAgentEnv
from xpgym.envs.common.arguments import is_int

__all__ = [
    "AGENTS",
    "BEATS",
    "INVALID_REWARD",
    "LOSS_REWARD",
    "MOVES",
    "TIE_REWARD",
    "WIN_REWARD",
    "RockPaperScissorsEnv",
    "parse_move",
]

AGENTS = ("player_0", "player_1")
MOVES = ("rock", "paper", "scissors")
BEATS = {"rock": "scissors", "paper": "rock", "scissors": "paper"}
"""``BEATS[a] == b``: move `a` beats move `b`."""
WIN_REWARD = 1.0
TIE_REWARD = 0.0
LOSS_REWARD = -1.0
INVALID_REWARD = -1.0

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_ALIASES = {**{m: m for m in MOVES}, "r": "rock", "p": "paper", "s": "scissors"}


def parse_move(action: str) -> tuple[str | None, str | None]:
    r"""Parse the move in `action`.

    Returns:
        ``(boxed, move)``: `boxed` is the stripped content of the last ``\boxed{...}`` (or
        `None`); `move` is ``"rock"``, ``"paper"`` or ``"scissors"``, or `None` if the content
        is none of them (nor ``R``/``P``/``S``). Never raises.
    """
    matches = _BOXED.findall(action)
    if not matches:
        return None, None
    boxed = matches[-1].strip()
    return boxed, _ALIASES.get(boxed.lower())


def _outcome(mine: str | None, theirs: str | None) -> tuple[str, float]:
    if mine is None:
        return "invalid", INVALID_REWARD
    if theirs is None or BEATS[mine] == theirs:
        return "win", WIN_REWARD
    if BEATS[theirs] == mine:
        return "loss", LOSS_REWARD
    return "tie", TIE_REWARD


class RockPaperScissorsEnv(MultiAgentEnv):
    r"""Two agents play ``\boxed{rock|paper|scissors}`` at once for `rounds` rounds.

    Args:
        rounds: Rounds per episode (1..1000, default 5).

    Attributes:
        round: Rounds played this episode. scores: Total reward per agent so far.
        history: One ``{agent: move or None}`` dict per finished round (`None` = invalid).

    Raises:
        TypeError: `rounds` is not an int. ValueError: `rounds` is out of range.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True, "multi_agent": True}

    def __init__(self, rounds: int = 5) -> None:
        if not is_int(rounds):
            raise TypeError(f"RockPaperScissorsEnv: rounds must be an int, got {rounds!r}")
        if not 1 <= int(rounds) <= 1000:
            raise ValueError(f"RockPaperScissorsEnv: rounds must be 1..1000, got {rounds}")
        super().__init__(list(AGENTS), mode="parallel")
        self.rounds = int(rounds)
        self.round = 0
        self.scores: dict[str, float] = dict.fromkeys(AGENTS, 0.0)
        self.history: list[dict[str, str | None]] = []

    def _reset(self, options: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
        self.round = 0
        self.scores = dict.fromkeys(AGENTS, 0.0)
        self.history = []
        return {agent: {"rounds": self.rounds} for agent in AGENTS}

    def _step(
        self, actions: dict[str, str]
    ) -> tuple[dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]]:
        self.round += 1
        parsed = {agent: parse_move(actions[agent]) for agent in AGENTS}
        moves = {agent: parsed[agent][1] for agent in AGENTS}
        self.history.append(dict(moves))
        rewards: dict[str, float] = {}
        infos: dict[str, dict[str, Any]] = {}
        for agent in AGENTS:
            other = _other(agent)
            outcome, reward = _outcome(moves[agent], moves[other])
            rewards[agent] = reward
            self.scores[agent] += reward
            infos[agent] = {
                "round": self.round,
                "parsed_action": parsed[agent][0],
                "move": moves[agent],
                "invalid_action": moves[agent] is None,
                "opponent_move": moves[other],
                "outcome": outcome,
                "score": self.scores[agent],
            }
        done = self.round >= self.rounds
        return rewards, dict.fromkeys(AGENTS, done), {}, infos

    def observe(self, agent: str) -> str:
        """Rules, the round, every finished round from `agent`'s side, and both scores."""
        other = _other(agent)
        lines = [
            f"Rock-Paper-Scissors, {self.rounds} rounds. You are {agent!r}, your opponent is "
            f"{other!r}; both move at the same time. Rock beats scissors, scissors beat paper, "
            "paper beats rock. Write your move in \\boxed{}, e.g. \\boxed{rock}; only the last "
            "\\boxed{} counts. Each round: win +1, tie 0, loss -1; an invalid move loses the "
            "round (-1)."
        ]
        for number, moves in enumerate(self.history, start=1):
            outcome, _ = _outcome(moves[agent], moves[other])
            mine = moves[agent] or "an invalid move"
            theirs = moves[other] or "an invalid move"
            lines.append(
                f"Round {number}: you played {mine}, opponent played {theirs} -> {outcome}."
            )
        lines.append(f"Score: you {self.scores[agent]:+g}, opponent {self.scores[other]:+g}.")
        if self.round >= self.rounds:
            lines.append("Game over.")
        else:
            lines.append(f"Round {self.round + 1} of {self.rounds}: your move.")
        return "\n".join(lines)

    def sample_random_action(self, agent: str) -> str:
        r"""``\boxed{move}`` with a move drawn uniformly from `np_random` (always valid)."""
        return f"\\boxed{{{MOVES[int(self.np_random.integers(3))]}}}"

    def _get_state(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "scores": dict(self.scores),
            "history": [dict(moves) for moves in self.history],
        }

    def _set_state(self, state: dict[str, Any]) -> None:
        self.round = state["round"]
        self.scores = dict(state["scores"])
        self.history = [dict(moves) for moves in state["history"]]


def _other(agent: str) -> str:
    return AGENTS[1] if agent == AGENTS[0] else AGENTS[0]
