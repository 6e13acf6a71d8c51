"""xpgym multi-agent envs as PettingZoo envs.

* `XpgymToAEC`: a sequential-mode `MultiAgentEnv` as a PettingZoo `AECEnv`: one agent acts
  per `step(action)`, whose turn it is comes from the xpgym env's `agent_selector`.
* `XpgymToParallel`: a parallel-mode `MultiAgentEnv` as a PettingZoo `ParallelEnv`: every
  live agent acts in each `step(actions)`, the xpgym env's own call.
* `to_pettingzoo(env)` picks the one that matches the env's mode.

Observations and actions are `str`, every agent's spaces are `Text` spaces
(`xpgym.compat.spaces`). For the other pairings use PettingZoo's own converters on these
(`pettingzoo.utils.conversions.parallel_to_aec` makes an AEC env of a parallel one).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from xpgym.compat.spaces import MAX_ACTION_LENGTH, MAX_OBSERVATION_LENGTH, TEXT_CHARSET, text_space
from xpgym.core.multiagent import AgentID, MultiAgentEnv
from xpgym.core.optional import import_optional
from xpgym.core.registry import make

gymnasium = import_optional(
    "gymnasium", needed_by="xpgym.compat.pettingzoo", install='pip install "xpgym[compat]"'
)
pettingzoo = import_optional(
    "pettingzoo", needed_by="xpgym.compat.pettingzoo", install='pip install "xpgym[compat]"'
)
AECEnv, ParallelEnv = pettingzoo.AECEnv, pettingzoo.ParallelEnv

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


def _agent_spaces(
    agents: list[AgentID], charset: str, max_observation_length: int, max_action_length: int
) -> tuple[dict[AgentID, gymnasium.spaces.Text], dict[AgentID, gymnasium.spaces.Text]]:
    """Each agent's observation and action `Text` spaces. The bridges keep these dicts for
    their whole life: PettingZoo requires ``env.action_space(a) is env.action_space(a)`` so
    that seeding a space sticks."""
    return (
        {agent: text_space(max_observation_length, charset) for agent in agents},
        {agent: text_space(max_action_length, charset) for agent in agents},
    )


def _multiagent_env(
    env: MultiAgentEnv | str, mode: str, make_kwargs: dict[str, Any]
) -> MultiAgentEnv:
    """`env` made from its id if need be, checked to be a `MultiAgentEnv` in `mode`."""
    if isinstance(env, str):
        env = make(env, **make_kwargs)
    elif make_kwargs:
        raise TypeError(
            f"keyword arguments {sorted(make_kwargs)} are for xpgym.make; "
            "pass an env id, not an env instance, to use them"
        )
    if not isinstance(env, MultiAgentEnv):
        raise TypeError(
            f"PettingZoo bridges need an xpgym MultiAgentEnv, got {env!r:.80}; a single-agent "
            "Env goes through xpgym.compat.gymnasium"
        )
    if env.mode != mode:
        other = "XpgymToParallel" if mode == "sequential" else "XpgymToAEC"
        raise ValueError(
            f"{env} is in {env.mode!r} mode; bridge it with {other} (or to_pettingzoo), then "
            "convert with pettingzoo.utils.conversions if you need the other API"
        )
    return env


class XpgymToAEC(AECEnv[AgentID, str, str]):
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

    Args:
        env: A sequential-mode `MultiAgentEnv`, or a registered id to `xpgym.make`.
        charset, max_observation_length, max_action_length: The spaces, as in
            `xpgym.compat.gymnasium.XpgymToGymnasium`.
        **make_kwargs: Keyword arguments for `xpgym.make` when `env` is an id.

    Raises:
        TypeError: `env` is not a `MultiAgentEnv` (or an id of one).
        ValueError: `env` is in parallel mode (use `XpgymToParallel`).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": [], "is_parallelizable": False}

    def __init__(
        self,
        env: MultiAgentEnv | str,
        *,
        charset: str = TEXT_CHARSET,
        max_observation_length: int = MAX_OBSERVATION_LENGTH,
        max_action_length: int = MAX_ACTION_LENGTH,
        **make_kwargs: Any,
    ) -> None:
        super().__init__()
        self.xpgym_env = _multiagent_env(env, "sequential", make_kwargs)
        self.possible_agents = list(self.xpgym_env.possible_agents)
        self.agents = []
        self.render_mode = None
        self.observation_spaces, self.action_spaces = _agent_spaces(
            self.possible_agents, charset, max_observation_length, max_action_length
        )
        self._observations: dict[AgentID, str] = {}

    def observation_space(self, agent: AgentID) -> gymnasium.spaces.Text:
        return self.observation_spaces[agent]

    def action_space(self, agent: AgentID) -> gymnasium.spaces.Text:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start an episode: the xpgym env's ``reset(seed=seed, options=options)``."""
        self._observations, infos = self.xpgym_env.reset(seed=seed, options=options)
        self.agents = list(self.xpgym_env.agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = infos
        self.agent_selection = self.xpgym_env.agent_selector.selected_agent
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
            self.agent_selection = self.xpgym_env.agent_selector.selected_agent
        self._accumulate_rewards()
        self._deads_step_first()

    def close(self) -> None:
        """Close the xpgym env (idempotent)."""
        self.xpgym_env.close()

    def __str__(self) -> str:
        return f"<XpgymToAEC{self.xpgym_env}>"


class XpgymToParallel(ParallelEnv[AgentID, str, str]):
    """A parallel-mode xpgym `MultiAgentEnv` as a PettingZoo `ParallelEnv`.

    `reset` and `step` are the xpgym env's own (dicts keyed by agent id, `step` keyed by every
    agent live when it began; observations as `TextObservation`s); `agents` is the xpgym
    env's live agents after each call.

    Args:
        env: A parallel-mode `MultiAgentEnv`, or a registered id to `xpgym.make`.
        charset, max_observation_length, max_action_length: The spaces, as in
            `xpgym.compat.gymnasium.XpgymToGymnasium`.
        **make_kwargs: Keyword arguments for `xpgym.make` when `env` is an id.

    Raises:
        TypeError: `env` is not a `MultiAgentEnv` (or an id of one).
        ValueError: `env` is in sequential mode (use `XpgymToAEC`).
    """

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
        self.xpgym_env = _multiagent_env(env, "parallel", make_kwargs)
        self.possible_agents = list(self.xpgym_env.possible_agents)
        self.agents = []
        self.render_mode = None
        self.observation_spaces, self.action_spaces = _agent_spaces(
            self.possible_agents, charset, max_observation_length, max_action_length
        )

    def observation_space(self, agent: AgentID) -> gymnasium.spaces.Text:
        return self.observation_spaces[agent]

    def action_space(self, agent: AgentID) -> gymnasium.spaces.Text:
        return self.action_spaces[agent]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[AgentID, str], dict[AgentID, dict[str, Any]]]:
        """Start an episode: the xpgym env's ``reset(seed=seed, options=options)``."""
        observations, infos = self.xpgym_env.reset(seed=seed, options=options)
        self.agents = list(self.xpgym_env.agents)
        return _text_observations(observations), infos

    def step(
        self, actions: dict[AgentID, str]
    ) -> tuple[
        dict[AgentID, str],
        dict[AgentID, float],
        dict[AgentID, bool],
        dict[AgentID, bool],
        dict[AgentID, dict[str, Any]],
    ]:
        """Every live agent's text at once: the xpgym env's `step(actions)`."""
        observations, rewards, terminations, truncations, infos = self.xpgym_env.step(actions)
        self.agents = list(self.xpgym_env.agents)
        return _text_observations(observations), rewards, terminations, truncations, infos

    def close(self) -> None:
        """Close the xpgym env (idempotent)."""
        self.xpgym_env.close()

    def __str__(self) -> str:
        return f"<XpgymToParallel{self.xpgym_env}>"


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
    if isinstance(env, str):
        env = make(env, **make_kwargs)
        make_kwargs = {}
    bridge = XpgymToParallel if getattr(env, "mode", None) == "parallel" else XpgymToAEC
    return bridge(
        env,
        charset=charset,
        max_observation_length=max_observation_length,
        max_action_length=max_action_length,
        **make_kwargs,
    )
