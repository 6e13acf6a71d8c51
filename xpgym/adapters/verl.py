r"""verl adapter: `Episode`\s -> ``verl.DataProto``, an agent loop, and ReBN estimators.

Supported: ``verl`` 0.9.x with its V1 trainer (``trainer.use_v1=true``, the default). The
legacy trainer (``main_ppo_v0``) builds ``rm_scores`` from one scalar per sequence and
cannot take a list of outputs, so per-turn rewards and per-turn rows would be lost there;
`XpgymAgentLoop` refuses it.

Four parts:

1. **Converter** `to_data_proto`: episodes -> the ``DataProto`` that verl's agent-loop
   rollout produces, built with verl's own ``DataProto`` / ``TensorDict``.
2. **Hook** `XpgymAgentLoop` (registered as ``"xpgym_agent"``): an ``AgentLoopBase`` that
   plays one xpgym episode per dataset row through verl's token-in/token-out
   ``server_manager.generate``, and returns one output (``layout="per_episode"``) or a list
   of outputs, one per turn (``"per_turn"``; V1 stores each as its own row).
3. **Estimators** ``xpgym_reinforce``, ``xpgym_rebn`` and ``xpgym_turn_values``, registered
   with ``core_algos.register_adv_est`` when this module is imported (`register_estimators`):
   per-turn REINFORCE returns and ReBN of `xpgym.training.advantages`, computed from verl's
   ``token_level_rewards`` and ``response_mask`` (turns = runs of the mask); per-turn
   advantages computed from the episodes (GiGPO, tree; below); and
   ``xpgym_grpo``/``xpgym_rloo``, verl's own with infra-error rows set apart. verl runs
   estimators in its TaskRunner process: import this module there (`ppo_overrides` sets
   Ray's ``worker_process_setup_hook`` to `register_estimators`).
4. **Launch configuration** `ppo_overrides` / `ppo_config` / `write_run_files`: verl's
   ``ppo_trainer`` config for a run of `XpgymAgentLoop` and the files it reads, shared by
   ``recipes/train_verl.py`` and the CPU end-to-end run of ``parity/e2e/verl.py``.

Batch layout (``B`` rows; ``P``/``R`` the longest prompt/response, or the configured
``rollout.prompt_length``/``response_length`` with ``pad_to_max_length=True``)
----------------------------------------------------------------------------------------

===================  =======  ==========  =======  ====================================
key                  dtype    shape       padding  meaning
===================  =======  ==========  =======  ====================================
``prompts``          int64    [B, P]      left     the row's first prompt (history
                                                   included in per-turn rows)
``responses``        int64    [B, R]      right    everything after it: policy tokens
                                                   and, in episode rows, the env/tool
                                                   tokens between turns
``response_mask``    int64    [B, R]      right    1 on policy tokens only (loss mask);
                                                   0 on env/tool tokens and padding
``input_ids``        int64    [B, P+R]    both     ``prompts`` then ``responses``
``attention_mask``   int64    [B, P+R]    both     1 on real tokens
``position_ids``     int64    [B, P+R]    both     ``clip(cumsum(attention_mask)-1, 0)``
``rm_scores``        float32  [B, R]      right    reward placement, below
``rollout_log_probs`` float32 [B, R]      right    sampler log-probs on policy tokens, 0
                                                   elsewhere (only when episodes have them)
``uid`` (non-tensor) object   [B]         --       the episode's ``group_id`` (GRPO group)
``__num_turns__``    int32    [B]         --       2 x the row's turns (user + assistant)
``xpgym_state_keys`` object   [B]         --       with ``step_ids=True``: per row a tuple
                                                   of str, each turn's anchor-state key
                                                   (`RowInfo.state_keys`; GiGPO's step
                                                   groups are ``(uid, key)`` pairs)
``xpgym_node_ids``   object   [B]         --       with ``step_ids=True`` and every
                                                   episode an ``episode_id``: per row a
                                                   tuple of str, each turn's tree node
                                                   (`RowInfo.node_ids`)
``xpgym_tree_root``  object   [B]         --       with ``xpgym_node_ids``: the root of
                                                   the row's tree (`RowInfo.tree_root`)
===================  =======  ==========  =======  ====================================

Reward placement (``rm_scores``, which V1 copies to ``token_level_scores`` and, without a KL
penalty, ``token_level_rewards``): ``per_episode`` rows carry each turn's reward ``r_t`` on
that turn's last policy token; ``per_turn`` rows carry the turn's **return**
``G_t = r_t + gamma * G_{t+1}`` on its last token, because a verl estimator sees rows, not
episodes (gamma is ``algorithm.gamma``). With that, ``xpgym_reinforce`` and ``xpgym_rebn``
give the same per-turn advantages in both layouts, equal to the reference
(`xpgym.training.advantages`: ``rebn(discounted_returns(r, m, gamma), m)``, population std,
``eps = 1e-9`` added to the std). verl's built-in ``grpo``/``rloo`` read each row's reward
sum, so they need ``per_episode`` rows (sum = the episode's total reward).

Infra-error episodes (``Episode.outcome == "infra_error"``, `xpgym.core.errors`): their rows
have ``response_mask`` 0 and ``rm_scores`` 0 (`xpgym.training.layouts`), so no loss and no turn
in ``xpgym_reinforce``/``xpgym_rebn``; in `to_data_proto` their ``uid`` is a group of their
own. In the agent loop verl assigns ``uid`` per prompt before the rollout, so a failed
sample would stay in its group with score 0: the launch configuration therefore runs verl's
``grpo`` and ``rloo`` as ``xpgym_grpo`` / ``xpgym_rloo`` (`ALGORITHMS`), verl's own
functions with every row that has no policy token in a group of its own, and the other
members' statistics are exactly those without it. ``meta_info["xpgym_metrics"]`` holds
`infra_error_metrics` and the episodes' own metrics, ``metrics/<key>`` (`episode_metrics`:
``Episode.info["metrics"]`` averaged, e.g. from reward functions); in the agent loop each
output's ``extra_fields["xpgym_metrics"]`` holds its episode's (``{}`` when none: verl keeps
extra fields per sample, in the rollout data it dumps, and does not average them itself),
and ``extra_fields["infra_error"]`` names the cause kind (``None`` when ok) for verl's logs.

Step-level and tree advantages (``gigpo``, ``tree``): verl hands an estimator only
``token_level_rewards``, ``response_mask`` and ``uid`` (its V1 trainer reads no other field
for advantages), so GiGPO's anchor states and a tree's nodes cannot reach one. They are
computed from the episodes instead (`to_data_proto(..., advantage="gigpo" | "tree")`, which
puts each turn's advantage on its last policy token in ``rm_scores``) and read back per turn
by ``algorithm.adv_estimator=xpgym_turn_values``; verl's reward logs then show advantages.
An estimator of a verl fork that groups turns itself (verl-agent's GiGPO) reads the ids
from ``non_tensor_batch`` instead: ``to_data_proto(..., step_ids=True)`` adds
``xpgym_state_keys`` (and, for trees, ``xpgym_node_ids`` / ``xpgym_tree_root``).
`XpgymAgentLoop` plays each episode alone, so its batches cannot use them: they are for
episodes xpgym collected as groups or trees (`RolloutCollector.collect_tree`).

Differences from the reference trainer that change curves (advantages, loss aggregation,
KL, clipping, budgets) are listed in one place: docs/trainers.md, section "verl".
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xpgym.adapters._trainer_import import root_logging_kept
from xpgym.core.optional import import_optional

_INSTALL = 'pip install "xpgym[verl]"'
with root_logging_kept():  # verl's logging_utils calls logging.basicConfig
    import_optional("verl", needed_by="xpgym.adapters.verl", install=_INSTALL)
    import torch
    from tensordict import TensorDict
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopBase,
        AgentLoopMetrics,
        AgentLoopOutput,
        register,
    )
    from verl.trainer.ppo import core_algos
    from verl.workers.rollout.replica import TokenOutput

from xpgym.core.trajectory import (  # noqa: E402
    INFRA_GROUP_PREFIX,
    Episode,
    episode_metrics,
    infra_error_metrics,
)
from xpgym.rollout.policies import Generation  # noqa: E402
from xpgym.rollout.runner import (  # noqa: E402
    EpisodeTask,
    generation_from_ids,
    run_episode,
    shared_prompt_builder,
    task_env_pool,
)
from xpgym.training.advantages import (  # noqa: E402
    CriticFreeAlgorithm,
    StepAlgorithm,
    episode_advantages,
    row_returns,
    token_advantages,
)
from xpgym.training.layouts import Layout, PackedRows, build_rows  # noqa: E402

__all__ = [
    "AGENT_NAME",
    "ALGORITHMS",
    "ESTIMATORS",
    "XpgymAgentLoop",
    "XpgymAgentLoopOutput",
    "dataset_rows",
    "episode_outputs",
    "ppo_config",
    "ppo_overrides",
    "register_estimators",
    "to_data_proto",
    "write_run_files",
]

logger = logging.getLogger(__name__)

AGENT_NAME = "xpgym_agent"
"""The ``agent_name`` of `XpgymAgentLoop` (dataset column or ``default_agent_loop``)."""


# --------------------------------------------------------------------------------------
# Converter
# --------------------------------------------------------------------------------------


def to_data_proto(
    episodes: Sequence[Episode],
    *,
    pad_token_id: int,
    layout: Layout = "per_episode",
    gamma: float = 1.0,
    max_prompt_length: int | None = None,
    max_response_length: int | None = None,
    truncate: bool = False,
    pad_to_max_length: bool = False,
    advantage: StepAlgorithm | None = None,
    advantage_kwargs: Mapping[str, Any] | None = None,
    step_ids: bool = False,
) -> DataProto:
    """The ``DataProto`` verl's agent-loop rollout would give for `episodes`.

    Args:
        episodes: Episodes with token ids (prefix-consistent for ``"per_episode"``).
        pad_token_id: Id written at padding (the tokenizer's pad token).
        layout: ``"per_episode"`` (one row per episode) or ``"per_turn"`` (one per turn).
        gamma: Discount per turn; used only by ``"per_turn"`` rows (``rm_scores`` holds
            each turn's return there). Pass ``algorithm.gamma``.
        max_prompt_length, max_response_length: verl's ``rollout.prompt_length`` /
            ``response_length``. A longer prompt raises; a longer response raises, or with
            `truncate` keeps its first tokens (rewards of cut tokens move to the last kept
            policy token, as in `PackedRows.split`).
        pad_to_max_length: Pad to those lengths (verl's fixed shapes) instead of the
            longest row.
        advantage: ``"gigpo"`` or ``"tree"``: ``rm_scores`` holds each turn's advantage
            (`xpgym.training.advantages.episode_advantages` of `episodes`, with `gamma` and
            `advantage_kwargs`) on its last policy token instead of a reward or return, for
            the estimator ``xpgym_turn_values`` (module docstring, "Step-level and tree
            advantages"). None: rewards as above.
        advantage_kwargs: Options of the estimator (e.g. gigpo's ``omega``).
        step_ids: Also carry each row's per-turn ids in ``non_tensor_batch``:
            ``xpgym_state_keys``, and ``xpgym_node_ids`` / ``xpgym_tree_root`` when every
            episode has an ``episode_id`` (module docstring; a cost per turn, see
            `xpgym.training.layouts.turn_rows`).

    Returns:
        A ``DataProto`` with the keys of the module docstring's table.
    """
    if advantage is None:
        packed = _rows(episodes, layout=layout, gamma=gamma, step_ids=step_ids)
    else:
        values = episode_advantages(
            advantage, episodes, gamma=gamma, **dict(advantage_kwargs or {})
        )
        packed = build_rows(episodes, layout, step_ids=step_ids).with_turn_values(values)
    rows = packed.split(
        pad_token_id=pad_token_id,
        max_prompt_length=max_prompt_length,
        max_response_length=max_response_length,
        truncate=truncate,
        pad_to_max_length=pad_to_max_length,
    )
    tensors = {
        "prompts": rows.prompts,
        "responses": rows.responses,
        "response_mask": rows.response_mask,
        "input_ids": rows.input_ids,
        "attention_mask": rows.attention_mask,
        "position_ids": rows.position_ids,
        "rm_scores": rows.token_rewards,
    }
    if rows.rollout_logprobs is not None:
        tensors["rollout_log_probs"] = rows.rollout_logprobs
    batch = TensorDict(
        {key: torch.from_numpy(np.ascontiguousarray(value)) for key, value in tensors.items()},
        batch_size=[len(rows)],
    )
    non_tensor = {
        "uid": rows.group_id,
        "__num_turns__": (2 * rows.num_turns).astype(np.int32),
    }
    ids = {
        "xpgym_state_keys": rows.state_keys,
        "xpgym_node_ids": rows.node_ids,
        "xpgym_tree_root": rows.tree_root,
    }
    non_tensor.update({key: value for key, value in ids.items() if value is not None})
    meta_info = {"xpgym_metrics": {**infra_error_metrics(episodes), **episode_metrics(episodes)}}
    return DataProto(batch=batch, non_tensor_batch=non_tensor, meta_info=meta_info)


def _rows(
    episodes: Sequence[Episode], *, layout: Layout, gamma: float, step_ids: bool = False
) -> PackedRows:
    """verl's rows of `episodes`, their ``token_rewards`` being ``rm_scores`` (module
    docstring): per-turn rows carry each turn's return ``G_t`` on its last token."""
    rows = build_rows(episodes, layout, step_ids=step_ids)
    if layout == "per_turn":
        return rows.with_row_rewards(row_returns(episodes, rows, gamma))
    return rows


# --------------------------------------------------------------------------------------
# Advantage estimators
# --------------------------------------------------------------------------------------


def _gamma(config: Any) -> float:
    """``algorithm.gamma`` from verl's ``AlgoConfig`` / ``DictConfig`` (1.0, verl's default,
    when no config is given)."""
    if config is None:
        return 1.0
    gamma = config.get("gamma", 1.0) if hasattr(config, "get") else getattr(config, "gamma", 1.0)
    return float(gamma)


def _as_tensors(
    advantages: np.ndarray, returns: np.ndarray, like: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    def convert(values: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(values, dtype=torch.float32, device=like.device)

    return convert(advantages), convert(returns)


def xpgym_reinforce(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator ``xpgym_reinforce``: ``A_t = G_t`` per turn, on the turn's tokens.

    Args (verl's estimator signature; other keyword arguments such as ``index`` are
    ignored):
        token_level_rewards: ``[B, R]`` rewards on each turn's last policy token.
        response_mask: ``[B, R]`` 1 on policy tokens.
        config: verl's algorithm config; ``gamma`` is read from it.

    Returns:
        ``(advantages, returns)``, both ``[B, R]`` float32 and equal here.
    """
    returns = token_advantages(
        token_level_rewards.detach().cpu().numpy(),
        response_mask.detach().cpu().numpy(),
        estimator="reinforce",
        gamma=_gamma(config),
    )
    return _as_tensors(returns, returns, token_level_rewards)


def xpgym_rebn(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator ``xpgym_rebn``: ReBN over all turns of the batch (GEM's baseline).

    ``A_t = (G_t - mean(G)) / (std(G) + 1e-9)`` with the population std over every turn of
    every row (`xpgym.training.advantages.token_advantages`); ``returns`` is ``G_t`` on each turn's
    tokens. Arguments as `xpgym_reinforce`.
    """
    rewards = token_level_rewards.detach().cpu().numpy()
    mask = response_mask.detach().cpu().numpy()
    gamma = _gamma(config)
    advantages = token_advantages(rewards, mask, estimator="rebn", gamma=gamma)
    returns = token_advantages(rewards, mask, estimator="reinforce", gamma=gamma)
    return _as_tensors(advantages, returns, token_level_rewards)


def _failed_apart(index: Any, response_mask: torch.Tensor) -> np.ndarray:
    """verl's group ``index`` with each row that has no policy token (an infra-error
    episode's, `xpgym.training.layouts`; a healthy row has at least one) in a group of its
    own, ``INFRA_GROUP_PREFIX`` + its row."""
    index = np.array(index, dtype=object)
    failed = ~response_mask.detach().cpu().numpy().any(axis=-1)
    index[failed] = [f"{INFRA_GROUP_PREFIX}{i}" for i in np.flatnonzero(failed)]
    return index


def xpgym_grpo(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator ``xpgym_grpo``: verl's own ``grpo`` with every infra-error row in a
    group of its own, so the other members' statistics are exactly those without it.

    In the agent loop verl assigns ``uid`` per prompt, so a failed sample would stay in its
    group with score 0. ``norm_adv_by_std_in_grpo`` is read from `config` (verl's algorithm
    config; default True, as verl). Returns verl's ``(advantages, returns)``.
    """
    return core_algos.compute_grpo_outcome_advantage(
        token_level_rewards,
        response_mask,
        _failed_apart(index, response_mask),
        norm_adv_by_std_in_grpo=bool(getattr(config, "norm_adv_by_std_in_grpo", True)),
        config=config,
    )


def xpgym_rloo(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator ``xpgym_rloo``: verl's own ``rloo`` with every infra-error row in a
    group of its own (as `xpgym_grpo`). Returns verl's ``(advantages, returns)``."""
    return core_algos.compute_rloo_outcome_advantage(
        token_level_rewards, response_mask, _failed_apart(index, response_mask), config=config
    )


def xpgym_turn_values(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator ``xpgym_turn_values``: each turn's value, read off its last policy
    token, on all of the turn's tokens: ``A_t = token_level_rewards[last token of t]``.

    For batches whose ``rm_scores`` already hold per-turn advantages computed from the
    episodes (`to_data_proto` with ``advantage="gigpo"`` or ``"tree"``): per-turn
    REINFORCE with ``gamma = 0`` (`xpgym.training.advantages.token_advantages`), whatever
    ``algorithm.gamma`` says (the advantages were discounted where they were computed).
    ``returns`` equal the advantages. Arguments as `xpgym_reinforce`.
    """
    values = token_advantages(
        token_level_rewards.detach().cpu().numpy(),
        response_mask.detach().cpu().numpy(),
        estimator="reinforce",
        gamma=0.0,
    )
    return _as_tensors(values, values, token_level_rewards)


ESTIMATORS = {
    "xpgym_reinforce": xpgym_reinforce,
    "xpgym_rebn": xpgym_rebn,
    "xpgym_grpo": xpgym_grpo,
    "xpgym_rloo": xpgym_rloo,
    "xpgym_turn_values": xpgym_turn_values,
}
"""verl ``algorithm.adv_estimator`` names this module registers."""


def register_estimators() -> None:
    """Register `ESTIMATORS` in verl's registry (idempotent; also a Ray setup hook).

    verl raises when a name is registered twice with different functions (as after a module
    reload); this overwrites our own names instead.
    """
    for name, fn in ESTIMATORS.items():
        if name in core_algos.ADV_ESTIMATOR_REGISTRY:
            core_algos.ADV_ESTIMATOR_REGISTRY[name] = fn
        else:
            core_algos.register_adv_est(name)(fn)


register_estimators()


# --------------------------------------------------------------------------------------
# Agent loop
# --------------------------------------------------------------------------------------


def dataset_rows(
    tasks: Sequence[EpisodeTask],
    *,
    layout: Layout = "per_episode",
    max_turns: int | None = None,
    max_new_tokens: int | None = None,
    system_prompt: str | None = None,
) -> list[dict[str, Any]]:
    """Rows of a verl RL dataset (e.g. written to parquet) that play `tasks`.

    Each row has ``data_source`` ``"xpgym"``, ``agent_name`` `AGENT_NAME`, a placeholder
    ``prompt`` (verl's dataset requires chat messages; the env's observation replaces them)
    and ``extra_info`` with the task (``xpgym_task``, `EpisodeTask.to_json`) and the
    agent-loop options (``layout``, ``max_turns``, ``max_new_tokens``, ``system_prompt``).
    With ``rollout.n = k`` verl plays every row ``k`` times: one group of ``k`` episodes
    from the same start state.
    """
    options = {
        "layout": layout,
        "max_turns": max_turns,
        "max_new_tokens": max_new_tokens,
        "system_prompt": system_prompt,
    }
    return [
        {
            "data_source": "xpgym",
            "agent_name": AGENT_NAME,
            "prompt": [{"role": "user", "content": f"xpgym task {task.group_id}"}],
            "extra_info": {"index": i, "xpgym_task": task.to_json(), **options},
        }
        for i, task in enumerate(tasks)
    ]


class XpgymAgentLoopOutput(AgentLoopOutput):
    """An ``AgentLoopOutput`` whose ``rm_scores`` are per token.

    verl's ``as_dict`` turns the scalar ``reward_score`` into ``rm_scores`` with the score on
    the last response token. This output carries ``token_rewards`` (one per response token:
    each turn's reward, or return in per-turn rows, on its last policy token) and writes
    them as ``rm_scores``. ``reward_score`` is the row's reward sum; being set, it tells
    verl's worker that the reward is computed (no reward-model / reward-function call), and
    its value is not used for training (``rm_scores`` replaces it).
    """

    token_rewards: list[float]
    """Per response token, aligned with ``response_ids``."""

    def as_dict(self) -> dict[str, Any]:
        """verl's dict, with ``rm_scores`` = ``token_rewards``."""
        output = super().as_dict()
        output.pop("token_rewards", None)
        output["rm_scores"] = torch.tensor(self.token_rewards, dtype=torch.float32)
        return output


_ENV_POOL = task_env_pool()

_SPEC_DECODE_COUNTERS = (
    "spec_num_draft_tokens",
    "spec_num_accepted_tokens",
    "spec_num_verify_steps",
)
"""Per-request counters verl's servers report with speculative decoding; summed per episode."""


@dataclass
class _ServerReport:
    """What verl's server reported over one episode's ``generate`` calls, folded as verl's
    own ``tool_agent_loop`` folds it.

    ``extra_fields``: the fields of the first call that reports any (``min_global_steps``,
    the weight version the episode started with, among them), ``max_global_steps`` from the
    latest call that has one, speculative-decoding counters summed. verl's V1 trainer reads
    ``min_global_steps`` / ``max_global_steps`` from every output and casts them to int.
    ``num_preempted``: summed; -1 until the server reports it (verl's "not available").
    """

    seconds: float = 0.0
    num_preempted: int = -1
    extra_fields: dict[str, Any] = field(default_factory=dict)

    def add(self, output: TokenOutput, seconds: float) -> None:
        """Fold in one ``generate`` output that took `seconds`."""
        self.seconds += seconds
        if output.num_preempted is not None:
            self.num_preempted = max(self.num_preempted, 0) + output.num_preempted
        if not self.extra_fields:
            self.extra_fields.update(output.extra_fields)
            return
        latest = output.extra_fields.get("max_global_steps")
        if latest is not None:
            self.extra_fields["max_global_steps"] = latest
        for key in _SPEC_DECODE_COUNTERS:
            if key in self.extra_fields and key in output.extra_fields:
                self.extra_fields[key] = int(self.extra_fields[key]) + int(output.extra_fields[key])

    def metrics(self) -> AgentLoopMetrics:
        """verl's per-output metrics of the episode."""
        return AgentLoopMetrics(generate_sequences=self.seconds, num_preempted=self.num_preempted)


@register(AGENT_NAME)
class XpgymAgentLoop(AgentLoopBase):
    """verl agent loop that plays one xpgym episode per call of `run`.

    The row's ``extra_info`` (see `dataset_rows`) names the task; the loop makes (or
    reuses) the env, plays it with `xpgym.rollout.runner.run_episode` through
    ``server_manager.generate`` (token-exact prompts from the tokenizer's chat template),
    and converts the episode with `to_data_proto`'s rules: one `XpgymAgentLoopOutput`
    (``per_episode``) or one per turn (``per_turn``). Per-turn generation budget: the row's
    ``max_new_tokens`` (default ``rollout.response_length``); the whole response after the
    first prompt is capped at ``rollout.response_length``. Every output carries the server's
    ``extra_fields`` of the episode (``min_global_steps`` of its first generate,
    ``max_global_steps`` of its last; see `_ServerReport`), as verl's ``tool_agent_loop``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.config.trainer.get("use_v1", True):
            raise ValueError(
                "XpgymAgentLoop needs verl's V1 trainer (trainer.use_v1=true): the legacy "
                "trainer keeps one reward per sequence and one output per row"
            )
        self.response_length = int(self.rollout_config.response_length)
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.gamma = float(self.config.algorithm.gamma)
        # verl annotates `tokenizer` with the AutoTokenizer factory class; it is an instance
        tokenizer: Any = self.tokenizer
        self.prompt_builder = shared_prompt_builder(
            tokenizer, chat_template_kwargs=self.apply_chat_template_kwargs
        )
        eos = tokenizer.eos_token_id
        self.stop_token_ids = [int(eos)] if eos is not None else []

    async def run(  # verl's V1 trainer takes a list per row too
        self, sampling_params: dict[str, Any], **kwargs: Any
    ) -> XpgymAgentLoopOutput | list[XpgymAgentLoopOutput]:
        """Play the row's task; return its output(s) (see the class docstring)."""
        extra = dict(kwargs["extra_info"])
        task = EpisodeTask.from_json(extra["xpgym_task"])
        layout: Layout = extra.get("layout") or "per_episode"
        max_new_tokens = int(extra.get("max_new_tokens") or self.response_length)
        request_id = uuid.uuid4().hex  # one sticky id per episode (prefix caching)
        report = _ServerReport()

        async def generate(prompt_ids: list[int], budget: int) -> Generation:
            params = {**sampling_params, "max_tokens": budget}
            start = time.perf_counter()
            out = await self.server_manager.generate(
                request_id=request_id, prompt_ids=prompt_ids, sampling_params=params
            )
            report.add(out, time.perf_counter() - start)
            return generation_from_ids(
                self.tokenizer,
                out.token_ids,
                logprobs=out.log_probs,
                stop_token_ids=self.stop_token_ids,
                max_new_tokens=budget,
            )

        with _ENV_POOL.lease(task) as env:
            episode = await run_episode(
                env,
                task,
                generate,
                self.prompt_builder,
                max_new_tokens=max_new_tokens,
                max_turns=extra.get("max_turns"),
                max_response_tokens=self.response_length,
                system_prompt=extra.get("system_prompt"),
            )
        outputs = episode_outputs(
            episode,
            layout=layout,
            gamma=self.gamma,
            metrics=report.metrics(),
            server_fields=report.extra_fields,
        )
        if any(len(o.prompt_ids) > self.prompt_length for o in outputs):
            raise ValueError(
                f"a prompt of {task.env_id!r} is longer than rollout.prompt_length="
                f"{self.prompt_length}; raise it (per-turn rows carry the whole history)"
            )
        return outputs if layout == "per_turn" else outputs[0]


def episode_outputs(
    episode: Episode,
    *,
    layout: Layout,
    gamma: float,
    metrics: AgentLoopMetrics | None = None,
    server_fields: Mapping[str, Any] | None = None,
) -> list[XpgymAgentLoopOutput]:
    """The agent-loop outputs of one episode: the rows of `to_data_proto`, unpadded.

    Every output gets its own ``extra_fields``: `server_fields` (what verl's server reported
    for the episode, e.g. ``min_global_steps`` / ``max_global_steps``, which verl's V1
    trainer needs on every output) plus ``turn_scores``, ``tool_rewards`` and
    ``reward_extra_info``. The rows are read without padding.
    """
    rows = _rows([episode], layout=layout, gamma=gamma)
    outputs = []
    for b in range(len(rows)):
        row = rows.row(b)
        response = row.response
        logprobs = None
        if row.rollout_logprobs is not None:
            logprobs = row.rollout_logprobs[response].tolist()
        rewards = row.token_rewards[response].tolist()
        outputs.append(
            XpgymAgentLoopOutput(
                prompt_ids=row.prompt_ids.tolist(),
                response_ids=row.response_ids.tolist(),
                response_mask=row.response_mask[response].tolist(),
                response_logprobs=logprobs,
                reward_score=float(sum(rewards)),
                num_turns=2 * row.num_turns,
                metrics=metrics or AgentLoopMetrics(),
                extra_fields={
                    **(server_fields or {}),
                    "turn_scores": [turn.reward for turn in episode.turns],
                    "tool_rewards": [],
                    "reward_extra_info": {},
                    "infra_error": None
                    if episode.infra_error is None
                    else episode.infra_error.kind,
                    "xpgym_metrics": episode_metrics([episode]),
                },
                token_rewards=rewards,
            )
        )
    return outputs


# --------------------------------------------------------------------------------------
# Launch configuration (verl's ``ppo_trainer`` config for `XpgymAgentLoop`)
# --------------------------------------------------------------------------------------

ALGORITHMS: dict[CriticFreeAlgorithm, tuple[str, bool]] = {
    "rebn": ("xpgym_rebn", True),
    "reinforce": ("xpgym_reinforce", True),
    "grpo": ("xpgym_grpo", True),
    "dr_grpo": ("xpgym_grpo", False),
    "rloo": ("xpgym_rloo", True),
}
"""Algorithm name (each of `xpgym.training.advantages.CRITIC_FREE_ALGORITHMS`) ->
(``algorithm.adv_estimator``, ``algorithm.norm_adv_by_std_in_grpo``)."""


def ppo_overrides(
    *,
    model: str,
    run_dir: Path,
    algorithm: CriticFreeAlgorithm = "rebn",
    gamma: float = 0.9,
    train_batch_size: int = 32,
    rollout_n: int = 1,
    ppo_mini_batch_size: int = 32,
    ppo_epochs: int = 2,
    lr: float = 1e-6,
    prompt_length: int = 8192,
    response_length: int = 4096,
    total_steps: int = 500,
    n_gpus: int = 1,
    rollout_name: str = "vllm",
    loggers: Sequence[str] = ("console",),
    filter_groups: bool = False,
) -> list[str]:
    """Hydra overrides of verl's ``ppo_trainer`` config that train with `XpgymAgentLoop`.

    The dataset and agent-loop registry are read from `run_dir` (`write_run_files`);
    checkpoints go to ``run_dir / "checkpoints"``. Optimiser and sampling follow the GEM
    paper (AdamW (0.9, 0.95), no weight decay, grad clip 1.0, clip 0.2, no KL, temperature
    1, top-p 1, top-k off). The estimator comes from `ALGORITHMS`; ``xpgym_*`` estimators
    are registered in verl's TaskRunner through Ray's ``worker_process_setup_hook``.

    ``filter_groups`` turns on verl's DAPO group filter (``algorithm.filter_groups``, metric
    ``reward``: the sum of each output's ``rm_scores``): verl's V1 replay buffer evicts a
    group (one ``uid``, the ``rollout_n`` samples of a row) whose rewards have std 0 and
    generates a new one in its place, with no bound on refills in verl 0.9.1's V1 buffer
    (``max_num_gen_batches`` is ignored there). With ``layout="per_episode"`` rows
    (`dataset_rows`) that reward is the episode's return, DAPO's zero-variance rule; with
    ``per_turn`` rows it is compared turn by turn.

    Raises:
        ValueError: `algorithm` is not in `ALGORITHMS`.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, got {algorithm!r}")
    estimator, norm_by_std = ALGORITHMS[algorithm]
    actor = "actor_rollout_ref.actor"
    rollout = "actor_rollout_ref.rollout"
    filtering = ["algorithm.filter_groups.enable=true", "algorithm.filter_groups.metric=reward"]
    return [
        *(filtering if filter_groups else []),
        f"algorithm.adv_estimator={estimator}",
        f"algorithm.norm_adv_by_std_in_grpo={norm_by_std}",
        f"algorithm.gamma={gamma}",
        "algorithm.use_kl_in_reward=false",
        f"data.train_files={run_dir / 'train.parquet'}",
        f"data.val_files={run_dir / 'train.parquet'}",
        f"data.train_batch_size={train_batch_size}",
        f"data.max_prompt_length={prompt_length}",
        f"data.max_response_length={response_length}",
        "data.filter_overlong_prompts=false",
        f"actor_rollout_ref.model.path={model}",
        f"{actor}.optim.lr={lr}",
        f"{actor}.optim.betas=[0.9,0.95]",
        f"{actor}.optim.weight_decay=0.0",
        f"{actor}.grad_clip=1.0",
        f"{actor}.ppo_epochs={ppo_epochs}",
        f"{actor}.ppo_mini_batch_size={ppo_mini_batch_size}",
        f"{actor}.ppo_micro_batch_size_per_gpu=1",
        f"{actor}.clip_ratio=0.2",
        f"{actor}.use_kl_loss=false",
        f"{actor}.loss_agg_mode=token-mean",
        f"{rollout}.name={rollout_name}",
        f"{rollout}.n={rollout_n}",
        f"{rollout}.temperature=1.0",
        f"{rollout}.top_p=1.0",
        f"{rollout}.top_k=-1",
        f"{rollout}.log_prob_micro_batch_size_per_gpu=1",
        f"{rollout}.agent.default_agent_loop={AGENT_NAME}",
        f"{rollout}.agent.agent_loop_config_path={run_dir / 'agent_loops.yaml'}",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1",
        f"trainer.n_gpus_per_node={n_gpus}",
        "trainer.nnodes=1",
        f"trainer.total_training_steps={total_steps}",
        "trainer.use_v1=true",
        f"trainer.logger=[{','.join(loggers)}]",
        f"trainer.default_local_dir={run_dir / 'checkpoints'}",
        "+ray_kwargs.ray_init.runtime_env.worker_process_setup_hook="
        f"{__name__}.register_estimators",
    ]


def ppo_config(overrides: Sequence[str]) -> Any:
    """verl's ``ppo_trainer`` config (an ``omegaconf.DictConfig``) with `overrides` applied,
    composed with Hydra from verl's own config directory (no Ray, no GPU)."""
    import verl.trainer
    from hydra import compose, initialize_config_dir

    config_dir = Path(verl.trainer.__file__).parent / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name="ppo_trainer", overrides=list(overrides))


def write_run_files(
    run_dir: Path,
    tasks: Sequence[EpisodeTask],
    *,
    layout: Layout = "per_episode",
    max_turns: int | None = None,
    max_new_tokens: int | None = None,
) -> list[dict[str, Any]]:
    """Write what `ppo_overrides` points verl at into `run_dir`: the task rows
    (`dataset_rows`) as ``train.parquet`` and the agent-loop registry ``agent_loops.yaml``
    that names `XpgymAgentLoop`. Returns the rows."""
    import pandas as pd

    rows = dataset_rows(tasks, layout=layout, max_turns=max_turns, max_new_tokens=max_new_tokens)
    run_dir.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(run_dir / "train.parquet")
    (run_dir / "agent_loops.yaml").write_text(
        f"- name: {AGENT_NAME}\n  _target_: {__name__}.{XpgymAgentLoop.__name__}\n"
    )
    return rows
