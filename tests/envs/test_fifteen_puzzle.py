"""FifteenPuzzle: moves, rewards, solvers (undo the scramble, BFS), seeding and snapshots."""

from __future__ import annotations

import pickle
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.checks import check_env
from xpgym.envs.games.fifteen_puzzle import (
    DIFFICULTIES,
    INVALID_REWARD,
    FifteenPuzzleEnv,
    solved_board,
)

PRESETS = [None, "easy", "hard", "random"]
OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}


def started(board: list[int] | None = None, seed: int = 0, **kwargs) -> FifteenPuzzleEnv:
    env = FifteenPuzzleEnv(**kwargs)
    env.reset(seed=seed)
    if board is not None:
        env.board = list(board)
        env.blank = board.index(0)
    return env


def boxed(move: str | int) -> str:
    return f"Move: \\boxed{{{move}}}"


# 3x3, blank in the centre:  1 2 3 / 4 _ 5 / 7 8 6
CENTRE = [1, 2, 3, 4, 0, 5, 7, 8, 6]


@pytest.mark.parametrize(
    ("move", "board"),
    [
        ("up", [1, 0, 3, 4, 2, 5, 7, 8, 6]),
        ("D", [1, 2, 3, 4, 8, 5, 7, 0, 6]),
        ("left", [1, 2, 3, 0, 4, 5, 7, 8, 6]),
        (" r ", [1, 2, 3, 4, 5, 0, 7, 8, 6]),
        ("2", [1, 0, 3, 4, 2, 5, 7, 8, 6]),  # tile 2 (above) slides down = blank up
        ("5", [1, 2, 3, 4, 5, 0, 7, 8, 6]),
    ],
)
def test_moves_slide_the_blank(move, board):
    env = started(CENTRE, size=3)
    _, reward, terminated, truncated, info = env.step(boxed(move))
    assert env.board == board
    assert env.blank == board.index(0)
    assert (reward, terminated, truncated, info["invalid_action"]) == (0.0, False, False, False)


def test_the_solving_move_terminates_with_reward_one():
    env = started([1, 2, 3, 4, 5, 0, 7, 8, 6], size=3)
    obs, reward, terminated, truncated, info = env.step(boxed("down"))
    assert (reward, terminated, truncated, info["correct"]) == (1.0, True, False, True)
    assert info["move"] == "down"
    assert "Solved" in obs
    assert "7 8 _" in obs


@pytest.mark.parametrize("move", ["right", "down", "5", "1", "0", "99", "north", "", "up up"])
def test_illegal_or_malformed_move_is_invalid_and_changes_nothing(move):
    env = started([4, 2, 3, 1, 5, 6, 7, 8, 0], size=3)
    board = list(env.board)
    obs, reward, terminated, truncated, info = env.step(boxed(move))
    assert reward == INVALID_REWARD == -0.1
    assert (terminated, truncated, info["invalid_action"], info["move"]) == (
        False,
        False,
        True,
        None,
    )
    assert env.board == board
    assert "invalid move" in obs


def test_missing_box_is_invalid_and_only_the_last_box_counts():
    env = started(CENTRE, size=3)
    assert env.step("up")[4]["invalid_action"] is True
    _, _, _, _, info = env.step("\\boxed{up} no, \\boxed{left}")
    assert info["parsed_action"] == "left"
    assert env.board[3] == 0


def test_observation_shows_board_and_legal_moves():
    env = started(size=4)
    obs, _ = env.reset(seed=1)
    assert env.render_board() in obs
    assert f"Legal moves of the blank: {', '.join(env.legal_moves())}." in obs
    assert "15" in obs
    assert "4x4" in obs


def test_turn_limit_truncates():
    env = started(CENTRE, size=3, max_turns=2)
    env.step(boxed("up"))
    obs, _, terminated, truncated, _ = env.step(boxed("down"))
    assert (terminated, truncated) == (False, True)
    assert "No turns left" in obs


@pytest.mark.parametrize("difficulty", PRESETS)
def test_scramble_is_unsolved_and_undoing_it_solves(difficulty):
    env = FifteenPuzzleEnv(difficulty=difficulty)
    for seed in range(100):
        _, info = env.reset(seed=seed)
        assert env.board != solved_board(env.size)
        assert sorted(env.board) == list(range(env.size**2))
        assert len(env.scramble) == info["scramble_moves"] >= env.scramble_moves
        assert len(env.scramble) <= env.max_turns
        for move in reversed(list(env.scramble)):
            _, reward, terminated, truncated, info = env.step(boxed(OPPOSITE[move]))
            assert info["invalid_action"] is False
            if terminated:
                break
        assert (terminated, truncated, reward, info["correct"]) == (True, False, 1.0, True)


def bfs(board: list[int], size: int) -> list[str]:
    """Shortest list of blank moves from `board` to the solved board."""
    steps = {"up": -size, "down": size, "left": -1, "right": 1}
    goal = tuple(solved_board(size))
    start = tuple(board)
    parent: dict[tuple[int, ...], tuple[tuple[int, ...], str] | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if state == goal:
            path = []
            while parent[state] is not None:
                state, move = parent[state]  # type: ignore[misc]
                path.append(move)
            return path[::-1]
        blank = state.index(0)
        row, col = divmod(blank, size)
        for move, delta in steps.items():
            if (move == "up" and row == 0) or (move == "down" and row == size - 1):
                continue
            if (move == "left" and col == 0) or (move == "right" and col == size - 1):
                continue
            nxt = list(state)
            nxt[blank], nxt[blank + delta] = nxt[blank + delta], 0
            key = tuple(nxt)
            if key not in parent:
                parent[key] = (state, move)
                queue.append(key)
    raise AssertionError("unsolvable")


def test_bfs_solves_easy_by_tile_numbers():
    env = FifteenPuzzleEnv(difficulty="easy")
    for seed in range(20):
        env.reset(seed=seed)
        path = bfs(env.board, 3)
        assert len(path) <= env.scramble_moves
        for move in path:
            target = env.blank + {"up": -3, "down": 3, "left": -1, "right": 1}[move]
            _, _, terminated, _, info = env.step(boxed(env.board[target]))
        assert terminated
        assert info["correct"]


@settings(max_examples=300, deadline=None)
@given(st.text() | st.builds(lambda s: f"\\boxed{{{s}}}", st.text()))
def test_any_text_is_a_valid_step(action):
    env = started(CENTRE, size=3)
    obs, reward, _terminated, _truncated, info = env.step(action)
    assert isinstance(obs, str)
    assert reward in (1.0, 0.0, -0.1)
    assert type(info["correct"]) is bool
    assert type(info["invalid_action"]) is bool
    assert info["invalid_action"] is (reward == -0.1)
    assert sorted(env.board) == list(range(9))


def test_same_seed_gives_the_same_episode():
    def transcript() -> list:
        env = FifteenPuzzleEnv(difficulty="random")
        steps = [env.reset(seed=7)]
        return steps + [env.step(env.sample_random_action()) for _ in range(10)]

    assert transcript() == transcript()


def test_random_difficulty_draws_both_presets():
    env = FifteenPuzzleEnv(difficulty="random")
    assert {env.reset(seed=s)[1]["size"] for s in range(40)} == {3, 4}


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_difficulty_selects_its_preset(difficulty):
    env = FifteenPuzzleEnv(difficulty=difficulty)
    _, info = env.reset(seed=0)
    preset = DIFFICULTIES[difficulty]
    assert (info["size"], info["max_turns"]) == (preset.size, preset.max_turns)


def test_set_state_replays_and_snapshot_is_frozen():
    env = started(seed=3, difficulty="random")
    env.step(env.sample_random_action())
    snapshot = env.get_state()
    frozen = pickle.dumps(snapshot)
    first = [env.step(env.sample_random_action()) for _ in range(5)]
    other = FifteenPuzzleEnv(difficulty="random")
    other.set_state(snapshot)
    assert [other.step(other.sample_random_action()) for _ in range(5)] == first
    assert pickle.dumps(snapshot) == frozen


@pytest.mark.parametrize("difficulty", PRESETS)
def test_check_env_passes(difficulty):
    check_env(FifteenPuzzleEnv(difficulty=difficulty))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"difficulty": "medium"}, ValueError),
        ({"size": 1}, ValueError),
        ({"scramble_moves": 0}, ValueError),
        ({"max_turns": 0}, ValueError),
        ({"size": 3.0}, TypeError),
    ],
)
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error):
        FifteenPuzzleEnv(**kwargs)
