"""Mastermind: scoring, parsing, rewards, a consistent-guess solver, seeding and snapshots."""

from __future__ import annotations

import itertools
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.checks import check_env
from xpgym.envs.games.mastermind import (
    DIFFICULTIES,
    INVALID_REWARD,
    MastermindEnv,
    parse_code,
    score_guess,
)

DIFFS = [None, "easy", "hard", "random"]


def started(seed: int = 0, **kwargs) -> MastermindEnv:
    env = MastermindEnv(**kwargs)
    env.reset(seed=seed)
    return env


def box(code) -> str:
    return "my guess: \\boxed{" + " ".join(map(str, code)) + "}"


@pytest.mark.parametrize(
    ("secret", "guess", "expected"),
    [
        ((1, 2, 3, 4), (1, 2, 3, 4), (4, 0)),
        ((1, 2, 3, 4), (4, 3, 2, 1), (0, 4)),
        ((1, 1, 2, 2), (1, 2, 1, 2), (2, 2)),
        ((1, 1, 1, 1), (1, 2, 2, 2), (1, 0)),
        ((1, 2, 2, 3), (2, 2, 2, 2), (2, 0)),
        ((5, 6, 5, 6), (6, 5, 1, 1), (0, 2)),
        ((1, 2, 3, 4), (5, 5, 5, 5), (0, 0)),
    ],
)
def test_score_guess_hand_checked(secret, guess, expected):
    assert score_guess(secret, guess) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{1 3 5 2}", ("1 3 5 2", (1, 3, 5, 2))),
        ("\\boxed{1,3, 5 ,2}", ("1,3, 5 ,2", (1, 3, 5, 2))),
        ("\\boxed{1352}", ("1352", (1, 3, 5, 2))),
        ("\\boxed{9 9 9 9}\\boxed{1 1 1 1}", ("1 1 1 1", (1, 1, 1, 1))),
    ],
)
def test_parse_code_valid(text, expected):
    assert parse_code(text, 4, 6) == expected


@pytest.mark.parametrize(
    "text",
    [
        "1 2 3 4",
        "\\boxed{1 2 3}",
        "\\boxed{1 2 3 7}",
        "\\boxed{0 1 2 3}",
        "\\boxed{a b c d}",
        "\\boxed{12 3 4 5}",
        "\\boxed{}",
        "\\boxed{１ 2 3 4}",
    ],
)
def test_parse_code_invalid_gives_a_reason(text):
    _, result = parse_code(text, 4, 6)
    assert isinstance(result, str)


def test_correct_guess_terminates_with_reward_one():
    env = started()
    obs, reward, terminated, truncated, info = env.step(box(env.secret))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["correct"] is True
    assert info["invalid_action"] is False
    assert info["black"] == env.code_length
    assert info["white"] == 0
    assert "correct" in obs


def test_wrong_guess_reports_pegs_history_and_turns_left():
    env = started()
    env.secret = (1, 2, 3, 4)
    env.step(box((4, 3, 2, 1)))
    obs, reward, terminated, truncated, info = env.step(box((1, 2, 5, 5)))
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert (info["black"], info["white"]) == (2, 0)
    assert "1. 4 3 2 1 -> 0 black, 4 white" in obs
    assert "2. 1 2 5 5 -> 2 black, 0 white" in obs
    assert obs.endswith("8 turns left.")


def test_invalid_guess_is_penalised_and_not_recorded():
    env = started()
    obs, reward, terminated, truncated, info = env.step("\\boxed{1 2}")
    assert reward == INVALID_REWARD == -0.1
    assert info["invalid_action"] is True
    assert info["black"] is None
    assert (terminated, truncated) == (False, False)
    assert env.history == []
    assert "4 pegs" in obs


def test_turn_limit_truncates_and_reveals_code():
    env = started(max_turns=2)
    env.secret = (1, 1, 1, 1)
    env.step(box((2, 2, 2, 2)))
    obs, _reward, terminated, truncated, _ = env.step("nothing")
    assert (terminated, truncated) == (False, True)
    assert "the code was 1 1 1 1" in obs


def consistent_solver(env: MastermindEnv, seed: int) -> tuple[bool, int]:
    _, info = env.reset(seed=seed)
    candidates = list(
        itertools.product(range(1, info["num_colors"] + 1), repeat=info["code_length"])
    )
    while True:
        guess = candidates[0]
        _, _, terminated, truncated, info = env.step(box(guess))
        if terminated or truncated:
            return info["correct"], info["turn"]
        fb = (info["black"], info["white"])
        candidates = [c for c in candidates if score_guess(c, guess) == fb]


@pytest.mark.parametrize("difficulty", ["easy", None])
def test_consistent_guess_solver_wins_within_the_limit(difficulty):
    env = MastermindEnv(difficulty=difficulty)
    for seed in range(100):
        solved, turns = consistent_solver(env, seed)
        assert solved, f"seed {seed}"
        assert turns <= env.max_turns


@settings(max_examples=300, deadline=None)
@given(st.text() | st.builds(lambda s: f"\\boxed{{{s}}}", st.text()))
def test_any_text_is_a_valid_step(action):
    env = started()
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str)
    assert reward in (1.0, 0.0, -0.1)
    assert type(terminated) is bool
    assert type(truncated) is bool
    assert type(info["correct"]) is bool
    assert type(info["invalid_action"]) is bool
    assert info["invalid_action"] is (reward == -0.1)


@pytest.mark.parametrize("difficulty", DIFFS)
def test_check_env_passes(difficulty):
    check_env(MastermindEnv(difficulty=difficulty))


def transcript(seed: int) -> list:
    env = MastermindEnv(difficulty="random")
    steps = [env.reset(seed=seed)]
    steps += [env.step(env.sample_random_action()) for _ in range(4)]
    return steps


def test_same_seed_same_episode():
    assert transcript(5) == transcript(5)
    assert {
        MastermindEnv(difficulty="random").reset(seed=s)[1]["difficulty"] for s in range(40)
    } == {
        "easy",
        "hard",
    }


def test_set_state_round_trip():
    env = started(seed=3, difficulty="random")
    env.step(env.sample_random_action())
    snap = env.get_state()
    frozen = pickle.dumps(snap)
    first = [env.step(env.sample_random_action()) for _ in range(3)]
    other = MastermindEnv(difficulty="random")
    other.set_state(snap)
    assert [other.step(other.sample_random_action()) for _ in range(3)] == first
    assert pickle.dumps(snap) == frozen


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_presets(difficulty):
    _, info = MastermindEnv(difficulty=difficulty).reset(seed=0)
    assert (info["code_length"], info["num_colors"], info["max_turns"]) == tuple(
        DIFFICULTIES[difficulty]
    )


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"difficulty": "medium"}, ValueError),
        ({"num_colors": 10}, ValueError),
        ({"code_length": 0}, ValueError),
        ({"max_turns": 0}, ValueError),
        ({"max_turns": True}, TypeError),
    ],
)
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error):
        MastermindEnv(**kwargs)
