"""xpgym.compat.pettingzoo: every multi-agent id passes PettingZoo's own `api_test` and
`seed_test` (sequential ids, as AEC envs) or `parallel_api_test` and `parallel_seed_test`
(parallel ids), and the bridges play the xpgym env's episodes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from toy_multiagent import CountGame, RockPaperScissors

import xpgym
from xpgym.core.multiagent import MultiAgentEnv
from xpgym.core.registry import load_entry_point

pytest.importorskip("pettingzoo", reason="the bridge needs pettingzoo (xpgym[compat])")
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test
from pettingzoo.utils.conversions import parallel_to_aec

from xpgym.compat.pettingzoo import (
    TextObservation,
    XpgymToAEC,
    XpgymToParallel,
    to_pettingzoo,
)

# api_test's advice for numeric envs (Box/Discrete spaces, "player_0" names, a render()):
# text envs differ on purpose (docs/compat.md); failures are assertions, not these warnings.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pettingzoo.test.api_test")

NUM_CYCLES = 30  # PettingZoo's default 1000 plays the same short games over and over


def _multiagent_ids() -> list[str]:
    ids = []
    for env_id in xpgym.list_envs():
        factory = load_entry_point(xpgym.spec(env_id).entry_point)
        if isinstance(factory, type) and issubclass(factory, MultiAgentEnv):
            ids.append(env_id)
    return ids


def _ids_in_mode(mode: str) -> list[Any]:
    """Registered multi-agent ids in `mode`, plus the toy env of the tests in that mode."""
    ids: list[Any] = []
    for env_id in _multiagent_ids():
        with xpgym.make(env_id) as env:
            if env.mode == mode:
                ids.append(env_id)
    toy = CountGame if mode == "sequential" else RockPaperScissors
    return [*ids, pytest.param(toy, id=f"toy_multiagent.{toy.__name__}")]


SEQUENTIAL = _ids_in_mode("sequential")
PARALLEL = _ids_in_mode("parallel")


def _factory(env: str | Callable[[], MultiAgentEnv]) -> Callable[[], Any]:
    if isinstance(env, str):
        return lambda: to_pettingzoo(env)
    return lambda: to_pettingzoo(env())


def test_every_multiagent_id_is_tested_in_one_mode():
    tested = {p for p in SEQUENTIAL + PARALLEL if isinstance(p, str)}
    assert tested == set(_multiagent_ids())
    assert tested  # the catalogue has multi-agent envs


@pytest.mark.parametrize("env", SEQUENTIAL)
def test_every_sequential_env_passes_pettingzoos_api_test(env):
    bridged = _factory(env)()
    assert isinstance(bridged, XpgymToAEC)
    api_test(bridged, num_cycles=NUM_CYCLES)


@pytest.mark.parametrize("env", SEQUENTIAL)
def test_every_sequential_env_passes_pettingzoos_seed_test(env):
    seed_test(_factory(env), num_cycles=NUM_CYCLES)


@pytest.mark.parametrize("env", PARALLEL)
def test_every_parallel_env_passes_pettingzoos_parallel_api_test(env):
    bridged = _factory(env)()
    assert isinstance(bridged, XpgymToParallel)
    parallel_api_test(bridged, num_cycles=NUM_CYCLES)


@pytest.mark.parametrize("env", PARALLEL)
def test_every_parallel_env_passes_pettingzoos_parallel_seed_test(env):
    parallel_seed_test(_factory(env), num_cycles=NUM_CYCLES)


@pytest.mark.parametrize("env", PARALLEL)
def test_every_parallel_env_passes_api_test_through_pettingzoos_parallel_to_aec(env):
    api_test(parallel_to_aec(_factory(env)()), num_cycles=NUM_CYCLES)


# ------------------------------------------------------------------ behaviour


def test_the_aec_bridge_plays_the_xpgym_episode():
    moves = [rf"\boxed{{{cell}}}" for cell in ("1,1", "2,2", "1,2", "3,3", "1,3")]  # x: top row
    native = xpgym.make("multiagent:TicTacToe-v0")
    native_observations, _ = native.reset(seed=3)
    native_transcript = []
    for move in moves:
        (agent,) = native.agent_selector.active_agents()
        observations, rewards, *_ = native.step({agent: move})
        native_transcript.append((agent, observations, rewards))

    bridged = to_pettingzoo("multiagent:TicTacToe-v0")
    bridged.reset(seed=3)
    assert {a: bridged.observe(a) for a in bridged.agents} == native_observations
    for (agent, observations, rewards), move in zip(native_transcript, moves, strict=True):
        assert bridged.agent_selection == agent
        bridged.step(move)
        assert {a: bridged.observe(a) for a in observations} == observations
        assert bridged.rewards == rewards
    assert bridged.rewards == {"x": 1.0, "o": -1.0}
    assert all(bridged.terminations.values())


def test_an_eliminated_agent_stays_until_its_dead_step_then_play_goes_on():
    env = to_pettingzoo(CountGame(num_agents=3))
    env.reset(seed=0)
    assert env.agent_selection == "p0"
    env.step("wrong")  # p0 is eliminated; p1 and p2 play on
    assert env.agents == ["p0", "p1", "p2"]
    assert env.terminations["p0"]
    assert env.agent_selection == "p0"
    assert env.last()[1] == -1.0
    env.step(None)
    assert env.agents == ["p1", "p2"]
    assert env.agent_selection == "p1"
    env.step("1")
    assert env.agent_selection == "p2"


def test_a_none_action_for_a_live_agent_raises_naming_the_agent():
    env = to_pettingzoo(CountGame(num_agents=2))
    env.reset(seed=0)
    with pytest.raises(TypeError, match="'p0' is live"):
        env.step(None)
    assert env.agent_selection == "p0"


def test_last_returns_the_reward_accumulated_since_the_agent_last_acted():
    env = to_pettingzoo(CountGame(num_agents=2))
    env.reset(seed=0)
    env.step("1")  # p0 right: no reward yet
    env.step("wrong")  # p1 eliminated (-1); p0, the survivor, wins (+1) on p1's turn
    assert env.agent_selection == "p0"  # the dead are stepped first, in turn order
    assert env.last()[1:3] == (1.0, True)
    env.step(None)
    assert env.agent_selection == "p1"
    assert env.last()[1:3] == (-1.0, True)
    env.step(None)
    assert env.agents == []


def test_a_parallel_bridge_returns_the_xpgym_step():
    native = xpgym.make("multiagent:RockPaperScissors-v0")
    bridged = to_pettingzoo("multiagent:RockPaperScissors-v0")
    assert bridged.reset(seed=1) == native.reset(seed=1)
    actions = dict.fromkeys(bridged.agents, "rock")
    assert bridged.step(actions) == native.step(actions)
    assert bridged.agents == native.agents


def test_observations_are_strs_that_carry_the_spaces_dtype():
    env = to_pettingzoo("multiagent:TicTacToe-v0")
    env.reset(seed=0)
    observation = env.observe("x")
    assert isinstance(observation, TextObservation)
    assert isinstance(observation, str)
    assert observation.dtype == env.observation_space("x").dtype == np.dtype(str)
    assert type(observation + "!") is str


def test_each_agent_keeps_one_space_object_per_kind():
    env = to_pettingzoo("multiagent:TicTacToe-v0")
    assert env.action_space("x") is env.action_space("x")
    assert env.action_space("x") is not env.action_space("o")


def test_a_bridge_of_the_wrong_mode_is_refused_with_the_right_one_named():
    with pytest.raises(ValueError, match="bridge it with XpgymToAEC"):
        XpgymToParallel("multiagent:TicTacToe-v0")
    with pytest.raises(ValueError, match="bridge it with XpgymToParallel"):
        XpgymToAEC("multiagent:RockPaperScissors-v0")


def test_a_single_agent_env_is_sent_to_the_gymnasium_bridge():
    with pytest.raises(TypeError, match=r"xpgym\.compat\.gymnasium"):
        to_pettingzoo("game:GuessTheNumber-v0")


def test_to_pettingzoo_passes_keyword_arguments_to_xpgym_make_and_the_spaces():
    env = to_pettingzoo("multiagent:RockPaperScissors-v0", max_action_length=5)
    assert env.action_space(env.possible_agents[0]).max_length == 5
    with pytest.raises(TypeError, match="unexpected keyword"):
        to_pettingzoo("multiagent:RockPaperScissors-v0", no_such_option=1)
