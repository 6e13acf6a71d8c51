"""Reward functions (`xpgym.core.rewards`) and `RewardWrapper`."""

from __future__ import annotations

import asyncio
import logging
import pickle
import threading
from typing import Any

import pytest
from toy_envs import ToyEnv

from xpgym.core.env import Env
from xpgym.core.errors import find_infra_cause
from xpgym.core.rewards import (
    AGGREGATES,
    Reward,
    RewardAggregator,
    RewardContext,
    RewardOutput,
    first_well_formed_tool_call,
    parse_reward_output,
    run_awaitables,
    well_formed_tool_call,
)
from xpgym.core.trajectory import Turn
from xpgym.core.wrappers import MaxTurns, RewardWrapper

# ToyEnv(episode_length=4) never matches these actions (its secret is a digit), so every
# episode runs four steps, and each step's value is the action read as a number.
VALUES = ["0.2", "0.7", "0.1", "0.4"]


def value(action: str) -> float:
    return float(action)


def play(env: Env, actions: list[str] = VALUES, seed: int = 0) -> list[tuple[Any, ...]]:
    env.reset(seed=seed)
    return [env.step(a) for a in actions]


def total(steps: list[tuple[Any, ...]]) -> float:
    return sum(step[1] for step in steps)


# ------------------------------------------------------------------ what a reward is given


def test_a_reward_receives_the_fields_it_declares() -> None:
    seen: list[dict[str, Any]] = []

    def spy(action, observation, next_observation, reward, info, turn, turns, final):
        seen.append(dict(locals()))
        return 0.0

    env = RewardWrapper(ToyEnv(episode_length=2), [spy])
    first, _ = env.reset(seed=0)
    env.step("a")
    env.step("b")
    assert [s["action"] for s in seen] == ["a", "b"]
    assert seen[0]["observation"] == first
    assert seen[0]["next_observation"] == "turn=1 last=a"
    assert seen[1]["observation"] == "turn=1 last=a"
    assert seen[0]["reward"] == -0.1
    assert seen[1]["info"]["turn"] == 2
    assert [s["turn"] for s in seen] == [0, 1]
    assert seen[0]["turns"] == ()
    assert [t.action for t in seen[1]["turns"]] == ["a"]
    assert [s["final"] for s in seen] == [False, True]


def test_env_is_given_only_to_a_reward_that_declares_it() -> None:
    seen: dict[str, Any] = {}

    def with_env(action, env):
        seen["env"] = env
        return float(action.strip() == str(env.secret))

    def with_kwargs(**facts):
        seen["kwargs"] = facts
        return 0.0

    inner = ToyEnv(episode_length=1)
    env = RewardWrapper(MaxTurns(inner, 5), [with_env, with_kwargs], env_reward="replace")
    env.reset(seed=3)
    _, reward, *_ = env.step(str(inner.secret))
    assert seen["env"] is inner  # the unwrapped env
    assert reward == 1.0
    assert "env" not in seen["kwargs"]
    assert set(seen["kwargs"]) == {
        "action",
        "observation",
        "next_observation",
        "reward",
        "info",
        "turn",
        "turns",
        "terminated",
        "truncated",
        "final",
    }


def test_a_required_parameter_that_is_no_field_is_refused_when_built() -> None:
    def needs_answer(action, answer):
        return 0.0

    with pytest.raises(TypeError, match="'answer'"):
        Reward(needs_answer)
    Reward(lambda action, answer="x": 0.0)  # a default is fine: it keeps its default


def test_reward_records_name_weight_and_parameters() -> None:
    spec = Reward(value, weight=0.5)
    assert (spec.name, spec.weight, spec.parameters, spec.wants_env) == (
        "value",
        0.5,
        ("action",),
        False,
    )
    assert Reward(value, name="v").name == "v"
    with pytest.raises(TypeError, match="callable"):
        Reward(1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        Reward(value, weight=float("nan"))


def test_reward_call_passes_the_context_fields() -> None:
    context = RewardContext(
        action="0.3",
        observation="o",
        next_observation="n",
        reward=0.0,
        info={},
        turn=0,
        turns=(),
        terminated=True,
        truncated=False,
    )
    assert context.final
    assert Reward(value).call(context) == 0.3


# --------------------------------------------------------------------------- what it returns


def test_parse_reward_output_accepts_a_number_or_a_dict_with_metrics() -> None:
    assert parse_reward_output(1, "r") == RewardOutput(1.0, {})
    assert parse_reward_output({"reward": 0.5, "f1": 0.5, "em": 0}, "r") == RewardOutput(
        0.5, {"f1": 0.5, "em": 0.0}
    )


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ("1", TypeError),
        (None, TypeError),
        (float("inf"), ValueError),
        ({"f1": 1.0}, ValueError),
        ({"reward": 1.0, "f1": "high"}, TypeError),
        ({"reward": 1.0, 3: 1.0}, TypeError),
    ],
)
def test_parse_reward_output_refuses_what_is_not_a_reward(bad: Any, error: type) -> None:
    with pytest.raises(error, match="'r'"):
        parse_reward_output(bad, "r")


def test_dict_metrics_go_to_info_metrics_next_to_the_env_metrics() -> None:
    class MetricsEnv(ToyEnv):
        def step(self, action):
            obs, reward, terminated, truncated, info = super().step(action)
            return obs, reward, terminated, truncated, {**info, "metrics": {"env_m": 2.0}}

    def qa(action):
        return {"reward": float(action), "length": float(len(action))}

    env = RewardWrapper(MetricsEnv(episode_length=4), [qa])
    steps = play(env)
    assert steps[1][4]["metrics"] == {"env_m": 2.0, "qa": 0.2 + 0.7, "qa/length": 3.0}


def test_format_reward_metric_counts_the_shaping_so_far() -> None:
    def tool_info_env() -> Env:
        class ToolInfoEnv(ToyEnv):
            def step(self, action):
                obs, reward, terminated, truncated, info = super().step(action)
                calls = [{"name": "t"}] if action.startswith("call") else None
                info = {**info, "tool_calls": calls, "invalid_action": action == "call-bad"}
                return obs, reward, terminated, truncated, info

        return ToolInfoEnv(episode_length=4)

    env = RewardWrapper(tool_info_env(), env_reward="replace", format_reward=0.1)
    steps = play(env, ["call", "call-bad", "answer", "call"])
    assert [s[1] for s in steps] == [0.1, 0.0, 0.0, 0.1]
    assert [s[4]["metrics"]["format_reward"] for s in steps] == [1.0, 1.0, 1.0, 2.0]

    def bonus(info):
        return 0.5 if info["tool_calls"] else 0.0

    env = RewardWrapper(tool_info_env(), env_reward="replace", format_reward=bonus)
    assert [s[1] for s in play(env, ["call", "answer", "call", "x"])] == [0.5, 0, 0.5, 0]


def test_well_formed_tool_call() -> None:
    assert well_formed_tool_call({"tool_calls": [{"name": "t"}], "invalid_action": False}) == 1
    assert well_formed_tool_call({"tool_calls": [{"name": None}], "invalid_action": True}) == 0
    assert well_formed_tool_call({"tool_calls": 1}) == 1.0
    assert well_formed_tool_call({}) == 0.0


def test_first_well_formed_tool_call_pays_once_per_episode() -> None:
    call = {"tool_calls": [{"name": "t"}], "invalid_action": False}
    bad = {"tool_calls": [{"name": None}], "invalid_action": True}
    earlier_bad = (Turn("o", "a", 0.0, info=bad),)
    assert first_well_formed_tool_call(call, ()) == 1.0
    assert first_well_formed_tool_call(call, earlier_bad) == 1.0
    assert first_well_formed_tool_call(call, (*earlier_bad, Turn("o", "a", 0.1, info=call))) == 0
    assert first_well_formed_tool_call({}, ()) == 0.0


def test_format_reward_on_a_real_tool_wrapper() -> None:
    from xpgym.core.tools.base import Tool, ToolCall, ToolResult
    from xpgym.core.wrappers import ToolEnvWrapper

    class Echo(Tool):
        name = "echo"

        def instructions(self) -> str:
            return "<echo>text</echo>"

        def function_schema(self) -> dict[str, Any]:
            return {"type": "function", "function": {"name": "echo", "parameters": {}}}

        def parse(self, action: str) -> ToolCall | None:
            if "<echo>" not in action:
                return None
            return ToolCall(tool="echo", raw=action, arguments={"text": action[6:]})

        def execute(self, call: ToolCall) -> ToolResult:
            return ToolResult(call.arguments["text"])

    env = RewardWrapper(ToolEnvWrapper(ToyEnv(episode_length=2), [Echo()]), format_reward=0.1)
    env.reset(seed=0)
    assert env.step("<echo>hi")[1] == pytest.approx(0.1)
    assert env.step('<tool_call>{"name": "nope", "arguments": {}}</tool_call>')[1] == 0.0


# -------------------------------------------------------------------------- aggregators


@pytest.mark.parametrize(
    ("aggregate", "rewards", "expected_return"),
    [
        ("sum", [0.2, 0.7, 0.1, 0.4], 1.4),
        ("last", [0.0, 0.0, 0.0, 0.4], 0.4),
        ("max", [0.2, 0.5, 0.0, 0.0], 0.7),
    ],
)
def test_the_return_under_each_aggregator(
    aggregate: str, rewards: list[float], expected_return: float
) -> None:
    env = RewardWrapper(
        ToyEnv(episode_length=4), [value], aggregate=aggregate, env_reward="replace"
    )
    steps = play(env)
    assert [s[1] for s in steps] == pytest.approx(rewards)
    assert total(steps) == pytest.approx(expected_return)
    assert steps[-1][4]["metrics"]["value"] == pytest.approx(expected_return)


def test_max_return_is_the_maximum_even_when_every_value_is_negative() -> None:
    aggregator = RewardAggregator("max")
    rewards = [aggregator.step(v, final=i == 2) for i, v in enumerate([-3.0, -1.0, -2.0])]
    assert rewards == [-3.0, 2.0, 0.0]
    assert sum(rewards) == aggregator.running == -1.0


def test_aggregator_skips_steps_without_a_value_and_refuses_unknown_names() -> None:
    aggregator = RewardAggregator("sum")
    assert aggregator.step(None, final=False) == 0.0
    assert aggregator.running == 0.0
    assert AGGREGATES == ("sum", "last", "max")
    with pytest.raises(ValueError, match="'mean'"):
        RewardAggregator("mean")  # type: ignore[arg-type]


def test_weights_combine_several_rewards_before_aggregating() -> None:
    def double(action):
        return 2 * float(action)

    env = RewardWrapper(
        ToyEnv(episode_length=4),
        [Reward(value, weight=0.5), Reward(double, weight=-1.0)],
        aggregate="max",
        env_reward="replace",
    )
    # combined value per step: 0.5 v - 2 v = -1.5 v; its maximum is at v = 0.1
    assert total(play(env)) == pytest.approx(-0.15)


def test_env_reward_is_added_by_default_and_replaced_on_request() -> None:
    added = total(play(RewardWrapper(ToyEnv(episode_length=4), [value])))
    replaced = total(play(RewardWrapper(ToyEnv(episode_length=4), [value], env_reward="replace")))
    assert added == pytest.approx(1.4 - 0.4)  # four env rewards of -0.1
    assert replaced == pytest.approx(1.4)
    with pytest.raises(ValueError, match="env_reward"):
        RewardWrapper(ToyEnv(), [value], env_reward="keep")  # type: ignore[arg-type]


def test_final_only_runs_rewards_on_the_last_step() -> None:
    calls: list[int] = []

    def outcome(turn, action):
        calls.append(turn)
        return float(action)

    env = RewardWrapper(ToyEnv(episode_length=4), [outcome], final_only=True, env_reward="replace")
    steps = play(env)
    assert calls == [3]
    assert [s[1] for s in steps] == [0.0, 0.0, 0.0, 0.4]
    assert "metrics" not in steps[0][4]


def test_a_limit_inside_the_wrapper_makes_its_truncation_the_final_step() -> None:
    env = RewardWrapper(
        MaxTurns(ToyEnv(episode_length=10), 2), [value], aggregate="last", env_reward="replace"
    )
    steps = play(env, ["0.3", "0.6"])
    assert steps[-1][3] is True
    assert [s[1] for s in steps] == [0.0, 0.6]


def test_reward_names_must_be_distinct() -> None:
    with pytest.raises(ValueError, match="distinct"):
        RewardWrapper(ToyEnv(), [value, value])


# -------------------------------------------------------------------------------- async


def test_async_rewards_are_awaited_from_a_plain_sync_step() -> None:
    async def slow_value(action):
        await asyncio.sleep(0)
        return {"reward": float(action), "awaited": 1.0}

    env = RewardWrapper(ToyEnv(episode_length=4), [slow_value, value], env_reward="replace")
    steps = play(env)
    assert total(steps) == pytest.approx(2 * 1.4)
    assert steps[0][4]["metrics"]["slow_value/awaited"] == 1.0


def test_async_rewards_of_one_step_run_concurrently() -> None:
    both_started = threading.Barrier(2)  # each waits until the other has started

    async def first(action):
        await asyncio.get_running_loop().run_in_executor(None, both_started.wait, 30)
        return 1.0

    async def second(action):
        await asyncio.get_running_loop().run_in_executor(None, both_started.wait, 30)
        return 2.0

    env = RewardWrapper(ToyEnv(episode_length=1), [first, second], env_reward="replace")
    env.reset(seed=0)
    assert env.step("x")[1] == 3.0


def test_a_sync_step_inside_a_running_event_loop_can_use_an_async_reward() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def where(action):
        loops.append(asyncio.get_running_loop())
        return 1.0

    async def main() -> tuple[float, asyncio.AbstractEventLoop]:
        env = RewardWrapper(ToyEnv(episode_length=1), [where], env_reward="replace")
        env.reset(seed=0)
        return env.step("x")[1], asyncio.get_running_loop()

    reward, caller_loop = asyncio.run(main())
    assert reward == 1.0
    assert loops
    assert loops[0] is not caller_loop


def test_the_caller_loop_keeps_running_while_an_async_reward_waits() -> None:
    gate = threading.Event()
    seen: dict[str, bool] = {}

    async def waits_for_the_caller(action):
        await asyncio.get_running_loop().run_in_executor(None, gate.wait, 30)
        seen["caller_ran_meanwhile"] = flag["set_by_caller"]
        return 1.0

    flag = {"set_by_caller": False}

    async def main() -> float:
        env = RewardWrapper(ToyEnv(episode_length=1), [waits_for_the_caller])
        env.reset(seed=0)
        step = asyncio.create_task(asyncio.to_thread(env.step, "x"))
        await asyncio.sleep(0)
        flag["set_by_caller"] = True  # the caller's loop runs while the step is pending
        gate.set()
        return (await step)[1]

    assert asyncio.run(main()) == pytest.approx(1.0 - 0.1)
    assert seen["caller_ran_meanwhile"] is True


def test_run_awaitables_returns_results_and_exceptions_in_order() -> None:
    async def ok() -> int:
        return 1

    async def bad() -> int:
        raise KeyError("k")

    results = run_awaitables([ok(), bad(), ok()])
    assert results[0] == results[2] == 1
    assert isinstance(results[1], KeyError)
    assert run_awaitables([]) == []


# ------------------------------------------------------------------------------ failures


def test_a_reward_that_raises_is_an_infrastructure_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(action):
        raise ZeroDivisionError("grader bug")

    env = RewardWrapper(ToyEnv(episode_length=4), [broken])
    env.reset(seed=0)
    with caplog.at_level(logging.WARNING, logger="xpgym.core.wrappers.rewards"):
        _, reward, _, _, info = env.step("1")
    cause = find_infra_cause(info)
    assert cause is not None
    assert cause.kind == "grader_error"
    assert "'broken'" in cause.message
    assert "ZeroDivisionError" in cause.message
    assert reward == -0.1  # the env's part alone
    assert "metrics" not in info
    assert any("grader bug" in (r.exc_text or "") for r in caplog.records)


def test_an_async_reward_that_raises_or_a_bad_return_is_an_infrastructure_failure() -> None:
    async def broken(action):
        raise RuntimeError("backend down")

    env = RewardWrapper(ToyEnv(episode_length=4), [broken])
    env.reset(seed=0)
    assert "backend down" in find_infra_cause(env.step("1")[4]).message

    env = RewardWrapper(ToyEnv(episode_length=4), [lambda action: "1.0"])
    env.reset(seed=0)
    assert find_infra_cause(env.step("1")[4]).kind == "grader_error"


def test_an_async_reward_past_its_timeout_is_a_grader_timeout() -> None:
    async def never_answers(action):
        await asyncio.Event().wait()  # nothing sets it
        return 1.0

    env = RewardWrapper(ToyEnv(episode_length=4), [Reward(never_answers, timeout_s=0.01)])
    env.reset(seed=0)
    cause = find_infra_cause(env.step("1")[4])
    assert cause is not None
    assert cause.kind == "grader_timeout"
    assert "never_answers" in cause.message
    with pytest.raises(ValueError, match="timeout_s"):
        Reward(value, timeout_s=0)


def test_rewards_do_not_run_on_a_step_that_already_failed() -> None:
    class FailingEnv(ToyEnv):
        def step(self, action):
            obs, _, _, _, info = super().step(action)
            return obs, 0.0, False, True, {**info, "infra_error": {"kind": "remote_error"}}

    calls: list[str] = []
    env = RewardWrapper(FailingEnv(), [lambda action: calls.append(action) or 1.0])
    env.reset(seed=0)
    info = env.step("1")[4]
    assert calls == []
    assert info["infra_error"]["kind"] == "remote_error"


def test_a_failed_episode_is_recorded_as_infra_error() -> None:
    from xpgym.rollout.policies import Generation
    from xpgym.rollout.recorder import EpisodeRecorder

    env = RewardWrapper(ToyEnv(episode_length=4), [lambda action: 1 / 0])
    obs, info = env.reset(seed=0)
    recorder = EpisodeRecorder(env_id="toy", seed=0, group_id=None, reset_info=info)
    step = env.step("1")
    recorder.record(obs, Generation(text="1"), *step[1:], prompt_ids=None)
    assert recorder.done
    assert recorder.episode.outcome == "infra_error"
    assert recorder.episode.infra_error.kind == "grader_error"


# -------------------------------------------------------------------------------- state


def test_state_round_trip_restores_running_max_history_and_sums() -> None:
    env = RewardWrapper(
        ToyEnv(episode_length=4), [value], aggregate="max", env_reward="replace", format_reward=0.1
    )
    env.reset(seed=0)
    env.step("0.7")
    state = pickle.loads(pickle.dumps(env.get_state()))
    rest = [env.step(a) for a in ["0.2", "0.9", "0.1"]]

    twin = RewardWrapper(
        ToyEnv(episode_length=4), [value], aggregate="max", env_reward="replace", format_reward=0.1
    )
    twin.reset(seed=5)
    twin.set_state(state)
    again = [twin.step(a) for a in ["0.2", "0.9", "0.1"]]
    assert [s[1] for s in again] == [s[1] for s in rest] == pytest.approx([0.0, 0.2, 0.0])
    assert again[-1][4]["metrics"] == rest[-1][4]["metrics"]
    assert twin.get_wrapper_state()["turns"][0].action == "0.7"


def test_reset_forgets_the_previous_episode() -> None:
    env = RewardWrapper(ToyEnv(episode_length=4), [value], aggregate="max", env_reward="replace")
    play(env, ["0.9", "0.1", "0.1", "0.1"])
    assert total(play(env, ["0.2", "0.1", "0.1", "0.1"])) == pytest.approx(0.2)
