"""The reference trainer's loop with a curriculum scheduler and zero-variance group filtering
(`train(schedulers=..., max_extra_draws=...)`), on the tiny LM of tests/random_byte_lm.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
random_byte_lm = pytest.importorskip("random_byte_lm")

from xpgym.core.env import Wrapper  # noqa: E402
from xpgym.reference.trainer import TrainerConfig, train  # noqa: E402
from xpgym.rollout.curriculum import (  # noqa: E402
    PresetLadder,
    SuccessRateScheduler,
    make_curriculum_vec,
)

GUESS = "game:GuessTheNumber-v0"


class ByteSumBonus(Wrapper):
    """Adds ``sum of the action's bytes / 1e4`` to the reward: every group's returns differ."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward + sum(action.encode()) / 1e4, terminated, truncated, info


class ZeroReward(Wrapper):
    """Every reward is 0: every group has zero variance."""

    def step(self, action):
        obs, _, terminated, truncated, info = self.env.step(action)
        return obs, 0.0, terminated, truncated, info


class Recording(SuccessRateScheduler):
    """Keeps what `observe` was given, step by step."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.seen: list[list[tuple[str | None, int]]] = []

    def observe(self, episodes):
        self.seen.append([(e.group_id, e.turns[-1].info["curriculum"]["level"]) for e in episodes])
        super().observe(episodes)


def run(wrapper, max_extra_draws, steps=2, start_level=2):
    cfg = TrainerConfig(
        num_episodes=4, group_size=2, algorithm="grpo", max_new_tokens=4, max_turns=1, lr=1e-3
    )
    scheduler = Recording(
        [PresetLadder(GUESS)], window=2, start_level=start_level, success=lambda ep: False
    )
    with make_curriculum_vec([PresetLadder(GUESS)], 2, wrappers=[wrapper]) as vec:
        history = train(
            random_byte_lm.tiny_model(seed=0),
            random_byte_lm.tiny_tokenizer(),
            vec,
            cfg,
            num_steps=steps,
            schedulers=[scheduler],
            max_extra_draws=max_extra_draws,
        )
    return history, scheduler


def test_the_scheduler_lowers_the_level_step_by_step_and_is_logged(caplog):
    caplog.set_level("INFO", logger="xpgym.reference.trainer")
    history, scheduler = run(ByteSumBonus, max_extra_draws=None, steps=3)
    levels = [h[f"curriculum/{GUESS}/level"] for h in history]
    assert levels == [1.0, 0.0, 0.0]  # every episode fails: down one level a step, to 0
    # each step's episodes were played at the level the scheduler had set before it
    assert [{lvl for _, lvl in step} for step in scheduler.seen] == [{2}, {1}, {0}]
    assert f"curriculum/{GUESS}/level 0" in caplog.text
    assert all("loss" in h and "filter/groups" not in h for h in history)


def test_groups_that_vary_are_all_kept():
    history, _ = run(ByteSumBonus, max_extra_draws=2, steps=1)
    assert history[0]["filter/groups"] == 2.0
    assert history[0]["filter/dropped"] == history[0]["filter/shortfall"] == 0.0
    assert history[0]["num_episodes"] == 4


def test_zero_variance_groups_are_dropped_refilled_and_the_shortfall_skips_the_update(caplog):
    caplog.set_level("INFO", logger="xpgym.reference.trainer")
    history, scheduler = run(ZeroReward, max_extra_draws=2, steps=1)
    metrics = history[0]
    # draws of 2, 2 and 2 groups, all dropped
    assert {k: v for k, v in metrics.items() if k.startswith("filter/")} == {
        "filter/groups": 0.0,
        "filter/drawn": 6.0,
        "filter/dropped": 6.0,
        "filter/extra_draws": 2.0,
        "filter/shortfall": 2.0,
    }
    assert metrics["update_skipped"] == 1.0
    assert "loss" not in metrics
    # the scheduler saw every drawn episode, each group once
    group_ids = [g for g, _ in scheduler.seen[0]]
    assert len(group_ids) == 12
    assert len(set(group_ids)) == 6
    assert "update skipped" in caplog.text
