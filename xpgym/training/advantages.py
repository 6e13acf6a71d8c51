"""Reference RL math: REINFORCE returns, ReBN, GRPO, Dr.GRPO, RLOO, turn-level GAE, GiGPO's
step-level groups and advantages on trees of forked episodes.

Every trainer adapter is checked against these functions by the parity suite, so each one
states its formula, its std convention (population or unbiased) and where its eps goes.
Everything is float64 numpy; the functions are pure.

Layouts
-------
- Turn level: ``rewards: [B, T]`` float and ``mask: [B, T]`` bool, True where turn ``t``
  of episode ``b`` exists. Padding is on the right: each row's True entries are a prefix.
  Values at padding are ignored on input and are 0 on output. `turn_rewards` builds both
  from `Episode`s.
- Episode level: ``scores: [N]`` (one number per episode, e.g. `episode_scores`) and
  ``group_ids: [N]``: episodes that started from the same state share an id (GRPO groups;
  `xpgym.core.trajectory.training_group_ids` gives them, with an infra-error episode in a
  group of its own).

Infrastructure failures (``Episode.outcome == "infra_error"``, `xpgym.core.errors`) are not
the policy's doing and are kept out of every statistic: `turn_rewards` gives their turns mask
False, `training_group_ids` a group of their own, and `xpgym.training.layouts` rows response
mask 0, so `token_advantages` sees no turn of theirs. The healthy episodes' advantages are
then exactly those computed without the failed ones.
- Token level: `broadcast_to_tokens` copies per-turn (or per-episode) values onto token
  positions given each token's turn index (-1 for tokens the policy did not write).
- Rows and token tensors, for trainers that see rows rather than episodes: `row_returns`
  (each row's first-turn return, for one scalar per row), and `token_advantages`, which
  recovers the turns of token tensors (`turn_index_from_mask`, `per_turn_sums`) and computes
  per-turn REINFORCE or ReBN exactly as on episodes (a verl estimator gets only
  ``token_level_rewards`` and ``response_mask``).

Algorithm names
---------------
`turn_advantages` is the one place a critic-free algorithm's name (`CRITIC_FREE_ALGORITHMS`,
from the `CriticFreeAlgorithm` Literal) becomes ``[B, T]`` per-turn advantages: the reference
trainer and the parity suite call it, and adapters and recipes map their trainers' own names
onto these.

Normalisation options (`whiten`, `rebn`, `grpo`)
------------------------------------------------
With ``mu`` the mean and ``var`` the variance of the statistics' population:

- ``std="population"``: ``var = sum(w * (x - mu)**2) / sum(w)``;
  ``std="unbiased"``: ``var = sum(w * (x - mu)**2) / (sum(w) - 1)`` (Bessel's correction
  with frequency weights: with ``weights`` = token counts this is the variance over tokens,
  exactly what ``masked_var`` computes on advantages broadcast over tokens).
- ``eps_placement="std"``: ``(x - mu) / (sqrt(var) + eps)``;
  ``"var"``: ``(x - mu) / sqrt(var + eps)``; ``"clamp"``: ``(x - mu) / sqrt(max(var, eps))``.
- ``zero_std="eps"``: no special case, the formula above is applied (a constant population
  gives 0 because its deviations are exactly 0); ``"zero"``: the output is 0 wherever the
  population is constant or ``sqrt(var) <= zero_std_tol``.

A population whose values are all equal has deviations exactly 0 here (the mean of equal
float64 values can differ from them by one ulp; that error is not propagated), so a
constant population always normalises to exactly 0. Trainers computing in float32 can
return small non-zero values there (e.g. ``1e-9 / 1e-6``) for scores that are not exact
binary fractions.

Which options reproduce which trainer
-------------------------------------
``r, m``: turn rewards and mask; ``s, g``: episode scores and group ids; ``n_tok``: each
turn's token count ``[B, T]``. The trainer side is in docs/trainers.md.

- Oat / GEM ``train_oat.py --norm_return`` (ReBN):
  ``rebn(discounted_returns(r, m, gamma), m)`` (population std, eps 1e-9 added to it).
- GEM's verl example (``ReinforceGEMTrainer``): ``rebn(..., std="unbiased")`` (eps 1e-9).
- ROLL ``step_reinforce`` with ``reward_normalization {grouping: batch, method: mean_std}``:
  ``rebn(discounted_returns(r, m, step_reward_gamma), m, std="unbiased", eps=1e-6,
  zero_std="zero", zero_std_tol=1e-6)``.
- ROLL ``mean_std`` grouped by ``traj_group_id``:
  ``grpo(s, g, eps=1e-6, zero_std="zero", zero_std_tol=1e-6, single_member="zero")``.
- Oat ``PPOMultiTurnLearner`` (turn-level critic): ``turn_gae(r, v, m, gamma=, lam=)`` with
  ``terminated=None`` (Oat treats every episode end as terminal).
- verl ``grpo``: ``grpo(s, uid, single_member="keep")``; with
  ``norm_adv_by_std_in_grpo=False``: ``dr_grpo(s, uid, single_member="keep")``.
- verl ``rloo``: ``rloo(s, uid, single_member="keep")``.
- verl ``masked_whiten`` (the last step of ``gae``, ``reinforce_plus_plus`` and
  ``reinforce_plus_plus_baseline``), at turn level: ``whiten(x, m, weights=n_tok)``
  (defaults: unbiased, ``(x - mu) / sqrt(var + 1e-8)``).
- OpenRLHF ``group_norm``: ``grpo(s, g, eps=1e-9)``; ``dr_grpo`` and the group-mean shaping
  of ``reinforce_baseline``: ``dr_grpo(s, g)``; ``rloo``: ``rloo(s, g)``.
- OpenRLHF global normalisation (``gae``, ``reinforce``, ``reinforce_baseline``), at turn
  level: ``whiten(x, m, weights=n_tok, std="population", eps=1e-8, eps_placement="clamp")``.
- RL2 ``reinforce`` with ``norm_var``: groups of ``n > 1``: ``grpo(s, g, eps=EPS32)``;
  ``n == 1`` or ``global_norm``: ``grpo(s, np.zeros(N), eps=EPS32)`` (one group).
- Oat ``critic_type="grpo"`` / ``"drgrpo"``: ``grpo(s, g, eps=1e-8)`` / ``dr_grpo(s, g)``.

``EPS32 = float(np.finfo(np.float32).eps)`` (RL2 uses ``torch.finfo(dtype).eps`` of its
float32 rewards). Single-member groups: OpenRLHF and Oat compute torch's unbiased std of
one element (NaN), so they have no finite reference; ``single_member="error"`` flags them.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

from xpgym.core.trajectory import training_group_ids, tree_nodes, turn_state_keys

if TYPE_CHECKING:
    from xpgym.core.trajectory import Episode
    from xpgym.training.layouts import RowInfo

__all__ = [
    "ADVANTAGE_ALGORITHMS",
    "CRITIC_FREE_ALGORITHMS",
    "GROUP_ALGORITHMS",
    "STEP_ALGORITHMS",
    "TOKEN_ESTIMATORS",
    "AdvantageAlgorithm",
    "CriticFreeAlgorithm",
    "GroupAlgorithm",
    "StepAlgorithm",
    "TokenEstimator",
    "broadcast_to_tokens",
    "discounted_returns",
    "dr_grpo",
    "episode_advantages",
    "episode_scores",
    "episode_terminated",
    "filled_scores",
    "gigpo",
    "grpo",
    "infra_filled_scores",
    "per_turn_sums",
    "rebn",
    "rloo",
    "row_returns",
    "token_advantages",
    "tree_advantages",
    "turn_advantages",
    "turn_gae",
    "turn_index_from_mask",
    "turn_rewards",
    "whiten",
]

StdKind = Literal["population", "unbiased"]
EpsPlacement = Literal["std", "var", "clamp"]
ZeroStd = Literal["eps", "zero"]
SingleMember = Literal["zero", "keep", "error"]

TokenEstimator = Literal["reinforce", "rebn"]
"""The critic-free algorithms on per-turn discounted returns ``G_t``: the estimators
`token_advantages` also computes from token tensors alone."""
GroupAlgorithm = Literal["grpo", "dr_grpo", "rloo"]
"""The critic-free algorithms that compare the scores of a group of episodes."""
CriticFreeAlgorithm = Literal[TokenEstimator, GroupAlgorithm]
"""The critic-free algorithms every trainer adapter maps onto its own (the parity suite's)."""
StepAlgorithm = Literal["gigpo", "tree"]
"""The critic-free algorithms that compare turns, not only episodes: GiGPO's anchor-state
groups (`gigpo`) and the nodes of a tree of forked episodes (`tree_advantages`). Besides
group ids they need per-turn ids, which `episode_advantages` reads from the episodes."""
AdvantageAlgorithm = Literal[CriticFreeAlgorithm, StepAlgorithm]
"""Every algorithm `turn_advantages` computes: every algorithm name that needs no critic."""

TOKEN_ESTIMATORS: tuple[TokenEstimator, ...] = get_args(TokenEstimator)
GROUP_ALGORITHMS: tuple[GroupAlgorithm, ...] = get_args(GroupAlgorithm)
CRITIC_FREE_ALGORITHMS: tuple[CriticFreeAlgorithm, ...] = get_args(CriticFreeAlgorithm)
STEP_ALGORITHMS: tuple[StepAlgorithm, ...] = get_args(StepAlgorithm)
ADVANTAGE_ALGORITHMS: tuple[AdvantageAlgorithm, ...] = (*CRITIC_FREE_ALGORITHMS, *STEP_ALGORITHMS)

_STD_KINDS: tuple[StdKind, ...] = get_args(StdKind)
_EPS_PLACEMENTS: tuple[EpsPlacement, ...] = get_args(EpsPlacement)
_ZERO_STD: tuple[ZeroStd, ...] = get_args(ZeroStd)
_SINGLE_MEMBER: tuple[SingleMember, ...] = get_args(SingleMember)


# --------------------------------------------------------------------------------------------
# Building the turn layout


def turn_rewards(episodes: Sequence[Episode]) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Per-turn rewards of `episodes`, right-padded to the longest episode.

    Returns:
        ``(rewards, mask)``: ``rewards: [B, T]`` float64 with ``rewards[b, t]`` the reward of
        turn ``t`` of ``episodes[b]`` and 0 at padding; ``mask: [B, T]`` bool, True on real
        turns (a prefix of each row). ``T`` is the longest episode's turn count (0 when every
        episode is empty). An infra-error episode (``outcome == "infra_error"``,
        `xpgym.core.errors`) counts as empty: reward 0 and mask False on all its turns, so
        every function here leaves it out of its statistics and gives it 0.
    """
    lengths = np.fromiter(
        (0 if ep.infra_error is not None else len(ep.turns) for ep in episodes),
        dtype=np.int64,
        count=len(episodes),
    )
    horizon = max((len(ep.turns) for ep in episodes), default=0)
    mask = np.arange(horizon) < lengths[:, None]
    flat = np.fromiter(
        (turn.reward for ep in episodes if ep.infra_error is None for turn in ep.turns),
        dtype=np.float64,
        count=int(lengths.sum()),
    )
    rewards = np.zeros((len(episodes), horizon), dtype=np.float64)
    rewards[mask] = flat  # row-major order of the mask is episode order, then turn order
    return rewards, mask


def episode_terminated(episodes: Sequence[Episode]) -> NDArray[np.bool_]:
    """``[B]`` bool: whether each episode's last turn has ``terminated`` set.

    False for truncated, still-running and empty episodes: the ones `turn_gae` bootstraps
    from a value after their last turn.
    """
    return np.fromiter(
        (bool(ep.turns) and bool(ep.turns[-1].terminated) for ep in episodes),
        dtype=bool,
        count=len(episodes),
    )


def episode_scores(rewards: ArrayLike, mask: ArrayLike) -> NDArray[np.float64]:
    """Undiscounted return of each episode: ``score[b] = sum_t mask[b, t] * rewards[b, t]``.

    Args:
        rewards: ``[B, T]`` per-turn rewards (finite on valid turns).
        mask: ``[B, T]`` bool, True on real turns, a prefix of each row.

    Returns:
        ``[B]`` float64 (0 for an episode with no turns). Equals `Episode.total_reward`.
    """
    r, _ = _turn_inputs(rewards, mask, name="rewards")
    return r.sum(axis=1)


# --------------------------------------------------------------------------------------------
# REINFORCE returns and ReBN


def discounted_returns(rewards: ArrayLike, mask: ArrayLike, gamma: float) -> NDArray[np.float64]:
    """REINFORCE returns over turns: ``G_t = r_t + gamma * G_{t+1}``, ``G_T = 0``.

    ``G_t = sum_{k >= t} gamma**(k - t) * r_k`` over the episode's own turns; the discount
    is per turn, not per token. No bootstrap: a truncated episode's return is the sum of the
    rewards it received (this is what GEM/Oat and ROLL ``step_reinforce`` use).

    Args:
        rewards: ``[B, T]`` dense per-turn rewards (finite on valid turns).
        mask: ``[B, T]`` bool, True on real turns, a prefix of each row.
        gamma: Discount, ``0 <= gamma <= 1`` (0: ``G_t = r_t``; 1: reward-to-go).

    Returns:
        ``[B, T]`` float64 returns, 0 where ``mask`` is False.
    """
    _check_unit_interval("gamma", gamma)
    r, _ = _turn_inputs(rewards, mask, name="rewards")
    out = np.zeros_like(r)
    running = np.zeros(r.shape[0])
    # A loop over turns, vectorised over episodes. Padding is at the right and r is 0 there,
    # so `running` is still exactly 0 when an episode's last real turn is reached.
    for t in range(r.shape[1] - 1, -1, -1):
        running = r[:, t] + gamma * running
        out[:, t] = running
    return out


def whiten(
    values: ArrayLike,
    mask: ArrayLike | None = None,
    *,
    weights: ArrayLike | None = None,
    std: StdKind = "unbiased",
    eps: float = 1e-8,
    eps_placement: EpsPlacement = "var",
    zero_std: ZeroStd = "eps",
    zero_std_tol: float = 0.0,
) -> NDArray[np.float64]:
    """Normalise `values` to mean 0 and unit std over the entries where `mask` is True.

    ``out = (x - mu) / D`` with ``mu = sum(w * x) / sum(w)`` and ``D`` as set by `std` and
    `eps_placement` (module docstring), both statistics taken over the masked entries only;
    0 where `mask` is False. The defaults are verl's, ROLL's and Oat's ``masked_whiten``:
    unbiased variance, ``(x - mu) / sqrt(var + 1e-8)``. With ``weights`` = token counts,
    ``whiten(x, m, weights=n)`` equals whitening ``x`` repeated ``n`` times, i.e. the
    token-weighted statistics of a trainer that broadcasts ``x`` over each turn's tokens.

    Args:
        values: Any shape ``S`` (finite where `mask` is True).
        mask: Shape ``S`` bool, or None for all entries. No prefix requirement here.
        weights: Shape ``S`` frequency weights (finite, >= 0 where `mask` is True), or None
            for 1 each. ``std="unbiased"`` needs ``sum(w) > 1`` unless all values are equal.
        std: ``"unbiased"`` (Bessel) or ``"population"``.
        eps: ``>= 0``, placed as `eps_placement` says.
        eps_placement: ``"var"``, ``"std"`` or ``"clamp"`` (module docstring).
        zero_std: ``"eps"`` or ``"zero"`` (module docstring).
        zero_std_tol: Std at or below which ``zero_std="zero"`` outputs 0.

    Returns:
        Shape ``S`` float64.

    Raises:
        ValueError: no masked entry, mismatched shapes, non-finite inputs, bad options.
    """
    x = _as_float_array("values", values)
    valid = np.ones(x.shape, dtype=bool) if mask is None else _as_bool_array("mask", mask)
    _check_same_shape(("values", x), ("mask", valid))
    w = None
    if weights is not None:
        w = _as_float_array("weights", weights)
        _check_same_shape(("values", x), ("weights", w))
    _check_finite("values", x, valid)
    if not valid.any():
        raise ValueError("whiten needs at least one entry where mask is True; got none")
    sel = x[valid]
    w_sel = None if w is None else _check_weights(w, valid)
    out = np.zeros_like(x)
    out[valid] = _standardize(
        sel,
        np.zeros(sel.size, dtype=np.intp),
        1,
        w_sel,
        std=std,
        eps=eps,
        eps_placement=eps_placement,
        zero_std=zero_std,
        zero_std_tol=zero_std_tol,
        what="the masked entries",
    )
    return out


def rebn(
    returns: ArrayLike,
    mask: ArrayLike,
    *,
    std: StdKind = "population",
    eps: float = 1e-9,
    eps_placement: EpsPlacement = "std",
    weights: ArrayLike | None = None,
    zero_std: ZeroStd = "eps",
    zero_std_tol: float = 0.0,
) -> NDArray[np.float64]:
    """Return Batch Normalization (GEM paper, Algorithm 1): one statistic over every turn.

    ``A[b, t] = (G[b, t] - mean(G)) / (std(G) + eps)`` where ``mean`` and ``std`` run over
    all valid turns of all episodes in the batch (not per episode, not per group). The
    defaults are GEM's Oat recipe: population std, ``eps = 1e-9`` added to the std. For the
    other trainers' conventions see the module docstring; ``weights = n_tok`` (each turn's
    token count) gives the token-weighted statistics of trainers that normalise after
    broadcasting the return over the turn's tokens. A batch with one valid turn (or all
    returns equal) gives 0.

    Args:
        returns: ``[B, T]`` per-turn returns, e.g. `discounted_returns` (finite on valid turns).
        mask: ``[B, T]`` bool, True on real turns, a prefix of each row.
        std: ``"population"`` (GEM/Oat) or ``"unbiased"`` (verl example, ROLL).
        eps: ``>= 0``; 1e-9 (GEM/Oat), 1e-6 (ROLL).
        eps_placement: ``"std"`` (GEM/Oat, ROLL), ``"var"`` or ``"clamp"``.
        weights: ``[B, T]`` per-turn weights (token counts), or None for 1 per turn.
        zero_std: ``"eps"`` (GEM/Oat) or ``"zero"`` (ROLL, with ``zero_std_tol=1e-6``).
        zero_std_tol: Std at or below which ``zero_std="zero"`` outputs 0.

    Returns:
        ``[B, T]`` float64 advantages, 0 where ``mask`` is False.
    """
    g, valid = _turn_inputs(returns, mask, name="returns")
    if weights is not None:
        _check_same_shape(("returns", g), ("weights", weights))
    if not valid.any():
        raise ValueError("rebn needs at least one valid turn; mask is all False")
    return whiten(
        g,
        valid,
        weights=weights,
        std=std,
        eps=eps,
        eps_placement=eps_placement,
        zero_std=zero_std,
        zero_std_tol=zero_std_tol,
    )


# --------------------------------------------------------------------------------------------
# Group baselines: GRPO, Dr.GRPO, RLOO


def grpo(
    scores: ArrayLike,
    group_ids: ArrayLike | Sequence[Hashable],
    *,
    std: StdKind = "unbiased",
    eps: float = 1e-6,
    eps_placement: EpsPlacement = "std",
    zero_std: ZeroStd = "eps",
    zero_std_tol: float = 0.0,
    single_member: SingleMember = "zero",
) -> NDArray[np.float64]:
    """GRPO: each score normalised within its group of episodes from the same start state.

    ``A_i = (s_i - mean_g) / (std_g + eps)`` with ``mean_g`` and ``std_g`` over the scores
    of episode ``i``'s group ``g`` (all members weigh the same). The defaults are verl's:
    unbiased std, ``eps = 1e-6`` added to the std. Other conventions: module docstring.

    Groups of one member (their std is undefined for ``std="unbiased"``):
    ``single_member="zero"``: ``A = 0`` (no baseline information; also ROLL);
    ``"keep"``: mean taken as 0 and variance as 1, so ``A = s / (1 + eps)`` with
    ``eps_placement="std"`` (verl); ``"error"``: raise ``ValueError`` (OpenRLHF and Oat
    return NaN there).

    Args:
        scores: ``[N]`` episode scores (finite), e.g. `episode_scores`.
        group_ids: ``[N]`` group of each episode: ints, strings or any hashables (not None).
            Groups need not be contiguous or of equal size; output order is input order.
        std: ``"unbiased"`` (verl, OpenRLHF, ROLL, RL2, Oat) or ``"population"``.
        eps: ``>= 0``: 1e-6 (verl, ROLL), 1e-9 (OpenRLHF), 1e-8 (Oat), float32 eps (RL2).
        eps_placement: ``"std"`` (all of the above), ``"var"`` or ``"clamp"``.
        zero_std: ``"eps"`` (verl, OpenRLHF, Oat, RL2) or ``"zero"`` (ROLL, tol 1e-6), for
            groups of two or more.
        zero_std_tol: Std at or below which ``zero_std="zero"`` outputs 0.
        single_member: ``"zero"``, ``"keep"`` or ``"error"`` (above).

    Returns:
        ``[N]`` float64 advantages.
    """
    s, inv, n_groups, counts = _group_inputs(scores, group_ids, single_member)
    out = _standardize(
        s,
        inv,
        n_groups,
        None,
        std=std,
        eps=eps,
        eps_placement=eps_placement,
        zero_std=zero_std,
        zero_std_tol=zero_std_tol,
        what="a group",
    )
    single = counts[inv] == 1
    if single_member == "keep":
        out[single] = s[single] / _scale(np.ones(1), eps, eps_placement)
    else:
        out[single] = 0.0
    return out


def dr_grpo(
    scores: ArrayLike,
    group_ids: ArrayLike | Sequence[Hashable],
    *,
    single_member: SingleMember = "zero",
) -> NDArray[np.float64]:
    """Dr.GRPO: GRPO without the std division, ``A_i = s_i - mean_g``.

    Reproduces verl ``grpo`` with ``norm_adv_by_std_in_grpo=False``, OpenRLHF ``dr_grpo`` and
    the group-mean shaping of OpenRLHF ``reinforce_baseline``, Oat ``drgrpo``.

    Args:
        scores: ``[N]`` episode scores (finite).
        group_ids: ``[N]`` group of each episode (hashables, not None).
        single_member: ``"zero"``: ``A = 0`` (the group mean is the score itself; OpenRLHF
            too); ``"keep"``: mean taken as 0, ``A = s`` (verl); ``"error"``: raise.

    Returns:
        ``[N]`` float64 advantages.
    """
    s, inv, n_groups, counts = _group_inputs(scores, group_ids, single_member)
    out = _deviations(s, inv, n_groups, np.ones_like(s))
    if single_member == "keep":
        single = counts[inv] == 1
        out[single] = s[single]
    return out


def rloo(
    scores: ArrayLike,
    group_ids: ArrayLike | Sequence[Hashable],
    *,
    single_member: SingleMember = "zero",
) -> NDArray[np.float64]:
    """RLOO: leave-one-out baseline, ``A_i = s_i - sum_{j in g, j != i} s_j / (n_g - 1)``.

    Equals ``n_g / (n_g - 1) * (s_i - mean_g)`` (verl's form). Reproduces verl and OpenRLHF
    ``rloo``. A group of one member has no other member to form a baseline from:
    ``single_member="zero"``: ``A = 0``; ``"keep"``: baseline 0, ``A = s`` (verl);
    ``"error"``: raise (OpenRLHF divides by ``n - 1 = 0``).

    Args:
        scores: ``[N]`` episode scores (finite).
        group_ids: ``[N]`` group of each episode (hashables, not None).
        single_member: ``"zero"``, ``"keep"`` or ``"error"`` (above).

    Returns:
        ``[N]`` float64 advantages.
    """
    s, inv, n_groups, counts = _group_inputs(scores, group_ids, single_member)
    sums = _group_sum(inv, s, n_groups)
    n = counts[inv]
    multi = n > 1
    out = np.zeros_like(s)
    out[multi] = s[multi] - (sums[inv][multi] - s[multi]) / (n[multi] - 1)
    out[_constant_members(s, inv, n_groups)] = 0.0
    if single_member == "keep":
        out[~multi] = s[~multi]
    return out


def infra_filled_scores(episodes: Sequence[Episode]) -> NDArray[np.float64]:
    """``[N]`` episode scores for trainers whose groups are fixed blocks of samples.

    OpenRLHF, TRL and RL2 group ``n`` consecutive samples and cannot leave one out. There an
    infra-error episode (`xpgym.core.errors`) gets the mean score of the healthy members of
    its group (``Episode.group_id``; 0.0 when it has none), every other episode its total
    reward (`filled_scores`). With ``m`` healthy members of mean ``mu`` and squared
    deviations ``S``, the group's mean stays ``mu`` (Dr.GRPO and mean baselines are exactly
    those of the healthy members) and its deviations stay ``S``, so GRPO's std over the
    ``m + k`` samples (``k`` failed) is ``sqrt(S / (m + k - 1))`` unbiased (``sqrt(S / (m +
    k))`` population) instead of the healthy ``sqrt(S / (m - 1))``: each healthy advantage is
    the exact one times ``sqrt((m + k - 1) / (m - 1))`` (``sqrt((m + k) / m)`` population),
    eps aside; RLOO's is the exact one times ``(m + k) (m - 1) / (m (m + k - 1))``. The
    failed member itself has loss mask 0 (`xpgym.training.layouts`).
    """
    scores = np.array([ep.total_reward for ep in episodes], dtype=np.float64)
    failed = np.array([ep.infra_error is not None for ep in episodes], dtype=bool)
    groups = [ep.group_id for ep in episodes]
    return filled_scores(scores, failed, groups)


def filled_scores(
    scores: ArrayLike, failed: ArrayLike, group_ids: Sequence[Hashable | None]
) -> NDArray[np.float64]:
    """``[N]`` `scores` with each `failed` one replaced by the mean score of the healthy
    members of its group (0.0 when it has none, or when its group id is None); see
    `infra_filled_scores` for what this keeps of the group statistics.

    Args:
        scores: ``[N]`` sample scores.
        failed: ``[N]`` bool, the samples that failed for infrastructure reasons.
        group_ids: ``[N]`` group of each sample (None: a group of its own).
    """
    out = np.array(scores, dtype=np.float64)
    bad = np.asarray(failed, dtype=bool)
    if not bad.any():
        return out
    healthy: dict[Hashable, list[float]] = {}
    for score, group, is_bad in zip(out, group_ids, bad, strict=True):
        if not is_bad and group is not None:
            healthy.setdefault(group, []).append(float(score))
    for i in np.flatnonzero(bad).tolist():
        members = healthy.get(group_ids[i], []) if group_ids[i] is not None else []
        out[i] = float(np.mean(members)) if members else 0.0
    return out


# --------------------------------------------------------------------------------------------
# Step-level groups (GiGPO) and trees of forked episodes


def gigpo(
    rewards: ArrayLike,
    mask: ArrayLike,
    group_ids: ArrayLike | Sequence[Hashable],
    state_keys: Sequence[Sequence[Hashable]],
    *,
    gamma: float,
    omega: float = 1.0,
    normalize: bool = True,
    std: StdKind = "unbiased",
    eps: float = 1e-6,
    single_member: SingleMember = "zero",
) -> NDArray[np.float64]:
    """GiGPO (Feng et al. 2025, arXiv 2505.10978): episode-level plus step-level groups.

    ``A[b, t] = A^E(b) + omega * A^S(b, t)``:

    - episode level, as GRPO: ``A^E(b) = (R_b - mean_g R) / F_norm`` over the episodes of
      ``b``'s group ``g`` (``group_ids``), ``R_b = sum_t r[b, t]``;
    - step level: the valid turns of one episode group whose states are identical (equal
      ``state_keys``) form an anchor-state group ``h``; with each turn's discounted return
      ``R[b, t] = sum_k gamma**k r[b, t + k]`` (`discounted_returns`),
      ``A^S(b, t) = (R[b, t] - mean_h R) / F_norm`` over ``h``;
    - ``F_norm`` is the group's std (``normalize=True``; `grpo` with `std`, `eps`) or 1 (the
      paper's no-std variant, `dr_grpo`). Both levels treat a group of one member by
      `single_member` as `grpo` does (``"zero"``: its deviation from its own mean, 0).

    Args:
        rewards: ``[B, T]`` per-turn rewards, finite on valid turns.
        mask: ``[B, T]`` bool, True on real turns (a prefix of each row).
        group_ids: ``[B]`` episode group of each episode (start state), not None.
        state_keys: Per episode, at least one hashable key per valid turn: the state the
            turn acted on (`xpgym.core.trajectory.turn_state_keys`); keys are compared
            within an episode group.
        gamma: Discount of the step returns, ``0 <= gamma <= 1``.
        omega: Weight of the step-level advantage (1 in the paper).
        normalize, std, eps, single_member: Above.

    Returns:
        ``[B, T]`` float64 advantages, 0 where ``mask`` is False.
    """
    r, m = _turn_inputs(rewards, mask, name="rewards")
    if len(state_keys) != r.shape[0]:
        raise ValueError(f"state_keys has {len(state_keys)} rows for {r.shape[0]} episodes")
    episode_level = _normalized(episode_scores(r, m), group_ids, normalize, std, eps, single_member)
    rows, cols = np.nonzero(m)
    groups = list(_factorize(group_ids, r.shape[0])[0])
    anchors = []
    for b, t in zip(rows.tolist(), cols.tolist(), strict=True):
        if len(state_keys[b]) <= t:
            raise ValueError(f"state_keys[{b}] has {len(state_keys[b])} keys for turn {t}")
        anchors.append((groups[b], state_keys[b][t]))
    returns = discounted_returns(r, m, gamma)[rows, cols]
    step_level = _normalized(returns, anchors, normalize, std, eps, single_member)
    out = np.zeros_like(r)
    out[rows, cols] = episode_level[rows] + omega * step_level
    return out


def tree_advantages(
    scores: ArrayLike,
    mask: ArrayLike,
    root_ids: ArrayLike | Sequence[Hashable],
    node_ids: Sequence[Sequence[Hashable]],
) -> NDArray[np.float64]:
    """Advantages on a tree of episodes that share prefixes (forked branches,
    `xpgym.core.trajectory.tree_nodes`).

    Each episode is a path from its tree's root (``root_ids``) through one node per turn
    (``node_ids[b][t]``: the node the episode reaches after turn ``t``; episodes that share
    their first turns share those nodes). A node's value is the mean score of the episodes
    through it, the leaves of its subtree: ``V(n) = mean_{b passes n} s_b``, and
    ``V(root)`` the mean over the whole tree. A turn's advantage is the value it gained:
    ``A[b, t] = V(node_ids[b][t]) - V(node_ids[b][t - 1])``, with the root before turn 0.
    Over a path these sum to ``s_b - V(root)`` (GRPO's mean baseline, Dr.GRPO); a turn that
    every episode through its parent node shares gets 0.

    Args:
        scores: ``[B]`` episode scores (finite), e.g. `episode_scores`.
        mask: ``[B, T]`` bool, True on real turns (a prefix of each row).
        root_ids: ``[B]`` the tree (root) of each episode, not None.
        node_ids: Per episode, at least one hashable node id per valid turn; node ids are
            compared within a tree.

    Returns:
        ``[B, T]`` float64 advantages, 0 where ``mask`` is False.
    """
    s = _as_float_array("scores", scores)
    m = _as_bool_array("mask", mask)
    if m.ndim != 2 or s.shape != (m.shape[0],):
        raise ValueError(f"scores must be [B] and mask [B, T]; got {s.shape} and {m.shape}")
    _check_prefix(m)
    _check_finite("scores", s, np.ones(s.shape, dtype=bool))
    if len(node_ids) != s.shape[0]:
        raise ValueError(f"node_ids has {len(node_ids)} rows for {s.shape[0]} episodes")
    roots = _factorize(root_ids, s.shape[0])[0].tolist()
    lengths = m.sum(axis=1).tolist()
    paths: list[list[Hashable]] = []
    for b, length in enumerate(lengths):
        if len(node_ids[b]) < length:
            raise ValueError(f"node_ids[{b}] has {len(node_ids[b])} ids for {length} turns")
        paths.append([("root", roots[b])] + [("node", roots[b], n) for n in node_ids[b][:length]])
    totals: dict[Hashable, float] = {}
    counts: dict[Hashable, int] = {}
    for b, path in enumerate(paths):
        for node in path:
            totals[node] = totals.get(node, 0.0) + float(s[b])
            counts[node] = counts.get(node, 0) + 1
    out = np.zeros(m.shape, dtype=np.float64)
    for b, path in enumerate(paths):
        values = [totals[node] / counts[node] for node in path]
        out[b, : len(path) - 1] = np.diff(values)
    return out


def _normalized(
    values: NDArray[np.float64],
    group_ids: ArrayLike | Sequence[Hashable],
    normalize: bool,
    std: StdKind,
    eps: float,
    single_member: SingleMember,
) -> NDArray[np.float64]:
    """``(x - mean_g) / F_norm``: `grpo` (F_norm = std) or `dr_grpo` (F_norm = 1)."""
    if normalize:
        return grpo(values, group_ids, std=std, eps=eps, single_member=single_member)
    return dr_grpo(values, group_ids, single_member=single_member)


# --------------------------------------------------------------------------------------------
# One dispatch by algorithm name


def turn_advantages(
    algorithm: AdvantageAlgorithm,
    rewards: ArrayLike,
    mask: ArrayLike,
    *,
    gamma: float = 1.0,
    group_ids: ArrayLike | Sequence[Hashable] | None = None,
    state_keys: Sequence[Sequence[Hashable]] | None = None,
    root_ids: ArrayLike | Sequence[Hashable] | None = None,
    node_ids: Sequence[Sequence[Hashable]] | None = None,
    **options: Any,
) -> NDArray[np.float64]:
    """Per-turn advantages of a critic-free algorithm, by name.

    With ``G = discounted_returns(rewards, mask, gamma)`` and
    ``s = episode_scores(rewards, mask)``::

        reinforce   A_t = G_t                                      (no options)
        rebn        A = rebn(G, mask, **options)                   whole-batch statistics
        grpo        A_t = grpo(s, group_ids, **options)[b]         every turn of episode b
        dr_grpo     A_t = dr_grpo(s, group_ids, **options)[b]     every turn of episode b
        rloo        A_t = rloo(s, group_ids, **options)[b]        every turn of episode b
        gigpo       A = gigpo(rewards, mask, group_ids, state_keys, gamma=gamma, **options)
        tree        A = tree_advantages(s, mask, root_ids, node_ids)     (no options)

    The group algorithms use the undiscounted score (`gamma` is not read) and give each
    episode's one advantage to all of its turns; gigpo discounts its step returns by
    `gamma`. `options` are the estimator's keyword arguments with their defaults otherwise
    (the std conventions and eps of `rebn`, `grpo`, `gigpo`; ``single_member`` of the group
    estimators; gigpo's ``omega`` and ``normalize``). PPO's advantages need a value per
    turn: `turn_gae`. `episode_advantages` reads every id from episodes.

    Infrastructure failures: give a failed episode mask False on all its turns (as
    `turn_rewards` does) and, for the group algorithms, gigpo and tree, a group (root) of
    its own (as `xpgym.core.trajectory.training_group_ids` does); it then gets 0 and the
    other episodes' advantages are those computed without it.

    Args:
        algorithm: One of `ADVANTAGE_ALGORITHMS`.
        rewards: ``[B, T]`` per-turn rewards, right-padded (finite on valid turns).
        mask: ``[B, T]`` bool, True on real turns, a prefix of each row.
        gamma: Discount per turn, in ``[0, 1]`` (reinforce, rebn, gigpo).
        group_ids: ``[B]`` group of each episode (hashables, not None); required by the
            group algorithms and gigpo, ignored by the others.
        state_keys: gigpo's per-turn anchor-state keys
            (`xpgym.core.trajectory.turn_state_keys`).
        root_ids, node_ids: tree's roots and per-turn nodes
            (`xpgym.core.trajectory.tree_nodes`).
        **options: Keyword arguments for the estimator (`rebn`, `grpo`, `dr_grpo`, `rloo`,
            `gigpo`).

    Returns:
        ``[B, T]`` float64 advantages, 0 where ``mask`` is False.

    Raises:
        ValueError: an unknown algorithm (the message lists the valid ones), options for
            reinforce or tree, missing ids for the algorithm, or invalid inputs.
    """
    if algorithm not in ADVANTAGE_ALGORITHMS:
        raise ValueError(
            f"unknown critic-free algorithm {algorithm!r}; choose one of "
            f"{ADVANTAGE_ALGORITHMS} (PPO's advantages need a value per turn: turn_gae)"
        )
    r, valid = _turn_inputs(rewards, mask, name="rewards")
    if algorithm == "tree":
        if root_ids is None or node_ids is None:
            raise ValueError(
                "tree needs each episode's root and per-turn nodes; pass root_ids and "
                "node_ids (tree_nodes of forked episodes)"
            )
        if options:
            raise ValueError(
                f"tree takes no options (A = V(node) - V(parent)); got {sorted(options)}"
            )
        return tree_advantages(episode_scores(r, valid), valid, root_ids, node_ids)
    if algorithm in GROUP_ALGORITHMS or algorithm == "gigpo":
        if group_ids is None:
            raise ValueError(
                f"algorithm {algorithm!r} compares episodes from the same start state; "
                "pass group_ids ([B], e.g. each Episode.group_id)"
            )
        if algorithm == "gigpo":
            if state_keys is None:
                raise ValueError(
                    "gigpo groups turns by the state they acted on; pass state_keys (per "
                    "episode, one key per turn: turn_state_keys)"
                )
            return gigpo(r, valid, group_ids, state_keys, gamma=gamma, **options)
        estimator = {"grpo": grpo, "dr_grpo": dr_grpo, "rloo": rloo}[algorithm]
        per_episode = estimator(episode_scores(r, valid), group_ids, **options)  # A[b]
        return np.where(valid, per_episode[:, None], 0.0)
    returns = discounted_returns(r, valid, gamma)  # G_t = r_t + gamma G_{t+1}
    if algorithm == "rebn":  # A_t = (G_t - mean G) / (std G + eps), all turns of the batch
        return rebn(returns, valid, **options)
    if options:
        raise ValueError(f"reinforce takes no options (A_t = G_t); got {sorted(options)}")
    return returns


def episode_advantages(
    algorithm: AdvantageAlgorithm,
    episodes: Sequence[Episode],
    *,
    gamma: float = 1.0,
    **options: Any,
) -> NDArray[np.float64]:
    """``[N, T]`` `turn_advantages` of `episodes`, with every id read from them.

    Rewards and mask are `turn_rewards`; group ids `xpgym.core.trajectory.training_group_ids`
    (an infra-error episode is a group of its own); gigpo's state keys
    `xpgym.core.trajectory.turn_state_keys`; tree's roots and nodes
    `xpgym.core.trajectory.tree_nodes`, an infra-error episode being a tree of its own.
    Trainers and adapters that hold the episodes call this (the reference trainer, the verl
    and TRL converters), so each algorithm reads its ids in one place.

    Raises:
        ValueError: as `turn_advantages`; for tree, as `tree_nodes` (episodes without
            ``episode_id``, a branch without its parent).
    """
    rewards, mask = turn_rewards(episodes)
    group_ids = training_group_ids(episodes)
    ids: dict[str, Any] = {}
    if algorithm == "gigpo":
        ids["state_keys"] = turn_state_keys(episodes)
    elif algorithm == "tree":
        roots, ids["node_ids"] = tree_nodes(episodes)
        ids["root_ids"] = [
            group if episode.infra_error is not None else root
            for episode, group, root in zip(episodes, group_ids, roots, strict=True)
        ]
    return turn_advantages(
        algorithm, rewards, mask, gamma=gamma, group_ids=group_ids, **ids, **options
    )


# --------------------------------------------------------------------------------------------
# Turn-level GAE


def turn_gae(
    rewards: ArrayLike,
    values: ArrayLike,
    mask: ArrayLike,
    *,
    gamma: float,
    lam: float,
    last_values: ArrayLike | None = None,
    terminated: ArrayLike | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Generalised advantage estimation over turns, with one value estimate per turn.

    For episode ``b`` with ``T_b`` turns::

        V_{T_b}  = 0 if terminated[b] else last_values[b]      (bootstrap)
        delta_t  = r_t + gamma * V_{t+1} - V_t
        A_t      = delta_t + gamma * lam * A_{t+1},   A_{T_b} = 0
        R_t      = A_t + V_t                           (value target)

    Bootstrap rule: a terminated episode has no future, so it bootstraps from 0; a
    truncated (or unfinished) one bootstraps from ``last_values[b]``, the critic's value of
    the state after its last turn. ``values = 0, lam = 1`` gives `discounted_returns` for
    terminated episodes. Oat's ``PPOMultiTurnLearner`` treats every episode end as
    terminal (``(1 - done)`` masks the next value): reproduce it with ``terminated=None``.

    Args:
        rewards: ``[B, T]`` per-turn rewards (finite on valid turns).
        values: ``[B, T]`` critic value of the state each turn acted in (finite on valid
            turns).
        mask: ``[B, T]`` bool, True on real turns, a prefix of each row.
        gamma: Discount per turn, ``0 <= gamma <= 1``.
        lam: GAE lambda, ``0 <= lam <= 1`` (0: one-step TD error; 1: Monte Carlo).
        last_values: ``[B]`` value after each episode's last turn; required when some
            episode is not terminated, ignored (may be NaN) for terminated ones.
        terminated: ``[B]`` bool, e.g. `episode_terminated`; None means all terminated
            (then `last_values` must be None too).

    Returns:
        ``(advantages, returns)``, both ``[B, T]`` float64, 0 where ``mask`` is False.
    """
    _check_unit_interval("gamma", gamma)
    _check_unit_interval("lam", lam)
    r, valid = _turn_inputs(rewards, mask, name="rewards")
    v = _as_float_array("values", values)
    _check_same_shape(("rewards", r), ("values", v))
    _check_finite("values", v, valid)
    v = np.where(valid, v, 0.0)
    n_episodes = r.shape[0]
    if terminated is None:
        if last_values is not None:
            raise ValueError(
                "last_values was given but terminated was not; pass terminated (e.g. "
                "episode_terminated(episodes)) to say which episodes bootstrap from it"
            )
        bootstrap = np.zeros(n_episodes)
    else:
        term = _as_bool_array("terminated", terminated)
        _check_per_episode("terminated", term, n_episodes)
        if last_values is None:
            if not term.all():
                b = int(np.flatnonzero(~term)[0])
                raise ValueError(
                    f"episode {b} is not terminated, so it bootstraps from last_values[{b}]; "
                    "pass last_values ([B] values after the last turn)"
                )
            bootstrap = np.zeros(n_episodes)
        else:
            last = _as_float_array("last_values", last_values)
            _check_per_episode("last_values", last, n_episodes)
            _check_finite("last_values", last, ~term)
            bootstrap = np.where(term, 0.0, last)

    advantages = np.zeros_like(r)
    next_value = bootstrap
    next_adv = np.zeros(n_episodes)
    # A loop over turns, vectorised over episodes; padded turns leave the carry untouched,
    # so an episode's last real turn sees its bootstrap value and A_{T_b} = 0.
    for t in range(r.shape[1] - 1, -1, -1):
        here = valid[:, t]
        delta = r[:, t] + gamma * next_value - v[:, t]
        adv = delta + gamma * lam * next_adv
        advantages[:, t] = np.where(here, adv, 0.0)
        next_value = np.where(here, v[:, t], next_value)
        next_adv = np.where(here, adv, next_adv)
    returns = np.where(valid, advantages + v, 0.0)
    return advantages, returns


# --------------------------------------------------------------------------------------------
# Token broadcast


def broadcast_to_tokens(values: ArrayLike, token_turn_index: ArrayLike) -> NDArray[np.float64]:
    """Copy per-turn (or per-episode) values onto token positions.

    ``out[b, l] = values[b, token_turn_index[b, l]]`` where the index is ``>= 0``, and 0 where
    it is -1 (prompt, env/tool tokens, padding). Per-episode values ``[B]`` go to every
    token whose index is ``>= 0``.

    Args:
        values: ``[B, T]`` per-turn values (e.g. advantages), or ``[B]`` per-episode values.
        token_turn_index: ``[B, L]`` int, the turn that wrote each token, -1 for tokens the
            policy did not write. Every index must be in ``[-1, T)``.

    Returns:
        ``[B, L]`` float64.
    """
    vals = _as_float_array("values", values)
    idx = np.asarray(token_turn_index)
    if idx.ndim != 2:
        raise ValueError(f"token_turn_index must be [B, L]; got shape {idx.shape}")
    if idx.size and not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"token_turn_index must hold integers; got dtype {idx.dtype}")
    idx = idx.astype(np.intp, copy=False)
    if vals.ndim == 1:
        if vals.shape[0] != idx.shape[0]:
            raise ValueError(
                f"values has {vals.shape[0]} episodes but token_turn_index has {idx.shape[0]} rows"
            )
        _check_range(idx, None)
        return np.where(idx >= 0, vals[:, None], 0.0)
    if vals.ndim != 2:
        raise ValueError(f"values must be [B, T] or [B]; got shape {vals.shape}")
    if vals.shape[0] != idx.shape[0]:
        raise ValueError(
            f"values has {vals.shape[0]} episodes but token_turn_index has {idx.shape[0]} rows"
        )
    horizon = vals.shape[1]
    _check_range(idx, horizon)
    # Column T of the padded table is 0, and -1 indexes it (numpy's negative indexing).
    table = np.concatenate([vals, np.zeros((vals.shape[0], 1))], axis=1)
    return np.take_along_axis(table, idx, axis=1)


# --------------------------------------------------------------------------------------------
# Rows and token tensors


def row_returns(episodes: Sequence[Episode], rows: RowInfo, gamma: float) -> NDArray[np.float64]:
    """``[B]`` float64: ``G`` of each row's first turn, over the whole episode.

    ``G_t = sum_{k >= t} gamma**(k - t) * r_k`` (`discounted_returns`) at
    ``t = rows.first_turn[b]`` of episode ``rows.episode_index[b]``. For `turn_rows` this is
    the turn's own return; for an episode row, the episode's discounted return. It always
    runs to the episode's end, also for rows that `episode_rows(..., on_mismatch="split")`
    cut out of the middle of an episode.

    Args:
        episodes: The episodes `rows` were built from, in the same order.
        rows: `xpgym.training.layouts` rows of `episodes` (any form: only `RowInfo` fields are
            read).
        gamma: Discount per turn, in ``[0, 1]``.
    """
    rewards, mask = turn_rewards(episodes)
    returns = discounted_returns(rewards, mask, gamma)
    return returns[rows.episode_index, rows.first_turn]


def turn_index_from_mask(response_mask: ArrayLike) -> NDArray[np.int64]:
    """``[B, R]`` int64: the turn of each policy token, numbered per row; -1 elsewhere.

    A turn is a maximal run of 1s in `response_mask`: in both layouts of
    `xpgym.training.layouts` consecutive turns are separated by at least one env token (the
    chat template's end-of-turn and generation-prompt tokens), so the runs are the turns.

    Args:
        response_mask: ``[B, R]`` 0/1 (or bool), 1 on policy tokens.
    """
    mask = np.asarray(response_mask).astype(bool)
    if mask.ndim != 2:
        raise ValueError(f"response_mask must be [B, R]; got shape {mask.shape}")
    previous = np.pad(mask[:, :-1], ((0, 0), (1, 0)), constant_values=False)
    starts = mask & ~previous
    index = np.cumsum(starts, axis=1) - 1
    return np.where(mask, index, -1).astype(np.int64)


def per_turn_sums(
    token_values: ArrayLike, token_turn_index: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Sum per-token values over each turn's tokens.

    Args:
        token_values: ``[B, R]`` numbers (e.g. token-level rewards).
        token_turn_index: ``[B, R]`` int, as `turn_index_from_mask` (-1: not a policy token).

    Returns:
        ``(values [B, T], mask [B, T])``: ``values[b, t]`` is the sum of row ``b``'s
        `token_values` over turn ``t``'s tokens; `mask` is True on each row's turns (a
        prefix). ``T`` is the most turns in a row (0 for no policy token at all).
    """
    vals = np.asarray(token_values, dtype=np.float64)
    idx = np.asarray(token_turn_index, dtype=np.int64)
    if vals.shape != idx.shape or vals.ndim != 2:
        raise ValueError(
            f"token_values and token_turn_index must both be [B, R]; got {vals.shape} and "
            f"{idx.shape}"
        )
    counts = idx.max(axis=1, initial=-1) + 1  # turns per row
    horizon = int(counts.max(initial=0))
    sums = np.zeros((vals.shape[0], horizon), dtype=np.float64)
    rows, cols = np.nonzero(idx >= 0)
    np.add.at(sums, (rows, idx[rows, cols]), vals[rows, cols])
    return sums, np.arange(horizon) < counts[:, None]


def token_advantages(
    token_rewards: ArrayLike,
    response_mask: ArrayLike,
    *,
    estimator: TokenEstimator,
    gamma: float,
    episode_offsets: ArrayLike | None = None,
    **rebn_kwargs: Any,
) -> NDArray[np.float64]:
    """Per-turn REINFORCE or ReBN advantages, from token tensors alone, on the policy tokens.

    Each row is one whole episode (or one turn whose reward is already a return), unless
    `episode_offsets` says that consecutive rows form one episode (RL2 splits an episode
    where its prompts stop extending each other). Turns are the runs of
    `turn_index_from_mask`, in row order; turn ``t``'s reward is the sum of `token_rewards`
    over its tokens (the layouts put it on the turn's last token). Then, exactly as on
    episodes::

        G_t = r_t + gamma * G_{t+1}                       (discounted_returns, per row)
        reinforce: A_t = G_t
        rebn:      A_t = (G_t - mean(G)) / (std(G) + eps)  over all turns of all rows (rebn)

    and ``A_t`` is copied to every token of turn ``t``. So for the rows of `episode_rows`
    with ``token_rewards = rows.token_rewards`` this equals
    ``broadcast_to_tokens(rebn(discounted_returns(*turn_rewards(episodes), gamma)), ...)``;
    for `turn_rows` whose last token holds the turn's return (`row_returns`), each row is a
    single turn and ``A = (G - mean) / (std + eps)`` over rows, GEM's ReBN.

    Args:
        token_rewards: ``[B, R]`` rewards; non-zero only on policy tokens.
        response_mask: ``[B, R]`` 0/1, 1 on policy tokens.
        estimator: ``"reinforce"`` or ``"rebn"``.
        gamma: Discount per turn, in ``[0, 1]``.
        episode_offsets: ``[E + 1]`` row offsets: rows ``episode_offsets[e]`` to
            ``episode_offsets[e + 1] - 1`` are episode ``e`` (RL2's ``cu_seqs``). None: one
            episode per row.
        **rebn_kwargs: Options of `rebn` (``std``, ``eps``, ...); its defaults otherwise.

    Returns:
        ``[B, R]`` float64, 0 off the policy tokens.

    Raises:
        ValueError: unknown estimator, a reward off the policy tokens, shapes disagree, bad
            offsets.
    """
    if estimator not in TOKEN_ESTIMATORS:
        raise ValueError(f"estimator must be one of {TOKEN_ESTIMATORS}, got {estimator!r}")
    if estimator == "reinforce" and rebn_kwargs:
        raise ValueError(f"options {sorted(rebn_kwargs)} are for estimator='rebn'")
    rewards = np.asarray(token_rewards, dtype=np.float64)
    index = turn_index_from_mask(response_mask)
    if rewards.shape != index.shape:
        raise ValueError(
            f"token_rewards has shape {rewards.shape} but response_mask has {index.shape}"
        )
    stray = (index < 0) & (rewards != 0)
    if stray.any():
        b, j = (int(i) for i in np.argwhere(stray)[0])
        raise ValueError(
            f"token_rewards[{b}, {j}] = {rewards[b, j]!r} is on a token the policy did not "
            f"write (response_mask is 0 there); rewards belong on each turn's last policy token"
        )
    per_turn, mask = per_turn_sums(rewards, index)
    if episode_offsets is None:
        advantages = discounted_returns(per_turn, mask, gamma)
        if estimator == "rebn":
            advantages = rebn(advantages, mask, **rebn_kwargs)
        return broadcast_to_tokens(advantages, index)
    # Several rows per episode: lay each episode's turns out in one row, then back.
    offsets = np.asarray(episode_offsets, dtype=np.int64)
    if (
        offsets.ndim != 1
        or offsets[0] != 0
        or offsets[-1] != len(index)
        or (np.diff(offsets) < 1).any()
    ):
        raise ValueError(
            f"episode_offsets must rise from 0 to the number of rows ({len(index)}) in steps "
            f">= 1; got {offsets.tolist()}"
        )
    counts = mask.sum(axis=1)  # turns per row
    episode_of_row = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    first_turn = np.cumsum(counts) - counts  # turns before each row, all rows
    first_turn -= first_turn[offsets[:-1]][episode_of_row]  # ... within its episode
    turns = np.bincount(episode_of_row, weights=counts, minlength=len(offsets) - 1).astype(np.int64)
    ep_rewards = np.zeros((len(offsets) - 1, int(turns.max(initial=0))))
    rows, cols = np.nonzero(mask)
    ep_rewards[episode_of_row[rows], first_turn[rows] + cols] = per_turn[rows, cols]
    ep_mask = np.arange(ep_rewards.shape[1]) < turns[:, None]
    ep_advantages = discounted_returns(ep_rewards, ep_mask, gamma)
    if estimator == "rebn":
        ep_advantages = rebn(ep_advantages, ep_mask, **rebn_kwargs)
    row_advantages = np.zeros(per_turn.shape)
    row_advantages[rows, cols] = ep_advantages[episode_of_row[rows], first_turn[rows] + cols]
    return broadcast_to_tokens(row_advantages, index)


# --------------------------------------------------------------------------------------------
# Shared statistics


def _standardize(
    x: NDArray[np.float64],
    inv: NDArray[np.intp],
    n_groups: int,
    w: NDArray[np.float64] | None,
    *,
    std: str,
    eps: float,
    eps_placement: str,
    zero_std: str,
    zero_std_tol: float,
    what: str,
) -> NDArray[np.float64]:
    """``(x - mu_g) / D_g`` per group ``g = inv[i]``; see the module docstring for ``D``."""
    _check_choice("std", std, _STD_KINDS)
    _check_choice("eps_placement", eps_placement, _EPS_PLACEMENTS)
    _check_choice("zero_std", zero_std, _ZERO_STD)
    _check_nonnegative("eps", eps)
    _check_nonnegative("zero_std_tol", zero_std_tol)
    weights = np.ones_like(x) if w is None else w
    wsum = _group_sum(inv, weights, n_groups)
    dev = _deviations(x, inv, n_groups, weights)
    m2 = _group_sum(inv, weights * dev * dev, n_groups)
    constant = m2 == 0.0
    if std == "population":
        var = m2 / wsum
    else:
        bessel = wsum - 1.0
        bad = (bessel <= 0) & ~constant
        if bad.any():
            raise ValueError(
                f"the unbiased variance of {what} needs a total weight above 1; got "
                f"{float(wsum[bad][0])!r} for values that are not all equal (use std='population' "
                "or token counts as weights)"
            )
        var = np.divide(m2, bessel, out=np.zeros_like(m2), where=~constant)
    scale = _scale(var, eps, eps_placement)
    out = np.divide(dev, scale[inv], out=np.zeros_like(dev), where=scale[inv] > 0)
    if zero_std == "zero":
        flat = constant | (np.sqrt(var) <= zero_std_tol)
        out[flat[inv]] = 0.0
    return out


def _group_sum(
    inv: NDArray[np.intp], values: NDArray[np.float64], n_groups: int
) -> NDArray[np.float64]:
    """``[n_groups]`` float64 sums of `values` per group (float even for empty input)."""
    return np.bincount(inv, weights=values, minlength=n_groups).astype(np.float64, copy=False)


def _scale(var: NDArray[np.float64], eps: float, eps_placement: str) -> NDArray[np.float64]:
    if eps_placement == "std":
        return np.sqrt(var) + eps
    if eps_placement == "var":
        return np.sqrt(var + eps)
    return np.sqrt(np.maximum(var, eps))


def _deviations(
    x: NDArray[np.float64], inv: NDArray[np.intp], n_groups: int, w: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``x - mu_g`` with weighted group means; exactly 0 for members of constant groups."""
    wsum = _group_sum(inv, w, n_groups)
    total = _group_sum(inv, w * x, n_groups)
    mean = np.divide(total, wsum, out=np.zeros_like(total), where=wsum > 0)
    dev = x - mean[inv]
    dev[_constant_members(x, inv, n_groups)] = 0.0
    return dev


def _constant_members(
    x: NDArray[np.float64], inv: NDArray[np.intp], n_groups: int
) -> NDArray[np.bool_]:
    """``[N]`` bool: member of a group whose values are all equal."""
    lo = np.full(n_groups, np.inf)
    hi = np.full(n_groups, -np.inf)
    np.minimum.at(lo, inv, x)
    np.maximum.at(hi, inv, x)
    return (lo == hi)[inv]


# --------------------------------------------------------------------------------------------
# Input checks


def _group_inputs(
    scores: ArrayLike, group_ids: ArrayLike | Sequence[Hashable], single_member: str
) -> tuple[NDArray[np.float64], NDArray[np.intp], int, NDArray[np.int64]]:
    _check_choice("single_member", single_member, _SINGLE_MEMBER)
    s = _as_float_array("scores", scores)
    if s.ndim != 1:
        raise ValueError(f"scores must be [N]; got shape {s.shape}")
    _check_finite("scores", s, np.ones(s.shape, dtype=bool))
    inv, uniques = _factorize(group_ids, s.shape[0])
    n_groups = len(uniques)
    counts = np.bincount(inv, minlength=n_groups)
    if single_member == "error" and (counts == 1).any():
        lone = [_plain(uniques[g]) for g in np.flatnonzero(counts == 1)[:5]]
        raise ValueError(
            f"groups {lone!r} have a single member, whose group statistics are undefined; "
            "sample several episodes per start state or choose single_member='zero' or 'keep'"
        )
    return s, inv, n_groups, counts


def _factorize(group_ids: ArrayLike | Sequence[Hashable], n: int) -> tuple[NDArray[np.intp], list]:
    """Integer codes ``[N]`` for `group_ids` and the distinct ids (codes index them).

    A list is read as an object array so that ``1`` and ``"1"`` stay different ids and
    tuples stay single ids (``np.asarray`` would turn them into strings / a 2-D array).
    """
    if isinstance(group_ids, np.ndarray) and group_ids.ndim == 1:
        ids = group_ids
    else:
        # ArrayLike admits scalars, which are not iterable; a group id list is (documented)
        items = list(group_ids)  # type: ignore[arg-type]
        ids = np.fromiter(items, dtype=object, count=len(items))
    if ids.shape[0] != n:
        raise ValueError(f"group_ids has {ids.shape[0]} entries for {n} scores")
    if ids.dtype == object:
        missing = np.flatnonzero(ids == None)  # noqa: E711 (elementwise comparison)
        if missing.size:
            raise ValueError(
                f"group_ids[{missing[0]}] is None; an episode without a group has no group "
                "baseline: give it an id of its own"
            )
    if ids.dtype != object:
        uniques, inv = np.unique(ids, return_inverse=True)
        return inv.astype(np.intp).reshape(-1), list(uniques)
    # Arbitrary hashables: number them by first appearance (one dict pass; sorting Python
    # objects would be slower and fails for ids of mixed types).
    codes: dict[Hashable, int] = {}
    inv = np.fromiter((codes.setdefault(g, len(codes)) for g in ids), dtype=np.intp, count=n)
    return inv, list(codes)


def _turn_inputs(
    values: ArrayLike, mask: ArrayLike, *, name: str
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Validated ``[B, T]`` float64 values (0 at padding) and prefix mask."""
    x = _as_float_array(name, values)
    valid = _as_bool_array("mask", mask)
    if x.ndim != 2:
        raise ValueError(f"{name} must be [B, T]; got shape {x.shape}")
    _check_same_shape((name, x), ("mask", valid))
    _check_prefix(valid)
    _check_finite(name, x, valid)
    return np.where(valid, x, 0.0), valid


def _as_float_array(name: str, a: ArrayLike) -> NDArray[np.float64]:
    try:
        return np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be an array of numbers: {err}") from None


def _as_bool_array(name: str, a: ArrayLike) -> NDArray[np.bool_]:
    arr = np.asarray(a)
    if arr.dtype == bool:
        return arr
    if arr.size and not (np.issubdtype(arr.dtype, np.number) and np.isin(arr, (0, 1)).all()):
        raise ValueError(f"{name} must be bool (or 0/1); got dtype {arr.dtype}")
    return arr.astype(bool)


def _check_same_shape(a: tuple[str, ArrayLike], b: tuple[str, ArrayLike]) -> None:
    shape_a, shape_b = np.shape(a[1]), np.shape(b[1])
    if shape_a != shape_b:
        raise ValueError(f"{a[0]} has shape {shape_a} but {b[0]} has shape {shape_b}")


def _check_per_episode(name: str, a: np.ndarray, n_episodes: int) -> None:
    if a.shape != (n_episodes,):
        raise ValueError(f"{name} must be [B] = ({n_episodes},); got shape {a.shape}")


def _check_prefix(mask: NDArray[np.bool_]) -> None:
    gaps = mask[:, 1:] & ~mask[:, :-1]
    if gaps.any():
        b, t = np.argwhere(gaps)[0]
        raise ValueError(
            f"mask row {b} is not a prefix: turn {t + 1} is valid after padding at turn {t}; "
            "turns must be left-aligned with padding on the right"
        )


def _check_finite(name: str, x: NDArray[np.float64], where: NDArray[np.bool_]) -> None:
    bad = where & ~np.isfinite(x)
    if bad.any():
        pos = tuple(int(i) for i in np.argwhere(bad)[0])
        at = ", ".join(map(str, pos))
        raise ValueError(f"{name}[{at}] is {float(x[pos])!r}; it must be finite")


def _check_weights(w: NDArray[np.float64], valid: NDArray[np.bool_]) -> NDArray[np.float64]:
    _check_finite("weights", w, valid)
    sel = w[valid]
    if (sel < 0).any():
        raise ValueError(f"weights must be >= 0 on valid entries; got {float(sel[sel < 0][0])!r}")
    if sel.sum() <= 0:
        raise ValueError("weights sum to 0 over the valid entries; the mean is undefined")
    return sel


def _check_range(idx: NDArray[np.intp], horizon: int | None) -> None:
    bad = idx < -1 if horizon is None else (idx < -1) | (idx >= horizon)
    if bad.any():
        b, pos = np.argwhere(bad)[0]
        allowed = ">= -1" if horizon is None else f"in [-1, {horizon})"
        raise ValueError(
            f"token_turn_index[{b}, {pos}] = {idx[b, pos]} must be {allowed}; "
            "use -1 for tokens the policy did not write"
        )


def _check_unit_interval(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:  # also rejects NaN
        raise ValueError(f"{name} must be in [0, 1]; got {_plain(value)!r}")


def _check_nonnegative(name: str, value: float) -> None:
    if not 0.0 <= value < np.inf:
        raise ValueError(f"{name} must be finite and >= 0; got {_plain(value)!r}")


def _plain(value: object) -> object:
    """Numpy scalars as Python values, so error messages show ``1.5``, not ``np.float64(1.5)``."""
    return value.item() if isinstance(value, np.generic) else value


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}; got {value!r}")
