"""The toolgym template (xpgym.envs.toolgym.base) and every toolgym env.

Template tests use a small `CounterEnv` defined here; the family tests (oracle, check_env,
fuzz, task strings) run over every registered toolgym env, so a new env is covered as soon
as it is registered. Per-env tool tests live in the env's own section at the end.
"""

from __future__ import annotations

import json
import pickle
import time
from typing import Any, ClassVar

import numpy as np
import pytest

import xpgym
from xpgym.core.checks import check_env
from xpgym.core.tools.decorator import ToolError, tool
from xpgym.envs.toolgym import ENVS, env_class, from_task_string, toolgym_ids
from xpgym.envs.toolgym.base import (
    ToolGymEnv,
    canonical_answer,
    check_int_list,
    draw_length,
    item_at,
)
from xpgym.envs.toolgym.closest_to_k import ClosestToKEnv
from xpgym.envs.toolgym.formats import parse_task_string, parse_tool_call


class CounterEnv(ToolGymEnv):
    """Test env: add numbers to a hidden counter; the answer is target - start."""

    name: ClassVar[str] = "Counter"
    answer_type: ClassVar[Any] = int

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        return {"start": int(rng.integers(0, 10)), "target": 20}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(config["start"], int):
            raise ValueError("'start' must be an int")
        return {"count": config["start"], "log": []}

    def visible(self) -> dict[str, Any]:
        return {"target": self.config["target"]}

    def statement(self) -> str:
        return "Find how much the hidden counter must grow to reach the target."

    def reference_answer(self) -> int:
        return self.config["target"] - self.config["start"]

    @tool
    def add(self, amount: int) -> str:
        """Add to the counter.

        Args:
            amount: How much to add.
        """
        self.state["count"] += amount
        self.state["log"].append(amount)
        return json.dumps(self.state["count"])

    @tool
    def add_then_fail(self, amount: int) -> str:
        """Add, then raise.

        Args:
            amount: How much to add.
        """
        self.state["count"] += amount
        self.state["log"].append(amount)
        raise ToolError("refused after adding")

    @tool(name="AddSlowly")
    def add_slowly(self, amount: int, seconds: float) -> str:
        """Add, then sleep.

        Args:
            amount: How much to add.
            seconds: How long to sleep after adding.
        """
        self.state["count"] += amount
        self.state["log"].append(amount)
        time.sleep(seconds)
        return json.dumps(self.state["count"])

    @tool
    def spin(self) -> str:
        """Count up until the call's deadline stops it."""
        while True:
            self.state["count"] += 1
            self.check_deadline()
            time.sleep(0.001)

    @tool
    def interrupt(self) -> str:
        """Add one, then raise KeyboardInterrupt."""
        self.state["count"] += 1
        raise KeyboardInterrupt

    @tool
    def bad_return(self) -> str:
        """Return a non-string (an env bug)."""
        return 5  # type: ignore[return-value]

    def oracle(self) -> None:
        target = json.loads(self.call("Observe"))["target"]
        count = int(self.call("Add", amount=0))
        self.call("Done", answer=target - count)


def call(name: str, **parameters: Any) -> str:
    return json.dumps({"name": name, "parameters": parameters})


def counter(**kwargs: Any) -> CounterEnv:
    env = CounterEnv(config={"start": 3, "target": 20}, **kwargs)
    env.reset(seed=0)
    return env


# ----- template: tools, schemas, prompt ---------------------------------------------------


def test_tools_are_collected_in_order_with_schemas_from_signatures():
    assert list(CounterEnv.tools) == [
        "Observe",
        "Add",
        "AddThenFail",
        "AddSlowly",
        "Spin",
        "Interrupt",
        "BadReturn",
        "Done",
    ]
    add = CounterEnv.tools["Add"]["function"]
    assert add["description"] == "Add to the counter."
    assert add["parameters"]["properties"]["amount"] == {
        "type": "integer",
        "description": "How much to add.",
    }
    assert add["parameters"]["required"] == ["amount"]
    done = CounterEnv.tools["Done"]["function"]["parameters"]
    assert done["properties"]["answer"]["type"] == "integer"
    assert done["required"] == ["answer"]


def test_a_tool_method_called_directly_runs_on_the_env():
    env = counter()
    assert env.add(2) == "5"
    assert env.state == {"count": 5, "log": [2]}


async def _wait(self: Any) -> str:
    """Wait."""
    return ""


def _echo(self: Any, text: str) -> str:
    """Echo.

    Args:
        text: Anything.
    """
    return text


def _read_env(self: Any, env: Any) -> str:
    """Read the env."""
    return ""


@pytest.mark.parametrize(
    ("declare", "refused"),
    [
        (lambda: tool(_wait), "an async method"),
        (lambda: tool(tag="echo")(_echo), "tag="),
        (lambda: tool(env=CounterEnv)(_read_env), "env="),
    ],
)
def test_a_tool_declared_with_what_toolgym_cannot_honour_is_refused(declare, refused):
    with pytest.raises(TypeError, match=f"Bad.extra: .*not {refused}"):
        type("Bad", (CounterEnv,), {"extra": declare()})


def test_reset_prompt_lists_tools_and_info_holds_schemas():
    env = CounterEnv(config={"start": 3, "target": 20}, max_tool_calls=7)
    obs, info = env.reset(seed=0)
    assert obs.startswith("Find how much the hidden counter")
    assert "Add(amount: int) -> str" in obs
    assert "AddSlowly(amount: int, seconds: float) -> str" in obs
    assert "at most 7 tool calls" in obs
    assert "3" not in obs.split("Tools:")[0]  # the hidden start is not shown
    assert info["tools"] == list(CounterEnv.tools.values())
    assert info["task"] == 'Counter@{"start":3,"target":20}'
    assert info["max_tool_calls"] == 7


# ----- template: action formats ---------------------------------------------------------------

FORMATS = [
    '{"name": "Add", "parameters": {"amount": 2}}',
    'I will add two. {"name": "Add", "parameters": {"amount": 2}} then look.',
    '[{"name": "Add", "parameters": {"amount": 2}}]',
    '<|FunctionCallBegin|>[{"name": "Add", "parameters": {"amount": 2}}]<|FunctionCallEnd|>',
    '<tool_call>\n{"name": "Add", "arguments": {"amount": 2}}\n</tool_call>',
    '<tool_call>{"name": "Add", "parameters": {"amount": 2}}</tool_call>',
]


@pytest.mark.parametrize("action", FORMATS)
def test_every_call_format_runs_the_tool(action):
    env = counter()
    obs, reward, terminated, truncated, info = env.step(action)
    assert (obs, reward, terminated, truncated) == ("5", 0.0, False, False)
    assert info["tool"] == "Add"
    assert info["output"] == "5"
    assert not info["invalid_action"]
    assert env.state["count"] == 5


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("no call here", "no tool call found"),
        ('{"name": "Add", "parameters": {"amount": 2}', "invalid JSON"),
        ('[{"name": "Add", "parameters": {}}, {"name": "Observe"}]', "one call per turn"),
        ("[]", "one call per turn"),
        ('{"name": "Fly", "parameters": {}}', "unknown tool 'Fly'"),
        ('{"name": "Add", "parameters": {}}', "missing required argument 'amount'"),
        ('{"name": "Add", "parameters": {"amount": "two"}}', "expected integer"),
        ('{"name": "Add", "parameters": {"amount": 1, "extra": 2}}', "extra"),
        ('{"parameters": {}}', 'missing "name"'),
        ('{"name": "Add", "parameters": [1]}', "must be a JSON object"),
        ("<tool_call>not json</tool_call>", "invalid JSON"),
        ('{"name": "Done", "parameters": {"answer": "17"}}', "expected integer"),
    ],
)
def test_invalid_calls_are_errors_that_change_nothing_but_count(action, message):
    env = counter()
    before = env.get_state()
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs.startswith("Error: ")
    assert message in obs
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["invalid_action"]
    assert info["tool"] is None
    assert info["output"] is None
    assert env.state == before["state"]
    assert env.tool_calls == 1


def test_parse_tool_call_reads_the_first_call_of_tool_call_blocks():
    parsed = parse_tool_call(
        '<tool_call>{"name": "A", "arguments": {"x": 1}}</tool_call>'
        '<tool_call>{"name": "B", "arguments": {}}</tool_call>'
    )
    assert (parsed.name, parsed.arguments, parsed.error) == ("A", {"x": 1}, None)


def test_helpers_for_env_authors():
    assert item_at([4, 5], 1) == "5"
    assert item_at("ab", 0) == '"a"'
    with pytest.raises(ToolError, match=r"position -1 is out of range 0\.\.1"):
        item_at([4, 5], -1, what="position")
    check_int_list([0, 3], "xs", minimum=0)
    for bad, message in [
        ([], r"list of 1\.\.100000 ints"),
        ([1, True], "only ints"),
        ([1, -2], "ints >= 0"),
        ("12", "list of"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_int_list(bad, "xs", minimum=0)
    rng = np.random.default_rng(0)
    assert {draw_length(rng, (2, 4)) for _ in range(200)} == {2, 3, 4}


# ----- template: Done, cap --------------------------------------------------------------------


def test_done_with_the_right_answer_wins_and_terminates():
    env = counter()
    obs, reward, terminated, truncated, info = env.step(call("Done", answer=17))
    assert (obs, reward, terminated, truncated) == ("Correct.", 1.0, True, False)
    assert info["correct"] is True
    assert info["reference_answer"] == 17


def test_done_with_a_wrong_answer_terminates_with_zero():
    env = counter()
    obs, reward, terminated, truncated, info = env.step(call("Done", answer=16))
    assert (obs, reward, terminated, truncated, info["correct"]) == (
        "Incorrect.",
        0.0,
        True,
        False,
        False,
    )
    with pytest.raises(xpgym.EpisodeFinishedError):
        env.step(call("Observe"))


def test_canonical_answer_equates_integral_floats_and_tuples():
    assert canonical_answer([1.0, (2, 3.5)]) == [1, [2, 3.5]]
    assert canonical_answer("1") == "1"


def test_tool_call_cap_truncates_with_the_reason():
    env = counter(max_tool_calls=3)
    for _ in range(2):
        assert env.step(call("Observe"))[3] is False
    obs, reward, terminated, truncated, info = env.step("junk")
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert info["truncated_reason"] == "max_tool_calls"
    assert "No tool calls left" in obs


def test_done_on_the_last_allowed_call_terminates_without_truncation():
    env = counter(max_tool_calls=1)
    _, reward, terminated, truncated, info = env.step(call("Done", answer=17))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert "truncated_reason" not in info


# ----- template: transactions -----------------------------------------------------------------


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_a_tool_that_raises_is_rolled_back(isolation):
    env = counter(isolation=isolation)
    env.step(call("Add", amount=1))
    before = env.get_state()["state"]
    obs, reward, terminated, truncated, info = env.step(call("AddThenFail", amount=100))
    assert obs == "Error: AddThenFail failed: refused after adding"
    assert info["tool_error"] == "AddThenFail failed: refused after adding"
    assert env.state == before == {"count": 4, "log": [1]}
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert env.step(call("Add", amount=1))[0] == "5"


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_a_successful_call_commits_its_state(isolation):
    env = counter(isolation=isolation, tool_timeout=60.0)
    assert env.step(call("AddSlowly", amount=2, seconds=0.0))[0] == "5"
    assert env.state == {"count": 5, "log": [2]}


def test_inline_call_past_its_time_limit_is_rolled_back():
    env = counter(tool_timeout=0.01)
    obs, _, _, _, info = env.step(call("AddSlowly", amount=9, seconds=0.1))
    assert "exceeded its time limit of 0.01 s" in obs
    assert info["tool_error"] is not None
    assert info["output"] is None
    assert env.state == {"count": 3, "log": []}


def test_process_call_past_its_time_limit_is_killed_and_rolled_back():
    env = counter(isolation="process", tool_timeout=0.5)
    obs, *_ = env.step(call("AddSlowly", amount=9, seconds=300.0))
    assert "exceeded its time limit of 0.5 s" in obs
    assert env.state == {"count": 3, "log": []}
    assert env.step(call("Add", amount=1))[0] == "4"


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_check_deadline_stops_a_cooperative_tool_and_rolls_it_back(isolation):
    env = counter(isolation=isolation, tool_timeout=0.05)
    obs, _, _, _, info = env.step(call("Spin"))
    assert obs == "Error: Spin exceeded its time limit of 0.05 s"
    assert info["tool_error"] == "Spin exceeded its time limit of 0.05 s"
    assert env.state == {"count": 3, "log": []}
    env.check_deadline()  # outside a call: nothing to stop


def test_check_deadline_without_a_time_limit_does_nothing():
    env = counter()
    env.check_deadline()
    assert env.step(call("Add", amount=1))[0] == "4"


def test_an_interrupt_inside_a_tool_is_rolled_back_then_propagated():
    env = counter()
    with pytest.raises(KeyboardInterrupt):
        env.step(call("Interrupt"))
    assert env.state == {"count": 3, "log": []}


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_a_tool_returning_a_non_string_is_an_env_bug(isolation):
    env = counter(isolation=isolation)
    with pytest.raises(TypeError, match="must return a str"):
        env.step(call("BadReturn"))


def test_bad_constructor_arguments_are_refused():
    with pytest.raises(ValueError, match="isolation"):
        CounterEnv(isolation="thread")
    with pytest.raises(ValueError, match="max_tool_calls"):
        CounterEnv(max_tool_calls=0)
    with pytest.raises(ValueError, match="difficulty"):
        CounterEnv(difficulty="extreme")
    with pytest.raises(ValueError, match="tool_timeout"):
        CounterEnv(tool_timeout=0)


# ----- template: task strings and state -----------------------------------------------------


def test_task_strings_round_trip_through_reset_options():
    env = ClosestToKEnv()
    env.reset(seed=4)
    task = env.task_string()
    other = ClosestToKEnv()
    other.reset(options={"task": task})
    assert other.config == env.config
    assert other.task_string() == task
    fixed = from_task_string(task)
    assert isinstance(fixed, ClosestToKEnv)
    fixed.reset(seed=99)
    assert fixed.config == env.config
    other.reset(options={"config": {"numbers": [1, 5], "k": 4}})
    assert other.reference_answer() == 5


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ("ClosestToK", "has no '@'"),
        ("@{}", "is not an env name"),
        ("ClosestToK@{not json", "not valid JSON"),
        ("ClosestToK@[1, 2]", "must be a JSON object"),
        ('ClosestToK@{"k": 3}', "bad task config: KeyError"),
        ('ClosestToK@{"numbers": [3, 1], "k": 3}', "sorted ascending"),
        ('ClosestToK@{"numbers": [], "k": 3}', "list of 1..100000 ints"),
        ('ClosestToK@{"numbers": [1.5], "k": 3}', "must hold only ints"),
    ],
)
def test_invalid_task_strings_raise_value_errors_naming_the_problem(task, message):
    with pytest.raises(ValueError, match=message):
        ClosestToKEnv().reset(options={"task": task})


def test_task_string_of_another_env_or_unknown_name_is_refused():
    with pytest.raises(ValueError, match="plays 'ClosestToK' tasks"):
        ClosestToKEnv().reset(options={"task": 'Counter@{"start": 1, "target": 2}'})
    with pytest.raises(ValueError, match="unknown toolgym env 'Nope'"):
        from_task_string("Nope@{}")
    assert parse_task_string(' A@{"x": [1]}') == ("A", {"x": [1]})


def test_state_round_trip_restores_config_state_counters_and_rng():
    env = counter()
    env.step(call("Add", amount=2))
    snapshot = env.get_state()
    pickle.dumps(snapshot)
    env.step(call("Add", amount=5))
    env.set_state(snapshot)
    assert env.state == {"count": 5, "log": [2]}
    assert env.tool_calls == 1
    other = CounterEnv()
    other.set_state(snapshot)
    assert other.step(call("Add", amount=1))[0] == env.step(call("Add", amount=1))[0] == "6"


# ----- the family: every registered env -------------------------------------------------------

SEEDS = range(12)


@pytest.mark.parametrize("name", sorted(ENVS))
@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_oracle_wins_on_many_seeds_and_its_trajectory_replays(name, difficulty):
    cls = env_class(name)
    for seed in SEEDS:
        env = cls(difficulty=difficulty)
        env.reset(seed=seed)
        actions = env.solve()
        assert len({json.loads(a)["name"] for a in actions}) >= 4, (name, seed)
        env.reset(seed=seed)
        for action in actions[:-1]:
            _, reward, terminated, truncated, info = env.step(action)
            assert (reward, terminated, truncated, info["invalid_action"]) == (
                0.0,
                False,
                False,
                False,
            )
        _, reward, terminated, _, info = env.step(actions[-1])
        assert (reward, terminated, info["correct"]) == (1.0, True, True), (name, seed)


@pytest.mark.parametrize("env_id", toolgym_ids())
def test_check_env_passes_for_every_toolgym_id(env_id):
    check_env(xpgym.make(env_id), num_episodes=2, max_steps=30)


@pytest.mark.parametrize("env_id", toolgym_ids())
def test_configs_are_a_function_of_the_seed(env_id):
    first, second = xpgym.make(env_id), xpgym.make(env_id)
    assert first.reset(seed=3)[1]["task"] == second.reset(seed=3)[1]["task"]


HOSTILE = [
    "",
    " ",
    "[" * 50_000,
    "{" * 50_000,
    '{"name": ' * 5_000,
    "<tool_call>",
    "<tool_call></tool_call>",
    "<tool_call>[1, 2]</tool_call>",
    "<|FunctionCallBegin|>",
    '{"name": "Observe", "parameters": null}',
    '{"name": "Done", "parameters": {"answer": NaN}}',
    '{"name": "Done", "parameters": {"answer": 1e999}}',
    '{"name": "LookUp", "parameters": {"index": 100000000000000000000000000000}}',
    '{"name": "LookUp", "parameters": {"index": true}}',
    '{"name": "LookUp", "parameters": {"index": -1}}',
    '{"name": "__init__", "parameters": {}}',
    '{"name": "_transaction", "parameters": {}}',
    '{"name": "reset", "parameters": {}}',
    "\x00\ud800 \u202e",
    '{"name": "Observe"}' * 1000,
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_texts_are_invalid_calls_or_tool_errors(text):
    env = ClosestToKEnv(difficulty="easy")
    env.reset(seed=1)
    before = env.get_state()
    obs, reward, terminated, truncated, info = env.step(text)
    assert isinstance(obs, str)
    if info["tool"] == "Observe":
        assert not info["invalid_action"]
    else:
        assert info["invalid_action"] or info["tool_error"] is not None
        assert obs.startswith("Error: ")
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert env.get_state()["state"] == before["state"]


JUNK = ["", "Done", '{"name": "Done"}', '[{"name": "Observe"}, {}]', "<tool_call>{", "{{}}"]


@pytest.mark.parametrize("env_id", toolgym_ids())
def test_fuzz_random_calls_and_junk_keep_the_invariants(env_id):
    """Many seeds of random tool calls mixed with junk; check every step's invariants."""
    for seed in range(8):
        env = xpgym.make(env_id, max_tool_calls=40)
        rng = np.random.default_rng(seed)
        _, info = env.reset(seed=seed)
        task = info["task"]
        calls = 0
        while True:
            if rng.random() < 0.2:
                action = JUNK[int(rng.integers(len(JUNK)))]
            else:
                action = env.sample_random_action()
            before = env.get_state()
            obs, reward, terminated, truncated, info = env.step(action)
            calls += 1
            assert isinstance(obs, str)
            assert obs
            assert info["tool_calls"] == calls <= 40
            assert not (terminated and truncated)
            assert reward == (1.0 if terminated and info["correct"] else 0.0)
            assert terminated == (info["tool"] == "Done")
            assert env.unwrapped.task_string() == task
            if info["invalid_action"] or info["tool_error"] is not None:
                assert env.get_state()["state"] == before["state"]
                assert obs.startswith("Error: ")
                assert info["output"] is None
            else:
                assert isinstance(info["output"], str)
            if truncated:
                assert calls == 40
                assert info["truncated_reason"] == "max_tool_calls"
            if terminated or truncated:
                break


# ----- ClosestToK ------------------------------------------------------------------------------


def closest(numbers: list[int], k: int) -> ClosestToKEnv:
    env = ClosestToKEnv(config={"numbers": numbers, "k": k})
    env.reset(seed=0)
    return env


def test_closest_to_k_tools():
    env = closest([-3, 1, 4, 4, 9], 6)
    assert json.loads(env.step(call("Observe"))[0]) == {"length": 5, "k": 6}
    assert env.step(call("LookUp", index=0))[0] == "-3"
    assert env.step(call("LookUp", index=4))[0] == "9"
    obs = env.step(call("LookUp", index=5))[0]
    assert obs == "Error: LookUp failed: index 5 is out of range 0..4"
    assert env.step(call("LookUp", index=-1))[4]["tool_error"] is not None
    assert env.step(call("Distance", a=4, b=9))[0] == "5"
    assert env.step(call("Distance", a=9, b=-4))[0] == "13"


@pytest.mark.parametrize(
    ("numbers", "k", "answer"),
    [
        ([-3, 1, 4, 4, 9], 6, 4),
        ([1, 3], 2, 1),  # tie: the smaller
        ([1, 3], 100, 3),
        ([1, 3], -100, 1),
        ([7], 7, 7),
        ([2, 2, 2], 0, 2),
    ],
)
def test_closest_to_k_reference_answer(numbers, k, answer):
    env = closest(numbers, k)
    assert env.reference_answer() == answer
    actions = env.solve()
    assert json.loads(actions[-1])["parameters"]["answer"] == answer


def test_closest_to_k_reference_matches_brute_force_on_random_configs():
    rng = np.random.default_rng(0)
    for _ in range(200):
        config = ClosestToKEnv.generate_config(rng, "easy")
        env = closest(config["numbers"], config["k"])
        k = config["k"]
        assert env.reference_answer() == min(config["numbers"], key=lambda x: (abs(x - k), x))


def test_closest_to_k_sizes_follow_the_difficulty():
    rng = np.random.default_rng(1)
    for difficulty, (low, high) in {"easy": (64, 128), "hard": (10_000, 50_000)}.items():
        config = ClosestToKEnv.generate_config(rng, difficulty)
        assert low <= len(config["numbers"]) <= high
