"""`RewardWrapper`: reward functions (`xpgym.core.rewards`) computed on an env's steps.

Per step ``t`` with env reward ``e_t``, reward functions ``f_i`` with weights ``w_i`` and a
format reward ``g`` (weight ``w_g``), the step's reward is::

    r_t = [e_t if env_reward == "add" else 0]
          + aggregate_t(sum_i w_i * f_i(step t))       # "sum" | "last" | "max"
          + w_g * g(step t)                             # shaping, never aggregated

With ``final_only=True`` the ``f_i`` run only on the step that ends the episode (outcome
rewards: the steps before give 0 from them). The format reward runs on every step.

Metrics: each step on which rewards ran puts into ``info["metrics"]`` (a new dict that
keeps the env's own metrics) ``<name>``: reward ``name``'s *episode aggregate so far*
(unweighted; under its own aggregator: the sum, the last value or the running maximum of
its values), ``<name>/<key>``: each metric the function returned on this step, and
``format_reward``: the sum of the format rewards so far (unweighted). The recorder keeps
each key's last value in ``Episode.info["metrics"]``, so an episode's metrics are the
episode aggregates of its rewards (`xpgym.rollout.recorder`).

Failures: a reward function that raises, or returns something other than a number or
``{"reward": r, **metrics}``, is an infrastructure failure (`xpgym.core.errors`). The
exception is logged (WARNING, with its traceback) and the step's info gets the marker
``info["infra_error"] = {"kind": "grader_error", "message": ...}`` (``"grader_timeout"``
for an async reward past its `Reward` ``timeout_s``, or one that raised ``TimeoutError``);
that step's reward is the env part alone. On a step whose info already carries an
infrastructure failure no reward function runs.

Place this wrapper outside the limit wrappers (`MaxTurns`) so that it sees their
truncation as the final step; a loop-side limit (``EpisodeRecorder(max_turns=...)``) ends
episodes without telling the env, so ``"last"`` and ``final_only`` then give nothing.
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from xpgym.core.env import Env, Wrapper
from xpgym.core.errors import INFRA_ERROR_KEY, InfraCause, find_infra_cause
from xpgym.core.rewards import (
    Aggregate,
    Reward,
    RewardAggregator,
    RewardContext,
    RewardOutput,
    parse_reward_output,
    run_awaitables,
    well_formed_tool_call,
)
from xpgym.core.trajectory import Turn

__all__ = ["FORMAT_REWARD_NAME", "RewardWrapper"]

logger = logging.getLogger(__name__)

FORMAT_REWARD_NAME = "format_reward"
"""The name of the format reward in ``info["metrics"]``."""


class _RewardError(Exception):
    def __init__(self, name: str, error: BaseException) -> None:
        super().__init__(f"reward {name!r} failed: {type(error).__name__}: {error}")
        self.error = error
        import asyncio  # only on this failure path: `import xpgym` stays light

        timed_out = isinstance(error, (TimeoutError, asyncio.TimeoutError))
        self.kind = "grader_timeout" if timed_out else "grader_error"


class RewardWrapper(Wrapper[Any]):
    """Compute reward functions on every step (see the module docstring for the formula,
    metrics and failures).

    Args:
        env: The env.
        rewards: Reward functions (plain callables, weight 1, named after the function) or
            `Reward`\\ s; may be empty when only a format reward is wanted.
        aggregate: How the weighted sum of `rewards` becomes per-step rewards over the
            trajectory: ``"sum"`` (default), ``"last"`` or ``"max"``
            (`xpgym.core.rewards.RewardAggregator`).
        env_reward: ``"add"`` (default): the env's own reward is kept and the rewards are
            added to it; ``"replace"``: the step's reward is the rewards' alone.
        format_reward: `None` (default): none; a number ``w``: ``w`` on every step that is a
            well-formed tool call (`xpgym.core.rewards.well_formed_tool_call`); a callable
            or a `Reward`: its value (times its weight) on every step.
        final_only: Run `rewards` only on the step that ends the episode.

    Raises:
        TypeError: a reward is not callable or declares what it cannot be given.
        ValueError: an unknown `aggregate` or `env_reward`, or two rewards share a name.
    """

    def __init__(
        self,
        env: Env,
        rewards: Sequence[Callable[..., Any] | Reward] = (),
        *,
        aggregate: Aggregate = "sum",
        env_reward: Literal["add", "replace"] = "add",
        format_reward: float | Callable[..., Any] | Reward | None = None,
        final_only: bool = False,
    ) -> None:
        super().__init__(env)
        if env_reward not in ("add", "replace"):
            raise ValueError(f"env_reward must be 'add' or 'replace', got {env_reward!r}")
        self.rewards: tuple[Reward, ...] = tuple(
            r if isinstance(r, Reward) else Reward(r) for r in rewards
        )
        self.format_reward = _format_reward(format_reward)
        names = [r.name for r in self.rewards]
        if self.format_reward is not None:
            names.append(self.format_reward.name)
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(
                f"reward names must be distinct, got {duplicates} more than once; pass "
                "Reward(fn, name=...) to name them"
            )
        self.aggregate = aggregate
        self.env_reward = env_reward
        self.final_only = bool(final_only)
        self._combined = RewardAggregator(aggregate)
        self._each = {r.name: RewardAggregator(aggregate) for r in self.rewards}
        self._format_total = 0.0
        self._observation: Any = None
        self._turns: list[Turn] = []

    # ------------------------------------------------------------------------ episode

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._combined.reset()
        for aggregator in self._each.values():
            aggregator.reset()
        self._format_total = 0.0
        self._observation = obs
        self._turns = []
        return obs, info

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step the env and add the rewards (module docstring)."""
        obs, env_reward, terminated, truncated, info = self.env.step(action)
        reward = float(env_reward) if self.env_reward == "add" else 0.0
        context = RewardContext(
            action=action,
            observation=self._observation,
            next_observation=obs,
            reward=float(env_reward),
            info=info,
            turn=len(self._turns),
            turns=tuple(self._turns),
            terminated=bool(terminated),
            truncated=bool(truncated),
            env=self.unwrapped,
        )
        info = dict(info)
        if find_infra_cause(info) is None:
            try:
                reward += self._score(context, info)
            except _RewardError as failure:
                logger.warning("%s on %r", failure, self, exc_info=failure.error)
                info[INFRA_ERROR_KEY] = InfraCause(failure.kind, str(failure)).to_dict()
        self._turns.append(_turn(context, reward, info))
        self._observation = obs
        return obs, reward, terminated, truncated, info

    def _score(self, context: RewardContext, info: dict[str, Any]) -> float:
        """The rewards' part of the step's reward; puts the metrics in `info` (the
        wrapper's copy of the env's info)."""
        run = [] if self.final_only and not context.final else list(self.rewards)
        if self.format_reward is not None:
            run.append(self.format_reward)
        if not run:
            return 0.0
        outputs = _evaluate(run, context)
        metrics: dict[str, float] = {}
        reward = 0.0
        combined: float | None = None
        for spec, output in zip(run, outputs, strict=True):
            weighted = spec.weight * output.reward
            if spec is self.format_reward:
                self._format_total += output.reward
                metrics[spec.name] = self._format_total
                reward += weighted
            else:
                combined = (combined or 0.0) + weighted
                aggregator = self._each[spec.name]
                aggregator.step(output.reward, context.final)
                metrics[spec.name] = aggregator.running
            metrics.update({f"{spec.name}/{k}": v for k, v in output.metrics.items()})
        reward += self._combined.step(combined, context.final)
        info["metrics"] = {**(info.get("metrics") or {}), **metrics}
        return reward

    # -------------------------------------------------------------------------- state

    def get_wrapper_state(self) -> dict[str, Any]:
        """The aggregators' running values, the format reward's sum, the last observation
        and the episode's turns so far (a deep copy)."""
        return copy.deepcopy(
            {
                "combined": self._combined.get_state(),
                "each": {name: a.get_state() for name, a in self._each.items()},
                "format_total": self._format_total,
                "observation": self._observation,
                "turns": self._turns,
            }
        )

    def set_wrapper_state(self, state: Mapping[str, Any]) -> None:
        """Restore what `get_wrapper_state` returned."""
        state = copy.deepcopy(dict(state))
        self._combined.set_state(state["combined"])
        for name, aggregator in self._each.items():
            aggregator.set_state(state["each"][name])
        self._format_total = float(state["format_total"])
        self._observation = state["observation"]
        self._turns = list(state["turns"])


def _format_reward(value: float | Callable[..., Any] | Reward | None) -> Reward | None:
    if value is None or isinstance(value, Reward):
        return value
    if callable(value):
        return Reward(value, name=FORMAT_REWARD_NAME)
    return Reward(well_formed_tool_call, weight=value, name=FORMAT_REWARD_NAME)


def _turn(context: RewardContext, reward: float, info: Mapping[str, Any]) -> Turn:
    return Turn(
        observation=context.observation,
        action=context.action,
        reward=reward,
        terminated=context.terminated,
        truncated=context.truncated,
        info=dict(info),
    )


def _evaluate(rewards: Sequence[Reward], context: RewardContext) -> list[RewardOutput]:
    """Call every reward; await the async ones together on the reward loop.

    Raises:
        _RewardError: the first reward (in order) that raised or returned a bad value.
    """
    results: list[Any] = []
    pending: dict[int, Any] = {}
    for i, spec in enumerate(rewards):
        try:
            value = spec.call(context)
        except Exception as exc:
            value = exc
        if inspect.isawaitable(value):
            pending[i] = value
        results.append(value)
    for i, value in zip(pending, run_awaitables(list(pending.values())), strict=True):
        results[i] = value
    outputs = []
    for spec, value in zip(rewards, results, strict=True):
        if isinstance(value, BaseException):
            raise _RewardError(spec.name, value)
        try:
            outputs.append(parse_reward_output(value, spec.name))
        except (TypeError, ValueError) as exc:
            raise _RewardError(spec.name, exc) from None
    return outputs
