"""Tic-Tac-Toe: moves, wins, draws, the forfeit rule, minimax play, seeding and snapshots."""

from __future__ import annotations

import functools
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.checks import check_multiagent_env
from xpgym.envs.multiagent.tic_tac_toe import (
    EMPTY,
    TicTacToeEnv,
    legal_moves,
    parse_move,
    winner_of,
)


def boxed(row: int, col: int) -> str:
    return f"\\boxed{{{row} {col}}}"


def play(env: TicTacToeEnv, moves: list[str]) -> tuple:
    """Play `moves` in turn order; return the last step's result."""
    result = None
    for move in moves:
        result = env.step({env.agent_selector.selected_agent: move})
    return result


def started(seed: int = 0) -> TicTacToeEnv:
    env = TicTacToeEnv()
    env.reset(seed=seed)
    return env


@pytest.mark.parametrize(
    ("text", "move"),
    [
        ("\\boxed{2 3}", (2, 3)),
        ("\\boxed{23}", (2, 3)),
        ("\\boxed{2,3}", (2, 3)),
        ("\\boxed{ (1, 1) }", (1, 1)),
        ("I pick \\boxed{1 1} no wait \\boxed{3 2}", (3, 2)),
        ("\\boxed{0 1}", None),
        ("\\boxed{4 4}", None),
        ("\\boxed{1}", None),
        ("\\boxed{}", None),
        ("2 3", None),
    ],
)
def test_parse_move(text, move):
    assert parse_move(text)[1] == move


def test_reset_x_first_and_observation_shows_board_and_turn():
    env = TicTacToeEnv()
    observations, infos = env.reset(seed=0)
    assert env.agents == ["x", "o"]
    assert env.agent_selector.active_agents() == ["x"]
    assert "To move: 'x' (your turn)." in observations["x"]
    assert "waiting for 'x'" in observations["o"]
    assert "1  . . ." in observations["x"]
    assert infos["x"]["mark"] == "X"


def test_legal_move_places_mark_and_passes_turn():
    env = started()
    obs, rewards, terms, truncs, infos = env.step({"x": boxed(2, 2)})
    assert env.board[4] == "x"
    assert rewards == {"x": 0.0, "o": 0.0}
    assert terms == truncs == {"x": False, "o": False}
    assert infos["o"]["move"] == (2, 2)
    assert infos["x"]["invalid_action"] is False
    assert env.agent_selector.active_agents() == ["o"]
    assert "2  . X ." in obs["o"]
    assert "(your turn)" in obs["o"]
    assert "Last move: 'x' played row 2, column 2." in obs["x"]


def test_row_win_ends_episode():
    env = started()
    _, rewards, terms, truncs, infos = play(
        env, [boxed(1, 1), boxed(2, 1), boxed(1, 2), boxed(2, 2), boxed(1, 3)]
    )
    assert rewards == {"x": 1.0, "o": -1.0}
    assert terms == {"x": True, "o": True}
    assert truncs == {"x": False, "o": False}
    assert infos["o"]["winner"] == "x"
    assert infos["o"]["reason"] == "three_in_a_row"
    assert env.agents == []


def test_o_can_win_on_diagonal():
    env = started()
    obs, rewards, *_ = play(
        env, [boxed(1, 2), boxed(1, 1), boxed(1, 3), boxed(2, 2), boxed(3, 2), boxed(3, 3)]
    )
    assert rewards == {"x": -1.0, "o": 1.0}
    assert "you win" in obs["o"]
    assert "you lose" in obs["x"]


def test_full_board_is_a_draw():
    # X O X / X O O / O X X
    env = started()
    moves = [(1, 1), (1, 2), (1, 3), (2, 2), (2, 1), (2, 3), (3, 2), (3, 1), (3, 3)]
    obs, rewards, terms, _, infos = play(env, [boxed(*m) for m in moves])
    assert rewards == {"x": 0.0, "o": 0.0}
    assert terms == {"x": True, "o": True}
    assert infos["x"]["reason"] == "draw"
    assert infos["x"]["winner"] is None
    assert "Game over: draw." in obs["x"]


@pytest.mark.parametrize("bad", [boxed(1, 1), "\\boxed{9 9}", "no box here", ""])
def test_illegal_move_forfeits(bad):
    env = started()
    env.step({"x": boxed(1, 1)})
    before = list(env.board)
    obs, rewards, terms, _, infos = env.step({"o": bad})
    assert rewards == {"x": 1.0, "o": -1.0}
    assert terms == {"x": True, "o": True}
    assert infos["o"]["invalid_action"] is True
    assert infos["o"]["reason"] == "illegal_move"
    assert infos["x"]["winner"] == "x"
    assert env.board == before
    assert "illegal move" in obs["o"]
    assert env.agents == []


# --------------------------------------------------------------------- minimax


@functools.cache
def _value(board: tuple[str, ...], to_move: str) -> int:
    """Game value for 'x' (+1 win, 0 draw, -1 loss) with `to_move` to play, perfect play."""
    won = winner_of(board)
    if won is not None:
        return 1 if won == "x" else -1
    moves = legal_moves(board)
    if not moves:
        return 0
    nxt = "o" if to_move == "x" else "x"
    values = [_value(_after(board, m, to_move), nxt) for m in moves]
    return max(values) if to_move == "x" else min(values)


def _after(board: tuple[str, ...], move: tuple[int, int], mark: str) -> tuple[str, ...]:
    cells = list(board)
    cells[3 * (move[0] - 1) + move[1] - 1] = mark
    return tuple(cells)


def minimax_move(board: list[str], agent: str) -> tuple[int, int]:
    nxt = "o" if agent == "x" else "x"
    sign = 1 if agent == "x" else -1
    return max(legal_moves(board), key=lambda m: sign * _value(_after(tuple(board), m, agent), nxt))


def test_empty_board_value_is_a_draw():
    assert _value(tuple(EMPTY * 9), "x") == 0


@pytest.mark.parametrize("minimax_agent", ["x", "o"])
def test_minimax_never_loses_to_random_play(minimax_agent):
    env = TicTacToeEnv()
    wins = 0
    for seed in range(150):
        env.reset(seed=seed)
        total = {"x": 0.0, "o": 0.0}
        while env.agents:
            agent = env.agent_selector.selected_agent
            if agent == minimax_agent:
                action = boxed(*minimax_move(env.board, agent))
            else:
                action = env.sample_random_action(agent)
            _, rewards, _, _, infos = env.step({agent: action})
            assert infos[agent]["invalid_action"] is False
            for a, r in rewards.items():
                total[a] += r
        assert total[minimax_agent] >= 0.0, f"seed {seed}: minimax lost"
        wins += total[minimax_agent] == 1.0
    assert wins > 75  # random play blunders often


def test_two_minimax_players_draw():
    env = started()
    while env.agents:
        agent = env.agent_selector.selected_agent
        _, rewards, _, _, infos = env.step({agent: boxed(*minimax_move(env.board, agent))})
    assert rewards == {"x": 0.0, "o": 0.0}
    assert infos["x"]["reason"] == "draw"


# --------------------------------------------------------------------- fuzz, contract


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.text() | st.builds(lambda s: f"\\boxed{{{s}}}", st.text()),
        min_size=1,
        max_size=10,
    )
)
def test_arbitrary_text_never_raises(actions):
    env = started()
    for action in actions:
        if not env.agents:
            break
        agent = env.agent_selector.selected_agent
        obs, rewards, terms, truncs, infos = env.step({agent: action})
        assert all(isinstance(o, str) for o in obs.values())
        assert set(rewards.values()) <= {-1.0, 0.0, 1.0}
        assert sum(rewards.values()) == 0.0
        assert truncs == {"x": False, "o": False}
        assert terms["x"] is terms["o"]
        assert isinstance(infos[agent]["invalid_action"], bool)
        if infos[agent]["invalid_action"]:
            assert rewards[agent] == -1.0
            assert terms[agent] is True


def test_check_multiagent_env_passes():
    check_multiagent_env(TicTacToeEnv(), num_episodes=5)


def test_same_seed_same_random_game():
    def transcript(seed: int) -> list:
        env = TicTacToeEnv()
        out = [env.reset(seed=seed)]
        while env.agents:
            agent = env.agent_selector.selected_agent
            out.append(env.step({agent: env.sample_random_action(agent)}))
        return out

    assert transcript(3) == transcript(3)
    assert len({repr(transcript(s)) for s in range(10)}) > 1


def test_get_state_set_state_round_trip():
    env = started(seed=5)
    play(env, [boxed(1, 1), boxed(2, 2)])
    snapshot = pickle.loads(pickle.dumps(env.get_state()))
    first = play(env, [boxed(3, 3), boxed(1, 3)])
    board_after = list(env.board)
    play(env, [boxed(3, 1), boxed(2, 1)])  # step on past the snapshot
    env.set_state(snapshot)
    assert env.board == ["x", EMPTY, EMPTY, EMPTY, "o", EMPTY, EMPTY, EMPTY, EMPTY]
    assert env.agent_selector.active_agents() == ["x"]
    assert env.agents == ["x", "o"]
    again = play(env, [boxed(3, 3), boxed(1, 3)])
    assert again == first
    assert env.board == board_after
    rng_a = env.sample_random_action("x")
    env.set_state(snapshot)
    play(env, [boxed(3, 3), boxed(1, 3)])
    assert env.sample_random_action("x") == rng_a


def test_snapshot_of_a_finished_game_restores_it():
    env = started()
    play(env, [boxed(1, 1), boxed(1, 1)])
    state = env.get_state()
    env.reset(seed=1)
    env.set_state(state)
    assert env.agents == []
    assert env.winner == "x"
    assert env.reason == "illegal_move"
