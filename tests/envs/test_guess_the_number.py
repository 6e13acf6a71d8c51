"""GuessTheNumber: rules, rewards, parsing, seeding and snapshots."""

from __future__ import annotations

import pickle
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpgym
from xpgym.core.env import EpisodeFinishedError
from xpgym.envs.games.guess_the_number import (
    DIFFICULTIES,
    FORMAT_ERROR_REWARD,
    OUT_OF_RANGE_REWARD,
    GuessTheNumberEnv,
    parse_guess,
)

GUESS_IDS = xpgym.list_envs("game:GuessTheNumber-*")


def started(seed: int = 0, **kwargs) -> tuple[GuessTheNumberEnv, str, dict]:
    env = GuessTheNumberEnv(**kwargs)
    obs, info = env.reset(seed=seed)
    return env, obs, info


def boxed(n: int | str) -> str:
    return f"I will guess \\boxed{{{n}}}"


def wrong_guess(env: GuessTheNumberEnv) -> int:
    return env.min_number if env.target != env.min_number else env.max_number


def binary_search(env: xpgym.Env, seed: int) -> tuple[bool, int]:
    """Play one episode by bisection; return (solved, turns used)."""
    _, info = env.reset(seed=seed)
    lo, hi = info["min_number"], info["max_number"]
    while True:
        guess = (lo + hi) // 2
        obs, _, terminated, truncated, info = env.step(boxed(guess))
        if terminated or truncated:
            return info["correct"], info["turn"]
        if "higher" in obs:
            lo = guess + 1
        else:
            assert "lower" in obs
            hi = guess - 1


def test_ids_are_registered():
    assert GUESS_IDS == [
        "game:GuessTheNumber-v0",
        "game:GuessTheNumber-v0-easy",
        "game:GuessTheNumber-v0-hard",
        "game:GuessTheNumber-v0-python",  # with a Python tool (tool variant)
        "game:GuessTheNumber-v0-random",
    ]


def test_reset_observation_states_range_turn_limit_and_format():
    _, obs, info = started(min_number=3, max_number=30, max_turns=6)
    assert "from 3 to 30" in obs
    assert "6 turns" in obs
    assert "\\boxed{}" in obs
    assert info == {
        "difficulty": None,
        "min_number": 3,
        "max_number": 30,
        "max_turns": 6,
        "state_key": "3-30/6",
    }


def test_default_settings_are_one_to_twenty_in_seven_turns():
    env = GuessTheNumberEnv()
    assert (env.min_number, env.max_number, env.max_turns) == (1, 20, 7)


def test_target_is_uniform_over_the_inclusive_range():
    targets = {started(seed)[0].target for seed in range(300)}
    assert targets == set(range(1, 21))


def test_correct_guess_gives_one_and_terminates():
    env, _, _ = started()
    obs, reward, terminated, truncated, info = env.step(boxed(env.target))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info == {
        "correct": True,
        "invalid_action": False,
        "parsed_action": str(env.target),
        "turn": 1,
        "state_key": "1-20/6",
    }
    assert "correct" in obs


def test_wrong_guess_gives_zero_and_says_higher_or_lower():
    env, _, _ = started(min_number=1, max_number=20)
    env.target = 10
    obs_low, reward_low, *_ = env.step(boxed(3))
    obs_high, reward_high, terminated, truncated, info = env.step(boxed(15))
    assert "the number is higher than 3" in obs_low
    assert "the number is lower than 15" in obs_high
    assert (reward_low, reward_high, terminated, truncated) == (0.0, 0.0, False, False)
    assert info["correct"] is False
    assert info["invalid_action"] is False


def test_the_state_key_is_the_range_left_and_the_turns_left_however_it_was_reached():
    """Two guess orders that leave the same range at the same turn are one state (GiGPO's
    anchor), though the last feedback differs; a different range is another state."""

    def keys(guesses: list[int]) -> list[str]:
        env, _, info = started(min_number=1, max_number=20, max_turns=5)
        env.target = 10
        return [info["state_key"]] + [env.step(boxed(g))[4]["state_key"] for g in guesses]

    assert keys([3, 15]) == ["1-20/5", "4-20/4", "4-14/3"]
    assert keys([15, 3])[-1] == keys([3, 15])[-1]  # "lower than 15" vs "higher than 3"
    assert keys([4, 15])[-1] == "5-14/3"
    assert keys([99])[-1] == "1-20/4"  # an invalid guess teaches nothing


def test_a_fork_restores_the_range_left():
    env, _, _ = started(min_number=1, max_number=20)
    env.target = 10
    env.step(boxed(3))
    state = env.get_state()
    key_then = env.step(boxed(15))[4]["state_key"]
    env.step(boxed(12))
    env.set_state(state)
    assert env.step(boxed(15))[4]["state_key"] == key_then


def test_observation_reports_turn_and_turns_left():
    env, _, _ = started(max_turns=5)
    obs, *_ = env.step(boxed(wrong_guess(env)))
    assert obs.startswith("Turn 1/5:")
    assert obs.endswith("4 turns left.")


def test_only_the_last_boxed_integer_counts():
    env, _, _ = started()
    action = f"maybe \\boxed{{{env.target}}}? no: {boxed(wrong_guess(env))}"
    _, _, terminated, _, info = env.step(action)
    assert terminated is False
    assert info["parsed_action"] == str(wrong_guess(env))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{7}", ("7", 7)),
        ("\\boxed{ 7 }", ("7", 7)),
        ("\\boxed{+7}", ("+7", 7)),
        ("\\boxed{-7}", ("-7", -7)),
        ("\\boxed{007}", ("007", 7)),
        ("\\boxed{1}\\boxed{2}", ("2", 2)),
        ("\\boxed{seven}", ("seven", None)),
        ("\\boxed{7.5}", ("7.5", None)),
        ("\\boxed{}", ("", None)),
        ("\\boxed{\\frac{1}{2}}", (None, None)),
        ("7", (None, None)),
        ("\\boxed{7", (None, None)),
        ("\\boxed{\u0663}", ("\u0663", None)),  # Arabic-Indic 3: a digit, not an ASCII one
        ("\\boxed{\u00b2}", ("\u00b2", None)),  # superscript 2
        ("\\boxed{\uff13}", ("\uff13", None)),  # fullwidth 3
    ],
)
def test_parse_guess_reads_the_last_boxed_signed_integer(text, expected):
    assert parse_guess(text) == expected


def test_parse_guess_maps_huge_integers_out_of_range_without_raising():
    boxed_text, guess = parse_guess("\\boxed{" + "9" * 10_000 + "}")
    assert boxed_text == "9" * 10_000
    assert guess > 10**20


@pytest.mark.parametrize("guess", [0, 21, -5, "1" + "0" * 5000])
def test_out_of_range_guess_is_invalid_with_penalty(guess):
    env, _, _ = started(min_number=1, max_number=20)
    obs, reward, terminated, truncated, info = env.step(boxed(guess))
    assert reward == OUT_OF_RANGE_REWARD == -0.1
    assert (terminated, truncated) == (False, False)
    assert info["invalid_action"] is True
    assert "out of range" in obs


@pytest.mark.parametrize("action", ["42", "the answer is 4", "\\boxed{four}", ""])
def test_unparsable_action_is_invalid_with_penalty_and_counts_as_a_turn(action):
    env, _, _ = started()
    obs, reward, terminated, truncated, info = env.step(action)
    assert reward == FORMAT_ERROR_REWARD == -0.1
    assert (terminated, truncated) == (False, False)
    assert info["invalid_action"] is True
    assert info["turn"] == 1
    assert "\\boxed{}" in obs


def test_parsed_action_is_none_without_boxed():
    env, _, _ = started()
    assert env.step("no box here")[4]["parsed_action"] is None


def test_turn_limit_truncates_without_terminating_and_reveals_target():
    env, _, _ = started(max_turns=2)
    env.step(boxed(wrong_guess(env)))
    obs, reward, terminated, truncated, info = env.step(boxed(wrong_guess(env)))
    assert (terminated, truncated) == (False, True)
    assert reward == 0.0
    assert info["turn"] == 2
    assert f"the number was {env.target}" in obs


def test_correct_guess_on_last_turn_terminates_without_truncating():
    env, _, _ = started(max_turns=1)
    _, _, terminated, truncated, _ = env.step(boxed(env.target))
    assert (terminated, truncated) == (True, False)


def test_step_after_the_end_raises():
    env, _, _ = started()
    env.step(boxed(env.target))
    with pytest.raises(EpisodeFinishedError):
        env.step(boxed(env.target))


@settings(max_examples=300, deadline=None)
@given(st.text() | st.builds(lambda s: f"\\boxed{{{s}}}", st.text()))
def test_any_text_is_a_valid_step(action):
    env, _, _ = started()
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str)
    assert reward in (1.0, 0.0, -0.1)
    assert not (terminated and truncated)
    assert info["invalid_action"] is (reward == -0.1)


@pytest.mark.parametrize("env_id", GUESS_IDS)
def test_registered_settings_give_bisection_enough_turns(env_id):
    env = xpgym.make(env_id)
    for seed in range(20):  # "-random" draws its preset at reset
        _, info = env.reset(seed=seed)
        n = info["max_number"] - info["min_number"] + 1
        assert n.bit_length() <= info["max_turns"]  # bisection's worst case: floor(log2 n)+1


@pytest.mark.parametrize("env_id", GUESS_IDS)
def test_binary_search_wins_every_seed_within_log2_turns(env_id):
    env = xpgym.make(env_id)
    for seed in range(200):
        solved, turns = binary_search(env, seed)
        n = env.max_number - env.min_number + 1
        assert solved, f"seed {seed}"
        assert turns <= n.bit_length()  # == ceil(log2(n)) for n = 10, 20, 50


def test_same_seed_gives_the_same_episode():
    def transcript(env: xpgym.Env) -> list:
        steps = [env.reset(seed=7)]
        for _ in range(3):
            steps.append(env.step(env.sample_random_action()))
        return steps

    assert transcript(xpgym.make("game:GuessTheNumber-v0-random")) == transcript(
        xpgym.make("game:GuessTheNumber-v0-random")
    )


def test_random_difficulty_draws_both_presets_from_np_random():
    env = GuessTheNumberEnv(difficulty="random")
    drawn = {env.reset(seed=seed)[1]["difficulty"] for seed in range(40)}
    assert drawn == {"easy", "hard"}


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_difficulty_selects_its_preset(difficulty):
    _, _, info = started(difficulty=difficulty)
    preset = DIFFICULTIES[difficulty]
    assert (info["min_number"], info["max_number"], info["max_turns"]) == tuple(preset)


def test_explicit_numbers_override_the_preset():
    _, _, info = started(difficulty="hard", max_turns=10)
    assert (info["min_number"], info["max_number"], info["max_turns"]) == (1, 50, 10)


def test_sample_random_action_is_a_boxed_integer_in_range():
    env, _, _ = started(min_number=5, max_number=8)
    samples = {env.sample_random_action() for _ in range(200)}
    assert samples == {f"\\boxed{{{k}}}" for k in range(5, 9)}


def test_set_state_replays_the_episode_from_the_snapshot():
    env, _, _ = started(difficulty="random", seed=3)
    env.step(env.sample_random_action())
    snapshot = env.get_state()
    first = [env.step(env.sample_random_action()) for _ in range(2)]
    other = GuessTheNumberEnv(difficulty="random")
    other.set_state(snapshot)
    assert [other.step(other.sample_random_action()) for _ in range(2)] == first


def test_snapshot_is_picklable_and_unchanged_by_later_steps():
    env, _, _ = started()
    snapshot = env.get_state()
    frozen = pickle.dumps(snapshot)
    env.step(env.sample_random_action())
    env.set_state(snapshot)
    env.step(env.sample_random_action())
    assert pickle.dumps(snapshot) == frozen


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"difficulty": "medium"}, ValueError, "difficulty must be"),
        ({"min_number": 5, "max_number": 5}, ValueError, "must be less than max_number"),
        ({"min_number": 9, "max_number": 2}, ValueError, "must be less than max_number"),
        ({"max_turns": 0}, ValueError, "max_turns must be >= 1"),
        ({"max_number": 20.0}, TypeError, "max_number must be an int"),
        ({"max_turns": True}, TypeError, "max_turns must be an int"),
    ],
)
def test_invalid_constructor_arguments_raise_clear_errors(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        GuessTheNumberEnv(**kwargs)
