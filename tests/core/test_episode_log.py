"""`EpisodeLog`: one JSON line per finished episode, per process, switched on by make."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

import xpgym
from xpgym.core.wrappers.episode_log import (
    EPISODE_LOG_VARIABLE,
    EpisodeLog,
    log_episodes_if_requested,
    read_episode_log,
)
from xpgym.rollout.env_pool import make_trainer_env

ENV_ID = "game:GuessTheNumber-v0-easy"


def _play(env: xpgym.Env, seed: int, guesses: list[str]) -> float:
    """Reset with `seed` and guess in order until the episode ends; return its reward sum."""
    env.reset(seed=seed)
    total = 0.0
    for guess in guesses:
        _, reward, terminated, truncated, _ = env.step(guess)
        total += reward
        if terminated or truncated:
            return total
    raise AssertionError("the episode did not end")


GUESSES = [f"\\boxed{{{n}}}" for n in range(1, 11)] * 3


def test_each_finished_episode_is_one_line_with_its_return_and_length(tmp_path: Path) -> None:
    env = EpisodeLog(xpgym.make(ENV_ID), tmp_path)
    returns = [_play(env, seed, GUESSES) for seed in (3, 4, 5)]
    env.close()
    records = read_episode_log(tmp_path)
    assert [r["seed"] for r in records] == [3, 4, 5]
    assert [r["return"] for r in records] == pytest.approx(returns)
    assert all(r["env_id"] == ENV_ID and r["length"] >= 1 for r in records)
    assert all(r["env_s"] >= 0.0 for r in records)
    assert [r["end"] for r in records] == sorted(r["end"] for r in records)


def test_env_time_counts_only_time_inside_the_env(tmp_path: Path) -> None:
    ticks = iter(range(1000))
    env = EpisodeLog(xpgym.make(ENV_ID), tmp_path, clock=lambda: float(next(ticks)))
    env.reset(seed=0)  # clock 0 -> 1: one second in reset
    for guess in GUESSES:  # each step: clock n -> n + 1, one second in the env
        *_, terminated, truncated, _ = env.step(guess)
        if terminated or truncated:
            break
    (record,) = read_episode_log(tmp_path)
    assert record["env_s"] == 1.0 + record["length"]


def test_an_episode_the_caller_cut_short_is_logged_with_what_it_earned(tmp_path: Path) -> None:
    """A trainer's token budget or turn limit ends episodes the env never ended; they are
    training episodes all the same, so their last step's totals are the record."""
    env = EpisodeLog(xpgym.make(ENV_ID), tmp_path)
    env.reset(seed=1)
    env.step("\\boxed{1}")
    _play(env, 2, GUESSES)
    env.reset(seed=3)
    env.step("\\boxed{1}")
    env.step("\\boxed{2}")
    records = read_episode_log(tmp_path)
    assert [(r["seed"], r["length"], r["done"]) for r in records] == [
        (1, 1, False),
        (2, records[1]["length"], True),
        (3, 2, False),
    ]


def test_trainer_envs_are_logged_only_when_the_variable_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(EPISODE_LOG_VARIABLE, raising=False)
    assert not isinstance(make_trainer_env(ENV_ID), EpisodeLog)
    monkeypatch.setenv(EPISODE_LOG_VARIABLE, str(tmp_path))
    env = make_trainer_env(ENV_ID)
    assert isinstance(env, EpisodeLog)
    assert env.spec is not None
    assert env.spec.id == ENV_ID
    _play(env, 7, GUESSES)
    assert [r["seed"] for r in read_episode_log(tmp_path)] == [7]


def test_make_itself_never_reads_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EPISODE_LOG_VARIABLE, str(tmp_path))
    assert not isinstance(xpgym.make(ENV_ID), EpisodeLog)


def test_vector_env_sub_envs_are_logged_through_the_wrapper_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EPISODE_LOG_VARIABLE, str(tmp_path))
    with xpgym.make_vec(
        ENV_ID, 2, vectorization_mode="process", wrappers=[log_episodes_if_requested]
    ) as vec:
        assert vec.get_attr("directory") == (tmp_path, tmp_path)


def _child(directory: str, seed: int) -> None:
    env = EpisodeLog(xpgym.make(ENV_ID), directory)
    _play(env, seed, GUESSES)
    env.close()


def test_each_process_writes_its_own_file_and_reading_merges_them(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    child = context.Process(target=_child, args=(str(tmp_path), 11))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == 0
    _child(str(tmp_path), 12)
    assert len(list(tmp_path.glob("episodes-*.jsonl"))) == 2
    assert sorted(r["seed"] for r in read_episode_log(tmp_path)) == [11, 12]


def test_reading_names_a_missing_log_and_a_broken_line(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=EPISODE_LOG_VARIABLE):
        read_episode_log(tmp_path)
    good = json.dumps({"episode": "1-a-1", "end": 1.0, "return": 0.0})
    (tmp_path / "episodes-h-1.jsonl").write_text(f"{good}\n{{broken\n")
    with pytest.raises(ValueError, match=r"episodes-h-1.jsonl:2"):
        read_episode_log(tmp_path)


def test_envs_restored_from_one_snapshot_are_logged_as_episodes_of_their_own(
    tmp_path: Path,
) -> None:
    """A GRPO group: one env is reset, the others start from its snapshot (no reset)."""
    leader = EpisodeLog(xpgym.make(ENV_ID), tmp_path)
    leader.reset(seed=5)
    leader.step("\\boxed{1}")
    snapshot = leader.get_state()
    members = [EpisodeLog(xpgym.make(ENV_ID), tmp_path) for _ in range(2)]
    for member in [*members, leader]:
        member.set_state(snapshot)
        for guess in GUESSES[1:]:
            *_, terminated, truncated, _ = member.step(guess)
            if terminated or truncated:
                break
    records = read_episode_log(tmp_path)
    finished = [r for r in records if r["done"]]
    assert len(finished) == 3
    assert {r["seed"] for r in finished} == {5}
    assert len({r["episode"] for r in finished}) == 3
    assert len({r["length"] for r in finished}) == 1  # same actions from the same state
