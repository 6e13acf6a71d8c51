"""The one episode recorder: a policy's turns on an env -> `Turn`\\ s of an `Episode`.

Every loop that plays a single-agent env with a policy keeps the same books. The loops:

* `xpgym.rollout.collector.RolloutCollector`: many episodes at once over a vector env;
* `xpgym.rollout.runner.run_episode`: one episode inside a trainer's async rollout
  (verl, OpenRLHF);
* RL2's env module (`xpgym.adapters.rl2`): one episode, driven turn by turn by RL2.

Each loop owns how it prompts, generates and steps; `EpisodeRecorder` owns the rest, once:

1. the first messages: the reset observation as chat messages with the system prompt in
   front (`xpgym.core.chat.with_system_prompt`);
2. each turn (`record`): the observation the policy acted on, its `Generation` and the
   env's step become a `Turn`. A generation cut by its token budget
   (``finish_reason == "length"``) was still sent to the env as the action; its turn gets
   ``info["generation_truncated"] = True``;
3. the loop-side limits: `max_turns` (`TurnLimit`) and the context (`end_for_context`: the
   next prompt does not fit), each ending the episode as truncated with
   ``info["truncated_reason"]`` on the last turn and in ``Episode.info``;
4. infrastructure failures (`xpgym.core.errors.find_infra_cause` of each step's info): the
   turn gets the marker ``info["infra_error"] = {"kind", "message"}``, the episode
   ``Episode.infra_error`` (so ``outcome == "infra_error"``; the first cause is kept), and
   the episode ends there, truncated with ``truncated_reason = "infra_error"`` unless the env
   ended it on that step;
5. metrics: ``Episode.info["metrics"]`` holds, for every key any turn reported in
   ``info["metrics"]``, the **last** value reported (as a float), so an episode-level
   number (an F1 on the final answer, a `RewardWrapper`'s running aggregate of a reward)
   ends up as the episode's value; an episode whose turns report no metrics has no such
   key. `xpgym.core.trajectory.episode_metrics` averages them over episodes for trainers'
   logs and the eval summary;
6. the end: ``Episode.info["episode"]`` is the last turn's ``info["episode"]`` (the summary
   of `EpisodeStatistics`), when there is one.

Two turn limits
---------------
`xpgym.core.wrappers.MaxTurns` is the *env-side* limit: a wrapper in the env's stack (its
count is part of ``get_state()``), seen by every loop and every trainer that steps the
env: its step returns ``truncated=True`` and ``info["truncated_reason"] = "max_turns"``.
`TurnLimit` (``EpisodeRecorder(max_turns=...)``) is the *loop-side* limit, for a loop whose
caller bounds the episode (a trainer's ``max_turns`` setting) without changing the env: the
env is not told; the recorder ends the episode after that many turns, with the same mark on
the last turn and ``Episode.info["truncated_reason"] = "max_turns"``. With both, the first
to be reached ends the episode; on the same turn the env's own ending wins and the
recorder adds nothing (``Episode.info`` names loop-side endings only).
"""

from __future__ import annotations

import copy
import logging
import numbers
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from xpgym.core.chat import Message, observation_messages, with_system_prompt
from xpgym.core.errors import INFRA_ERROR_KEY, find_infra_cause
from xpgym.core.trajectory import Episode, Turn
from xpgym.rollout.policies import Generation

__all__ = ["EpisodeRecorder", "TurnLimit"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnLimit:
    """The loop-side turn limit (see the module docstring for the env-side one).

    Attributes:
        max_turns: Turns after which the loop ends the episode; `None`: no limit.
        reason: ``"max_turns"``, the ``truncated_reason`` of an episode it ends.

    Raises:
        ValueError: `max_turns` is neither `None` nor a positive int.
    """

    max_turns: int | None = None
    reason: ClassVar[str] = "max_turns"

    def __post_init__(self) -> None:
        if self.max_turns is None:
            return
        try:
            max_turns = operator.index(self.max_turns)
        except TypeError:
            max_turns = 0
        if isinstance(self.max_turns, bool) or max_turns < 1:
            raise ValueError(f"max_turns must be a positive int or None, got {self.max_turns!r}")
        object.__setattr__(self, "max_turns", max_turns)

    def reached(self, turns: int) -> bool:
        """Whether an episode with `turns` turns has used up the limit."""
        return self.max_turns is not None and turns >= self.max_turns


class EpisodeRecorder:
    """Records one episode (see the module docstring).

    Usage, in a loop::

        recorder = EpisodeRecorder(env_id=..., seed=..., group_id=..., reset_info=info,
                                   max_turns=..., system_prompt=...)
        prompt = build(recorder.first_messages(observation))
        while not recorder.done:
            if prompt does not fit: recorder.end_for_context(observation, prompt_ids); break
            generation = policy(prompt)
            next_observation, reward, terminated, truncated, info = env.step(generation.text)
            recorder.record(observation, generation, reward, terminated, truncated, info,
                            prompt_ids=prompt_ids)
            ...
        episode = recorder.episode

    Args:
        env_id, seed, group_id: Of the `Episode`.
        reset_info: The env's reset info, kept (a shallow copy) as
            ``Episode.info["reset_info"]``.
        max_turns: The loop-side turn limit (`TurnLimit`); `None`: only the env ends it.
        system_prompt: Put in front of the first messages unless they start with a system
            message.

    Attributes:
        episode: The `Episode` so far; complete once `done`.
        done: Whether the episode has ended (the env or a limit ended it).
    """

    def __init__(
        self,
        *,
        env_id: str,
        seed: int | None,
        group_id: str | None,
        reset_info: Mapping[str, Any],
        max_turns: int | None = None,
        system_prompt: str | None = None,
    ) -> None:
        self.limit = TurnLimit(max_turns)
        self.system_prompt = system_prompt
        self.episode = Episode(
            env_id=env_id, seed=seed, group_id=group_id, info={"reset_info": dict(reset_info)}
        )
        self.done = False

    def first_messages(self, observation: Any) -> list[Message]:
        """The chat messages of the first prompt: the reset observation's messages
        (`observation_messages`), with the system prompt in front."""
        return with_system_prompt(
            observation_messages(observation, {}, first=True), self.system_prompt
        )

    def resume(self, turns: list[Turn]) -> None:
        """Start this episode with copies of `turns`, the first turns of another episode
        that this one continues (a fork branch, `xpgym.rollout.collector`); their metrics
        count as recorded. None of them may have ended the episode.

        Raises:
            RuntimeError: this episode already has turns.
            ValueError: one of `turns` is terminated or truncated.
        """
        if self.episode.turns:
            raise RuntimeError(
                f"resume starts an episode; this one already has {len(self.episode.turns)} turns"
            )
        for t, turn in enumerate(turns):
            if turn.terminated or turn.truncated:
                raise ValueError(f"turn {t} ended its episode; a branch continues before the end")
            self._collect_metrics(turn.info.get("metrics"))
            self.episode.turns.append(copy.deepcopy(turn))

    def record(
        self,
        observation: Any,
        generation: Generation,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: Mapping[str, Any],
        *,
        prompt_ids: list[int] | None,
        prompt_ids_checked: bool = False,
    ) -> bool:
        """Append the turn in which the policy answered `observation` with `generation`.

        Args:
            observation: What the policy saw.
            generation: What it wrote (``text`` was the env's action); its ``token_ids``
                and ``logprobs`` become the turn's ``response_ids`` and
                ``response_logprobs``.
            reward, terminated, truncated, info: The env's step.
            prompt_ids: The ids of the prompt the policy was given, if known.
            prompt_ids_checked: The caller vouches that `prompt_ids` is a list of plain
                non-negative ints that nothing changes from now on (the collector's prompts
                from `ChatPromptBuilder`): the turn keeps that list instead of a checked copy.

        Returns:
            Whether the episode is over: the env ended it, an infrastructure failure did, or
            the turn limit did (then the turn is marked truncated with ``truncated_reason``
            ``"infra_error"`` or ``"max_turns"``).

        Raises:
            RuntimeError: the episode has already ended.
        """
        self._check_running()
        turn_info = dict(info)
        if generation.finish_reason == "length":
            turn_info["generation_truncated"] = True
        cause = find_infra_cause(info)
        if cause is not None:
            turn_info[INFRA_ERROR_KEY] = cause.to_dict()
            if self.episode.infra_error is None:
                self.episode.infra_error = cause
        self._collect_metrics(info.get("metrics"))
        turns = self.episode.turns
        turns.append(
            Turn(
                observation=observation,
                action=generation.text,
                reward=float(reward),
                terminated=bool(terminated),
                truncated=bool(truncated),
                info=turn_info,
                prompt_ids=None if prompt_ids_checked else prompt_ids,
                response_ids=generation.token_ids,
                response_logprobs=generation.logprobs,
            )
        )
        if prompt_ids_checked:
            turns[-1].prompt_ids = prompt_ids
        if terminated or truncated:
            self._end()
        elif cause is not None:
            self._end(truncated_reason="infra_error")
        elif self.limit.reached(len(turns)):
            self._end(truncated_reason=self.limit.reason)
        return self.done

    def end_for_context(self, observation: Any, prompt_ids: list[int] | None) -> None:
        """End the episode because its next prompt does not fit (``"context"``).

        The last turn is marked ``truncated=True``, ``info["truncated_reason"] =
        "context"``. An episode without turns (its very first prompt does not fit) gets one
        placeholder turn instead: `observation`, ``action=""``, reward 0.0,
        ``truncated=True``, ``info = {"truncated_reason": "context", "generation_skipped":
        True}``, the given `prompt_ids` and, when they are known, empty ``response_ids`` and
        ``response_logprobs``.

        Raises:
            RuntimeError: the episode has already ended.
        """
        self._check_running()
        if not self.episode.turns:
            known = prompt_ids is not None
            self.episode.turns.append(
                Turn(
                    observation=observation,
                    action="",
                    reward=0.0,
                    truncated=True,
                    info={"truncated_reason": "context", "generation_skipped": True},
                    prompt_ids=prompt_ids,
                    response_ids=[] if known else None,
                    response_logprobs=[] if known else None,
                )
            )
        self._end(truncated_reason="context")

    def _collect_metrics(self, metrics: Any) -> None:
        if metrics is None or not isinstance(metrics, Mapping) or not metrics:
            return  # (None first: most turns have no metrics, and a Mapping check costs)
        collected = self.episode.info.setdefault("metrics", {})
        for key, value in metrics.items():
            if isinstance(value, numbers.Real):
                collected[str(key)] = float(value)
            else:
                logger.warning("metric %r is %r, not a real number; not recorded", key, value)

    def _end(self, truncated_reason: str | None = None) -> None:
        last = self.episode.turns[-1]
        if "episode" in last.info:
            self.episode.info["episode"] = last.info["episode"]
        if truncated_reason is not None:
            last.truncated = True
            last.info["truncated_reason"] = truncated_reason
            self.episode.info["truncated_reason"] = truncated_reason
        self.done = True

    def _check_running(self) -> None:
        if self.done:
            raise RuntimeError(
                f"the episode of {self.episode.env_id!r} has already ended after "
                f"{len(self.episode.turns)} turns; start a new EpisodeRecorder"
            )
