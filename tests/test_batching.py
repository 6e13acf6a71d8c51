"""Specification of `xpgym.core.batching`: the pieces the trainer adapters share."""

from __future__ import annotations

import numpy as np
import pytest
from adapter_cases import (
    GAMMA,
    GROUPS,
    RESPONSE_MASKS,
    TURN_RETURNS,
    episodes,
    per_token,
    rebn_reference,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.batching import (
    build_rows,
    on_last_policy_token,
    per_turn_sums,
    row_group_ids,
    row_returns,
    shift_to_predictions,
    token_advantages,
    turn_index_from_mask,
)
from xpgym.core.trajectory import Episode, episode_rows, turn_rows


def test_build_rows_picks_the_layout_by_name() -> None:
    eps = episodes()
    assert build_rows(eps, "per_turn").input_ids.tolist() == turn_rows(eps).input_ids.tolist()
    assert build_rows(eps, "per_episode").input_ids.tolist() == episode_rows(eps).input_ids.tolist()
    with pytest.raises(ValueError, match="layout must be one of"):
        build_rows(eps, "per_token")  # type: ignore[arg-type]


def test_row_group_ids_follow_episodes_and_isolate_ungrouped_ones() -> None:
    eps = episodes()
    assert row_group_ids(eps, episode_rows(eps)).tolist() == GROUPS
    assert row_group_ids(eps, turn_rows(eps)).tolist() == ["g0"] * 5 + ["g1"] * 2
    eps[2].group_id = eps[3].group_id = None
    ids = row_group_ids(eps, episode_rows(eps)).tolist()
    assert ids[:2] == ["g0", "g0"]
    assert ids[2] != ids[3]  # each ungrouped episode is a group of its own


def test_row_returns_are_each_rows_first_turn_return() -> None:
    eps = episodes()
    per_turn = row_returns(eps, turn_rows(eps), GAMMA)
    np.testing.assert_allclose(per_turn, [g for ep in TURN_RETURNS for g in ep], atol=1e-12)
    per_episode = row_returns(eps, episode_rows(eps), GAMMA)
    np.testing.assert_allclose(per_episode, [ep[0] for ep in TURN_RETURNS], atol=1e-12)


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


def test_turn_index_counts_runs_of_the_mask() -> None:
    padded = [m + [0] * (8 - len(m)) for m in RESPONSE_MASKS]
    assert turn_index_from_mask(padded).tolist() == [
        [0, 0, -1, -1, 1, 1, 1, -1],
        [0, -1, 1, 1, -1, -1, -1, 2],
        [0, 0, 0, 0, -1, -1, -1, -1],
        [0, -1, -1, -1, -1, -1, -1, -1],
    ]


def test_turn_index_refuses_a_vector() -> None:
    with pytest.raises(ValueError, match=r"\[B, R\]"):
        turn_index_from_mask(np.ones(4))


def test_per_turn_sums_add_rewards_per_turn() -> None:
    index = np.array([[0, 0, -1, 1], [0, -1, -1, -1]])
    values = np.array([[1.0, 2.0, 9.0, 4.0], [5.0, 0.0, 0.0, 0.0]])
    sums, mask = per_turn_sums(values, index)
    assert sums.tolist() == [[3.0, 4.0], [5.0, 0.0]]
    assert mask.tolist() == [[True, True], [True, False]]


def test_token_advantages_on_episode_rows_equal_rebn_of_episodes() -> None:
    rows = episode_rows(episodes()).pad(pad_token_id=0)
    response = rows.position_ids >= rows.prompt_length[:, None]  # [B, L] non-prompt tokens
    got = token_advantages(rows.token_rewards, rows.response_mask, estimator="rebn", gamma=GAMMA)
    expected = per_token(rebn_reference())
    for b in range(len(rows)):
        cut = got[b][response[b] & (rows.attention_mask[b] == 1)]
        np.testing.assert_allclose(cut, expected[b], atol=1e-12)


def test_token_advantages_on_turn_rows_with_returns_equal_the_same_rebn() -> None:
    eps = episodes()
    rows = turn_rows(eps).pad(pad_token_id=0)
    rewards = on_last_policy_token(row_returns(eps, rows, GAMMA), rows.response_mask)
    got = token_advantages(rewards, rows.response_mask, estimator="rebn", gamma=GAMMA)
    expected = [a for ep in rebn_reference() for a in ep]
    for b in range(len(rows)):
        policy = got[b][rows.response_mask[b] == 1]
        np.testing.assert_allclose(policy, expected[b], atol=1e-6)  # float32 returns


def test_token_advantages_reinforce_is_the_discounted_return() -> None:
    rows = episode_rows(episodes()).pad(pad_token_id=0)
    got = token_advantages(
        rows.token_rewards, rows.response_mask, estimator="reinforce", gamma=GAMMA
    )
    expected = per_token(TURN_RETURNS)
    for b in range(len(rows)):
        start = int(rows.prompt_length[b])
        stop = start + int(rows.response_length[b])
        np.testing.assert_allclose(got[b, start:stop], expected[b], atol=1e-6)


def test_token_advantages_refuse_rewards_off_policy_tokens() -> None:
    with pytest.raises(ValueError, match=r"token_rewards\[0, 1\]"):
        token_advantages([[0.0, 1.0]], [[1, 0]], estimator="reinforce", gamma=1.0)


def test_token_advantages_refuse_unknown_estimator_and_stray_options() -> None:
    with pytest.raises(ValueError, match="estimator must be one of"):
        token_advantages([[1.0]], [[1]], estimator="gae", gamma=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="are for estimator='rebn'"):
        token_advantages([[1.0]], [[1]], estimator="reinforce", gamma=1.0, std="unbiased")


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.lists(st.integers(1, 3), min_size=1, max_size=4), min_size=1, max_size=5),
    data=st.data(),
)
def test_token_advantages_match_the_reference_on_any_episodes(
    lengths: list[list[int]], data: st.DataObject
) -> None:
    from xpgym.core.advantages import discounted_returns, rebn, turn_rewards
    from xpgym.core.trajectory import Turn

    eps = []
    for e, turn_lengths in enumerate(lengths):
        prompt, turns = [1, 2], []
        for t, n in enumerate(turn_lengths):
            response = [10 + t] * n
            reward = data.draw(st.sampled_from([-1.0, 0.0, 0.25, 1.0]))
            turns.append(Turn("o", "a", reward, prompt_ids=prompt, response_ids=response))
            prompt = prompt + response + [3]
        turns[-1].terminated = True
        eps.append(Episode("toy", group_id=str(e), turns=turns))
    rows = episode_rows(eps).pad(pad_token_id=0)
    got = token_advantages(rows.token_rewards, rows.response_mask, estimator="rebn", gamma=0.9)
    r, m = turn_rewards(eps)
    reference = rebn(discounted_returns(r, m, 0.9), m)
    expected = np.where(
        rows.turn_index >= 0,
        reference[rows.episode_index[:, None], np.maximum(rows.turn_index, 0)],
        0,
    )
    np.testing.assert_allclose(got, expected, atol=1e-9)


def test_token_advantages_join_rows_of_one_episode_by_offsets() -> None:
    eps = episodes()
    eps[1].turns[2].prompt_ids = [1, 2, 3, 99, 21, 22, 7]  # re-rendered history: a new row
    rows = episode_rows(eps, on_mismatch="split").pad(pad_token_id=0)
    assert rows.episode_index.tolist() == [0, 1, 1, 2, 3]
    offsets = [0, 1, 3, 4, 5]
    got = token_advantages(
        rows.token_rewards,
        rows.response_mask,
        estimator="rebn",
        gamma=GAMMA,
        episode_offsets=offsets,
    )
    flat = {(e, t): a for e, ep in enumerate(rebn_reference()) for t, a in enumerate(ep)}
    expected = np.where(
        rows.turn_index >= 0,
        [
            [flat.get((int(e), int(t)), 0.0) for t in row]
            for e, row in zip(rows.episode_index, rows.turn_index, strict=True)
        ],
        0.0,
    )
    np.testing.assert_allclose(got, expected, atol=1e-9)
    with pytest.raises(ValueError, match="episode_offsets must rise"):
        token_advantages(
            rows.token_rewards,
            rows.response_mask,
            estimator="rebn",
            gamma=GAMMA,
            episode_offsets=[0, 2],
        )
