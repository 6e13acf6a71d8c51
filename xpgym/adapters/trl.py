r"""TRL adapter: whole multi-turn episodes as ``GRPOTrainer`` completions, and per-turn credit.

Supported: ``trl`` 1.16.x (``GRPOTrainer(rollout_func=...)`` and
``GRPOTrainer(environment_factory=...)``, experimental TRL APIs; set
``TRL_EXPERIMENTAL_SILENCE=1`` to silence their warnings). Four parts:

1. **Converter** `to_rollout_output`: episodes -> the dict a TRL ``rollout_func`` returns,
   one completion per episode (`xpgym.training.layouts.row_lists` of the per-episode rows).
2. **Hook** `make_rollout_func`: a ``rollout_func`` that plays each prompt as one whole
   xpgym episode with the trainer's current model (`xpgym.rollout.runner.run_episode`
   over `xpgym.rollout.policies.hf.HFPolicy`), token-exactly. The dataset's ``prompt`` column
   holds `xpgym.rollout.runner.EpisodeTask` JSON (`task_dataset`); TRL repeats each
   prompt ``num_generations`` times, so the repeats play the same task (same seed, same
   start state) and form one GRPO group. `episode_reward` is the reward function that
   hands each episode's total reward to TRL.
3. **Per-turn credit** `TurnCreditGRPOTrainer`: TRL's group advantage is one scalar per
   completion; this subclass replaces it with per-token REINFORCE or ReBN advantages from
   the per-turn rewards (`turn_advantages`, equal to `xpgym.training.advantages` to 1e-6),
   or with GiGPO advantages the hook computed from the episodes
   (``make_rollout_func(advantage="gigpo")``: the ``turn_advantages`` column), through
   TRL's documented subclass point: ``_compute_loss`` accepts ``(B, T)`` advantages.
4. **Environment factory** `environment_class`: TRL's own path, where TRL generates, parses
   tool calls and calls the env: a `TRLEnvironment` class per env whose methods are the
   env's tools (``reset`` plays the ``task`` column of `task_dataset` with ``chat=True``,
   ``get_reward`` is the episode's return). TRL tokenises and advantages are its own.

Rollout output (``B`` completions; lists of Python lists, one per completion)
---------------------------------------------------------------------------

==================  ==========  =========================================================
key                 per row     meaning
==================  ==========  =========================================================
``prompt_ids``      [P_b] int   the episode's first prompt (system + first observation)
``completion_ids``  [C_b] int   every token after it: each turn's policy tokens and the
                                env tokens between them (end of turn, next observation,
                                generation prompt), ending with the last policy token
``env_mask``        [C_b] int   1 on policy tokens, 0 on env tokens (TRL's ``tool_mask``:
                                the loss mask is ``completion_mask * env_mask``)
``logprobs``        [C_b] float sampler log-prob on policy tokens, 0 on env tokens; None
                                when the episodes carry none
``token_rewards``   [C_b] float each turn's reward on its last policy token, 0 elsewhere
``episode_reward``  float       the episode's total reward (read by `episode_reward`)
``infra_error``     bool        the episode failed for an infrastructure reason
==================  ==========  =========================================================

TRL pads prompts on the left and completions on the right; ``env_mask`` is padded with 1
and ``completion_mask`` with 0, so padding is never trained. Extra keys reach the reward
functions as columns (``token_rewards``, ``episode_reward``).

Infra-error episodes (``Episode.outcome == "infra_error"``, `xpgym.core.errors`): their
``env_mask`` is all 0 (no loss; no turn for `turn_advantages`) and ``token_rewards`` 0.
TRL groups fixed blocks of ``num_generations``, so a failed member cannot leave its group:
its ``episode_reward`` is the mean of the healthy members of its group among the episodes
of the call (`xpgym.training.advantages.infra_filled_scores`, which names the exact effect on
the std). ``infra_error`` (a bool per completion) marks them.

Differences from the reference trainer that change curves (advantages, loss aggregation,
KL, clipping, budgets) are listed in one place: docs/trainers.md, section "TRL".
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import re
import types
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, Union, cast

import numpy as np

from xpgym.adapters._trainer_import import import_trainer

_INSTALL = 'pip install "xpgym[trl]"'
import_trainer("trl", adapter="trl", install=_INSTALL)

import torch  # noqa: E402
from trl import GRPOTrainer  # noqa: E402

from xpgym.core.chat import PromptTokenizer  # noqa: E402
from xpgym.core.env import Env, Wrapper  # noqa: E402
from xpgym.core.tools.calls import format_function_call, function_schema  # noqa: E402
from xpgym.core.trajectory import Episode, episode_metrics  # noqa: E402
from xpgym.core.wrappers.limits import HorizonSchedule  # noqa: E402
from xpgym.core.wrappers.tools import ToolEnvWrapper  # noqa: E402
from xpgym.rollout.curriculum import DifficultyEnv, SuccessRateScheduler  # noqa: E402
from xpgym.rollout.env_pool import make_trainer_env  # noqa: E402
from xpgym.rollout.policies import Generation  # noqa: E402
from xpgym.rollout.policies.hf import HFPolicy  # noqa: E402
from xpgym.rollout.recorder import EpisodeRecorder  # noqa: E402
from xpgym.rollout.runner import (  # noqa: E402
    EpisodeTask,
    curriculum_task_pool,
    isolated_step,
    policy_generate,
    run_episode,
    shared_prompt_builder,
    task_env_pool,
)
from xpgym.rollout.shared_curriculum import SharedCurriculum  # noqa: E402
from xpgym.training.advantages import (  # noqa: E402
    STEP_ALGORITHMS,
    TOKEN_ESTIMATORS,
    StepAlgorithm,
    TokenEstimator,
    episode_advantages,
    infra_filled_scores,
    token_advantages,
)
from xpgym.training.layouts import row_lists  # noqa: E402

__all__ = [
    "ACTION_TOOL",
    "RolloutFunc",
    "TRLEnvironment",
    "TurnCreditGRPOTrainer",
    "environment_class",
    "episode_reward",
    "log_episode_metrics",
    "make_rollout_func",
    "task_dataset",
    "to_rollout_output",
    "turn_advantages",
]

logger = logging.getLogger(__name__)

RolloutFunc = Callable[[list[str], GRPOTrainer], dict[str, Any]]
"""TRL's ``rollout_func`` signature: ``(prompts, trainer) -> dict``."""


# --------------------------------------------------------------------------------------
# Converter
# --------------------------------------------------------------------------------------


def to_rollout_output(
    episodes: Sequence[Episode],
    *,
    advantage: StepAlgorithm | None = None,
    gamma: float = 1.0,
    advantage_kwargs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``rollout_func`` output for `episodes`, one completion each (module docstring).

    Args:
        episodes: Token-exact episodes (`xpgym.training.layouts.row_lists` raises
            `xpgym.training.layouts.PrefixMismatchError` otherwise: TRL has one prompt and one
            completion per sample, so an episode cannot be split).
        advantage: ``"gigpo"`` or ``"tree"``: add the ``turn_advantages`` column, each
            turn's advantage (`xpgym.training.advantages.episode_advantages` of `episodes`
            with `gamma` and `advantage_kwargs`) on its policy tokens, 0 on env tokens, for
            `TurnCreditGRPOTrainer`. None: no such column.
        gamma, advantage_kwargs: The estimator's discount and options (e.g. ``omega``).

    Returns:
        A dict with ``prompt_ids``, ``completion_ids``, ``env_mask``, ``logprobs``,
        ``token_rewards``, ``episode_reward`` and ``infra_error`` (and ``turn_advantages``),
        in episode order.
    """
    values = None
    if advantage is not None:
        values = episode_advantages(
            advantage, episodes, gamma=gamma, **dict(advantage_kwargs or {})
        )
    rows = row_lists(episodes, "per_episode", turn_values=values)  # TRL takes Python lists
    out: dict[str, Any] = {
        "prompt_ids": rows.prompt_ids,
        "completion_ids": rows.response_ids,
        "env_mask": rows.response_mask,
        "token_rewards": rows.token_rewards,
        "episode_reward": infra_filled_scores(episodes)[rows.episode_index].tolist(),
        "logprobs": rows.rollout_logprobs,
        "infra_error": rows.infra_error.tolist(),
    }
    if rows.turn_values is not None:
        out["turn_advantages"] = rows.turn_values
    return out


def episode_reward(
    completions: list[Any], episode_reward: list[float], **kwargs: Any
) -> list[float]:
    """TRL reward function: each completion's episode total reward (the ``episode_reward``
    column `to_rollout_output` adds). Pass it as ``reward_funcs``; TRL logs it as
    ``rewards/episode_reward``."""
    if len(episode_reward) != len(completions):
        raise ValueError(
            f"{len(episode_reward)} episode rewards for {len(completions)} completions; is "
            "the rollout_func xpgym's (make_rollout_func)?"
        )
    return [float(r) for r in episode_reward]


# --------------------------------------------------------------------------------------
# Hook: rollout_func
# --------------------------------------------------------------------------------------


def log_episode_metrics(trainer: Any, episodes: Sequence[Episode], *, training: bool) -> None:
    """Add the episodes' own metrics (``metrics/<key>``, `episode_metrics`: e.g. from
    reward functions) to what ``GRPOTrainer.log`` averages and logs next to its own
    (``trainer._metrics["train" | "eval"]``, TRL's per-key lists of numbers; the rollout
    function has no public way to report numbers). `make_rollout_func` calls it."""
    _log_metrics(trainer, episode_metrics(episodes), training=training)


def _log_metrics(trainer: Any, metrics: Mapping[str, float], *, training: bool) -> None:
    """Append `metrics` to ``trainer._metrics["train" | "eval"]`` (TRL's per-key lists)."""
    mode = "train" if training else "eval"
    for key, value in metrics.items():
        trainer._metrics[mode][key].append(value)


def task_dataset(
    tasks: Sequence[EpisodeTask], *, chat: bool = False, system_prompt: str | None = None
) -> Any:
    """A ``datasets.Dataset`` with one row per task. Use it as ``train_dataset``.

    Args:
        tasks: The tasks, in row order.
        chat: False (for `make_rollout_func`): the ``prompt`` column is the task's JSON.
            True (for `environment_class`'s ``environment_factory``): the ``prompt`` is a
            chat prompt, ``[{"role": "user", "content": ""}]`` (TRL appends the first
            observation, `TRLEnvironment.reset`'s, to that message), and the task's JSON is
            the ``task`` column (TRL passes it to ``reset``).
        system_prompt: With `chat`, a system message put in front of the user message.

    Raises:
        ValueError: `system_prompt` without `chat` (`make_rollout_func` takes its own).
    """
    from datasets import Dataset

    if not chat:
        if system_prompt is not None:
            raise ValueError("system_prompt is for chat=True; pass it to make_rollout_func")
        return Dataset.from_dict({"prompt": [task.to_json() for task in tasks]})
    system = [] if system_prompt is None else [{"role": "system", "content": system_prompt}]
    prompt = [*system, {"role": "user", "content": ""}]
    return Dataset.from_dict(
        {"prompt": [prompt] * len(tasks), "task": [task.to_json() for task in tasks]}
    )


def make_rollout_func(
    *,
    max_new_tokens: int,
    max_turns: int | None = None,
    horizon: Callable[[int], int] | None = None,
    curriculum: SuccessRateScheduler | SharedCurriculum | None = None,
    system_prompt: str | None = None,
    seed: int = 0,
    advantage: StepAlgorithm | None = None,
    gamma: float = 1.0,
    advantage_kwargs: Mapping[str, Any] | None = None,
) -> RolloutFunc:
    """A TRL ``rollout_func`` that plays one xpgym episode per prompt with the trainer's model.

    Each call (one per generation batch) builds an `HFPolicy` over
    ``trainer.accelerator.unwrap_model(trainer.model)`` and ``trainer.processing_class``,
    sampling at ``trainer.temperature`` (TRL computes the trainer's log-probs from
    ``logits / temperature`` too; ``top_p``/``top_k`` of the config are not applied), with
    the model in eval mode for the rollout and its mode restored after. The episodes of the
    batch run concurrently (`run_episode`; generation calls are serialised by the policy).
    The episode's token budget after the first prompt is ``trainer.max_completion_length``
    (env tokens count, as in TRL's own multi-turn loop; None: no limit).

    Args:
        max_new_tokens: Per-turn token budget.
        max_turns: End an episode after this many turns (None: the env ends it).
        horizon: A turn schedule (training step -> turn cap, e.g. ScalingInter-RL's
            `PiecewiseTurnSchedule` 5 -> 10 -> 15): every env is wrapped in `HorizonSchedule`
            and an episode's cap is ``horizon(trainer.state.global_step)`` at its start (the
            env's own limit and `max_turns` still apply).
        curriculum: A difficulty curriculum over the tasks' families (the tasks name any id
            of a family the scheduler holds, without ``env_kwargs``): every episode plays
            the family at ``curriculum.levels`` as they are at the start of the call
            (`xpgym.rollout.runner.curriculum_task_pool`), a training call's episodes
            are then observed, and ``curriculum.metrics()`` go to the trainer's log. A
            `SharedCurriculum` is one scheduler for all of TRL's processes. (Tasks that
            name a curriculum file themselves need no argument; not both.)
        system_prompt: Prepended as a system message (see `run_episode`).
        seed: Base of the sampling seeds: generation batch ``k`` on process ``p`` samples
            with seeds derived from ``(seed, k, p)``.
        advantage, gamma, advantage_kwargs: ``"gigpo"``: each call's output gets the
            ``turn_advantages`` column (`to_rollout_output`), GiGPO over the call's episodes
            (the process's generation batch; its groups are the repeats of a task) for
            ``TurnCreditGRPOTrainer(turn_advantage="gigpo")``. ``"tree"`` is refused: TRL
            takes one completion per prompt, so the hook cannot grow trees.

    Returns:
        ``rollout_func(prompts, trainer) -> dict`` (`to_rollout_output` of the episodes).

    Raises:
        ValueError: ``advantage="tree"``, another unknown `advantage`, or a `gamma` the
            estimator refuses; (at a call) a task naming a curriculum file under
            `curriculum`.
        TypeError: an option in `advantage_kwargs` the estimator does not take.
    """
    if advantage == "tree":
        raise ValueError(
            "TRL's rollout_func returns one completion per prompt, so it cannot grow trees "
            "of forked episodes; use advantage='gigpo' (tree advantages: the reference "
            "trainer or verl's to_data_proto on RolloutCollector.collect_tree episodes)"
        )
    if advantage is not None:
        if advantage not in STEP_ALGORITHMS:
            raise ValueError(f"advantage must be 'gigpo' or None, got {advantage!r}")
        # the estimator on no episodes checks gamma and the options now, not after the
        # first generation batch
        episode_advantages(advantage, [], gamma=gamma, **dict(advantage_kwargs or {}))
    wrap = None if horizon is None else lambda env: HorizonSchedule(env, horizon)
    pool = task_env_pool(wrap) if curriculum is None else curriculum_task_pool(curriculum, wrap)

    def rollout_func(prompts: list[str], trainer: GRPOTrainer) -> dict[str, Any]:
        step = int(trainer.state.global_step)
        tasks = [EpisodeTask.from_json(prompt) for prompt in prompts]
        if curriculum is not None and any(task.curriculum for task in tasks):
            raise ValueError(
                "tasks that name a curriculum file play under it; pass curriculum= to "
                "make_rollout_func only for tasks without one"
            )
        model = trainer.accelerator.unwrap_model(trainer.model)
        # TRL types processing_class as any processor; a GRPO run on text has a tokenizer
        tokenizer = cast(PromptTokenizer, trainer.processing_class)
        entropy = [seed, step, trainer.accelerator.process_index]
        policy = HFPolicy(
            model,
            tokenizer,
            max_new_tokens=max_new_tokens,
            temperature=trainer.temperature,
            seed=int(np.random.SeedSequence(entropy).generate_state(1)[0]),
        )
        generate = policy_generate(policy)
        builder = shared_prompt_builder(tokenizer)
        levels = None if curriculum is None else curriculum.levels

        async def play(task: EpisodeTask) -> Episode:
            with pool.lease(task) as env:
                if horizon is not None:
                    # the pool wraps every env in HorizonSchedule when `horizon` is given
                    cast(HorizonSchedule, env).set_training_step(step)
                if levels is not None:
                    # the curriculum pool's envs are DifficultyEnvs (inside HorizonSchedule)
                    cast(DifficultyEnv, env).set_difficulty_levels(levels)
                return await run_episode(
                    env,
                    task,
                    generate,
                    builder,
                    max_new_tokens=max_new_tokens,
                    max_turns=max_turns,
                    max_response_tokens=trainer.max_completion_length,
                    system_prompt=system_prompt,
                )

        async def play_all() -> list[Episode]:
            return list(await asyncio.gather(*(play(task) for task in tasks)))

        was_training = model.training
        model.eval()
        try:
            episodes = asyncio.run(play_all())
        finally:
            model.train(was_training)
        logger.debug(
            "played %d episodes, %d turns", len(episodes), sum(len(e.turns) for e in episodes)
        )
        log_episode_metrics(trainer, episodes, training=was_training)
        if curriculum is not None and was_training:
            curriculum.observe(episodes)
            _log_metrics(trainer, curriculum.metrics(), training=True)
        return to_rollout_output(
            episodes, advantage=advantage, gamma=gamma, advantage_kwargs=advantage_kwargs
        )

    return rollout_func


# --------------------------------------------------------------------------------------
# Per-turn credit
# --------------------------------------------------------------------------------------


def turn_advantages(
    token_rewards: Sequence[Sequence[float]],
    loss_mask: torch.Tensor,
    *,
    estimator: TokenEstimator,
    gamma: float,
) -> torch.Tensor:
    """``[B, C]`` float32 per-token advantages for TRL's ``_compute_loss``.

    Per-turn REINFORCE (``G_t = r_t + gamma * G_{t+1}``) or ReBN (``(G - mean) / (std +
    eps)`` over every turn of the batch, `xpgym.training.advantages.rebn`'s population std and
    eps 1e-9), each turn's value on its policy tokens, 0 elsewhere: exactly
    `xpgym.training.advantages.token_advantages`. Turns are the runs of 1s of `loss_mask`.

    Args:
        token_rewards: Per completion, the ``token_rewards`` column (``[C_b]``, unpadded).
        loss_mask: ``[B, C]`` TRL's ``completion_mask * tool_mask`` (right padding).
        estimator: ``"reinforce"`` or ``"rebn"``.
        gamma: Discount per turn.
    """
    mask = loss_mask.detach().cpu().numpy()
    rewards = np.zeros(mask.shape, dtype=np.float64)
    for b, row in enumerate(token_rewards):
        rewards[b, : len(row)] = row
    advantages = token_advantages(rewards, mask, estimator=estimator, gamma=gamma)
    return torch.as_tensor(advantages, dtype=torch.float32, device=loss_mask.device)


class TurnCreditGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` that trains with per-turn REINFORCE, ReBN or GiGPO advantages.

    TRL computes its group advantage as usual (and logs it); this subclass then replaces
    ``advantages`` of each generation batch by `turn_advantages` of the ``token_rewards``
    column that xpgym's `make_rollout_func` returns, or (``"gigpo"``, ``"tree"``) by its
    ``turn_advantages`` column (``make_rollout_func(advantage=...)``, computed from the
    episodes), masked by TRL's loss mask. ReBN's and GiGPO's statistics are over the
    process's generation batch. Everything else (loss, clipping, KL, optimizer) is TRL's.

    Args:
        *args, **kwargs: ``GRPOTrainer``'s (``rollout_func`` must be xpgym's).
        turn_advantage: ``"rebn"``, ``"reinforce"``, ``"gigpo"`` or ``"tree"``.
        gamma: Discount per turn, in ``[0, 1]`` (rebn, reinforce; gigpo's is the hook's).

    Raises:
        ValueError: an unknown estimator, or ``mask_truncated_completions=True`` (it masks
            whole completions after the rewards are placed, which would drop turns from the
            ReBN statistics).
    """

    def __init__(
        self,
        *args: Any,
        turn_advantage: TokenEstimator | StepAlgorithm = "rebn",
        gamma: float = 1.0,
        **kwargs: Any,
    ) -> None:
        choices = (*TOKEN_ESTIMATORS, *STEP_ALGORITHMS)
        if turn_advantage not in choices:
            raise ValueError(f"turn_advantage must be one of {choices}, got {turn_advantage!r}")
        super().__init__(*args, **kwargs)
        # self.args is TRL's GRPOConfig, typed as its base TrainingArguments
        if self.args.mask_truncated_completions:
            raise ValueError(
                "TurnCreditGRPOTrainer needs mask_truncated_completions=False (per-turn "
                "advantages are placed before TRL masks truncated completions)"
            )
        self.turn_advantage: TokenEstimator | StepAlgorithm = turn_advantage
        self.gamma = float(gamma)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        column = "turn_advantages" if self.turn_advantage in STEP_ALGORITHMS else "token_rewards"
        missing = [i for i, example in enumerate(inputs) if column not in example]
        if missing:
            hook = "make_rollout_func" + (
                f"(advantage={self.turn_advantage!r})" if column == "turn_advantages" else ""
            )
            raise ValueError(
                f"example {missing[0]} has no {column!r} column: TurnCreditGRPOTrainer("
                f"turn_advantage={self.turn_advantage!r}) needs xpgym's rollout_func "
                f"(xpgym.adapters.trl.{hook})"
            )
        loss_mask = output["completion_mask"]
        if "tool_mask" in output:
            loss_mask = loss_mask * output["tool_mask"]
        rows = [example[column] for example in inputs]
        if self.turn_advantage in STEP_ALGORITHMS:
            output["advantages"] = _padded(rows, loss_mask)
        else:
            output["advantages"] = turn_advantages(
                rows,
                loss_mask,
                estimator=cast(TokenEstimator, self.turn_advantage),
                gamma=self.gamma,
            )
        return output


def _padded(rows: Sequence[Sequence[float]], loss_mask: torch.Tensor) -> torch.Tensor:
    """``[B, C]`` float32: row ``b``'s values from column 0 on (right padding), 0 where
    `loss_mask` is 0."""
    out = torch.zeros(loss_mask.shape, dtype=torch.float32)
    for b, row in enumerate(rows):
        width = min(len(row), out.shape[1])
        out[b, :width] = torch.tensor(row[:width], dtype=torch.float32)
    out = out.to(loss_mask.device)
    return torch.where(loss_mask.bool(), out, 0.0)


# --------------------------------------------------------------------------------------
# Environment factory: TRL's own tool-calling loop over an xpgym env
# --------------------------------------------------------------------------------------

ACTION_TOOL = "act"
"""The name of the tool a text env's actions go through (`environment_class`)."""

_ACTION_SCHEMA = function_schema(
    ACTION_TOOL,
    "Take one action in the environment; it replies with its next observation.",
    {
        "type": "object",
        "properties": {
            "action": {"type": "string", "description": "The action, as the task asks for it."}
        },
        "required": ["action"],
    },
)

_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "null": type(None),
}
_ANY_JSON = str | int | float | bool | list | dict
"""The annotation of a parameter whose schema names no type: any JSON value."""


class TRLEnvironment:
    """One xpgym env as TRL 1.16's ``GRPOTrainer(environment_factory=...)`` plays it.

    `environment_class` makes a subclass per env, whose public methods are the env's tools
    (TRL's contract: every public method but ``reset`` and ``get_reward`` is a tool whose
    JSON schema transformers derives from its signature and docstring). TRL constructs
    instances once and reuses them; per rollout it calls `reset` with the dataset row,
    then each tool call the model makes, then `get_reward` once.

    Each instance holds one env (``xpgym.make``, in `EpisodeLog` when ``XPGYM_EPISODE_LOG``
    is set: `xpgym.rollout.env_pool.make_trainer_env`), closed when the instance is
    garbage-collected. The turns are recorded as an `Episode` (`episode`) by
    `xpgym.rollout.recorder.EpisodeRecorder`, as the other hooks record theirs.

    Attributes:
        env_id, env_kwargs: The env every instance plays (``xpgym.make`` arguments).
        max_turns: The episode ends (truncated, ``"max_turns"``) after this many tool calls;
            None: only the env ends it.
        tool_schemas: The xpgym function schemas of the tool methods, in order.
    """

    env_id: ClassVar[str] = ""
    env_kwargs: ClassVar[Mapping[str, Any]] = {}
    max_turns: ClassVar[int | None] = None
    tool_schemas: ClassVar[tuple[dict[str, Any], ...]] = ()

    def __init__(self) -> None:
        if not self.env_id:
            raise TypeError("TRLEnvironment is a base class; make one with environment_class")
        self._env = make_trainer_env(self.env_id, **self.env_kwargs)
        weakref.finalize(self, self._env.close)
        self._recorder: EpisodeRecorder | None = None
        self._observation: Any = None

    @property
    def episode(self) -> Episode | None:
        """The episode since the last `reset` (None before the first)."""
        return None if self._recorder is None else self._recorder.episode

    @property
    def done(self) -> bool:
        """Whether the episode since the last `reset` has ended (the env or `max_turns`
        ended it, or the env failed); False before the first `reset`."""
        return self._recorder is not None and self._recorder.done

    def reset(self, task: str | Mapping[str, Any] | None = None, **row: Any) -> str:
        """Start the episode of the dataset row's ``task`` (`task_dataset` with
        ``chat=True``): reset the env with the task's seed. TRL passes every column of the
        row as a keyword (``prompt`` too); only ``task`` is read.

        Returns:
            The first observation (TRL appends it to the prompt's last message).

        Raises:
            ValueError: the row has no ``task``, or its task is for another env.
            TypeError: the env's observation is not text.
        """
        del row
        if task is None:
            raise ValueError(
                f"the dataset row has no 'task' column: build the dataset with "
                f"task_dataset(tasks, chat=True) (tasks of {self.env_id!r})"
            )
        parsed = EpisodeTask.from_json(task)
        if (parsed.env_id, dict(parsed.env_kwargs)) != (self.env_id, dict(self.env_kwargs)):
            raise ValueError(
                f"this environment class plays {self.env_id!r} with {dict(self.env_kwargs)}, "
                f"the row's task is {parsed.env_id!r} with {dict(parsed.env_kwargs)}: make a "
                "class per env (environment_class) and route rows with a dict factory"
            )
        observation, info = self._env.reset(seed=parsed.seed)
        self._recorder = parsed.recorder(info, max_turns=self.max_turns)
        self._observation = observation
        return _text(observation, self.env_id)

    def get_reward(self) -> float | None:
        """The episode's total reward (TRL's env-owned reward, logged under the class name).

        An episode the model left before the env ended it (a reply without a tool call)
        scores the rewards so far. An episode ended by an infrastructure failure
        (`xpgym.core.errors`) scores None: TRL 1.16 then leaves the completion out of its
        group's mean and std and gives it advantage 0.

        Raises:
            RuntimeError: called before `reset`.
        """
        episode = self.episode
        if episode is None:
            raise RuntimeError(f"get_reward before reset ({type(self).__name__})")
        return None if episode.infra_error is not None else episode.total_reward

    async def _play(self, action: str) -> str:
        """Send `action` to the env (`isolated_step`), record the turn, return the next
        observation.

        Raises:
            RuntimeError: before `reset`, after the episode ended (the model called a tool
                again; TRL shows the error to the model), or when the env step failed (an
                infrastructure failure; the episode ends with it).
        """
        recorder = self._recorder
        if recorder is None:
            raise RuntimeError(f"a tool was called before reset ({type(self).__name__})")
        if recorder.done:
            raise RuntimeError(
                "the episode has ended; reply without a tool call"
                f" (after {len(recorder.episode.turns)} calls)"
            )
        step = await isolated_step(self._env, action, self._observation)
        observation, reward, terminated, truncated, info = step
        recorder.record(
            self._observation,
            Generation(text=action),
            reward,
            terminated,
            truncated,
            info,
            prompt_ids=None,
        )
        if recorder.episode.infra_error is not None:
            raise RuntimeError(f"the environment failed: {recorder.episode.infra_error.message}")
        self._observation = observation
        return _text(observation, self.env_id)


def _text(observation: Any, env_id: str) -> str:
    if not isinstance(observation, str):
        raise TypeError(
            f"{env_id!r} observes {type(observation).__name__}, not text: TRL's environment "
            "loop adds text to the conversation"
        )
    return observation


def environment_class(
    env_id: str,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    max_turns: int | None = None,
) -> type[TRLEnvironment]:
    """A `TRLEnvironment` subclass for `env_id`: pass it as ``GRPOTrainer(environment_factory=
    ...)`` (or as a value of the dict form) with ``train_dataset=task_dataset(tasks,
    chat=True)``.

    Its tools are what the env's reset info lists under ``"tools"`` (the xpgym function
    schemas of a ``toolgym:`` env's typed tools or of a `ToolEnvWrapper`'s tools, ``@tool``
    functions included), plus the action tool `ACTION_TOOL` ``act(action: str)`` when the
    env takes text actions: when it lists no tools (a text env: every action goes through
    ``act``) or is a `ToolEnvWrapper` env (its tools, and ``act`` for the answer to the
    task). An env that lists tools without a `ToolEnvWrapper` (``toolgym:``: every action is
    a tool call) gets its tools only. A call of a tool is sent to the env as one action:
    ``act``'s text as is, any other as `xpgym.core.tools.calls.format_function_call`, which
    the env parses and checks itself (a malformed or unknown call is the env's invalid
    action, answered with its error).

    Each tool method's signature and Google-style docstring are built from the schema, so
    the schema transformers derives from them (what the chat template renders and what
    ``parse_response`` types the arguments with) has the same name, description, parameter
    types, enums, descriptions and required parameters; finer keywords (bounds, the
    properties of a nested object) are not rendered, and the env still checks them.

    Args:
        env_id: A registered single-agent env with text observations.
        env_kwargs: ``xpgym.make`` keyword arguments (the tasks' ``env_kwargs`` must equal
            them).
        max_turns: End the episode (truncated) after this many tool calls; None: the env
            ends it (TRL's ``max_tool_calling_iterations`` bounds a rollout too).

    Raises:
        ValueError: a tool's name cannot be a tool method (``reset``, ``get_reward``, a
            leading underscore, or a name the class already has).
    """
    kwargs = dict(env_kwargs or {})
    probe = make_trainer_env(env_id, **kwargs)
    try:
        _, info = probe.reset(seed=0)
        schemas = [dict(schema) for schema in info.get("tools", ())]
        takes_text = not schemas or _has_tool_wrapper(probe)
    finally:
        probe.close()
    actions: dict[str, Callable[[Mapping[str, Any]], str]] = {
        schema["function"]["name"]: functools.partial(
            format_function_call, schema["function"]["name"]
        )
        for schema in schemas
    }
    if takes_text:
        if ACTION_TOOL in actions:
            raise ValueError(
                f"{env_id!r} has a tool named {ACTION_TOOL!r}, the name of the action tool"
            )
        schemas.append(_ACTION_SCHEMA)
        actions[ACTION_TOOL] = _action_text
    namespace: dict[str, Any] = {
        "env_id": env_id,
        "env_kwargs": kwargs,
        "max_turns": max_turns,
        "tool_schemas": tuple(schemas),
        "__doc__": f"{env_id} for TRL's environment_factory (`xpgym.adapters.trl`).",
    }
    for schema in schemas:
        name = schema["function"]["name"]
        if name in ("reset", "get_reward") or name.startswith("_") or hasattr(TRLEnvironment, name):
            raise ValueError(
                f"{env_id!r} has a tool named {name!r}, which TRL cannot call as a tool method "
                "(reset, get_reward, a leading underscore and TRLEnvironment's own names are "
                "taken)"
            )
        namespace[name] = _tool_method(schema, actions[name])
    class_name = "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", env_id))
    return type(f"{class_name}Environment", (TRLEnvironment,), namespace)


def _has_tool_wrapper(env: Env) -> bool:
    """Whether a `ToolEnvWrapper` is among `env`'s wrappers (or is `env`)."""
    layer: Any = env
    while isinstance(layer, Wrapper):
        if isinstance(layer, ToolEnvWrapper):
            return True
        layer = layer.env
    return False


def _action_text(arguments: Mapping[str, Any]) -> str:
    """The action of an ``act`` call: its ``action`` argument ("" when missing)."""
    return str(arguments.get("action", ""))


def _tool_method(
    schema: Mapping[str, Any], to_action: Callable[[Mapping[str, Any]], str]
) -> Callable[..., Any]:
    """An ``async`` method for the function `schema` that sends ``to_action(arguments)`` to
    the env (`TRLEnvironment._play`); its signature, annotations and docstring describe
    `schema` (see `environment_class`)."""
    function = schema["function"]
    name = str(function["name"])
    parameters = function.get("parameters") or {}
    properties: Mapping[str, Any] = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())

    async def method(self: TRLEnvironment, **arguments: Any) -> str:
        return await self._play(to_action(arguments))

    receiver = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    signature_parameters = [receiver]
    annotations: dict[str, Any] = {}
    lines = [_one_line(function.get("description")) or name]
    if properties:
        lines += ["", "Args:"]
    for parameter, spec in properties.items():
        annotation = _annotation(spec)
        optional = parameter not in required
        signature_parameters.append(
            inspect.Parameter(
                parameter,
                inspect.Parameter.KEYWORD_ONLY,
                default=None if optional else inspect.Parameter.empty,
                annotation=annotation,
            )
        )
        annotations[parameter] = annotation
        lines.append(f"    {parameter}: {_one_line(spec.get('description')) or parameter}")
    method.__name__ = method.__qualname__ = name
    method.__doc__ = "\n".join(lines)
    method.__annotations__ = annotations  # no return annotation: schemas have no "return"
    method.__signature__ = inspect.Signature(signature_parameters)  # type: ignore[attr-defined]
    return method


def _one_line(text: Any) -> str:
    """`text` with its whitespace runs collapsed to single spaces ("" for None)."""
    return " ".join(str(text).split()) if text else ""


def _annotation(spec: Any) -> Any:
    """The Python annotation transformers' ``get_json_schema`` turns back into `spec`'s
    type (``enum`` as ``Literal``, ``anyOf``/``oneOf`` and type lists as unions, arrays as
    ``list[items]``, objects as ``dict[str, additionalProperties]``)."""
    if not isinstance(spec, Mapping):
        return _ANY_JSON
    if spec.get("enum"):
        return Literal[tuple(spec["enum"])]
    alternatives = spec.get("anyOf") or spec.get("oneOf")
    if alternatives:
        return Union[tuple(_annotation(s) for s in alternatives)]  # noqa: UP007 - a runtime tuple
    kind = spec.get("type")
    if isinstance(kind, list):
        return Union[tuple(_annotation({**spec, "type": k}) for k in kind)]  # noqa: UP007
    if kind == "array":
        items = spec.get("items")
        if isinstance(items, Mapping) and items:
            return types.GenericAlias(list, (_annotation(items),))
        return list
    if kind == "object":
        values = spec.get("additionalProperties")
        if isinstance(values, Mapping) and values:
            return types.GenericAlias(dict, (str, _annotation(values)))
        return dict
    return _JSON_TYPES.get(kind, _ANY_JSON) if isinstance(kind, str) else _ANY_JSON
