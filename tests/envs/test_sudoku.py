"""Sudoku: generation (unique solutions), move rules, rewards, seeding and snapshots."""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.checks import check_env
from xpgym.core.env import EpisodeFinishedError
from xpgym.envs.games.sudoku import (
    DIFFICULTIES,
    INVALID_REWARD,
    SudokuEnv,
    count_solutions,
    generate_puzzle,
    parse_move,
    solve,
)

PRESETS = [None, "easy", "hard", "random"]


def started(seed: int = 0, **kwargs) -> tuple[SudokuEnv, str, dict]:
    env = SudokuEnv(**kwargs)
    obs, info = env.reset(seed=seed)
    return env, obs, info


def move(row: int, col: int, value: int) -> str:
    return f"I play \\boxed{{{row} {col} {value}}}"


def first_empty(env: SudokuEnv) -> tuple[int, int, int]:
    """(row, col, solution value) of the first empty cell, 1-based."""
    i = env.board.index(0)
    return i // env.size + 1, i % env.size + 1, env.solution[i]


def is_valid_full_grid(cells: list[int], size: int) -> bool:
    box = 2 if size == 4 else 3
    digits = set(range(1, size + 1))
    grid = np.array(cells).reshape(size, size)
    boxes = [
        grid[r : r + box, c : c + box].ravel()
        for r in range(0, size, box)
        for c in range(0, size, box)
    ]
    return all(set(line.tolist()) == digits for line in [*grid, *grid.T, *boxes])


# A hand-checked solved 4x4 grid.
SOLVED_4 = [1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1]


def test_solver_counts_hand_checked_grids():
    assert count_solutions(SOLVED_4, 4) == 1
    assert count_solutions([0] * 16, 4, limit=1000) == 288  # all 4x4 Sudoku grids
    two = list(SOLVED_4)
    for i in (0, 1, 8, 9):  # the 1/2 rectangle in columns 1-2, rows 1 and 3
        two[i] = 0
    assert count_solutions(two, 4, limit=10) == 2
    broken = list(SOLVED_4)
    broken[1] = 1  # 1 twice in row 1
    assert count_solutions(broken, 4) == 0
    assert solve(broken, 4) is None


@pytest.mark.parametrize(("size", "givens"), [(4, 6), (4, 8), (9, 26), (9, 30), (9, 36)])
def test_generated_puzzles_have_exactly_givens_and_a_unique_solution(size, givens):
    for seed in range(30 if size == 4 else 8):
        puzzle, solution = generate_puzzle(np.random.default_rng(seed), size, givens)
        assert sum(1 for v in puzzle if v) == givens
        assert is_valid_full_grid(solution, size)
        assert all(p in (0, s) for p, s in zip(puzzle, solution, strict=True))
        assert count_solutions(puzzle, size, limit=5) == 1
        assert solve(puzzle, size) == solution


def test_reset_observation_states_rules_format_and_grid():
    _env, obs, info = started(difficulty="easy")
    assert info == {"difficulty": "easy", "size": 4, "givens": 8, "max_turns": 20}
    assert obs.startswith("Sudoku 4x4:")
    assert "2x2 box" in obs
    assert "\\boxed{row column digit}" in obs
    assert "20 turns" in obs
    assert obs.count(".") >= 8  # eight empty cells (plus punctuation)
    _, obs9, _ = started(difficulty="hard")
    assert "3x3 box" in obs9


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{1 2 3}", ("1 2 3", (1, 2, 3))),
        ("\\boxed{ 1, 2, 3 }", ("1, 2, 3", (1, 2, 3))),
        ("\\boxed{1,2,3}", ("1,2,3", (1, 2, 3))),
        ("\\boxed{9 9 0}", ("9 9 0", (9, 9, 0))),
        ("\\boxed{1 1 1} then \\boxed{2 2 2}", ("2 2 2", (2, 2, 2))),
        ("\\boxed{1 2}", ("1 2", None)),
        ("\\boxed{1 2 3 4}", ("1 2 3 4", None)),
        ("\\boxed{a b c}", ("a b c", None)),
        ("\\boxed{-1 2 3}", ("-1 2 3", None)),
        ("1 2 3", (None, None)),
    ],
)
def test_parse_move(text, expected):
    assert parse_move(text) == expected


def test_correct_placement_is_valid_with_zero_reward():
    env, _, _ = started(difficulty="easy")
    row, col, value = first_empty(env)
    obs, reward, terminated, truncated, info = env.step(move(row, col, value))
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info == {
        "correct": False,
        "invalid_action": False,
        "parsed_action": f"{row} {col} {value}",
        "turn": 1,
        "empty_cells": 7,
    }
    assert f"wrote {value} in row {row}, column {col}" in obs


def test_filling_the_solution_wins_with_reward_one():
    env, _, _ = started(difficulty="easy")
    total = 0.0
    while True:
        obs, reward, terminated, truncated, info = env.step(move(*first_empty(env)))
        total += reward
        if terminated or truncated:
            break
    assert (terminated, truncated, info["correct"], total) == (True, False, True, 1.0)
    assert env.board == env.solution
    assert "solved" in obs
    with pytest.raises(EpisodeFinishedError):
        env.step(move(1, 1, 1))


def rule_conflicts(env: SudokuEnv, i: int, value: int) -> bool:
    n = env.size
    box = 2 if n == 4 else 3
    r, c = divmod(i, n)
    for j, v in enumerate(env.board):
        rj, cj = divmod(j, n)
        same_box = (rj // box, cj // box) == (r // box, c // box)
        if j != i and v == value and (rj == r or cj == c or same_box):
            return True
    return False


def test_rule_conflicting_value_is_invalid_and_board_unchanged():
    env, _, _ = started(difficulty="hard")
    i = env.board.index(0)
    value = next(v for v in range(1, 10) if rule_conflicts(env, i, v))
    before = list(env.board)
    obs, reward, terminated, truncated, info = env.step(move(i // 9 + 1, i % 9 + 1, value))
    assert reward == INVALID_REWARD
    assert (terminated, truncated, info["invalid_action"]) == (False, False, True)
    assert "already in" in obs
    assert env.board == before


def test_wrong_but_rule_abiding_value_is_accepted_and_can_be_overwritten_or_erased():
    for seed in range(50):
        env, _, _ = started(seed=seed, difficulty="hard")
        candidates = [
            (i, v)
            for i, cell in enumerate(env.board)
            if cell == 0
            for v in range(1, 10)
            if v != env.solution[i] and not rule_conflicts(env, i, v)
        ]
        if candidates:
            break
    i, wrong = candidates[0]
    row, col = i // 9 + 1, i % 9 + 1
    _, reward, _, _, info = env.step(move(row, col, wrong))
    assert (reward, info["invalid_action"]) == (0.0, False)
    assert env.board[i] == wrong
    _, reward, _, _, info = env.step(move(row, col, env.solution[i]))  # overwrite
    assert (reward, info["invalid_action"], env.board[i]) == (0.0, False, env.solution[i])
    _, reward, _, _, info = env.step(move(row, col, 0))  # erase
    assert (reward, info["invalid_action"], env.board[i]) == (0.0, False, 0)
    _, reward, _, _, info = env.step(move(row, col, 0))  # erasing an empty cell
    assert (reward, info["invalid_action"]) == (INVALID_REWARD, True)


@pytest.mark.parametrize("seed", range(20))
def test_random_play_can_only_complete_the_unique_solution(seed):
    """Moves are checked against the rules only, yet a full grid is always the solution."""
    env, _, _ = started(seed=seed, difficulty="easy", max_turns=300)
    for _ in range(300):
        _, _, terminated, truncated, info = env.step(env.sample_random_action())
        if terminated:
            assert info["correct"] is True
            assert env.board == env.solution
        if terminated or truncated:
            break


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("no box", "no \\boxed{} found"),
        ("\\boxed{1 2}", "not three integers"),
        ("\\boxed{0 1 1}", "row and column must be from 1 to 4"),
        ("\\boxed{1 5 1}", "row and column must be from 1 to 4"),
        ("\\boxed{1 1 5}", "digit must be from 1 to 4"),
    ],
)
def test_malformed_or_out_of_range_moves_are_invalid(action, message):
    env, _, _ = started(difficulty="easy")
    obs, reward, terminated, truncated, info = env.step(action)
    assert reward == INVALID_REWARD
    assert (terminated, truncated, info["invalid_action"], info["turn"]) == (False, False, True, 1)
    assert message in obs


def test_writing_into_a_given_is_invalid():
    env, _, _ = started(difficulty="easy")
    i = next(i for i, v in enumerate(env.puzzle) if v)
    obs, reward, *_, info = env.step(move(i // 4 + 1, i % 4 + 1, env.puzzle[i]))
    assert reward == INVALID_REWARD
    assert info["invalid_action"] is True
    assert "is a given" in obs


def test_turn_limit_truncates_without_terminating():
    env, _, _ = started(difficulty="easy", max_turns=2)
    env.step("nothing")
    obs, reward, terminated, truncated, info = env.step(move(*first_empty(env)))
    assert (reward, terminated, truncated, info["turn"]) == (0.0, False, True, 2)
    assert "No turns left" in obs


def backtracking_player(env: SudokuEnv, seed: int) -> tuple[bool, int]:
    """Solve the puzzle from the observation's grid with the solver, then play it."""
    _, info = env.reset(seed=seed)
    size = info["size"]
    solution = solve(list(env.puzzle), size)
    assert solution is not None
    returns = 0.0
    for i, v in enumerate(env.puzzle):
        if v == 0:
            _, reward, terminated, truncated, info = env.step(
                move(i // size + 1, i % size + 1, solution[i])
            )
            returns += reward
            if terminated or truncated:
                break
    return info["correct"], returns


@pytest.mark.parametrize("difficulty", ["easy", "hard", "random"])
def test_backtracking_solver_wins_every_board(difficulty):
    env = SudokuEnv(difficulty=difficulty)
    for seed in range(40 if difficulty == "easy" else 10):
        assert backtracking_player(env, seed) == (True, 1.0), f"seed {seed}"


@settings(max_examples=300, deadline=None)
@given(
    st.text()
    | st.builds(lambda s: f"\\boxed{{{s}}}", st.text())
    | st.builds(
        lambda a, b, c: f"\\boxed{{{a} {b} {c}}}",
        st.integers(-2, 12),
        st.integers(-2, 12),
        st.integers(-2, 12),
    )
)
def test_any_text_is_a_valid_step(action):
    env, _, _ = started(difficulty="easy")
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str)
    assert reward in (1.0, 0.0, INVALID_REWARD)
    assert isinstance(info["correct"], bool)
    assert isinstance(info["invalid_action"], bool)
    assert not (terminated and truncated)
    assert info["invalid_action"] is (reward == INVALID_REWARD)


def test_same_seed_gives_the_same_episode():
    def transcript(env: SudokuEnv) -> list:
        steps = [env.reset(seed=7)]
        steps += [env.step(env.sample_random_action()) for _ in range(5)]
        return steps

    assert transcript(SudokuEnv(difficulty="random")) == transcript(SudokuEnv(difficulty="random"))
    assert started(seed=1)[1] != started(seed=2)[1]


def test_random_difficulty_draws_both_presets():
    env = SudokuEnv(difficulty="random")
    assert {env.reset(seed=s)[1]["difficulty"] for s in range(30)} == {"easy", "hard"}


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_difficulty_selects_its_preset(difficulty):
    _, _, info = started(difficulty=difficulty)
    assert (info["size"], info["givens"], info["max_turns"]) == tuple(DIFFICULTIES[difficulty])


def test_set_state_replays_the_episode_from_the_snapshot():
    env, _, _ = started(difficulty="random", seed=3)
    env.step(move(*first_empty(env)))
    snapshot = env.get_state()
    frozen = pickle.dumps(snapshot)
    first = [env.step(env.sample_random_action()) for _ in range(3)]
    other = SudokuEnv(difficulty="random")
    other.set_state(snapshot)
    assert [other.step(other.sample_random_action()) for _ in range(3)] == first
    assert pickle.dumps(snapshot) == frozen


@pytest.mark.parametrize("difficulty", PRESETS)
def test_check_env_passes(difficulty):
    check_env(SudokuEnv(difficulty=difficulty))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"difficulty": "medium"}, ValueError, "difficulty must be"),
        ({"size": 6}, ValueError, "size must be 4 or 9"),
        ({"size": 4, "givens": 5}, ValueError, "givens must be from 6 to 16"),
        ({"givens": 82}, ValueError, "givens must be from 26 to 81"),
        ({"max_turns": 0}, ValueError, "max_turns must be >= 1"),
        ({"givens": 30.0}, TypeError, "givens must be an int"),
        ({"size": True}, TypeError, "size must be an int"),
    ],
)
def test_invalid_constructor_arguments_raise_clear_errors(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        SudokuEnv(**kwargs)
