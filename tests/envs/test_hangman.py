"""Hangman: rules, rewards, a frequency-based solver, seeding and snapshots."""

from __future__ import annotations

import pickle
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.checks import check_env
from xpgym.envs.games.hangman import (
    DIFFICULTIES,
    HIT_REWARD,
    INVALID_REWARD,
    HangmanEnv,
)

PRESETS = [None, "easy", "hard", "random"]


def started(secret: str = "apple", seed: int = 0, **kwargs) -> HangmanEnv:
    env = HangmanEnv(**kwargs)
    env.reset(seed=seed)
    env.secret = secret
    return env


def boxed(guess: str) -> str:
    return f"I guess \\boxed{{{guess}}}"


def test_reset_shows_the_blank_pattern_lives_and_format():
    env = HangmanEnv(difficulty="easy")
    obs, info = env.reset(seed=0)
    assert " ".join("_" * len(env.secret)) in obs
    assert "8 lives left" in obs
    assert "30 turns left" in obs
    assert "\\boxed{e}" in obs
    assert info == {
        "difficulty": "easy",
        "word_length": len(env.secret),
        "lives": 8,
        "max_turns": 30,
    }
    lengths = {env.reset(seed=s)[1]["word_length"] for s in range(100)}
    assert lengths == {6, 7, 8}


def test_hit_reveals_every_occurrence():
    env = started("apple")
    obs, reward, terminated, truncated, info = env.step(boxed("P"))
    assert (reward, terminated, truncated) == (HIT_REWARD, False, False)
    assert info["pattern"] == "_pp__"
    assert info["lives"] == 6
    assert "p occurs 2 times" in obs
    assert "_ p p _ _" in obs


def test_miss_costs_a_life():
    env = started("apple")
    obs, reward, _, _, info = env.step(boxed("z"))
    assert (reward, info["lives"], info["invalid_action"]) == (0.0, 5, False)
    assert "no z" in obs
    assert "5 lives left" in obs


def test_revealing_the_last_letter_wins():
    env = started("apple")
    for letter in "apl":
        env.step(boxed(letter))
    _obs, reward, terminated, truncated, info = env.step(boxed("e"))
    assert (reward, terminated, truncated, info["correct"]) == (1.0, True, False, True)
    assert info["pattern"] == "apple"


def test_word_guess_wins_or_costs_a_life():
    env = started("apple")
    _, reward, terminated, _, info = env.step(boxed("maple"))
    assert (reward, terminated, info["lives"]) == (0.0, False, 5)
    _, reward, terminated, _, info = env.step(boxed("Apple"))
    assert (reward, terminated, info["correct"]) == (1.0, True, True)


def test_losing_the_last_life_terminates_and_reveals():
    env = started("apple", lives=2)
    env.step(boxed("z"))
    obs, reward, terminated, truncated, info = env.step(boxed("q"))
    assert (reward, terminated, truncated, info["correct"]) == (0.0, True, False, False)
    assert "the word was apple" in obs


@pytest.mark.parametrize(
    "action", ["e", "\\boxed{}", "\\boxed{3}", "\\boxed{é}", "\\boxed{a b}", "\\boxed{e"]
)
def test_malformed_action_is_invalid_and_costs_no_life(action):
    env = started("apple")
    _, reward, terminated, truncated, info = env.step(action)
    assert reward == INVALID_REWARD == -0.1
    assert (terminated, truncated, info["invalid_action"], info["lives"]) == (
        False,
        False,
        True,
        6,
    )


def test_repeated_guess_is_invalid_and_costs_no_life():
    env = started("apple")
    env.step(boxed("z"))
    env.step(boxed("maple"))
    for guess in ("z", "Z", "maple"):
        obs, reward, _, _, info = env.step(boxed(guess))
        assert (reward, info["invalid_action"], info["lives"]) == (-0.1, True, 4)
        assert "already guessed" in obs


def test_turn_limit_truncates():
    env = started("apple", max_turns=2)
    env.step(boxed("a"))
    obs, _, terminated, truncated, _ = env.step("no box")
    assert (terminated, truncated) == (False, True)
    assert "the word was apple" in obs


def play_by_frequency(env: HangmanEnv, seed: int) -> tuple[bool, float]:
    """Guess the most frequent untried letter among the words matching the pattern."""
    env.reset(seed=seed)
    candidates = list(env.candidates)
    tried: set[str] = set()
    pattern = "_" * len(env.secret)
    candidates = [w for w in candidates if len(w) == len(pattern)]
    total = 0.0
    while True:
        counts = Counter(c for w in candidates for c in set(w) if c not in tried)
        letter = max(sorted(counts), key=counts.__getitem__)
        tried.add(letter)
        _, reward, terminated, truncated, info = env.step(boxed(letter))
        total += reward
        if terminated or truncated:
            return info["correct"], total
        pattern = info["pattern"]
        candidates = [
            w
            for w in candidates
            if all((p == "_" and c not in tried) or p == c for p, c in zip(pattern, w, strict=True))
        ]


@pytest.mark.parametrize("difficulty", PRESETS)
def test_frequency_solver_wins(difficulty):
    env = HangmanEnv(difficulty=difficulty)
    results = [play_by_frequency(env, seed) for seed in range(200)]
    wins = sum(won for won, _ in results)
    assert wins >= {"easy": 198, "hard": 120}.get(difficulty, 160), wins  # hard: ~74%
    assert all(ret >= 1.0 for won, ret in results if won)


@settings(max_examples=300, deadline=None)
@given(st.text() | st.builds(lambda s: f"\\boxed{{{s}}}", st.text()))
def test_any_text_is_a_valid_step(action):
    env = started("apple")
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str)
    assert reward in (1.0, 0.1, 0.0, -0.1)
    assert type(info["correct"]) is bool
    assert type(info["invalid_action"]) is bool
    assert info["invalid_action"] is (reward == -0.1)
    assert not (terminated and truncated)


def test_same_seed_gives_the_same_episode():
    def transcript() -> list:
        env = HangmanEnv(difficulty="random")
        steps = [env.reset(seed=7)]
        return steps + [env.step(env.sample_random_action()) for _ in range(5)]

    assert transcript() == transcript()


def test_random_difficulty_draws_both_presets():
    env = HangmanEnv(difficulty="random")
    assert {env.reset(seed=s)[1]["difficulty"] for s in range(40)} == {"easy", "hard"}


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_difficulty_selects_its_preset(difficulty):
    env = HangmanEnv(difficulty=difficulty)
    _, info = env.reset(seed=0)
    preset = DIFFICULTIES[difficulty]
    assert (info["lives"], info["max_turns"]) == (preset.lives, preset.max_turns)
    assert preset.min_length <= info["word_length"] <= preset.max_length


def test_set_state_replays_and_snapshot_is_frozen():
    env = HangmanEnv(difficulty="random")
    env.reset(seed=3)
    env.step(env.sample_random_action())
    snapshot = env.get_state()
    frozen = pickle.dumps(snapshot)
    first = [env.step(env.sample_random_action()) for _ in range(3)]
    other = HangmanEnv(difficulty="random")
    other.set_state(snapshot)
    assert [other.step(other.sample_random_action()) for _ in range(3)] == first
    assert pickle.dumps(snapshot) == frozen


@pytest.mark.parametrize("difficulty", PRESETS)
def test_check_env_passes(difficulty):
    check_env(HangmanEnv(difficulty=difficulty))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"difficulty": "medium"}, ValueError),
        ({"lives": 0}, ValueError),
        ({"min_length": 6, "max_length": 5}, ValueError),
        ({"min_length": 20, "max_length": 30}, ValueError),
        ({"words": ["it's"]}, ValueError),
        ({"lives": 2.5}, TypeError),
    ],
)
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error):
        HangmanEnv(**kwargs)
