r"""The reference trainer: REINFORCE, ReBN, GRPO, Dr.GRPO, RLOO and PPO in PyTorch.

A small PyTorch + transformers trainer over xpgym `Episode`\s. It is the reference the
parity suite holds every other trainer against, and the trainer a new user runs first, so it
is written to be read top to bottom, like CleanRL: `TrainerConfig` holds every option;
`Trainer.make_batch` (steps 2-4 below) and `Trainer.update` (step 5) hold the math, each step
in a method of its own right after them, with the symbols below in comments; `train` is the
loop (collect, compute advantages, update, log). Advantages come from
`xpgym.training.advantages` (the critic-free ones by name through its `turn_advantages`, the
dispatch the parity suite uses too), token layouts from `xpgym.training.layouts`, the
per-token losses and their aggregation from `xpgym.reference.losses`: nothing here
re-implements them. Importing this module imports torch; ``import xpgym`` does not import it.

One training step
-----------------
1. **Collect** (`train`): `RolloutCollector` + `HFPolicy` sampling at `temperature` give
   complete episodes with token ids and sampler log-probs (``group_size`` per start state).
2. **Rows** (`Trainer.make_batch`, like the steps below up to 4): `turn_rows`
   (``layout="per_turn"``, one row per turn) or `episode_rows` (``"per_episode"``, one row
   per episode, env/tool tokens between the turns), padded on the **right** to ``[B, L]``.
   Every per-token tensor is ``[B, L]`` and aligned with ``input_ids``: entry ``j``
   describes token ``j`` (the shift: `xpgym.reference.losses`). The loss mask is
   ``response_mask``: 1 on policy tokens only (never prompt, env/tool or padding tokens).
3. **Old log-probs, values, reference log-probs**: one forward pass without gradients
   (`Trainer._no_grad_pass`); the sampler's log-probs where the config asks for them
   (`Trainer._sampler_logprobs`).
4. **Advantages per turn** (``[N, T]``, `xpgym.training.advantages`: `episode_advantages`,
   `turn_advantages` by algorithm name with the ids read from the episodes; PPO:
   `Trainer._turn_gae`), then copied to the policy tokens of each turn
   (`broadcast_to_tokens`):

   ============  ===========================================================================
   reinforce     ``A_t = G_t = r_t + gamma * G_{t+1}``  (`discounted_returns`)
   rebn          ``A_t = (G_t - mean(G)) / (std(G) + eps)`` over all turns (`rebn`)
   grpo          ``A = (s - mean_g) / (std_g + eps)``, s = episode score, to every turn (`grpo`)
   dr_grpo       ``A = s - mean_g`` (`dr_grpo`)
   rloo          ``A = s - mean of the other members of the group`` (`rloo`)
   gigpo         ``A_t = A^E + omega * A^S_t``: GRPO of the episode plus GRPO of the turn's
                 discounted return among the group's turns on the same state (`gigpo`)
   tree          ``A_t = V(node_t) - V(node_{t-1})``, V = mean score through a node of a
                 tree of forked episodes (`tree_advantages`; collect with `train(tree=...)`)
   ppo           turn-level GAE with a value head (`turn_gae`, below)
   ============  ===========================================================================

   The estimators' conventions (std kind, eps) are `xpgym.training.advantages` defaults;
   ``TrainerConfig.advantage_kwargs`` passes others (e.g. ``{"std": "unbiased"}``).
   ``Trainer(advantage_fn=...)`` replaces this step's token advantages altogether (the
   parity curves train with another trainer's own estimator this way).
5. **Update** (`Trainer.update`): `ppo_epochs` passes over the rows in `num_minibatches`
   shuffled minibatches; per minibatch (`Trainer._minibatch_step`): the loss below
   (`Trainer._loss`), backward, clip the gradient norm to `max_grad_norm`, one AdamW step.

The loss, per minibatch (to minimise)
-------------------------------------
With the per-token PPO-clip loss ``l``, KL estimate ``k`` and entropy ``H`` of
`xpgym.reference.losses` (only policy tokens, ``response_mask = 1``, count)::

    loss = agg(l) + kl_coef * agg(k) - ent_coef * agg(H) + vf_coef * L_V

with ``agg`` = `aggregate_loss` under `loss_agg_mode` and ``L_V`` the PPO value loss
(`value_loss`). The KL term is a loss term (Oat ``beta``, verl ``use_kl_loss``), never a
reward term. With one epoch, one minibatch and ``pi_old`` recomputed (or detached) from the
same weights, the ratio ``r_t = 1`` and the clip is inactive, so the gradient is
``-agg(A_t * grad log pi_theta(x_t))``: the REINFORCE / policy-gradient loss. That is how
reinforce, rebn and the GRPO family train here (their default ``ppo_epochs=1``).

PPO: value head and turn-level GAE
----------------------------------
A linear head ``V(h) = w . h + b`` (zero-initialised) on the model's last hidden state (the
one the LM head reads) gives one value per turn: ``V_t`` is read at the **last token before
turn t's first policy token**, i.e. the position whose logits predict the turn's first
response token, having seen the whole prompt of that turn. It is the same token with the
same context in both layouts. Then (`turn_gae`)::

    delta_t = r_t + gamma * V_{t+1} - V_t
    A_t     = delta_t + gamma * lam * A_{t+1},   R_t = A_t + V_t
    L_V     = 1/2 * mean_turns max((V - R)^2, (V_old + clip(V - V_old, -eps_V, eps_V) - R)^2)

Every episode end is terminal (Oat's ``PPOMultiTurnLearner``) unless ``bootstrap_truncated``,
where a truncated episode bootstraps from the value read at its last token. The head shares
the policy's trunk (one model, one optimizer), as in CleanRL.

Determinism
-----------
The trainer draws no torch random numbers: the value head starts at zero and minibatches are
shuffled by a numpy generator seeded with ``(seed, iteration, epoch)``. The model is put in
eval mode (dropout off, so ``pi_old`` and ``pi_theta`` are the same function of the weights).
On CPU, the same config, seed and episodes give bit-identical weights; `train` also seeds
the sampler (`HFPolicy`) and the env resets from `seed`.
"""

from __future__ import annotations

import copy
import functools
import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, get_args

import numpy as np
import torch
from numpy.typing import NDArray

from xpgym.core.trajectory import Episode, episode_metrics, infra_error_metrics
from xpgym.reference._checks import check_choice, check_positive, check_positive_int
from xpgym.reference.losses import (
    KL_ESTIMATORS,
    LOSS_AGG_MODES,
    KLEstimator,
    LossAggMode,
    aggregate_loss,
    entropy_from_logits,
    kl_penalty,
    logprobs_from_logits,
    policy_loss,
    token_logprobs,
    value_loss,
)
from xpgym.rollout.curriculum import Scheduler, fill_groups
from xpgym.training.advantages import (
    GROUP_ALGORITHMS,
    AdvantageAlgorithm,
    broadcast_to_tokens,
    episode_advantages,
    episode_scores,
    episode_terminated,
    turn_gae,
    turn_rewards,
)
from xpgym.training.layouts import LAYOUTS, Layout, PaddedRows, episode_rows, turn_rows

if TYPE_CHECKING:
    from xpgym.core.vector.base import VectorEnv
    from xpgym.rollout.collector import RolloutCollector
    from xpgym.rollout.tree import TreeSpec

__all__ = [
    "ALGORITHMS",
    "OLD_LOGPROBS",
    "AdvantageFn",
    "Algorithm",
    "Batch",
    "OldLogprobs",
    "Trainer",
    "TrainerConfig",
    "train",
]

logger = logging.getLogger(__name__)

Algorithm = Literal[AdvantageAlgorithm, "ppo"]
"""The critic-free algorithms of `xpgym.training.advantages.turn_advantages` (GiGPO and tree
advantages included), and PPO (a value head and turn-level GAE, here)."""
OldLogprobs = Literal["recompute", "rollout", "detach"]

ALGORITHMS: tuple[Algorithm, ...] = get_args(Algorithm)
OLD_LOGPROBS: tuple[OldLogprobs, ...] = get_args(OldLogprobs)

AdvantageFn = Callable[["Batch"], "torch.Tensor | NDArray[np.floating]"]
"""``batch -> [B, L]`` token advantages to train on instead of ``batch.advantages`` (see
`Trainer`)."""


# --------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------


@dataclass
class TrainerConfig:
    """Every option of the reference trainer; invalid values raise `ValueError` at creation.

    Advantages:
        algorithm: ``"reinforce"``, ``"rebn"``, ``"grpo"``, ``"dr_grpo"``, ``"rloo"``,
            ``"gigpo"``, ``"tree"`` or ``"ppo"`` (module docstring).
        layout: ``"per_episode"`` (one row per episode, env/tool tokens masked out) or
            ``"per_turn"`` (one row per turn, history in its prompt). Both train on the
            same tokens in the same context; they differ in what "a sequence" is for the
            seq-mean loss modes and in compute.
        gamma: Discount per turn (reinforce, rebn, gigpo, ppo).
        lam: GAE lambda (ppo).
        advantage_kwargs: Extra keyword arguments for `rebn`, `grpo`, `dr_grpo`, `rloo` or
            `gigpo`, passed through `turn_advantages` (e.g. ``{"std": "unbiased", "eps":
            1e-6}`` to reproduce a trainer's convention, ``{"omega": 0.5}``); must be empty
            for reinforce, tree and ppo.

    Rollout (read by `train`; `temperature` also by the learner):
        num_episodes: Episodes collected per step (a multiple of `group_size`).
        group_size: Episodes per start state (a tree's roots with `train(tree=...)`); at
            least 2 for the GRPO family and gigpo.
        max_turns: Turn limit given to the collector (``None``: the env's own).
        max_new_tokens: Per-turn generation budget.
        temperature: Sampling temperature (> 0). The learner divides the logits by it, so it
            must equal the sampler's.

    Optimisation (AdamW):
        lr, adam_betas, adam_eps, weight_decay: AdamW's.
        max_grad_norm: Clip the global gradient norm to this (``None``: no clipping; the
            norm is still reported).
        ppo_epochs: Passes over each batch.
        num_minibatches: Optimizer steps per pass (rows are shuffled, then split).

    Policy loss:
        clip_eps: ``eps_low``: the ratio is clipped below at ``1 - clip_eps``.
        clip_eps_high: ``eps_high`` (``None``: same as `clip_eps`; DAPO's clip-higher sets
            it larger).
        dual_clip_c: Dual-clip constant ``c > 1`` for negative advantages (verl uses 3.0
            and always applies it); ``None``: off.
        loss_agg_mode: See `aggregate_loss`.
        loss_scale_factor: The constant divisor ``C`` of ``"seq-mean-token-sum-norm"``
            (``None``: `max_new_tokens`, Oat's Dr.GRPO ``generate_max_length``).
        old_logprobs: Where ``log pi_old`` comes from: ``"recompute"`` (a no-grad forward
            pass with the weights before the update; Oat, OpenRLHF, ROLL), ``"rollout"``
            (the sampler's log-probs: an off-policy ratio against the inference engine),
            or ``"detach"`` (``logp.detach()`` inside the single update pass; verl and RL2's
            on-policy shortcut; needs ``ppo_epochs == num_minibatches == 1``; without PPO's
            value head it skips the no-grad pass: one forward+backward per step).
        tis_cap: Truncated importance sampling between the learner and the sampler: each
            policy token's loss is multiplied by ``min(exp(log pi_old - log pi_sampler),
            tis_cap)`` (no gradient), which corrects for the sampler's numerics (Oat's
            ``tis_c``, default 2.0 there). Needs the sampler's log-probs and
            ``old_logprobs="recompute"``; ``None``: off.
        kl_coef: Weight ``beta`` of the KL-to-reference loss term (0: no reference model).
        kl_estimator: ``"k1"``, ``"k2"`` or ``"k3"`` (see `kl_penalty`).
        ent_coef: Weight of the entropy bonus (0: the entropy is only reported).

    PPO value head:
        vf_coef: Weight of the value loss.
        value_clip_eps: ``eps_V`` of the clipped value loss (``None``: unclipped).
        bootstrap_truncated: Truncated episodes bootstrap from the value at their last token
            (``False``: every episode end is terminal, as in Oat).

    seed: Seeds minibatch shuffling, the sampler and the env resets of `train`.
    """

    algorithm: Algorithm = "rebn"
    layout: Layout = "per_episode"
    gamma: float = 1.0
    lam: float = 0.95
    advantage_kwargs: dict[str, Any] = field(default_factory=dict)
    num_episodes: int = 8
    group_size: int = 1
    max_turns: int | None = None
    max_new_tokens: int = 64
    temperature: float = 1.0
    lr: float = 1e-6
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    weight_decay: float = 0.0
    max_grad_norm: float | None = 1.0
    ppo_epochs: int = 1
    num_minibatches: int = 1
    clip_eps: float = 0.2
    clip_eps_high: float | None = None
    dual_clip_c: float | None = None
    loss_agg_mode: LossAggMode = "token-mean"
    loss_scale_factor: float | None = None
    old_logprobs: OldLogprobs = "recompute"
    tis_cap: float | None = None
    kl_coef: float = 0.0
    kl_estimator: KLEstimator = "k3"
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    value_clip_eps: float | None = 0.2
    bootstrap_truncated: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        check_choice("algorithm", self.algorithm, ALGORITHMS)
        check_choice("layout", self.layout, LAYOUTS)
        check_choice("loss_agg_mode", self.loss_agg_mode, LOSS_AGG_MODES)
        check_choice("kl_estimator", self.kl_estimator, KL_ESTIMATORS)
        check_choice("old_logprobs", self.old_logprobs, OLD_LOGPROBS)
        for name in ("gamma", "lam"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value!r}")
        for name in ("num_episodes", "group_size", "max_new_tokens", "ppo_epochs"):
            check_positive_int(name, getattr(self, name))
        check_positive_int("num_minibatches", self.num_minibatches)
        if self.max_turns is not None:
            check_positive_int("max_turns", self.max_turns)
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {self.seed!r}")
        for name in ("temperature", "lr", "clip_eps"):
            check_positive(name, getattr(self, name))
        for name in ("max_grad_norm", "clip_eps_high", "loss_scale_factor", "value_clip_eps"):
            if getattr(self, name) is not None:
                check_positive(name, getattr(self, name))
        for name in ("weight_decay", "kl_coef", "ent_coef", "vf_coef", "adam_eps"):
            value = getattr(self, name)
            if not 0.0 <= value < math.inf:
                raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
        if self.tis_cap is not None and not (0.0 < self.tis_cap < math.inf):
            raise ValueError(f"tis_cap must be finite and > 0 (Oat uses 2.0), got {self.tis_cap!r}")
        if self.tis_cap is not None and self.old_logprobs != "recompute":
            raise ValueError(
                f"tis_cap weighs the recomputed log pi_old against the sampler's; it needs "
                f"old_logprobs='recompute', got {self.old_logprobs!r}"
            )
        if self.dual_clip_c is not None and not 1.0 < self.dual_clip_c < math.inf:
            raise ValueError(f"dual_clip_c must be > 1 (verl uses 3.0), got {self.dual_clip_c!r}")
        if self.num_episodes % self.group_size:
            raise ValueError(
                f"num_episodes ({self.num_episodes}) must be a multiple of group_size "
                f"({self.group_size})"
            )
        if (
            self.algorithm in GROUP_ALGORITHMS or self.algorithm == "gigpo"
        ) and self.group_size < 2:
            raise ValueError(
                f"algorithm {self.algorithm!r} compares episodes that start from the same "
                f"state, so it needs group_size >= 2, got {self.group_size}"
            )
        if self.advantage_kwargs and self.algorithm in ("reinforce", "tree", "ppo"):
            raise ValueError(
                f"advantage_kwargs {self.advantage_kwargs!r} is for rebn, grpo, dr_grpo, "
                f"rloo and gigpo; algorithm {self.algorithm!r} takes none (use gamma and lam)"
            )
        if self.old_logprobs == "detach" and (self.ppo_epochs, self.num_minibatches) != (1, 1):
            raise ValueError(
                f"old_logprobs='detach' is the single on-policy pass shortcut; it needs "
                f"ppo_epochs=1 and num_minibatches=1, got {self.ppo_epochs} and "
                f"{self.num_minibatches} (use old_logprobs='recompute')"
            )

    @property
    def eps_high(self) -> float:
        """The upper clip width: `clip_eps_high`, or `clip_eps` when unset."""
        return self.clip_eps if self.clip_eps_high is None else self.clip_eps_high


# --------------------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------------------


@dataclass
class Batch:
    """Everything one update needs, built by `Trainer.make_batch`.

    Tensors are ``[B, L]``, right-padded, aligned with `input_ids` (``B`` rows; ``N``
    episodes, ``T`` their most turns).

    Attributes:
        rows: The padded rows (`PaddedRows`: episode and turn of each row and token).
        input_ids, attention_mask, position_ids: int64 model inputs.
        loss_mask: bool, policy tokens (``rows.response_mask``).
        advantages: float32, the advantage of each policy token's turn; 0 elsewhere.
        old_logprobs: float32, ``log pi_old`` (0 on non-policy tokens for ``"rollout"``;
            all 0 for ``"detach"`` without a value head, where no pass computes it).
        tis_weights: float32, ``min(exp(log pi_old - log pi_sampler), tis_cap)`` on policy
            tokens (`TrainerConfig.tis_cap`), or None.
        ref_logprobs: float32 ``log pi_ref``, or None without a KL term.
        value_mask: bool, the positions where each turn's value is read (PPO; else empty).
        old_values: float32, ``V_old`` at `value_mask`, 0 elsewhere.
        returns: float32, value targets ``R = A + V_old`` at `value_mask`, 0 elsewhere.
        episodes: The episodes the rows were built from.
        turn_mask: ``[N, T]`` bool, real turns.
        scores: ``[N]`` float64, each episode's undiscounted return.
        turn_advantages: ``[N, T]`` float64, per-turn advantages (from
            `xpgym.training.advantages`; per-episode ones copied to every turn).
        turn_values: ``[N, T]`` float64 ``V_old`` per turn (PPO), else None.
        turn_returns: ``[N, T]`` float64 value targets (PPO), else None.
    """

    rows: PaddedRows
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    loss_mask: torch.Tensor
    advantages: torch.Tensor
    old_logprobs: torch.Tensor
    ref_logprobs: torch.Tensor | None
    value_mask: torch.Tensor
    old_values: torch.Tensor
    returns: torch.Tensor
    episodes: list[Episode]
    turn_mask: NDArray[np.bool_]
    scores: NDArray[np.float64]
    turn_advantages: NDArray[np.float64]
    turn_values: NDArray[np.float64] | None = None
    turn_returns: NDArray[np.float64] | None = None
    tis_weights: torch.Tensor | None = None


class Trainer:
    """PPO-clip updates of a causal LM from xpgym episodes (math: module docstring, `losses`).

    Args:
        model: A transformers causal LM (float32 on CPU for bit-exact determinism). It is
            put in eval mode and updated in place.
        config: The options.
        ref_model: The KL reference (default, when ``kl_coef > 0``: a frozen copy of
            `model` taken now).
        pad_token_id: Id written at padding (any valid id; padding is masked). Default:
            ``model.config.pad_token_id``, else 0.
        advantage_fn: Replaces step 4 (another estimator, e.g. a trainer's own in the
            parity curves): called by `make_batch` with the finished `Batch` (whose
            ``advantages`` are this trainer's), it returns the ``[B, L]`` token advantages
            to train on; only entries under ``loss_mask`` are used (the rest are zeroed).
            ``Batch.turn_advantages`` keeps this trainer's values. None: off.

    Attributes:
        value_head: ``torch.nn.Linear(hidden_size, 1)`` for PPO, else None.
        optimizer: AdamW over the model's and the value head's parameters.
        iteration: Number of `train_step` calls so far.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        config: TrainerConfig,
        *,
        ref_model: torch.nn.Module | None = None,
        pad_token_id: int | None = None,
        advantage_fn: AdvantageFn | None = None,
    ) -> None:
        self.config = config
        self.advantage_fn = advantage_fn
        self.model = model.eval()  # dropout off: pi_old and pi_theta are the same function
        if pad_token_id is None:
            pad_token_id = getattr(getattr(model, "config", None), "pad_token_id", None)
        self.pad_token_id = int(pad_token_id) if isinstance(pad_token_id, int) else 0
        self.ref_model: torch.nn.Module | None = None
        if config.kl_coef > 0:
            self.ref_model = copy.deepcopy(model) if ref_model is None else ref_model
            self.ref_model.eval().requires_grad_(False)
        self.value_head: torch.nn.Linear | None = None
        params = list(model.parameters())
        if config.algorithm == "ppo":
            model_config: Any = model.config  # a transformers PretrainedConfig
            hidden_size = int(model_config.hidden_size)
            device = next(model.parameters()).device
            self.value_head = torch.nn.Linear(hidden_size, 1, device=device)
            torch.nn.init.zeros_(self.value_head.weight)  # V = 0 at the start; no RNG drawn
            torch.nn.init.zeros_(self.value_head.bias)
            params += list(self.value_head.parameters())
        self.params = params
        self.optimizer = torch.optim.AdamW(
            params,
            lr=config.lr,
            betas=config.adam_betas,
            eps=config.adam_eps,
            weight_decay=config.weight_decay,
        )
        self.iteration = 0

    def train_step(self, episodes: Sequence[Episode]) -> dict[str, float]:
        """`make_batch` then `update`: one batch of episodes, `ppo_epochs` passes.

        Returns:
            Metrics (floats): ``loss``, ``pg_loss``, ``entropy``, ``clip_frac``,
            ``approx_kl`` (k3 of pi_old vs pi_theta), ``grad_norm`` (before clipping),
            ``kl`` (with a reference), ``value_loss`` (PPO): means over the optimizer
            steps; ``adv_mean`` (over policy tokens), ``return_mean`` (episode score),
            ``response_length`` (policy tokens per turn), ``num_episodes``, ``num_rows``,
            ``num_tokens`` (policy tokens); ``infra_error_episodes`` (and per cause kind,
            `xpgym.core.trajectory.infra_error_metrics`): episodes left out by `make_batch`;
            ``metrics/<key>``: the episodes' own metrics (``Episode.info["metrics"]``, e.g.
            from reward functions), averaged (`xpgym.core.trajectory.episode_metrics`).
        """
        batch = self.make_batch(episodes)
        return {
            **self.update(batch),
            **infra_error_metrics(episodes),
            **episode_metrics(episodes),
        }

    def make_batch(self, episodes: Sequence[Episode]) -> Batch:
        """Rows, old and reference log-probs, values and advantages for `episodes`: steps 2-4.

        Episodes with a turn that has no policy token (the collector's placeholder for a
        first prompt longer than the context) and infra-error episodes
        (``outcome == "infra_error"``, `xpgym.core.errors`) are dropped, with a warning;
        group and batch statistics then use the remaining members.

        Raises:
            ValueError: no episode left, episodes without token ids (collect them with a
                tokenizer), or ``old_logprobs="rollout"`` without sampler log-probs.
        """
        cfg = self.config
        episodes = _trainable(episodes)

        # 2. Rows: token rows, right-padded to [B, L]; response_mask = policy tokens.
        rows = self._pad_rows(episodes)
        device = next(self.model.parameters()).device
        inputs = {
            "input_ids": torch.as_tensor(rows.input_ids, device=device),
            "attention_mask": torch.as_tensor(rows.attention_mask, device=device),
            "position_ids": torch.as_tensor(rows.position_ids, device=device),
        }
        loss_mask = torch.as_tensor(rows.response_mask, device=device).bool()

        # 3. One pass without gradients: log pi_old, V_old [B, L], log pi_ref; then log pi_old
        # from the sampler ("rollout") and the truncated importance weights (tis_cap).
        old_logprobs, values, ref_logprobs = self._no_grad_pass(inputs)
        old_logprobs, tis_weights = self._sampler_logprobs(rows, old_logprobs, loss_mask)

        # 4. Advantages per turn [N, T], from xpgym.training.advantages.
        rewards, turn_mask = turn_rewards(episodes)  # r[n, t], real turns
        scores = episode_scores(rewards, turn_mask)  # s[n] = sum_t r[n, t]
        value_mask = torch.zeros_like(loss_mask)  # where V_t is read (PPO)
        returns = torch.zeros_like(old_logprobs)  # R_t at those positions (PPO)
        turn_values = turn_returns = None
        if cfg.algorithm == "ppo":  # A_t = delta_t + gamma lam A_{t+1}, R_t = A_t + V_t
            starts = _turn_starts(rows, device)
            advantages, turn_values, turn_returns = self._turn_gae(
                episodes, rows, rewards, turn_mask, values, starts
            )
            value_mask[starts.at] = True  # the value loss reads V_t and R_t at turn starts
            target = turn_returns[starts.episode, starts.turn]
            returns[starts.at] = torch.as_tensor(target, dtype=torch.float32, device=device)
        else:  # the critic-free algorithms: one dispatch by name (module docstring's table)
            advantages = episode_advantages(
                cfg.algorithm, episodes, gamma=cfg.gamma, **cfg.advantage_kwargs
            )

        # Per-turn values to tokens: A of turn t on every policy token of turn t.
        token_advantages = broadcast_to_tokens(advantages[rows.episode_index], rows.turn_index)
        batch = Batch(
            rows=rows,
            input_ids=inputs["input_ids"],
            attention_mask=inputs["attention_mask"],
            position_ids=inputs["position_ids"],
            loss_mask=loss_mask,
            advantages=torch.as_tensor(token_advantages, dtype=torch.float32, device=device),
            old_logprobs=old_logprobs,
            ref_logprobs=ref_logprobs,
            value_mask=value_mask,
            old_values=torch.where(value_mask, values, 0.0),
            returns=returns,
            episodes=list(episodes),
            turn_mask=turn_mask,
            scores=scores,
            turn_advantages=advantages,
            turn_values=turn_values,
            turn_returns=turn_returns,
            tis_weights=tis_weights,
        )
        if self.advantage_fn is not None:  # an outside estimator replaces step 4
            batch.advantages = self._outside_advantages(batch)
        return batch

    def _pad_rows(self, episodes: list[Episode]) -> PaddedRows:
        """Step 2: `turn_rows` or `episode_rows` (`TrainerConfig.layout`), right-padded.

        Raises:
            ValueError: a row with an empty prompt (its first policy token would have no
                logits to be scored from).
        """
        layout = self.config.layout
        packed = turn_rows(episodes) if layout == "per_turn" else episode_rows(episodes)
        rows = packed.pad(pad_token_id=self.pad_token_id)
        if (rows.prompt_length < 1).any():
            b = int(np.flatnonzero(rows.prompt_length < 1)[0])
            raise ValueError(
                f"row {b} (episode {int(rows.episode_index[b])}) has an empty prompt; its "
                f"first policy token would have no logits to be scored from"
            )
        return rows

    def _no_grad_pass(
        self, inputs: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Step 3: ``(log pi_old, V_old, log pi_ref)``, ``[B, L]`` each, without gradients.

        One forward pass of the model gives ``log pi_old`` and, with PPO's value head,
        ``V_old``; the reference model (when `kl_coef` > 0) gives ``log pi_ref`` (else None).
        With ``old_logprobs="detach"`` and no value head nothing needs ``pi_old`` before the
        update (it uses ``logp.detach()``), so the model's pass is skipped: both stay 0.
        """
        cfg, ppo = self.config, self.value_head is not None
        input_ids = inputs["input_ids"]
        with torch.no_grad():
            old_logprobs = torch.zeros(
                input_ids.shape, dtype=torch.float32, device=input_ids.device
            )
            values = torch.zeros_like(old_logprobs)
            if ppo or cfg.old_logprobs != "detach":
                out = self.model(**inputs, use_cache=False, output_hidden_states=ppo)
                old_logprobs = logprobs_from_logits(
                    out.logits, input_ids, temperature=cfg.temperature
                )
                if self.value_head is not None:  # V(h) = w . h + b on the last hidden state
                    values = self.value_head(out.hidden_states[-1].float()).squeeze(-1)
                del out
            ref_logprobs = None
            if self.ref_model is not None:
                ref_logprobs = token_logprobs(
                    self.ref_model,
                    input_ids,
                    inputs["attention_mask"],
                    temperature=cfg.temperature,
                    position_ids=inputs["position_ids"],
                )
        return old_logprobs, values, ref_logprobs

    def _sampler_logprobs(
        self, rows: PaddedRows, old_logprobs: torch.Tensor, loss_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Step 3, the sampler's side: ``(log pi_old, tis_weights)``, ``[B, L]`` each.

        ``log pi_old`` is the sampler's log-probs for ``old_logprobs="rollout"``, else
        `old_logprobs` unchanged. With `tis_cap`, the truncated importance weights
        ``w = min(exp(log pi_old - log pi_sampler), tis_cap)`` on policy tokens (0
        elsewhere); else None.

        Raises:
            ValueError: the sampler's log-probs are needed but the episodes have none.
        """
        cfg = self.config
        if cfg.old_logprobs != "rollout" and cfg.tis_cap is None:
            return old_logprobs, None
        if rows.rollout_logprobs is None:
            raise ValueError(
                f"old_logprobs={cfg.old_logprobs!r} with tis_cap={cfg.tis_cap!r} needs the "
                "sampler's log-probs, but the episodes have no response_logprobs"
            )
        sampler_logprobs = torch.as_tensor(rows.rollout_logprobs, device=old_logprobs.device)
        tis_weights = None
        if cfg.tis_cap is not None:
            tis_weights = torch.exp(old_logprobs - sampler_logprobs).clamp(max=cfg.tis_cap)
            tis_weights = torch.where(loss_mask, tis_weights, 0.0)
        if cfg.old_logprobs == "rollout":
            old_logprobs = sampler_logprobs
        return old_logprobs, tis_weights

    def _turn_gae(
        self,
        episodes: list[Episode],
        rows: PaddedRows,
        rewards: NDArray[np.float64],
        turn_mask: NDArray[np.bool_],
        values: torch.Tensor,
        starts: _TurnStarts,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Step 4 for PPO: ``(A, V, R)``, ``[N, T]`` each, by turn-level GAE (`turn_gae`)::

            delta_t = r_t + gamma V_{t+1} - V_t,   A_t = delta_t + gamma lam A_{t+1},
            R_t = A_t + V_t

        ``V_t`` is `values` (``[B, L]``) read at each turn's start (`starts`). Every episode
        end is terminal (Oat), unless `bootstrap_truncated`: then a truncated episode's
        ``V_T`` is the value read at its last token.
        """
        cfg = self.config
        turn_values = np.zeros(turn_mask.shape)
        turn_values[starts.episode, starts.turn] = values[starts.at].cpu().numpy()
        last_values = terminated = None  # every episode end is terminal (Oat)
        if cfg.bootstrap_truncated:  # V after the last turn: the value at the last token
            terminated = episode_terminated(episodes)
            num_turns = turn_mask.sum(axis=1)
            ends = rows.first_turn + rows.num_turns == num_turns[rows.episode_index]
            last_token = rows.attention_mask.sum(axis=1) - 1
            last_values = np.zeros(len(episodes))
            at_last = (
                torch.as_tensor(np.flatnonzero(ends), device=values.device),
                torch.as_tensor(last_token[ends], device=values.device),
            )
            last_values[rows.episode_index[ends]] = values[at_last].cpu().numpy()
        advantages, returns = turn_gae(
            rewards,
            turn_values,
            turn_mask,
            gamma=cfg.gamma,
            lam=cfg.lam,
            last_values=last_values,
            terminated=terminated,
        )
        return advantages, turn_values, returns

    def _outside_advantages(self, batch: Batch) -> torch.Tensor:
        """``[B, L]`` float32: `advantage_fn`'s token advantages, 0 off the policy tokens.

        Raises:
            ValueError: `advantage_fn` returned another shape than ``batch.advantages``.
        """
        assert self.advantage_fn is not None
        replaced = torch.as_tensor(self.advantage_fn(batch), dtype=torch.float32)
        if replaced.shape != batch.advantages.shape:
            raise ValueError(
                f"advantage_fn returned shape {tuple(replaced.shape)}, expected "
                f"{tuple(batch.advantages.shape)} (one value per token of the rows)"
            )
        return torch.where(batch.loss_mask, replaced.to(batch.advantages.device), 0.0)

    def update(self, batch: Batch) -> dict[str, float]:
        """Step 5: `ppo_epochs` passes of `num_minibatches` AdamW steps over `batch`.

        Each pass shuffles the rows with a numpy generator seeded by ``(seed, iteration,
        epoch)`` and splits them into `num_minibatches` minibatches (`_minibatch_step`).

        Returns:
            The metrics of `train_step`.

        Raises:
            FloatingPointError: the loss is not finite.
        """
        cfg = self.config
        num_rows = batch.input_ids.shape[0]
        stats: dict[str, list[float]] = defaultdict(list)
        for epoch in range(cfg.ppo_epochs):
            order = np.random.default_rng([cfg.seed, self.iteration, epoch]).permutation(num_rows)
            for minibatch in np.array_split(order, cfg.num_minibatches):  # shuffled membership
                if minibatch.size == 0:
                    continue
                for name, value in self._minibatch_step(batch, minibatch, epoch).items():
                    stats[name].append(value)
        self.iteration += 1

        metrics = {name: float(np.mean(values)) for name, values in stats.items()}
        num_tokens = int(batch.loss_mask.sum())
        metrics.update(
            adv_mean=float(batch.advantages[batch.loss_mask].mean()) if num_tokens else 0.0,
            return_mean=float(batch.scores.mean()),
            response_length=num_tokens / int(batch.turn_mask.sum()),
            num_episodes=float(len(batch.episodes)),
            num_rows=float(num_rows),
            num_tokens=float(num_tokens),
        )
        return metrics

    def _minibatch_step(
        self, batch: Batch, minibatch: NDArray[np.intp], epoch: int
    ) -> dict[str, float]:
        """One optimizer step on the rows `minibatch` of `batch`: forward, loss, backward,
        clip the gradient norm, AdamW. Returns this step's metrics (`train_step`'s names).

        Raises:
            FloatingPointError: the loss is not finite.
        """
        cfg = self.config
        index = torch.as_tensor(np.sort(minibatch), device=batch.input_ids.device)
        width = int(batch.attention_mask[index].sum(1).max())  # drop all-pad columns
        at = (index, slice(None, width))  # these rows, [B_mb, width]
        input_ids, mask = batch.input_ids[at], batch.loss_mask[at]
        out = self.model(
            input_ids=input_ids,
            attention_mask=batch.attention_mask[at],
            position_ids=batch.position_ids[at],
            use_cache=False,
            output_hidden_states=self.value_head is not None,
        )
        # log pi_theta with gradient; log pi_old from step 3 (or detached).
        logp = logprobs_from_logits(out.logits, input_ids, temperature=cfg.temperature)
        old_logp = logp.detach() if cfg.old_logprobs == "detach" else batch.old_logprobs[at]
        terms = self._loss(batch, at, out, logp, old_logp)
        if not torch.isfinite(terms.loss):
            raise FloatingPointError(
                f"non-finite loss {float(terms.loss.detach())} at iteration {self.iteration}, "
                f"epoch {epoch} (pg_loss {float(terms.pg_loss.detach())}); check the rewards "
                f"and the lr"
            )
        # Backward, clip ||g|| to max_grad_norm (the norm before clipping is reported), one
        # AdamW step.
        self.optimizer.zero_grad(set_to_none=True)
        terms.loss.backward()
        max_norm = math.inf if cfg.max_grad_norm is None else cfg.max_grad_norm
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm)
        self.optimizer.step()

        with torch.no_grad():  # k3 of pi_old vs pi_theta; share of clipped tokens
            approx_kl = aggregate_loss(kl_penalty(old_logp, logp, "k3", mask), mask, "token-mean")
            clip_frac = aggregate_loss(terms.clipped.float(), mask, "token-mean")
        stats = {}
        if terms.kl is not None:
            stats["kl"] = float(terms.kl.detach())
        if terms.value_loss is not None:
            stats["value_loss"] = float(terms.value_loss.detach())
        stats.update(
            loss=float(terms.loss.detach()),
            pg_loss=float(terms.pg_loss.detach()),
            entropy=float(terms.entropy.detach()),
            clip_frac=float(clip_frac.detach()),
            approx_kl=float(approx_kl.detach()),
            grad_norm=float(grad_norm.detach()),
        )
        return stats

    def _loss(
        self,
        batch: Batch,
        at: tuple[torch.Tensor, slice],
        out: Any,
        logp: torch.Tensor,
        old_logp: torch.Tensor,
    ) -> _LossTerms:
        """The minibatch loss (module docstring), on the rows and columns `at` of `batch`::

            loss = agg(l) + kl_coef * agg(k) - ent_coef * agg(H) + vf_coef * L_V

        `out` is the model's output on those rows (hidden states for PPO), `logp` and
        `old_logp` are ``log pi_theta`` and ``log pi_old``, ``[B_mb, width]`` each.
        """
        cfg = self.config
        mask = batch.loss_mask[at]
        scale = cfg.max_new_tokens if cfg.loss_scale_factor is None else cfg.loss_scale_factor

        def agg(per_token: torch.Tensor) -> torch.Tensor:  # aggregate_loss, loss_agg_mode
            return aggregate_loss(per_token, mask, cfg.loss_agg_mode, loss_scale_factor=scale)

        # Policy: l_t = max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high)), aggregated.
        pg_mat, clipped = policy_loss(
            logp,
            old_logp,
            batch.advantages[at],
            mask,
            clip_eps_low=cfg.clip_eps,
            clip_eps_high=cfg.eps_high,
            dual_clip_c=cfg.dual_clip_c,
        )
        if batch.tis_weights is not None:  # truncated importance sampling (tis_cap)
            pg_mat = pg_mat * batch.tis_weights[at]
        pg_loss = agg(pg_mat)
        loss = pg_loss

        # KL to the reference: + beta agg(k), k = k1 | k2 | k3 of pi_theta vs pi_ref.
        kl = None
        if batch.ref_logprobs is not None:
            kl = agg(kl_penalty(logp, batch.ref_logprobs[at], cfg.kl_estimator, mask))
            loss = loss + cfg.kl_coef * kl

        # Entropy bonus: - c_H agg(H); always reported.
        logits = out.logits if cfg.ent_coef > 0 else out.logits.detach()
        entropy = agg(entropy_from_logits(logits, temperature=cfg.temperature))
        if cfg.ent_coef > 0:
            loss = loss - cfg.ent_coef * entropy

        # Value: + c_V * 1/2 mean max((V - R)^2, (V_old + clip(V - V_old) - R)^2).
        v_loss = None
        if self.value_head is not None:
            values = self.value_head(out.hidden_states[-1].float()).squeeze(-1)
            v_loss = value_loss(
                values,
                batch.old_values[at],
                batch.returns[at],
                batch.value_mask[at],
                clip_eps=cfg.value_clip_eps,
            )
            loss = loss + cfg.vf_coef * v_loss
        return _LossTerms(loss, pg_loss, entropy, clipped, kl, v_loss)


# --------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------


def train(
    model: torch.nn.Module,
    tokenizer: Any,
    vec_env: VectorEnv,
    config: TrainerConfig,
    *,
    num_steps: int,
    ref_model: torch.nn.Module | None = None,
    collector_kwargs: dict[str, Any] | None = None,
    advantage_fn: AdvantageFn | None = None,
    schedulers: Sequence[Scheduler] = (),
    max_extra_draws: int | None = None,
    tree: TreeSpec | None = None,
) -> list[dict[str, float]]:
    """Train `model` on `vec_env` for `num_steps` steps: collect, advantages, update, log.

    Sampling is `HFPolicy` with ``temperature=config.temperature``, ``top_p=1``,
    ``top_k=0`` (so its log-probs are exactly ``log_softmax(logits / temperature)``, what the
    learner computes) and ``seed=config.seed``; step ``k`` collects ``config.num_episodes``
    episodes in groups of ``config.group_size`` with reset seeds derived from
    ``(config.seed, k)``.

    Args:
        model: A transformers causal LM, updated in place.
        tokenizer: Its tokenizer, with a chat template (token-exact prompts).
        vec_env: The environments (e.g. ``xpgym.make_vec("game:GuessTheNumber-v0-easy", 4)``).
        config: The options.
        num_steps: Training steps.
        ref_model: KL reference (see `Trainer`).
        collector_kwargs: More `RolloutCollector` arguments (``system_prompt``, ...).
        advantage_fn: Replaces the advantages of every batch (see `Trainer`).
        schedulers: Curricula (`xpgym.rollout.curriculum.Scheduler`, e.g.
            `SuccessRateScheduler`, `HorizonScheduler`): ``apply(vec_env, step)`` before each
            step's collection, ``observe`` on all its episodes (dropped groups included)
            after; their ``metrics()`` join the step's.
        max_extra_draws: With a value, DAPO's dynamic sampling
            (`xpgym.rollout.curriculum.fill_groups`): groups whose returns are all equal are
            dropped and up to this many more collections refill them (draw ``d > 0`` uses
            reset seeds derived from ``(config.seed, step, d)``); the step trains on the
            groups kept and logs ``filter/*`` counts. A step that keeps no group skips the
            update (``update_skipped = 1``). `None`: no filtering.
        tree: Tree rollouts (`xpgym.rollout.tree`): each step grows ``config.num_episodes //
            config.group_size`` trees of ``tree.roots == config.group_size`` roots
            (`RolloutCollector.collect_tree`, the collector recording states) instead of
            flat groups, so a step trains on as many episodes as the trees grew; the step
            logs ``tree/episodes`` and ``tree/tokens_per_episode`` (`generation_cost`).
            Not with `max_extra_draws` (a tree's groups hang together).

    Returns:
        The metrics of each step (`Trainer.train_step`), plus ``rollout_s`` (seconds
        collecting the step's episodes) and ``update_s`` (seconds in `Trainer.train_step`),
        and the schedulers' and the filter's metrics when they are given.
    """
    from xpgym.rollout.collector import RolloutCollector
    from xpgym.rollout.policies.hf import HFPolicy
    from xpgym.rollout.tree import generation_cost

    cfg = config
    if tree is not None and tree.roots != cfg.group_size:
        raise ValueError(
            f"tree.roots ({tree.roots}) must equal config.group_size ({cfg.group_size}): a "
            "tree's roots are the group its step starts from"
        )
    if tree is not None and max_extra_draws is not None:
        raise ValueError("tree rollouts do not combine with max_extra_draws (group filtering)")
    policy = HFPolicy(
        model,
        tokenizer,
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=1.0,
        top_k=0,
        seed=cfg.seed,
    )
    collector = RolloutCollector(
        vec_env,
        policy,
        max_turns=cfg.max_turns,
        **{**dict(collector_kwargs or {}), **({"record_states": True} if tree else {})},
    )
    trainer = Trainer(
        model,
        cfg,
        ref_model=ref_model,
        pad_token_id=policy.pad_token_id,
        advantage_fn=advantage_fn,
    )
    history = []
    for step in range(num_steps):
        # 1. Collect: complete episodes, group_size per start state; the curricula set the
        # next resets' difficulty first.
        began = time.perf_counter()
        for scheduler in schedulers:
            scheduler.apply(vec_env, step)
        drawn: list[Episode] = []
        draw = functools.partial(_collect_groups, collector, cfg, tree, step, drawn)
        num_groups = cfg.num_episodes // cfg.group_size
        fill = None
        if max_extra_draws is None:
            episodes = draw(num_groups, 0)
        else:
            fill = fill_groups(draw, num_groups, max_extra_draws=max_extra_draws)
            episodes = fill.episodes
        for scheduler in schedulers:
            scheduler.observe(drawn)
        collected = time.perf_counter()
        # 2-5. Rows, old log-probs, advantages, PPO-clip update.
        metrics = trainer.train_step(episodes) if episodes else {"update_skipped": 1.0}
        metrics["rollout_s"] = collected - began
        metrics["update_s"] = time.perf_counter() - collected
        for scheduler in schedulers:
            metrics.update(scheduler.metrics())
        if fill is not None:
            metrics.update(fill.metrics())
        if tree is not None:
            cost = generation_cost(episodes)
            metrics["tree/episodes"] = float(cost.episodes)
            metrics["tree/tokens_per_episode"] = cost.tokens_per_episode
        # Log.
        history.append(metrics)
        if episodes:
            logger.info(
                "step %d: return %.3f, loss %.4f, entropy %.3f, grad norm %.3f",
                step,
                metrics["return_mean"],
                metrics["loss"],
                metrics["entropy"],
                metrics["grad_norm"],
            )
        curriculum = {k: v for k, v in metrics.items() if k.split("/")[0] in _CURRICULUM_LOGS}
        if curriculum or not episodes:
            logger.info(
                "step %d: %s%s",
                step,
                "no group with varying returns, update skipped; " if not episodes else "",
                ", ".join(f"{name} {value:g}" for name, value in sorted(curriculum.items())),
            )
    return history


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


class _TurnStarts(NamedTuple):
    """Where each turn's value ``V_t`` is read: the token before the turn's first policy token
    (``[K]`` each, one entry per turn of every row)."""

    at: tuple[torch.Tensor, torch.Tensor]  # (row, column) index into [B, L] tensors
    episode: NDArray[np.intp]  # the turn's episode
    turn: NDArray[np.intp]  # its turn index within that episode


def _turn_starts(rows: PaddedRows, device: torch.device) -> _TurnStarts:
    """The positions of `_TurnStarts` in `rows`."""
    turn_index = rows.turn_index  # [B, L], -1 off policy tokens
    previous = np.pad(turn_index[:, :-1], ((0, 0), (1, 0)), constant_values=-1)
    row, first = np.nonzero((turn_index >= 0) & (turn_index != previous))
    column = first - 1  # >= 0: every row starts with a prompt token
    at = (torch.as_tensor(row, device=device), torch.as_tensor(column, device=device))
    return _TurnStarts(at, rows.episode_index[row], turn_index[row, first])


class _LossTerms(NamedTuple):
    """One minibatch's loss and its terms (scalars), from `Trainer._loss`."""

    loss: torch.Tensor
    pg_loss: torch.Tensor
    entropy: torch.Tensor
    clipped: torch.Tensor  # [B_mb, width] bool: tokens whose ratio the clip cut
    kl: torch.Tensor | None  # with a reference model
    value_loss: torch.Tensor | None  # PPO


def _trainable(episodes: Sequence[Episode]) -> list[Episode]:
    """The episodes with at least one turn, a policy token in every turn and no
    infrastructure failure."""
    kept = [
        ep
        for ep in episodes
        if ep.turns and all(t.response_ids != [] for t in ep.turns) and ep.infra_error is None
    ]
    if len(kept) < len(episodes):
        logger.warning(
            "dropped %d of %d episodes that have a turn without policy tokens (a prompt "
            "longer than the context, or no turns) or an infrastructure failure",
            len(episodes) - len(kept),
            len(episodes),
        )
    if not kept:
        raise ValueError(f"no episode to train on among the {len(episodes)} given")
    return kept


def _collect_groups(
    collector: RolloutCollector,
    cfg: TrainerConfig,
    tree: TreeSpec | None,
    step: int,
    drawn: list[Episode],
    num_groups: int,
    index: int,
) -> list[Episode]:
    """Draw `index` of step `step` (`fill_groups`' ``draw``): `num_groups` groups of
    ``cfg.group_size`` (or trees grown from them), also appended to `drawn`; draw 0 uses
    the step's seed."""
    seed = _step_seed(cfg.seed, step, *([index] if index else []))
    if tree is not None:
        batch = collector.collect_tree(num_groups, tree, seed=seed)
    else:
        batch = collector.collect(num_groups * cfg.group_size, group_size=cfg.group_size, seed=seed)
    drawn.extend(batch)
    return batch


_CURRICULUM_LOGS = ("curriculum", "horizon", "filter")
"""Metric prefixes of the schedulers and the group filter, logged on a line of their own."""


def _step_seed(seed: int, step: int, *draw: int) -> int:
    """A 63-bit reset seed for training step `step`, derived from `seed`; with `draw`
    (a refill draw's index, >= 1), one for that draw of the step."""
    word = np.random.SeedSequence([seed, step, *draw]).generate_state(1, dtype=np.uint64)[0]
    return int(word >> np.uint64(1))
