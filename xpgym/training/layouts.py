r"""Token rows for trainers: the two layouts of `Episode`\ s, packed, padded or split.

Rows are built from episodes whose turns carry token ids and satisfy the token-exactness
contract of `xpgym.core.trajectory`; the math on them is in `xpgym.training.advantages`.
Every adapter gets its rows here, so token and mask bookkeeping is written once.

Token layouts
-------------
Two layouts turn episodes into rows of tokens; both return `PackedRows`:

* `turn_rows`: one row per turn, ``prompt_ids + response_ids`` of that turn. Its prompt
  already holds the history. Consumed by Oat, the verl agent loop returning a list of
  outputs (one row per turn), and ROLL's step env managers.
* `episode_rows`: one row per episode, ``turns[-1].prompt_ids + turns[-1].response_ids``,
  which by the contract holds every turn's prompt and response. Consumed by the verl agent
  loop returning one output, OpenRLHF, RL2 and ROLL's trajectory env manager.

Anatomy of a row, in every form. The row's *prompt* is its first turn's ``prompt_ids``; its
*response* is every token after that: in `turn_rows` the turn's ``response_ids``; in
`episode_rows` all turns' policy tokens *and* the env/tool tokens between them (verl's
``responses``). Per token:

* ``response_mask``: 1 on policy tokens (some turn's ``response_ids``), 0 on prompt,
  env/tool and padding tokens: the loss mask;
* ``turn_index``: the index of the turn a policy token belongs to, -1 on every other token,
  so per-turn advantages broadcast as ``adv_per_turn[turn_index]`` where ``turn_index >= 0``;
* ``token_rewards``: each turn's reward on that turn's last policy token, 0 elsewhere;
* ``rollout_logprobs``: the sampler's log-probability on each policy token, 0 elsewhere
  (``None`` when the episodes carry no ``response_logprobs``).

Every per-token array is aligned with ``input_ids`` (entry ``j`` describes token ``j``, not
the prediction of token ``j + 1``): trainers that score next-token positions (OpenRLHF's
``action_mask``, RL2, ROLL's ``[:, 1:]`` keys, Oat's ``response_masks``) shift by one.

Three forms of the same rows (ids, masks, positions and indices int64; rewards and
log-probabilities float32; flags bool):

* `PackedRows` (from the layout functions): rows concatenated, no padding, ``[N]`` arrays
  with ``cu_seqlens [B + 1]`` offsets (flash-attention varlen / RL2 packing / verl's
  unpadded rows);
* `PackedRows.pad` -> `PaddedRows`: one right-padded sequence per row, ``[B, L]`` (Oat,
  OpenRLHF ``sequences``, ROLL, RL2);
* `PackedRows.split` -> `SplitRows`: prompt left-padded ``[B, P]`` + response right-padded
  ``[B, R]`` (verl ``DataProto``: ``prompts``, ``responses``, ``response_mask``, ...).

`row_lists` gives the rows as Python lists (`RowLists`: per row, the prompt and response ids
and the per-token values of the response), built from the turns' own lists without the
packed arrays, for trainers that take lists (TRL's ``rollout_func``).

`PackedRows.row` gives one row without padding (`Row`: views into the packed arrays), for
hooks that hand a trainer one sequence at a time (verl's ``AgentLoopOutput``, OpenRLHF's
agent output). Every row carries its episode's ``group_id`` (`RowInfo.group_id`; an episode
without one is a group of its own), the GRPO group of trainers that take one (verl ``uid``,
ROLL ``traj_group_id``). Built with ``step_ids=True``, rows also carry the per-turn ids of
the step algorithms, for trainers whose estimators group turns themselves (ROLL's GiGPO
``state_hash``, verl's ``xpgym_state_keys``): each turn's anchor-state key
(`RowInfo.state_keys`, GiGPO's step groups within a `group_id`) and, for episodes with
``episode_id`` (forked trees), each turn's tree node and the tree's root
(`RowInfo.node_ids`, `RowInfo.tree_root`). They are opt-in because they cost work per turn
(an observation without an env state key is JSON-encoded).

Infrastructure failures (``Episode.outcome == "infra_error"``, `xpgym.core.errors`): the
rows of such an episode keep their tokens (batch shapes do not change) but carry nothing a
trainer could learn from: `response_mask` 0 and `turn_index` -1 on every token (no loss, no
turn in per-token statistics), `token_rewards` 0 (`reward` keeps the recorded sum, for logs),
`infra_error` set, and the group id ``f"{INFRA_GROUP_PREFIX}{episode_index}"``, a group of
its own, so the other members' group mean and std (verl ``uid``, ROLL ``traj_group_id``)
are those of the healthy members alone.

Length limits: a row longer than the limit raises by default; with ``truncate=True`` it keeps
its *first* tokens (the tail is cut, so every kept token keeps the exact context it was
sampled with), and a reward whose token was cut moves to the row's last kept policy token, so
the row's reward sum, and every kept turn's undiscounted return-to-go, is unchanged.

Shared by several adapters: `build_rows` (a layout by name), `PackedRows.with_row_rewards`
(one value per row on its last policy token, e.g. per-turn returns for trainers whose
estimator sees rows, not episodes), `PackedRows.with_turn_values` (one value per turn on its
last policy token, e.g. GiGPO or tree advantages computed from the episodes),
`on_last_policy_token` (the same on padded arrays), `zero_padded_positions` and
`shift_to_predictions` (the next-token view).
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, fields
from itertools import chain
from typing import Any, Literal, NamedTuple, cast, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

from xpgym.core.trajectory import (
    INFRA_GROUP_PREFIX,
    UNGROUPED_PREFIX,
    Episode,
    Turn,
    training_group_ids,
    tree_nodes,
    turn_state_keys,
)

__all__ = [
    "INFRA_GROUP_PREFIX",
    "LAYOUTS",
    "UNGROUPED_PREFIX",
    "Layout",
    "PackedRows",
    "PaddedRows",
    "PrefixMismatchError",
    "Row",
    "RowInfo",
    "RowLists",
    "SplitRows",
    "build_rows",
    "episode_rows",
    "on_last_policy_token",
    "row_lists",
    "shift_to_predictions",
    "turn_rows",
    "zero_padded_positions",
]

Layout = Literal["per_turn", "per_episode"]
LAYOUTS: tuple[Layout, ...] = get_args(Layout)


# --------------------------------------------------------------------------------------
# Row containers
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RowInfo:
    """Per-row facts shared by `PackedRows`, `PaddedRows` and `SplitRows`; all ``[B]``.

    A row covers turns ``first_turn .. first_turn + num_turns - 1`` of episode
    ``episode_index``: one turn in `turn_rows`; in `episode_rows` all turns (or, with
    ``on_mismatch="split"``, a run of prefix-consistent turns). Truncation changes only
    `prompt_length`, `response_length` and `overlong`: the other fields describe the row's
    turns as collected.

    Attributes:
        episode_index: int64, index of the row's episode in the input list.
        first_turn: int64, index of the row's first turn in its episode (in `turn_rows`,
            the row's turn).
        num_turns: int64, turns in the row (1 in `turn_rows`).
        group_id: object (str), the ``group_id`` of the row's episode; an episode without
            one gets ``f"{UNGROUPED_PREFIX}{episode_index}"``, a group of its own.
        prompt_length: int64, tokens before the response (the first turn's prompt).
        response_length: int64, tokens from the first policy token to the end of the row
            (after truncation): policy tokens plus, in episode rows, env/tool tokens.
        reward: float32, sum of the rewards of the row's turns (not changed by truncation).
        terminated: bool, `Turn.terminated` of the row's last turn.
        truncated: bool, `Turn.truncated` of the row's last turn (the env's limit).
        overlong: bool, the row was longer than a length limit and lost its tail
            (``truncate=True``); unrelated to `truncated`.
        infra_error: bool, the row's episode has ``outcome == "infra_error"``: its
            `response_mask` is all 0 and it is a group of its own (module docstring).
        state_keys: object, per row a tuple of str, the anchor-state key
            (`xpgym.core.trajectory.turn_state_keys`) of each of the row's turns, in order
            (``num_turns`` keys); GiGPO's step groups are the ``(group_id, key)`` pairs.
            ``None`` (the whole field) unless the layout was built with ``step_ids=True``.
        node_ids: object, per row a tuple of str, the tree node
            (`xpgym.core.trajectory.tree_nodes`) each of the row's turns reaches, in order
            (``num_turns`` ids). ``None`` (the whole field) unless built with
            ``step_ids=True`` from whole trees: episodes that all have an ``episode_id``
            (collected with ``record_states=True`` or forked) and every branch's parent
            among them. Without ids, or with a parent left out (e.g. filtered), there is no
            tree to lay out; `tree_nodes` on such episodes says which parent is missing.
        tree_root: object (str), the root of the row's tree (the node before the
            episode's first turn): `tree_nodes`' root, or for an infra-error row its
            `group_id` (a tree of its own). Not `group_id` in general: a branch's group is
            its fork point, its root its parent's root. ``None`` exactly when `node_ids` is.
    """

    episode_index: np.ndarray
    first_turn: np.ndarray
    num_turns: np.ndarray
    group_id: np.ndarray
    prompt_length: np.ndarray
    response_length: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    overlong: np.ndarray
    infra_error: np.ndarray
    state_keys: np.ndarray | None
    node_ids: np.ndarray | None
    tree_root: np.ndarray | None

    def __len__(self) -> int:
        return len(self.episode_index)

    def _row_info(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(RowInfo)}

    def _describe(self, b: int) -> str:
        first, n = int(self.first_turn[b]), int(self.num_turns[b])
        turns = f"turn {first}" if n == 1 else f"turns {first}..{first + n - 1}"
        return f"row {b} (episode {int(self.episode_index[b])}, {turns})"


@dataclass(frozen=True, eq=False)
class Row:
    """One row of `PackedRows`, without padding (`PackedRows.row`).

    The arrays are ``[n]`` views into the packed arrays (``n`` the row's tokens), with the
    meaning of the module docstring; the row's prompt is ``input_ids[:prompt_length]``, its
    response the rest (`prompt_ids`, `response_ids`; slice any other array with
    `response`).

    Attributes:
        episode_index, first_turn, num_turns, group_id, prompt_length: The row's
            `RowInfo` entries.
        input_ids: ``[n]`` int64, prompt then response.
        response_mask: ``[n]`` int64, 1 on policy tokens.
        turn_index: ``[n]`` int64, turn of each policy token, -1 elsewhere.
        token_rewards: ``[n]`` float32, each turn's reward on its last policy token.
        rollout_logprobs: ``[n]`` float32 sampler log-probabilities, or ``None``.
    """

    episode_index: int
    first_turn: int
    num_turns: int
    group_id: str
    prompt_length: int
    input_ids: np.ndarray
    response_mask: np.ndarray
    turn_index: np.ndarray
    token_rewards: np.ndarray
    rollout_logprobs: np.ndarray | None

    @property
    def response(self) -> slice:
        """The positions of the response: ``slice(prompt_length, None)``."""
        return slice(self.prompt_length, None)

    @property
    def prompt_ids(self) -> np.ndarray:
        """``[prompt_length]`` int64, the row's first prompt."""
        return self.input_ids[: self.prompt_length]

    @property
    def response_ids(self) -> np.ndarray:
        """``[n - prompt_length]`` int64, everything after the prompt."""
        return self.input_ids[self.response]


@dataclass(frozen=True, eq=False)
class PackedRows(RowInfo):
    """Rows concatenated without padding: row ``b`` is ``[cu_seqlens[b], cu_seqlens[b+1])``.

    ``N`` is the total number of tokens, ``B`` the number of rows. See the module docstring
    for what the per-token arrays mean; `pad` and `split` give the padded forms.

    Attributes:
        input_ids: ``[N]`` int64, the rows' tokens, one after the other.
        position_ids: ``[N]`` int64, position of each token within its row (0, 1, ...).
        response_mask: ``[N]`` int64, 1 on policy tokens.
        turn_index: ``[N]`` int64, turn of each policy token, -1 elsewhere.
        token_rewards: ``[N]`` float32, each turn's reward on its last policy token.
        rollout_logprobs: ``[N]`` float32 sampler log-probabilities on policy tokens (0
            elsewhere), or ``None`` when the episodes have no ``response_logprobs``.
        cu_seqlens: ``[B + 1]`` int64, row offsets into the ``[N]`` arrays (starts at 0).
    """

    input_ids: np.ndarray
    position_ids: np.ndarray
    response_mask: np.ndarray
    turn_index: np.ndarray
    token_rewards: np.ndarray
    rollout_logprobs: np.ndarray | None
    cu_seqlens: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        """``[B]`` int64, tokens per row (``prompt_length + response_length``)."""
        return np.diff(self.cu_seqlens)

    def row(self, b: int) -> Row:
        """Row `b` without padding: its `RowInfo` entries and ``[n]`` views of its tokens."""
        b = operator.index(b)
        if not -len(self) <= b < len(self):
            raise IndexError(f"row {b} of {len(self)} rows")
        b %= len(self)
        span = slice(int(self.cu_seqlens[b]), int(self.cu_seqlens[b + 1]))
        logprobs = self.rollout_logprobs
        return Row(
            episode_index=int(self.episode_index[b]),
            first_turn=int(self.first_turn[b]),
            num_turns=int(self.num_turns[b]),
            group_id=str(self.group_id[b]),
            prompt_length=int(self.prompt_length[b]),
            input_ids=self.input_ids[span],
            response_mask=self.response_mask[span],
            turn_index=self.turn_index[span],
            token_rewards=self.token_rewards[span],
            rollout_logprobs=None if logprobs is None else logprobs[span],
        )

    def with_row_rewards(self, values: ArrayLike) -> PackedRows:
        """These rows with `token_rewards` replaced: ``values[b]`` on row ``b``'s last
        policy token, 0 elsewhere (`reward` keeps the sum of the turns' rewards).

        For trainers whose estimator sees rows, not episodes: with per-turn rows and
        ``values`` each turn's return ``G_t`` (`xpgym.training.advantages.row_returns`), a
        trainer reading the reward of a row reads the turn's return. Truncation (`pad`,
        `split`) then moves a cut value to the last kept policy token, like any reward.

        An infra-error row (no policy token) gets no value.

        Raises:
            ValueError: `values` is not ``[B]``, or a row that is not an infra-error row
                has no policy token.
        """
        vals = np.asarray(values, dtype=np.float64)
        if vals.shape != (len(self),):
            raise ValueError(f"values must be [B] = [{len(self)}], got shape {vals.shape}")
        policy = np.flatnonzero(self.response_mask)
        last = np.full(len(self), -1, dtype=np.int64)  # each row's last policy token
        np.maximum.at(last, np.searchsorted(self.cu_seqlens, policy, side="right") - 1, policy)
        empty = (last < 0) & ~self.infra_error
        if empty.any():
            raise ValueError(
                f"row {int(np.flatnonzero(empty)[0])} has no policy token to put its value on"
            )
        token_rewards = np.zeros_like(self.token_rewards)
        token_rewards[last[last >= 0]] = vals[last >= 0]
        return dataclasses.replace(self, token_rewards=token_rewards)

    def with_turn_values(self, values: ArrayLike) -> PackedRows:
        """These rows with `token_rewards` replaced: ``values[e, t]`` on the last policy
        token of turn ``t`` of episode ``e`` (every row, both layouts), 0 elsewhere.

        How per-turn values computed from the episodes reach a trainer that reads only
        token tensors: the step-level and tree advantages
        (`xpgym.training.advantages.episode_advantages`, whose anchor states and tree nodes
        a row-level estimator cannot see) travel as each turn's value and are read back per
        turn (verl's ``xpgym_turn_values``). Truncation (`pad`, `split`) moves a cut turn's
        value onto the last kept policy token, like any reward. Infra-error rows (no turns)
        get none.

        Raises:
            ValueError: `values` is not ``[N, T]`` with a row for every episode and a column
                for every turn of these rows.
        """
        vals = np.asarray(values, dtype=np.float64)
        need = (
            int(self.episode_index.max(initial=-1)) + 1,
            int(self.turn_index.max(initial=-1)) + 1,
        )
        if vals.ndim != 2 or vals.shape[0] < need[0] or vals.shape[1] < need[1]:
            raise ValueError(
                f"values must be [N, T] with N >= {need[0]} episodes and T >= {need[1]} "
                f"turns, got shape {vals.shape}"
            )
        policy = np.flatnonzero(self.turn_index >= 0)
        row = np.searchsorted(self.cu_seqlens, policy, side="right") - 1
        turn = self.turn_index[policy]
        last = np.ones(len(policy), dtype=bool)  # the next policy token is another turn's
        last[:-1] = (row[1:] != row[:-1]) | (turn[1:] != turn[:-1])
        token_rewards = np.zeros_like(self.token_rewards)
        token_rewards[policy[last]] = vals[self.episode_index[row[last]], turn[last]]
        return dataclasses.replace(self, token_rewards=token_rewards)

    def pad(
        self,
        *,
        pad_token_id: int,
        max_length: int | None = None,
        truncate: bool = False,
        pad_to_max_length: bool = False,
    ) -> PaddedRows:
        """One right-padded sequence per row: ``[B, L]``.

        Args:
            pad_token_id: Id written at padding positions of `input_ids` (it may equal a
                real id such as eos; padding is told apart by `attention_mask`).
            max_length: Most tokens a row may have. ``None``: no limit.
            truncate: What happens to a row longer than `max_length`: ``False`` raises
                `ValueError`; ``True`` keeps its first `max_length` tokens, moves rewards
                of cut tokens to the last kept policy token (a row left with no policy
                token keeps its reward only in `reward`) and sets `overlong`.
            pad_to_max_length: Pad to ``L = max_length`` (fixed shapes, e.g. ROLL's
                ``sequence_length``) instead of the longest row.

        Returns:
            `PaddedRows`; ``L`` is the longest row (or `max_length`); padding on the right.
        """
        pad_token_id = operator.index(pad_token_id)
        max_length = _check_limit("max_length", max_length, pad_to_max_length)
        rows = self
        if max_length is not None:
            keep = np.full(len(self), max_length, dtype=np.int64)
            rows = self._cut(keep, truncate=truncate, limit="max_length")
        lengths = rows.lengths
        width = int(lengths.max(initial=0))
        if pad_to_max_length and max_length is not None:
            width = max_length
        real = np.arange(width) < lengths[:, None]  # [B, L], row-major order = packed order
        logprobs = rows.rollout_logprobs
        return PaddedRows(
            **rows._row_info(),
            input_ids=_fill(rows.input_ids, real, pad_token_id),
            attention_mask=real.astype(np.int64),
            position_ids=_positions(np.zeros_like(lengths), lengths, width),
            response_mask=_fill(rows.response_mask, real, 0),
            turn_index=_fill(rows.turn_index, real, -1),
            token_rewards=_fill(rows.token_rewards, real, 0),
            rollout_logprobs=None if logprobs is None else _fill(logprobs, real, 0),
        )

    def split(
        self,
        *,
        pad_token_id: int,
        max_prompt_length: int | None = None,
        max_response_length: int | None = None,
        truncate: bool = False,
        pad_to_max_length: bool = False,
    ) -> SplitRows:
        """Prompt left-padded ``[B, P]`` + response right-padded ``[B, R]`` (verl's form).

        The prompt is the row's first turn's ``prompt_ids``; the response is everything
        after it (in episode rows: every turn's policy tokens and the env/tool tokens
        between them, with `response_mask` 1 on the policy tokens only).

        Args:
            pad_token_id: Id written at padding positions of `prompts` and `responses`.
            max_prompt_length: Most prompt tokens (verl ``rollout.prompt_length``). A longer
                prompt always raises `ValueError`, even with `truncate`: cutting the start
                of a prompt would change the context of every later token. Filter such
                episodes first.
            max_response_length: Most response tokens (verl ``rollout.response_length``).
            truncate: What happens to a longer response: ``False`` raises `ValueError`;
                ``True`` keeps its first `max_response_length` tokens, moves rewards of cut
                tokens to the last kept policy token and sets `overlong`.
            pad_to_max_length: Pad to ``P = max_prompt_length`` and
                ``R = max_response_length`` (verl pads to its configured lengths) instead
                of the longest prompt and response; both limits must then be given.

        Returns:
            `SplitRows`.
        """
        pad_token_id = operator.index(pad_token_id)
        max_prompt_length = _check_limit("max_prompt_length", max_prompt_length, pad_to_max_length)
        max_response_length = _check_limit(
            "max_response_length", max_response_length, pad_to_max_length
        )
        if max_prompt_length is not None:
            for b in np.flatnonzero(self.prompt_length > max_prompt_length):
                raise ValueError(
                    f"{self._describe(int(b))} has a {int(self.prompt_length[b])}-token prompt, "
                    f"more than max_prompt_length={max_prompt_length}; prompts are never cut "
                    f"(that would change what every later token was conditioned on): filter "
                    f"such episodes or raise max_prompt_length"
                )
        rows = self
        if max_response_length is not None:
            keep = self.prompt_length + max_response_length
            rows = self._cut(keep, truncate=truncate, limit="max_response_length")
        p_width = int(rows.prompt_length.max(initial=0))
        r_width = int(rows.response_length.max(initial=0))
        if pad_to_max_length:  # both limits are given (checked above)
            p_width, r_width = int(max_prompt_length or 0), int(max_response_length or 0)
        # [B, P] and [B, R]: padding cells, and the packed position of each cell
        prompt_columns, response_columns = np.arange(p_width), np.arange(r_width)
        prompt_padding = prompt_columns < p_width - rows.prompt_length[:, None]
        response_padding = response_columns >= rows.response_length[:, None]
        response_start = rows.cu_seqlens[:-1] + rows.prompt_length
        prompt_index = (response_start - p_width)[:, None] + prompt_columns
        response_index = response_start[:, None] + response_columns
        prompts = _padded(rows.input_ids, prompt_index, prompt_padding, pad_token_id)
        padding = np.concatenate([prompt_padding, response_padding], axis=1)
        attention_mask = (~padding).astype(np.int64)

        def response_part(values: np.ndarray, fill: float) -> np.ndarray:
            return _padded(values, response_index, response_padding, fill)

        responses = response_part(rows.input_ids, pad_token_id)
        logprobs = rows.rollout_logprobs
        return SplitRows(
            **rows._row_info(),
            prompts=prompts,
            responses=responses,
            input_ids=np.concatenate([prompts, responses], axis=1),
            attention_mask=attention_mask,
            position_ids=_positions(p_width - rows.prompt_length, rows.lengths, p_width + r_width),
            response_mask=response_part(rows.response_mask, 0),
            turn_index=response_part(rows.turn_index, -1),
            token_rewards=response_part(rows.token_rewards, 0),
            rollout_logprobs=None if logprobs is None else response_part(logprobs, 0),
        )

    def _cut(self, keep: np.ndarray, *, truncate: bool, limit: str) -> PackedRows:
        """Keep the first ``keep[b]`` tokens of each row (see `pad` for the rules).

        `limit` names the caller's argument for errors: ``"max_length"`` counts whole rows,
        ``"max_response_length"`` counts tokens after the prompt.
        """
        lengths = self.lengths
        over = lengths > keep
        if not over.any():
            return self
        if not truncate:
            b = int(np.flatnonzero(over)[0])
            skip = 0 if limit == "max_length" else int(self.prompt_length[b])
            allowed, used = int(keep[b]) - skip, int(lengths[b]) - skip
            what = "tokens" if limit == "max_length" else "response tokens"
            raise ValueError(
                f"{self._describe(b)} has {used} {what}, more than {limit}={allowed}; pass "
                f"truncate=True to keep the first {allowed} (rewards of cut tokens move to "
                f"the last kept policy token), or raise {limit}"
            )
        new_lengths = np.minimum(lengths, keep)
        kept = self.position_ids < np.repeat(new_lengths, lengths)
        token_rewards = self.token_rewards.copy()
        for b in np.flatnonzero(over).tolist():
            start, stop = int(self.cu_seqlens[b]), int(self.cu_seqlens[b + 1])
            cut_at = start + int(new_lengths[b])
            policy = np.flatnonzero(self.response_mask[start:cut_at])
            if policy.size:
                moved = token_rewards[cut_at:stop].sum(dtype=np.float64)
                token_rewards[start + policy[-1]] += np.float32(moved)
        cu_seqlens = np.zeros(len(self) + 1, dtype=np.int64)
        np.cumsum(new_lengths, out=cu_seqlens[1:])
        prompt_length = np.minimum(self.prompt_length, new_lengths)
        info = self._row_info()
        info.update(
            prompt_length=prompt_length,
            response_length=new_lengths - prompt_length,
            overlong=self.overlong | over,
        )
        return PackedRows(
            **info,
            input_ids=self.input_ids[kept],
            position_ids=self.position_ids[kept],
            response_mask=self.response_mask[kept],
            turn_index=self.turn_index[kept],
            token_rewards=token_rewards[kept],
            rollout_logprobs=None if self.rollout_logprobs is None else self.rollout_logprobs[kept],
            cu_seqlens=cu_seqlens,
        )


@dataclass(frozen=True, eq=False)
class PaddedRows(RowInfo):
    """One sequence per row, right-padded: every ``[B, L]`` array has row ``b``'s tokens in
    columns ``0 .. prompt_length[b] + response_length[b] - 1`` and padding after them.

    Attributes:
        input_ids: ``[B, L]`` int64, prompt + response, ``pad_token_id`` at padding.
        attention_mask: ``[B, L]`` int64, 1 on real tokens, 0 on padding.
        position_ids: ``[B, L]`` int64, ``clip(cumsum(attention_mask) - 1, 0)`` (verl's
            formula: 0, 1, ... on real tokens; padding repeats the last position).
        response_mask: ``[B, L]`` int64, 1 on policy tokens (the loss mask).
        turn_index: ``[B, L]`` int64, turn of each policy token, -1 elsewhere.
        token_rewards: ``[B, L]`` float32, each turn's reward on its last policy token.
        rollout_logprobs: ``[B, L]`` float32 sampler log-probabilities on policy tokens, 0
            elsewhere; ``None`` without ``response_logprobs``.
    """

    input_ids: np.ndarray
    attention_mask: np.ndarray
    position_ids: np.ndarray
    response_mask: np.ndarray
    turn_index: np.ndarray
    token_rewards: np.ndarray
    rollout_logprobs: np.ndarray | None


@dataclass(frozen=True, eq=False)
class SplitRows(RowInfo):
    """Prompt left-padded ``[B, P]`` + response right-padded ``[B, R]``: verl's ``DataProto``.

    Row ``b``'s prompt sits in columns ``P - prompt_length[b] .. P - 1`` of `prompts`, its
    response in columns ``0 .. response_length[b] - 1`` of `responses`; the ``[B, P + R]``
    arrays are the two side by side.

    Attributes:
        prompts: ``[B, P]`` int64, the first turn's prompt, left-padded with ``pad_token_id``.
        responses: ``[B, R]`` int64, everything after the prompt (policy and env/tool
            tokens), right-padded with ``pad_token_id``.
        input_ids: ``[B, P + R]`` int64, ``concatenate([prompts, responses], axis=1)``.
        attention_mask: ``[B, P + R]`` int64, 1 on real tokens, 0 on padding (both sides).
        position_ids: ``[B, P + R]`` int64, ``clip(cumsum(attention_mask) - 1, 0)``.
        response_mask: ``[B, R]`` int64, 1 on policy tokens, 0 on env/tool tokens and padding.
        turn_index: ``[B, R]`` int64, turn of each policy token, -1 elsewhere.
        token_rewards: ``[B, R]`` float32, each turn's reward on its last policy token (verl
            ``rm_scores`` / ``token_level_scores``).
        rollout_logprobs: ``[B, R]`` float32 sampler log-probabilities on policy tokens, 0
            elsewhere (verl ``rollout_log_probs``); ``None`` without ``response_logprobs``.
    """

    prompts: np.ndarray
    responses: np.ndarray
    input_ids: np.ndarray
    attention_mask: np.ndarray
    position_ids: np.ndarray
    response_mask: np.ndarray
    turn_index: np.ndarray
    token_rewards: np.ndarray
    rollout_logprobs: np.ndarray | None


@dataclass(frozen=True, eq=False)
class RowLists(RowInfo):
    """Rows as Python lists, one list per row and no padding (`row_lists`): the form of
    trainers whose rollout hooks return lists of token ids (TRL's ``rollout_func``).

    Each row is split at its prompt, and the per-token lists cover the response only
    (``response_length[b]`` entries, aligned with `response_ids`): on a prompt token every
    per-token value of the module docstring is 0. Values are those of `PackedRows`
    (``rollout_logprobs[b][j]`` is ``float(packed.rollout_logprobs[i])`` for the packed
    position ``i`` of response token ``j``), as Python ints and floats.

    Attributes:
        prompt_ids: ``[B]`` lists of int, each row's prompt (``prompt_length[b]`` ids).
        response_ids: ``[B]`` lists of int, everything after the prompt.
        response_mask: ``[B]`` lists of int, 1 on policy tokens, 0 on env/tool tokens.
        token_rewards: ``[B]`` lists of float (float32 values), each turn's reward on its
            last policy token, 0.0 elsewhere.
        rollout_logprobs: ``[B]`` lists of float (float32 values), the sampler
            log-probabilities on policy tokens, 0.0 elsewhere; ``None`` without
            ``response_logprobs``.
        turn_values: ``[B]`` lists of float (float64 values), ``values[e, t]`` of
            `row_lists`' ``turn_values`` on every policy token of turn ``t`` of episode
            ``e``, 0.0 elsewhere (infra-error rows: 0.0 everywhere); ``None`` without them.
    """

    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    response_mask: list[list[int]]
    token_rewards: list[list[float]]
    rollout_logprobs: list[list[float]] | None
    turn_values: list[list[float]] | None


def _check_limit(name: str, value: int | None, pad_to_max_length: bool) -> int | None:
    if value is None:
        if pad_to_max_length:
            raise ValueError(f"pad_to_max_length=True needs {name}")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int or None, got {value!r}")
    return int(value)


def _fill(values: np.ndarray, real: np.ndarray, fill: float) -> np.ndarray:
    """An array shaped like `real` holding `values` where `real` is set (row-major order)
    and `fill` elsewhere."""
    out = np.full(real.shape, fill, dtype=values.dtype)
    out[real] = values
    return out


def _padded(values: np.ndarray, index: np.ndarray, padding: np.ndarray, fill: float) -> np.ndarray:
    """``values[index]`` (a padded array: `index` gives each cell's packed position and is
    clipped into range) with `fill` where `padding` is set."""
    out = values.take(index, mode="clip")
    out[padding] = fill
    return out


def _positions(start: np.ndarray, count: np.ndarray, width: int) -> np.ndarray:
    """``[B, width]`` int64, ``clip(cumsum(attention_mask, axis=1) - 1, 0)`` for the
    attention mask whose row ``b`` is 1 on the ``count[b]`` columns from ``start[b]`` and 0
    elsewhere: 0 before the real tokens, 0, 1, ... on them, the last position after them."""
    positions = np.arange(width) - start[:, None]
    np.minimum(positions, (count - 1)[:, None], out=positions)
    return np.maximum(positions, 0, out=positions)


# --------------------------------------------------------------------------------------
# Layouts
# --------------------------------------------------------------------------------------


class PrefixMismatchError(ValueError):
    """An episode breaks the token-exactness contract (see the module docstring).

    Attributes:
        episode: Index of the episode in the input list.
        turn: The turn whose ``prompt_ids`` does not start with the previous turn's
            ``prompt_ids + response_ids``.
        position: First position (in ``turns[turn].prompt_ids``) where they differ; equal
            to ``len(turns[turn].prompt_ids)`` when the prompt is shorter than that prefix.
    """

    def __init__(self, message: str, episode: int, turn: int, position: int) -> None:
        super().__init__(message)
        self.episode = episode
        self.turn = turn
        self.position = position


class _Row(NamedTuple):
    """Turns ``first_turn ..`` of episode `episode`, prefix-consistent: the row's tokens are
    ``turns[-1].prompt_ids + turns[-1].response_ids``, its prompt ``turns[0].prompt_ids``
    and turn ``k``'s policy tokens sit at ``[len(prompt_k), len(prompt_k) + len(response_k))``."""

    episode: int
    first_turn: int
    turns: list[Turn]


def turn_rows(episodes: Sequence[Episode], *, step_ids: bool = False) -> PackedRows:
    """One row per turn: the turn's ``prompt_ids + response_ids``.

    Row order: episode by episode, turn by turn (``B = sum(len(e.turns))``). The row's prompt
    is ``prompt_ids`` (history included), its response is ``response_ids``, all of them
    policy tokens: `response_mask` is 1 exactly on them, `turn_index` is the turn there,
    `token_rewards` holds the turn's reward on its last response token, `reward` the turn's
    reward, `terminated` / `truncated` the turn's flags. This is the layout of Oat
    (``TransitionData``), verl's agent loop returning ``list[AgentLoopOutput]`` and ROLL's
    step env managers.

    Args:
        episodes: Episodes whose turns all have ``prompt_ids`` and non-empty
            ``response_ids``; either every turn has ``response_logprobs`` or none does.
        step_ids: Also fill `RowInfo.state_keys`, `RowInfo.node_ids` and
            `RowInfo.tree_root`, the per-turn ids of GiGPO and tree advantages (a cost per
            turn: an observation without an env state key is JSON-encoded).

    Returns:
        `PackedRows` (call `PackedRows.pad` or `PackedRows.split` for padded arrays).

    Raises:
        ValueError: A turn has no ids or an empty response, or logprobs are present on
            some turns and missing on others.
    """
    rows, with_logprobs = _rows_of(episodes, "per_turn")
    return _pack(rows, with_logprobs, episodes, step_ids=step_ids)


def episode_rows(
    episodes: Sequence[Episode],
    *,
    on_mismatch: Literal["raise", "split"] = "raise",
    step_ids: bool = False,
) -> PackedRows:
    """One row per episode: all turns concatenated token-exactly.

    The row is ``turns[-1].prompt_ids + turns[-1].response_ids``. By the token-exactness
    contract it holds, in order: the first prompt, then for each turn its policy tokens
    (``response_ids``) followed by the env/tool tokens that the next turn's prompt adds.
    `response_mask` is 1 only on policy tokens; `turn_index` gives their turn (-1 on every
    other token); `token_rewards` holds each turn's reward on that turn's last policy token;
    `reward` is the episode's total reward; `terminated` / `truncated` are the last turn's.
    The prompt (``prompt_length``) is ``turns[0].prompt_ids``; the response is everything
    after it. This is the layout of verl's agent loop (one ``AgentLoopOutput``), OpenRLHF,
    RL2 and ROLL's trajectory env manager.

    Args:
        episodes: Episodes with at least one turn, whose turns all have ``prompt_ids`` and
            non-empty ``response_ids``; either every turn has ``response_logprobs`` or none.
        on_mismatch: What to do when ``turns[t].prompt_ids`` does not start with
            ``turns[t - 1].prompt_ids + turns[t - 1].response_ids`` (the chat template
            re-rendered history): ``"raise"`` raises `PrefixMismatchError`; ``"split"``
            starts a new row at turn ``t`` with ``turns[t].prompt_ids`` as its prompt, as RL2
            does, so the episode gives several rows (see `first_turn` / `num_turns`; each
            row's `reward` is the sum over its own turns).
        step_ids: As in `turn_rows`.

    Returns:
        `PackedRows` (call `PackedRows.pad` or `PackedRows.split` for padded arrays).

    Raises:
        PrefixMismatchError: With ``on_mismatch="raise"``, naming the episode, the turn and
            the first differing position.
        ValueError: An episode has no turns, a turn has no ids or an empty response, or
            logprobs are present on some turns and missing on others.
    """
    rows, with_logprobs = _rows_of(episodes, "per_episode", on_mismatch)
    return _pack(rows, with_logprobs, episodes, step_ids=step_ids)


def _rows_of(
    episodes: Sequence[Episode],
    layout: Layout,
    on_mismatch: Literal["raise", "split"] = "raise",
) -> tuple[list[_Row], bool]:
    """The rows of `layout` (`turn_rows`, `episode_rows` with `on_mismatch`) and whether
    the turns carry log-probs, with the checks and errors of those functions."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if layout == "per_episode" and on_mismatch not in ("raise", "split"):
        raise ValueError(f"on_mismatch must be 'raise' or 'split', got {on_mismatch!r}")
    with_logprobs = _check_turns(episodes)
    rows = []
    if layout == "per_turn":
        for e, episode in enumerate(episodes):
            for t, turn in enumerate(episode.turns):
                rows.append(_Row(e, t, [turn]))
        return rows, with_logprobs
    for e, episode in enumerate(episodes):
        turns = episode.turns
        if not turns:
            raise ValueError(f"episode {e} (env {episode.env_id!r}) has no turns")
        first = 0
        for t in range(1, len(turns)):
            if _extends(turns[t - 1], turns[t]):
                continue
            if on_mismatch == "raise":
                raise _mismatch_error(e, episode, t, _first_mismatch(turns[t - 1], turns[t]))
            rows.append(_Row(e, first, turns[first:t]))
            first = t
        rows.append(_Row(e, first, turns[first:]))
    return rows, with_logprobs


def row_lists(
    episodes: Sequence[Episode],
    layout: Layout,
    *,
    on_mismatch: Literal["raise", "split"] = "raise",
    turn_values: ArrayLike | None = None,
) -> RowLists:
    """The rows of `layout` (`turn_rows` or `episode_rows`) as Python lists (`RowLists`).

    The same rows, with the same checks and errors, as ``build_rows(episodes, layout,
    on_mismatch=on_mismatch)``, built from the turns' own id lists without the packed token
    arrays: for trainers that take lists, this costs less than converting `PackedRows`.

    Args:
        episodes: Episodes with token ids (see `turn_rows` and `episode_rows`).
        layout: ``"per_turn"`` or ``"per_episode"``.
        on_mismatch: As in `episode_rows` (ignored for ``"per_turn"``).
        turn_values: ``[N, T]`` one value per turn of each episode (e.g. GiGPO or tree
            advantages, `xpgym.training.advantages.episode_advantages`), read as float64
            and spread over the turns' policy tokens (`RowLists.turn_values`); None: none.

    Raises:
        ValueError: as `build_rows`; `turn_values` is not ``[N, T]`` with a row for every
            episode and a column for every turn of these rows.
    """
    rows, with_logprobs = _rows_of(episodes, layout, on_mismatch)
    spans = _spans(rows, episodes)
    values = None
    if turn_values is not None:
        values = np.asarray(turn_values, dtype=np.float64)
        need = (len(episodes), int(spans.turn_ids.max(initial=-1)) + 1)
        if values.ndim != 2 or values.shape[0] < need[0] or values.shape[1] < need[1]:
            raise ValueError(
                f"turn_values must be [N, T] with N >= {need[0]} episodes and T >= {need[1]} "
                f"turns, got shape {values.shape}"
            )
    info = _row_info(rows, episodes, spans, step_ids=False)
    n_rows = len(rows)
    # Every output list is made before any is filled (`_new_lists`).
    prompt_ids, response_ids, response_mask, token_rewards = (_new_lists(n_rows) for _ in range(4))
    logprobs = _new_lists(n_rows) if with_logprobs else None
    per_turn = None if values is None else _new_lists(n_rows)
    for row, prompt_row, response_row, n in zip(
        rows, prompt_ids, response_ids, spans.prompt_length.tolist(), strict=True
    ):
        prompt, response = _ids(row.turns[-1])
        prompt_row += prompt[:n]
        response_row += prompt[n:]
        response_row += response
    # The responses one after the other: row b's at [bounds[b], bounds[b + 1]).
    bounds = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(info["response_length"], out=bounds[1:])
    n_tokens = int(bounds[-1])
    # Each turn's first policy token there: its packed position less its row's prompt and
    # the tokens of the rows before it.
    row_offset = spans.cu_seqlens[:-1] + spans.prompt_length - bounds[:-1]
    starts = spans.starts - row_offset[spans.row_of_turn]
    segments = _segments(starts, spans.span_lengths, n_tokens)
    learn = spans.learn_span
    _fill_lists(response_mask, _on_spans(learn.astype(np.int64), 0, segments), bounds)
    _fill_mostly_zero(token_rewards, _span_rewards(spans, starts, n_tokens), bounds)
    if logprobs is not None:
        _fill_lists(logprobs, _span_logprobs(spans, segments), bounds)
    if values is not None and per_turn is not None:  # both or neither
        episode_of_turn = info["episode_index"][spans.row_of_turn]
        turn_value = np.where(learn, values[episode_of_turn, spans.turn_ids], 0.0)
        _fill_lists(per_turn, _on_spans(turn_value, 0.0, segments), bounds)
    return RowLists(
        **info,
        prompt_ids=prompt_ids,
        response_ids=response_ids,
        response_mask=response_mask,
        token_rewards=token_rewards,
        rollout_logprobs=logprobs,
        turn_values=per_turn,
    )


def _new_lists(n: int) -> list[list[Any]]:
    """``n`` empty lists, to be filled in place.

    `row_lists` makes all its output lists before it fills any: CPython collects its young
    generation after every few hundred new container objects (``gc.get_threshold()[0]``),
    visiting every element of every young list, so collections that the call itself triggers
    visit empty lists instead of rows of hundreds of values.
    """
    return [[] for _ in range(n)]


def _fill_lists(out: list[list[Any]], values: np.ndarray, bounds: np.ndarray) -> None:
    """Extend ``out[b]`` by ``values[bounds[b]:bounds[b + 1]]`` as Python numbers."""
    for row, a, b in zip(out, bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        row += values[a:b].tolist()


def _fill_mostly_zero(out: list[list[float]], values: np.ndarray, bounds: np.ndarray) -> None:
    """`_fill_lists` for ``[N]`` float values that are mostly ``+0.0`` (token rewards):
    ``[0.0] * n`` with the other entries written in, so only those become new Python
    floats."""
    for row, n in zip(out, np.diff(bounds).tolist(), strict=True):
        row += [0.0] * n
    cells = np.flatnonzero(np.signbit(values) | (values != 0))  # -0.0 and NaN included
    row_of_cell = np.searchsorted(bounds, cells, side="right") - 1
    offset = cells - bounds[row_of_cell]
    for b, k, value in zip(
        row_of_cell.tolist(), offset.tolist(), values[cells].tolist(), strict=True
    ):
        out[b][k] = value


def _check_turns(episodes: Sequence[Episode]) -> bool:
    """Check every turn has ids and a response; return whether turns carry logprobs."""
    seen: tuple[bool, int, int] | None = None
    for e, episode in enumerate(episodes):
        for t, turn in enumerate(episode.turns):
            if turn.prompt_ids is None or turn.response_ids is None:
                raise ValueError(
                    f"{_where(e, episode, t)} has no token ids (prompt_ids or response_ids is "
                    f"None); token layouts need episodes collected with a tokenizer"
                )
            if not turn.response_ids:
                raise ValueError(
                    f"{_where(e, episode, t)} has an empty response_ids; every turn needs at "
                    f"least one policy token (its reward sits on the last one)"
                )
            logprobs = turn.response_logprobs
            has = logprobs is not None
            if logprobs is not None and len(logprobs) != len(turn.response_ids):
                raise ValueError(
                    f"{_where(e, episode, t)} has {len(logprobs)} response_logprobs for "
                    f"{len(turn.response_ids)} response_ids"
                )
            if seen is None:
                seen = (has, e, t)
            elif has != seen[0]:
                _, e0, t0 = seen
                raise ValueError(
                    f"episode {e0} turn {t0} {'has' if seen[0] else 'has no'} "
                    f"response_logprobs but {_where(e, episode, t)} "
                    f"{'has' if has else 'has none'}; either every turn carries sampler "
                    f"logprobs or none does"
                )
    return seen is not None and seen[0]


def _where(e: int, episode: Episode, t: int) -> str:
    """Turn `t` of episode `e`, for error messages (built only when one is raised)."""
    return f"episode {e} (env {episode.env_id!r}) turn {t}"


def _ids(turn: Turn) -> tuple[list[int], list[int]]:
    """``(prompt_ids, response_ids)`` of a turn `_check_turns` accepted."""
    if turn.prompt_ids is None or turn.response_ids is None:
        raise ValueError("turn without token ids")  # unreachable after _check_turns
    return turn.prompt_ids, turn.response_ids


def _extends(previous: Turn, turn: Turn) -> bool:
    """Whether ``turn.prompt_ids`` starts with the previous turn's ``prompt_ids +
    response_ids`` (list slices, compared in C)."""
    before, response = _ids(previous)
    prompt, _ = _ids(turn)
    n = len(before)
    return prompt[:n] == before and prompt[n : n + len(response)] == response


def _first_mismatch(previous: Turn, turn: Turn) -> tuple[int, int, int | None]:
    """``(position, expected, got)`` where ``turn.prompt_ids`` leaves the previous turn's
    ``prompt_ids + response_ids`` (``got`` is ``None`` when the prompt is too short), for a
    turn that does not `_extends` it."""
    before, response = _ids(previous)
    prompt, _ = _ids(turn)
    expected = before + response
    for position, (want, got) in enumerate(zip(expected, prompt, strict=False)):
        if want != got:
            return position, want, got
    return len(prompt), expected[len(prompt)], None


def _mismatch_error(
    e: int, episode: Episode, t: int, mismatch: tuple[int, int, int | None]
) -> PrefixMismatchError:
    position, expected, got = mismatch
    found = "the prompt ends there" if got is None else f"got token {got}"
    return PrefixMismatchError(
        f"episode {e} (env {episode.env_id!r}) is not prefix-consistent at turn {t}: "
        f"turns[{t}].prompt_ids differs from turns[{t - 1}].prompt_ids + "
        f"turns[{t - 1}].response_ids at position {position} (expected token {expected}, "
        f"{found}); build prompts by appending (ChatPromptBuilder.extend) rather than "
        f"re-rendering the history, or pass on_mismatch='split' to start a new row there",
        e,
        t,
        position,
    )


def _whole_trees(episodes: Sequence[Episode]) -> bool:
    """Whether `episodes` are whole trees: every one has an ``episode_id`` and every branch's
    parent is among them (what `tree_nodes` needs)."""
    ids = {episode.episode_id for episode in episodes}
    return None not in ids and all(
        episode.parent_id is None or episode.parent_id in ids for episode in episodes
    )


class _Spans(NamedTuple):
    """Where the rows' turns sit (`_spans`): per row ``[B]``, per turn ``[K]`` (the rows'
    turns in order), positions counted in the packed tokens (`PackedRows`)."""

    turns: list[Turn]  # [K]
    num_turns: np.ndarray  # [B] int64
    lengths: np.ndarray  # [B] int64, tokens per row
    prompt_length: np.ndarray  # [B] int64, the row's prompt: its first turn's prompt
    cu_seqlens: np.ndarray  # [B + 1] int64
    first_turn: np.ndarray  # [B] int64
    infra: np.ndarray  # [B] bool, the row's episode is an infra error
    row_of_turn: np.ndarray  # [K] int64
    starts: np.ndarray  # [K] int64, the first policy token of each turn
    span_lengths: np.ndarray  # [K] int64, policy tokens of each turn
    turn_ids: np.ndarray  # [K] int64, each turn's index in its episode
    learn_span: np.ndarray  # [K] bool, the turn's row is not an infra-error row


def _spans(rows: list[_Row], episodes: Sequence[Episode]) -> _Spans:
    n_rows = len(rows)
    turn_list = [turn for row in rows for turn in row.turns]
    n_turns = len(turn_list)
    num_turns = np.fromiter((len(row.turns) for row in rows), np.int64, count=n_rows)
    # Per turn: the length of its prompt and response, and the row it belongs to.
    prompt_lengths = np.fromiter(
        (len(_ids(turn)[0]) for turn in turn_list), np.int64, count=n_turns
    )
    span_lengths = np.fromiter((len(_ids(turn)[1]) for turn in turn_list), np.int64, count=n_turns)
    row_of_turn = np.repeat(np.arange(n_rows), num_turns)
    last_turn = np.cumsum(num_turns) - 1  # a row's tokens: its last turn's prompt + response
    first_of_row = last_turn + 1 - num_turns  # a row's prompt: its first turn's
    lengths = prompt_lengths[last_turn] + span_lengths[last_turn]
    cu_seqlens = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=cu_seqlens[1:])
    first_turn = np.fromiter((row.first_turn for row in rows), np.int64, count=n_rows)
    infra = np.array([episodes[row.episode].infra_error is not None for row in rows], bool)
    return _Spans(
        turns=turn_list,
        num_turns=num_turns,
        lengths=lengths,
        prompt_length=prompt_lengths[first_of_row],
        cu_seqlens=cu_seqlens,
        first_turn=first_turn,
        infra=infra,
        row_of_turn=row_of_turn,
        starts=cu_seqlens[row_of_turn] + prompt_lengths,
        span_lengths=span_lengths,
        turn_ids=(first_turn - first_of_row)[row_of_turn] + np.arange(n_turns),
        # Spans of infra-error rows keep their log-probs but nothing to learn from.
        learn_span=~infra[row_of_turn],
    )


def _row_info(
    rows: list[_Row], episodes: Sequence[Episode], spans: _Spans, *, step_ids: bool
) -> dict[str, Any]:
    """The `RowInfo` fields of `rows` (positions as collected: nothing is truncated)."""
    n_rows = len(rows)
    group_ids = training_group_ids(episodes)
    group_id = np.empty(n_rows, dtype=object)
    group_id[:] = [group_ids[row.episode] for row in rows]
    state_keys = node_ids = tree_root = None
    if step_ids:
        state_keys = _per_row_turns(rows, turn_state_keys(episodes))
        if _whole_trees(episodes):
            roots, nodes = tree_nodes(episodes)
            node_ids = _per_row_turns(rows, nodes)
            tree_root = np.empty(n_rows, dtype=object)  # an infra-error row: its own tree
            tree_root[:] = [
                group_ids[row.episode] if failed else roots[row.episode]
                for row, failed in zip(rows, spans.infra.tolist(), strict=True)
            ]
    return {
        "episode_index": np.array([row.episode for row in rows], dtype=np.int64),
        "first_turn": spans.first_turn,
        "num_turns": spans.num_turns,
        "group_id": group_id,
        "prompt_length": spans.prompt_length,
        "response_length": spans.lengths - spans.prompt_length,
        "reward": np.array([math.fsum(t.reward for t in row.turns) for row in rows], np.float32),
        "terminated": np.array([row.turns[-1].terminated for row in rows], dtype=bool),
        "truncated": np.array([row.turns[-1].truncated for row in rows], dtype=bool),
        "overlong": np.zeros(n_rows, dtype=bool),
        "infra_error": spans.infra,
        "state_keys": state_keys,
        "node_ids": node_ids,
        "tree_root": tree_root,
    }


def _pack(
    rows: list[_Row], with_logprobs: bool, episodes: Sequence[Episode], *, step_ids: bool
) -> PackedRows:
    spans = _spans(rows, episodes)
    cu_seqlens, lengths = spans.cu_seqlens, spans.lengths
    n_tokens = int(cu_seqlens[-1])
    last_ids = [part for row in rows for part in _ids(row.turns[-1])]
    input_ids = np.fromiter(chain.from_iterable(last_ids), np.int64, count=n_tokens)
    position_ids = np.arange(n_tokens, dtype=np.int64)
    position_ids -= np.repeat(cu_seqlens[:-1], lengths)
    segments = _segments(spans.starts, spans.span_lengths, n_tokens)
    learn_span = spans.learn_span
    return PackedRows(
        **_row_info(rows, episodes, spans, step_ids=step_ids),
        input_ids=input_ids,
        position_ids=position_ids,
        response_mask=_on_spans(learn_span.astype(np.int64), 0, segments),
        turn_index=_on_spans(np.where(learn_span, spans.turn_ids, -1), -1, segments),
        token_rewards=_span_rewards(spans, spans.starts, n_tokens),
        rollout_logprobs=_span_logprobs(spans, segments) if with_logprobs else None,
        cu_seqlens=cu_seqlens,
    )


def _segments(starts: np.ndarray, span_lengths: np.ndarray, n_tokens: int) -> np.ndarray:
    """``[2K + 1]`` int64: the lengths of the runs outside and inside ``K`` spans,
    alternately, over `n_tokens` tokens (span ``k``: ``[starts[k], starts[k] +
    span_lengths[k])``, in order and apart)."""
    segments = np.empty(2 * len(starts) + 1, dtype=np.int64)
    segments[0::2] = np.append(starts, n_tokens) - np.append(0, starts + span_lengths)
    segments[1::2] = span_lengths
    return segments


def _span_rewards(spans: _Spans, starts: np.ndarray, n_tokens: int) -> np.ndarray:
    """``[n_tokens]`` float32: each learnable turn's reward on its last policy token (turn
    ``k``'s tokens start at ``starts[k]``), 0 elsewhere."""
    token_rewards = np.zeros(n_tokens, dtype=np.float32)
    rewards = np.array([turn.reward for turn in spans.turns], dtype=np.float32)
    learn = spans.learn_span
    token_rewards[(starts + spans.span_lengths - 1)[learn]] = rewards[learn]
    return token_rewards


def _span_logprobs(spans: _Spans, segments: np.ndarray) -> np.ndarray:
    """``[N]`` float32 (`segments` over ``N`` tokens): each turn's sampler log-probs on its
    policy tokens (infra-error rows too), 0 elsewhere; every turn carries them."""
    n_tokens = int(segments.sum())
    logprobs = np.zeros(n_tokens, dtype=np.float32)
    logprobs[_on_spans(np.ones(len(spans.turns), bool), False, segments)] = np.fromiter(
        # `_check_turns` found log-probs on every turn (`with_logprobs`)
        chain.from_iterable(cast(list[float], turn.response_logprobs) for turn in spans.turns),
        np.float32,
        count=int(spans.span_lengths.sum()),
    )
    return logprobs


def _on_spans(values: np.ndarray, elsewhere: Any, segments: np.ndarray) -> np.ndarray:
    """``[N]``: ``values[k]`` on every token of span ``k``, `elsewhere` on the other tokens
    (`segments`: `_segments` of the ``K`` spans)."""
    runs = np.full(len(segments), elsewhere, dtype=values.dtype)
    runs[1::2] = values
    return np.repeat(runs, segments)


def _per_row_turns(rows: list[_Row], per_turn: list[list[str]]) -> np.ndarray:
    """``[B]`` object: for each row the tuple of ``per_turn[episode][t]`` over its turns."""
    out = np.empty(len(rows), dtype=object)
    out[:] = [
        tuple(per_turn[row.episode][row.first_turn : row.first_turn + len(row.turns)])
        for row in rows
    ]
    return out


# --------------------------------------------------------------------------------------
# Helpers several adapters share
# --------------------------------------------------------------------------------------


def build_rows(
    episodes: Sequence[Episode],
    layout: Layout,
    *,
    on_mismatch: Literal["raise", "split"] = "raise",
    step_ids: bool = False,
) -> PackedRows:
    """`turn_rows` for ``"per_turn"``, `episode_rows` for ``"per_episode"``.

    Args:
        episodes: Episodes with token ids (see `xpgym.core.trajectory`).
        layout: ``"per_turn"`` (one row per turn) or ``"per_episode"`` (one row per episode).
        on_mismatch: Passed to `episode_rows` (ignored for ``"per_turn"``).
        step_ids: Passed to the layout (`turn_rows`).

    Raises:
        ValueError: unknown `layout`, or the layout's own errors.
    """
    rows, with_logprobs = _rows_of(episodes, layout, on_mismatch)
    return _pack(rows, with_logprobs, episodes, step_ids=step_ids)


def on_last_policy_token(values: ArrayLike, response_mask: ArrayLike) -> NDArray[np.float32]:
    """``[B, L]`` float32: ``values[b]`` on row ``b``'s last policy token, 0 elsewhere.

    The padded counterpart of `PackedRows.with_row_rewards`.

    Args:
        values: ``[B]`` one number per row (e.g. `xpgym.training.advantages.row_returns`).
        response_mask: ``[B, L]`` 0/1, 1 on policy tokens; a row without one (an
            infra-error row) must have value 0 and gets nothing.

    Raises:
        ValueError: shapes disagree, or a row without a policy token has a non-zero value.
    """
    vals = np.asarray(values, dtype=np.float64)
    mask = np.asarray(response_mask).astype(bool, copy=False)  # read only
    if mask.ndim != 2 or vals.shape != (mask.shape[0],):
        raise ValueError(
            f"values must be [B] and response_mask [B, L]; got {vals.shape} and {mask.shape}"
        )
    has = mask.any(axis=1)
    stranded = ~has & (vals != 0)
    if stranded.any():
        raise ValueError(
            f"row {int(np.flatnonzero(stranded)[0])} has no policy token to put its value on"
        )
    last = mask.shape[1] - 1 - np.argmax(mask[:, ::-1], axis=1)
    out = np.zeros(mask.shape, dtype=np.float32)
    out[np.flatnonzero(has), last[has]] = vals[has]
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
    """``[B, L]`` int64: ``0, 1, ...`` on each row's real tokens, 0 at padding (RL2, ROLL;
    `PaddedRows.position_ids` repeats the last position instead, verl's formula).

    Args:
        attention_mask: ``[B, L]`` 0/1 (right padding: each row's ones are a prefix).
    """
    mask = np.asarray(attention_mask) != 0
    if mask.ndim != 2:
        raise ValueError(f"attention_mask must be [B, L]; got shape {mask.shape}")
    return np.arange(mask.shape[1], dtype=np.int64) * mask
