"""Specification tests for `xpgym.core.multiagent` and `check_multiagent_env`."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toy_multiagent import (
    BrokenAliasingState,
    BrokenClose,
    BrokenForgetfulState,
    BrokenObservation,
    BrokenUnseeded,
    CountGame,
    RockPaperScissors,
)

from xpgym.core.checks import MultiAgentCheckError, check_multiagent_env
from xpgym.core.env import EpisodeFinishedError, ResetNeededError
from xpgym.core.multiagent import AgentSelector, MultiAgentEnv

try:
    from pettingzoo.utils import AgentSelector as PettingZooSelector
except ImportError:  # pragma: no cover - pettingzoo is a dev extra
    PettingZooSelector = None

needs_pettingzoo = pytest.mark.skipif(
    PettingZooSelector is None, reason="pettingzoo is not installed (pip install 'xpgym[dev]')"
)

ABC = ["a", "b", "c"]


# ---------------------------------------------------------------- AgentSelector


def test_reset_selects_and_returns_the_first_agent() -> None:
    selector = AgentSelector(ABC)
    assert selector.reset() == "a"
    assert selector.selected_agent == "a"
    assert selector.is_first()
    assert not selector.is_last()


def test_next_cycles_in_order_and_wraps_around() -> None:
    selector = AgentSelector(ABC)
    selector.reset()
    assert [selector.next() for _ in range(5)] == ["b", "c", "a", "b", "c"]
    assert selector.is_last()


def test_nothing_is_selected_before_the_first_next() -> None:
    selector = AgentSelector(ABC)
    assert selector.selected_agent is None
    assert not selector.is_first()
    assert not selector.is_last()
    assert selector.active_agents() == []
    assert selector.next() == "a"  # like PettingZoo: next() before reset() gives the first


def test_reinit_uses_a_new_order_and_copies_it() -> None:
    selector = AgentSelector(ABC)
    selector.reset()
    order = ["c", "a"]
    selector.reinit(order)
    order.append("b")
    assert selector.agent_order == ["c", "a"]
    assert selector.next() == "c"


def test_removing_the_current_agent_selects_its_follower_next() -> None:
    # GEM's selector skipped one agent here: with a, b, c and a removed it selected c.
    selector = AgentSelector(ABC)
    selector.reset()
    selector.remove_agent("a")
    assert selector.selected_agent is None
    assert selector.next() == "b"
    assert selector.next() == "c"
    assert selector.next() == "b"


def test_removing_the_current_last_agent_wraps_to_the_first() -> None:
    selector = AgentSelector(ABC)
    selector.reset()
    selector.next()
    selector.next()
    selector.remove_agent("c")
    assert selector.next() == "a"


@pytest.mark.parametrize(("removed", "expected"), [("a", ["c", "b"]), ("c", ["a", "b"])])
def test_removing_another_agent_keeps_the_turn_order(removed: str, expected: list[str]) -> None:
    selector = AgentSelector(ABC)
    selector.reset()
    selector.next()  # b
    selector.remove_agent(removed)
    assert selector.selected_agent == "b"
    assert [selector.next(), selector.next()] == expected


def test_added_agent_joins_the_end_of_the_turn_order() -> None:
    selector = AgentSelector(ABC)
    selector.reset()
    selector.next()
    selector.next()  # c, the last
    selector.add_agent("d")
    assert [selector.next() for _ in range(4)] == ["d", "a", "b", "c"]


def test_active_agents_is_the_selected_one_or_every_agent_by_mode() -> None:
    sequential, parallel = AgentSelector(ABC), AgentSelector(ABC, mode="parallel")
    sequential.reset()
    parallel.reset()
    assert sequential.active_agents() == ["a"]
    assert parallel.active_agents() == ABC
    parallel.remove_agent("b")
    assert parallel.active_agents() == ["a", "c"]


def test_selector_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="mode"):
        AgentSelector(ABC, mode="round-robin")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unique"):
        AgentSelector(["a", "a"])
    selector = AgentSelector(ABC)
    with pytest.raises(ValueError, match="'z'"):
        selector.remove_agent("z")
    with pytest.raises(ValueError, match="'a'"):
        selector.add_agent("a")
    with pytest.raises(ValueError, match="no agents"):
        AgentSelector([]).reset()


def test_selectors_are_equal_when_order_and_position_are() -> None:
    first, second = AgentSelector(ABC), AgentSelector(ABC)
    first.reset()
    second.reset()
    assert first == second
    second.next()
    assert first != second
    restored = AgentSelector(["x"])
    restored.set_state(second.get_state())
    assert restored == second


# ---------------------------------------------------------------- parity with PettingZoo
#
# "The same" means: after every call, both selectors return the same agent, have the same
# `agent_order`, and agree on `is_first()`, `is_last()` and `selected_agent`. Two documented
# differences: before the first selection ours has `selected_agent is None` where PettingZoo
# has `0`; and PettingZoo has no `remove_agent`. A PettingZoo env removes agents by
# `reinit(remaining)` and then re-selects so that the agent after the one that just acted
# comes next. The op ("remove", agents) is one env step: remove the agents that finished,
# then `next()`; for PettingZoo it is that emulation, and both must pick the same agent.


def _apply_ours(selector: AgentSelector, op: tuple[Any, ...]) -> Any:
    kind = op[0]
    if kind == "reinit":
        return selector.reinit(list(op[1]))
    if kind == "remove":
        for agent in op[1]:
            selector.remove_agent(agent)
        return selector.next()
    return getattr(selector, kind)()


def _apply_pettingzoo(selector: Any, op: tuple[Any, ...]) -> Any:
    kind = op[0]
    if kind == "reinit":
        return selector.reinit(list(op[1]))
    if kind == "remove":
        order, acted = list(selector.agent_order), selector.selected_agent
        at = order.index(acted)
        follower = next(a for a in order[at + 1 :] + order[: at + 1] if a not in op[1])
        remaining = [a for a in order if a not in op[1]]
        selector.reinit(remaining)
        ahead = remaining.index(follower)
        for _ in range(ahead or len(remaining)):  # leave the agent before `follower` selected
            selector.next()
        return selector.next()
    return getattr(selector, kind)()


def _assert_same(ours: AgentSelector, theirs: Any, step: int) -> None:
    assert ours.agent_order == theirs.agent_order, step
    assert ours.is_first() == theirs.is_first(), step
    assert ours.is_last() == theirs.is_last(), step
    if ours.selected_agent is None:
        assert theirs.selected_agent == 0, step  # PettingZoo's "nothing selected yet"
    else:
        assert ours.selected_agent == theirs.selected_agent, step


def _run_both(order: list[str], ops: list[tuple[Any, ...]]) -> list[Any]:
    ours, theirs = AgentSelector(order), PettingZooSelector(list(order))
    _assert_same(ours, theirs, -1)
    returned = []
    for step, op in enumerate(ops):
        mine = _apply_ours(ours, op)
        assert mine == _apply_pettingzoo(theirs, op), (step, op)
        _assert_same(ours, theirs, step)
        returned.append(mine)
    return returned


@needs_pettingzoo
@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        pytest.param(
            [("reset",), ("next",), ("next",), ("next",), ("next",)],
            ["a", "b", "c", "a", "b"],
            id="plain-cycling",
        ),
        pytest.param(
            [("next",), ("next",), ("reset",), ("next",)], ["a", "b", "a", "b"], id="reset"
        ),
        pytest.param(
            [("reset",), ("next",), ("reinit", ["c", "b"]), ("next",), ("next",), ("next",)],
            ["a", "b", None, "c", "b", "c"],
            id="reinit-new-list",
        ),
        pytest.param([("reset",), ("remove", ["a"]), ("next",)], ["a", "b", "c"], id="rm-current"),
        pytest.param(
            [("reset",), ("next",), ("next",), ("remove", ["c"]), ("next",)],
            ["a", "b", "c", "a", "b"],
            id="rm-current-last",
        ),
        pytest.param(
            [("reset",), ("next",), ("remove", ["a"]), ("next",)],
            ["a", "b", "c", "b"],
            id="rm-earlier",
        ),
        pytest.param(
            [("reset",), ("next",), ("remove", ["b", "c"]), ("next",)],
            ["a", "b", "a", "a"],
            id="rm-current-and-next",
        ),
    ],
)
def test_turn_order_matches_pettingzoo(ops: list[tuple[Any, ...]], expected: list[Any]) -> None:
    assert _run_both(ABC, ops) == expected


@needs_pettingzoo
@settings(max_examples=300, deadline=None)
@given(data=st.data(), size=st.integers(1, 5))
def test_turn_order_matches_pettingzoo_on_random_call_sequences(
    data: st.DataObject, size: int
) -> None:
    pool = [f"agent_{i}" for i in range(6)]
    order = pool[:size]
    ours, theirs = AgentSelector(order), PettingZooSelector(list(order))
    for step in range(data.draw(st.integers(0, 30), label="length")):
        kinds = ["next", "reset", "reinit"]
        if ours.selected_agent is not None and len(ours.agent_order) > 1:
            kinds.append("remove")
        kind = data.draw(st.sampled_from(kinds), label="kind")
        if kind == "reinit":
            new = data.draw(st.lists(st.sampled_from(pool), min_size=1, unique=True), label="new")
            op: tuple[Any, ...] = ("reinit", new)
        elif kind == "remove":
            live = ours.agent_order
            gone = data.draw(
                st.lists(st.sampled_from(live), min_size=1, max_size=len(live) - 1, unique=True),
                label="removed",
            )
            op = ("remove", gone)
        else:
            op = (kind,)
        assert _apply_ours(ours, op) == _apply_pettingzoo(theirs, op), (step, op)
        _assert_same(ours, theirs, step)


# ---------------------------------------------------------------- MultiAgentEnv


def _play(env: MultiAgentEnv, seed: int) -> list[Any]:
    transcript: list[Any] = [env.reset(seed=seed)]
    while env.agents:
        actions = {a: env.sample_random_action(a) for a in env.agent_selector.active_agents()}
        transcript.append((actions, env.step(actions)))
    return transcript


def test_reset_with_a_seed_works_and_is_deterministic() -> None:
    env = CountGame()
    observations, infos = env.reset(seed=1)
    assert observations == dict.fromkeys(["p0", "p1", "p2"], "count=0 turns=0 next=p0")
    assert infos == {agent: {"target": 6} for agent in ["p0", "p1", "p2"]}
    assert env.np_random_seed == 1
    assert _play(env, 7) == _play(env, 7) == _play(CountGame(), 7)


def test_reset_rejects_a_negative_seed() -> None:
    with pytest.raises(ValueError, match="seed"):
        CountGame().reset(seed=-1)


def test_step_before_reset_raises_reset_needed() -> None:
    with pytest.raises(ResetNeededError, match="reset"):
        CountGame().step({"p0": "1"})


def test_missing_action_for_the_agent_on_turn_raises_value_error() -> None:
    env = CountGame()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"no action for \['p0'\]"):
        env.step({})


def test_action_for_an_agent_not_on_turn_raises_value_error_naming_it() -> None:
    env = CountGame()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"'p1' \(not its turn\)"):
        env.step({"p0": "1", "p1": "2"})
    with pytest.raises(ValueError, match=r"'p9' \(unknown agent\)"):
        env.step({"p0": "1", "p9": "2"})


def test_action_for_a_finished_agent_raises_value_error() -> None:
    env = RockPaperScissors()
    env.reset(seed=0)
    env.step({"p0": "lizard", "p1": "rock", "p2": "rock"})
    with pytest.raises(ValueError, match=r"'p0' \(already done\)"):
        env.step({"p0": "rock", "p1": "rock", "p2": "rock"})


def test_non_str_action_raises_type_error_naming_env_and_agent() -> None:
    env = CountGame()
    env.reset(seed=0)
    with pytest.raises(TypeError, match=r"CountGame.*'p0'.*int"):
        env.step({"p0": 1})  # type: ignore[dict-item]


def test_rejected_step_changes_nothing() -> None:
    env = CountGame()
    env.reset(seed=0)
    before = env.get_state()
    with pytest.raises(ValueError, match="may not act"):
        env.step({"p0": "1", "p1": "1"})
    assert env.get_state() == before


def test_eliminated_agent_gets_its_final_reward_then_leaves() -> None:
    env = CountGame()
    env.reset(seed=0)
    observations, rewards, terminations, truncations, infos = env.step({"p0": "5"})
    assert set(observations) == set(rewards) == {"p0", "p1", "p2"}
    assert rewards == {"p0": -1.0, "p1": 0.0, "p2": 0.0}
    assert terminations == {"p0": True, "p1": False, "p2": False}
    assert truncations == dict.fromkeys(["p0", "p1", "p2"], False)
    assert infos["p0"] == {"correct": False}
    assert env.agents == ["p1", "p2"]
    assert env.agent_selector.agent_order == ["p1", "p2"]


def test_eliminating_the_agent_on_turn_does_not_skip_the_next_one() -> None:
    env = CountGame()
    env.reset(seed=0)
    observations, *_ = env.step({"p0": "wrong"})
    assert env.agent_selector.active_agents() == ["p1"]
    assert observations["p1"] == "count=0 turns=1 next=p1"
    env.step({"p1": "1"})
    assert env.agent_selector.active_agents() == ["p2"]
    env.step({"p2": "2"})
    assert env.agent_selector.active_agents() == ["p1"]


def test_agents_finish_at_different_times_in_parallel_mode() -> None:
    env = RockPaperScissors(rounds=2)
    env.reset(seed=0)
    _, rewards, terminations, _, _ = env.step({"p0": "lizard", "p1": "rock", "p2": "paper"})
    assert rewards == {"p0": -1.0, "p1": -1.0, "p2": 1.0}
    assert terminations == {"p0": True, "p1": False, "p2": False}
    assert env.agent_selector.active_agents() == ["p1", "p2"]
    _, rewards, terminations, _, _ = env.step({"p1": "rock", "p2": "rock"})
    assert set(rewards) == {"p1", "p2"}
    assert terminations == {"p1": True, "p2": True}
    assert env.agents == []


def test_truncation_ends_the_episode_for_every_live_agent() -> None:
    env = CountGame(num_agents=2, target=100, max_turns=2)
    env.reset(seed=0)
    env.step({"p0": "1"})
    _, _, terminations, truncations, _ = env.step({"p1": "2"})
    assert terminations == {"p0": False, "p1": False}
    assert truncations == {"p0": True, "p1": True}
    assert env.agents == []


def test_step_after_every_agent_is_done_raises_episode_finished() -> None:
    env = CountGame(num_agents=2)
    env.reset(seed=0)
    env.step({"p0": "wrong"})  # p0 out, p1 the last one standing wins
    assert env.agents == []
    with pytest.raises(EpisodeFinishedError, match="reset"):
        env.step({"p1": "1"})
    env.reset()
    assert env.agents == ["p0", "p1"]


def test_possible_agents_is_not_changed_by_an_episode() -> None:
    env = CountGame()
    _play(env, 3)
    assert env.possible_agents == ["p0", "p1", "p2"]


@pytest.mark.parametrize("env_type", [CountGame, RockPaperScissors])
def test_set_state_replays_the_continuation_from_a_snapshot(env_type: type) -> None:
    env = env_type()
    env.reset(seed=5)
    env.step({a: env.sample_random_action(a) for a in env.agent_selector.active_agents()})
    snapshot = env.get_state()
    pickle.dumps(snapshot)

    def continuation() -> list[Any]:
        steps = []
        while env.agents:
            acting = env.agent_selector.active_agents()
            actions = {a: env.sample_random_action(a) for a in acting}
            steps.append((actions, env.step(actions), list(env.agents)))
        return steps

    first = continuation()
    for _ in range(2):  # a snapshot can be restored many times (GRPO groups)
        env.set_state(snapshot)
        assert continuation() == first


def test_set_state_on_a_fresh_env_needs_no_reset() -> None:
    env = CountGame()
    env.reset(seed=0)
    env.step({"p0": "1"})
    fresh = CountGame()
    fresh.set_state(env.get_state())
    assert fresh.agent_selector.active_agents() == ["p1"]
    assert fresh.step({"p1": "2"}) == env.step({"p1": "2"})


def test_hook_reporting_an_agent_that_is_not_live_is_an_error() -> None:
    class ReportsStranger(CountGame):
        def _step(self, actions: dict[str, str]) -> tuple[dict, dict, dict, dict]:
            return {"stranger": 1.0}, {}, {}, {}

    env = ReportsStranger()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="stranger"):
        env.step({"p0": "1"})


def test_close_is_idempotent_and_the_env_is_a_context_manager() -> None:
    with CountGame() as env:
        env.reset(seed=0)
    assert env.closed == 1
    env.close()
    assert env.closed == 2


def test_np_random_is_lazily_seeded_and_recorded() -> None:
    env = RockPaperScissors()
    assert env.np_random_seed is None
    env.np_random  # noqa: B018 - first access seeds from OS entropy
    assert isinstance(env.np_random_seed, int)
    assert env.spec is None
    assert str(env) == "<RockPaperScissors>"


# ---------------------------------------------------------------- check_multiagent_env


@pytest.mark.parametrize("env_type", [CountGame, RockPaperScissors])
def test_checker_passes_on_the_toy_envs(env_type: type) -> None:
    check_multiagent_env(env_type(), num_episodes=4, seed=11)


@pytest.mark.parametrize(
    ("env_type", "message"),
    [
        (BrokenUnseeded, "two reset\\(seed=...\\) episodes differ"),
        (BrokenForgetfulState, "replay differs"),
        (BrokenAliasingState, "changed a snapshot"),
        (BrokenObservation, "observations must hold str values"),
        (BrokenClose, "close\\(\\) twice"),
    ],
)
def test_checker_fails_on_a_broken_env(env_type: type, message: str) -> None:
    with pytest.raises(MultiAgentCheckError, match=message):
        check_multiagent_env(env_type(), num_episodes=5)


def test_checker_error_is_an_assertion_error() -> None:
    assert issubclass(MultiAgentCheckError, AssertionError)
