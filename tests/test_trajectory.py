"""Specification of `Turn`/`Episode` JSON, the token layouts and `ChatPromptBuilder`."""

from __future__ import annotations

import collections
import functools
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from xpgym.core.trajectory import (
    ChatPromptBuilder,
    Episode,
    PackedRows,
    PrefixMismatchError,
    Turn,
    episode_rows,
    load_episodes,
    save_episodes,
    turn_rows,
)

PAD = 0  # also a real token id below: padding is told apart by attention_mask only

# --------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)
json_dicts = st.dictionaries(st.text(max_size=6), json_values, max_size=4)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": st.text()}
    ),
    max_size=3,
)
finite = st.floats(allow_nan=False, allow_infinity=False)


@st.composite
def turns(draw: st.DrawFn) -> Turn:
    with_ids = draw(st.booleans())
    prompt = draw(st.lists(st.integers(0, 2**31), max_size=6)) if with_ids else None
    response = draw(st.lists(st.integers(0, 2**31), max_size=6)) if with_ids else None
    logprobs = None
    if response is not None and draw(st.booleans()):
        logprobs = draw(st.lists(finite, min_size=len(response), max_size=len(response)))
    return Turn(
        observation=draw(st.text() | messages),
        action=draw(st.text()),
        reward=draw(finite),
        terminated=draw(st.booleans()),
        truncated=draw(st.booleans()),
        info=draw(json_dicts),
        prompt_ids=prompt,
        response_ids=response,
        response_logprobs=logprobs,
    )


episodes_any = st.builds(
    Episode,
    env_id=st.text(),
    seed=st.none() | st.integers(),
    group_id=st.none() | st.text(),
    turns=st.lists(turns(), max_size=3),
    info=json_dicts,
)

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
# Turn / Episode JSON
# --------------------------------------------------------------------------------------


@given(episodes_any)
@example(
    Episode(
        "e",
        turns=[
            Turn("x", "y", -0.0, info={"tiny": 5e-324, "neg0": -0.0, "n": {"deep": [None, 1e-310]}})
        ],
    )
)
def test_episode_json_round_trip_is_exact(episode: Episode) -> None:
    back = Episode.from_json(episode.to_json())
    assert back == episode
    # == cannot see the sign of zero or int-vs-float: repr can
    assert repr(back.to_dict()) == repr(episode.to_dict())


def test_round_trip_keeps_negative_zero_reward() -> None:
    back = Episode.from_json(Episode("e", turns=[Turn("x", "y", -0.0)]).to_json())
    assert math.copysign(1.0, back.turns[0].reward) == -1.0


@settings(max_examples=20)
@given(st.lists(episodes_any, max_size=3))
def test_save_and_load_episodes_round_trip(episodes: list[Episode]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "episodes.jsonl"
        save_episodes(episodes, path)
        assert load_episodes(path) == episodes


@pytest.mark.parametrize(
    ("info", "path", "error"),
    [
        ({"a": (1, 2)}, "Episode.turns[0].info['a']", TypeError),
        ({"a": {1, 2}}, "Episode.turns[0].info['a']", TypeError),
        ({"a": np.float64(1.5)}, "Episode.turns[0].info['a']", TypeError),
        ({"a": np.int64(3)}, "Episode.turns[0].info['a']", TypeError),
        ({"a": b"bytes"}, "Episode.turns[0].info['a']", TypeError),
        ({"a": collections.OrderedDict()}, "Episode.turns[0].info['a']", TypeError),
        ({"a": [object()]}, "Episode.turns[0].info['a'][0]", TypeError),
        ({1: "int key"}, "Episode.turns[0].info", TypeError),
        ({"a": {"b": float("nan")}}, "Episode.turns[0].info['a']['b']", ValueError),
        ({"a": float("-inf")}, "Episode.turns[0].info['a']", ValueError),
        ({"a": "\ud800"}, "Episode.turns[0].info['a']", ValueError),
    ],
)
def test_to_json_refuses_info_json_would_change(
    info: dict[Any, Any], path: str, error: type[Exception]
) -> None:
    episode = Episode("e", turns=[Turn("x", "y", 1.0, info=info)])
    with pytest.raises(error, match=path.replace("[", r"\[").replace("]", r"\]")):
        episode.to_json()


def test_to_json_refuses_non_json_observation_and_episode_info() -> None:
    with pytest.raises(TypeError, match=r"Episode.turns\[0\].observation\[0\]"):
        Episode("e", turns=[Turn([("user", "hi")], "y", 1.0)]).to_json()
    with pytest.raises(TypeError, match=r"Episode.info\['k'\]"):
        Episode("e", info={"k": np.zeros(2)}).to_json()


def test_save_episodes_writes_nothing_when_an_episode_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    good, bad = Episode("e"), Episode("e", info={"k": (1,)})
    with pytest.raises(TypeError):
        save_episodes([good, bad], path)
    assert not path.exists()


def test_turn_normalises_ids_flags_and_reward() -> None:
    turn = Turn(
        "x",
        "y",
        np.float32(0.5),
        terminated=np.True_,
        prompt_ids=np.array([1, 2]),
        response_ids=(3,),
        response_logprobs=np.array([-0.5], dtype=np.float32),
    )
    assert turn.prompt_ids == [1, 2]
    assert type(turn.prompt_ids[0]) is int
    assert turn.response_ids == [3]
    assert turn.terminated is True
    assert type(turn.reward) is float
    assert turn.response_logprobs == [-0.5]
    assert type(turn.response_logprobs[0]) is float


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"prompt_ids": [1, -1]}, ValueError),
        ({"prompt_ids": [1.5]}, TypeError),
        ({"response_ids": "abc"}, TypeError),
        ({"response_ids": [1, 2], "response_logprobs": [0.0]}, ValueError),
        ({"terminated": "yes"}, TypeError),
        ({"reward": float("nan")}, ValueError),
        ({"reward": "1.0"}, TypeError),
    ],
)
def test_turn_refuses_malformed_fields(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        Turn(**{"observation": "x", "action": "y", "reward": 0.0, **kwargs})


def test_from_dict_refuses_unknown_fields() -> None:
    with pytest.raises(ValueError, match="unknown Episode fields"):
        Episode.from_dict({"env_id": "e", "extra": 1})
    with pytest.raises(ValueError, match="turn 0: unknown Turn fields"):
        Episode.from_dict(
            {"env_id": "e", "turns": [{"observation": "", "action": "", "reward": 0.0, "x": 1}]}
        )


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
# ChatPromptBuilder with real tokenizers built offline
# --------------------------------------------------------------------------------------

CHATML_TOOLS_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}"
    "{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""ChatML with Qwen2.5's grouping of consecutive tool results into one user message."""

LLAMA3_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"
    "{{- message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
"""Llama 3 style headers."""

CORPUS = [
    "The quick brown fox jumps over the lazy dog. Guess a number between one and ten.",
    "user assistant system tool response tool_response <tool_response> </tool_response>",
    "Héllo wörld, naïve café; 你好，世界。 Привет мир! 12345 + 678 = 7023",
]


@functools.cache
def bpe_tokenizer(style: str) -> Any:
    """A byte-level BPE tokenizer trained on `CORPUS`, with `style`'s template and specials."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if style == "chatml":
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        eos, bos, template = "<|im_end|>", None, CHATML_TOOLS_TEMPLATE
    else:
        specials = [
            "<|begin_of_text|>",
            "<|end_of_text|>",
            "<|start_header_id|>",
            "<|end_header_id|>",
            "<|eot_id|>",
        ]
        eos, bos, template = "<|eot_id|>", "<|begin_of_text|>", LLAMA3_TEMPLATE
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(CORPUS, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token=eos, bos_token=bos, pad_token=specials[0]
    )
    tokenizer.chat_template = template
    return tokenizer


styles = pytest.mark.parametrize("style", ["chatml", "llama3"])
contents = (
    st.text(
        st.sampled_from(list("abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,!?éü你好мир")),
        min_size=1,
        max_size=30,
    )
    .map(str.strip)
    .filter(bool)
)


@styles
def test_builder_end_of_turn_ids_are_what_follows_assistant_content(style: str) -> None:
    tok = bpe_tokenizer(style)
    builder = ChatPromptBuilder(tok)
    expected = {"chatml": "<|im_end|>\n", "llama3": "<|eot_id|>"}[style]
    assert builder.end_of_turn_ids == tok.encode(expected, add_special_tokens=False)


@styles
@settings(max_examples=40, deadline=None)
@given(
    system=st.none() | contents,
    first=contents,
    steps=st.lists(
        st.tuples(contents, contents, st.sampled_from(["user", "tool"]), st.integers(0, 2)),
        min_size=1,
        max_size=4,
    ),
)
def test_builder_equals_rendering_the_whole_conversation(
    style: str, system: str | None, first: str, steps: list[tuple[str, str, str, int]]
) -> None:
    tok = bpe_tokenizer(style)
    builder = ChatPromptBuilder(tok, system_prompt=system)
    conversation = ([] if system is None else [{"role": "system", "content": system}]) + [
        {"role": "user", "content": first}
    ]
    prompt = builder.start(first)
    for reply, observation, role, stop in steps:
        # the sampler's output: content, then the stop token kept, stripped, or followed by
        # the rest of the end-of-turn text
        response = tok.encode(reply, add_special_tokens=False)
        response += builder.end_of_turn_ids[: [1, 0, len(builder.end_of_turn_ids)][stop]]
        following = builder.extend(prompt, response, observation, role=role)
        assert following[: len(prompt) + len(response)] == prompt + response
        prompt = following
        conversation += [
            {"role": "assistant", "content": reply},
            {"role": role, "content": observation},
        ]
    rendered = tok.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    assert prompt == tok.encode(rendered, add_special_tokens=False)


def test_builder_appends_several_tool_results_at_once() -> None:
    tok = bpe_tokenizer("chatml")
    builder = ChatPromptBuilder(tok)
    prompt = builder.start("Add 1 and 2.")
    response = [*tok.encode("<tool_call>", add_special_tokens=False), tok.eos_token_id]
    results = [{"role": "tool", "content": "3"}, {"role": "tool", "content": "ok"}]
    prompt = builder.extend(prompt, response, results)
    text = tok.decode(prompt)
    assert text.endswith(
        "<|im_end|>\n<|im_start|>user\n<tool_response>\n3\n</tool_response>\n"
        "<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )


def test_builder_start_accepts_chat_messages() -> None:
    tok = bpe_tokenizer("llama3")
    builder = ChatPromptBuilder(tok, system_prompt="Be brief.")
    ids = builder.start([{"role": "user", "content": "Hi"}])
    assert tok.decode(ids) == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_builder_refuses_a_template_that_rerenders_history() -> None:
    tok = bpe_tokenizer("chatml")
    counting = "{{ 'messages: ' ~ messages | length ~ '\\n' }}" + CHATML_TOOLS_TEMPLATE
    builder = ChatPromptBuilder(tok, chat_template_kwargs={"chat_template": counting})
    with pytest.raises(ValueError, match="re-renders earlier messages"):
        builder.extend([1], [2], "next")


def test_builder_needs_encode_and_apply_chat_template() -> None:
    class NoEncode:
        def apply_chat_template(self, *args: Any, **kwargs: Any) -> str:
            return ""

    with pytest.raises(TypeError, match=r"encode\(\)"):
        ChatPromptBuilder(NoEncode())  # type: ignore[arg-type]


@styles
def test_builder_episodes_lay_out_with_env_tokens_masked(style: str) -> None:
    tok = bpe_tokenizer(style)
    builder = ChatPromptBuilder(tok, system_prompt="You play a game.")
    replies, observations = ["guess 5", "guess 7", "guess 6"], ["higher", "lower", "correct"]
    prompt, turns = builder.start("Guess a number."), []
    for t, (reply, observation) in enumerate(zip(replies, observations, strict=True)):
        response = [*tok.encode(reply, add_special_tokens=False), tok.eos_token_id]
        turns.append(
            Turn(
                observation,
                reply,
                float(t == 2),
                terminated=t == 2,
                prompt_ids=prompt,
                response_ids=response,
            )
        )
        prompt = builder.extend(prompt, response, observation)
    rows = episode_rows([Episode("guess", turns=turns)]).split(pad_token_id=tok.pad_token_id)
    policy = rows.responses[0][rows.response_mask[0] == 1].tolist()
    assert tok.decode(policy) == "".join(r + tok.eos_token for r in replies)
    env = rows.responses[0][
        (rows.response_mask[0] == 0) & (rows.attention_mask[0, rows.prompts.shape[1] :] == 1)
    ]
    assert "higher" in tok.decode(env.tolist())
    assert "guess" not in tok.decode(env.tolist())
    assert rows.token_rewards.sum() == 1.0
