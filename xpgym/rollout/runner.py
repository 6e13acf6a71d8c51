"""One episode, driven from inside a trainer's own rollout: the core of the adapter hooks.

verl's ``AgentLoopBase.run``, OpenRLHF's ``AgentExecutor.execute`` and TRL's
``rollout_func`` are all "given one dataset row and an async, token-in/token-out generate
function, play one episode". A hook is::

    with pool.lease(task) as env:  # pool = task_env_pool(): envs reused across samples
        episode = await run_episode(env, task, generate, shared_prompt_builder(tokenizer), ...)

(`xpgym.rollout.env_pool.EnvPool.lease`: the env goes back at the end of the block, or is
closed when the block raises). `run_episode` is the loop, written once:

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

RL2's env module is the other way round: RL2 calls once per turn (``reset``, then a
``step`` per turn). `LiveEpisode` is the episode between those calls (steps 1, 2, 4 and 5
above; `run_episode` plays one too), and `LiveEpisodes` holds them, each with its env's
lease, until the episode ends or the asyncio task that started it does.

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

Curricula: a task with ``curriculum`` (a shared curriculum file,
`xpgym.rollout.shared_curriculum`) gets its family's `DifficultyEnv` from `task_env_pool`,
`LiveEpisode.start` sets the file's current levels before the reset, and the episode is
observed by the file's scheduler when it ends: every hook that plays tasks (verl, OpenRLHF,
RL2) runs under one curriculum shared by all its workers, with nothing of its own.
`curriculum_task_pool` is the same for an in-process scheduler (TRL's ``rollout_func``).

Importing this module imports no trainer, torch or transformers.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from xpgym.core.chat import ChatPromptBuilder, PromptTokenizer, observation_messages
from xpgym.core.env import Env
from xpgym.core.errors import step_failure_info
from xpgym.core.trajectory import Episode
from xpgym.core.vector.base import derive_seeds
from xpgym.core.wrappers.episode_log import log_episodes_if_requested
from xpgym.rollout.curriculum import SuccessRateScheduler, family_of
from xpgym.rollout.env_pool import EnvLease, EnvPool, make_trainer_env
from xpgym.rollout.policies import FinishReason, Generation, Policy
from xpgym.rollout.recorder import EpisodeRecorder
from xpgym.rollout.shared_curriculum import SharedCurriculum, shared_curriculum

__all__ = [
    "EpisodeTask",
    "LiveEpisode",
    "LiveEpisodes",
    "TokenGenerate",
    "curriculum_task_pool",
    "generation_from_ids",
    "isolated_step",
    "make_tasks",
    "policy_generate",
    "run_episode",
    "shared_prompt_builder",
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
        curriculum: Path of a shared curriculum file
            (`xpgym.rollout.shared_curriculum.SharedCurriculum`), or None. With one, the env is
            the `DifficultyEnv` of ``env_id``'s family (any id of it; no `env_kwargs`), its
            level read from the file at each reset, and every finished episode is observed
            by the curriculum (`LiveEpisode`), in whichever process plays it.
    """

    env_id: str
    seed: int
    group_id: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    curriculum: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.env_id, str) or not self.env_id:
            raise ValueError(f"env_id must be a non-empty str, got {self.env_id!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {self.seed!r}")
        if self.curriculum is not None:
            if not isinstance(self.curriculum, str) or not self.curriculum:
                raise ValueError(f"curriculum must be a file path (str), got {self.curriculum!r}")
            if self.env_kwargs:
                raise ValueError(
                    f"a curriculum task's env is set by its ladder; got env_kwargs "
                    f"{dict(self.env_kwargs)} for {self.env_id!r}"
                )

    def to_json(self) -> str:
        """One line of JSON (``curriculum`` only when set); `from_json` inverts it."""
        data: dict[str, Any] = {
            "env_id": self.env_id,
            "seed": self.seed,
            "group_id": self.group_id,
            "env_kwargs": dict(self.env_kwargs),
        }
        if self.curriculum is not None:
            data["curriculum"] = self.curriculum
        return json.dumps(data, sort_keys=True)

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
        unknown = set(data) - {"env_id", "seed", "group_id", "env_kwargs", "curriculum"}
        if unknown:
            raise ValueError(f"unknown EpisodeTask keys {sorted(unknown)} in {text!r:.120}")
        return cls(**data)


def make_tasks(
    env_id: str,
    num_tasks: int,
    *,
    seed: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
    curriculum: str | os.PathLike[str] | None = None,
) -> list[EpisodeTask]:
    """`num_tasks` tasks of one env with distinct reset seeds derived from `seed`.

    Task ``i`` has seed ``derive_seeds(seed, num_tasks)[i]`` (independent of `num_tasks`) and
    group id ``f"{env_id}/{seed}/{i}"``; every task has `env_kwargs` and `curriculum` (a
    shared curriculum file's path, `EpisodeTask.curriculum`).
    """
    if isinstance(num_tasks, bool) or not isinstance(num_tasks, int) or num_tasks < 0:
        raise ValueError(f"num_tasks must be a non-negative int, got {num_tasks!r}")
    seeds = derive_seeds(seed, num_tasks)
    path = None if curriculum is None else os.fspath(curriculum)
    return [
        EpisodeTask(env_id, s, f"{env_id}/{seed}/{i}", dict(env_kwargs or {}), path)
        for i, s in enumerate(seeds)
    ]


_BUILDERS: dict[tuple[int, str], ChatPromptBuilder] = {}
_BUILDERS_LOCK = threading.Lock()


def shared_prompt_builder(
    tokenizer: PromptTokenizer, *, chat_template_kwargs: Mapping[str, Any] | None = None
) -> ChatPromptBuilder:
    """The `ChatPromptBuilder` of `tokenizer` (the same object) and `chat_template_kwargs`,
    made at the first call and shared after (thread-safe).

    A builder keeps no per-conversation state, and making one renders the chat template a
    few times: the trainers' hooks, which build their per-sample objects afresh (verl's
    agent loop, OpenRLHF's executor call, RL2's ``reset``, TRL's generation batch), share
    one per tokenizer instead. Each builder holds its tokenizer (so the object's id, part
    of the key, is never reused for another): a trainer's worker has one or two.
    """
    kwargs = dict(chat_template_kwargs or {})
    key = (id(tokenizer), json.dumps(kwargs, sort_keys=True, default=repr))
    with _BUILDERS_LOCK:
        builder = _BUILDERS.get(key)
    if builder is None:
        made = ChatPromptBuilder(tokenizer, chat_template_kwargs=kwargs)
        with _BUILDERS_LOCK:
            builder = _BUILDERS.setdefault(key, made)
    return builder


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
    if task.curriculum is not None:
        return log_episodes_if_requested(shared_curriculum(task.curriculum).make_env(task.env_id))
    return make_trainer_env(task.env_id, **dict(task.env_kwargs))


def _env_key(task: EpisodeTask) -> str:
    if task.curriculum is not None:  # one env per family, whatever the task's preset suffix
        return json.dumps(["curriculum", task.curriculum, family_of(task.env_id)])
    return json.dumps([task.env_id, dict(task.env_kwargs)], sort_keys=True)


def curriculum_task_pool(
    scheduler: SuccessRateScheduler | SharedCurriculum, wrap: Callable[[Env], Env] | None = None
) -> EnvPool[EpisodeTask, Env]:
    """An `EnvPool` for the `EpisodeTask`s of a trainer's hook under an in-process
    `scheduler`: a task's env is ``scheduler.make_env(task.env_id)`` (then `wrap`), shared by
    the tasks of one family whatever their suffix. Before each episode the hook calls
    ``set_difficulty_levels(scheduler.levels)`` on the leased env (it reaches the
    `DifficultyEnv` through `wrap`'s delegation); after a batch, ``scheduler.observe``.
    (Tasks that name a shared curriculum file need none of this: `task_env_pool`.)

    Raises:
        ValueError: (when an env is made) a task with ``env_kwargs``: the ladder sets them.
    """

    def build(task: EpisodeTask) -> Env:
        if task.env_kwargs:
            raise ValueError(
                f"a curriculum task's env is set by its ladder; got env_kwargs "
                f"{dict(task.env_kwargs)} for {task.env_id!r}"
            )
        env: Env = scheduler.make_env(task.env_id)
        return env if wrap is None else wrap(env)

    return EnvPool(build, key=lambda task: family_of(task.env_id))


class TokenGenerate(Protocol):
    """An engine call: continue `prompt_ids` with at most `max_new_tokens` tokens (both
    passed by position).

    Returns a `Generation` whose ``token_ids`` are the new tokens (stop token included if
    sampled), ``text`` the text sent to the env, ``finish_reason`` ``"length"`` when the
    budget ran out, and ``logprobs`` the sampler's log-probabilities when available.
    """

    def __call__(self, prompt_ids: list[int], max_new_tokens: int, /) -> Awaitable[Generation]: ...


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
    reason: FinishReason
    if finish_reason in ("stop", "length"):
        reason = "length" if finish_reason == "length" else "stop"
    else:
        reason = "length" if not ended and len(ids) >= max_new_tokens else "stop"
    text_ids = ids[:-1] if ended else ids
    text = tokenizer.decode(text_ids, skip_special_tokens=True)
    return Generation(
        text=text,
        finish_reason=reason,
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
        env: A single-agent env of ``task.env_id`` (e.g. leased from `task_env_pool`).
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
        ValueError: the first prompt leaves no room to generate, or the engine returned a
            `Generation` without token ids.
        Exception: what ``env.reset`` raises (a failing step ends the episode instead,
            with ``outcome == "infra_error"``).
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens!r}")
    live = await LiveEpisode.start(
        env, task, prompt_builder, max_turns=max_turns, system_prompt=system_prompt
    )
    first_length = len(live.prompt_ids)
    while not live.done:
        budget = _budget(
            len(live.prompt_ids),
            first_length,
            max_new_tokens,
            max_response_tokens,
            max_total_tokens,
        )
        if budget < 1:
            if not live.episode.turns:
                raise ValueError(
                    f"the first prompt of {task.env_id!r} (seed {task.seed}) has {first_length} "
                    f"tokens and leaves no room to generate (max_total_tokens="
                    f"{max_total_tokens}); raise the limit or shorten the observation"
                )
            live.end_for_context()
            break
        await live.play(await generate(list(live.prompt_ids), budget))
    return live.episode


class LiveEpisode:
    """One episode between its reset and its end, played one generation at a time.

    The part of an episode every trainer hook shares, whoever drives the turns:
    `run_episode` (the trainer hands over a generate function) and `LiveEpisodes` (the
    trainer calls once per turn, as RL2's env module). `start` resets the env with the
    task's seed and builds the first prompt; each `play` sends a generation to the env,
    records the turn (`xpgym.rollout.recorder.EpisodeRecorder`) and, unless the episode
    ended, builds the next prompt: the previous prompt, the generation's tokens and the
    next observation's messages (token-exact, `ChatPromptBuilder.extend`).

    Attributes:
        env, task, prompt_builder: As given to `start`.
        recorder: Keeps the episode's books (limits, infra errors, metrics).
        observation: What the policy acts on next (the last one, once the episode ended).
        prompt_ids: The prompt of the next generation: ``[P]`` token ids.
    """

    def __init__(
        self,
        env: Env,
        task: EpisodeTask,
        prompt_builder: ChatPromptBuilder,
        recorder: EpisodeRecorder,
        observation: Any,
    ) -> None:
        self.env = env
        self.task = task
        self.prompt_builder = prompt_builder
        self.recorder = recorder
        self.observation = observation
        self.prompt_ids = prompt_builder.start(recorder.first_messages(observation))

    @classmethod
    async def start(
        cls,
        env: Env,
        task: EpisodeTask,
        prompt_builder: ChatPromptBuilder,
        *,
        max_turns: int | None = None,
        system_prompt: str | None = None,
    ) -> LiveEpisode:
        """Reset `env` with ``task.seed`` (in a worker thread) and build the first prompt.
        A task with a ``curriculum`` first sets the file's current levels on `env` (a
        `DifficultyEnv`, or a wrapper of one, as `task_env_pool` makes).

        Args:
            max_turns, system_prompt: As `run_episode`'s.

        Raises:
            TypeError: a curriculum task on an env without ``set_difficulty_levels``.
            Exception: what ``env.reset`` raises, or reading the curriculum file.
        """
        observation, reset_info = await asyncio.to_thread(_reset_for, env, task)
        recorder = task.recorder(reset_info, max_turns=max_turns, system_prompt=system_prompt)
        return cls(env, task, prompt_builder, recorder, observation)

    @property
    def episode(self) -> Episode:
        """The episode so far; complete once `done`."""
        return self.recorder.episode

    @property
    def done(self) -> bool:
        """Whether the episode has ended."""
        return self.recorder.done

    async def play(self, generation: Generation) -> bool:
        """Send ``generation.text`` to the env (`isolated_step`) and record the turn with
        `prompt_ids` as its prompt; unless the episode ended, move on to the next
        observation and prompt.

        Returns:
            Whether the episode has ended (`EpisodeRecorder.record`).

        Raises:
            ValueError: `generation` has no ``token_ids`` (the next prompt extends them).
            RuntimeError: the episode has already ended.
        """
        if generation.token_ids is None:
            raise ValueError("the engine returned a Generation without token_ids")
        if self.done:
            raise RuntimeError(
                f"the episode of {self.task.env_id!r} (seed {self.task.seed}) has already "
                f"ended after {len(self.episode.turns)} turns"
            )
        step = await isolated_step(self.env, generation.text, self.observation)
        next_observation, reward, terminated, truncated, info = step
        if self.recorder.record(
            self.observation,
            generation,
            reward,
            terminated,
            truncated,
            info,
            prompt_ids=self.prompt_ids,
        ):
            self._observe_curriculum()
            return True
        messages = observation_messages(next_observation, info, first=False)
        self.prompt_ids = self.prompt_builder.extend(
            self.prompt_ids, generation.token_ids, messages
        )
        self.observation = next_observation
        return False

    def end_for_context(self) -> None:
        """End the episode because the next prompt leaves no room to generate
        (`EpisodeRecorder.end_for_context`: ``truncated_reason = "context"``)."""
        self.recorder.end_for_context(self.observation, self.prompt_ids)
        self._observe_curriculum()

    def _observe_curriculum(self) -> None:
        # a short write under the file's lock (SharedCurriculum.observe), in the caller's thread
        if self.task.curriculum is not None:
            shared_curriculum(self.task.curriculum).observe([self.episode])


def _reset_for(env: Env, task: EpisodeTask) -> tuple[Any, dict[str, Any]]:
    if task.curriculum is not None:
        set_levels = getattr(env, "set_difficulty_levels", None)
        if set_levels is None:
            raise TypeError(
                f"task {task.group_id!r} names curriculum {task.curriculum!r}, but its env "
                f"{env!r:.80} has no set_difficulty_levels: lease it from task_env_pool()"
            )
        set_levels(shared_curriculum(task.curriculum).levels)
    return env.reset(seed=task.seed)


@dataclass
class _Held:
    """An episode of `LiveEpisodes`: its env's lease and the asyncio task that holds it."""

    live: LiveEpisode
    lease: EnvLease[EpisodeTask, Env]
    owner: asyncio.Task[Any]
    on_owner_done: Callable[[asyncio.Task[Any]], None]


class LiveEpisodes:
    """Episodes in play across calls, for a trainer that calls once per turn (RL2's env
    module: ``reset`` then a ``step`` per turn, the episode kept between the calls).

    `start` leases an env of the task from `pool` (`EnvPool.lease`), starts a `LiveEpisode`
    on it and returns the episode's key; `play` plays one generation of the episode with
    that key. The lease ends with the episode, whichever way it ends:

    * `play` returns ``True`` (the env or a limit ended the episode): the env goes back to
      the pool;
    * `start` or `play` raises (an exception, or the awaiting task was cancelled): the env
      is discarded (closed, never reused: a step may still run in its worker thread);
    * the trainer drops the episode (never makes its last call: its own turn limit came
      first, it raised between two calls, ...): each episode belongs to the asyncio task
      that started it, and when that task ends with the episode still in play, the
      episode is dropped (logged) and its env goes back to the pool; nothing of it is
      running then, as its steps run inside that task's `play`.

    So no episode outlives the task that started it. Contract: `start` and every `play` of
    one episode are awaited by one asyncio task (RL2 0.0.2 runs each sample's ``reset``
    and ``step`` calls in one task, ``Rollout.rollout``). Not thread-safe: use it from one
    event loop. ``len()`` counts the episodes in play.
    """

    def __init__(self, pool: EnvPool[EpisodeTask, Env]) -> None:
        self.pool = pool
        self._held: dict[str, _Held] = {}

    def __len__(self) -> int:
        return len(self._held)

    def __getitem__(self, key: str) -> LiveEpisode:
        """The episode in play under `key`.

        Raises:
            KeyError: no such episode in play (it ended, or the task that started it did).
        """
        held = self._held.get(key)
        if held is None:
            raise KeyError(
                f"no episode {key!r} in play: it ended, or the asyncio task that started it "
                "did (start and every play of an episode must run in one asyncio task)"
            )
        return held.live

    async def start(
        self,
        task: EpisodeTask,
        prompt_builder: ChatPromptBuilder,
        *,
        max_turns: int | None = None,
        system_prompt: str | None = None,
    ) -> str:
        """Start an episode of `task` (`LiveEpisode.start`) held by the calling asyncio
        task; return its key (``self[key]`` is the episode).

        Raises:
            RuntimeError: not called from an asyncio task, or the pool is closed.
            Exception: what ``env.reset`` raises (the env is discarded).
        """
        owner = asyncio.current_task()
        if owner is None:
            raise RuntimeError("LiveEpisodes.start must be awaited inside an asyncio task")
        lease = self.pool.lease(task)
        try:
            live = await LiveEpisode.start(
                lease.env, task, prompt_builder, max_turns=max_turns, system_prompt=system_prompt
            )
        except BaseException:
            lease.discard()
            raise
        key = uuid.uuid4().hex
        on_owner_done = functools.partial(self._drop, key)
        self._held[key] = _Held(live, lease, owner, on_owner_done)
        owner.add_done_callback(on_owner_done)
        return key

    async def play(self, key: str, generation: Generation) -> bool:
        """Play `generation` in the episode `key` (`LiveEpisode.play`); return whether the
        episode ended (it then leaves `self` and its env goes back to the pool).

        Raises:
            KeyError: no such episode in play.
            RuntimeError: called from another asyncio task than the `start` (the episode
                stays in play for its own task).
            Exception: what `LiveEpisode.play` raises (the episode leaves `self` and its
                env is discarded).
        """
        live = self[key]
        if asyncio.current_task() is not self._held[key].owner:
            raise RuntimeError(
                f"episode {key!r} was started by another asyncio task: start and every play "
                "of an episode must run in one asyncio task (the episode ends with it)"
            )
        try:
            done = await live.play(generation)
        except BaseException:
            self._end(key).discard()
            raise
        if done:
            self._end(key).release()
        return done

    def _end(self, key: str) -> EnvLease[EpisodeTask, Env]:
        held = self._held.pop(key)
        held.owner.remove_done_callback(held.on_owner_done)
        return held.lease

    def _drop(self, key: str, owner: asyncio.Task[Any]) -> None:
        held = self._held.pop(key, None)
        if held is None:
            return
        logger.warning(
            "the episode of %s (seed %d) was dropped after %d turns: the task that played it "
            "ended before the episode did; its env went back to the pool",
            held.live.task.env_id,
            held.live.task.seed,
            len(held.live.episode.turns),
        )
        held.lease.release()


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
