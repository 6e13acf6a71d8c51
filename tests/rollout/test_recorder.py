"""Specification of the episode recorder (`xpgym.rollout.recorder`): turns, limits, the end."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from xpgym.rollout.policies import Generation
from xpgym.rollout.recorder import EpisodeRecorder, TurnLimit


def recorder(**kwargs: Any) -> EpisodeRecorder:
    options = {"env_id": "toy", "seed": 7, "group_id": "g", "reset_info": {"level": 1}}
    return EpisodeRecorder(**{**options, **kwargs})


def step(rec: EpisodeRecorder, t: int, *, ended: bool = False, **info: Any) -> bool:
    """Record turn `t`: action ``a{t}`` answering ``o{t}``, reward ``t``."""
    generation = Generation(f"a{t}", token_ids=[10 + t], logprobs=[-0.5])
    return rec.record(f"o{t}", generation, float(t), ended, False, info, prompt_ids=[t])


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "3"])
def test_turn_limit_refuses_anything_but_a_positive_int_or_none(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_turns must be a positive int or None"):
        TurnLimit(bad)


def test_turn_limit_counts_turns() -> None:
    assert TurnLimit(np.int64(2)).max_turns == 2
    assert [TurnLimit(2).reached(n) for n in range(4)] == [False, False, True, True]
    assert not TurnLimit(None).reached(10**6)
    assert TurnLimit(2).reason == "max_turns"


def test_a_turn_holds_what_the_policy_saw_wrote_and_the_env_returned() -> None:
    rec = recorder()
    generation = Generation("guess", "length", token_ids=[5, 6], logprobs=[-1.0, -2.0])
    info = {"correct": False}
    assert not rec.record(
        "obs", generation, np.float64(0.5), np.bool_(False), False, info, prompt_ids=[1]
    )
    (turn,) = rec.episode.turns
    assert (turn.observation, turn.action, turn.reward) == ("obs", "guess", 0.5)
    assert (turn.prompt_ids, turn.response_ids, turn.response_logprobs) == (
        [1],
        [5, 6],
        [-1.0, -2.0],
    )
    assert turn.info == {"correct": False, "generation_truncated": True}
    assert info == {"correct": False}  # the env's dict is not changed
    assert not rec.done


def test_checked_prompt_ids_are_kept_as_given_and_others_copied() -> None:
    rec = recorder()
    given, vouched = [np.int64(1), 2], [3, 4]
    generation = Generation("a", token_ids=[5], logprobs=[-1.0])
    rec.record("o", generation, 0.0, False, False, {}, prompt_ids=given)
    rec.record("o", generation, 0.0, False, False, {}, prompt_ids=vouched, prompt_ids_checked=True)
    copied, kept = rec.episode.turns
    assert copied.prompt_ids == [1, 2]
    assert copied.prompt_ids is not given
    assert {type(t) for t in copied.prompt_ids} == {int}
    assert kept.prompt_ids is vouched


def test_the_env_ending_the_episode_ends_the_record() -> None:
    rec = recorder(max_turns=1)
    assert step(rec, 0, ended=True, episode={"r": 0.0})
    assert rec.done
    assert rec.episode.complete
    assert "truncated_reason" not in rec.episode.turns[-1].info  # the env's end wins
    assert rec.episode.info == {"reset_info": {"level": 1}, "episode": {"r": 0.0}}


def test_max_turns_truncates_the_last_turn_and_names_itself() -> None:
    rec = recorder(max_turns=2)
    assert not step(rec, 0)
    assert step(rec, 1, episode={"r": 1.0})
    last = rec.episode.turns[-1]
    assert last.truncated
    assert not last.terminated
    assert last.info["truncated_reason"] == "max_turns"
    assert rec.episode.info["truncated_reason"] == "max_turns"
    assert rec.episode.info["episode"] == {"r": 1.0}


def test_a_prompt_that_does_not_fit_truncates_the_last_turn() -> None:
    rec = recorder()
    step(rec, 0)
    rec.end_for_context("o1", [0, 10, 1])
    assert len(rec.episode.turns) == 1
    assert rec.episode.turns[-1].truncated
    assert rec.episode.turns[-1].info["truncated_reason"] == "context"
    assert rec.episode.info["truncated_reason"] == "context"


@pytest.mark.parametrize("prompt_ids", [[1, 2], None])
def test_a_first_prompt_that_does_not_fit_gives_one_placeholder_turn(prompt_ids: Any) -> None:
    rec = recorder()
    rec.end_for_context("o0", prompt_ids)
    (turn,) = rec.episode.turns
    assert (turn.observation, turn.action, turn.reward, turn.truncated) == ("o0", "", 0.0, True)
    assert turn.info == {"truncated_reason": "context", "generation_skipped": True}
    assert turn.prompt_ids == prompt_ids
    empty = None if prompt_ids is None else []
    assert (turn.response_ids, turn.response_logprobs) == (empty, empty)
    assert rec.done


def test_an_ended_episode_takes_no_more_turns() -> None:
    rec = recorder()
    step(rec, 0, ended=True)
    with pytest.raises(RuntimeError, match="already ended after 1 turns"):
        step(rec, 1)
    with pytest.raises(RuntimeError, match="already ended"):
        rec.end_for_context("o1", None)


def test_first_messages_put_the_system_prompt_in_front() -> None:
    rec = recorder(system_prompt="Be brief.")
    assert rec.first_messages("Guess.") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Guess."},
    ]
    own = [{"role": "system", "content": "Rules."}, {"role": "user", "content": "Go."}]
    assert rec.first_messages(own) == own


def test_the_episode_is_tagged_and_keeps_a_copy_of_the_reset_info() -> None:
    reset_info = {"level": 1}
    rec = recorder(reset_info=reset_info)
    reset_info["level"] = 2
    episode = rec.episode
    assert (episode.env_id, episode.seed, episode.group_id) == ("toy", 7, "g")
    assert episode.info == {"reset_info": {"level": 1}}


def test_episode_metrics_keep_the_last_value_each_key_reported() -> None:
    rec = recorder()
    step(rec, 0, metrics={"f1": 0.2, "calls": 1})
    step(rec, 1)
    step(rec, 2, metrics={"f1": np.float64(0.8)}, ended=True)
    assert rec.episode.info["metrics"] == {"f1": 0.8, "calls": 1.0}
    assert type(rec.episode.info["metrics"]["f1"]) is float


def test_an_episode_without_metrics_has_no_metrics_key() -> None:
    rec = recorder()
    step(rec, 0, metrics={})
    step(rec, 1, ended=True)
    assert "metrics" not in rec.episode.info


def test_a_metric_that_is_not_a_number_is_left_out() -> None:
    rec = recorder()
    step(rec, 0, ended=True, metrics={"ok": 1.0, "note": "text"})
    assert rec.episode.info["metrics"] == {"ok": 1.0}
