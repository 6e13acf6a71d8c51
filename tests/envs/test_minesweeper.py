"""Minesweeper: first-reveal safety, flood fill, flags, win/loss, seeding and snapshots."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.checks import check_env
from xpgym.envs.games.minesweeper import (
    DIFFICULTIES,
    INVALID_REWARD,
    MINE_REWARD,
    MinesweeperEnv,
    parse_move,
)

DIFFS = [None, "easy", "hard", "random"]


def started(seed: int = 0, **kwargs) -> MinesweeperEnv:
    env = MinesweeperEnv(**kwargs)
    env.reset(seed=seed)
    return env


def reveal(r: int, c: int) -> str:
    return f"\\boxed{{reveal {r} {c}}}"


@pytest.mark.parametrize(
    ("text", "move"),
    [
        ("\\boxed{reveal 2 3}", ("reveal", 2, 3)),
        ("\\boxed{FLAG 2,3}", ("flag", 2, 3)),
        ("\\boxed{reveal (4, 5)}", ("reveal", 4, 5)),
        ("\\boxed{flag 1 1}\\boxed{reveal 1 2}", ("reveal", 1, 2)),
        ("\\boxed{reveal 2}", None),
        ("\\boxed{dig 2 3}", None),
        ("\\boxed{reveal ٢ 3}", None),
        ("reveal 2 3", None),
    ],
)
def test_parse_move(text, move):
    assert parse_move(text)[1] == move


@pytest.mark.parametrize("difficulty", DIFFS)
def test_first_reveal_is_never_a_mine_and_opens_an_area(difficulty):
    env = MinesweeperEnv(difficulty=difficulty)
    for seed in range(50):
        _, info = env.reset(seed=seed)
        assert env.mine_cells is None
        r = seed % info["rows"] + 1
        c = (seed * 7) % info["cols"] + 1
        _, reward, _, _, step_info = env.step(reveal(r, c))
        assert step_info["hit_mine"] is False
        assert reward in (0.0, 1.0)
        assert len(env.mine_cells) == info["mines"]
        assert env._counts[(r - 1) * info["cols"] + c - 1] == 0  # neighbours kept free


def test_first_reveal_only_keeps_the_cell_free_on_a_crowded_grid():
    env = started(rows=3, cols=3, mines=8)
    _, reward, terminated, _, info = env.step(reveal(2, 2))
    assert (reward, terminated, info["correct"]) == (1.0, True, True)  # the only safe cell


def fixed_board(mines: list[tuple[int, int]], rows: int = 4, cols: int = 4) -> MinesweeperEnv:
    """An env with mines at the given 1-based cells, placed before any reveal."""
    env = started(rows=rows, cols=cols, mines=len(mines), max_turns=rows * cols)
    env._place_mines(tuple((r - 1) * cols + c - 1 for r, c in mines))
    return env


def test_flood_fill_and_counts_hand_checked():
    env = fixed_board([(1, 1)])
    obs, reward, terminated, _, info = env.step(reveal(4, 4))
    # everything but the mine opens; (1,1) hidden, its neighbours show 1
    assert (reward, terminated, info["correct"]) == (1.0, True, True)
    assert "1 # 1 . ." in obs
    assert "2 1 1 . ." in obs


def test_revealing_a_number_reveals_only_that_cell():
    env = fixed_board([(1, 1), (4, 4)])
    obs, reward, terminated, _, _ = env.step(reveal(1, 2))
    assert (reward, terminated) == (0.0, False)
    assert sum(env.revealed) == 1
    assert "1 # 1 # #" in obs


def test_revealing_a_mine_loses_and_shows_all_mines():
    env = fixed_board([(1, 1), (4, 4)])
    obs, reward, terminated, truncated, info = env.step(reveal(4, 4))
    assert reward == MINE_REWARD == -1.0
    assert (terminated, truncated) == (True, False)
    assert info["hit_mine"] is True
    assert info["correct"] is False
    assert obs.count("*") == 2
    assert "You lost" in obs


def test_flag_toggles_and_blocks_reveal():
    env = fixed_board([(1, 1)])
    obs, reward, *_ = env.step("\\boxed{flag 1 1}")
    assert reward == 0.0
    assert env.flagged[0]
    assert "flags placed: 1" in obs
    assert "1 F" in obs
    _, reward, _, _, info = env.step(reveal(1, 1))
    assert reward == INVALID_REWARD
    assert info["invalid_action"] is True
    env.step("\\boxed{flag 1 1}")
    assert not env.flagged[0]


@pytest.mark.parametrize("action", [reveal(0, 1), reveal(5, 1), reveal(1, 99), "\\boxed{x}", "hi"])
def test_invalid_moves_change_nothing(action):
    env = fixed_board([(1, 1)])
    obs, reward, terminated, truncated, info = env.step(action)
    assert reward == INVALID_REWARD == -0.1
    assert info["invalid_action"] is True
    assert (terminated, truncated) == (False, False)
    assert not any(env.revealed)
    assert "nothing changed" in obs


def test_revealing_a_revealed_cell_is_invalid():
    env = fixed_board([(1, 1), (4, 4)])
    env.step(reveal(1, 2))
    for action in (reveal(1, 2), "\\boxed{flag 1 2}"):
        _, reward, _, _, info = env.step(action)
        assert reward == -0.1
        assert info["invalid_action"] is True


def test_turn_limit_truncates():
    env = started(rows=4, cols=4, mines=2, max_turns=2)
    env.step("\\boxed{flag 1 1}")
    obs, _, terminated, truncated, _ = env.step("\\boxed{flag 1 1}")
    assert (terminated, truncated) == (False, True)
    assert "No turns left" in obs


@pytest.mark.parametrize("difficulty", DIFFS)
def test_revealing_every_safe_cell_wins(difficulty):
    env = MinesweeperEnv(difficulty=difficulty)
    for seed in range(30):
        env.reset(seed=seed)
        env.step(reveal(1, 1))
        terminated = env.mine_cells is not None and sum(env.revealed) == (
            env.rows * env.cols - env.mines
        )
        cell = 0
        while not terminated:
            while env.revealed[cell] or env._is_mine[cell]:
                cell += 1
            _, _reward, terminated, truncated, info = env.step(
                reveal(cell // env.cols + 1, cell % env.cols + 1)
            )
            assert not truncated
            assert info["invalid_action"] is False
        assert env.turn <= env.max_turns
        assert env._num_revealed == env.rows * env.cols - env.mines


@settings(max_examples=300, deadline=None)
@given(
    st.text()
    | st.builds(lambda s: f"\\boxed{{{s}}}", st.text())
    | st.builds(
        lambda v, r, c: f"\\boxed{{{v} {r} {c}}}",
        st.sampled_from(["reveal", "flag", "Reveal"]),
        st.integers(-3, 10**7),
        st.integers(-3, 10**7),
    )
)
def test_any_text_is_a_valid_step(action):
    env = started()
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str)
    assert reward in (1.0, 0.0, -0.1, -1.0)
    assert type(terminated) is bool
    assert type(truncated) is bool
    assert type(info["correct"]) is bool
    assert type(info["invalid_action"]) is bool
    assert type(info["hit_mine"]) is bool
    assert info["invalid_action"] is (reward == -0.1)


@pytest.mark.parametrize("difficulty", DIFFS)
def test_check_env_passes(difficulty):
    check_env(MinesweeperEnv(difficulty=difficulty))


def test_same_seed_same_episode_and_random_draws_both_presets():
    def transcript() -> list:
        env = MinesweeperEnv(difficulty="random")
        return [env.reset(seed=4)] + [env.step(env.sample_random_action()) for _ in range(6)]

    assert transcript() == transcript()
    drawn = {MinesweeperEnv(difficulty="random").reset(seed=s)[1]["difficulty"] for s in range(40)}
    assert drawn == {"easy", "hard"}


@pytest.mark.parametrize("before_first_reveal", [True, False])
def test_set_state_round_trip(before_first_reveal):
    env = started(seed=6, difficulty="random")
    if not before_first_reveal:
        env.step(reveal(1, 1))
    snap = env.get_state()
    frozen = pickle.dumps(snap)
    actions = [reveal(r, c) for r in (2, 3) for c in (2, 3)] + ["\\boxed{flag 1 2}"]
    first = [env.step(a) for a in actions if not (env._lost or env.turn >= env.max_turns)]
    other = MinesweeperEnv(difficulty="random")
    other.set_state(snap)
    assert [other.step(a) for a in actions[: len(first)]] == first
    assert pickle.dumps(snap) == frozen


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_presets(difficulty):
    _, info = MinesweeperEnv(difficulty=difficulty).reset(seed=0)
    assert (info["rows"], info["cols"], info["mines"], info["max_turns"]) == tuple(
        DIFFICULTIES[difficulty]
    )


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"difficulty": "x"}, ValueError),
        ({"rows": 1}, ValueError),
        ({"mines": 36}, ValueError),
        ({"mines": 0}, ValueError),
        ({"max_turns": 0}, ValueError),
        ({"cols": "6"}, TypeError),
    ],
)
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error):
        MinesweeperEnv(**kwargs)
