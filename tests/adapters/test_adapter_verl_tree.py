"""GiGPO and tree advantages through verl: `to_data_proto(advantage=...)` and verl's own
`compute_advantage` with ``xpgym_turn_values`` give exactly `gigpo` / `tree_advantages` of
the episodes, on every policy token of each turn, in both layouts."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip(
    "xpgym.adapters.verl", reason="needs verl 0.9.x (the verl extra)", exc_type=ImportError
)
torch = pytest.importorskip("torch")
pytest.importorskip("random_byte_lm", reason="needs torch and transformers")

from tree_cases import tree_episodes  # noqa: E402
from verl.trainer.config import AlgoConfig  # noqa: E402
from verl.trainer.ppo.ray_trainer import compute_advantage  # noqa: E402

from xpgym.adapters.verl import ESTIMATORS, to_data_proto  # noqa: E402
from xpgym.core.trajectory import tree_nodes, turn_state_keys  # noqa: E402
from xpgym.training.advantages import (  # noqa: E402
    broadcast_to_tokens,
    episode_scores,
    gigpo,
    tree_advantages,
    turn_rewards,
)
from xpgym.training.layouts import build_rows  # noqa: E402

GAMMA = 0.9


def reference(algorithm: str) -> np.ndarray:
    episodes = list(tree_episodes())
    rewards, mask = turn_rewards(episodes)
    if algorithm == "gigpo":
        groups = [e.group_id for e in episodes]
        keys = turn_state_keys(episodes)
        return gigpo(rewards, mask, groups, keys, gamma=GAMMA, omega=0.5)
    return tree_advantages(episode_scores(rewards, mask), mask, *tree_nodes(episodes))


def through_verl(algorithm: str, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """verl's advantages ``[B, R]`` and the same tensor built from `reference`."""
    episodes = list(tree_episodes())
    options = {"omega": 0.5} if algorithm == "gigpo" else {}
    data = to_data_proto(
        episodes,
        pad_token_id=0,
        layout=layout,
        gamma=GAMMA,
        advantage=algorithm,
        advantage_kwargs=options,
    )
    data.batch["token_level_rewards"] = data.batch["rm_scores"]  # V1, no KL in the reward
    out = compute_advantage(
        data, adv_estimator="xpgym_turn_values", gamma=GAMMA, config=AlgoConfig(gamma=GAMMA)
    )
    rows = build_rows(episodes, layout).split(pad_token_id=0)
    want = broadcast_to_tokens(reference(algorithm)[rows.episode_index], rows.turn_index)
    return out.batch["advantages"].numpy(), want


@pytest.mark.parametrize("layout", ["per_episode", "per_turn"])
@pytest.mark.parametrize("algorithm", ["gigpo", "tree"])
def test_verls_advantages_are_the_reference_on_every_policy_token(algorithm, layout):
    got, want = through_verl(algorithm, layout)
    assert np.abs(want).sum() > 0
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_the_turn_value_estimator_is_registered():
    from verl.trainer.ppo import core_algos

    assert core_algos.get_adv_estimator_fn("xpgym_turn_values") is ESTIMATORS["xpgym_turn_values"]
