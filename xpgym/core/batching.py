"""What every trainer adapter needs between `Episode`s and a trainer's batch type.

The token layouts themselves (`turn_rows`, `episode_rows`, padding, prompt/response split)
live in `xpgym.core.trajectory`; the math in `xpgym.core.advantages`. This module holds the
small pieces that sit between them and that two or more adapters share:

* `build_rows`: one of the two layouts by name (``"per_turn"`` / ``"per_episode"``).
* `row_group_ids`: a group id per row (verl ``uid``, OpenRLHF prompt groups, ROLL
  ``traj_group_id``), with ungrouped episodes each in a group of their own.
* `row_returns`: the discounted return ``G`` of each row's first turn, for trainers that
  take one scalar per row (Oat ``TransitionData.rewards``, verl per-turn rows, ROLL step
  managers), since their estimators see rows, not episodes.
* `on_last_policy_token`: a per-row scalar written on the row's last policy token (where
  every trainer reads a sequence's reward).
* `zero_padded_positions`: position ids ``0 .. n-1`` with 0 at padding (RL2, ROLL), where
  `PaddedRows.position_ids` repeats the last position (verl's formula).
* `shift_to_predictions`: the next-token view of a per-token array: entry ``j`` describes
  token ``j + 1``, the token the logits at position ``j`` predict (OpenRLHF ``action_mask``
  and ``rollout_log_probs``, RL2's ``actions``/``action_mask``, ROLL's ``[:, 1:]`` keys).
* `turn_index_from_mask`, `per_turn_sums`, `token_advantages`: for estimators that only see
  token tensors (a verl advantage estimator gets ``token_level_rewards`` and
  ``response_mask``): turns are recovered as the maximal runs of 1 in the response mask, so
  REINFORCE returns and ReBN are computed per turn, exactly as `xpgym.core.advantages` does
  on `Episode`\\ s.

Everything is numpy; arrays follow `xpgym.core.trajectory` (ids int64, rewards float32,
``[B, L]`` aligned with ``input_ids`` unless a function says otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from xpgym.core.advantages import (
    broadcast_to_tokens,
    discounted_returns,
    rebn,
    turn_rewards,
)
from xpgym.core.trajectory import Episode, PackedRows, episode_rows, turn_rows

__all__ = [
    "LAYOUTS",
    "TOKEN_ESTIMATORS",
    "Layout",
    "TokenEstimator",
    "build_rows",
    "on_last_policy_token",
    "per_turn_sums",
    "row_group_ids",
    "row_returns",
    "shift_to_predictions",
    "token_advantages",
    "turn_index_from_mask",
    "zero_padded_positions",
]

Layout = Literal["per_turn", "per_episode"]
LAYOUTS: tuple[str, ...] = ("per_turn", "per_episode")

TokenEstimator = Literal["reinforce", "rebn"]
TOKEN_ESTIMATORS: tuple[str, ...] = ("reinforce", "rebn")

UNGROUPED_PREFIX = "xpgym-ungrouped-"
"""Group id given to an episode without ``group_id``: this prefix and the episode's index."""


def build_rows(
    episodes: Sequence[Episode],
    layout: Layout,
    *,
    on_mismatch: Literal["raise", "split"] = "raise",
) -> PackedRows:
    """`turn_rows` for ``"per_turn"``, `episode_rows` for ``"per_episode"``.

    Args:
        episodes: Episodes with token ids (see `xpgym.core.trajectory`).
        layout: ``"per_turn"`` (one row per turn) or ``"per_episode"`` (one row per episode).
        on_mismatch: Passed to `episode_rows` (ignored for ``"per_turn"``).

    Raises:
        ValueError: unknown `layout`, or the layout's own errors.
    """
    if layout == "per_turn":
        return turn_rows(episodes)
    if layout == "per_episode":
        return episode_rows(episodes, on_mismatch=on_mismatch)
    raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def row_group_ids(episodes: Sequence[Episode], rows: PackedRows) -> NDArray[np.object_]:
    """``[B]`` object array of str: the ``group_id`` of each row's episode.

    An episode with ``group_id=None`` gets ``f"{UNGROUPED_PREFIX}{index}"`` (its index in
    `episodes`), so it forms a group of its own: a group baseline then has one member.
    """
    ids = [
        str(ep.group_id) if ep.group_id is not None else f"{UNGROUPED_PREFIX}{e}"
        for e, ep in enumerate(episodes)
    ]
    out = np.empty(len(rows), dtype=object)
    out[:] = [ids[e] for e in rows.episode_index.tolist()]
    return out


def row_returns(episodes: Sequence[Episode], rows: PackedRows, gamma: float) -> NDArray[np.float64]:
    """``[B]`` float64: ``G`` of each row's first turn, over the whole episode.

    ``G_t = sum_{k >= t} gamma**(k - t) * r_k`` (`discounted_returns`) at
    ``t = rows.first_turn[b]`` of episode ``rows.episode_index[b]``. For `turn_rows` this is
    the turn's own return; for an episode row, the episode's discounted return. It always
    runs to the episode's end, also for rows that `episode_rows(..., on_mismatch="split")`
    cut out of the middle of an episode.

    Args:
        episodes: The episodes `rows` were built from, in the same order.
        rows: `turn_rows` / `episode_rows` output (any form: only `RowInfo` fields are read).
        gamma: Discount per turn, in ``[0, 1]``.
    """
    rewards, mask = turn_rewards(episodes)
    returns = discounted_returns(rewards, mask, gamma)
    return returns[rows.episode_index, rows.first_turn]


def on_last_policy_token(values: ArrayLike, response_mask: ArrayLike) -> NDArray[np.float32]:
    """``[B, L]`` float32: ``values[b]`` on row ``b``'s last policy token, 0 elsewhere.

    Args:
        values: ``[B]`` one number per row (e.g. `row_returns`).
        response_mask: ``[B, L]`` 0/1, 1 on policy tokens; every row needs at least one.

    Raises:
        ValueError: shapes disagree, or a row has no policy token.
    """
    vals = np.asarray(values, dtype=np.float64)
    mask = np.asarray(response_mask).astype(bool)
    if mask.ndim != 2 or vals.shape != (mask.shape[0],):
        raise ValueError(
            f"values must be [B] and response_mask [B, L]; got {vals.shape} and {mask.shape}"
        )
    empty = ~mask.any(axis=1)
    if empty.any():
        raise ValueError(
            f"row {int(np.flatnonzero(empty)[0])} has no policy token to put its value on"
        )
    last = mask.shape[1] - 1 - np.argmax(mask[:, ::-1], axis=1)
    out = np.zeros(mask.shape, dtype=np.float32)
    out[np.arange(mask.shape[0]), last] = vals
    return out


def shift_to_predictions(values: ArrayLike) -> NDArray[Any]:
    """The next-token view of ``[B, L]`` per-token values: ``[B, L - 1]``, ``out[:, j] =
    values[:, j + 1]``.

    Entry ``j`` then describes the token predicted from the logits at position ``j`` (the
    convention of OpenRLHF's ``action_mask`` / ``action_log_probs``, RL2's ``actions`` and
    ROLL's ``[:, 1:]`` keys); token 0 has no prediction and drops out. Dtype is kept.
    """
    arr = np.asarray(values)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise ValueError(f"values must be [B, L] with L >= 1; got shape {arr.shape}")
    return arr[:, 1:]


def zero_padded_positions(attention_mask: ArrayLike) -> NDArray[np.int64]:
    """``[B, L]`` int64: ``0, 1, ...`` on each row's real tokens, 0 at padding.

    Args:
        attention_mask: ``[B, L]`` 0/1 (right padding: each row's ones are a prefix).
    """
    mask = np.asarray(attention_mask).astype(bool)
    if mask.ndim != 2:
        raise ValueError(f"attention_mask must be [B, L]; got shape {mask.shape}")
    return np.where(mask, np.arange(mask.shape[1]), 0).astype(np.int64)


def turn_index_from_mask(response_mask: ArrayLike) -> NDArray[np.int64]:
    """``[B, R]`` int64: the turn of each policy token, numbered per row; -1 elsewhere.

    A turn is a maximal run of 1s in `response_mask`: in both layouts of
    `xpgym.core.trajectory` consecutive turns are separated by at least one env token (the
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
