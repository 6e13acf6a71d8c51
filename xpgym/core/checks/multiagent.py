"""`check_multiagent_env`: a conformance test any `MultiAgentEnv` can be handed.

Like PettingZoo's ``api_test``: it plays seeded episodes with `sample_random_action` and
raises `MultiAgentCheckError` (an `AssertionError`) naming the env, the seed, the step and
what was wrong. What it checks:

* types and keys of every dict `reset` and `step` return (observations `str`, rewards finite
  `float`, flags `bool`, infos `dict`, keyed by the agents live when the step began);
* agents finishing: an agent whose termination or truncation is True leaves `agents` and
  the selector; the others stay; `possible_agents` never changes; `step` after the last
  agent is done raises `EpisodeFinishedError`;
* the selector: only `agent_selector.active_agents()` act (one in sequential mode, every
  live agent in parallel mode); a missing action, an action for an agent that may not act
  now (`ValueError`) and a non-`str` action (`TypeError`) are rejected without changing
  the episode;
* seeded determinism: two `reset(seed=s)` with the same random actions give identical
  transcripts;
* `get_state`/`set_state`: the snapshot pickles, does not change when the env steps on, and
  restoring it (twice) replays the same continuation;
* `close()` twice is safe.

Transcripts, snapshots and the shared checks are compared and reported as in `check_env`
(`xpgym.core.checks.common`).
"""

from __future__ import annotations

import functools
import logging
import math
from typing import Any

from xpgym.core.checks.common import (
    CheckError,
    Fail,
    FrozenSnapshot,
    check_close_twice,
    expect_raises,
    first_difference,
    type_name,
)
from xpgym.core.env import EpisodeFinishedError
from xpgym.core.multiagent import MultiAgentEnv

__all__ = ["MultiAgentCheckError", "check_multiagent_env"]

logger = logging.getLogger(__name__)

_UNKNOWN_AGENT = "__xpgym_checker_unknown_agent__"

# A transcript is what an episode produced, in order: ("reset", observations, infos, agents),
# then ("step", actions, observations, rewards, terminations, truncations, infos, agents).
_FIELDS = {
    "reset": ("reset", "observations", "infos", "agents"),
    "step": (
        "step",
        "actions",
        "observations",
        "rewards",
        "terminations",
        "truncations",
        "infos",
        "agents",
    ),
}


class MultiAgentCheckError(CheckError):
    """A multi-agent env broke the contract; the message says how (a `CheckError`)."""


def check_multiagent_env(
    env: MultiAgentEnv, *, num_episodes: int = 3, seed: int = 0, max_steps: int = 1000
) -> None:
    """Check that `env` follows the `MultiAgentEnv` contract; raise `MultiAgentCheckError` if not.

    Args:
        env: The env to check. It is reset, stepped and closed (twice).
        num_episodes: Seeds ``seed, seed + 1, ...`` to play; each is played five times
            (twice for determinism, once with rejected steps, twice from a snapshot).
        seed: The first seed.
        max_steps: Steps after which an episode that has not ended is cut off (not an error).

    Raises:
        MultiAgentCheckError: the env broke the contract.
    """
    name = str(env)
    _check_attributes(env, name)
    for episode in range(num_episodes):
        episode_seed = seed + episode
        where = f"{name}, seed={episode_seed}"
        first = _play(env, episode_seed, max_steps, where=where)
        second = _play(env, episode_seed, max_steps, where=where)
        _expect_same(first, second, f"{where}: two reset(seed=...) episodes differ")
        probed = _play(env, episode_seed, max_steps, where=where, probe_invalid=True)
        _expect_same(
            first, probed, f"{where}: a rejected step (invalid actions) changed the episode"
        )
        _check_state_round_trip(env, episode_seed, len(first) - 1, max_steps, where)
    observations, infos = env.reset()
    _check_reset(env, observations, infos, f"{name}, reset() without a seed")
    check_close_twice(env, _failer(name))
    logger.info("%s passed check_multiagent_env (%d episodes)", name, num_episodes)


def _failer(where: str) -> Fail:
    return lambda message: MultiAgentCheckError(f"{where}: {message}")


def _check_attributes(env: Any, name: str) -> None:
    for attribute in ("possible_agents", "agents", "metadata", "agent_selector", "spec"):
        _require(hasattr(env, attribute), f"{name} has no attribute {attribute!r}")
    possible = env.possible_agents
    _require(
        isinstance(possible, list) and possible and all(isinstance(a, str) for a in possible),
        f"{name}.possible_agents must be a non-empty list of str, got {possible!r}",
    )
    _require(len(set(possible)) == len(possible), f"{name}.possible_agents has duplicates")
    _require(isinstance(env.metadata, dict), f"{name}.metadata must be a dict")
    mode = env.agent_selector.mode
    _require(mode in ("sequential", "parallel"), f"{name}: unknown selector mode {mode!r}")


def _play(
    env: Any,
    seed: int,
    max_steps: int,
    *,
    where: str,
    probe_invalid: bool = False,
) -> list[Any]:
    """Reset with `seed`, play random actions to the end; return the transcript."""
    observations, infos = env.reset(seed=seed)
    _check_reset(env, observations, infos, where)
    transcript: list[Any] = [("reset", observations, infos, list(env.agents))]
    return transcript + _continue(env, max_steps, where, probe_invalid=probe_invalid)


def _continue(env: Any, max_steps: int, where: str, *, probe_invalid: bool = False) -> list[Any]:
    """Play random actions from the current state to the end (or `max_steps`)."""
    possible = list(env.possible_agents)
    transcript: list[Any] = []
    for step in range(max_steps):
        if not env.agents:
            expect_raises(
                MultiAgentCheckError,
                EpisodeFinishedError,
                lambda: env.step({}),
                f"{where}: step() after every agent is done",
            )
            return transcript
        at = f"{where}, step {step}"
        active = _check_selector(env, at)
        if probe_invalid:
            _probe_invalid_actions(env, active, at)
        actions = {agent: env.sample_random_action(agent) for agent in active}
        bad = {agent: action for agent, action in actions.items() if not isinstance(action, str)}
        _require(not bad, f"{at}: sample_random_action returned non-str actions {bad!r}")
        live = list(env.agents)
        result = env.step(actions)
        _check_step_result(env, result, live, at)
        _require(env.possible_agents == possible, f"{at}: step() changed possible_agents")
        transcript.append(("step", actions, *result, list(env.agents)))
    logger.info("%s: episode cut off after max_steps=%d", where, max_steps)
    return transcript


def _check_reset(env: Any, observations: Any, infos: Any, where: str) -> None:
    agents = list(env.agents)
    _require(
        agents and set(agents) <= set(env.possible_agents) and len(set(agents)) == len(agents),
        f"{where}: after reset(), agents must be a non-empty list of distinct possible_agents, "
        f"got {agents!r}",
    )
    _check_dict(observations, agents, str, f"{where}: reset() observations")
    _check_dict(infos, agents, dict, f"{where}: reset() infos")
    for agent in agents:
        observation = env.observe(agent)
        _require(
            isinstance(observation, str),
            f"{where}: observe({agent!r}) returned {type(observation).__name__}, not str",
        )


def _check_selector(env: Any, at: str) -> list[str]:
    """Return the agents that must act now, after checking them against the live agents."""
    selector = env.agent_selector
    active = list(selector.active_agents())
    _require(
        set(selector.agent_order) == set(env.agents),
        f"{at}: the selector's agents {selector.agent_order!r} are not the live agents "
        f"{env.agents!r}",
    )
    _require(
        set(active) <= set(env.agents),
        f"{at}: active agents {active!r} are not all live ({env.agents!r})",
    )
    if selector.mode == "sequential":
        _require(
            active == [selector.selected_agent],
            f"{at}: sequential mode must have exactly the selected agent acting, got {active!r}",
        )
    else:
        _require(
            sorted(active) == sorted(env.agents),
            f"{at}: parallel mode must have every live agent acting, got {active!r}",
        )
    return active


def _probe_invalid_actions(env: Any, active: list[str], at: str) -> None:
    """Steps the env must reject (and not count): missing, unexpected and non-str actions."""
    fail = MultiAgentCheckError
    valid = {agent: "" for agent in active}
    missing = dict(list(valid.items())[1:])
    expect_raises(
        fail, ValueError, lambda: env.step(missing), f"{at}: step() without {active[0]!r}"
    )
    others = [a for a in env.possible_agents if a not in active] + [_UNKNOWN_AGENT]
    for other in (others[0], _UNKNOWN_AGENT):
        expect_raises(
            fail,
            ValueError,
            functools.partial(env.step, {**valid, other: ""}),
            f"{at}: step() with an action for {other!r}, who may not act now",
        )
    not_text = {**valid, active[0]: 123}
    expect_raises(
        fail, TypeError, lambda: env.step(not_text), f"{at}: step() with a non-str action"
    )


def _check_step_result(env: Any, result: Any, live: list[str], at: str) -> None:
    _require(
        isinstance(result, tuple) and len(result) == 5,
        f"{at}: step() must return (observations, rewards, terminations, truncations, infos)",
    )
    observations, rewards, terminations, truncations, infos = result
    _check_dict(observations, live, str, f"{at}: observations")
    _check_dict(rewards, live, float, f"{at}: rewards")
    bad = {agent: r for agent, r in rewards.items() if not math.isfinite(r)}
    _require(not bad, f"{at}: rewards must be finite, got {bad!r}")
    _check_dict(terminations, live, bool, f"{at}: terminations")
    _check_dict(truncations, live, bool, f"{at}: truncations")
    _check_dict(infos, live, dict, f"{at}: infos")
    still_live = [a for a in live if not (terminations[a] or truncations[a])]
    _require(
        list(env.agents) == still_live,
        f"{at}: after the step agents should be {still_live!r} (live agents minus those "
        f"terminated or truncated, in order), got {env.agents!r}",
    )


def _check_state_round_trip(
    env: Any, seed: int, steps_before: int, max_steps: int, where: str
) -> None:
    env.reset(seed=seed)
    for _ in range(steps_before // 2):
        env.step({agent: env.sample_random_action(agent) for agent in _check_selector(env, where)})
    snapshot = env.get_state()
    frozen = FrozenSnapshot(snapshot, _failer(where))
    at = f"{where}, after {steps_before // 2} steps"
    original = _continue(env, max_steps, at)
    _expect_unchanged(
        frozen, f"{at}: stepping the env changed a snapshot from get_state() (it aliases env state)"
    )
    for attempt in ("first", "second"):
        env.set_state(snapshot)
        replay = _continue(env, max_steps, at)
        _expect_same(
            original,
            replay,
            f"{at}: the {attempt} set_state(get_state()) replay differs from the original "
            "continuation (entry 0 = the first step after the snapshot)",
        )
        _expect_unchanged(
            frozen, f"{at}: set_state() then stepping changed the snapshot (set_state aliases it)"
        )


def _check_dict(value: Any, keys: list[str], kind: type, what: str) -> None:
    _require(isinstance(value, dict), f"{what} must be a dict, got {type(value).__name__}")
    _require(
        set(value) == set(keys),
        f"{what} must be keyed by {sorted(keys)!r}, got keys {sorted(value)!r}",
    )
    wrong = {agent: type_name(v) for agent, v in value.items() if not isinstance(v, kind)}
    _require(not wrong, f"{what} must hold {kind.__name__} values, got {wrong!r}")


def _require(condition: Any, message: str) -> None:
    if not condition:
        raise MultiAgentCheckError(message)


def _expect_same(first: list[Any], second: list[Any], message: str) -> None:
    difference = first_difference(first, second, _FIELDS)
    if difference is not None:
        raise MultiAgentCheckError(f"{message}, {difference}")


def _expect_unchanged(frozen: FrozenSnapshot, message: str) -> None:
    change = frozen.change()
    if change is not None:
        raise MultiAgentCheckError(f"{message}, {change}")
