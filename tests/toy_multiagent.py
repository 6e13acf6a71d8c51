"""Small multi-agent envs for the tests (importable as `toy_multiagent`, picklable).

`CountGame` (sequential): agents take turns saying the next number. ``count`` starts at 0;
the acting agent's text must be ``str(count + 1)``.

* right: ``count += 1``; if ``count == target`` the speaker gets ``+1.0`` and every live
  agent terminates.
* wrong: the speaker is eliminated (reward ``-1.0``, terminated); if one agent is left it
  wins (``+1.0``, terminated).
* after ``max_turns`` turns every live agent is truncated.
* observation: ``"count=<count> turns=<turns> next=<agent whose turn it is, or None>"``.

`RockPaperScissors` (parallel): every live agent plays ``rock``/``paper``/``scissors`` each
round; each agent gets ``+1`` per live opponent it beats and ``-1`` per opponent that beats it.
Any other text eliminates the agent (reward ``-1.0``, terminated). After ``rounds`` rounds
every live agent terminates. Observation: ``"round=<r>/<rounds> last=<moves>"``.

The `Broken*` envs each break one rule, for the checker's failure tests.
"""

from __future__ import annotations

import random
from typing import Any

from xpgym.core.multiagent import MultiAgentEnv

MOVES = ("rock", "paper", "scissors")
BEATS = {"rock": "scissors", "paper": "rock", "scissors": "paper"}


class CountGame(MultiAgentEnv):
    def __init__(self, num_agents: int = 3, target: int = 6, max_turns: int = 10) -> None:
        super().__init__([f"p{i}" for i in range(num_agents)], mode="sequential")
        self.target = target
        self.max_turns = max_turns
        self.count = 0
        self.turns = 0
        self.history: list[tuple[str, str]] = []
        self.closed = 0

    def _reset(self, options: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
        self.count = 0
        self.turns = 0
        self.history = []
        return {agent: {"target": self.target} for agent in self.agents}

    def _step(self, actions: dict[str, str]) -> tuple[dict, dict, dict, dict]:
        ((agent, text),) = actions.items()
        self.turns += 1
        self.history.append((agent, text))
        rewards: dict[str, float] = {}
        terminations: dict[str, bool] = {}
        if text.strip() == str(self.count + 1):
            self.count += 1
            if self.count == self.target:
                rewards[agent] = 1.0
                terminations = dict.fromkeys(self.agents, True)
        else:
            rewards[agent] = -1.0
            terminations[agent] = True
            survivors = [a for a in self.agents if a != agent]
            if len(survivors) == 1:
                rewards[survivors[0]] = 1.0
                terminations[survivors[0]] = True
        truncations: dict[str, bool] = {}
        if self.turns >= self.max_turns:
            truncations = {a: True for a in self.agents if not terminations.get(a, False)}
        infos = {agent: {"correct": rewards.get(agent, 0.0) >= 0}}
        return rewards, terminations, truncations, infos

    def observe(self, agent: str) -> str:
        return f"count={self.count} turns={self.turns} next={self.agent_selector.selected_agent}"

    def sample_random_action(self, agent: str) -> str:
        wrong = self.np_random.random() < 0.2
        return str(self.count + 1 + int(wrong))

    def _get_state(self) -> dict[str, Any]:
        return {"count": self.count, "turns": self.turns, "history": self.history}

    def _set_state(self, state: dict[str, Any]) -> None:
        self.count = state["count"]
        self.turns = state["turns"]
        self.history = state["history"]

    def close(self) -> None:
        self.closed += 1


class RockPaperScissors(MultiAgentEnv):
    def __init__(self, num_agents: int = 3, rounds: int = 3) -> None:
        super().__init__([f"p{i}" for i in range(num_agents)], mode="parallel")
        self.rounds = rounds
        self.round = 0
        self.last: dict[str, str] = {}

    def _reset(self, options: dict[str, Any] | None) -> None:
        self.round = 0
        self.last = {}

    def _step(self, actions: dict[str, str]) -> tuple[dict, dict, dict, dict]:
        self.round += 1
        self.last = dict(actions)
        valid = {agent: move for agent, move in actions.items() if move in MOVES}
        rewards = {agent: -1.0 for agent in actions if agent not in valid}
        terminations = {agent: True for agent in actions if agent not in valid}
        for agent, move in valid.items():
            rewards[agent] = float(
                sum(BEATS[move] == other for other in valid.values())
                - sum(BEATS[other] == move for other in valid.values())
            )
        if self.round >= self.rounds:
            terminations = dict.fromkeys(self.agents, True)
        return rewards, terminations, {}, {}

    def observe(self, agent: str) -> str:
        return f"round={self.round}/{self.rounds} last={sorted(self.last.items())}"

    def sample_random_action(self, agent: str) -> str:
        return MOVES[int(self.np_random.integers(0, 3))]

    def _get_state(self) -> dict[str, Any]:
        return {"round": self.round, "last": self.last}

    def _set_state(self, state: dict[str, Any]) -> None:
        self.round = state["round"]
        self.last = state["last"]


_UNSEEDED = random.Random()


class BrokenUnseeded(CountGame):
    """Draws random actions from an unseeded generator: not a function of the seed."""

    def sample_random_action(self, agent: str) -> str:
        # A wide draw, so two runs never pick the same actions by chance (the test would flake).
        return str(self.count + _UNSEEDED.randrange(10**9))


class BrokenForgetfulState(CountGame):
    """`_get_state` leaves out the count, so `set_state` cannot restore it."""

    def _get_state(self) -> dict[str, Any]:
        return {"turns": self.turns, "history": self.history}

    def _set_state(self, state: dict[str, Any]) -> None:
        self.turns = state["turns"]
        self.history = state["history"]


class BrokenAliasingState(CountGame):
    """`get_state` hands out the live history list, so stepping changes the snapshot."""

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        state["env"]["history"] = self.history
        return state


class BrokenObservation(CountGame):
    """`observe` returns a number for one agent."""

    def observe(self, agent: str) -> str:
        return 0 if agent == "p1" else super().observe(agent)  # type: ignore[return-value]


class BrokenClose(CountGame):
    """`close` fails the second time."""

    def close(self) -> None:
        if self.closed:
            raise RuntimeError("already closed")
        self.closed += 1
