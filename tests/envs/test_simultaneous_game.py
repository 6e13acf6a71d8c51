"""Iterated Rock-Paper-Scissors (parallel): rounds, rewards, invalid moves, seeding, snapshots."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.checks import check_multiagent_env
from xpgym.envs.multiagent.rock_paper_scissors import (
    BEATS,
    MOVES,
    RockPaperScissorsEnv,
    parse_move,
)

P0, P1 = "player_0", "player_1"


def boxed(move: str) -> str:
    return f"\\boxed{{{move}}}"


def started(rounds: int = 5, seed: int = 0) -> RockPaperScissorsEnv:
    env = RockPaperScissorsEnv(rounds=rounds)
    env.reset(seed=seed)
    return env


@pytest.mark.parametrize(
    ("text", "move"),
    [
        ("\\boxed{rock}", "rock"),
        ("\\boxed{ Paper }", "paper"),
        ("\\boxed{S}", "scissors"),
        ("\\boxed{rock} then \\boxed{paper}", "paper"),
        ("\\boxed{lizard}", None),
        ("\\boxed{}", None),
        ("rock", None),
    ],
)
def test_parse_move(text, move):
    assert parse_move(text)[1] == move


def test_both_agents_act_every_round():
    env = RockPaperScissorsEnv()
    observations, infos = env.reset(seed=0)
    assert env.mode == "parallel"
    assert sorted(env.agent_selector.active_agents()) == [P0, P1]
    assert "Round 1 of 5: your move." in observations[P0]
    assert infos[P1]["rounds"] == 5
    with pytest.raises(ValueError, match="no action"):
        env.step({P0: boxed("rock")})


@pytest.mark.parametrize("mine", MOVES)
@pytest.mark.parametrize("theirs", MOVES)
def test_round_rewards(mine, theirs):
    env = started()
    obs, rewards, terms, truncs, infos = env.step({P0: boxed(mine), P1: boxed(theirs)})
    expected = 1.0 if BEATS[mine] == theirs else -1.0 if BEATS[theirs] == mine else 0.0
    assert rewards == {P0: expected, P1: -expected}
    assert terms == truncs == {P0: False, P1: False}
    assert infos[P0]["outcome"] == {1.0: "win", 0.0: "tie", -1.0: "loss"}[expected]
    assert infos[P1]["opponent_move"] == mine
    assert f"Round 1: you played {mine}, opponent played {theirs}" in obs[P0]


def test_invalid_move_forfeits_the_round_only():
    env = started()
    _, rewards, terms, _, infos = env.step({P0: "rock", P1: boxed("paper")})
    assert rewards == {P0: -1.0, P1: 1.0}
    assert infos[P0]["invalid_action"] is True
    assert infos[P0]["outcome"] == "invalid"
    assert infos[P1]["outcome"] == "win"
    assert terms == {P0: False, P1: False}
    _, rewards, _, _, infos = env.step({P0: "\\boxed{?}", P1: ""})
    assert rewards == {P0: -1.0, P1: -1.0}
    assert infos[P1]["score"] == 0.0
    assert infos[P0]["score"] == -2.0


def test_episode_ends_after_rounds_and_scores_add_up():
    env = started(rounds=3)
    plan = [("rock", "scissors"), ("rock", "paper"), ("paper", "paper")]
    totals = {P0: 0.0, P1: 0.0}
    for i, (a, b) in enumerate(plan):
        obs, rewards, terms, truncs, _ = env.step({P0: boxed(a), P1: boxed(b)})
        for agent, reward in rewards.items():
            totals[agent] += reward
        assert terms == dict.fromkeys((P0, P1), i == 2)
        assert truncs == {P0: False, P1: False}
    assert totals == {P0: 0.0, P1: 0.0} == env.scores
    assert env.agents == []
    assert "Game over." in obs[P0]
    assert "Score: you +0, opponent +0." in obs[P1]


def test_scripted_counter_strategy_wins_every_round():
    """An agent that plays what beats the opponent's last move beats a constant player."""
    env = started(rounds=10)
    counter = {beaten: winner for winner, beaten in BEATS.items()}
    last = "rock"
    total = 0.0
    while env.agents:
        _, rewards, _, _, infos = env.step({P0: boxed(counter[last]), P1: boxed("rock")})
        last = infos[P0]["opponent_move"]
        total += rewards[P0]
    assert total == 10.0


@pytest.mark.parametrize("rounds", [0, -1, 1001])
def test_bad_rounds_raise(rounds):
    with pytest.raises(ValueError, match="rounds"):
        RockPaperScissorsEnv(rounds=rounds)
    with pytest.raises(TypeError):
        RockPaperScissorsEnv(rounds=2.5)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.text() | st.builds(boxed, st.text()), st.text() | st.builds(boxed, st.text())),
        min_size=1,
        max_size=4,
    )
)
def test_arbitrary_text_never_raises(pairs):
    env = started(rounds=3)
    for a, b in pairs:
        if not env.agents:
            break
        obs, rewards, _, truncs, infos = env.step({P0: a, P1: b})
        assert all(isinstance(o, str) for o in obs.values())
        assert set(rewards.values()) <= {-1.0, 0.0, 1.0}
        for agent in (P0, P1):
            assert infos[agent]["invalid_action"] is (infos[agent]["move"] is None)
            if infos[agent]["invalid_action"]:
                assert rewards[agent] == -1.0
        assert truncs == {P0: False, P1: False}


@pytest.mark.parametrize("rounds", [1, 5])
def test_check_multiagent_env_passes(rounds):
    check_multiagent_env(RockPaperScissorsEnv(rounds=rounds), num_episodes=4)


def test_same_seed_same_random_game():
    def transcript(seed: int) -> list:
        env = RockPaperScissorsEnv(rounds=6)
        out = [env.reset(seed=seed)]
        while env.agents:
            out.append(env.step({a: env.sample_random_action(a) for a in env.agents}))
        return out

    assert transcript(7) == transcript(7)
    assert len({repr(transcript(s)) for s in range(10)}) > 1


def test_get_state_set_state_round_trip():
    env = started(rounds=4, seed=2)
    env.step({P0: boxed("rock"), P1: boxed("paper")})
    snapshot = pickle.loads(pickle.dumps(env.get_state()))
    first = env.step({P0: boxed("scissors"), P1: boxed("paper")})
    sample = env.sample_random_action(P0)
    env.step({P0: "junk", P1: "junk"})
    env.set_state(snapshot)
    assert env.round == 1
    assert env.scores == {P0: -1.0, P1: 1.0}
    assert env.step({P0: boxed("scissors"), P1: boxed("paper")}) == first
    assert env.sample_random_action(P0) == sample
