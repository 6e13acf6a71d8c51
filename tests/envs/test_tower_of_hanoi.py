"""Tower of Hanoi: legal and illegal moves, the optimal solution, seeding and snapshots."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.checks import check_env
from xpgym.envs.games.tower_of_hanoi import (
    DIFFICULTIES,
    INVALID_REWARD,
    TowerOfHanoiEnv,
    parse_move,
)

DIFFS = [None, "easy", "hard", "random"]


def started(seed: int = 0, **kwargs) -> TowerOfHanoiEnv:
    env = TowerOfHanoiEnv(**kwargs)
    env.reset(seed=seed)
    return env


@pytest.mark.parametrize(
    ("text", "move"),
    [
        ("\\boxed{A C}", (0, 2)),
        ("\\boxed{ac}", (0, 2)),
        ("\\boxed{B,A}", (1, 0)),
        ("\\boxed{c -> b}", (2, 1)),
        ("\\boxed{A to B}", (0, 1)),
        ("\\boxed{A B}\\boxed{B C}", (1, 2)),
        ("\\boxed{A D}", None),
        ("\\boxed{A}", None),
        ("\\boxed{}", None),
        ("A C", None),
    ],
)
def test_parse_move(text, move):
    assert parse_move(text)[1] == move


def test_legal_move_and_board_in_observation():
    env = started(num_disks=3)
    obs, reward, terminated, truncated, info = env.step("\\boxed{A C}")
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert env.pegs == [[3, 2], [], [1]]
    assert "A: 3 2" in obs
    assert "C: 1" in obs
    assert "B: (empty)" in obs
    assert info["moves"] == 1
    assert info["invalid_action"] is False


@pytest.mark.parametrize(
    ("moves", "message"),
    [
        (["\\boxed{B C}"], "peg B is empty"),
        (["\\boxed{A A}"], "both peg A"),
        (["\\boxed{A C}", "\\boxed{A C}"], "cannot go on the smaller disk 1"),
        (["move A to C"], "no \\boxed{} found"),
    ],
)
def test_illegal_moves_change_nothing_and_are_penalised(moves, message):
    env = started(num_disks=3)
    for move in moves[:-1]:
        env.step(move)
    before = [list(p) for p in env.pegs]
    obs, reward, terminated, truncated, info = env.step(moves[-1])
    assert reward == INVALID_REWARD == -0.1
    assert info["invalid_action"] is True
    assert (terminated, truncated) == (False, False)
    assert env.pegs == before
    assert message in obs


def hanoi(n: int, src: str = "A", dst: str = "C", via: str = "B") -> list[str]:
    if n == 0:
        return []
    return [*hanoi(n - 1, src, via, dst), f"\\boxed{{{src} {dst}}}", *hanoi(n - 1, via, dst, src)]


@pytest.mark.parametrize("difficulty", DIFFS)
def test_optimal_solution_wins_in_2_pow_n_minus_1_moves(difficulty):
    env = TowerOfHanoiEnv(difficulty=difficulty)
    for seed in range(4):
        _, info = env.reset(seed=seed)
        moves = hanoi(info["num_disks"])
        assert len(moves) == 2 ** info["num_disks"] - 1 <= info["max_turns"]
        for i, move in enumerate(moves):
            _, reward, terminated, truncated, step_info = env.step(move)
            assert step_info["invalid_action"] is False
            assert terminated is (i == len(moves) - 1)
            assert truncated is False
        assert reward == 1.0
        assert step_info["correct"] is True
        assert env.pegs[2] == list(range(info["num_disks"], 0, -1))


def test_turn_limit_truncates():
    env = started(num_disks=2, max_turns=2)
    env.step("\\boxed{A B}")
    _, _, terminated, truncated, info = env.step("\\boxed{B A}")
    assert (terminated, truncated) == (False, True)
    assert info["correct"] is False


@settings(max_examples=300, deadline=None)
@given(st.text() | st.builds(lambda s: f"\\boxed{{{s}}}", st.text()))
def test_any_text_is_a_valid_step(action):
    env = started()
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str)
    assert reward in (0.0, -0.1)
    assert type(terminated) is bool
    assert type(truncated) is bool
    assert type(info["correct"]) is bool
    assert type(info["invalid_action"]) is bool
    assert info["invalid_action"] is (reward == -0.1)


@pytest.mark.parametrize("difficulty", DIFFS)
def test_check_env_passes(difficulty):
    check_env(TowerOfHanoiEnv(difficulty=difficulty))


def test_same_seed_same_episode_and_random_draws_both_presets():
    def transcript() -> list:
        env = TowerOfHanoiEnv(difficulty="random")
        return [env.reset(seed=9)] + [env.step(env.sample_random_action()) for _ in range(5)]

    assert transcript() == transcript()
    drawn = {TowerOfHanoiEnv(difficulty="random").reset(seed=s)[1]["difficulty"] for s in range(40)}
    assert drawn == {"easy", "hard"}


def test_set_state_round_trip():
    env = started(seed=2, difficulty="random")
    env.step("\\boxed{A B}")
    snap = env.get_state()
    frozen = pickle.dumps(snap)
    first = [env.step(env.sample_random_action()) for _ in range(4)]
    other = TowerOfHanoiEnv(difficulty="random")
    other.set_state(snap)
    assert [other.step(other.sample_random_action()) for _ in range(4)] == first
    assert pickle.dumps(snap) == frozen


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_presets(difficulty):
    _, info = TowerOfHanoiEnv(difficulty=difficulty).reset(seed=0)
    assert (info["num_disks"], info["max_turns"]) == tuple(DIFFICULTIES[difficulty])


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"difficulty": "x"}, ValueError),
        ({"num_disks": 0}, ValueError),
        ({"max_turns": 0}, ValueError),
        ({"num_disks": 3.0}, TypeError),
    ],
)
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error):
        TowerOfHanoiEnv(**kwargs)
