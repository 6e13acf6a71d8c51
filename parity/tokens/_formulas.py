"""Closed forms of the trainers' documented differences from the reference, computed from
the episodes alone (never from a trainer's output), for `parity.tokens.core.Formula`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from parity.tokens.cases import per_token, policy_positions
from parity.tokens.core import TokenValues
from xpgym.core.trajectory import Episode
from xpgym.training.advantages import dr_grpo, grpo, rloo, whiten

__all__ = [
    "EPS32",
    "KEEP_TEXT",
    "episode_level",
    "grpo_with",
    "keep_single_members",
    "position_discounted_whitened",
    "token_discounted_whitened",
]

EPS32 = float(np.finfo(np.float32).eps)
"""RL2's eps: ``torch.finfo(float32).eps`` of its float32 rewards."""

KEEP_TEXT = {
    "grpo": "a one-member group keeps its score: A = s / (1 + {eps:g}) (mean 0, std 1)",
    "dr_grpo": "a one-member group keeps its score: A = s (mean 0)",
    "rloo": "a one-member group keeps its score: A = s (baseline 0)",
}
"""The single-member rule of verl's group estimators, per reference algorithm."""


def _scores(episodes: Sequence[Episode]) -> tuple[np.ndarray, list[str | None]]:
    return np.array([ep.total_reward for ep in episodes]), [ep.group_id for ep in episodes]


def episode_level(episodes: Sequence[Episode], per_episode: np.ndarray) -> TokenValues:
    """One value per episode on every policy token of it."""
    return [per_token(ep, np.full(len(ep.turns), per_episode[e])) for e, ep in enumerate(episodes)]


def keep_single_members(algorithm: str, episodes: Sequence[Episode], *, eps: float) -> TokenValues:
    """verl's group estimators: the reference's, with ``single_member="keep"``."""
    scores, groups = _scores(episodes)
    if algorithm == "grpo":
        values = grpo(scores, groups, eps=eps, single_member="keep")
    else:
        values = {"dr_grpo": dr_grpo, "rloo": rloo}[algorithm](scores, groups, single_member="keep")
    return episode_level(episodes, values)


def grpo_with(
    episodes: Sequence[Episode], *, eps: float, one_group: bool = False, lone: str = "zero"
) -> TokenValues:
    """``grpo(scores, groups, eps=eps)`` per episode (unbiased std, eps added to it); with
    `one_group` the whole batch is one group; ``lone="nan"`` gives a one-member group NaN
    (torch's unbiased std of one value)."""
    scores, groups = _scores(episodes)
    ids = [0] * len(groups) if one_group else groups
    values = grpo(scores, ids, eps=eps)
    if lone == "nan":
        sizes = {g: ids.count(g) for g in ids}
        values = np.where([sizes[g] == 1 for g in ids], np.nan, values)
    return episode_level(episodes, values)


def token_discounted_whitened(
    rewards: TokenValues, gamma: float, **whiten_kwargs: object
) -> TokenValues:
    """Per policy token ``k`` of an episode: ``G_k = sum_{i >= k} gamma**(i - k) * rho_i``
    over its policy tokens (the discount counts policy tokens only), then `whiten` over
    every policy token of the batch with `whiten_kwargs`."""
    returns = []
    for rho in rewards:
        g, running = np.zeros(len(rho)), 0.0
        for k in range(len(rho) - 1, -1, -1):
            running = rho[k] + gamma * running
            g[k] = running
        returns.append(g)
    return _whiten_all(returns, **whiten_kwargs)


def position_discounted_whitened(
    episodes: Sequence[Episode], gamma: float, *, clip: float, **whiten_kwargs: object
) -> TokenValues:
    """OpenRLHF ``reinforce``: the episode total ``R`` (clipped to ``[-clip, clip]``) on
    the last policy token ``e``; every position ``p <= e`` of the sequence, env tokens
    included, gets ``gamma**(e - p) * R``; then `whiten` over all policy tokens."""
    returns = []
    for ep in episodes:
        positions = policy_positions(ep)
        total = float(np.clip(ep.total_reward, -clip, clip))
        returns.append(total * gamma ** (positions[-1] - positions).astype(np.float64))
    return _whiten_all(returns, **whiten_kwargs)


def _whiten_all(values: TokenValues, **whiten_kwargs: object) -> TokenValues:
    flat = whiten(np.concatenate(values), **whiten_kwargs)  # type: ignore[arg-type]
    return np.split(flat, np.cumsum([len(v) for v in values])[:-1])
