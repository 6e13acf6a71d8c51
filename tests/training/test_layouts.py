"""Specification of the token layouts (`xpgym.training.layouts`): rows, forms, limits."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, cast

import numpy as np
import pytest
from adapter_cases import GROUPS, episodes, with_failed_member
from hypothesis import given
from hypothesis import strategies as st

from xpgym.core.trajectory import Episode, Turn
from xpgym.training.layouts import (
    LAYOUTS,
    PackedRows,
    PrefixMismatchError,
    RowInfo,
    RowLists,
    build_rows,
    episode_rows,
    on_last_policy_token,
    row_lists,
    shift_to_predictions,
    turn_rows,
)

PAD = 0  # also a real token id below: padding is told apart by attention_mask only

# --------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------

token_ids = st.integers(0, 60)


@st.composite
def token_episode(draw: st.DrawFn, with_logprobs: bool, env_id: str = "toy") -> Episode:
    """A prefix-consistent episode: each prompt = last prompt + last response + env tokens."""
    n_turns = draw(st.integers(1, 4))
    prompt = draw(st.lists(token_ids, max_size=6))
    turns = []
    for t in range(n_turns):
        response = draw(st.lists(token_ids, min_size=1, max_size=5))
        logprobs = None
        if with_logprobs:
            lp = st.floats(-20, 0, width=32)
            logprobs = draw(st.lists(lp, min_size=len(response), max_size=len(response)))
        last = t == n_turns - 1
        terminated = last and draw(st.booleans())
        turns.append(
            Turn(
                observation=f"o{t}",
                action=f"a{t}",
                reward=draw(st.floats(-5, 5, width=32)),  # exact in float32
                terminated=terminated,
                truncated=last and not terminated and draw(st.booleans()),
                prompt_ids=prompt,
                response_ids=response,
                response_logprobs=logprobs,
            )
        )
        prompt = prompt + response + draw(st.lists(token_ids, max_size=4))
    return Episode(env_id, turns=turns)


@st.composite
def token_batches(draw: st.DrawFn, min_size: int = 0) -> list[Episode]:
    with_logprobs = draw(st.booleans())
    n = draw(st.integers(min_size, 4))
    return [draw(token_episode(with_logprobs, env_id=f"toy{i}")) for i in range(n)]


def token_episode_of(*turn_specs: tuple[list[int], list[int], float]) -> Episode:
    """An episode from ``(prompt_ids, response_ids, reward)`` triples, last one terminated."""
    turns = [
        Turn(f"o{t}", f"a{t}", r, terminated=t == len(turn_specs) - 1, prompt_ids=p, response_ids=a)
        for t, (p, a, r) in enumerate(turn_specs)
    ]
    return Episode("toy", turns=turns)


def real(row: np.ndarray, attention: np.ndarray) -> list[Any]:
    return row[attention == 1].tolist()


def expected_row(episode: Episode) -> dict[str, list[Any]]:
    """What an episode row must hold, computed from the definitions, token by token."""
    last = episode.turns[-1]
    ids = last.prompt_ids + last.response_ids
    mask, turn, rewards, logprobs = (
        [0] * len(ids),
        [-1] * len(ids),
        [0.0] * len(ids),
        [0.0] * len(ids),
    )
    for t, tr in enumerate(episode.turns):
        start = len(tr.prompt_ids)
        for k in range(len(tr.response_ids)):
            mask[start + k], turn[start + k] = 1, t
            if tr.response_logprobs is not None:
                logprobs[start + k] = tr.response_logprobs[k]
        rewards[start + len(tr.response_ids) - 1] = tr.reward
    return {"ids": ids, "mask": mask, "turn": turn, "rewards": rewards, "logprobs": logprobs}


# --------------------------------------------------------------------------------------
# Per-turn rows
# --------------------------------------------------------------------------------------


@given(token_batches())
def test_turn_rows_are_each_turns_prompt_plus_response(episodes: list[Episode]) -> None:
    rows = turn_rows(episodes).pad(pad_token_id=PAD)
    turns = [turn for episode in episodes for turn in episode.turns]
    assert len(rows) == len(turns)
    for b, turn in enumerate(turns):
        ids = real(rows.input_ids[b], rows.attention_mask[b])
        assert ids == turn.prompt_ids + turn.response_ids
        assert rows.input_ids[b][rows.response_mask[b] == 1].tolist() == turn.response_ids
        assert rows.prompt_length[b] == len(turn.prompt_ids)
        assert rows.response_length[b] == len(turn.response_ids)


@given(token_batches())
def test_turn_rows_carry_episode_turn_reward_and_flags(episodes: list[Episode]) -> None:
    rows = turn_rows(episodes)
    expected = [(e, t, turn) for e, ep in enumerate(episodes) for t, turn in enumerate(ep.turns)]
    assert rows.episode_index.tolist() == [e for e, _, _ in expected]
    assert rows.first_turn.tolist() == [t for _, t, _ in expected]
    assert rows.num_turns.tolist() == [1] * len(expected)
    assert rows.reward.tolist() == [turn.reward for _, _, turn in expected]
    assert rows.terminated.tolist() == [turn.terminated for _, _, turn in expected]
    assert rows.truncated.tolist() == [turn.truncated for _, _, turn in expected]


@given(token_batches())
def test_turn_rows_reward_sits_on_last_response_token(episodes: list[Episode]) -> None:
    rows = turn_rows(episodes).pad(pad_token_id=PAD)
    for b in range(len(rows)):
        last = rows.prompt_length[b] + rows.response_length[b] - 1
        expected = np.zeros(rows.token_rewards.shape[1], dtype=np.float32)
        expected[last] = rows.reward[b]
        assert rows.token_rewards[b].tolist() == expected.tolist()


# --------------------------------------------------------------------------------------
# Per-episode rows
# --------------------------------------------------------------------------------------


@given(token_batches())
def test_episode_row_holds_exactly_the_defined_tokens_masks_rewards(
    episodes: list[Episode],
) -> None:
    rows = episode_rows(episodes).pad(pad_token_id=PAD)
    assert len(rows) == len(episodes)
    for b, episode in enumerate(episodes):
        want, n = expected_row(episode), len(expected_row(episode)["ids"])
        assert rows.input_ids[b, :n].tolist() == want["ids"]
        assert rows.response_mask[b, :n].tolist() == want["mask"]
        assert rows.turn_index[b, :n].tolist() == want["turn"]
        assert rows.token_rewards[b, :n].tolist() == want["rewards"]
        if rows.rollout_logprobs is not None:
            assert rows.rollout_logprobs[b, :n].tolist() == want["logprobs"]


@given(token_batches())
def test_episode_row_policy_tokens_are_all_responses_in_order(episodes: list[Episode]) -> None:
    rows = episode_rows(episodes).pad(pad_token_id=PAD)
    for b, episode in enumerate(episodes):
        policy = rows.input_ids[b][rows.response_mask[b] == 1].tolist()
        assert policy == [i for turn in episode.turns for i in turn.response_ids]


@given(token_batches())
def test_episode_row_is_last_prompt_plus_last_response(episodes: list[Episode]) -> None:
    rows = episode_rows(episodes).pad(pad_token_id=PAD)
    for b, episode in enumerate(episodes):
        last = episode.turns[-1]
        assert (
            real(rows.input_ids[b], rows.attention_mask[b]) == last.prompt_ids + last.response_ids
        )
        assert rows.prompt_length[b] == len(episode.turns[0].prompt_ids)


@given(token_batches())
def test_episode_rows_reward_sums_to_total_reward(episodes: list[Episode]) -> None:
    rows = episode_rows(episodes).pad(pad_token_id=PAD)
    for b, episode in enumerate(episodes):
        assert rows.token_rewards[b].sum(dtype=np.float64) == pytest.approx(episode.total_reward)
        assert rows.reward[b] == pytest.approx(episode.total_reward, rel=1e-6, abs=1e-6)
        assert rows.num_turns[b] == len(episode.turns)
        assert rows.terminated[b] == episode.turns[-1].terminated


@given(token_batches())
def test_each_reward_sits_on_its_turns_last_policy_token(episodes: list[Episode]) -> None:
    rows = episode_rows(episodes).pad(pad_token_id=PAD)
    for b, episode in enumerate(episodes):
        for t, turn in enumerate(episode.turns):
            policy = np.flatnonzero(rows.turn_index[b] == t)
            assert rows.token_rewards[b, policy[-1]] == np.float32(turn.reward)
            assert not rows.token_rewards[b, policy[:-1]].any()
        off_policy = rows.response_mask[b] == 0
        assert not rows.token_rewards[b, off_policy].any()


@pytest.mark.parametrize("layout", ["per_episode", "per_turn"])
@given(episodes=token_batches())
def test_turn_values_sit_on_each_turns_last_policy_token(
    layout: Any, episodes: list[Episode]
) -> None:
    horizon = max((len(e.turns) for e in episodes), default=0)
    values = np.arange(1, len(episodes) * horizon + 1, dtype=np.float64)
    values = values.reshape(len(episodes), horizon)
    rows = build_rows(episodes, layout).with_turn_values(values).pad(pad_token_id=PAD)
    for b in range(len(rows)):
        e = int(rows.episode_index[b])
        for t in set(rows.turn_index[b][rows.turn_index[b] >= 0].tolist()):
            policy = np.flatnonzero(rows.turn_index[b] == t)
            assert rows.token_rewards[b, policy[-1]] == np.float32(values[e, t])
            assert not rows.token_rewards[b, policy[:-1]].any()
        assert not rows.token_rewards[b, rows.turn_index[b] < 0].any()


def test_turn_values_need_a_value_for_every_turn() -> None:
    rows = episode_rows(episodes())
    with pytest.raises(ValueError, match=r"values must be \[N, T\]"):
        rows.with_turn_values(np.zeros((len(episodes()), 1)))


@given(token_batches())
def test_turn_index_is_minus_one_exactly_off_policy_tokens(episodes: list[Episode]) -> None:
    for rows in (
        turn_rows(episodes).pad(pad_token_id=PAD),
        episode_rows(episodes).pad(pad_token_id=PAD),
    ):
        assert ((rows.turn_index >= 0) == (rows.response_mask == 1)).all()


# --------------------------------------------------------------------------------------
# Both layouts, all forms
# --------------------------------------------------------------------------------------

layouts = pytest.mark.parametrize("layout", [turn_rows, episode_rows], ids=["turn", "episode"])


@layouts
@given(episodes=token_batches())
def test_mask_sum_equals_total_response_tokens(layout: Any, episodes: list[Episode]) -> None:
    total = sum(len(turn.response_ids) for episode in episodes for turn in episode.turns)
    packed = layout(episodes)
    assert packed.response_mask.sum() == total
    assert packed.pad(pad_token_id=PAD).response_mask.sum() == total
    assert packed.split(pad_token_id=PAD).response_mask.sum() == total


@layouts
@given(episodes=token_batches(), pad=st.integers(0, 99))
def test_padding_has_pad_id_zero_attention_and_no_signal(
    layout: Any, episodes: list[Episode], pad: int
) -> None:
    packed = layout(episodes)
    rows = packed.pad(pad_token_id=pad)
    padding = rows.attention_mask == 0
    assert (rows.attention_mask.sum(1) == packed.lengths).all()
    assert (rows.input_ids[padding] == pad).all()
    assert (rows.response_mask[padding] == 0).all()
    assert (rows.turn_index[padding] == -1).all()
    assert (rows.token_rewards[padding] == 0).all()
    # right padding: real tokens first
    assert (np.diff(rows.attention_mask, axis=1) <= 0).all()
    split = packed.split(pad_token_id=pad)
    assert (split.input_ids[split.attention_mask == 0] == pad).all()
    p = split.prompts.shape[1]
    # prompts left-padded, responses right-padded
    assert (np.diff(split.attention_mask[:, :p], axis=1) >= 0).all()
    assert (np.diff(split.attention_mask[:, p:], axis=1) <= 0).all()


@layouts
@given(episodes=token_batches())
def test_logprobs_sit_on_policy_tokens_else_zero(layout: Any, episodes: list[Episode]) -> None:
    rows = layout(episodes).pad(pad_token_id=PAD)
    if rows.rollout_logprobs is None:
        assert all(t.response_logprobs is None for e in episodes for t in e.turns)
        return
    assert not rows.rollout_logprobs[rows.response_mask == 0].any()
    for b in range(len(rows)):
        e, first, n = rows.episode_index[b], rows.first_turn[b], rows.num_turns[b]
        want = [x for turn in episodes[e].turns[first : first + n] for x in turn.response_logprobs]
        assert rows.rollout_logprobs[b][rows.response_mask[b] == 1].tolist() == want


@layouts
@given(episodes=token_batches())
def test_split_form_rejoined_equals_single_form(layout: Any, episodes: list[Episode]) -> None:
    packed = layout(episodes)
    single, split = packed.pad(pad_token_id=PAD), packed.split(pad_token_id=PAD)
    p = split.prompts.shape[1]
    assert (split.input_ids == np.concatenate([split.prompts, split.responses], 1)).all()
    assert split.attention_mask.shape == split.position_ids.shape == split.input_ids.shape
    for b in range(len(packed)):
        keep, n = split.attention_mask[b] == 1, packed.lengths[b]
        assert split.input_ids[b][keep].tolist() == single.input_ids[b, :n].tolist()
        assert split.position_ids[b][keep].tolist() == single.position_ids[b, :n].tolist()
        response = split.attention_mask[b, p:] == 1
        start = packed.prompt_length[b]
        for name in ("response_mask", "turn_index", "token_rewards", "rollout_logprobs"):
            s, f = getattr(split, name), getattr(single, name)
            if s is not None:
                assert s[b][response].tolist() == f[b, start:n].tolist()
        # nothing trainable sits in the prompt
        assert not single.response_mask[b, :start].any()


@given(token_batches())
def test_split_episode_response_is_everything_after_first_prompt(episodes: list[Episode]) -> None:
    split = episode_rows(episodes).split(pad_token_id=PAD)
    p = split.prompts.shape[1]
    for b, episode in enumerate(episodes):
        first, last = episode.turns[0], episode.turns[-1]
        assert real(split.prompts[b], split.attention_mask[b, :p]) == first.prompt_ids
        response = real(split.responses[b], split.attention_mask[b, p:])
        assert response == (last.prompt_ids + last.response_ids)[len(first.prompt_ids) :]


@layouts
@given(episodes=token_batches())
def test_position_ids_count_real_tokens(layout: Any, episodes: list[Episode]) -> None:
    packed = layout(episodes)
    for rows in (packed.pad(pad_token_id=PAD), packed.split(pad_token_id=PAD)):
        expected = np.clip(np.cumsum(rows.attention_mask, axis=1) - 1, 0, None)
        assert (rows.position_ids == expected).all()
    for b in range(len(packed)):
        start, stop = packed.cu_seqlens[b], packed.cu_seqlens[b + 1]
        assert packed.position_ids[start:stop].tolist() == list(range(stop - start))


def test_dtypes_and_shapes() -> None:
    episode = token_episode_of(([1, 2], [3, 4], 1.0), ([1, 2, 3, 4, 5], [6], 2.0))
    rows = episode_rows([episode, episode]).pad(pad_token_id=PAD)
    for name in ("input_ids", "attention_mask", "position_ids", "response_mask", "turn_index"):
        assert getattr(rows, name).dtype == np.int64
        assert getattr(rows, name).shape == (2, 6)
    assert rows.token_rewards.dtype == np.float32
    assert rows.rollout_logprobs is None
    assert rows.reward.dtype == np.float32
    assert rows.terminated.dtype == rows.overlong.dtype == np.bool_
    split = episode_rows([episode]).split(pad_token_id=PAD)
    assert split.prompts.shape == (1, 2)
    assert split.responses.shape == (1, 4)
    assert split.response_mask.tolist() == [[1, 1, 0, 1]]
    assert split.token_rewards.tolist() == [[0.0, 1.0, 0.0, 2.0]]


def test_empty_batch_gives_zero_rows() -> None:
    for layout in (turn_rows, episode_rows):
        packed = layout([])
        assert len(packed) == 0
        assert packed.pad(pad_token_id=PAD).input_ids.shape == (0, 0)
        assert packed.split(pad_token_id=PAD).input_ids.shape == (0, 0)
        assert packed.pad(
            pad_token_id=PAD, max_length=4, pad_to_max_length=True
        ).input_ids.shape == (0, 4)


# --------------------------------------------------------------------------------------
# Prefix mismatch
# --------------------------------------------------------------------------------------


@given(st.data())
def test_prefix_mismatch_raises_naming_episode_turn_and_position(data: st.DataObject) -> None:
    episodes = data.draw(token_batches(min_size=1))
    e = data.draw(
        st.sampled_from([i for i, ep in enumerate(episodes) if len(ep.turns) > 1] or [-1])
    )
    if e == -1:
        return
    turns = episodes[e].turns
    t = data.draw(st.integers(1, len(turns) - 1))
    prefix = len(turns[t - 1].prompt_ids) + len(turns[t - 1].response_ids)
    position = data.draw(st.integers(0, prefix - 1))
    turns[t].prompt_ids = list(turns[t].prompt_ids)
    turns[t].prompt_ids[position] += 100  # a token no strategy draws
    with pytest.raises(
        PrefixMismatchError, match=f"episode {e} .*turn {t}.*position {position}"
    ) as info:
        episode_rows(episodes)
    assert (info.value.episode, info.value.turn, info.value.position) == (e, t, position)


def test_prefix_mismatch_when_next_prompt_is_shorter() -> None:
    episode = token_episode_of(([1, 2], [3, 4], 0.0), ([1, 2, 3], [5], 1.0))
    with pytest.raises(PrefixMismatchError, match=r"position 3.*prompt ends there"):
        episode_rows([episode])


def test_turn_rows_do_not_need_prefix_consistency() -> None:
    episode = token_episode_of(([1, 2], [3], 0.0), ([9, 9], [5], 1.0))
    assert len(turn_rows([episode])) == 2


def test_on_mismatch_split_starts_a_new_row_at_the_mismatched_turn() -> None:
    episode = token_episode_of(
        ([1, 2], [3], 0.5),
        ([1, 2, 3, 7], [4], 1.0),
        ([9, 9], [5, 6], 2.0),  # history re-rendered: new row
        ([9, 9, 5, 6, 8], [10], 4.0),
    )
    rows = episode_rows([episode], on_mismatch="split").pad(pad_token_id=PAD)
    assert rows.episode_index.tolist() == [0, 0]
    assert rows.first_turn.tolist() == [0, 2]
    assert rows.num_turns.tolist() == [2, 2]
    assert rows.reward.tolist() == [1.5, 6.0]
    assert rows.terminated.tolist() == [False, True]
    assert real(rows.input_ids[0], rows.attention_mask[0]) == [1, 2, 3, 7, 4]
    assert real(rows.input_ids[1], rows.attention_mask[1]) == [9, 9, 5, 6, 8, 10]
    assert rows.prompt_length.tolist() == [2, 2]
    assert rows.turn_index[1, :6].tolist() == [-1, -1, 2, 2, -1, 3]
    assert rows.token_rewards[1, :6].tolist() == [0, 0, 0, 2.0, 0, 4.0]


# --------------------------------------------------------------------------------------
# Length limits
# --------------------------------------------------------------------------------------


LONG = token_episode_of(([1, 2], [3, 4], 1.0), ([1, 2, 3, 4, 5, 6], [7, 8], 2.0))  # 8 tokens


def test_pad_raises_when_a_row_exceeds_max_length() -> None:
    with pytest.raises(
        ValueError, match=r"row 0 \(episode 0, turns 0..1\) has 8 tokens.*max_length=7"
    ):
        episode_rows([LONG]).pad(pad_token_id=PAD, max_length=7)


def test_truncate_keeps_first_tokens_and_moves_cut_rewards() -> None:
    rows = episode_rows([LONG]).pad(pad_token_id=PAD, max_length=7, truncate=True)
    assert rows.input_ids.tolist() == [[1, 2, 3, 4, 5, 6, 7]]
    assert rows.response_mask.tolist() == [[0, 0, 1, 1, 0, 0, 1]]
    assert rows.token_rewards.tolist() == [[0, 0, 0, 1.0, 0, 0, 2.0]]
    assert rows.overlong.tolist() == [True]
    assert rows.response_length.tolist() == [5]

    rows = episode_rows([LONG]).pad(pad_token_id=PAD, max_length=5, truncate=True)
    assert rows.input_ids.tolist() == [[1, 2, 3, 4, 5]]
    assert rows.token_rewards.tolist() == [[0, 0, 0, 3.0, 0]]  # turn 1's reward moved back
    assert rows.reward.tolist() == [3.0]


def test_truncate_row_without_policy_tokens_keeps_reward_only_in_reward() -> None:
    rows = episode_rows([LONG]).pad(pad_token_id=PAD, max_length=2, truncate=True)
    assert rows.response_mask.tolist() == [[0, 0]]
    assert rows.token_rewards.tolist() == [[0, 0]]
    assert rows.reward.tolist() == [3.0]


@given(token_batches(), st.integers(1, 12))
def test_truncate_preserves_row_reward_when_a_policy_token_is_kept(
    episodes: list[Episode], max_length: int
) -> None:
    packed = episode_rows(episodes)
    rows = packed.pad(pad_token_id=PAD, max_length=max_length, truncate=True)
    assert rows.input_ids.shape[1] <= max_length
    assert (rows.overlong == (packed.lengths > max_length)).all()
    for b in range(len(rows)):
        assert rows.input_ids[b, : min(max_length, packed.lengths[b])].tolist() == (
            packed.input_ids[packed.cu_seqlens[b] : packed.cu_seqlens[b + 1]][:max_length].tolist()
        )
        if rows.response_mask[b].any():
            assert rows.token_rewards[b].sum(dtype=np.float64) == pytest.approx(
                float(packed.token_rewards[packed.cu_seqlens[b] : packed.cu_seqlens[b + 1]].sum()),
                abs=1e-5,  # float32 addition when a reward moves
            )


def test_pad_to_max_length_gives_fixed_shapes() -> None:
    packed = episode_rows([LONG])
    assert packed.pad(pad_token_id=PAD, max_length=12, pad_to_max_length=True).input_ids.shape == (
        1,
        12,
    )
    split = packed.split(
        pad_token_id=PAD, max_prompt_length=4, max_response_length=10, pad_to_max_length=True
    )
    assert split.prompts.shape == (1, 4)
    assert split.responses.shape == (1, 10)
    assert split.prompts.tolist() == [[PAD, PAD, 1, 2]]
    with pytest.raises(ValueError, match="pad_to_max_length=True needs max_length"):
        packed.pad(pad_token_id=PAD, pad_to_max_length=True)


def test_split_prompt_over_limit_raises_even_with_truncate() -> None:
    with pytest.raises(ValueError, match="2-token prompt, more than max_prompt_length=1"):
        episode_rows([LONG]).split(pad_token_id=PAD, max_prompt_length=1, truncate=True)


def test_split_response_over_limit_raises_or_truncates() -> None:
    packed = episode_rows([LONG])
    with pytest.raises(ValueError, match="has 6 response tokens, more than max_response_length=4"):
        packed.split(pad_token_id=PAD, max_response_length=4)
    split = packed.split(pad_token_id=PAD, max_response_length=4, truncate=True)
    assert split.responses.tolist() == [[3, 4, 5, 6]]
    assert split.response_mask.tolist() == [[1, 1, 0, 0]]
    assert split.token_rewards.tolist() == [[0, 3.0, 0, 0]]
    assert split.overlong.tolist() == [True]


# --------------------------------------------------------------------------------------
# Malformed input
# --------------------------------------------------------------------------------------


def test_layouts_need_token_ids() -> None:
    episode = Episode("e", turns=[Turn("x", "y", 1.0)])
    for layout in (turn_rows, episode_rows):
        with pytest.raises(ValueError, match=r"episode 0 .*turn 0 has no token ids"):
            layout([episode])


def test_layouts_need_a_response_token_per_turn() -> None:
    episode = token_episode_of(([1], [], 1.0))
    with pytest.raises(ValueError, match="empty response_ids"):
        episode_rows([episode])


def test_logprobs_on_some_turns_only_raise_and_none_gives_none() -> None:
    with_lp = Turn("x", "y", 0.0, prompt_ids=[1], response_ids=[2], response_logprobs=[-1.0])
    without = Turn("x", "y", 0.0, prompt_ids=[1, 2], response_ids=[3])
    with pytest.raises(ValueError, match="either every turn carries sampler logprobs or none"):
        episode_rows([Episode("e", turns=[with_lp, without])])
    assert turn_rows([Episode("e", turns=[without])]).rollout_logprobs is None


def test_episode_rows_refuse_an_episode_without_turns() -> None:
    with pytest.raises(ValueError, match=r"episode 0 .* has no turns"):
        episode_rows([Episode("e")])


def test_packed_rows_offsets_index_rows() -> None:
    packed = turn_rows([LONG])
    assert isinstance(packed, PackedRows)
    assert packed.cu_seqlens.tolist() == [0, 4, 12]
    assert packed.lengths.tolist() == [4, 8]
    assert packed.input_ids[4:12].tolist() == [1, 2, 3, 4, 5, 6, 7, 8]


# --------------------------------------------------------------------------------------
# Per-row access, group ids and shared helpers
# --------------------------------------------------------------------------------------


def test_build_rows_picks_the_layout_by_name() -> None:
    eps = episodes()
    assert build_rows(eps, "per_turn").input_ids.tolist() == turn_rows(eps).input_ids.tolist()
    assert build_rows(eps, "per_episode").input_ids.tolist() == episode_rows(eps).input_ids.tolist()
    with pytest.raises(ValueError, match="layout must be one of"):
        build_rows(eps, "per_token")  # type: ignore[arg-type]


def test_rows_carry_group_ids_and_isolate_ungrouped_episodes() -> None:
    eps = episodes()
    assert episode_rows(eps).group_id.tolist() == GROUPS
    assert turn_rows(eps).group_id.tolist() == ["g0"] * 5 + ["g1"] * 2
    eps[2].group_id = eps[3].group_id = None
    ids = episode_rows(eps).group_id.tolist()
    assert ids[:2] == ["g0", "g0"]
    assert ids[2] != ids[3]  # each ungrouped episode is a group of its own


def test_padded_and_split_rows_keep_the_group_ids() -> None:
    rows = episode_rows(episodes())
    assert rows.pad(pad_token_id=PAD).group_id.tolist() == GROUPS
    split = rows.split(pad_token_id=PAD, max_response_length=3, truncate=True)
    assert split.group_id.tolist() == GROUPS


def test_on_last_policy_token_places_one_value_per_row() -> None:
    mask = np.array([[0, 1, 1, 0], [1, 0, 0, 0], [0, 1, 0, 1]])
    out = on_last_policy_token([1.5, -2.0, 3.0], mask)
    assert out.dtype == np.float32
    assert out.tolist() == [[0, 0, 1.5, 0], [-2.0, 0, 0, 0], [0, 0, 0, 3.0]]
    with pytest.raises(ValueError, match="row 1 has no policy token"):
        on_last_policy_token([1.0, 1.0], [[1, 0], [0, 0]])


def test_shift_to_predictions_drops_the_first_token() -> None:
    mask = np.array([[0, 0, 1, 1, 0], [0, 1, 0, 0, 0]], dtype=np.int64)
    shifted = shift_to_predictions(mask)
    assert shifted.dtype == np.int64
    # entry j describes token j + 1: the token the logits at position j predict
    assert shifted.tolist() == [[0, 1, 1, 0], [1, 0, 0, 0]]
    with pytest.raises(ValueError, match=r"\[B, L\]"):
        shift_to_predictions(np.zeros(3))


@layouts
@given(episodes=token_batches(min_size=1))
def test_a_row_is_its_packed_slice_with_prompt_and_response_apart(
    layout: Any, episodes: list[Episode]
) -> None:
    rows = layout(episodes)
    for b in range(len(rows)):
        row, span = rows.row(b), slice(rows.cu_seqlens[b], rows.cu_seqlens[b + 1])
        assert row.input_ids.tolist() == rows.input_ids[span].tolist()
        assert row.response_mask.tolist() == rows.response_mask[span].tolist()
        assert row.turn_index.tolist() == rows.turn_index[span].tolist()
        assert row.token_rewards.tolist() == rows.token_rewards[span].tolist()
        if rows.rollout_logprobs is None:
            assert row.rollout_logprobs is None
        else:
            assert row.rollout_logprobs.tolist() == rows.rollout_logprobs[span].tolist()
        first = episodes[row.episode_index].turns[row.first_turn]
        assert row.prompt_ids.tolist() == first.prompt_ids
        assert len(row.response_ids) == rows.response_length[b]
        assert row.response_ids.tolist() == row.input_ids[row.response].tolist()
        assert (row.num_turns, row.group_id) == (rows.num_turns[b], rows.group_id[b])
    assert rows.row(-1).input_ids.tolist() == rows.row(len(rows) - 1).input_ids.tolist()
    with pytest.raises(IndexError, match=f"row {len(rows)} of {len(rows)} rows"):
        rows.row(len(rows))


@layouts
@given(episodes=token_batches(min_size=1))
def test_row_rewards_go_on_each_rows_last_policy_token(
    layout: Any, episodes: list[Episode]
) -> None:
    rows = layout(episodes)
    values = np.arange(1, len(rows) + 1, dtype=np.float64)
    moved = rows.with_row_rewards(values)
    padded = rows.pad(pad_token_id=PAD)
    expected = on_last_policy_token(values, padded.response_mask)
    got = moved.pad(pad_token_id=PAD).token_rewards
    assert got.tolist() == expected.tolist()
    assert moved.reward.tolist() == rows.reward.tolist()  # the turns' rewards, unchanged
    assert moved.input_ids is rows.input_ids


def test_row_rewards_need_one_value_per_row() -> None:
    rows = turn_rows([LONG])
    with pytest.raises(ValueError, match=r"values must be \[B\] = \[2\]"):
        rows.with_row_rewards([1.0])


# --------------------------------------------------------------------------------------
# List form (row_lists)
# --------------------------------------------------------------------------------------


def assert_lists_are_the_packed_rows(
    lists: RowLists, packed: PackedRows, values: np.ndarray | None
) -> None:
    """`lists` holds `packed`'s rows as Python ints and floats, bit for bit."""
    for field in fields(RowInfo):
        got, want = getattr(lists, field.name), getattr(packed, field.name)
        if want is None or want.dtype == object:
            assert got is None if want is None else got.tolist() == want.tolist(), field.name
        else:
            assert got.dtype == want.dtype, field.name
            assert got.tobytes() == want.tobytes(), field.name
    per_token = ["response_mask", "token_rewards", "rollout_logprobs"]
    assert (lists.rollout_logprobs is None) == (packed.rollout_logprobs is None)
    assert (lists.turn_values is None) == (values is None)
    for b in range(len(packed)):
        row = packed.row(b)
        assert lists.prompt_ids[b] == row.prompt_ids.tolist()
        assert lists.response_ids[b] == row.response_ids.tolist()
        expected = {name: getattr(row, name) for name in per_token}
        if values is not None:
            turn = row.turn_index
            expected["turn_values"] = np.where(
                turn >= 0, values[row.episode_index, np.maximum(turn, 0)], 0.0
            )
        for name, array in expected.items():
            if array is None:
                continue
            got = getattr(lists, name)[b]
            want = array[row.response]
            kind = int if want.dtype.kind == "i" else float
            assert all(type(x) is kind for x in got), name
            assert np.array(got, dtype=want.dtype).tobytes() == want.tobytes(), name


@pytest.mark.parametrize("layout", LAYOUTS)
@given(episodes=token_batches())
def test_row_lists_are_the_packed_rows_as_python_numbers(
    layout: Any, episodes: list[Episode]
) -> None:
    horizon = max((len(e.turns) for e in episodes), default=0)
    values = np.arange(len(episodes) * horizon, dtype=np.float64) / 3
    values = values.reshape(len(episodes), horizon)
    lists = row_lists(episodes, layout, turn_values=values)
    assert_lists_are_the_packed_rows(lists, build_rows(episodes, layout), values)
    assert_lists_are_the_packed_rows(
        row_lists(episodes, layout), build_rows(episodes, layout), None
    )


def test_row_lists_of_split_episodes_and_an_infra_error_member() -> None:
    split = token_episode_of(([1, 2], [3], -0.0), ([1, 2, 3, 7], [4], 1.0), ([9, 9], [5, 6], 2.0))
    batch = [*with_failed_member(), split]
    for turn in split.turns:
        turn.response_logprobs = [-0.5] * len(turn.response_ids)
    values = np.linspace(-1, 1, len(batch) * 3).reshape(len(batch), 3)
    lists = row_lists(batch, "per_episode", on_mismatch="split", turn_values=values)
    packed = episode_rows(batch, on_mismatch="split")
    assert_lists_are_the_packed_rows(lists, packed, values)
    assert lists.response_mask[4] == [0, 0]  # the infra-error member: nothing to learn
    assert lists.turn_values is not None
    assert lists.turn_values[4] == [0.0, 0.0]


def test_row_lists_are_new_lists() -> None:
    batch = episodes()
    lists = row_lists(batch, "per_turn")
    lists.prompt_ids[0].append(99)
    lists.response_ids[0].append(99)
    assert batch[0].turns[0].prompt_ids == [1, 2, 3]
    assert batch[0].turns[0].response_ids == [10, 11]


def test_row_lists_need_a_turn_value_for_every_turn() -> None:
    with pytest.raises(ValueError, match=r"turn_values must be \[N, T\]"):
        row_lists(episodes(), "per_episode", turn_values=np.zeros((len(episodes()), 2)))
    with pytest.raises(ValueError, match="layout must be one of"):
        row_lists(episodes(), cast(Any, "per_row"))
