"""2048: merge rules, moves, rewards, game end, seeding and snapshots."""

from __future__ import annotations

import pickle
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.checks import check_env
from xpgym.core.env import EpisodeFinishedError
from xpgym.envs.games.game_2048 import (
    DIFFICULTIES,
    DIRECTIONS,
    INVALID_REWARD,
    Game2048Env,
    legal_moves,
    merge_line,
    move_board,
    parse_direction,
)

PRESETS = [None, "easy", "hard", "random"]


def started(seed: int = 0, **kwargs) -> tuple[Game2048Env, str, dict]:
    env = Game2048Env(**kwargs)
    obs, info = env.reset(seed=seed)
    return env, obs, info


def boxed(direction: str) -> str:
    return f"I slide \\boxed{{{direction}}}"


@pytest.mark.parametrize(
    ("line", "expected", "merged"),
    [
        ([2, 2, 2, 2], [4, 4, 0, 0], 8),
        ([2, 2, 4, 0], [4, 4, 0, 0], 4),
        ([2, 2, 2, 0], [4, 2, 0, 0], 4),
        ([0, 2, 0, 2], [4, 0, 0, 0], 4),
        ([4, 4, 8, 8], [8, 16, 0, 0], 24),
        ([2, 4, 8, 16], [2, 4, 8, 16], 0),
        ([0, 0, 0, 2], [2, 0, 0, 0], 0),
        ([4, 0, 4, 4], [8, 4, 0, 0], 8),
        ([0, 0, 0, 0], [0, 0, 0, 0], 0),
    ],
)
def test_merge_line(line, expected, merged):
    assert merge_line(line) == (expected, merged)


BOARD = [
    2, 2, 0, 0,
    0, 2, 0, 4,
    2, 0, 0, 4,
    0, 0, 0, 8,
]  # fmt: skip


@pytest.mark.parametrize(
    ("direction", "expected", "merged"),
    [
        ("left", [4, 0, 0, 0, 2, 4, 0, 0, 2, 4, 0, 0, 8, 0, 0, 0], 4),
        ("right", [0, 0, 0, 4, 0, 0, 2, 4, 0, 0, 2, 4, 0, 0, 0, 8], 4),
        ("up", [4, 4, 0, 8, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0], 16),
        ("down", [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 4, 4, 0, 8], 16),
    ],
)
def test_move_board_in_each_direction(direction, expected, merged):
    before = list(BOARD)
    assert move_board(BOARD, 4, direction) == (expected, merged)
    assert before == BOARD


def test_legal_moves_of_a_full_board():
    stuck = [2, 4, 2, 4, 4, 2, 4, 2, 2, 4, 2, 4, 4, 2, 4, 2]
    assert legal_moves(stuck, 4) == []
    mergeable = [2, 2, 4, 8, 4, 8, 16, 32, 8, 16, 32, 64, 16, 32, 64, 128]
    assert legal_moves(mergeable, 4) == ["left", "right"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{left}", ("left", "left")),
        ("\\boxed{ UP }", ("UP", "up")),
        ("\\boxed{down} no, \\boxed{Right}", ("Right", "right")),
        ("\\boxed{north}", ("north", None)),
        ("\\boxed{}", ("", None)),
        ("left", (None, None)),
    ],
)
def test_parse_direction(text, expected):
    assert parse_direction(text) == expected


def test_reset_places_two_tiles_and_states_rules():
    env, obs, info = started(difficulty="easy")
    assert info == {"difficulty": "easy", "size": 4, "target": 256, "max_turns": 500}
    assert sum(1 for v in env.board if v) == 2
    assert set(env.board) <= {0, 2, 4}
    assert "Reach a 256 tile" in obs
    assert "\\boxed{left}" in obs
    assert "500 turns" in obs


def test_valid_move_adds_one_tile_and_scores_merges():
    env, _, _ = started()
    env.board = list(BOARD)
    obs, reward, terminated, truncated, info = env.step(boxed("up"))
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info == {
        "correct": False,
        "invalid_action": False,
        "parsed_action": "up",
        "turn": 1,
        "score": 16,
        "merged": 16,
        "max_tile": 8,
    }
    moved = move_board(BOARD, 4, "up")[0]
    diff = [i for i in range(16) if env.board[i] != moved[i]]
    assert len(diff) == 1
    assert moved[diff[0]] == 0
    assert env.board[diff[0]] in (2, 4)
    assert "moved up" in obs
    assert "Score: 16" in obs


def test_move_that_changes_nothing_is_invalid_and_adds_no_tile():
    env, _, _ = started()
    env.board = [2, 0, 0, 0] + [0] * 12
    obs, reward, terminated, truncated, info = env.step(boxed("left"))
    assert reward == INVALID_REWARD
    assert (terminated, truncated, info["invalid_action"], info["turn"]) == (False, False, True, 1)
    assert env.board == [2] + [0] * 15
    assert "changes nothing" in obs


@pytest.mark.parametrize("action", ["", "left", "\\boxed{sideways}", "\\boxed{le ft}"])
def test_unparsable_action_is_invalid(action):
    env, _, _ = started()
    before = list(env.board)
    obs, reward, _, _, info = env.step(action)
    assert (reward, info["invalid_action"]) == (INVALID_REWARD, True)
    assert env.board == before
    assert "\\boxed{up}" in obs


def test_reaching_the_target_wins():
    env, _, _ = started(difficulty="easy")
    env.board = [128, 128] + [0] * 14
    obs, reward, terminated, truncated, info = env.step(boxed("left"))
    assert (reward, terminated, truncated, info["correct"], info["max_tile"]) == (
        1.0,
        True,
        False,
        True,
        256,
    )
    assert "won" in obs
    with pytest.raises(EpisodeFinishedError):
        env.step(boxed("left"))


def test_no_legal_move_after_a_move_loses():
    # Moving right turns row 1 into [new, 4, 8, 16]; a new 2 leaves no legal move, a new 4
    # can still merge with its right neighbour.
    env = Game2048Env()
    outcomes = set()
    for seed in range(30):
        env.reset(seed=seed)
        env.board = [4, 8, 16, 0, 8, 2, 4, 2, 2, 4, 2, 4, 4, 2, 4, 2]
        obs, reward, terminated, truncated, info = env.step(boxed("right"))
        assert env.board[1:4] == [4, 8, 16]
        outcomes.add((env.board[0], terminated))
        assert (reward, truncated, info["correct"]) == (0.0, False, False)
        assert terminated is (env.board[0] == 2)
        assert ("game over" in obs) is terminated
    assert outcomes == {(2, True), (4, False)}


def test_turn_limit_truncates():
    env, _, _ = started(max_turns=2)
    env.step("nothing")
    move = legal_moves(env.board, 4)[0]
    obs, _reward, terminated, truncated, info = env.step(boxed(move))
    assert (terminated, truncated, info["turn"]) == (False, True, 2)
    assert "No turns left" in obs


def corner_strategy(board: list[int], size: int) -> str:
    """Greedy: take the legal move with the biggest merge, preferring down/left, then right."""
    moves = legal_moves(board, size)
    preference = ["down", "left", "right", "up"]
    return max(
        moves,
        key=lambda d: (move_board(board, size, d)[1] * (d != "up"), -preference.index(d)),
    )


def test_corner_strategy_plays_to_the_end_and_reaches_64_for_most_seeds():
    env = Game2048Env(difficulty="hard")
    best = []
    for seed in range(20):
        env.reset(seed=seed)
        while True:
            _, _, terminated, truncated, info = env.step(boxed(corner_strategy(env.board, 4)))
            assert info["invalid_action"] is False
            if terminated or truncated:
                break
        assert terminated
        assert not legal_moves(env.board, 4)
        assert info["score"] > 0
        assert info["max_tile"] == max(env.board)
        best.append(info["max_tile"])
    assert sum(tile >= 64 for tile in best) >= 16


def test_easy_target_is_reachable_by_the_corner_strategy():
    env = Game2048Env(difficulty="easy")
    wins = 0
    for seed in range(20):
        env.reset(seed=seed)
        while True:
            _, reward, terminated, truncated, info = env.step(boxed(corner_strategy(env.board, 4)))
            if terminated or truncated:
                break
        wins += info["correct"]
        assert reward == (1.0 if info["correct"] else 0.0)
    assert wins >= 1


@settings(max_examples=300, deadline=None)
@given(st.text() | st.builds(lambda s: f"\\boxed{{{s}}}", st.text() | st.sampled_from(DIRECTIONS)))
def test_any_text_is_a_valid_step(action):
    env, _, _ = started()
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str)
    assert reward in (1.0, 0.0, INVALID_REWARD)
    assert isinstance(info["correct"], bool)
    assert isinstance(info["invalid_action"], bool)
    assert not (terminated and truncated)
    assert info["invalid_action"] is (reward == INVALID_REWARD)


def test_same_seed_gives_the_same_episode():
    def transcript(env: Game2048Env) -> list:
        steps = [env.reset(seed=7)]
        steps += [env.step(env.sample_random_action()) for _ in range(30)]
        return steps

    assert transcript(Game2048Env(difficulty="random")) == transcript(
        Game2048Env(difficulty="random")
    )


def test_random_difficulty_draws_both_presets():
    env = Game2048Env(difficulty="random")
    assert {env.reset(seed=s)[1]["difficulty"] for s in range(30)} == {"easy", "hard"}


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_difficulty_selects_its_preset(difficulty):
    _, _, info = started(difficulty=difficulty)
    assert (info["size"], info["target"], info["max_turns"]) == tuple(DIFFICULTIES[difficulty])


def test_set_state_replays_the_episode_from_the_snapshot():
    env, _, _ = started(difficulty="random", seed=3)
    for _ in range(5):
        env.step(env.sample_random_action())
    snapshot = env.get_state()
    frozen = pickle.dumps(snapshot)
    first = [env.step(env.sample_random_action()) for _ in range(10)]
    other = Game2048Env(difficulty="random")
    other.set_state(snapshot)
    assert [other.step(other.sample_random_action()) for _ in range(10)] == first
    assert pickle.dumps(snapshot) == frozen


@pytest.mark.parametrize("difficulty", PRESETS)
def test_check_env_passes(difficulty):
    check_env(Game2048Env(difficulty=difficulty))


def test_check_env_passes_with_short_episodes():
    check_env(Game2048Env(size=2, target=8, max_turns=50), num_episodes=5)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"difficulty": "extreme"}, ValueError, "difficulty must be"),
        ({"size": 1}, ValueError, "size must be from 2 to 8"),
        ({"target": 100}, ValueError, "target must be a power of two >= 8"),
        ({"target": 4}, ValueError, "target must be a power of two >= 8"),
        ({"max_turns": 0}, ValueError, "max_turns must be >= 1"),
        ({"target": 2048.0}, TypeError, "target must be an int"),
    ],
)
def test_invalid_constructor_arguments_raise_clear_errors(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        Game2048Env(**kwargs)
