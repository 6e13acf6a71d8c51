"""Wordle: feedback rules, rewards, a filtering solver, seeding and snapshots."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.checks import check_env
from xpgym.envs.games.wordle import (
    DIFFICULTIES,
    INVALID_REWARD,
    WordleEnv,
    feedback,
    load_words,
)

PRESETS = [None, "easy", "hard", "random"]


def started(seed: int = 0, **kwargs) -> WordleEnv:
    env = WordleEnv(**kwargs)
    env.reset(seed=seed)
    return env


def boxed(word: str) -> str:
    return f"My guess: \\boxed{{{word}}}"


@pytest.mark.parametrize(
    ("guess", "secret", "expected"),
    [
        ("crane", "crane", "GGGGG"),
        ("crane", "bulky", "_____"),
        ("paper", "apple", "YYGY_"),
        ("geese", "those", "___GG"),  # one e in the secret, taken by the green
        ("eerie", "there", "Y_Y_G"),  # secret has two e: last green, first yellow, 2nd gray
        ("speed", "abide", "__Y_Y"),  # only one e in abide: the second e is gray
        ("llama", "hello", "YY___"),  # two l's in hello, both yellow
        ("lolly", "hello", "_YGG_"),  # greens first: l at 2, 3; the l at 0 has no copy left
        ("allee", "eagle", "YY_YG"),
    ],
)
def test_feedback_follows_the_duplicate_letter_rules(guess, secret, expected):
    assert feedback(guess, secret) == expected


def test_word_list_is_clean_and_has_every_length():
    words = load_words()
    assert len(words) == len(set(words)) >= 1000
    assert all(w.isascii() and w.isalpha() and w.islower() for w in words)
    assert {len(w) for w in words} == {4, 5, 6, 7, 8}
    assert all(len(load_words(n)) >= 200 for n in range(4, 9))


def test_reset_draws_from_the_words_of_the_right_length():
    secrets = {started(seed).secret for seed in range(50)}
    assert len(secrets) > 30
    assert all(len(s) == 5 for s in secrets)
    obs, info = WordleEnv().reset(seed=0)
    assert "5 letters" in obs
    assert "6 turns" in obs
    assert "\\boxed{}" in obs
    assert info == {"difficulty": None, "word_length": 5, "max_turns": 6}


def test_correct_guess_terminates_with_reward_one():
    env = started()
    _obs, reward, terminated, truncated, info = env.step(boxed(env.secret.upper()))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info == {
        "correct": True,
        "invalid_action": False,
        "parsed_action": env.secret,
        "turn": 1,
        "feedback": "GGGGG",
    }


def test_wrong_guess_shows_feedback_and_history():
    env = started(words=["apple", "paper", "crane"])
    env.secret = "apple"
    obs, reward, terminated, truncated, info = env.step(boxed("paper"))
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["feedback"] == "YYGY_"
    assert "Y Y G Y _" in obs
    assert "5 turns left" in obs
    obs, *_ = env.step(boxed("zzzzz"))  # any 5 letters are accepted
    assert "paper  Y Y G Y _" in obs
    assert "zzzzz  _ _ _ _ _" in obs


@pytest.mark.parametrize(
    "action", ["crane", "\\boxed{cran}", "\\boxed{cranes}", "\\boxed{cr4ne}", "\\boxed{}", ""]
)
def test_malformed_guess_is_invalid_and_uses_a_turn(action):
    env = started()
    _obs, reward, terminated, truncated, info = env.step(action)
    assert reward == INVALID_REWARD == -0.1
    assert (terminated, truncated, info["invalid_action"], info["turn"]) == (False, False, True, 1)
    assert info["feedback"] is None
    assert env.guesses == []


def test_repeated_guess_is_invalid():
    env = started(words=["apple", "crane"])
    env.secret = "apple"
    env.step(boxed("crane"))
    _, reward, _, _, info = env.step(boxed("CRANE"))
    assert (reward, info["invalid_action"]) == (-0.1, True)
    assert "already guessed" in env.step(boxed("crane"))[0]


def test_only_the_last_box_counts():
    env = started()
    _, _, terminated, _, info = env.step(f"\\boxed{{{env.secret}}} or {boxed('zzzzz')}")
    assert terminated is False
    assert info["parsed_action"] == "zzzzz"


def test_turn_limit_truncates_and_reveals_the_word():
    env = started(max_turns=2)
    env.step(boxed("zzzzz"))
    obs, reward, terminated, truncated, _ = env.step("nothing")
    assert (reward, terminated, truncated) == (-0.1, False, True)
    assert f"the word was {env.secret}" in obs


def solve(env: WordleEnv, seed: int) -> bool:
    """Guess the first candidate consistent with all feedback so far."""
    env.reset(seed=seed)
    candidates = list(env.candidates)
    while True:
        guess = candidates[int(env.np_random.integers(len(candidates)))]
        _, _, terminated, truncated, info = env.step(boxed(guess))
        if terminated or truncated:
            return info["correct"]
        candidates = [w for w in candidates if feedback(guess, w) == info["feedback"]]


@pytest.mark.parametrize("difficulty", PRESETS)
def test_filtering_solver_wins_most_games(difficulty):
    env = WordleEnv(difficulty=difficulty)
    wins = sum(solve(env, seed) for seed in range(200))
    assert wins >= (190 if difficulty == "easy" else 170), wins


@settings(max_examples=300, deadline=None)
@given(st.text() | st.builds(lambda s: f"\\boxed{{{s}}}", st.text()))
def test_any_text_is_a_valid_step(action):
    env = started()
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str)
    assert reward in (1.0, 0.0, -0.1)
    assert type(info["correct"]) is bool
    assert type(info["invalid_action"]) is bool
    assert info["invalid_action"] is (reward == -0.1)
    assert not (terminated and truncated)


def test_same_seed_gives_the_same_episode():
    def transcript() -> list:
        env = WordleEnv(difficulty="random")
        steps = [env.reset(seed=7)]
        return steps + [env.step(env.sample_random_action()) for _ in range(5)]

    assert transcript() == transcript()


def test_random_difficulty_draws_both_presets():
    env = WordleEnv(difficulty="random")
    assert {env.reset(seed=s)[1]["word_length"] for s in range(40)} == {4, 6}


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_difficulty_selects_its_preset(difficulty):
    _, info = WordleEnv(difficulty=difficulty).reset(seed=0)
    assert (info["word_length"], info["max_turns"]) == tuple(DIFFICULTIES[difficulty])


def test_set_state_replays_and_snapshot_is_frozen():
    env = started(seed=3, difficulty="random")
    env.step(env.sample_random_action())
    snapshot = env.get_state()
    frozen = pickle.dumps(snapshot)
    first = [env.step(env.sample_random_action()) for _ in range(3)]
    other = WordleEnv(difficulty="random")
    other.set_state(snapshot)
    assert [other.step(other.sample_random_action()) for _ in range(3)] == first
    assert pickle.dumps(snapshot) == frozen


@pytest.mark.parametrize("difficulty", PRESETS)
def test_check_env_passes(difficulty):
    check_env(WordleEnv(difficulty=difficulty))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"difficulty": "medium"}, ValueError),
        ({"max_turns": 0}, ValueError),
        ({"word_length": 12}, ValueError),
        ({"words": ["Apple"]}, ValueError),
        ({"max_turns": 2.0}, TypeError),
    ],
)
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error):
        WordleEnv(**kwargs)


def test_checked_words_defaults_to_the_shipped_list_and_names_the_env():
    from xpgym.envs.games.wordle import checked_words, load_words

    assert checked_words(None, "AnyEnv") == load_words()
    assert checked_words(["ab", "cd"], "AnyEnv") == ("ab", "cd")
    with pytest.raises(ValueError, match="AnyEnv: words must be lower-case ASCII, got 'Ab'"):
        checked_words(["ok", "Ab"], "AnyEnv")
