"""`check_env`: a conformance test any xpgym env can be handed.

Run it in an env's own tests (``check_env(xpgym.make("my:Env-v0"))``); the project's test
suite runs it over every registered id. It drives the env with `sample_random_action()` and
raises `CheckError` (an `AssertionError`, so pytest shows it as a failed assertion) naming
the env, the call and the value that broke the contract in `xpgym.core.env`. Multi-agent
envs have their own checker, `xpgym.core.checks.multiagent`.

The checker never prints. It leaves the env it was given open, reset to some episode.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import math
import numbers
import random
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from xpgym.core.checks.common import (
    CheckError,
    Fail,
    FrozenSnapshot,
    check_close_twice,
    expect_raises,
    first_difference,
    same,
    short_repr,
    type_name,
)
from xpgym.core.env import Env, EpisodeFinishedError, ResetNeededError, Wrapper
from xpgym.core.multiagent import MultiAgentEnv

__all__ = ["check_env"]

_T = TypeVar("_T")
_FLAG_INFO_KEYS = ("correct", "invalid_action")

# A transcript is what an episode produced, in order: ("reset", obs, info), then
# ("step", action, obs, reward, terminated, truncated, info) per step.
_Transcript = list[tuple[Any, ...]]
_FIELDS = {
    "reset": ("reset", "observation", "info"),
    "step": ("step", "action", "observation", "reward", "terminated", "truncated", "info"),
}


def check_env(env: Env, *, num_episodes: int = 3, max_steps: int = 100, seed: int = 0) -> None:
    """Check that `env` follows the xpgym `Env` contract; return `None` or raise `CheckError`.

    Episodes are played with `env.sample_random_action()`, seeded ``seed, seed + 1, ...``,
    each cut off after `max_steps` steps if it has not ended. What is checked:

    * API shape: `reset` takes keyword `seed` and `options` and returns ``(obs, info)``;
      `step` returns ``(obs, reward, terminated, truncated, info)``; `obs` is a `str` (or an
      instance of ``env.metadata["observation_type"]`` when the env declares one); `reward`
      is a finite real number (not a `bool`); `terminated` and `truncated` are Python
      `bool`s; `info` is a `dict` whose ``"correct"`` and ``"invalid_action"`` are `bool`s
      and whose ``"metrics"`` is a dict of real numbers, when present;
      `sample_random_action` returns a `str`.
    * Episode end: an unwrapped env never returns ``terminated=True`` and ``truncated=True``
      together (a turn limit is a truncation, a solved or failed task a termination; through
      wrappers both may be set when a wrapper's limit falls on the task's last step). After
      the end, `step` raises `EpisodeFinishedError` unless ``env.allows_step_after_done``,
      in which case it must still return a well-formed step.
    * Actions: `step` with a non-`str` action raises `TypeError`.
    * Seeding: two episodes with the same seed give identical transcripts (observations,
      rewards, flags, infos and the sampled actions, compared by `checks.common.same`:
      equal values of equal types, numpy arrays by value), whatever ran before them.
    * Isolation: `reset`, `step`, `sample_random_action`, `get_state` and `set_state` leave
      the global `random` and `numpy.random` states untouched; a second instance of the env
      has its own `np_random`, and playing it in the middle of an episode does not change
      that episode.
    * Snapshots: `get_state()` mid-episode returns a picklable snapshot that later steps do
      not change (no aliasing); the episode continues identically after `set_state(snap)`,
      on this instance and on a second one, and that replay does not change `snap` either.
    * Lifecycle: a fresh instance (made from `env.spec`) raises `ResetNeededError` when
      stepped before `reset`;
      `close()` may be called twice.

    The second instance is made from `env.spec` for an env as `xpgym.make` returned it
    (the same wrapper chain), else by `copy.deepcopy(env)`; if that fails, the checks that
    need it are skipped with a `UserWarning`.

    Args:
        env: The env to check (wrapped or not). It is reset and stepped, not closed.
        num_episodes: Episodes (seeds) to play, at least 1.
        max_steps: Steps after which an episode that has not ended is cut off, at least 1.
        seed: Seed of the first episode.

    Raises:
        CheckError: the env broke the contract.
        TypeError: `env` is not an xpgym `Env` (a `MultiAgentEnv` goes to
            `check_multiagent_env`).
        ValueError: `num_episodes` or `max_steps` is below 1.
    """
    _check_is_single_agent_env(env)
    if num_episodes < 1 or max_steps < 1:
        raise ValueError(
            f"num_episodes and max_steps must be >= 1, got {num_episodes} and {max_steps}"
        )
    second, second_is_fresh = _second_instance(env)
    try:
        if second is not None and second_is_fresh:
            _check_step_before_reset_raises(second)
        _check_reset_signature(env)
        _check_reset_return(env, _guarded(env, "reset()", env.reset))
        for episode in range(num_episodes):
            episode_seed = seed + episode
            reference, ended = _play(env, episode_seed, max_steps)
            if ended:
                _check_step_after_end(env, reference)
            _assert_same(
                env,
                reference,
                _play(env, episode_seed, max_steps)[0],
                f"two episodes with seed {episode_seed} differ",
                "everything random must come from self.np_random, reseeded by "
                "super().reset(seed=seed); the transcript may not depend on earlier episodes",
            )
            if second is not None:
                _check_other_instance_is_independent(env, second, reference, episode_seed)
            _check_state_round_trip(env, second, reference, episode_seed)
        _check_non_str_action_raises(env, seed)
    except BaseException:
        if second is not None:
            with contextlib.suppress(Exception):  # report the first failure, not this one
                second.close()
        raise
    if second is not None:
        check_close_twice(second, _failer(second))


# ---------------------------------------------------------------------------- dispatch


def _check_is_single_agent_env(env: Any) -> None:
    if isinstance(env, MultiAgentEnv):
        raise TypeError(
            f"check_env checks single-agent envs; {env} is a MultiAgentEnv: use "
            "xpgym.core.checks.check_multiagent_env(env) instead"
        )
    if not isinstance(env, Env):
        raise TypeError(
            f"check_env needs an xpgym Env (a subclass of xpgym.Env), got {type_name(env)}"
        )


def _second_instance(env: Env) -> tuple[Env | None, bool]:
    """Another instance built like `env`, and whether it is fresh (never reset)."""
    spec = env.spec
    how = "xpgym.make"
    try:
        if spec is not None:
            from xpgym.core.registry import make_from_spec

            fresh = make_from_spec(spec)
            # not wrapped after make (nor, oddly, a different kind of env)
            if isinstance(fresh, Env) and _wrapper_types(fresh) == _wrapper_types(env):
                return fresh, True
            fresh.close()
        how = "copy.deepcopy"
        return copy.deepcopy(env), False
    except Exception as exc:  # failing to build one only skips the checks that need it
        warnings.warn(
            f"check_env({env}): cannot build a second instance ({how} raised {exc!r}), so "
            "per-instance RNG, set_state on another instance and close() are not checked",
            UserWarning,
            stacklevel=3,
        )
        return None, False


def _wrapper_types(env: Env) -> list[type]:
    """The types of `env`'s wrapper chain, outermost first, ending with the unwrapped env."""
    types = [type(env)]
    while isinstance(env, Wrapper):
        env = env.env
        types.append(type(env))
    return types


# ------------------------------------------------------------------------- the checks


def _fail(env: Env, message: str) -> CheckError:
    return CheckError(f"check_env({env}): {message}")


def _failer(env: Env) -> Fail:
    return functools.partial(_fail, env)


def _check_reset_signature(env: Env) -> None:
    params = inspect.signature(env.reset).parameters
    has_var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    for name in ("seed", "options"):
        if name not in params and not has_var_kw:
            raise _fail(
                env,
                f"reset() must accept the keyword argument {name!r}: "
                "def reset(self, *, seed=None, options=None)",
            )


def _check_step_before_reset_raises(env: Env) -> None:
    expect_raises(_failer(env), ResetNeededError, lambda: env.step(""), "step() before reset()")


def _play(
    env: Env, seed: int, max_steps: int, *, interrupt: Callable[[int], None] | None = None
) -> tuple[_Transcript, bool]:
    """Play one seeded episode with sampled actions; return it and whether it ended.

    `interrupt(k)` is called before step `k` (0-based); it must not touch `env`.
    """
    obs, info = _check_reset_return(env, _guarded(env, f"reset(seed={seed})", env.reset, seed=seed))
    transcript: _Transcript = [("reset", obs, info)]
    return transcript, _continue(env, transcript, max_steps, interrupt=interrupt)


def _continue(
    env: Env,
    transcript: _Transcript,
    max_steps: int,
    *,
    interrupt: Callable[[int], None] | None = None,
) -> bool:
    """Step `env` with sampled actions, appending to `transcript`; return whether it ended."""
    for k in range(max_steps):
        if interrupt is not None:
            interrupt(k)
        action = _guarded(env, "sample_random_action()", env.sample_random_action)
        if not isinstance(action, str):
            raise _fail(
                env,
                f"sample_random_action() must return a str, got {type_name(action)}: "
                f"{short_repr(action)}",
            )
        result = _guarded(env, f"step({short_repr(action)})", env.step, action)
        step = _check_step_return(env, result, f"step {len(transcript)}")
        transcript.append(("step", action, *step))
        if step[2] or step[3]:
            return True
    return False


def _check_step_after_end(env: Env, transcript: _Transcript) -> None:
    action = transcript[-1][1]
    if env.allows_step_after_done:
        _check_step_return(env, env.step(action), "step after the end of the episode")
        return
    expect_raises(
        _failer(env),
        EpisodeFinishedError,
        lambda: env.step(action),
        "step() after the episode ended",
        " (or set allows_step_after_done = True and document what such steps do)",
    )


def _check_other_instance_is_independent(
    env: Env, second: Env, reference: _Transcript, seed: int
) -> None:
    if env.unwrapped.np_random is second.unwrapped.np_random:
        raise _fail(env, "two instances share one np_random generator; each needs its own")
    midpoint = (len(reference) - 1) // 2

    def play_second(k: int) -> None:
        if k == midpoint:
            _play(second, seed + 1, len(reference) + 1)

    transcript, _ = _play(env, seed, len(reference) - 1, interrupt=play_second)
    _assert_same(
        env,
        reference,
        transcript,
        f"playing another instance in the middle of the seed-{seed} episode changed it",
        "keep all randomness and state on the instance (self.np_random, instance attributes)",
    )


def _check_state_round_trip(
    env: Env, second: Env | None, reference: _Transcript, seed: int
) -> None:
    steps = len(reference) - 1
    midpoint = steps // 2
    prefix, _ = _play(env, seed, midpoint)
    snapshot = _guarded(env, "get_state()", env.get_state)
    if not isinstance(snapshot, dict):
        raise _fail(env, f"get_state() must return a dict, got {type_name(snapshot)}")
    frozen = FrozenSnapshot(snapshot, _failer(env))

    def continue_from(target: Env, what: str) -> None:
        transcript = prefix[: midpoint + 1]
        _continue(target, transcript, steps - midpoint)
        _assert_same(
            target,
            reference,
            transcript,
            f"seed {seed}: the episode after {what} at step {midpoint} differs",
            "get_state() must capture the whole episode state, RNG included, and set_state() "
            "must restore all of it",
        )
        change = frozen.change()
        if change is not None:
            raise _fail(
                target,
                f"seed {seed}: stepping the env after {what} changed the get_state() snapshot, "
                f"{change}; get_state() must return independent copies and set_state() must "
                "copy what it is given, never keep references to the snapshot's mutable parts",
            )

    continue_from(env, "get_state()")
    _guarded(env, "set_state()", env.set_state, snapshot)
    continue_from(env, "set_state()")
    if second is not None:
        _guarded(second, "set_state()", second.set_state, snapshot)
        continue_from(second, "set_state() on another instance")


def _check_non_str_action_raises(env: Env, seed: int) -> None:
    env.reset(seed=seed)
    for action in (None, 1, b"\\boxed{1}", ["text"]):
        expect_raises(
            _failer(env),
            TypeError,
            functools.partial(env.step, action),  # type: ignore[arg-type]  # not a str, on purpose
            f"step({action!r})",
            " (actions are str)",
        )


# ---------------------------------------------------------------- return value checks


def _check_observation(env: Env, obs: Any, where: str) -> None:
    expected = env.metadata.get("observation_type", str)
    if not isinstance(obs, expected):
        raise _fail(
            env,
            f"{where}: the observation must be a {getattr(expected, '__name__', expected)}, "
            f"got {type_name(obs)}: {short_repr(obs)}",
        )


def _check_info(env: Env, info: Any, where: str) -> None:
    if not isinstance(info, dict):
        raise _fail(env, f"{where}: info must be a dict, got {type_name(info)}")
    for key in _FLAG_INFO_KEYS:
        if key in info and type(info[key]) is not bool:
            raise _fail(
                env,
                f"{where}: info[{key!r}] must be a Python bool, got "
                f"{type_name(info[key])}: {info[key]!r} (wrap it in bool())",
            )
    metrics = info.get("metrics")
    if metrics is not None and not (
        isinstance(metrics, dict)
        and all(_is_real(v) for v in metrics.values())
        and all(isinstance(k, str) for k in metrics)
    ):
        raise _fail(env, f"{where}: info['metrics'] must map str to numbers, got {metrics!r}")


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _check_reset_return(env: Env, result: Any) -> tuple[Any, dict[str, Any]]:
    if not isinstance(result, tuple) or len(result) != 2:
        raise _fail(env, f"reset() must return a tuple (obs, info), got {short_repr(result)}")
    obs, info = result
    _check_observation(env, obs, "reset()")
    _check_info(env, info, "reset()")
    return obs, info


def _check_step_return(env: Env, result: Any, where: str) -> tuple[Any, ...]:
    if not isinstance(result, tuple) or len(result) != 5:
        raise _fail(
            env,
            f"{where}: step() must return a tuple (obs, reward, terminated, truncated, info), "
            f"got {short_repr(result)}",
        )
    obs, reward, terminated, truncated, info = result
    _check_observation(env, obs, where)
    if not _is_real(reward) or not math.isfinite(reward):
        raise _fail(
            env,
            f"{where}: reward must be a finite real number, got {type_name(reward)}: {reward!r}",
        )
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if type(flag) is not bool:
            raise _fail(
                env,
                f"{where}: {name} must be a Python bool, got {type_name(flag)}: {flag!r} "
                "(wrap it in bool())",
            )
    if terminated and truncated and env.unwrapped is env:
        raise _fail(
            env,
            f"{where}: terminated and truncated are both True; an episode ends for one "
            "reason: the task ended (terminated) or a limit cut it off (truncated)",
        )
    _check_info(env, info, where)
    return result


# -------------------------------------------------------------------------- helpers


def _guarded(env: Env, call: str, method: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """Call `method` and fail if it changed the global `random` or `numpy.random` state."""
    py_state = random.getstate()
    np_state = np.random.get_state()
    result = method(*args, **kwargs)
    if random.getstate() != py_state:
        raise _fail(
            env,
            f"{call} changed the global `random` state; draw from self.np_random instead",
        )
    if not same(np.random.get_state(), np_state):
        raise _fail(
            env,
            f"{call} changed the global `numpy.random` state; draw from self.np_random instead",
        )
    return result


def _assert_same(env: Env, expected: list[Any], actual: list[Any], what: str, advice: str) -> None:
    """Fail with the first difference between two transcripts."""
    difference = first_difference(expected, actual, _FIELDS)
    if difference is not None:
        raise _fail(env, f"{what}, {difference}; {advice}")
