r"""OpenRLHF adapter: `Episode`\s -> ``Experience``, an ``AgentExecutor``, and per-turn ReBN.

Supported: ``openrlhf`` 0.11.x (dotted flags, ``AgentExecutor()`` with no arguments). Three
parts, and a run's launch settings:

1. **Converter** `to_experience`: episodes -> the ``Experience`` that OpenRLHF's
   ``SamplesGenerator`` builds from an agent's output, built with OpenRLHF's own class.
2. **Hook** `AgentExecutor` (an ``AgentExecutorBase``, constructed with no arguments, as
   ``--train.agent_func_path`` requires): plays one xpgym episode per dataset sample,
   token-in/token-out through the vLLM engine, and returns OpenRLHF's output dict. The
   dataset's label is `make_label` JSON: the task (env id, seed, group) and the options.
   `AGENT_FUNC_PATH` is a file to pass as ``--train.agent_func_path``.
3. **Override** `install_turn_rebn`: OpenRLHF has no per-turn returns (its
   ``reinforce`` discounts per token from one episode reward at the last action token, then
   whitens over tokens), so per-turn ReBN is not expressible with its flags. The smallest
   override replaces ``RemoteExperienceMaker.compute_advantages_and_returns`` for batches
   whose labels ask for it (``advantage="rebn"``/``"reinforce"`` in `make_label`): it reads
   each episode's per-turn rewards from the label (the executor writes them there), finds
   the turns as the runs of ``action_mask``, and computes ``rebn(discounted_returns(...))``
   exactly as `xpgym.training.advantages`. Other batches go to OpenRLHF's own code, after
   `fill_failed_rewards` (infra-error samples, below). The method runs in OpenRLHF's
   ``PPOTrainer`` Ray actor: install it there with Ray's ``worker_process_setup_hook``
   (`ray_runtime_env`).
4. **Launch** `write_task_rows`, `train_ppo_ray_flags`, `ray_runtime_env`: a run's task rows,
   ``train_ppo_ray``'s flags and Ray's runtime env (``recipes/train_openrlhf.py`` and the CPU
   end-to-end harness launch with them).

Batch layout (one row per episode; ``T`` the longest row, ``A = T - 1``)
--------------------------------------------------------------------

=======================  =======  ======  =======  ==========================================
field                    dtype    shape   padding  meaning
=======================  =======  ======  =======  ==========================================
``sequences``            int64    [B, T]  right    first prompt, then every turn's policy
                                                   tokens and the env/tool tokens between
                                                   them (``pad_token_id`` at padding)
``attention_mask``       int64    [B, T]  right    1 on real tokens
``action_mask``          int64    [B, A]  right    **next-token view**: ``action_mask[:, j]``
                                                   is 1 when token ``j + 1`` is a policy
                                                   token (env/tool, prompt, padding: 0)
``rollout_log_probs``    float32  [B, A]  right    sampler log-prob of token ``j + 1`` (0 off
                                                   policy tokens); None without log-probs
``rewards``, ``scores``  float32  [B]     --       the episode's total reward
``response_length``      int64    [B]     --       first to last policy token, inclusive
``truncated``            bool     [B]     --       the last generation hit its token budget
``total_length``         float32  [B]     --       real tokens
``index``                list     B       --       row order (OpenRLHF groups rows as
                                                   ``reshape(-1, n_samples_per_prompt)``:
                                                   groups must be consecutive blocks of n)
``labels``               list     B       --       `make_label` JSON with ``turn_rewards``
=======================  =======  ======  =======  ==========================================

Reward placement: OpenRLHF's ``compute_reward`` puts ``rewards`` (clipped to
``--reward.clip_range``, default ±10) on the last 1 of ``action_mask``, i.e. the episode's
last policy token; per-turn rewards survive only in the label (used by the override).

Infra-error episodes (``Episode.outcome == "infra_error"``, `xpgym.core.errors`) have
``action_mask`` 0 (no loss; no turn in the per-turn override, their label's ``turn_rewards``
is empty) and ``info["infra_error"]`` 1.0 (OpenRLHF logs its batch mean).
The episodes' own metrics (``Episode.info["metrics"]``, e.g. from reward functions) reach
OpenRLHF's logs as ``info["metrics/<key>"]``: in `to_experience` every row holds the batch's
`episode_metrics` value (so the logged mean is it), in the agent executor
``extra_logs["metrics/<key>"]`` for the keys the label names (`make_label`). OpenRLHF groups
fixed blocks of ``n_samples_per_prompt``, so a failed member cannot leave its group: in
`to_experience` its reward is the healthy members' mean (`infra_filled_scores`, which names
the exact effect on ``group_norm``'s std); the agent executor sees one sample at a time and
passes the recorded total, so the override (`install_turn_rebn`, installed for every
algorithm) fills it the same way before OpenRLHF's own statistics (`fill_failed_rewards`).

Differences from the reference trainer that change curves (advantages, loss aggregation,
KL, clipping, budgets) are listed in one place: docs/trainers.md, section "OpenRLHF".
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from copy import deepcopy
from pathlib import Path
from typing import Any

import numpy as np

from xpgym.core.optional import import_optional

_INSTALL = 'pip install "xpgym[openrlhf]"'
import_optional("openrlhf", needed_by="xpgym.adapters.openrlhf", install=_INSTALL)

import torch  # noqa: E402
from openrlhf.trainer.ppo_utils.experience import Experience  # noqa: E402
from openrlhf.utils.agent import AgentExecutorBase  # noqa: E402

from xpgym.core.trajectory import METRICS_PREFIX, Episode, episode_metrics  # noqa: E402
from xpgym.rollout.policies import Generation  # noqa: E402
from xpgym.rollout.runner import (  # noqa: E402
    EpisodeTask,
    generation_from_ids,
    run_episode,
    shared_prompt_builder,
    task_env_pool,
)
from xpgym.training.advantages import (  # noqa: E402
    GROUP_ALGORITHMS,
    TOKEN_ESTIMATORS,
    CriticFreeAlgorithm,
    TokenEstimator,
    filled_scores,
    infra_filled_scores,
    token_advantages,
    turn_index_from_mask,
)
from xpgym.training.layouts import episode_rows, shift_to_predictions  # noqa: E402

__all__ = [
    "AGENT_FUNC_PATH",
    "DATASET_FILE",
    "ESTIMATORS",
    "AgentExecutor",
    "agent_output",
    "check_algorithm",
    "fill_failed_rewards",
    "install_turn_rebn",
    "make_label",
    "ray_runtime_env",
    "to_experience",
    "train_ppo_ray_flags",
    "turn_advantages",
    "write_task_rows",
]

logger = logging.getLogger(__name__)

AGENT_FUNC_PATH = str(Path(__file__).with_name("openrlhf_agent_func.py"))
"""A file for ``--train.agent_func_path`` that exposes `AgentExecutor`."""


# --------------------------------------------------------------------------------------
# Labels: the task in, per-turn rewards out
# --------------------------------------------------------------------------------------


def make_label(
    task: EpisodeTask,
    *,
    advantage: str | None = None,
    gamma: float = 1.0,
    max_turns: int | None = None,
    system_prompt: str | None = None,
    metric_keys: Sequence[str] = (),
) -> str:
    """The dataset label of one OpenRLHF prompt: which episode to play and how.

    Args:
        task: The env, reset seed and group (`EpisodeTask`).
        advantage: ``"rebn"`` or ``"reinforce"`` to have the override (`install_turn_rebn`)
            compute per-turn advantages; None leaves them to OpenRLHF's estimator.
        gamma: Discount per turn for the override.
        max_turns, system_prompt: Options of the episode (`run_episode`).
        metric_keys: Keys of ``Episode.info["metrics"]`` (e.g. reward functions' metrics)
            that the agent executor logs as ``extra_logs["metrics/<key>"]`` (`agent_output`).
            OpenRLHF needs the same ``extra_logs`` keys on every sample, so they are named
            here rather than taken from whatever an episode reported.
    """
    if advantage is not None and advantage not in TOKEN_ESTIMATORS:
        raise ValueError(f"advantage must be one of {TOKEN_ESTIMATORS} or None, got {advantage!r}")
    options = {
        "advantage": advantage,
        "gamma": gamma,
        "max_turns": max_turns,
        "system_prompt": system_prompt,
        "metric_keys": list(metric_keys),
    }
    return json.dumps({"xpgym_task": json.loads(task.to_json()), "options": options})


def _parse_label(label: str) -> dict[str, Any]:
    data = json.loads(label)
    if not isinstance(data, dict) or "xpgym_task" not in data:
        raise ValueError(f"not an xpgym label (make_label): {label!r:.120}")
    return data


def _label_with_rewards(label: str | None, episode: Episode) -> str:
    """The label, with the episode's per-turn rewards under ``turn_rewards``."""
    data: dict[str, Any]
    if label is None:  # an episode from the collector: describe it
        data = {
            "xpgym_task": {
                "env_id": episode.env_id,
                "seed": episode.seed,
                "group_id": episode.group_id,
            },
            "options": {},
        }
    else:
        data = _parse_label(label)
    # an infra-error episode has no trained turn (its action_mask is 0)
    failed = episode.infra_error is not None
    data["turn_rewards"] = [] if failed else [turn.reward for turn in episode.turns]
    return json.dumps(data)


# --------------------------------------------------------------------------------------
# Converter
# --------------------------------------------------------------------------------------


def to_experience(
    episodes: Sequence[Episode],
    *,
    pad_token_id: int,
    max_length: int | None = None,
    truncate: bool = False,
    labels: Sequence[str] | None = None,
    n_samples_per_prompt: int | None = None,
) -> Experience:
    """The ``Experience`` OpenRLHF builds for `episodes` (one row each; module docstring).

    Args:
        episodes: Prefix-consistent episodes with token ids.
        pad_token_id: Written at padding of ``sequences``.
        max_length: ``--data.max_len``: a longer row raises, or with `truncate` keeps its
            first tokens (OpenRLHF cuts ``sequences[:max_len]``).
        labels: `make_label` labels per episode (default: one describing the episode);
            ``turn_rewards`` is added to each.
        n_samples_per_prompt: If given, check that groups are consecutive blocks of this
            size (how OpenRLHF forms groups).

    Raises:
        ValueError: bad groups, or the layout's errors.
    """
    if n_samples_per_prompt is not None:
        _check_groups(episodes, n_samples_per_prompt)
    rows = episode_rows(episodes).pad(
        pad_token_id=pad_token_id, max_length=max_length, truncate=truncate
    )
    action_mask = shift_to_predictions(rows.response_mask)
    policy = rows.response_mask == 1
    first = np.argmax(policy, axis=1)
    last = policy.shape[1] - 1 - np.argmax(policy[:, ::-1], axis=1)
    truncated = [bool(ep.turns[-1].info.get("generation_truncated", False)) for ep in episodes]
    rewards = torch.from_numpy(infra_filled_scores(episodes).astype(np.float32))
    logprobs = None
    if rows.rollout_logprobs is not None:
        logprobs = torch.from_numpy(
            np.ascontiguousarray(shift_to_predictions(rows.rollout_logprobs))
        )
    given = list(labels) if labels is not None else [None] * len(episodes)
    if len(given) != len(episodes):
        raise ValueError(f"{len(given)} labels for {len(episodes)} episodes")
    return Experience(
        sequences=torch.from_numpy(rows.input_ids),
        attention_mask=torch.from_numpy(rows.attention_mask),
        action_mask=torch.from_numpy(np.ascontiguousarray(action_mask)),
        rollout_log_probs=logprobs,
        rewards=rewards,
        scores=rewards.clone(),
        response_length=torch.from_numpy(np.where(policy.any(axis=1), last - first + 1, 0)),
        truncated=torch.tensor(truncated, dtype=torch.bool),
        total_length=torch.from_numpy(rows.attention_mask.sum(axis=1).astype(np.float32)),
        index=list(range(len(rows))),
        prompts=[str(ep.turns[0].observation) for ep in episodes],
        labels=[_label_with_rewards(lab, ep) for lab, ep in zip(given, episodes, strict=True)],
        images=[None] * len(rows),
        mm_train_inputs=[None] * len(rows),
        info={
            "reward": rewards.clone(),
            "score": rewards.clone(),
            "response_clip_ratio": torch.from_numpy(rows.overlong.copy()),
            "infra_error": torch.from_numpy(rows.infra_error.astype(np.float32)),
            **{
                key: torch.full((len(rows),), value, dtype=torch.float32)
                for key, value in episode_metrics(episodes).items()
            },
        },
    )


def _check_groups(episodes: Sequence[Episode], n: int) -> None:
    if n < 1 or len(episodes) % n:
        raise ValueError(f"{len(episodes)} episodes do not split into groups of {n}")
    for start in range(0, len(episodes), n):
        ids = {ep.group_id for ep in episodes[start : start + n]}
        if len(ids) != 1 or None in ids:
            raise ValueError(
                f"episodes {start}..{start + n - 1} have group ids {sorted(map(str, ids))}; "
                f"OpenRLHF groups consecutive blocks of n_samples_per_prompt={n}: sort by group"
            )


# --------------------------------------------------------------------------------------
# Per-turn ReBN / REINFORCE override
# --------------------------------------------------------------------------------------


def turn_advantages(
    experiences: Sequence[Experience], *, estimator: TokenEstimator, gamma: float
) -> None:
    """Set per-turn REINFORCE or ReBN advantages on `experiences`, in place.

    The statistic of ReBN runs over every turn of every experience (the whole batch, as the
    reference). Per experience row: the turns are the runs of ``action_mask``; their rewards
    come from the row's label (``turn_rewards``); ``advantages`` gets ``A_t`` on turn ``t``'s
    action positions and ``returns`` gets ``G_t`` there (both ``[B, A]``, 0 elsewhere);
    ``info["return"]`` is the episode's total reward.

    Raises:
        ValueError: a label without ``turn_rewards``, or a row whose number of turns differs
            from its label's (e.g. cut by ``max_len``).
    """
    masks, token_rewards, shapes = [], [], []
    for experience in experiences:
        mask = experience.action_mask.detach().cpu().numpy().astype(np.int64)
        index = turn_index_from_mask(mask)
        rewards = np.zeros(mask.shape)
        for b, label in enumerate(experience.labels):
            turn_rewards = _parse_label(label).get("turn_rewards")
            if turn_rewards is None:
                raise ValueError(f"label of row {b} has no turn_rewards: {label!r:.120}")
            turns = int(index[b].max(initial=-1)) + 1
            if turns != len(turn_rewards):
                raise ValueError(
                    f"row {b} has {turns} runs of action_mask but its label lists "
                    f"{len(turn_rewards)} turns (was the sequence cut by --data.max_len?)"
                )
            for t, reward in enumerate(turn_rewards):
                rewards[b, np.flatnonzero(index[b] == t)[-1]] = reward
        masks.append(mask)
        token_rewards.append(rewards)
        shapes.append(mask.shape)
    width = max(shape[1] for shape in shapes)

    def stack(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate([np.pad(p, ((0, 0), (0, width - p.shape[1]))) for p in parts])

    all_mask, all_rewards = stack(masks), stack(token_rewards)
    advantages = token_advantages(all_rewards, all_mask, estimator=estimator, gamma=gamma)
    returns = token_advantages(all_rewards, all_mask, estimator="reinforce", gamma=gamma)
    offset = 0
    for experience, (rows, cols) in zip(experiences, shapes, strict=True):
        device = experience.action_mask.device
        part = slice(offset, offset + rows)
        experience.advantages = torch.as_tensor(
            advantages[part, :cols], dtype=torch.float32, device=device
        )
        experience.returns = torch.as_tensor(
            returns[part, :cols], dtype=torch.float32, device=device
        )
        experience.info["return"] = experience.rewards.detach().clone()
        experience.kl = None
        offset += rows


def fill_failed_rewards(experiences: Sequence[Experience], n_samples_per_prompt: int) -> None:
    """Give each sample with no action token the mean reward of the healthy samples of its
    block, in place, before OpenRLHF's own group statistics.

    A sample with no action token is an infra-error episode's (`AgentExecutor` gives it no
    action range; a healthy sample has at least one policy token). The agent executor sees
    one sample at a time and hands OpenRLHF the episode's recorded total, which OpenRLHF's
    ``group_norm``/``dr_grpo``/``rloo`` would count in its block. OpenRLHF forms blocks of
    `n_samples_per_prompt` consecutive samples in ``experience.index`` order; the fill is
    `xpgym.training.advantages.filled_scores` over those blocks (what `to_experience`
    writes), so mean baselines are exactly the healthy members' (`infra_filled_scores`
    names the effect on the std). ``rewards`` and ``info["reward"]`` change; nothing else.
    """
    failed = torch.cat([~e.action_mask.bool().any(dim=-1) for e in experiences]).numpy()
    if not failed.any():
        return
    order = np.concatenate([np.asarray(e.index, dtype=np.int64) for e in experiences])
    raw = torch.cat([e.rewards for e in experiences]).double().numpy()
    scores = np.empty_like(raw)
    scores[order] = raw
    bad = np.zeros(len(raw), dtype=bool)
    bad[order] = failed
    blocks = list(np.arange(len(raw)) // n_samples_per_prompt)
    filled = filled_scores(scores, bad, blocks)[order]
    start = 0
    for experience in experiences:
        part = torch.from_numpy(filled[start : start + len(experience.index)])
        start += len(experience.index)
        experience.rewards = part.to(experience.rewards.dtype)
        if "reward" in experience.info:
            experience.info["reward"] = part.to(experience.info["reward"].dtype)


def install_turn_rebn() -> None:
    """Route ``RemoteExperienceMaker.compute_advantages_and_returns`` through
    `turn_advantages` for batches whose labels ask for it, and through `fill_failed_rewards`
    then OpenRLHF's own method for the others (idempotent; a Ray setup hook).

    A batch is handled here when every label is a `make_label` label with ``advantage``
    ``"rebn"`` or ``"reinforce"`` (all the same, with the same ``gamma``). Refuses a KL
    penalty in the reward (``--algo.kl.init_coef > 0`` without ``--algo.kl.use_loss``),
    which the override would silently drop.
    """
    from openrlhf.trainer.ppo_utils import experience_maker

    maker = experience_maker.RemoteExperienceMaker
    original = getattr(maker, "_xpgym_original_compute", None)
    if original is None:
        original = maker.compute_advantages_and_returns
        maker._xpgym_original_compute = original

    def compute_advantages_and_returns(
        self: Any, experiences: list[Experience]
    ) -> list[Experience]:
        options = _override_options(experiences)
        if options is None:
            fill_failed_rewards(experiences, int(self.strategy.args.rollout.n_samples_per_prompt))
            return original(self, experiences)
        kl_coef = float(getattr(self.kl_ctl, "value", 0.0) or 0.0)
        if kl_coef > 0:
            raise ValueError(
                f"xpgym's per-turn {options['advantage']} override does not add a KL penalty "
                f"to the reward (kl coef {kl_coef}); set --algo.kl.init_coef 0 or use "
                f"--algo.kl.use_loss"
            )
        turn_advantages(experiences, estimator=options["advantage"], gamma=float(options["gamma"]))
        return experiences

    maker.compute_advantages_and_returns = compute_advantages_and_returns


def _override_options(experiences: Sequence[Experience]) -> dict[str, Any] | None:
    """The override's options when every label asks for it, else None."""
    seen = set()
    for experience in experiences:
        for label in experience.labels:
            try:
                options = _parse_label(label)["options"]
            except (ValueError, TypeError, KeyError):
                return None
            seen.add((options.get("advantage"), options.get("gamma", 1.0)))
    if len(seen) != 1:
        if any(advantage is not None for advantage, _ in seen):
            raise ValueError(f"a batch mixes xpgym advantage options {sorted(map(str, seen))}")
        return None
    ((advantage, gamma),) = seen
    if advantage is None:
        return None
    return {"advantage": advantage, "gamma": gamma}


# --------------------------------------------------------------------------------------
# Agent executor
# --------------------------------------------------------------------------------------


class AgentExecutor(AgentExecutorBase):
    """OpenRLHF agent executor that plays one xpgym episode per call of `execute`.

    Constructed with no arguments (``vllm_engine._load_agent_executor`` calls
    ``AgentExecutor()``); one instance serves every sample of its vLLM actor, reusing envs.
    The label names the task (`make_label`); the prompt text is not used (the env's own
    observation is the prompt). Prompts are token-exact (the tokenizer's chat template,
    appended turn by turn), the per-turn budget is ``sampling_params.max_tokens`` (if set)
    capped by what is left of ``max_length``, and the output dict carries per-turn
    rewards in its label for `install_turn_rebn`.
    """

    def __init__(self) -> None:
        self.env_pool = task_env_pool()

    async def execute(
        self,
        prompt: str,
        label: str,
        sampling_params: Any,
        max_length: int,
        hf_tokenizer: Any,
        llm_engine: Any,
        images: Any = None,
    ) -> dict[str, Any]:
        """Play the label's task; return OpenRLHF's agent output dict."""
        spec = _parse_label(label)
        options = spec.get("options", {})
        task = EpisodeTask.from_json(spec["xpgym_task"])
        builder = shared_prompt_builder(hf_tokenizer)
        stops = [hf_tokenizer.eos_token_id]
        want_logprobs = getattr(sampling_params, "logprobs", None) is not None

        async def generate(prompt_ids: list[int], budget: int) -> Generation:
            params = deepcopy(sampling_params)
            params.max_tokens = budget
            output = (await llm_engine.generate(prompt_ids, params)).outputs[0]
            ids = list(output.token_ids)
            logprobs = None
            if want_logprobs and output.logprobs is not None:
                logprobs = [
                    step[token].logprob for step, token in zip(output.logprobs, ids, strict=True)
                ]
            reason = "length" if output.finish_reason == "length" else "stop"
            return generation_from_ids(
                hf_tokenizer,
                ids,
                logprobs=logprobs,
                stop_token_ids=stops,
                max_new_tokens=budget,
                finish_reason=reason,
            )

        with self.env_pool.lease(task) as env:
            episode = await run_episode(
                env,
                task,
                generate,
                builder,
                max_new_tokens=getattr(sampling_params, "max_tokens", None) or max_length,
                max_turns=options.get("max_turns"),
                max_total_tokens=max_length,
                system_prompt=options.get("system_prompt"),
            )
        return agent_output(
            episode,
            prompt=prompt,
            label=label,
            images=images,
            with_logprobs=want_logprobs,
            metric_keys=options.get("metric_keys", ()),
        )


def agent_output(
    episode: Episode,
    *,
    prompt: str,
    label: str | None,
    images: Any = None,
    with_logprobs: bool = True,
    metric_keys: Sequence[str] = (),
) -> dict[str, Any]:
    """OpenRLHF's agent output dict for one episode (what ``execute`` returns).

    ``observation_tokens`` is the episode row, ``action_ranges`` the ``[start, stop)`` of
    each turn's policy tokens in it, ``rollout_log_probs`` one per token (0 off policy
    tokens), ``reward``/``scores`` the episode total, ``truncated`` whether the last
    generation hit its budget, and the label gains ``turn_rewards``. ``extra_logs`` (which
    OpenRLHF averages over the batch) holds ``xpgym_turns``, ``xpgym_correct``,
    ``xpgym_infra_error`` and ``metrics/<key>`` for each of `metric_keys`: the episode's
    ``Episode.info["metrics"][key]``, 0.0 when it did not report it or failed for an
    infrastructure reason (`xpgym.core.trajectory.episode_metrics` of the episode).
    """
    reported = episode_metrics([episode])
    row = episode_rows([episode]).row(0)
    ranges = []
    for t in range(row.num_turns if episode.infra_error is None else 0):  # infra: no action
        positions = np.flatnonzero(row.turn_index == t)
        ranges.append((int(positions[0]), int(positions[-1]) + 1))
    logprobs = None
    if with_logprobs and row.rollout_logprobs is not None:
        logprobs = row.rollout_logprobs.tolist()
    last = episode.turns[-1]
    return {
        "prompt": prompt,
        "label": _label_with_rewards(label, episode),
        "images": images,
        "mm_train_inputs": None,
        "reward": episode.total_reward,
        "scores": episode.total_reward,
        "observation_tokens": row.input_ids.tolist(),
        "action_ranges": ranges,
        "rollout_log_probs": logprobs,
        "truncated": bool(last.info.get("generation_truncated", False)),
        "extra_logs": {
            "xpgym_turns": float(len(episode.turns)),
            "xpgym_correct": float(bool(last.info.get("correct", False))),
            "xpgym_infra_error": float(episode.infra_error is not None),
            **{
                f"{METRICS_PREFIX}{key}": reported.get(f"{METRICS_PREFIX}{key}", 0.0)
                for key in metric_keys
            },
        },
    }


# --------------------------------------------------------------------------------------
# Launch: the task rows, OpenRLHF's flags and Ray runtime env of a run
# --------------------------------------------------------------------------------------

ESTIMATORS: dict[str, tuple[str, TokenEstimator | None]] = {
    "rebn": ("reinforce", "rebn"),
    "reinforce": ("reinforce", "reinforce"),
    "grpo": ("group_norm", None),
    "dr_grpo": ("dr_grpo", None),
    "rloo": ("rloo", None),
}
"""Algorithm -> (OpenRLHF's ``--algo.advantage.estimator``, xpgym's per-turn override
(`install_turn_rebn`, named in each label) or None for OpenRLHF's own estimator)."""

DATASET_FILE = "train.jsonl"
"""The task rows' file name in a run directory (`write_task_rows`, ``--data.prompt_dataset``)."""


def _estimator(algorithm: str) -> tuple[str, TokenEstimator | None]:
    if algorithm not in ESTIMATORS:
        raise ValueError(f"algorithm must be one of {sorted(ESTIMATORS)}, got {algorithm!r}")
    return ESTIMATORS[algorithm]


def check_algorithm(algorithm: str, n_samples_per_prompt: int) -> None:
    """Refuse an algorithm OpenRLHF cannot run with this group size.

    Raises:
        ValueError: `algorithm` is not in `ESTIMATORS`, or a group algorithm (grpo, dr_grpo,
            rloo) has ``n_samples_per_prompt < 2``.
    """
    _estimator(algorithm)
    if algorithm in GROUP_ALGORITHMS and n_samples_per_prompt < 2:
        raise ValueError(f"algorithm {algorithm} needs n_samples_per_prompt >= 2")


def write_task_rows(
    run_dir: Path,
    env_id: str,
    num_tasks: int,
    *,
    algorithm: CriticFreeAlgorithm = "rebn",
    gamma: float = 0.9,
    max_turns: int | None = None,
    seed: int = 0,
) -> list[dict[str, str]]:
    """Write ``run_dir / DATASET_FILE``: one JSONL row per task (`make_tasks`), ``prompt`` a
    placeholder (the executor builds the real one) and ``label`` the `make_label` naming the
    episode to play and, for ``rebn``/``reinforce``, the per-turn override. Returns the rows.

    Raises:
        ValueError: `algorithm` is not in `ESTIMATORS`.
    """
    from xpgym.rollout.runner import make_tasks

    override = _estimator(algorithm)[1]
    rows = [
        {
            "prompt": f"xpgym task {task.group_id}",
            "label": make_label(task, advantage=override, gamma=gamma, max_turns=max_turns),
        }
        for task in make_tasks(env_id, num_tasks, seed=seed)
    ]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / DATASET_FILE).write_text("".join(json.dumps(row) + "\n" for row in rows))
    return rows


def train_ppo_ray_flags(
    *,
    model: str,
    run_dir: Path,
    algorithm: CriticFreeAlgorithm = "rebn",
    gamma: float = 0.9,
    rollout_batch_size: int = 32,
    n_samples_per_prompt: int = 1,
    train_batch_size: int = 32,
    max_epochs: int = 2,
    lr: float = 1e-6,
    max_new_tokens: int = 4096,
    max_len: int = 16384,
    n_gpus: int = 1,
    seed: int = 0,
    dynamic_filtering_range: tuple[float, float] | None = None,
) -> list[str]:
    """Command-line flags of ``openrlhf.cli.train_ppo_ray`` that train with `AgentExecutor` on
    the task rows in `run_dir` (`write_task_rows`); checkpoints go to ``run_dir/checkpoints``.

    Actor, reference and `n_gpus` vLLM engines share the GPUs (``colocate_all``, sleep mode).
    Optimiser and sampling follow the GEM paper: Adam (0.9, 0.95), no weight decay, constant
    lr, grad clip 1.0, clip 0.2, no KL (OpenRLHF's default ``init_coef`` is 0.01), temperature
    1, top-p 1. ``gamma`` reaches OpenRLHF only for its ``reinforce`` estimator.

    ``dynamic_filtering_range=(low, high)`` turns on OpenRLHF's dynamic filtering: a
    prompt's samples are dropped, and a new prompt dispatched in their place, when their mean
    score is not strictly inside ``(low, high)``. For scores in ``{0, 1}`` and ``(0, 1)``
    that is DAPO's zero-variance rule (all failed or all succeeded); for shaped scores a
    group can vary with a mean outside the range or be flat inside it.

    Raises:
        ValueError: as `check_algorithm`; an empty `dynamic_filtering_range`.
    """
    check_algorithm(algorithm, n_samples_per_prompt)
    filtering: list[str] = []
    if dynamic_filtering_range is not None:
        low, high = dynamic_filtering_range
        if not low < high:
            raise ValueError(f"dynamic_filtering_range must have low < high, got {(low, high)}")
        filtering = ["--algo.dynamic_filtering_enable", "--algo.dynamic_filtering_range"]
        filtering += [str(float(low)), str(float(high))]
    estimator = _estimator(algorithm)[0]
    n = str(n_gpus)
    return [
        "--actor.model_name_or_path", model,
        "--train.agent_func_path", AGENT_FUNC_PATH,
        "--data.prompt_dataset", str(run_dir / DATASET_FILE),
        "--data.input_key", "prompt",
        "--data.label_key", "label",
        "--data.max_len", str(max_len),
        "--rollout.max_new_tokens", str(max_new_tokens),
        "--rollout.batch_size", str(rollout_batch_size),
        "--rollout.n_samples_per_prompt", str(n_samples_per_prompt),
        "--rollout.temperature", "1.0",
        "--rollout.top_p", "1.0",
        "--train.batch_size", str(train_batch_size),
        "--train.micro_batch_size", "1",
        "--rollout.micro_batch_size", "1",
        "--train.max_epochs", str(max_epochs),
        "--train.seed", str(seed),
        "--algo.advantage.estimator", estimator,
        "--algo.advantage.gamma", str(gamma if estimator == "reinforce" else 1.0),
        "--algo.kl.init_coef", "0",
        "--actor.adam.lr", str(lr),
        "--actor.adam.betas", "0.9", "0.95",
        "--actor.adam.weight_decay", "0.0",
        "--actor.lr_scheduler", "constant",
        "--actor.lr_warmup_ratio", "0",
        "--actor.max_norm", "1.0",
        "--actor.eps_clip", "0.2",
        "--actor.num_gpus_per_node", n,
        "--ref.num_gpus_per_node", n,
        "--vllm.num_engines", n,
        "--train.colocate_all",
        "--vllm.enable_sleep",
        "--ds.enable_sleep",
        "--ckpt.path", str(run_dir / "checkpoints"),
        *filtering,
    ]  # fmt: skip


def ray_runtime_env(algorithm: CriticFreeAlgorithm) -> dict[str, Any]:
    """Ray's runtime env for every worker of a run: xpgym's advantage override installed as
    the ``worker_process_setup_hook`` (`install_turn_rebn`: per-turn advantages for
    ``rebn``/``reinforce``, failed samples' rewards filled for OpenRLHF's own estimators).

    Raises:
        ValueError: `algorithm` is not in `ESTIMATORS`.
    """
    _estimator(algorithm)
    return {
        "env_vars": {
            "TOKENIZERS_PARALLELISM": "true",
            "NCCL_DEBUG": os.environ.get("NCCL_DEBUG", "WARN"),
        },
        "worker_process_setup_hook": f"{__name__}.install_turn_rebn",
    }
