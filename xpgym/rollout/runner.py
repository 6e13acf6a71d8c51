"""One episode, driven from inside a trainer's own rollout: the core of the adapter hooks.

verl's ``AgentLoopBase.run``, OpenRLHF's ``AgentExecutor.execute`` and RL2's env module are
all "given one dataset row and an async, token-in/token-out generate function, play one
episode". `run_episode` is that loop, written once:

1. the env named by an `EpisodeTask` (a dataset row: env id, reset seed, group id, env
   kwargs) is reset with the task's seed, so the ``n`` samples a trainer draws per row start
   from the same state and form one group (GRPO);
2. prompts are token-exact (`xpgym.core.chat.ChatPromptBuilder`: each prompt extends the
   previous prompt and response), so the turns satisfy the contract of
   `xpgym.core.trajectory` and lay out as `xpgym.training.layouts` rows with env tokens masked;
3. the trainer's engine is called through ``generate(prompt_ids, max_new_tokens)`` (the
   `TokenGenerate` protocol; each adapter wraps its engine in a few lines, and
   `generation_from_ids` turns bare token ids into a `Generation`);
4. env steps run in a worker thread (``asyncio.to_thread``), so a slow env does not stall the
   trainer's event loop;
5. the turns, the system prompt, the turn limit and the end are recorded by
   `xpgym.rollout.recorder.EpisodeRecorder`, as in the collector (`xpgym.rollout.collector`).

Limits, as in the collector (visible in the last turn's ``info`` and in ``Episode.info``):

* ``max_new_tokens`` per turn; ``max_response_tokens`` for everything after the first prompt
  (verl's ``rollout.response_length``: env tokens count too); ``max_total_tokens`` for the
  whole sequence (OpenRLHF ``max_len``). When no token is left for the next turn the
  episode ends: the last turn gets ``truncated=True`` and ``info["truncated_reason"] =
  "context"``. A first prompt that leaves no room raises `ValueError` (a configuration
  error: raise the limits or shorten the observation).
* ``max_turns``: the last turn gets ``truncated=True``, ``truncated_reason = "max_turns"``.
* A generation cut by its budget (``finish_reason == "length"``) is sent to the env as is,
  and its turn gets ``info["generation_truncated"] = True``.

Infrastructure failures (`xpgym.core.errors`): an env step that raises (an `InfraError`, a
``TimeoutError``, any exception: a crashed env, as in a vector env's failure isolation)
does not break the trainer's rollout: the turn is recorded with reward 0.0,
``truncated=True`` and the info of `xpgym.core.errors.step_failure_info`, and the episode
ends with ``Episode.outcome == "infra_error"``, as does one whose step info carries the
marker (a grader timeout, a remote 5xx, a broken tool backend). The trainer then keeps it
out of advantage statistics and the loss. A failing `reset` still raises.

Importing this module imports no trainer, torch or transformers.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from xpgym.core.chat import ChatPromptBuilder, observation_messages
from xpgym.core.env import Env
from xpgym.core.errors import step_failure_info
from xpgym.core.trajectory import Episode
from xpgym.core.vector.base import derive_seeds
from xpgym.rollout.env_pool import EnvPool, make_trainer_env
from xpgym.rollout.policies import Generation, Policy
from xpgym.rollout.recorder import EpisodeRecorder

__all__ = [
    "EpisodeTask",
    "TokenGenerate",
    "generation_from_ids",
    "isolated_step",
    "make_tasks",
    "policy_generate",
    "run_episode",
    "task_env_pool",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EpisodeTask:
    """What one dataset row asks for: an env, its reset seed and the group it belongs to.

    Trainers want a dataset of prompts; an xpgym "prompt" is one of these, stored as JSON
    (`to_json`) in the row (verl ``extra_info``, OpenRLHF ``label``, RL2 ``extra_info``).
    Every sample a trainer draws from the row plays the same task, so they start from the
    same state and share `group_id`.

    Attributes:
        env_id: A registered env id (``xpgym.make`` argument).
        seed: Reset seed (non-negative int).
        group_id: Id of the group of episodes that start from this state.
        env_kwargs: Keyword arguments for ``xpgym.make`` (JSON-compatible).
    """

    env_id: str
    seed: int
    group_id: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.env_id, str) or not self.env_id:
            raise ValueError(f"env_id must be a non-empty str, got {self.env_id!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {self.seed!r}")

    def to_json(self) -> str:
        """One line of JSON; `from_json` inverts it."""
        return json.dumps(
            {
                "env_id": self.env_id,
                "seed": self.seed,
                "group_id": self.group_id,
                "env_kwargs": dict(self.env_kwargs),
            },
            sort_keys=True,
        )

    def recorder(
        self,
        reset_info: Mapping[str, Any],
        *,
        max_turns: int | None = None,
        system_prompt: str | None = None,
    ) -> EpisodeRecorder:
        """The `EpisodeRecorder` of an episode of this task (its env id, seed and group id),
        from the env's reset info; `max_turns` and `system_prompt` as there."""
        return EpisodeRecorder(
            env_id=self.env_id,
            seed=self.seed,
            group_id=self.group_id,
            reset_info=reset_info,
            max_turns=max_turns,
            system_prompt=system_prompt,
        )

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any]) -> EpisodeTask:
        """Parse `to_json` output (or the already-decoded dict); unknown keys raise."""
        data = json.loads(text) if isinstance(text, str) else dict(text)
        unknown = set(data) - {"env_id", "seed", "group_id", "env_kwargs"}
        if unknown:
            raise ValueError(f"unknown EpisodeTask keys {sorted(unknown)} in {text!r:.120}")
        return cls(**data)


def make_tasks(
    env_id: str,
    num_tasks: int,
    *,
    seed: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
) -> list[EpisodeTask]:
    """`num_tasks` tasks of one env with distinct reset seeds derived from `seed`.

    Task ``i`` has seed ``derive_seeds(seed, num_tasks)[i]`` (independent of `num_tasks`) and
    group id ``f"{env_id}/{seed}/{i}"``.
    """
    if isinstance(num_tasks, bool) or not isinstance(num_tasks, int) or num_tasks < 0:
        raise ValueError(f"num_tasks must be a non-negative int, got {num_tasks!r}")
    seeds = derive_seeds(seed, num_tasks)
    return [
        EpisodeTask(env_id, s, f"{env_id}/{seed}/{i}", dict(env_kwargs or {}))
        for i, s in enumerate(seeds)
    ]


def task_env_pool(wrap: Callable[[Env], Env] | None = None) -> EnvPool[EpisodeTask, Env]:
    """An `EnvPool` for `EpisodeTask`s: envs are shared by tasks of the same env id and kwargs.

    Trainers build a fresh agent object per sample; making a dataset-backed env each time
    would reload its data. Every episode starts with ``reset(seed=task.seed)``, so reuse
    does not change what happens.

    Args:
        wrap: Applied to every new env (e.g. ``lambda env: HorizonSchedule(env, schedule)``;
            the pool then hands out the wrapped env).
    """
    if wrap is None:
        return EnvPool(_make_task_env, key=_env_key)
    return EnvPool(lambda task: wrap(_make_task_env(task)), key=_env_key)


def _make_task_env(task: EpisodeTask) -> Env:
    return make_trainer_env(task.env_id, **dict(task.env_kwargs))


def _env_key(task: EpisodeTask) -> str:
    return json.dumps([task.env_id, dict(task.env_kwargs)], sort_keys=True)


class TokenGenerate(Protocol):
    """An engine call: continue `prompt_ids` with at most `max_new_tokens` tokens.

    Returns a `Generation` whose ``token_ids`` are the new tokens (stop token included if
    sampled), ``text`` the text sent to the env, ``finish_reason`` ``"length"`` when the
    budget ran out, and ``logprobs`` the sampler's log-probabilities when available.
    """

    def __call__(self, prompt_ids: list[int], max_new_tokens: int) -> Awaitable[Generation]: ...


def generation_from_ids(
    tokenizer: Any,
    token_ids: Sequence[int],
    *,
    logprobs: Sequence[float] | None,
    stop_token_ids: Sequence[int],
    max_new_tokens: int,
    finish_reason: str | None = None,
) -> Generation:
    """A `Generation` from an engine that returns token ids only (verl, SGLang).

    ``text`` is ``tokenizer.decode`` of the ids without a final stop token, special tokens
    skipped. ``finish_reason``: the given one if ``"stop"``/``"length"``, else ``"stop"``
    when the last id is a stop token, ``"length"`` when `max_new_tokens` ids came without
    one, ``"stop"`` otherwise (the engine stopped on a stop string).
    """
    ids = [int(t) for t in token_ids]
    stops = {int(t) for t in stop_token_ids}
    ended = bool(ids) and ids[-1] in stops
    if finish_reason not in ("stop", "length"):
        finish_reason = "length" if not ended and len(ids) >= max_new_tokens else "stop"
    text_ids = ids[:-1] if ended else ids
    text = tokenizer.decode(text_ids, skip_special_tokens=True)
    return Generation(
        text=text,
        finish_reason=finish_reason,  # type: ignore[arg-type]
        token_ids=ids,
        logprobs=None if logprobs is None else [float(x) for x in logprobs],
    )


def policy_generate(policy: Policy) -> TokenGenerate:
    """A `TokenGenerate` over an xpgym `Policy` that takes token-id prompts (e.g. `HFPolicy`).

    For CPU dry runs and tests, where a local model stands in for the trainer's engine. Each
    call runs ``policy.generate([prompt_ids])`` in a worker thread; a generation longer
    than the budget is cut to it (``finish_reason="length"``, text decoded again).
    """
    tokenizer = policy.tokenizer
    stops = getattr(policy, "stop_token_ids", None) or [tokenizer.eos_token_id]

    async def generate(prompt_ids: list[int], max_new_tokens: int) -> Generation:
        (generation,) = await asyncio.to_thread(policy.generate, [list(prompt_ids)])
        ids = generation.token_ids
        if ids is None:
            raise ValueError(f"{type(policy).__name__} returned no token_ids")
        if len(ids) <= max_new_tokens:
            return generation
        logprobs = None if generation.logprobs is None else generation.logprobs[:max_new_tokens]
        return generation_from_ids(
            tokenizer,
            ids[:max_new_tokens],
            logprobs=logprobs,
            stop_token_ids=stops,
            max_new_tokens=max_new_tokens,
            finish_reason="length",
        )

    return generate


async def run_episode(
    env: Env,
    task: EpisodeTask,
    generate: TokenGenerate,
    prompt_builder: ChatPromptBuilder,
    *,
    max_new_tokens: int,
    max_turns: int | None = None,
    max_response_tokens: int | None = None,
    max_total_tokens: int | None = None,
    system_prompt: str | None = None,
) -> Episode:
    """Play one episode of `task` on `env` with `generate` (see the module docstring).

    Args:
        env: A single-agent env of ``task.env_id`` (e.g. from `task_env_pool`).
        task: Gives the reset seed and the group id.
        generate: The engine (`TokenGenerate`).
        prompt_builder: Builds token-exact prompts over the policy's tokenizer.
        max_new_tokens: Per-turn token budget.
        max_turns: End the episode after this many turns (None: the env ends it).
        max_response_tokens: Budget of all tokens after the first prompt (None: no limit).
        max_total_tokens: Budget of the whole sequence (None: no limit).
        system_prompt: Prepended as a system message unless the first observation (chat
            messages) starts with one.

    Returns:
        A complete `Episode` (its last turn terminated or truncated) with ``env_id``,
        ``seed`` and ``group_id`` from `task`, token ids and the engine's log-probs.

    Raises:
        ValueError: the first prompt leaves no room to generate.
        Exception: what ``env.reset`` raises (a failing step ends the episode instead,
            with ``outcome == "infra_error"``).
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens!r}")
    observation, reset_info = await asyncio.to_thread(env.reset, seed=task.seed)
    recorder = task.recorder(reset_info, max_turns=max_turns, system_prompt=system_prompt)
    prompt = prompt_builder.start(recorder.first_messages(observation))
    first_length = len(prompt)
    while True:
        budget = _budget(
            len(prompt), first_length, max_new_tokens, max_response_tokens, max_total_tokens
        )
        if budget < 1:
            if not recorder.episode.turns:
                raise ValueError(
                    f"the first prompt of {task.env_id!r} (seed {task.seed}) has {first_length} "
                    f"tokens and leaves no room to generate (max_total_tokens="
                    f"{max_total_tokens}); raise the limit or shorten the observation"
                )
            recorder.end_for_context(observation, prompt)
            break
        generation = await generate(list(prompt), budget)
        if generation.token_ids is None:
            raise ValueError("the engine returned a Generation without token_ids")
        step = await isolated_step(env, generation.text, observation)
        next_observation, reward, terminated, truncated, info = step
        if recorder.record(
            observation, generation, reward, terminated, truncated, info, prompt_ids=prompt
        ):
            break
        new_messages = observation_messages(next_observation, info, first=False)
        prompt = prompt_builder.extend(prompt, generation.token_ids, new_messages)
        observation = next_observation
    return recorder.episode


async def isolated_step(
    env: Env, action: str, observation: Any
) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    """``env.step(action)`` in a worker thread; a step that raises gives
    ``(observation, 0.0, False, True, step_failure_info(exc))`` instead (logged): a truncated
    step marked as an infrastructure failure (`xpgym.core.errors`), as a vector env reports a
    failed sub-env. `observation` is the one the policy acted on."""
    try:
        return await asyncio.to_thread(env.step, action)
    except Exception as exc:  # isolation: a broken env is not the policy's doing
        logger.warning("%r: the env step failed: %r", env, exc)
        return observation, 0.0, False, True, step_failure_info(exc)


def _budget(
    length: int,
    first_length: int,
    max_new_tokens: int,
    max_response_tokens: int | None,
    max_total_tokens: int | None,
) -> int:
    budget = max_new_tokens
    if max_response_tokens is not None:
        budget = min(budget, max_response_tokens - (length - first_length))
    if max_total_tokens is not None:
        budget = min(budget, max_total_tokens - length)
    return budget
