"""Specification of `Turn` / `Episode` and their JSON."""

from __future__ import annotations

import collections
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from xpgym.core.trajectory import Episode, Turn, load_episodes, save_episodes

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
    "ids",
    [
        [5, 2**40, 0],
        [np.int64(5), 2**40, np.uint8(0)],
        [True, 2**40, 0],  # a bool is the integer it stands for, as with operator.index
        [5, 2**70, 0],  # past 64 bits: the slow path takes it
    ],
)
def test_turn_ids_become_a_new_list_of_plain_ints(ids: list[Any]) -> None:
    first = int(ids[0])
    turn = Turn("x", "y", 0.0, prompt_ids=ids, response_ids=ids)
    for out in (turn.prompt_ids, turn.response_ids):
        assert out == [int(x) for x in ids]
        assert {type(x) for x in out} == {int}
        assert out is not ids
    ids[0] = 7  # the caller's list is the caller's
    assert turn.prompt_ids is not None
    assert turn.prompt_ids[0] == first


def test_turn_logprobs_become_a_new_list_of_floats() -> None:
    for logprobs in ([-0.5, -1.0], (-0.5, -1.0), np.array([-0.5, -1.0]), [-0.5, np.float32(-1)]):
        turn = Turn("x", "y", 0.0, response_ids=[1, 2], response_logprobs=logprobs)
        assert turn.response_logprobs == [-0.5, -1.0]
        assert {type(x) for x in turn.response_logprobs} == {float}
        assert turn.response_logprobs is not logprobs


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"prompt_ids": [1, -1]}, ValueError),
        ({"prompt_ids": [1.5]}, TypeError),
        ({"prompt_ids": [1, np.float64(2.0)]}, TypeError),
        ({"prompt_ids": [1, -(2**70)]}, ValueError),
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


def test_a_branchs_fork_fields_round_trip_through_json() -> None:
    branch = Episode(
        env_id="toy",
        turns=[Turn("o", "a", 1.0, terminated=True)],
        episode_id="g-0/1@2/0",
        parent_id="g-0/1",
        parent_turn=2,
    )
    data = branch.to_dict()
    assert (data["episode_id"], data["parent_id"], data["parent_turn"]) == ("g-0/1@2/0", "g-0/1", 2)
    assert Episode.from_json(branch.to_json()) == branch


def test_an_episode_without_fork_fields_has_none_in_its_json() -> None:
    data = Episode(env_id="toy", turns=[Turn("o", "a", 1.0, terminated=True)]).to_dict()
    assert not {"episode_id", "parent_id", "parent_turn"} & set(data)


def test_parent_id_and_parent_turn_are_set_together() -> None:
    with pytest.raises(ValueError, match="set together"):
        Episode(env_id="toy", parent_id="p")
