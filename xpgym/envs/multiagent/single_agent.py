"""`SingleAgentView`: one agent of a sequential `MultiAgentEnv` as a single-agent `Env`.

The caller plays `agent`; every other agent is played inside the view, by a policy the
caller gives (``observation -> action text``) or, by default, by the env's own
``sample_random_action(other)`` (which some envs make a scripted partner, e.g. the scripted
user of `xpgym.envs.multiagent.customer_service`). So single-agent tools (`check_env`,
golden transcripts, vector envs, trainers) apply to one side of a multi-agent game.

Semantics:

* `reset` resets the multi-agent env, then lets the others act until it is `agent`'s turn;
  the observation is ``env.observe(agent)`` then. Rewards `agent` gets before its first
  action are not reported.
* `step(action)` applies `action` for `agent`, then lets the others act until it is
  `agent`'s turn again or `agent` is done. The reward is the sum of `agent`'s rewards over
  those multi-agent steps; `terminated` / `truncated` are `agent`'s flags; `info` is
  `agent`'s info of each of those steps merged in order (later keys win).
* `get_state` / `set_state` snapshot the multi-agent env (its RNG included). A caller's
  policy with state of its own is not part of the snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from xpgym.core.env import Env
from xpgym.core.multiagent import MultiAgentEnv

__all__ = ["Policy", "SingleAgentView"]

Policy = Callable[[str], str]
"""Plays one agent: its observation in, its action text out."""


class SingleAgentView(Env[str]):
    """`agent`'s side of a sequential multi-agent env; see the module docstring.

    Args:
        env: A `MultiAgentEnv` in sequential mode.
        agent: The agent the caller plays (one of ``env.possible_agents``).
        policies: Policies for (some of) the other agents; the rest act with
            ``env.sample_random_action(other)``.

    Raises:
        ValueError: `env` is in parallel mode, `agent` is unknown, or a policy is given for
            `agent` itself or for an unknown agent.
        RuntimeError: (at reset) the episode ended before `agent`'s first turn.
    """

    def __init__(
        self, env: MultiAgentEnv, agent: str, policies: Mapping[str, Policy] | None = None
    ) -> None:
        if env.mode != "sequential":
            raise ValueError(f"SingleAgentView needs a sequential env, {env} is {env.mode}")
        if agent not in env.possible_agents:
            raise ValueError(f"agent {agent!r} is not one of {env.possible_agents!r}")
        policies = dict(policies or {})
        others = [a for a in env.possible_agents if a != agent]
        wrong = [name for name in policies if name not in others]
        if wrong:
            raise ValueError(f"policies for {wrong!r}: only the other agents {others!r} take one")
        self.env = env
        self.agent = agent
        self.policies = policies
        self._metadata = {**env.metadata, "multi_agent": False}

    @property
    def metadata(self) -> dict[str, Any]:  # type: ignore[override]  # per view, as in Wrapper
        """The env's metadata with ``multi_agent`` False (made once, at construction)."""
        return self._metadata

    @property
    def np_random(self) -> np.random.Generator:
        """The multi-agent env's generator (the view has none of its own)."""
        return self.env.np_random

    @np_random.setter
    def np_random(self, value: np.random.Generator) -> None:
        self.env.np_random = value

    @property
    def np_random_seed(self) -> int | None:
        return self.env.np_random_seed

    def _others_act(self) -> tuple[float, bool, bool, dict[str, Any]]:
        """Step the other agents until `agent` must act or is done; `agent`'s results."""
        reward, terminated, truncated = 0.0, False, False
        info: dict[str, Any] = {}
        while self.agent in self.env.agents:
            other = self.env.agent_selector.selected_agent
            assert other is not None  # a sequential env with live agents has one selected
            if other == self.agent:
                break
            policy = self.policies.get(other)
            action = (
                policy(self.env.observe(other))
                if policy is not None
                else self.env.sample_random_action(other)
            )
            _, rewards, terminations, truncations, infos = self.env.step({other: action})
            reward += rewards[self.agent]
            terminated, truncated = terminations[self.agent], truncations[self.agent]
            info.update(infos[self.agent])
        return reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Reset the env and play the others up to `agent`'s first turn.

        Returns:
            ``env.observe(agent)`` and `agent`'s reset info.
        """
        _, infos = self.env.reset(seed=seed, options=options)
        self._others_act()
        if self.agent not in self.env.agents:
            raise RuntimeError(f"{self.env}: the episode ended before {self.agent!r} acted")
        return self.env.observe(self.agent), dict(infos[self.agent])

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Act for `agent`, then play the others; see the module docstring."""
        _, rewards, terminations, truncations, infos = self.env.step({self.agent: action})
        reward = rewards[self.agent]
        terminated, truncated = terminations[self.agent], truncations[self.agent]
        info = dict(infos[self.agent])
        if not (terminated or truncated):
            more, terminated, truncated, later = self._others_act()
            reward += more
            info.update(later)
        return self.env.observe(self.agent), reward, terminated, truncated, info

    def sample_random_action(self) -> str:
        """``env.sample_random_action(agent)``."""
        return self.env.sample_random_action(self.agent)

    def get_state(self) -> dict[str, Any]:
        """The multi-agent env's snapshot (independent of the env)."""
        return {"env": self.env.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a `get_state()` snapshot."""
        self.env.set_state(state["env"])

    def close(self) -> None:
        self.env.close()
