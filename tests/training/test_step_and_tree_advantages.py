"""GiGPO's episode- plus step-level advantages and tree advantages, against hand-computed
references (the numbers in the comments are worked out by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from xpgym.core.trajectory import Episode, Turn, tree_nodes, turn_state_keys
from xpgym.training.advantages import (
    gigpo,
    tree_advantages,
)

# One group g of three episodes; s0..s3 are env states. gamma = 0.5.
#   ep0: rewards [0, 0, 1] at states [s0, s1, s2]: R = 1, returns [0.25, 0.5, 1]
#   ep1: rewards [0, 1]    at states [s0, s1]:     R = 1, returns [0.5, 1]
#   ep2: rewards [0, 0, 0] at states [s0, s3, s1]: R = 0, returns [0, 0, 0]
REWARDS = [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
MASK = [[True, True, True], [True, True, False], [True, True, True]]
STATES = [["s0", "s1", "s2"], ["s0", "s1"], ["s0", "s3", "s1"]]
GROUPS = ["g", "g", "g"]


def test_gigpo_without_std_adds_episode_and_anchor_group_deviations():
    # A^E = R - 2/3 = [1/3, 1/3, -2/3]. Anchor s0: returns 0.25, 0.5, 0 (mean 0.25);
    # s1: 0.5 (ep0 t1), 1 (ep1 t1), 0 (ep2 t2) (mean 0.5); s2, s3: one turn each -> 0.
    out = gigpo(REWARDS, MASK, GROUPS, STATES, gamma=0.5, normalize=False)
    third = 1 / 3
    expected = [
        [third, third, third],
        [third + 0.25, third + 0.5, 0.0],
        [-2 * third - 0.25, -2 * third, -2 * third - 0.5],
    ]
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)


def test_gigpo_weighs_the_step_level_by_omega():
    out = gigpo(REWARDS, MASK, GROUPS, STATES, gamma=0.5, omega=2.0, normalize=False)
    np.testing.assert_allclose(out[1], [1 / 3 + 0.5, 1 / 3 + 1.0, 0.0], rtol=0, atol=1e-12)


def test_gigpo_with_std_divides_each_level_by_its_groups_std():
    # Episode scores [1, 1, 0]: unbiased std sqrt(1/3). Anchors s0 and s1: deviations
    # (0, 0.25, -0.25) and (0, 0.5, -0.5), unbiased stds 0.25 and 0.5 -> (0, 1, -1) both.
    out = gigpo(REWARDS, MASK, GROUPS, STATES, gamma=0.5, eps=0.0)
    a_e = np.array([1 / 3, 1 / 3, -2 / 3]) / np.sqrt(1 / 3)
    expected = [
        [a_e[0], a_e[0], a_e[0]],
        [a_e[1] + 1, a_e[1] + 1, 0.0],
        [a_e[2] - 1, a_e[2], a_e[2] - 1],
    ]
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)


def test_gigpo_anchor_groups_stay_inside_their_episode_group():
    rewards = [*REWARDS, [5.0, 0.0, 0.0]]
    mask = [*MASK, [True, False, False]]
    alone = gigpo(REWARDS, MASK, GROUPS, STATES, gamma=0.5, normalize=False)
    out = gigpo(rewards, mask, [*GROUPS, "h"], [*STATES, ["s0"]], gamma=0.5, normalize=False)
    np.testing.assert_array_equal(out[:3], alone)
    np.testing.assert_array_equal(out[3], [0.0, 0.0, 0.0])  # one episode, one turn: 0


def test_gigpo_refuses_missing_state_keys():
    with pytest.raises(ValueError, match=r"state_keys\[1\] has 1 keys for turn 1"):
        gigpo(REWARDS, MASK, GROUPS, [STATES[0], ["s0"], STATES[2]], gamma=0.5)


def test_turn_state_keys_are_equal_exactly_for_equal_observations():
    episode = Episode("toy", turns=[Turn("a", "x", 0.0), Turn([{"role": "user"}], "y", 0.0)])
    other = Episode("toy", turns=[Turn("a", "z", 1.0), Turn("b", "w", 0.0)])
    (keys, other_keys) = turn_state_keys([episode, other])
    assert keys[0] == other_keys[0]
    assert len({keys[1], other_keys[1]}) == 2


def test_turn_state_keys_prefer_the_state_key_the_env_gave_before_each_turn():
    """Turn 0 acts on the reset's state, turn t on turn t - 1's; equal observations with
    different env keys are different states, and the reverse."""
    first = Episode(
        "toy",
        turns=[Turn("same", "x", 0.0, info={"state_key": "A"}), Turn("o1", "y", 0.0)],
        info={"reset_info": {"state_key": "R"}},
    )
    second = Episode(
        "toy",
        turns=[Turn("same", "x", 0.0, info={"state_key": "A"}), Turn("o2", "y", 0.0)],
        info={"reset_info": {"state_key": "R2"}},
    )
    keyless = Episode("toy", turns=[Turn("same", "x", 0.0)])
    (a, b, c) = turn_state_keys([first, second, keyless])
    assert a == ["env:R", "env:A"]
    assert b == ["env:R2", "env:A"]  # turn 1: other observation, same env state
    assert c == ['obs:"same"']  # no key from the env: the observation stands for the state
    assert a[0] != c[0]


# A tree: parent p (score 1) and two branches of it, b1 forked at turn 1 and b2 at turn 2
# (score 0 each), three turns each. Nodes: p: p0 p1 p2; b1: p0 b1_1 b1_2; b2: p0 p1 b2_2.
# Values: root 1/3, p0 1/3, p1 (p, b2) 1/2, p2 1, the branches' own nodes 0.
TREE_NODES = [["p0", "p1", "p2"], ["p0", "b1_1", "b1_2"], ["p0", "p1", "b2_2"]]
TREE_EXPECTED = [[0.0, 1 / 6, 1 / 2], [0.0, -1 / 3, 0.0], [0.0, 1 / 6, -1 / 2]]


def test_tree_advantages_are_the_value_each_turn_gains():
    out = tree_advantages([1.0, 0.0, 0.0], np.ones((3, 3), bool), ["t"] * 3, TREE_NODES)
    np.testing.assert_allclose(out, TREE_EXPECTED, rtol=0, atol=1e-12)


def test_tree_advantages_along_a_path_sum_to_the_score_minus_the_root_value():
    scores = np.array([1.0, 0.0, 0.0])
    out = tree_advantages(scores, np.ones((3, 3), bool), ["t"] * 3, TREE_NODES)
    np.testing.assert_allclose(out.sum(axis=1), scores - 1 / 3, rtol=0, atol=1e-12)


def test_tree_advantages_of_separate_trees_do_not_mix():
    mask = np.ones((4, 3), bool)
    nodes = [*TREE_NODES, ["p0", "p1", "p2"]]  # same node names, another tree
    out = tree_advantages([1.0, 0.0, 0.0, 7.0], mask, ["t", "t", "t", "u"], nodes)
    np.testing.assert_allclose(out[:3], TREE_EXPECTED, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(out[3], [0.0, 0.0, 0.0])


def episode(episode_id: str, n: int, parent: tuple[str, int] | None = None) -> Episode:
    parent_id, parent_turn = parent or (None, None)
    turns = [Turn(f"o{t}", "a", 0.0, terminated=t == n - 1) for t in range(n)]
    return Episode(
        "toy",
        group_id="g",
        turns=turns,
        episode_id=episode_id,
        parent_id=parent_id,
        parent_turn=parent_turn,
    )


def test_tree_nodes_share_the_parents_nodes_before_the_fork():
    roots, nodes = tree_nodes(
        [episode("p", 3), episode("b1", 3, ("p", 1)), episode("b2", 3, ("b1", 2))]
    )
    assert roots == ["g", "g", "g"]
    assert nodes == [["p#0", "p#1", "p#2"], ["p#0", "b1#1", "b1#2"], ["p#0", "b1#1", "b2#2"]]


def test_tree_nodes_need_the_parent():
    with pytest.raises(ValueError, match="parent 'p' of episode 'b' is not among"):
        tree_nodes([episode("b", 2, ("p", 1))])
