"""Multi-agent text environments: `AgentSelector` and `MultiAgentEnv`.

`AgentSelector` has PettingZoo's method names and meaning (`reinit`, `reset`, `next`,
`is_first`, `is_last`, `selected_agent`, `agent_order`) plus `remove_agent`, `add_agent`,
`active_agents` and ``mode="parallel"``.

`MultiAgentEnv` follows the single-agent `xpgym.core.env.Env` conventions (per-instance
`np_random`, `get_state`/`set_state` snapshots, idempotent `close`, context manager, `spec`)
but `reset` and `step` take and return dicts keyed by agent id:

* ``reset(seed=...) -> (observations, infos)`` for every live agent.
* ``step(actions) -> (observations, rewards, terminations, truncations, infos)``, each keyed by
  every agent that was live when the step began. `actions` holds exactly the agents that
  must act now: the selected agent in sequential mode, every live agent in parallel mode.
* An agent whose termination or truncation is True is removed from `agents` (and from the
  selector) after that step; its final reward and flags are in that step's dicts. The
  episode is over when `agents` is empty.

A subclass calls ``super().__init__(possible_agents, mode=...)`` and implements the hooks
`_reset`, `_step`, `observe`, `sample_random_action`, `_get_state` and `_set_state`; the
base class does the bookkeeping (validation, removal of finished agents, turn order, RNG).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from xpgym.core.env import EnvCore, EpisodeFinishedError, ResetNeededError

if TYPE_CHECKING:
    pass

__all__ = ["AgentID", "AgentSelector", "MultiAgentEnv"]

logger = logging.getLogger(__name__)

AgentID = str
Mode = Literal["sequential", "parallel"]
_MODES = ("sequential", "parallel")


class AgentSelector:
    """Cycles through agents in a fixed order; PettingZoo's `AgentSelector` plus removal.

    `selected_agent` is the agent whose turn it is (`None` before the first `next()` or
    `reset()`, and after the selected agent was removed). `next()` selects the agent after
    it in `agent_order`, wrapping around. Removing an agent never skips anyone: after the
    selected agent is removed, `next()` selects the agent that followed it.

    In ``mode="sequential"`` the selected agent is the only one that acts
    (`active_agents()` is ``[selected_agent]``); in ``mode="parallel"`` every live agent acts
    each step (`active_agents()` is `agent_order`) and the cycling methods are available but
    not needed.

    Differences from PettingZoo: `reinit` copies the list instead of keeping the caller's
    object; `selected_agent` is `None` rather than ``0`` before the first selection; `next()`
    and `reset()` on an empty order raise `ValueError` rather than `ZeroDivisionError`.
    """

    def __init__(self, agent_order: Sequence[AgentID], mode: Mode = "sequential") -> None:
        if mode not in _MODES:
            raise ValueError(f"mode must be 'sequential' or 'parallel', got {mode!r}")
        self.mode: Mode = mode
        self.reinit(agent_order)

    def reinit(self, agent_order: Sequence[AgentID]) -> None:
        """Use a new order; nothing is selected until `next()` (which returns its first agent)."""
        order = list(agent_order)
        if len(set(order)) != len(order):
            raise ValueError(f"agent ids must be unique, got {order!r}")
        self.agent_order: list[AgentID] = order
        self.selected_agent: AgentID | None = None
        self._next_index = 0  # index in agent_order of the agent `next()` selects (mod len)

    def reset(self) -> AgentID:
        """Restart the cycle over the current `agent_order`; select and return its first agent."""
        self.reinit(self.agent_order)
        return self.next()

    def next(self) -> AgentID:
        """Select the agent after `selected_agent` (wrapping around) and return it."""
        if not self.agent_order:
            raise ValueError("AgentSelector has no agents left to select")
        index = self._next_index % len(self.agent_order)
        self.selected_agent = self.agent_order[index]
        self._next_index = index + 1
        return self.selected_agent

    def is_first(self) -> bool:
        """Whether the selected agent is the first in `agent_order`."""
        return bool(self.agent_order) and self.selected_agent == self.agent_order[0]

    def is_last(self) -> bool:
        """Whether the selected agent is the last in `agent_order` (the end of a round)."""
        return bool(self.agent_order) and self.selected_agent == self.agent_order[-1]

    def remove_agent(self, agent: AgentID) -> None:
        """Remove `agent`; the turn order of the others is unchanged and nobody is skipped.

        If `agent` is the selected agent, `selected_agent` becomes `None` and the next
        `next()` selects the agent that followed it.
        """
        if agent not in self.agent_order:
            raise ValueError(f"cannot remove {agent!r}: not in agent_order {self.agent_order!r}")
        index = self.agent_order.index(agent)
        del self.agent_order[index]
        if index < self._next_index:
            self._next_index -= 1
        if agent == self.selected_agent:
            self.selected_agent = None

    def add_agent(self, agent: AgentID) -> None:
        """Append `agent` to the end of the turn order (it acts after the current last agent)."""
        if agent in self.agent_order:
            raise ValueError(f"cannot add {agent!r}: already in agent_order {self.agent_order!r}")
        self.agent_order.append(agent)

    def active_agents(self) -> list[AgentID]:
        """The agents that act now: ``[selected_agent]`` (sequential) or every agent (parallel)."""
        if self.mode == "parallel":
            return list(self.agent_order)
        return [] if self.selected_agent is None else [self.selected_agent]

    def get_state(self) -> dict[str, Any]:
        """A plain-data snapshot (independent of the selector) for `set_state`."""
        return {
            "mode": self.mode,
            "agent_order": list(self.agent_order),
            "selected_agent": self.selected_agent,
            "next_index": self._next_index,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from `get_state`."""
        self.mode = state["mode"]
        self.agent_order = list(state["agent_order"])
        self.selected_agent = state["selected_agent"]
        self._next_index = state["next_index"]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AgentSelector):
            return NotImplemented
        return self.get_state() == other.get_state()

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        return (
            f"AgentSelector({self.agent_order!r}, mode={self.mode!r}, "
            f"selected_agent={self.selected_agent!r})"
        )


class MultiAgentEnv(EnvCore):
    """A text environment with several agents; dicts keyed by agent id in and out.

    Not a subclass of `xpgym.core.env.Env` (its `step` takes a dict) but it keeps the same
    conventions. A subclass calls ``super().__init__(possible_agents, mode=...)`` and
    implements:

    * ``_reset(options) -> infos | None``: start a new episode. When it runs, `np_random` is
      already reseeded (if a seed was given), `agents` is `possible_agents` and the selector
      has selected the first agent; it may reorder the turns with
      ``self.agent_selector.reinit(order); self.agent_selector.reset()``.
    * ``_step(actions) -> (rewards, terminations, truncations, infos)``: apply one validated
      joint action (`actions` holds exactly `agent_selector.active_agents()`, all `str`).
      Each returned dict may cover only some live agents; the others get ``0.0``, `False`,
      `False`, ``{}``. Flags for agents that are not live are an error.
    * ``observe(agent) -> str``: the agent's current view. Called after the selector has
      moved on, so it can say whose turn it is.
    * ``sample_random_action(agent) -> str``: drawn from `np_random` only.
    * ``_get_state() -> Any`` / ``_set_state(state)``: the subclass's own episode state. The
      base class adds live agents, selector and RNG state, and deep-copies both ways, so a
      snapshot is never aliased by the env.
    * optionally `close()` (must be idempotent).

    Attributes:
        possible_agents: Every agent id that can appear, in turn order.
        agents: The live agents (not yet terminated or truncated), in turn order.
        agent_selector: Whose turn it is; `agent_selector.active_agents()` must act next.
        metadata: Free-form facts about the env (class attribute).
        spec: The `EnvSpec` the env was made from by `xpgym.make`, else `None`.
    """

    def __init__(self, possible_agents: Sequence[AgentID], *, mode: Mode = "sequential") -> None:
        agents = list(possible_agents)
        if not agents or not all(isinstance(a, str) for a in agents):
            raise ValueError(f"possible_agents must be a non-empty list of str, got {agents!r}")
        self.possible_agents: list[AgentID] = agents
        self.agents: list[AgentID] = []
        self.agent_selector = AgentSelector(agents, mode=mode)
        self._needs_reset = True

    # ------------------------------------------------------------------ public API

    @property
    def mode(self) -> Mode:
        """``"sequential"`` (one agent acts per step) or ``"parallel"`` (all live agents do)."""
        return self.agent_selector.mode

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[AgentID, str], dict[AgentID, dict[str, Any]]]:
        """Start a new episode with every agent in `possible_agents` live.

        Args:
            seed: If given, reseeds `np_random` so the episode is a
                function of the seed and `options` alone. If `None`, the stream continues.
            options: Env-specific reset options, passed to `_reset`.

        Returns:
            `(observations, infos)`, each keyed by every live agent.
        """
        self._reseed(seed)
        self.agents = list(self.possible_agents)
        self.agent_selector.reinit(self.agents)
        self.agent_selector.reset()
        infos = self._reset(options) or {}
        self._needs_reset = False
        self._check_agent_keys(infos, "infos from _reset")
        observations = {agent: self.observe(agent) for agent in self.agents}
        return observations, {agent: dict(infos.get(agent, {})) for agent in self.agents}

    def step(
        self, actions: Mapping[AgentID, str]
    ) -> tuple[
        dict[AgentID, str],
        dict[AgentID, float],
        dict[AgentID, bool],
        dict[AgentID, bool],
        dict[AgentID, dict[str, Any]],
    ]:
        """Apply one joint action: the text of every agent that must act now.

        Args:
            actions: ``{agent: text}`` for exactly `agent_selector.active_agents()`.

        Returns:
            `(observations, rewards, terminations, truncations, infos)`, each keyed by every
            agent that was live when the step began (agents that did not act included).
            Agents whose termination or truncation is True are then removed from `agents`
            and the selector; in sequential mode the selector then moves to the next agent.

        Raises:
            ResetNeededError: `reset()` (or `set_state()`) was never called.
            EpisodeFinishedError: every agent is done; call `reset()`.
            ValueError: an agent that must act is missing, or an agent that may not act now
                (not its turn, already done, unknown) has an action.
            TypeError: `actions` is not a mapping or an action is not a `str`.
        """
        self._validate_actions(actions)
        live = list(self.agents)
        rewards, terminations, truncations, infos = self._step(dict(actions))
        for name, part in (
            ("rewards", rewards),
            ("terminations", terminations),
            ("truncations", truncations),
            ("infos", infos),
        ):
            self._check_agent_keys(part, f"{name} from _step")
        rewards = {a: float(rewards.get(a, 0.0)) for a in live}
        terminations = {a: bool(terminations.get(a, False)) for a in live}
        truncations = {a: bool(truncations.get(a, False)) for a in live}
        infos = {a: dict(infos.get(a, {})) for a in live}

        for agent in live:
            if terminations[agent] or truncations[agent]:
                logger.debug("%s: agent %r is done and leaves the episode", self, agent)
                self.agents.remove(agent)
                self.agent_selector.remove_agent(agent)
        if self.agents and self.mode == "sequential":
            self.agent_selector.next()
        observations = {agent: self.observe(agent) for agent in live}
        return observations, rewards, terminations, truncations, infos

    def observe(self, agent: AgentID) -> str:
        """Return what `agent` currently sees (a `str`)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement observe()")

    def sample_random_action(self, agent: AgentID) -> str:
        """Return a random, well-formed action for `agent`, drawn from `np_random` only."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement sample_random_action()"
        )

    def get_state(self) -> dict[str, Any]:
        """Return a picklable snapshot of the episode: live agents, selector, RNG, env state.

        The snapshot is independent of the env: stepping afterwards never changes it, and
        `set_state` can restore it any number of times.
        """
        return {
            "agents": list(self.agents),
            "selector": self.agent_selector.get_state(),
            "np_random": copy.deepcopy(self.np_random.bit_generator.state),
            "np_random_seed": self._np_random_seed,
            "needs_reset": self._needs_reset,
            "env": copy.deepcopy(self._get_state()),
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a `get_state` snapshot; the same actions then give the same results."""
        rng_state = copy.deepcopy(state["np_random"])
        rng = np.random.Generator(getattr(np.random, rng_state["bit_generator"])())
        rng.bit_generator.state = rng_state
        self._np_random, self._np_random_seed = rng, state["np_random_seed"]
        self.agents = list(state["agents"])
        self.agent_selector.set_state(state["selector"])
        self._needs_reset = state["needs_reset"]
        self._set_state(copy.deepcopy(state["env"]))

    @property
    def unwrapped(self) -> MultiAgentEnv:
        return self

    # ------------------------------------------------------------------ hooks

    def _reset(self, options: dict[str, Any] | None) -> Mapping[AgentID, dict[str, Any]] | None:
        """Start the subclass's episode; return per-agent reset infos (or `None`)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _reset()")

    def _step(
        self, actions: dict[AgentID, str]
    ) -> tuple[
        Mapping[AgentID, float],
        Mapping[AgentID, bool],
        Mapping[AgentID, bool],
        Mapping[AgentID, dict[str, Any]],
    ]:
        """Apply validated `actions`; return `(rewards, terminations, truncations, infos)`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _step()")

    def _get_state(self) -> Any:
        """The subclass's own episode state (the base class deep-copies it)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _get_state()")

    def _set_state(self, state: Any) -> None:
        """Restore what `_get_state` returned (given a private copy)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _set_state()")

    # ------------------------------------------------------------------ checks

    def _validate_actions(self, actions: Mapping[AgentID, str]) -> None:
        if self._needs_reset:
            raise ResetNeededError(f"{self}: call reset() before step()")
        if not self.agents:
            raise EpisodeFinishedError(
                f"{self}: every agent is done (terminated or truncated); "
                "call reset() to start a new episode"
            )
        if not isinstance(actions, Mapping):
            raise TypeError(
                f"{self}.step() takes a dict {{agent: action}}, got {type(actions).__name__}"
            )
        acting = self.agent_selector.active_agents()
        missing = [agent for agent in acting if agent not in actions]
        if missing:
            raise ValueError(
                f"{self}: no action for {missing!r}; agents that must act now: {acting!r}"
            )
        extra = [agent for agent in actions if agent not in acting]
        if extra:
            reasons = ", ".join(f"{agent!r} ({self._why_not_acting(agent)})" for agent in extra)
            raise ValueError(
                f"{self}: actions for agents that may not act now: {reasons}; "
                f"agents that must act now: {acting!r}"
            )
        for agent, action in actions.items():
            if not isinstance(action, str):
                raise TypeError(
                    f"{self}.step(): the action of agent {agent!r} must be the model's text as "
                    f"a str, got {type(action).__name__}: {action!r:.80}"
                )

    def _why_not_acting(self, agent: Any) -> str:
        if agent in self.agents:
            return "not its turn"
        if agent in self.possible_agents:
            return "already done"
        return "unknown agent"

    def _check_agent_keys(self, part: Mapping[AgentID, Any], what: str) -> None:
        unknown = [agent for agent in part if agent not in self.agents]
        if unknown:
            raise ValueError(
                f"{self}: {what} has agents that are not live: {unknown!r} (live: {self.agents!r})"
            )
