"""ROLL adapter: GEM (gem-llm 0.0.4) registration as ROLL's env managers use it, batch keys.

ROLL itself is not installable here (not on PyPI); its env managers call
``gem.make(env_id=..., **env_config)``, ``reset(seed=...)`` and ``step(action=...)``, which
these tests call the same way. The ``step_reinforce`` check recomputes ROLL's formula from
the batch keys with numpy (the formula read from ROLL's ``agentic/utils.py``).
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest

# The adapter first: it imports GEM and undoes GEM's logging.basicConfig(INFO).
pytest.importorskip(
    "xpgym.adapters.roll", reason="needs gem-llm 0.0.4 (the roll extra)", exc_type=ImportError
)
import gem
from adapter_cases import (
    GAMMA,
    GROUPS,
    PROMPTS,
    RESPONSE_MASKS,
    RESPONSES,
    REWARD_METRICS,
    SCORES,
    TURN_REWARDS,
    episodes,
    with_failed_member,
    with_reward_metrics,
)

from xpgym.adapters.roll import (
    PREFIX,
    STEP_REINFORCE_CONFIG,
    XpgymGemEnv,
    ZeroVarianceGroupFilter,
    register_gem_envs,
    step_batch,
    trajectory_batch,
)
from xpgym.training.advantages import discounted_returns, grpo, rebn, turn_rewards

L = 16  # sequence_length


def test_xpgym_envs_register_under_a_prefix_without_touching_gems_own() -> None:
    ids = register_gem_envs(["game:GuessTheNumber-v0-easy", "game:Mastermind-v0-easy"])
    assert ids == [f"{PREFIX}game:GuessTheNumber-v0-easy", f"{PREFIX}game:Mastermind-v0-easy"]
    assert register_gem_envs(["game:GuessTheNumber-v0-easy"]) == ids[:1]  # idempotent
    gems_own = gem.make("game:GuessTheNumber-v0")
    assert not isinstance(gems_own, XpgymGemEnv)


def test_roll_style_make_reset_and_step() -> None:
    (gem_id,) = register_gem_envs(["game:GuessTheNumber-v0-easy"])
    env = gem.make(env_id=gem_id, seed=7)  # ROLL: gem.make(env_id=env_type, **config)
    assert isinstance(env, gem.core.Env)
    first, info = env.reset(seed=11)
    again, _ = gem.make(env_id=gem_id).reset(seed=11)
    assert first == again  # the seed decides the start state
    low = info["min_number"]
    observation, reward, _terminated, _truncated, step_info = env.step(action=f"\\boxed{{{low}}}")
    assert isinstance(observation, str)
    assert isinstance(reward, float)
    assert step_info["parsed_action"] == str(low)
    assert env.reset()[0] == gem.make(env_id=gem_id, seed=7).reset()[0]  # config seed


def test_step_batch_has_one_sample_per_turn() -> None:
    eps = episodes()
    batch = step_batch(eps, pad_token_id=0, sequence_length=L)
    assert len(batch) == 7
    turns = [t for ep in eps for t in ep.turns]
    for b, turn in enumerate(turns):
        n_prompt, n = len(turn.prompt_ids), len(turn.prompt_ids) + len(turn.response_ids)
        assert batch.batch["input_ids"][b].tolist() == turn.prompt_ids + turn.response_ids + [0] * (
            L - n
        )
        assert batch.batch["response_mask"][b].tolist() == [False] * n_prompt + [True] * len(
            turn.response_ids
        ) + [False] * (L - n)
        assert batch.batch["prompt_mask"][b].tolist() == [True] * n_prompt + [False] * (
            L - n_prompt
        )
        assert batch.batch["position_ids"][b].tolist() == list(range(n)) + [0] * (L - n)
        expected_scores = [0.0] * L
        expected_scores[n - 1] = turn.reward
        assert batch.batch["scores"][b].tolist() == expected_scores
    assert batch.batch["response_mask"].dtype == bool
    assert batch.batch["scores"].dtype == np.float32
    assert batch.batch["infer_logprobs"].shape == (7, L - 1)
    nt = batch.non_tensor_batch
    assert nt["step"].tolist() == [0, 1, 0, 1, 2, 0, 0]
    assert nt["step_scores"].tolist() == [r for ep in TURN_REWARDS for r in ep]
    assert nt["episode_scores"].tolist() == [1.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.0]
    assert len(set(nt["traj_id"][:2])) == 1
    assert len(set(nt["traj_id"])) == 4
    assert nt["traj_group_id"].tolist() == ["g0"] * 5 + ["g1"] * 2


def test_state_hash_is_equal_exactly_for_turns_of_one_group_on_one_state() -> None:
    eps = episodes()  # g0: episodes 0 (2 turns) and 1 (3 turns); g1: 2 and 3 (1 turn each)
    seen = [["a", "b"], ["a", "c", "b"], ["a"], ["a"]]
    for episode, observations in zip(eps, seen, strict=True):
        for turn, observation in zip(episode.turns, observations, strict=True):
            turn.observation = observation
    hashes = step_batch(eps, pad_token_id=0, sequence_length=L).non_tensor_batch["state_hash"]
    (a0, b0), (a1, c1, b1), (a2,), (a3,) = hashes[:2], hashes[2:5], hashes[5:6], hashes[6:]
    assert a0 == a1
    assert b0 == b1  # the same state, reached at different turns
    assert len({a0, b0, c1}) == 3
    assert a2 == a3 != a0  # the same observation in another group


def test_state_hash_follows_the_envs_state_key_over_the_observation() -> None:
    eps = episodes()[:2]
    for episode in eps:
        episode.info["reset_info"] = {"state_key": "start"}
    eps[0].turns[0].info["state_key"] = "left"
    eps[1].turns[0].info["state_key"] = "left"
    eps[1].turns[1].info["state_key"] = "right"
    hashes = step_batch(eps, pad_token_id=0, sequence_length=L).non_tensor_batch["state_hash"]
    assert hashes.tolist()[:4] == ["g0#env:start", "g0#env:left", "g0#env:start", "g0#env:left"]
    assert hashes[4] == "g0#env:right"


def test_trajectory_batch_has_one_sample_per_episode() -> None:
    batch = trajectory_batch(episodes(), pad_token_id=0, sequence_length=L)
    for b in range(4):
        n_prompt, n = len(PROMPTS[b]), len(PROMPTS[b]) + len(RESPONSES[b])
        assert batch.batch["input_ids"][b].tolist() == PROMPTS[b] + RESPONSES[b] + [0] * (L - n)
        mask = [0] * n_prompt + RESPONSE_MASKS[b] + [0] * (L - n)
        assert batch.batch["response_mask"][b].astype(int).tolist() == mask
        assert batch.batch["prompt_mask"][b].tolist() == [True] * n_prompt + [False] * (
            L - n_prompt
        )
        assert batch.batch["scores"][b, n - 1] == SCORES[b]
        assert batch.batch["scores"][b].sum() == SCORES[b]
    assert batch.non_tensor_batch["step_scores"].tolist() == TURN_REWARDS
    assert batch.non_tensor_batch["group_ids"].tolist() == GROUPS
    assert "step" not in batch.non_tensor_batch


def test_step_reinforce_formula_on_the_keys_is_unbiased_rebn() -> None:
    """ROLL: per traj_id ordered by step, G_t over step_scores; then over the batch
    (G - mean) / (std + 1e-6), unbiased std, 0 when std <= 1e-6."""
    eps = episodes()
    nt = step_batch(eps, pad_token_id=0, sequence_length=L).non_tensor_batch
    returns = np.zeros(len(nt["step"]))
    for traj in set(nt["traj_id"]):
        rows = [i for i in np.flatnonzero(nt["traj_id"] == traj)]
        rows.sort(key=lambda i: nt["step"][i])
        running = 0.0
        for i in reversed(rows):
            running = nt["step_scores"][i] + GAMMA * running
            returns[i] = running
    roll = (returns - returns.mean()) / (returns.std(ddof=1) + 1e-6)
    r, m = turn_rewards(eps)
    reference = rebn(
        discounted_returns(r, m, GAMMA),
        m,
        std="unbiased",
        eps=1e-6,
        zero_std="zero",
        zero_std_tol=1e-6,
    )
    np.testing.assert_allclose(roll, reference[m], atol=1e-9)
    assert STEP_REINFORCE_CONFIG["adv_estimator"] == "step_reinforce"
    assert STEP_REINFORCE_CONFIG["reward_normalization"] == {
        "grouping": "batch",
        "method": "mean_std",
    }


def test_sequence_length_is_enforced() -> None:
    with pytest.raises(ValueError, match="max_length=8"):
        trajectory_batch(episodes(), pad_token_id=0, sequence_length=8)
    cut = trajectory_batch(episodes(), pad_token_id=0, sequence_length=8, truncate=True)
    assert cut.batch["input_ids"].shape == (4, 8)


# --------------------------------------------------------------------------------------
# Infrastructure failures (xpgym.core.errors)
# --------------------------------------------------------------------------------------


def test_an_infra_error_member_is_a_group_of_its_own_with_no_loss_and_no_score() -> None:
    """ROLL's ``mean_std`` grouped by ``traj_group_id`` (the reference formula on the keys
    ROLL reads) gives the other members exactly their advantages without it."""
    data = trajectory_batch(with_failed_member(), pad_token_id=0, sequence_length=L)
    batch, nt = data.batch, data.non_tensor_batch
    assert not batch["response_mask"][4].any()  # loss mask 0 on its tokens
    assert not batch["scores"][4].any()
    assert nt["traj_group_id"][4] == "xpgym-infra-error-4"
    assert nt["infra_error"].tolist() == [False] * 4 + [True]

    def roll_mean_std(nt: dict[str, np.ndarray], batch: dict[str, np.ndarray]) -> np.ndarray:
        scores = batch["scores"].sum(axis=1)
        groups = list(nt["traj_group_id"])
        return grpo(scores, groups, eps=1e-6, zero_std="zero", zero_std_tol=1e-6)

    base = trajectory_batch(episodes(), pad_token_id=0, sequence_length=L)
    got = roll_mean_std(nt, batch)
    np.testing.assert_array_equal(got[:4], roll_mean_std(base.non_tensor_batch, base.batch))
    assert got[4] == 0.0


def test_reward_function_metrics_reach_rolls_meta_info() -> None:
    batch = trajectory_batch(with_reward_metrics(), pad_token_id=0, sequence_length=16, tag="t")
    assert batch.meta_info["metrics"] == {f"env/t/{k}": v for k, v in REWARD_METRICS.items()}


def rollouts(*scores: float | None) -> list[Any]:
    """A ROLL group as ``GroupQueue`` hands it to the filter: one DataProto per rollout
    (None for an env that exited), each with ``episode_scores`` as ROLL's env managers set it."""
    return [
        None
        if score is None
        else types.SimpleNamespace(non_tensor_batch={"episode_scores": np.array([score], object)})
        for score in scores
    ]


def test_zero_variance_group_filter_drops_equal_scores_in_training_only() -> None:
    train = ZeroVarianceGroupFilter(None, None, "train")
    train.max_drop_fraction = 1.0  # no bound here: the rule alone
    assert train.filter(0, 0, rollouts(1.0, 1.0, 1.0)) is True
    assert train.filter(0, 1, rollouts(0.0, 0.0)) is True
    assert train.filter(0, 2, rollouts(0.0, 1.0)) is False
    assert train.filter(0, 3, rollouts(0.5, None, 0.5)) is True  # an exited env: not counted
    assert train.filter(0, 4, rollouts(0.5, None)) is True  # fewer than two: no advantage
    assert (train.seen, train.dropped) == (5, 4)
    val = ZeroVarianceGroupFilter(None, None, "val")
    assert val.filter(0, 0, rollouts(1.0, 1.0)) is False


def test_zero_variance_group_filter_drops_at_most_its_fraction_of_the_groups() -> None:
    """Each drop makes ROLL play a new group: the bound keeps a run of flat groups finite."""
    group_filter = ZeroVarianceGroupFilter(None, None, "train")
    decisions = [group_filter.filter(0, i, rollouts(0.0, 0.0)) for i in range(10)]
    assert decisions == [False, True] * 5  # max_drop_fraction 0.5
    assert group_filter.dropped <= group_filter.max_drop_fraction * group_filter.seen
