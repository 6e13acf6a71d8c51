"""Sokoban: moves and pushes, illegal moves, solvable generation, seeding and snapshots."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.checks import check_env
from xpgym.envs.games.sokoban import (
    DIFFICULTIES,
    INVALID_REWARD,
    SokobanEnv,
    parse_move,
    solve,
)

DIFFS = [None, "easy", "hard", "random"]


def started(seed: int = 0, **kwargs) -> SokobanEnv:
    env = SokobanEnv(**kwargs)
    env.reset(seed=seed)
    return env


def place(env: SokobanEnv, rows: list[str]) -> None:
    """Set `env`'s room from text rows (legend of the module docstring)."""
    cells = {(r, c): ch for r, row in enumerate(rows) for c, ch in enumerate(row)}
    env.walls = frozenset(cell for cell, ch in cells.items() if ch == "#")
    env.goals = frozenset(cell for cell, ch in cells.items() if ch in ".*+")
    env.boxes = {cell for cell, ch in cells.items() if ch in "$*"}
    env.player = next(cell for cell, ch in cells.items() if ch in "@+")


ROOM = ["######", "#_$_.#", "#_@$_#", "#_$__#", "#___.#", "######"]


@pytest.mark.parametrize(
    ("text", "move"),
    [
        ("\\boxed{up}", "up"),
        ("\\boxed{ LEFT }", "left"),
        ("\\boxed{r}", "right"),
        ("\\boxed{up}\\boxed{down}", "down"),
        ("\\boxed{north}", None),
        ("\\boxed{}", None),
        ("up", None),
    ],
)
def test_parse_move(text, move):
    assert parse_move(text)[1] == move


def test_walk_push_and_board():
    env = started(size=6)
    place(env, ROOM)
    assert env.board() == "\n".join(ROOM)
    obs, reward, terminated, truncated, info = env.step("\\boxed{left}")
    assert (reward, terminated, truncated, info["pushes"]) == (0.0, False, False, 0)
    assert env.player == (2, 1)
    env.step("\\boxed{right}")
    obs, reward, *_, info = env.step("\\boxed{right}")
    assert env.boxes == {(1, 2), (2, 4), (3, 2)}
    assert info["pushes"] == 1
    assert "#__@$#" in obs


@pytest.mark.parametrize(
    ("moves", "message"),
    [
        (["\\boxed{up}"], "pushed into a wall"),
        (["\\boxed{left}", "\\boxed{left}"], "a wall blocks left"),
        (["\\boxed{right}", "\\boxed{right}"], "pushed into a wall"),
        (["\\boxed{jump}"], "is not a move"),
        (["go up"], "no \\boxed{} found"),
    ],
)
def test_illegal_moves_change_nothing_and_are_penalised(moves, message):
    env = started(size=6)
    place(env, ROOM)
    for move in moves[:-1]:
        env.step(move)
    before = (set(env.boxes), env.player)
    obs, reward, terminated, truncated, info = env.step(moves[-1])
    assert reward == INVALID_REWARD == -0.1
    assert info["invalid_action"] is True
    assert (terminated, truncated) == (False, False)
    assert (env.boxes, env.player) == before
    assert message in obs


def test_box_into_box_is_illegal():
    env = started(size=6)
    place(env, ["######", "#_@$$#", "#____#", "#__..#", "#____#", "######"])
    obs, reward, *_ = env.step("\\boxed{right}")
    assert reward == -0.1
    assert "into another box" in obs


def test_solving_gives_one_and_board_marks():
    env = started(size=6)
    place(env, ["######", "#@$.##", "#____#", "#____#", "#____#", "######"])
    obs, reward, terminated, truncated, info = env.step("\\boxed{right}")
    assert (reward, terminated, truncated, info["correct"]) == (1.0, True, False, True)
    assert "#_@*##" in obs


def test_solver_on_hand_made_rooms():
    env = started(size=6)
    place(env, ["######", "#@$_.#", "#____#", "#____#", "#____#", "######"])
    assert solve(env.walls, env.goals, env.boxes, env.player) == ["right", "right"]
    place(env, ["######", "#$__.#", "#_@__#", "#____#", "#____#", "######"])
    assert solve(env.walls, env.goals, env.boxes, env.player) is None


@pytest.mark.parametrize("difficulty", DIFFS)
@pytest.mark.parametrize("which", ["solution", "pull_solution"])
def test_generated_rooms_are_solved_by_their_solutions(difficulty, which):
    env = SokobanEnv(difficulty=difficulty)
    for seed in range(6):
        _, info = env.reset(seed=seed)
        assert not env.boxes & env.goals
        assert len(env.boxes) == len(env.goals) == info["num_boxes"]
        moves = getattr(env, which)
        assert len(env.solution) >= env.settings.min_moves
        assert len(env.solution) <= len(env.pull_solution) <= info["max_turns"]
        for i, move in enumerate(moves):
            _, reward, terminated, truncated, step_info = env.step(f"\\boxed{{{move}}}")
            assert step_info["invalid_action"] is False
            assert terminated is (i == len(moves) - 1)
            assert truncated is False
        assert reward == 1.0
        assert env.boxes == set(env.goals)


def test_turn_limit_truncates():
    env = started(max_turns=2)
    env.step("\\boxed{nowhere}")
    _, _, terminated, truncated, info = env.step("\\boxed{nowhere}")
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
    assert info["invalid_action"] is (reward == -0.1)


@pytest.mark.parametrize("difficulty", DIFFS)
def test_check_env_passes(difficulty):
    check_env(SokobanEnv(difficulty=difficulty))


def test_same_seed_same_episode_and_random_draws_both_presets():
    def transcript() -> list:
        env = SokobanEnv(difficulty="random")
        return [env.reset(seed=9)] + [env.step(env.sample_random_action()) for _ in range(8)]

    assert transcript() == transcript()
    drawn = {SokobanEnv(difficulty="random").reset(seed=s)[1]["difficulty"] for s in range(20)}
    assert drawn == {"easy", "hard"}


def test_set_state_round_trip():
    env = started(seed=2, difficulty="random")
    env.step(env.sample_random_action())
    snap = env.get_state()
    frozen = pickle.dumps(snap)
    first = [env.step(env.sample_random_action()) for _ in range(6)]
    other = SokobanEnv(difficulty="random")
    other.set_state(snap)
    assert [other.step(other.sample_random_action()) for _ in range(6)] == first
    assert pickle.dumps(snap) == frozen


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_presets(difficulty):
    env = SokobanEnv(difficulty=difficulty)
    obs, info = env.reset(seed=0)
    preset = DIFFICULTIES[difficulty]
    assert (info["size"], info["num_boxes"], info["max_turns"]) == (
        preset.size,
        preset.num_boxes,
        preset.max_turns,
    )
    assert env.board() in obs
    assert len(env.walls) == 4 * preset.size - 4 + preset.num_walls


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"difficulty": "x"}, ValueError),
        ({"size": 4}, ValueError),
        ({"num_boxes": 0}, ValueError),
        ({"num_walls": 99}, ValueError),
        ({"max_turns": 0}, ValueError),
        ({"size": 6.0}, TypeError),
    ],
)
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error):
        SokobanEnv(**kwargs)
