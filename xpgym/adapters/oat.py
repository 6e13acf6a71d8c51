r"""Oat adapter: `Episode`\s -> ``TransitionData`` / ``Transition``, actor and learner hooks.

Supported: ``oat-llm`` 0.2.x (Python 3.10; installs on 3.11 with
``--ignore-requires-python``). Only ``oat.types`` imports without Oat's GPU stack (vLLM,
DeepSpeed, launchpad, ``pyarrow.plasma``), so this module needs only that; the actor and
learner subclasses are built on demand by `oat_classes`.

1. **Converters**: `to_transition_data` (one ``TransitionData`` per turn: Oat's
   single-step path, what GEM's ReBN recipe uses) and `to_transitions` (per-episode lists
   of ``Transition``: the ``PPOMultiTurnActor`` path).
2. **Hooks** (`oat_classes`): ``XpgymActor(PPOActor)`` whose ``step`` collects episodes from
   xpgym envs with `xpgym.rollout.collector.RolloutCollector` and Oat's own vLLM engine
   (`OatEnginePolicy`, token-in/token-out) and returns one row per prompt of Oat's batch,
   and ``XpgymLearner(PPOLearner)`` whose ``compute_monte_carlo_advantages`` is ReBN
   (`batch_normalize` over all ranks) and whose ``prepare_data`` needs no prompt dataset.

Per-turn rows (``TransitionData``; Oat collates them right-padded)
---------------------------------------------------------------

=====================  ===========  =====================================================
field                  type         meaning
=====================  ===========  =====================================================
``prompt``             str          the turn's prompt text (decoded ``prompt_ids`` when a
                                    tokenizer is given, else the observation)
``prompt_ids``         list[int]    the turn's prompt, history included
``response``           str          the action text
``response_ids``       list[int]    the turn's policy tokens (all trained)
``response_logprobs``  list[float]  sampler log-probs of ``response_ids``
``rewards``            list[float]  one per response token: the turn's discounted return
                                    ``G_t = r_t + gamma * G_{t+1}`` on the last, 0 elsewhere
``loss_mask``          bool         False for a cut generation when ``ignore_no_eos``
``info``               dict         ``episode``, ``turn``, ``reward``, ``return``, and
                                    the batch's ``metrics/<key>`` (`episode_metrics`, the
                                    same on every row): numbers only, as Oat's collector
                                    averages every ``info`` key over the rows into its
                                    actor metrics
=====================  ===========  =====================================================

Oat's collate puts ``prompt_ids + response_ids`` right-padded in ``input_ids`` and its
learner masks with ``response_masks = completion_mask[:, 1:]`` (the next-token view);
``response_logprobs`` land on those same positions, where the learner scores
``response_ids`` (they agree to ~2e-6 before an update). Oat's ``logprobs_diff_*``
metrics compare the learner with its own old log-probs, not with these (docs/trainers.md,
"Oat"). The learner puts each row's last reward (times ``reward_scale``, default 1) on
the row's last response token and hands those ``[B, L - 1]`` rewards to
``compute_monte_carlo_advantages``, which sums them: each row's advantage input is ``G_t``.

Infra-error episodes (``Episode.outcome == "infra_error"``, `xpgym.core.errors`) give no
rows: both converters leave them out (logged), so ReBN's batch statistics and the loss are
exactly those of the other episodes (Oat's actor samples its rows from the turns it
collected, so the row count does not depend on them).

Differences from the reference trainer that change curves (advantages, loss aggregation,
KL, clipping, budgets) are listed in one place: docs/trainers.md, section "Oat".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xpgym.core.optional import import_optional

_INSTALL = 'pip install --no-deps --ignore-requires-python "xpgym[oat]"'
import_optional("oat.types", needed_by="xpgym.adapters.oat", install=_INSTALL)

from oat.types import Transition, TransitionData  # noqa: E402

from xpgym.core.chat import Prompt  # noqa: E402
from xpgym.core.trajectory import Episode, episode_metrics, infra_error_metrics  # noqa: E402
from xpgym.rollout.policies import Generation  # noqa: E402
from xpgym.rollout.runner import generation_from_ids  # noqa: E402
from xpgym.training.advantages import discounted_returns, turn_rewards  # noqa: E402

__all__ = [
    "OatEnginePolicy",
    "batch_normalize",
    "launch",
    "oat_classes",
    "oat_config",
    "to_transition_data",
    "to_transitions",
]

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------
# Converters
# --------------------------------------------------------------------------------------


def to_transition_data(
    episodes: Sequence[Episode],
    *,
    gamma: float,
    tokenizer: Any = None,
    ignore_no_eos: bool = False,
) -> list[TransitionData]:
    """One ``TransitionData`` per turn, in episode then turn order (module docstring).

    Args:
        episodes: Episodes whose turns have token ids and non-empty responses; infra-error
            episodes are left out (``info["episode"]`` still indexes `episodes`).
        gamma: Discount per turn of the returns placed on each turn's last token.
        tokenizer: Decodes ``prompt_ids`` into ``prompt`` (default: the observation text).
        ignore_no_eos: ``loss_mask=False`` for turns whose generation was cut
            (``info["generation_truncated"]``), as Oat's ``--ignore_no_eos``.
    """
    rewards, mask = turn_rewards(episodes)
    returns = discounted_returns(rewards, mask, gamma)
    metrics = episode_metrics(episodes)
    out = []
    for e, episode in enumerate(_healthy(episodes)):
        if episode is None:
            continue
        for t, turn in enumerate(episode.turns):
            if turn.prompt_ids is None or not turn.response_ids:
                raise ValueError(f"episode {e} turn {t} has no prompt ids or no response ids")
            dense = [0.0] * len(turn.response_ids)
            dense[-1] = float(returns[e, t])
            prompt = str(turn.observation)
            if tokenizer is not None:
                prompt = tokenizer.decode(turn.prompt_ids, skip_special_tokens=False)
            cut = bool(turn.info.get("generation_truncated", False))
            out.append(
                TransitionData(
                    prompt=prompt,
                    prompt_ids=list(turn.prompt_ids),
                    response=turn.action,
                    response_ids=list(turn.response_ids),
                    response_logprobs=list(turn.response_logprobs or []),
                    rewards=dense,
                    loss_mask=not (ignore_no_eos and cut),
                    info={
                        "episode": e,
                        "turn": t,
                        "reward": turn.reward,
                        "return": float(returns[e, t]),
                        **metrics,
                    },
                )
            )
    return out


def to_transitions(episodes: Sequence[Episode], *, tokenizer: Any = None) -> list[list[Transition]]:
    """Per-episode lists of ``Transition`` (``PPOMultiTurnActor.collect_experience``).

    ``rewards`` is the turn's own reward (Oat's multi-turn learner discounts); ``done`` is
    True on the last turn; ``action_is_formatted`` is ``not info["invalid_action"]``;
    ``info`` is ``{"turn": t}`` and the batch's `episode_metrics` (numbers only: Oat
    averages every key into actor metrics).
    Infra-error episodes are left out.
    """
    metrics = episode_metrics(episodes)
    out = []
    for episode in _healthy(episodes):
        if episode is None:
            continue
        transitions = []
        for t, turn in enumerate(episode.turns):
            prompt = str(turn.observation)
            if tokenizer is not None and turn.prompt_ids is not None:
                prompt = tokenizer.decode(turn.prompt_ids, skip_special_tokens=False)
            transitions.append(
                Transition(
                    obs=str(turn.observation),
                    action=turn.action,
                    rewards=turn.reward,
                    done=t == len(episode.turns) - 1,
                    prompt=prompt,
                    prompt_ids=list(turn.prompt_ids or []),
                    response=turn.action,
                    response_ids=list(turn.response_ids or []),
                    response_logprobs=list(turn.response_logprobs or []),
                    response_is_truncated=bool(turn.info.get("generation_truncated", False)),
                    action_is_formatted=not bool(turn.info.get("invalid_action", False)),
                    info={"turn": t, **metrics},
                )
            )
        out.append(transitions)
    return out


def _healthy(episodes: Sequence[Episode]) -> list[Episode | None]:
    """`episodes` with each infra-error episode replaced by None (logged)."""
    failed = infra_error_metrics(episodes)["infra_error_episodes"]
    if failed:
        logger.warning("left out %d infra-error episodes of %d", failed, len(episodes))
    return [None if ep.infra_error is not None else ep for ep in episodes]


# --------------------------------------------------------------------------------------
# Pieces of the hooks that run anywhere
# --------------------------------------------------------------------------------------


def batch_normalize(
    values: Any,
    *,
    all_reduce: Callable[[Any], Any] | None = None,
    eps: float = 1e-9,
) -> Any:
    """ReBN over the whole batch, across ranks: ``(x - mean) / (std + eps)``.

    Two all-reduced passes give the exact population statistics of every rank's values:
    ``mean = sum(x) / n``, then ``var = sum((x - mean)^2) / n``.

    Args:
        values: ``[B]`` torch tensor (this rank's returns).
        all_reduce: Sums a tensor over ranks (Oat's ``strategy.all_reduce(t, op="sum")``);
            None: this rank is the whole batch.
        eps: Added to the std.

    Returns:
        ``[B]`` tensor, same dtype and device.
    """
    import torch

    reduce = all_reduce or (lambda t: t)
    x = values.double()
    totals = reduce(
        torch.stack([x.sum(), torch.tensor(float(x.numel()), dtype=x.dtype, device=x.device)])
    )
    mean = totals[0] / totals[1]
    var = reduce((x - mean).pow(2).sum()) / totals[1]
    return ((x - mean) / (var.sqrt() + eps)).to(values.dtype)


class OatEnginePolicy:
    """An xpgym `Policy` over Oat's vLLM engine: token-id prompts in, `Generation`\\ s out.

    Args:
        generate: ``generate(prompt_token_ids, sampling_params) -> list of vLLM
            RequestOutput`` (Oat's ``ActorBase.generate``).
        sampling_params: vLLM ``SamplingParams`` (``logprobs`` set for log-probs).
        tokenizer: The policy's tokenizer (the collector builds prompts with it).
    """

    def __init__(self, generate: Callable[..., Any], sampling_params: Any, tokenizer: Any) -> None:
        self._generate = generate
        self.sampling_params = sampling_params
        self.tokenizer = tokenizer
        self.stop_token_ids = [tokenizer.eos_token_id]

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        """One `Generation` per token-id prompt."""
        outputs = self._generate([list(p) for p in prompts], self.sampling_params)
        budget = int(getattr(self.sampling_params, "max_tokens", 0) or 0)
        generations = []
        for output in outputs:
            completion = output.outputs[0]
            ids = list(completion.token_ids)
            logprobs = None
            if completion.logprobs is not None:
                logprobs = [
                    step[token].logprob
                    for step, token in zip(completion.logprobs, ids, strict=True)
                ]
            generations.append(
                generation_from_ids(
                    self.tokenizer,
                    ids,
                    logprobs=logprobs,
                    stop_token_ids=self.stop_token_ids,
                    max_new_tokens=budget or len(ids) + 1,
                    finish_reason="length" if completion.finish_reason == "length" else "stop",
                )
            )
        return generations


# --------------------------------------------------------------------------------------
# Actor and learner (need Oat's GPU stack)
# --------------------------------------------------------------------------------------


def oat_classes() -> tuple[type, type, type]:
    """``(XpgymArgs, XpgymActor, XpgymLearner)``, subclasses of Oat's PPO classes.

    ``XpgymArgs(PPOArgs)`` adds ``env_id``, ``gamma`` (0.9), ``max_turns``, ``num_envs``,
    ``episodes_per_step``, ``norm_return`` (ReBN, default True), ``curriculum`` (a shared
    curriculum file, `xpgym.rollout.shared_curriculum`; ``""``: none), and changes two of Oat's
    defaults: ``num_samples=1`` (one generation per prompt) and ``eval_steps=-1`` (Oat's
    evaluation generates from a prompt dataset and scores with an oracle; there is neither).

    ``XpgymActor.step(prompts, formatted_prompts, references=None)`` uses Oat's prompt batch
    only for its size ``n = len(prompts)``: it collects rounds of ``episodes_per_step``
    complete episodes with the actor's vLLM engine until they hold at least ``n`` turns,
    converts them (`to_transition_data`), and returns ``ipc_client.serialize_ipc`` of ``n``
    rows drawn uniformly without replacement (in episode order). Seeds come from
    ``(args.seed, actor_id, step count)``. With ``curriculum``, the envs are
    `DifficultyEnv` envs of ``env_id``'s family: each round plays the file's current level
    (``apply``) and its episodes are observed by it (``observe``), shared by every actor.

    ``XpgymLearner.prepare_data`` replaces the prompt dataset with ``max_queries`` (Oat's
    row budget; ``max_train`` when unset) empty prompts, so the run stops, and the LR
    schedule ends, where a prompt dataset of that many rows would. It raises `ValueError`
    when ``pi_buffer_maxlen_per_device`` cannot hold the ``rollout_batch_size // world
    size`` rows a learner rank trains on each round (Oat's buffer would drop the oldest
    silently). ``compute_monte_carlo_advantages`` returns ``advantage = G_t``, normalised
    by `batch_normalize` across ranks when ``norm_return``. Oat's ``critic_type`` must be
    ``"drgrpo"`` (its default: token sums divided by ``generate_max_length``) or ``"grpo"``
    (token means); both reach this hook.

    Raises:
        ImportError: Oat's algorithms need vLLM, DeepSpeed and launchpad (a GPU install).
    """
    from dataclasses import dataclass

    ppo = import_optional(
        "oat.algorithms.ppo", needed_by="xpgym's Oat actor and learner", install=_INSTALL
    )

    import xpgym
    from xpgym.core.wrappers.episode_log import log_episodes_if_requested
    from xpgym.rollout.collector import RolloutCollector
    from xpgym.rollout.curriculum import make_curriculum_vec
    from xpgym.rollout.shared_curriculum import shared_curriculum

    # Oat's classes come from a module imported at run time: mypy sees them as Any
    ppo_args: Any = ppo.PPOArgs
    ppo_actor: Any = ppo.PPOActor
    ppo_learner: Any = ppo.PPOLearner

    @dataclass
    class XpgymArgs(ppo_args):
        env_id: str = "game:GuessTheNumber-v0-easy"
        gamma: float = 0.9
        max_turns: int = 10
        num_envs: int = 16
        episodes_per_step: int = 16
        norm_return: bool = True
        curriculum: str = ""
        num_samples: int = 1
        eval_steps: int = -1

    class XpgymActor(ppo_actor):
        def step(self, prompts: Any, formatted_prompts: Any, references: Any = None) -> Any:
            if not hasattr(self, "_xpgym_collector"):
                policy = OatEnginePolicy(self.generate, self.sampling_params, self.tokenizer)
                wrappers = [log_episodes_if_requested]
                self._xpgym_curriculum = None
                if self.args.curriculum:
                    self._xpgym_curriculum = shared_curriculum(self.args.curriculum)
                    ladder = self._xpgym_curriculum.ladder(self.args.env_id)
                    vec = make_curriculum_vec([ladder], self.args.num_envs, wrappers=wrappers)
                else:
                    vec = xpgym.make_vec(self.args.env_id, self.args.num_envs, wrappers=wrappers)
                self._xpgym_collector = RolloutCollector(vec, policy, max_turns=self.args.max_turns)
                self._xpgym_steps = 0
            self._xpgym_steps += 1
            words = [self.args.seed, getattr(self, "actor_id", 0), self._xpgym_steps]
            rng = np.random.default_rng(np.random.SeedSequence(words))
            rows = len(prompts)  # Oat's collector splits the rows among ranks by prompt
            curriculum = self._xpgym_curriculum
            episodes: list[Episode] = []
            while sum(len(ep.turns) for ep in episodes if ep.infra_error is None) < rows:
                seed = int(rng.integers(2**63))
                if curriculum is not None:
                    curriculum.apply(self._xpgym_collector.vec_env, self._xpgym_steps)
                played = self._xpgym_collector.collect(self.args.episodes_per_step, seed=seed)
                if curriculum is not None:
                    curriculum.observe(played)
                episodes += played
            data = to_transition_data(
                episodes,
                gamma=self.args.gamma,
                tokenizer=self.tokenizer,
                ignore_no_eos=self.args.ignore_no_eos,
            )
            keep = np.sort(rng.choice(len(data), size=rows, replace=False))
            return self.ipc_client.serialize_ipc([data[i] for i in keep])

    class XpgymLearner(ppo_learner):
        def prepare_data(self, strategy: Any, tokenizer: Any) -> None:
            args = strategy.args
            rows_per_round = args.rollout_batch_size // strategy.world_size
            if args.pi_buffer_maxlen_per_device < rows_per_round:
                raise ValueError(
                    f"pi_buffer_maxlen_per_device ({args.pi_buffer_maxlen_per_device}) must be "
                    f"at least rollout_batch_size // learner ranks ({rows_per_round}): Oat's "
                    "buffer drops the oldest rows of a learning round beyond it"
                )
            budget = args.max_queries if args.max_queries > 0 else args.max_train
            self.prompts_dataset = self.eval_prompts_dataset = _PlaceholderPrompts(budget)
            self.prompts_dataloader = strategy.setup_dataloader(
                self.prompts_dataset,
                strategy.args.rollout_batch_size_per_device,
                pin_memory=True,
                shuffle=False,
            )
            self.eval_prompts_dataloader = self.prompts_dataloader

        def compute_monte_carlo_advantages(self, rewards: Any, response_masks: Any) -> Any:
            returns = rewards.sum(-1)  # G_t: each row's return sits on its last token
            if not self.args.norm_return:
                return returns
            return batch_normalize(
                returns, all_reduce=lambda t: self.strategy.all_reduce(t, op="sum")
            )

    return XpgymArgs, XpgymActor, XpgymLearner


def oat_config(
    *,
    env_id: str,
    model: str,
    gamma: float,
    norm_return: bool,
    episodes_per_step: int,
    num_envs: int,
    rollout_batch_size: int,
    train_batch_size: int,
    num_ppo_epochs: int,
    lr: float,
    max_turns: int,
    max_new_tokens: int,
    gpus: int,
    seed: int,
    save_path: str,
) -> dict[str, Any]:
    """The ``XpgymArgs`` fields (`oat_classes`: Oat's ``PPOArgs`` + xpgym's) of a REINFORCE +
    ReBN run (the GEM paper's setup; ``recipes/train_oat.py``).

    One learning round per actor step: each of the ``ceil(gpus / 2)`` learner ranks of Oat's
    ``get_program`` asks its actor for ``rollout_batch_size // learners`` rows and its buffer
    holds exactly those. No KL (``beta`` 0), constant lr, grad clip 1.0, PPO clip 0.2,
    temperature 1 and top-p 1, ``critic_type="drgrpo"`` (the Monte-Carlo advantage hook),
    one generation per prompt; collocated actor and learner with vLLM's sleep mode on one
    GPU.

    Args:
        env_id: The xpgym env the actors play.
        model: ``pretrain``: the policy's model name or directory.
        gamma: Discount over turns.
        norm_return: ReBN (True) or plain REINFORCE on ``G_t``.
        episodes_per_step: Episodes per collection round of an actor.
        num_envs: Envs of an actor's vector env.
        rollout_batch_size: Rows (turns) per learning round, over all learner ranks.
        train_batch_size: Rows per optimizer step.
        num_ppo_epochs: Passes over a round's rows.
        lr: Learning rate.
        max_turns: Turns per episode.
        max_new_tokens: Tokens per turn (``generate_max_length``).
        gpus: GPUs of the run.
        seed: Oat's seed (and the actors' episode seeds).
        save_path: Oat's output directory.
    """
    learners = gpus - gpus // 2  # learner ranks of Oat's get_program (ceil(gpus / 2))
    rows_per_rank = rollout_batch_size // learners  # one actor step, one learning round
    return {
        "env_id": env_id,
        "gamma": gamma,
        "max_turns": max_turns,
        "num_envs": num_envs,
        "episodes_per_step": episodes_per_step,
        "norm_return": norm_return,
        "pretrain": model,
        "algo": "PPO",
        "critic_type": "drgrpo",  # the learner's Monte-Carlo advantage hook
        "num_samples": 1,
        "beta": 0.0,
        "num_ppo_epochs": num_ppo_epochs,
        "learning_rate": lr,
        "lr_scheduler": "constant",
        "max_norm": 1.0,
        "cliprange": 0.2,
        "temperature": 1.0,
        "top_p": 1.0,
        "generate_max_length": max_new_tokens,
        "rollout_batch_size": rollout_batch_size,
        "rollout_batch_size_per_device": rows_per_rank,
        "pi_buffer_maxlen_per_device": rows_per_rank,
        "train_batch_size": train_batch_size,
        "gpus": gpus,
        "collocate": gpus == 1,
        "vllm_sleep": gpus == 1,
        "seed": seed,
        "save_path": save_path,
    }


def launch(fields: dict[str, Any]) -> None:
    """Oat's launch with xpgym's actor and learner: ``XpgymArgs(**fields)`` through Oat's
    ``default_args_validation``, ``get_program`` and ``lp.launch`` (``launch_type`` from the
    args, ``local_mp`` by default). Returns when the program stops.

    Args:
        fields: ``XpgymArgs`` fields (`oat_config`, plus any other of Oat's ``PPOArgs``).

    Raises:
        ImportError: Oat's GPU stack (vLLM, DeepSpeed, launchpad) is not installed.
    """
    lp = import_optional("launchpad", needed_by="Oat's launch", install=_INSTALL)
    from oat.args import default_args_validation
    from oat.interface import get_program

    args_cls, actor_cls, learner_cls = oat_classes()
    args = default_args_validation(args_cls(**fields))
    program, resources = get_program(args, learner_cls=learner_cls, actor_cls=actor_cls)
    lp.launch(
        program,
        launch_type=args.launch_type,
        local_resources=resources,
        terminal="current_terminal",
    )


class _PlaceholderPrompts:
    """Oat's learner iterates a prompt dataset to drive actor steps; xpgym actors make
    their own episodes, so each of the `size` items is an empty (formatted prompt, prompt,
    reference) triple, the order of Oat's ``PromptDataset`` items."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[str, str, str]:
        return "", "", ""
