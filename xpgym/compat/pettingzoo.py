"""xpgym multi-agent envs as PettingZoo envs.

* `XpgymToAEC`: a sequential-mode `MultiAgentEnv` as a PettingZoo `AECEnv`: one agent acts
  per `step(action)`, whose turn it is comes from the xpgym env's `agent_selector`.
* `XpgymToParallel`: a parallel-mode `MultiAgentEnv` as a PettingZoo `ParallelEnv`: every
  live agent acts in each `step(actions)`, the xpgym env's own call.
* `to_pettingzoo(env)` picks the one that matches the env's mode.

Observations and actions are `str`, every agent's spaces are `Text` spaces
(`xpgym.compat.common`). For the other pairings use PettingZoo's own converters on these
(`pettingzoo.utils.conversions.parallel_to_aec` makes an AEC env of a parallel one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from xpgym.compat.common import (
    MAX_ACTION_LENGTH,
    MAX_OBSERVATION_LENGTH,
    TEXT_CHARSET,
    bridged_env,
    text_space,
)
from xpgym.core.multiagent import AgentID, MultiAgentEnv
from xpgym.core.optional import import_optional

if TYPE_CHECKING:
    import gymnasium
    import pettingzoo
else:
    gymnasium = import_optional(
        "gymnasium", needed_by="xpgym.compat.pettingzoo", install='pip install "xpgym[compat]"'
    )
    pettingzoo = import_optional(
        "pettingzoo", needed_by="xpgym.compat.pettingzoo", install='pip install "xpgym[compat]"'
    )

__all__ = ["TextObservation", "XpgymToAEC", "XpgymToParallel", "to_pettingzoo"]


class TextObservation(str):
    """A `str` that also has the `dtype` of its `Text` space, ``numpy.dtype(str)``.

    Both bridges' observations are these: PettingZoo's `api_test` compares
    ``observation.dtype`` with ``observation_space.dtype``, an attribute only numpy values
    have (PettingZoo issue #1111). In every other respect it is the plain `str`; operations
    on it return plain `str`s.
    """

    __slots__ = ()
    dtype = np.dtype(str)


def _text_observations(observations: dict[AgentID, str]) -> dict[AgentID, TextObservation]:
    return {agent: TextObservation(text) for agent, text in observations.items()}


def _multi_agent_env(env: MultiAgentEnv | str, make_kwargs: dict[str, Any]) -> MultiAgentEnv:
    """`env`, or the env of the id `env` made with `make_kwargs`; a `MultiAgentEnv` or
    `TypeError`."""
    bridged = bridged_env(env, make_kwargs)
    if not isinstance(bridged, MultiAgentEnv):
        raise TypeError(
            f"PettingZoo bridges need an xpgym MultiAgentEnv, got {bridged!r:.80}; a "
            "single-agent Env goes through xpgym.compat.gymnasium"
        )
    return bridged


class _MultiAgentBridge:
    """What both PettingZoo bridges share: the xpgym env, its agents and their spaces.

    Each agent has one observation and one action `Text` space for the bridge's whole life:
    PettingZoo requires ``env.action_space(a) is env.action_space(a)`` so that seeding a
    space sticks. A subclass sets `_mode`, the xpgym mode it bridges.

    Args:
        env: A `MultiAgentEnv` in the subclass's mode, or a registered id to `xpgym.make`.
        charset, max_observation_length, max_action_length: The spaces, as in
            `xpgym.compat.gymnasium.XpgymToGymnasium`.
        **make_kwargs: Keyword arguments for `xpgym.make` when `env` is an id.

    Raises:
        TypeError: `env` is not a `MultiAgentEnv` (or an id of one).
        ValueError: `env` is in the other mode (the error names the other bridge).
    """

    _mode: ClassVar[str]
    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        env: MultiAgentEnv | str,
        *,
        charset: str = TEXT_CHARSET,
        max_observation_length: int = MAX_OBSERVATION_LENGTH,
        max_action_length: int = MAX_ACTION_LENGTH,
        **make_kwargs: Any,
    ) -> None:
        bridged = _multi_agent_env(env, make_kwargs)
        if bridged.mode != self._mode:
            other = "XpgymToParallel" if self._mode == "sequential" else "XpgymToAEC"
            raise ValueError(
                f"{bridged} is in {bridged.mode!r} mode; bridge it with {other} (or "
                "to_pettingzoo), then convert with pettingzoo.utils.conversions if you need "
                "the other API"
            )
        self.xpgym_env = bridged
        self.possible_agents = list(bridged.possible_agents)
        self.agents: list[AgentID] = []
        self.render_mode = None
        self.observation_spaces = {
            agent: text_space(max_observation_length, charset) for agent in self.possible_agents
        }
        self.action_spaces = {
            agent: text_space(max_action_length, charset) for agent in self.possible_agents
        }

    def observation_space(self, agent: AgentID) -> gymnasium.spaces.Text:
        return self.observation_spaces[agent]

    def action_space(self, agent: AgentID) -> gymnasium.spaces.Text:
        return self.action_spaces[agent]

    def close(self) -> None:
        """Close the xpgym env (idempotent)."""
        self.xpgym_env.close()

    def __str__(self) -> str:
        return f"<{type(self).__name__}{self.xpgym_env}>"


class XpgymToAEC(_MultiAgentBridge, pettingzoo.AECEnv[AgentID, str, str]):
    """A sequential-mode xpgym `MultiAgentEnv` as a PettingZoo `AECEnv`.

    PettingZoo's AEC bookkeeping is kept here, over the xpgym env's dicts:

    * `step(action)` sends ``{agent_selection: action}`` to the xpgym env; every live
      agent's `rewards`, `terminations`, `truncations` and `infos` are then that step's, and
      `last()` returns the reward accumulated since the agent last acted.
    * An agent that the xpgym env has removed (terminated or truncated) stays in `agents`
      until it is selected and stepped with `None` (PettingZoo's "dead step"); dead agents are
      selected before the next live one.
    * `observe(agent)` is the text the xpgym env returned to `agent` last, as a
      `TextObservation` (a `str`).

    Arguments and errors: `_MultiAgentBridge` (a parallel-mode env raises `ValueError`).
    """

    _mode = "sequential"

    _observations: dict[AgentID, str]
    agent_selection: AgentID

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start an episode: the xpgym env's ``reset(seed=seed, options=options)``."""
        self._observations, infos = self.xpgym_env.reset(seed=seed, options=options)
        self.agents = list(self.xpgym_env.agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = infos
        self.agent_selection = self._selected_agent()
        self._skip_agent_selection = None

    def observe(self, agent: AgentID) -> TextObservation:
        """The last text the xpgym env returned to `agent`."""
        return TextObservation(self._observations[agent])

    def step(self, action: str | None) -> None:
        """Act for `agent_selection`: its text, or `None` when it is done (a dead step)."""
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        if action is None:
            raise TypeError(
                f"{self}: None is the step of a done agent; {agent!r} is live, pass its text"
            )
        self._cumulative_rewards[agent] = 0.0
        observations, rewards, terminations, truncations, infos = self.xpgym_env.step(
            {agent: action}
        )
        self._observations.update(observations)
        self.rewards = rewards
        self.terminations.update(terminations)
        self.truncations.update(truncations)
        self.infos.update(infos)
        if self.xpgym_env.agents:
            self.agent_selection = self._selected_agent()
        self._accumulate_rewards()
        self._deads_step_first()

    def _selected_agent(self) -> AgentID:
        """The agent whose turn it is in the xpgym env (after a reset, or a step that left
        agents live)."""
        agent = self.xpgym_env.agent_selector.selected_agent
        assert agent is not None  # a sequential env with live agents has one selected
        return agent


class XpgymToParallel(_MultiAgentBridge, pettingzoo.ParallelEnv[AgentID, str, str]):
    """A parallel-mode xpgym `MultiAgentEnv` as a PettingZoo `ParallelEnv`.

    `reset` and `step` are the xpgym env's own (dicts keyed by agent id, `step` keyed by every
    agent live when it began; observations as `TextObservation`s); `agents` is the xpgym
    env's live agents after each call.

    Arguments and errors: `_MultiAgentBridge` (a sequential-mode env raises `ValueError`).
    """

    _mode = "parallel"

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[AgentID, TextObservation], dict[AgentID, dict[str, Any]]]:
        """Start an episode: the xpgym env's ``reset(seed=seed, options=options)``."""
        observations, infos = self.xpgym_env.reset(seed=seed, options=options)
        self.agents = list(self.xpgym_env.agents)
        return _text_observations(observations), infos

    def step(
        self, actions: dict[AgentID, str]
    ) -> tuple[
        dict[AgentID, TextObservation],
        dict[AgentID, float],
        dict[AgentID, bool],
        dict[AgentID, bool],
        dict[AgentID, dict[str, Any]],
    ]:
        """Every live agent's text at once: the xpgym env's `step(actions)`."""
        observations, rewards, terminations, truncations, infos = self.xpgym_env.step(actions)
        self.agents = list(self.xpgym_env.agents)
        return _text_observations(observations), rewards, terminations, truncations, infos


def to_pettingzoo(
    env: MultiAgentEnv | str,
    *,
    charset: str = TEXT_CHARSET,
    max_observation_length: int = MAX_OBSERVATION_LENGTH,
    max_action_length: int = MAX_ACTION_LENGTH,
    **make_kwargs: Any,
) -> XpgymToAEC | XpgymToParallel:
    """`env` (or the env of a registered id) as the PettingZoo env its mode calls for:
    `XpgymToAEC` for sequential mode, `XpgymToParallel` for parallel mode.

    The keyword arguments are those of the two bridges.
    """
    bridged = _multi_agent_env(env, make_kwargs)
    bridge = XpgymToParallel if bridged.mode == "parallel" else XpgymToAEC
    return bridge(
        bridged,
        charset=charset,
        max_observation_length=max_observation_length,
        max_action_length=max_action_length,
    )
