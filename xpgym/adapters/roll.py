r"""ROLL adapter: xpgym envs in GEM's registry, ROLL's batch keys, a step_reinforce config.

ROLL (alibaba/ROLL, 0.3.x) is not on PyPI (the ``roll`` name there is another project), so
what this module provides is what can be built and checked without it:

1. **Hook** `register_gem_envs`: ROLL's env managers create envs with GEM's
   ``gem.make(env_id=..., **env_config)`` and call ``reset(seed=...)`` /
   ``step(action=...)``; ROLL pins ``gem-llm==0.0.4``. This registers xpgym ids in that
   registry, under ``"xpgym:" + id`` (GEM 0.0.4 registers its own ``game:...`` ids),
   with `XpgymGemEnv`, a ``gem.core.Env`` over an xpgym env. Use ``env_type:
   "xpgym:game:GuessTheNumber-v0-easy"`` in ROLL's ``custom_envs``. ROLL's env managers run
   in Ray actors: register there too, with Ray's ``worker_process_setup_hook``
   (`ROLL_RUNTIME_ENV`; call ``ray.init(runtime_env=...)`` before ROLL's own ``init()``,
   which then keeps it).
2. **Converters** `step_batch` / `trajectory_batch`: episodes -> the keys ROLL's
   ``StepEnvManager`` / ``TrajEnvManager`` put in their ``DataProto`` (``formulate_rollouts``),
   as numpy arrays in a `RollBatch` (`RollBatch.to_data_proto` wraps them in ROLL's class
   where ROLL is installed).
3. **Config** `STEP_REINFORCE_CONFIG`: the pipeline keys for multi-turn REINFORCE with batch
   mean/std normalisation (ReBN), as ROLL's GEM game configs use.
4. **Curriculum and group filter**: `XpgymGemEnv` takes a shared curriculum file in its env
   config (``curriculum``); `ZeroVarianceGroupFilter` is a ``group_filter_cls`` for ROLL's env
   managers that drops groups of equal scores (ROLL then plays a new group in its place).

Untested here (ROLL cannot be installed on this CPU machine): ROLL's own env managers and
pipeline on these envs, `RollBatch.to_data_proto`, and the Ray setup hook inside ROLL.

Keys (both layouts right-padded to ``sequence_length``; ``L`` = ``sequence_length``)
-----------------------------------------------------------------------------------

=================  ==========  =========  ================================================
key                dtype       shape      meaning
=================  ==========  =========  ================================================
``input_ids``      int64       [B, L]     step: the turn's prompt + response; trajectory:
                                          the episode row (env tokens included)
``attention_mask`` int64       [B, L]     1 on real tokens
``position_ids``   int64       [B, L]     ``0 .. n-1``, **0 at padding** (ROLL pads with 0)
``response_mask``  bool        [B, L]     1 on policy tokens (aligned with ``input_ids``;
                                          ROLL's pipeline takes ``[:, 1:]``)
``prompt_mask``    bool        [B, L]     1 before the first policy token
``scores``         float32     [B, L]     step: the turn's reward; trajectory: the
                                          episode's total; on the last real token
``infer_logprobs`` float32     [B, L-1]   next-token view of the sampler log-probs (0 off
                                          policy tokens); only with log-probs
``episode_scores`` object      [B]        the episode's total reward
``step_scores``    object      [B]        step: the turn's reward; trajectory: the list of
                                          per-turn rewards
``step``           object      [B]        step layout only: the turn index
``state_hash``     object      [B]        step layout only: ``f"{group}#{key}"``, the
                                          group id and the turn's anchor-state key
                                          (`RowInfo.state_keys`): equal exactly for turns
                                          of one group acting on one state (ROLL hashes
                                          the observation; its GiGPO groups by it)
``tags``, ``env_ids``, ``group_ids``, ``traj_group_id``, ``traj_id``: object [B] ids
=================  ==========  =========  ================================================

``step_reinforce`` (with `STEP_REINFORCE_CONFIG`) computes, per ``traj_id`` ordered by
``step``, ``G_t = r_t + step_reward_gamma * G_{t+1}`` over ``step_scores``, then normalises
over the batch. In xpgym's terms (from ROLL's source; not run here)::

    rebn(discounted_returns(r, m, gamma), m, std="unbiased", eps=1e-6,
         zero_std="zero", zero_std_tol=1e-6)

Infra-error episodes (``Episode.outcome == "infra_error"``, `xpgym.core.errors`): their rows
have ``response_mask`` False and ``scores`` 0 (no loss), ``traj_group_id``/``group_ids`` a
group of their own (`xpgym.training.layouts`), so ``mean_std`` grouped by ``traj_group_id`` gives
the other members exactly their advantages without them; ``non_tensor_batch["infra_error"]``
marks them. ROLL's batch-grouped normalisation (``step_reinforce``) still counts their rows'
scores (0.0) in the batch statistics.

Differences from the reference trainer that change curves (advantages, loss aggregation,
KL, clipping, budgets) are listed in one place: docs/trainers.md, section "ROLL".
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from xpgym.adapters._trainer_import import import_trainer
from xpgym.core.optional import import_optional

_INSTALL = 'pip install "xpgym[roll]"'
gem = import_trainer("gem", adapter="roll", install=_INSTALL)  # gem configures logging

from gem.core import Env as GemEnv  # noqa: E402

from xpgym.core.errors import find_infra_cause  # noqa: E402
from xpgym.core.registry import list_envs  # noqa: E402
from xpgym.core.trajectory import Episode, episode_metrics  # noqa: E402
from xpgym.core.wrappers.episode_log import log_episodes_if_requested  # noqa: E402
from xpgym.rollout.curriculum import INFO_KEY as CURRICULUM_INFO_KEY  # noqa: E402
from xpgym.rollout.curriculum import DifficultyEnv, zero_variance_scores  # noqa: E402
from xpgym.rollout.env_pool import make_trainer_env  # noqa: E402
from xpgym.rollout.shared_curriculum import SharedCurriculum, shared_curriculum  # noqa: E402
from xpgym.training.layouts import (  # noqa: E402
    Layout,
    build_rows,
    on_last_policy_token,
    shift_to_predictions,
    zero_padded_positions,
)

__all__ = [
    "PREFIX",
    "ROLL_RUNTIME_ENV",
    "STEP_REINFORCE_CONFIG",
    "RollBatch",
    "XpgymGemEnv",
    "ZeroVarianceGroupFilter",
    "register_gem_envs",
    "step_batch",
    "trajectory_batch",
]

logger = logging.getLogger(__name__)

PREFIX = "xpgym:"
"""GEM id of an xpgym env: this prefix and the xpgym id."""

ROLL_RUNTIME_ENV = {"worker_process_setup_hook": "xpgym.adapters.roll.register_gem_envs"}
"""Ray ``runtime_env`` entry that registers xpgym envs in every ROLL worker."""

STEP_REINFORCE_CONFIG: dict[str, Any] = {
    "env_manager_cls": "roll.pipeline.agentic.env_manager.step_env_manager.StepEnvManager",
    "adv_estimator": "step_reinforce",
    "step_reward_gamma": 0.9,  # GEM: 0.9 for games
    "reward_normalization": {"grouping": "batch", "method": "mean_std"},
    "gamma": 1.0,
    "whiten_advantages": False,
    "advantage_clip": 20,
    "init_kl_coef": 0.0,
    "loss_agg_mode": "token-mean",
    "ppo_epochs": 2,
    "max_grad_norm": 1.0,
    "batch_adjust_mode": "delete",
}
"""ROLL pipeline keys for per-turn REINFORCE + batch mean/std normalisation (ReBN)."""


# --------------------------------------------------------------------------------------
# GEM registry
# --------------------------------------------------------------------------------------


class XpgymGemEnv(GemEnv):
    """A ``gem.core.Env`` playing an xpgym env, with GEM's signatures.

    ``reset(seed=None) -> (observation, info)`` and ``step(action) -> (observation, reward,
    terminated, truncated, info)``; ``sample_random_action``, ``get_state``/``set_state``
    and ``close`` pass through. A ``seed`` keyword given at construction (ROLL puts the
    group seed in the env config) is the default reset seed.

    With ``curriculum`` (a shared curriculum file, `xpgym.rollout.shared_curriculum`; put
    it in the env config next to the seed), the env is the `DifficultyEnv` of the id's
    family: each `reset` plays the file's current level, and the step that ends an episode
    records its result (``info["correct"]``; not an infrastructure failure's) in the file,
    which every env manager of the run shares.

    Args:
        xpgym_id: The xpgym id (GEM's ``make`` owns the name ``env_id``).
        seed: Default seed of `reset` (optional).
        curriculum: Path of a shared curriculum file (optional; then no `kwargs`).
        **kwargs: Passed to ``xpgym.make`` (`xpgym.rollout.env_pool.make_trainer_env`).

    Raises:
        ValueError: `curriculum` with `kwargs` (the ladder sets the env's arguments).
    """

    def __init__(
        self,
        xpgym_id: str,
        seed: int | None = None,
        curriculum: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.xpgym_id = xpgym_id
        self.default_seed = seed
        self._curriculum: tuple[SharedCurriculum, DifficultyEnv] | None = None
        if curriculum is None:
            self.env = make_trainer_env(xpgym_id, **kwargs)
        elif kwargs:
            raise ValueError(
                f"a curriculum env is set by its ladder; got kwargs {kwargs} for {xpgym_id!r}"
            )
        else:
            shared = shared_curriculum(curriculum)
            difficulty = shared.make_env(xpgym_id)
            self._curriculum = shared, difficulty
            self.env = log_episodes_if_requested(difficulty)

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the xpgym env (never GEM's global seeding), at the curriculum's level."""
        if self._curriculum is not None:
            shared, difficulty = self._curriculum
            difficulty.set_difficulty_levels(shared.levels)
        return self.env.reset(seed=self.default_seed if seed is None else seed, **kwargs)

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """One step of the xpgym env (the last one of an episode feeds the curriculum)."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        if self._curriculum is not None and (terminated or truncated):
            tag = info[CURRICULUM_INFO_KEY]
            if find_infra_cause(info) is None:
                self._curriculum[0].record(tag["family"], tag["level"], bool(info.get("correct")))
        return observation, float(reward), bool(terminated), bool(truncated), info

    def sample_random_action(self) -> str:
        return self.env.sample_random_action()

    def get_state(self) -> Any:
        return self.env.get_state()

    def set_state(self, state: Any) -> None:
        self.env.set_state(state)

    def close(self) -> None:
        self.env.close()


def register_gem_envs(env_ids: Sequence[str] | None = None, *, prefix: str = PREFIX) -> list[str]:
    """Register xpgym envs in GEM's registry as ``prefix + id`` (idempotent).

    Args:
        env_ids: xpgym ids (default: every registered id).
        prefix: Prepended to each id (GEM ids must not collide with GEM's own).

    Returns:
        The GEM ids now registered for `env_ids`.
    """
    from gem.envs.registration import ENV_REGISTRY

    ids = list(list_envs()) if env_ids is None else list(env_ids)
    out = []
    for env_id in ids:
        gem_id = f"{prefix}{env_id}"
        if gem_id not in ENV_REGISTRY:
            gem.register(gem_id, "xpgym.adapters.roll:XpgymGemEnv", xpgym_id=env_id)
        out.append(gem_id)
    logger.debug("registered %d xpgym envs in GEM's registry", len(out))
    return out


class ZeroVarianceGroupFilter:
    """A ROLL ``group_filter_cls`` (env manager config key, an import path:
    ``xpgym.adapters.roll.ZeroVarianceGroupFilter``) with DAPO's dynamic-sampling rule.

    ROLL's ``GroupQueue`` calls ``filter(group_id, episode_id, group)`` once a group has all
    its rollouts; ``True`` drops the group and ROLL starts a new one in its place (from
    ROLL's source: ``roll/distributed/scheduler/rollout_scheduler.py``; not run here). A
    group is dropped when its rollouts' ``non_tensor_batch["episode_scores"]`` (what every
    ROLL env manager puts there) are all equal (`zero_variance_scores`; a rollout that is
    None, an env that exited, is not counted), in training only (``mode != "val"``), and
    only while at most `max_drop_fraction` of the groups seen have been dropped: each
    drop costs a new group, so without a bound groups that never vary (a task too hard
    for the policy) would be replaced forever. ROLL counts the drops
    (``group_filter_count``).

    Args:
        config, env_manager_config: ROLL's pipeline and env-manager configs (not read).
        mode: ``"train"`` or ``"val"``.
    """

    max_drop_fraction: float = 0.5
    """Drop a group only while ``dropped + 1 <= max_drop_fraction * seen`` (subclass to change)."""

    def __init__(self, config: Any, env_manager_config: Any, mode: str) -> None:
        self.mode = mode
        self.seen = 0
        self.dropped = 0

    def filter(self, group_id: int, episode_id: int, group: Sequence[Any]) -> bool:
        """Whether to drop the group (see the class docstring)."""
        if self.mode == "val":
            return False
        self.seen += 1
        scores = [
            float(rollout.non_tensor_batch["episode_scores"][0])
            for rollout in group
            if rollout is not None
        ]
        if not zero_variance_scores(scores):
            return False
        if self.dropped + 1 > self.max_drop_fraction * self.seen:
            logger.debug("group %s/%s has equal scores; kept (drop bound)", group_id, episode_id)
            return False
        self.dropped += 1
        return True


# --------------------------------------------------------------------------------------
# ROLL's DataProto keys
# --------------------------------------------------------------------------------------


@dataclass
class RollBatch:
    """ROLL ``DataProto`` contents: ``batch`` (tensor keys, numpy here) and
    ``non_tensor_batch`` (object arrays), both with ``B`` rows, and ``meta_info``:
    ``{"metrics": {"env/<tag>/metrics/<key>": mean}}``, the episodes' own metrics
    (`episode_metrics`), named as ROLL's env managers name the env metrics they report in
    ``meta_info["metrics"]`` (from ROLL's source; not run here)."""

    batch: dict[str, np.ndarray]
    non_tensor_batch: dict[str, np.ndarray]
    meta_info: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.batch["input_ids"])

    def to_data_proto(self) -> Any:
        """ROLL's ``DataProto`` with these keys (needs ROLL; untested here)."""
        protocol = import_optional(
            "roll.distributed.scheduler.protocol",
            needed_by="RollBatch.to_data_proto",
            install="ROLL (git)",
        )
        import torch

        tensors = {key: torch.from_numpy(np.ascontiguousarray(v)) for key, v in self.batch.items()}
        return protocol.DataProto.from_dict(
            tensors=tensors, non_tensors=dict(self.non_tensor_batch), meta_info=self.meta_info
        )


def step_batch(
    episodes: Sequence[Episode],
    *,
    pad_token_id: int,
    sequence_length: int,
    tag: str = "xpgym",
    truncate: bool = False,
) -> RollBatch:
    """``StepEnvManager`` samples: one row per turn (module docstring)."""
    return _batch(episodes, "per_turn", pad_token_id, sequence_length, tag, truncate)


def trajectory_batch(
    episodes: Sequence[Episode],
    *,
    pad_token_id: int,
    sequence_length: int,
    tag: str = "xpgym",
    truncate: bool = False,
) -> RollBatch:
    """``TrajEnvManager`` samples: one row per episode (module docstring)."""
    return _batch(episodes, "per_episode", pad_token_id, sequence_length, tag, truncate)


def _batch(
    episodes: Sequence[Episode],
    layout: Layout,
    pad_token_id: int,
    sequence_length: int,
    tag: str,
    truncate: bool,
) -> RollBatch:
    per_turn = layout == "per_turn"
    packed = build_rows(episodes, layout, step_ids=per_turn)
    rows = packed.pad(
        pad_token_id=pad_token_id,
        max_length=sequence_length,
        truncate=truncate,
        pad_to_max_length=True,
    )
    response_mask = rows.response_mask.astype(bool)
    first_policy = np.argmax(response_mask, axis=1)
    totals = [ep.total_reward for ep in episodes]
    score_per_row = rows.reward if per_turn else np.array([totals[e] for e in rows.episode_index])
    score_per_row = np.where(rows.infra_error, 0.0, score_per_row)  # nothing to learn from
    batch = {
        "input_ids": rows.input_ids,
        "attention_mask": rows.attention_mask,
        "position_ids": zero_padded_positions(rows.attention_mask),
        "response_mask": response_mask,
        "prompt_mask": np.arange(rows.input_ids.shape[1]) < first_policy[:, None],
        "scores": on_last_policy_token(score_per_row, response_mask),
    }
    if rows.rollout_logprobs is not None:
        batch["infer_logprobs"] = np.ascontiguousarray(shift_to_predictions(rows.rollout_logprobs))
    groups = rows.group_id
    traj_ids = np.array(
        [f"{g}/{e}" for g, e in zip(groups, rows.episode_index, strict=True)], dtype=object
    )

    def objects(values: Any) -> np.ndarray:
        out = np.empty(len(rows), dtype=object)
        out[:] = list(values)
        return out

    non_tensor = {
        "env_ids": objects(int(e) for e in rows.episode_index),
        "group_ids": groups,
        "tags": objects([tag] * len(rows)),
        "episode_scores": objects(totals[e] for e in rows.episode_index),
        "traj_group_id": groups.copy(),
        "traj_id": traj_ids,
        "infra_error": objects(bool(x) for x in rows.infra_error),
    }
    if per_turn:
        non_tensor["step_scores"] = objects(float(r) for r in rows.reward)
        non_tensor["step"] = objects(int(t) for t in rows.first_turn)
        keys = cast(np.ndarray, rows.state_keys)  # built with step_ids: one key a row
        non_tensor["state_hash"] = objects(
            f"{g}#{key}" for g, (key,) in zip(groups, keys, strict=True)
        )
    else:
        non_tensor["step_scores"] = objects(
            [turn.reward for turn in episodes[e].turns] for e in rows.episode_index
        )
    metrics = {f"env/{tag}/{key}": value for key, value in episode_metrics(episodes).items()}
    return RollBatch(batch=batch, non_tensor_batch=non_tensor, meta_info={"metrics": metrics})
