"""TRL (trl 1.16) adapter: rollout output, the rollout_func inside a real GRPOTrainer, and
per-turn credit through TRL's own scoring step."""

from __future__ import annotations

import os
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip(
    "xpgym.adapters.trl", reason="needs trl 1.16 (the trl extra)", exc_type=ImportError
)
torch = pytest.importorskip("torch")

from adapter_cases import (  # noqa: E402
    GAMMA,
    PROMPTS,
    RESPONSE_MASKS,
    RESPONSES,
    REWARD_METRICS,
    REWARD_POSITIONS,
    SCORES,
    TURN_RETURNS,
    TURN_REWARDS,
    episodes,
    per_token,
    rebn_reference,
    with_failed_member,
    with_reward_metrics,
)
from trl import GRPOConfig  # noqa: E402

import xpgym  # noqa: E402
from xpgym.adapters.trl import (  # noqa: E402
    TurnCreditGRPOTrainer,
    episode_reward,
    make_rollout_func,
    task_dataset,
    to_rollout_output,
    turn_advantages,
)
from xpgym.core.trajectory import Episode, tree_nodes, turn_state_keys  # noqa: E402
from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus  # noqa: E402
from xpgym.rollout.runner import EpisodeTask, make_tasks  # noqa: E402
from xpgym.training.advantages import (  # noqa: E402
    episode_scores,
    gigpo,
    tree_advantages,
    turn_rewards,
)
from xpgym.training.layouts import episode_rows  # noqa: E402

ENV_ID = "game:GuessTheNumber-v0-easy"


def test_rollout_output_is_one_completion_per_episode_with_env_tokens_masked() -> None:
    out = to_rollout_output(episodes())
    assert out["prompt_ids"] == PROMPTS
    assert out["completion_ids"] == RESPONSES
    assert out["env_mask"] == RESPONSE_MASKS
    expected_logprobs = [
        [-t / 100 if m else 0.0 for t, m in zip(r, mask, strict=True)]
        for r, mask in zip(RESPONSES, RESPONSE_MASKS, strict=True)
    ]
    np.testing.assert_allclose(
        np.concatenate(out["logprobs"]), np.concatenate(expected_logprobs), atol=1e-7
    )
    assert out["episode_reward"] == SCORES


def test_token_rewards_sit_on_each_turns_last_policy_token() -> None:
    out = to_rollout_output(episodes())
    for row, positions, rewards in zip(
        out["token_rewards"], REWARD_POSITIONS, TURN_REWARDS, strict=True
    ):
        expected = np.zeros(len(row))
        expected[positions] = rewards
        np.testing.assert_array_equal(row, expected)


def test_episode_reward_returns_the_column() -> None:
    assert episode_reward(["a", "b"], episode_reward=[1, -0.5], prompts=["p", "p"]) == [1.0, -0.5]
    with pytest.raises(ValueError, match="make_rollout_func"):
        episode_reward(["a", "b"], episode_reward=[1.0])


def _loss_mask(out: dict[str, Any]) -> Any:
    width = max(map(len, out["env_mask"]))
    return torch.tensor([m + [0] * (width - len(m)) for m in out["env_mask"]])


@pytest.mark.parametrize("estimator", ["rebn", "reinforce"])
def test_turn_advantages_equal_the_reference(estimator: str) -> None:
    out = to_rollout_output(episodes())
    got = turn_advantages(out["token_rewards"], _loss_mask(out), estimator=estimator, gamma=GAMMA)
    per_turn = rebn_reference() if estimator == "rebn" else TURN_RETURNS
    expected = per_token(per_turn)
    for row, exp in zip(got.numpy(), expected, strict=True):
        np.testing.assert_allclose(row[: len(exp)], exp, atol=1e-6)
        assert not row[len(exp) :].any()
    assert got.dtype == torch.float32


# --------------------------------------------------------------------------------------
# Inside a real GRPOTrainer (tiny model, CPU)
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trainer(tmp_path_factory: pytest.TempPathFactory) -> TurnCreditGRPOTrainer:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = build_tiny_tokenizer(env_corpus(xpgym.make(ENV_ID), episodes=5))
    out_dir: Path = tmp_path_factory.mktemp("trl")
    args = GRPOConfig(
        output_dir=str(out_dir),
        use_cpu=True,
        per_device_train_batch_size=4,
        num_generations=2,
        max_steps=1,
        max_completion_length=64,
        report_to=[],
        save_strategy="no",
    )
    trainer = TurnCreditGRPOTrainer(
        model=build_tiny_model(tokenizer, seed=0),
        processing_class=tokenizer,
        reward_funcs=episode_reward,
        args=args,
        train_dataset=task_dataset(make_tasks(ENV_ID, 4)),
        rollout_func=make_rollout_func(max_new_tokens=6, max_turns=3),
        turn_advantage="rebn",
        gamma=GAMMA,
    )
    trainer.model.train()  # as in Trainer.train: TRL scores a batch in train mode
    return trainer


def test_repeats_of_a_prompt_play_the_same_task(trainer: TurnCreditGRPOTrainer) -> None:
    task = make_tasks(ENV_ID, 1, seed=7)[0]
    prompts = [task.to_json()] * 2
    out = trainer.rollout_func(prompts, trainer)
    assert out["prompt_ids"][0] == out["prompt_ids"][1]  # same seed, same start state
    for ids, mask, logprobs in zip(
        out["completion_ids"], out["env_mask"], out["logprobs"], strict=True
    ):
        assert len(ids) == len(mask) == len(logprobs) <= trainer.max_completion_length
        assert mask[0] == 1  # the completion starts with the first turn's tokens
        assert mask[-1] == 1  # ... and ends with the last turn's
        assert all(lp < 0 for lp, m in zip(logprobs, mask, strict=True) if m)
    assert EpisodeTask.from_json(prompts[0]) == task
    assert trainer.model.training  # the rollout put the mode back


def test_trl_scoring_step_trains_on_per_turn_advantages(trainer: TurnCreditGRPOTrainer) -> None:
    tasks = make_tasks(ENV_ID, 2, seed=3)
    inputs = [{"prompt": task.to_json()} for task in tasks for _ in range(2)]
    output = trainer._generate_and_score_completions(inputs)
    loss_mask = output["completion_mask"] * output["tool_mask"]
    expected = turn_advantages(
        [x["token_rewards"] for x in inputs], loss_mask, estimator="rebn", gamma=GAMMA
    )
    assert output["advantages"].shape == loss_mask.shape
    torch.testing.assert_close(output["advantages"], expected)
    assert not output["advantages"][loss_mask == 0].any()


def test_turn_credit_refuses_masked_truncated_completions(tmp_path: Path) -> None:
    tokenizer = build_tiny_tokenizer(["a b"])
    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        per_device_train_batch_size=2,
        num_generations=2,
        mask_truncated_completions=True,
        report_to=[],
    )
    with pytest.raises(ValueError, match="mask_truncated_completions=False"):
        TurnCreditGRPOTrainer(
            model=build_tiny_model(tokenizer, hidden_size=16, num_layers=1, num_heads=2),
            processing_class=tokenizer,
            reward_funcs=episode_reward,
            args=args,
            train_dataset=task_dataset(make_tasks(ENV_ID, 2)),
            rollout_func=make_rollout_func(max_new_tokens=4),
        )
    with pytest.raises(ValueError, match="turn_advantage"):
        TurnCreditGRPOTrainer(turn_advantage="gae")


# --------------------------------------------------------------------------------------
# Infrastructure failures (xpgym.core.errors)
# --------------------------------------------------------------------------------------


def test_an_infra_error_member_has_no_loss_tokens_and_the_healthy_group_mean() -> None:
    """TRL groups fixed blocks of num_generations, so the failed member stays in its group
    with the mean reward of the healthy members (`infra_filled_scores`)."""
    out = to_rollout_output(with_failed_member())
    assert out["env_mask"][4] == [0, 0]  # loss mask 0 on its tokens
    assert out["token_rewards"][4] == [0.0, 0.0]
    assert out["episode_reward"] == [*SCORES, 0.5]  # E: mean of A and B, not its 5.0
    assert out["infra_error"] == [False] * 4 + [True]


@pytest.mark.parametrize("estimator", ["rebn", "reinforce"])
def test_turn_credit_leaves_out_an_infra_error_member(estimator: str) -> None:
    out, base = to_rollout_output(with_failed_member()), to_rollout_output(episodes())
    got = turn_advantages(out["token_rewards"], _loss_mask(out), estimator=estimator, gamma=GAMMA)
    want = turn_advantages(
        base["token_rewards"], _loss_mask(base), estimator=estimator, gamma=GAMMA
    )
    np.testing.assert_allclose(got.numpy()[:4, : want.shape[1]], want.numpy(), atol=1e-6)
    assert not got[4].any()


def test_reward_function_metrics_reach_grpo_trainers_log() -> None:
    from collections import defaultdict

    from xpgym.adapters.trl import log_episode_metrics

    # what GRPOTrainer.log averages: per-mode lists of numbers
    trainer = types.SimpleNamespace(
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)}
    )
    log_episode_metrics(trainer, with_reward_metrics(), training=True)
    assert {k: v for k, v in trainer._metrics["train"].items()} == {
        key: [value] for key, value in REWARD_METRICS.items()
    }
    assert not trainer._metrics["eval"]


# --------------------------------------------------------------------------------------
# GiGPO and tree advantages (computed from the episodes, carried in a column)
# --------------------------------------------------------------------------------------


def _on_completions(episodes: Sequence[Episode], per_turn: np.ndarray) -> list[list[float]]:
    """Each turn's value on its policy tokens of the episode's completion, 0 elsewhere."""
    rows = episode_rows(episodes)
    out = []
    for b in range(len(rows)):
        start, stop = int(rows.cu_seqlens[b] + rows.prompt_length[b]), int(rows.cu_seqlens[b + 1])
        turn = rows.turn_index[start:stop]
        out.append(np.where(turn >= 0, per_turn[b, np.maximum(turn, 0)], 0.0).tolist())
    return out


@pytest.mark.parametrize("algorithm", ["gigpo", "tree"])
def test_the_turn_advantages_column_holds_the_reference(algorithm: str) -> None:
    pytest.importorskip("random_byte_lm", reason="needs torch and transformers")
    from tree_cases import tree_episodes

    tree = list(tree_episodes())
    rewards, mask = turn_rewards(tree)
    if algorithm == "gigpo":
        groups = [e.group_id for e in tree]
        want = gigpo(rewards, mask, groups, turn_state_keys(tree), gamma=GAMMA, omega=0.5)
        options = {"omega": 0.5}
    else:
        want = tree_advantages(episode_scores(rewards, mask), mask, *tree_nodes(tree))
        options = {}
    assert np.abs(want).sum() > 0
    out = to_rollout_output(tree, advantage=algorithm, gamma=GAMMA, advantage_kwargs=options)
    for got, expected in zip(out["turn_advantages"], _on_completions(tree, want), strict=True):
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_trl_scoring_step_trains_on_gigpo_of_the_calls_episodes(
    trainer: TurnCreditGRPOTrainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import xpgym.adapters.trl as trl_adapter

    played: list[Episode] = []

    def recording(episodes: Sequence[Episode], **kwargs: Any) -> dict[str, Any]:
        for episode in episodes:  # the tiny model never wins: rewards that differ instead
            for turn in episode.turns:
                turn.reward = sum(turn.response_ids or ()) % 7 / 7
        played.extend(episodes)
        return to_rollout_output(episodes, **kwargs)

    monkeypatch.setattr(trl_adapter, "to_rollout_output", recording)
    monkeypatch.setattr(trainer, "turn_advantage", "gigpo")
    hook = make_rollout_func(max_new_tokens=6, max_turns=3, advantage="gigpo", gamma=GAMMA)
    monkeypatch.setattr(trainer, "rollout_func", hook)
    tasks = make_tasks(ENV_ID, 2, seed=3)
    output = trainer._generate_and_score_completions(
        [{"prompt": task.to_json()} for task in tasks for _ in range(2)]
    )
    rewards, mask = turn_rewards(played)
    groups = [e.group_id for e in played]
    want = gigpo(rewards, mask, groups, turn_state_keys(played), gamma=GAMMA)
    assert np.abs(want).sum() > 0
    loss_mask = output["completion_mask"] * output["tool_mask"]
    expected = torch.zeros(loss_mask.shape)
    for b, row in enumerate(_on_completions(played, want)):
        expected[b, : len(row)] = torch.tensor(row)
    torch.testing.assert_close(output["advantages"], expected * loss_mask)


def test_the_trl_hook_refuses_tree_advantages() -> None:
    with pytest.raises(ValueError, match="one completion per prompt"):
        make_rollout_func(max_new_tokens=4, advantage="tree")


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"advantage": "gipgo"}, ValueError, "advantage must be 'gigpo' or None, got 'gipgo'"),
        ({"advantage": "gigpo", "gamma": 1.5}, ValueError, "gamma must be in"),
        ({"advantage": "gigpo", "advantage_kwargs": {"omeg": 1}}, TypeError, "omeg"),
    ],
)
def test_the_trl_hook_refuses_a_bad_advantage_before_any_batch(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        make_rollout_func(max_new_tokens=4, **options)
