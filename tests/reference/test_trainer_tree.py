"""The reference trainer with GiGPO and tree advantages: its batch holds exactly the
estimators' advantages, and `train(tree=...)` grows trees and trains on them (tiny LM of
tests/random_byte_lm.py)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
random_byte_lm = pytest.importorskip("random_byte_lm")

import tree_cases  # noqa: E402
from tree_cases import EASY, Scored  # noqa: E402

import xpgym  # noqa: E402
from xpgym.core.trajectory import tree_nodes, turn_state_keys  # noqa: E402
from xpgym.reference.trainer import Trainer, TrainerConfig, train  # noqa: E402
from xpgym.rollout.tree import TreeSpec  # noqa: E402
from xpgym.training.advantages import (  # noqa: E402
    broadcast_to_tokens,
    episode_scores,
    gigpo,
    tree_advantages,
    turn_rewards,
)


@pytest.fixture(scope="module")
def tree_episodes():
    return list(tree_cases.tree_episodes())


@pytest.mark.parametrize("layout", ["per_episode", "per_turn"])
def test_the_batch_carries_tree_advantages_of_the_collected_tree(tree_episodes, layout):
    cfg = TrainerConfig(algorithm="tree", group_size=2, num_episodes=4, layout=layout)
    batch = Trainer(random_byte_lm.tiny_model(seed=0), cfg).make_batch(tree_episodes)
    rewards, mask = turn_rewards(tree_episodes)
    want = tree_advantages(episode_scores(rewards, mask), mask, *tree_nodes(tree_episodes))
    assert np.abs(want).sum() > 0
    np.testing.assert_array_equal(batch.turn_advantages, want)
    tokens = broadcast_to_tokens(want[batch.rows.episode_index], batch.rows.turn_index)
    np.testing.assert_allclose(batch.advantages.numpy(), tokens, rtol=0, atol=1e-6)


def test_the_batch_carries_gigpo_advantages_with_the_configured_options(tree_episodes):
    cfg = TrainerConfig(
        algorithm="gigpo", group_size=2, num_episodes=4, gamma=0.9, advantage_kwargs={"omega": 0.5}
    )
    batch = Trainer(random_byte_lm.tiny_model(seed=0), cfg).make_batch(tree_episodes)
    rewards, mask = turn_rewards(tree_episodes)
    groups = [e.group_id for e in tree_episodes]
    want = gigpo(rewards, mask, groups, turn_state_keys(tree_episodes), gamma=0.9, omega=0.5)
    np.testing.assert_array_equal(batch.turn_advantages, want)


def test_train_grows_trees_each_step_and_logs_their_cost():
    cfg = TrainerConfig(
        algorithm="tree", num_episodes=4, group_size=2, max_new_tokens=4, max_turns=3, lr=1e-3
    )
    with xpgym.make_vec(EASY, 4, wrappers=[Scored]) as vec:
        history = train(
            random_byte_lm.tiny_model(seed=0),
            random_byte_lm.tiny_tokenizer(),
            vec,
            cfg,
            num_steps=2,
            tree=TreeSpec(roots=2, branches=2, max_episodes=6),
        )
    for metrics in history:
        assert 4 < metrics["tree/episodes"] <= 12
        assert metrics["num_episodes"] == metrics["tree/episodes"]
        assert metrics["tree/tokens_per_episode"] > 0
        assert np.isfinite(metrics["loss"])


def test_train_refuses_a_tree_whose_roots_are_not_the_group():
    cfg = TrainerConfig(algorithm="tree", num_episodes=4, group_size=2)
    with xpgym.make_vec(EASY, 2) as vec, pytest.raises(ValueError, match="group_size"):
        train(
            random_byte_lm.tiny_model(seed=0),
            random_byte_lm.tiny_tokenizer(),
            vec,
            cfg,
            num_steps=1,
            tree=TreeSpec(roots=3, max_episodes=6),
        )
