"""`turn_advantages` and `episode_advantages` dispatch "gigpo" and "tree" to `gigpo` and
`tree_advantages`, with the ids each needs read from the episodes."""

from __future__ import annotations

import numpy as np
import pytest

from xpgym.core.errors import InfraCause
from xpgym.core.trajectory import Episode, Turn, training_group_ids, tree_nodes, turn_state_keys
from xpgym.training.advantages import (
    episode_advantages,
    episode_scores,
    gigpo,
    tree_advantages,
    turn_advantages,
    turn_rewards,
)

REWARDS = [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
MASK = [[True, True, True], [True, True, False], [True, True, True]]
STATES = [["s0", "s1", "s2"], ["s0", "s1"], ["s0", "s3", "s1"]]
GROUPS = ["g", "g", "g"]
NODES = [["a", "b", "c"], ["a", "d"], ["e", "f", "g"]]


def test_gigpo_by_name_is_gigpo_with_the_same_options():
    got = turn_advantages(
        "gigpo", REWARDS, MASK, gamma=0.5, group_ids=GROUPS, state_keys=STATES, omega=0.3
    )
    want = gigpo(REWARDS, MASK, GROUPS, STATES, gamma=0.5, omega=0.3)
    np.testing.assert_array_equal(got, want)


def test_tree_by_name_is_tree_advantages_of_the_episode_scores():
    got = turn_advantages("tree", REWARDS, MASK, root_ids=GROUPS, node_ids=NODES)
    scores = episode_scores(np.array(REWARDS), np.array(MASK))
    np.testing.assert_array_equal(got, tree_advantages(scores, MASK, GROUPS, NODES))
    assert np.abs(got).sum() > 0


@pytest.mark.parametrize(
    ("algorithm", "ids", "message"),
    [
        ("gigpo", {"group_ids": GROUPS}, "state_keys"),
        ("gigpo", {"state_keys": STATES}, "group_ids"),
        ("tree", {"root_ids": GROUPS}, "node_ids"),
        ("tree", {"root_ids": GROUPS, "node_ids": NODES, "eps": 1.0}, "no options"),
    ],
)
def test_the_step_algorithms_refuse_missing_ids_or_stray_options(algorithm, ids, message):
    with pytest.raises(ValueError, match=message):
        turn_advantages(algorithm, REWARDS, MASK, **ids)


def branchy() -> list[Episode]:
    """Two roots of group g (observations o0, o1, ...), a branch of the first at turn 1, and
    a root of group h."""

    def turns(rewards: list[float], observations: list[str]) -> list[Turn]:
        return [
            Turn(obs, "a", r, terminated=t == len(rewards) - 1)
            for t, (r, obs) in enumerate(zip(rewards, observations, strict=True))
        ]

    return [
        Episode("toy", group_id="g", turns=turns([0, 0, 1], ["o0", "o1", "o2"]), episode_id="g/0"),
        Episode("toy", group_id="g", turns=turns([0, 0], ["o0", "o1"]), episode_id="g/1"),
        Episode(
            "toy",
            group_id="g/0@1",
            turns=turns([0, 1, 1], ["o0", "o1", "o3"]),
            episode_id="g/0@1/0",
            parent_id="g/0",
            parent_turn=1,
        ),
        Episode("toy", group_id="h", turns=turns([1], ["o0"]), episode_id="h/0"),
    ]


def test_episode_advantages_read_gigpo_ids_from_the_episodes():
    episodes = branchy()
    rewards, mask = turn_rewards(episodes)
    want = gigpo(rewards, mask, training_group_ids(episodes), turn_state_keys(episodes), gamma=0.9)
    np.testing.assert_array_equal(episode_advantages("gigpo", episodes, gamma=0.9), want)


def test_episode_advantages_read_the_tree_from_the_episodes():
    episodes = branchy()
    rewards, mask = turn_rewards(episodes)
    roots, nodes = tree_nodes(episodes)
    want = tree_advantages(episode_scores(rewards, mask), mask, roots, nodes)
    got = episode_advantages("tree", episodes)
    np.testing.assert_array_equal(got, want)
    # by hand: tree g has scores 1, 0, 2, V(root) = 1; g/0 and its branch share turn 0's
    # node (V = 1.5), then part (V = 1 and 2); g/1's turn 0 has V = 0
    np.testing.assert_allclose(got[0], [0.5, -0.5, 0.0])
    np.testing.assert_allclose(got[1], [-1.0, 0.0, 0.0])
    np.testing.assert_allclose(got[2], [0.5, 0.5, 0.0])


def test_an_infra_error_episode_is_a_tree_of_its_own():
    episodes = branchy()
    want = episode_advantages("tree", episodes)
    failed = Episode("toy", group_id="g", turns=[Turn("o0", "a", 9.0)], episode_id="g/2")
    failed.infra_error = InfraCause("sub_env_crash", "gone")
    got = episode_advantages("tree", [*episodes, failed])
    np.testing.assert_array_equal(got[:4], want)
    np.testing.assert_array_equal(got[4], 0.0)
