"""Specification of `ToolEnvWrapper` and of registered tool variants (`register_tool_variant`)."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toy_envs import ToyEnv

import xpgym
from xpgym.core import registry
from xpgym.core.checks import check_env
from xpgym.core.env import EpisodeFinishedError
from xpgym.core.tools import Tool, ToolCall, ToolResult
from xpgym.core.tools.calls import function_schema, parse_call
from xpgym.core.wrappers import ChatMessages, EpisodeStatistics, MaxTurns
from xpgym.core.wrappers.tool_variants import make_tool_env, register_tool_variant, tool_variant_id
from xpgym.core.wrappers.tools import ToolEnvWrapper

# ---------------------------------------------------------------------------- fake tools


class EchoTool(Tool):
    """``<echo>text</echo>`` or a JSON call; answers ``"echo: <text>"``."""

    name = "echo"
    parameters: dict[str, Any] = {  # noqa: RUF012
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    def __init__(self) -> None:
        self.executed: list[ToolCall] = []
        self.closed = 0

    def instructions(self) -> str:
        return "Echo text back with <echo>text</echo>."

    def function_schema(self) -> dict[str, Any]:
        return function_schema(self.name, "Echo text back.", self.parameters)

    def parse(self, action: str) -> ToolCall | None:
        return parse_call(
            action, self.name, parameters=self.parameters, tag="echo", tag_argument="text"
        )

    def execute(self, call: ToolCall) -> ToolResult:
        self.executed.append(call)
        return ToolResult(f"echo: {call.arguments['text']}", info={"chars": 4})

    def close(self) -> None:
        self.closed += 1


class FailingPythonTool(Tool):
    """A python-like tool whose code always fails (like a script that raises)."""

    name = "python"
    parameters: dict[str, Any] = {  # noqa: RUF012
        "type": "object",
        "properties": {"code": {"type": "string"}},
        "required": ["code"],
    }

    def instructions(self) -> str:
        return "Run Python with <python>code</python>."

    def function_schema(self) -> dict[str, Any]:
        return function_schema(self.name, "Run Python.", self.parameters)

    def parse(self, action: str) -> ToolCall | None:
        return parse_call(
            action,
            self.name,
            parameters=self.parameters,
            tag="python",
            tag_argument="code",
            fence_languages=("python",),
        )

    def execute(self, call: ToolCall) -> ToolResult:
        return ToolResult(
            "Traceback (most recent call last):\nZeroDivisionError: division by zero",
            ok=False,
            info={"exit_reason": "error"},
        )


class SearchTool(Tool):
    """``<search>query</search>``; answers with a fixed document."""

    name = "search"

    def instructions(self) -> str:
        return "Search with <search>query</search>."

    def function_schema(self) -> dict[str, Any]:
        return function_schema(
            self.name,
            "Search.",
            {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        )

    def parse(self, action: str) -> ToolCall | None:
        return parse_call(action, self.name, tag="search", tag_argument="query")

    def execute(self, call: ToolCall) -> ToolResult:
        return ToolResult(f"Doc 1: about {call.arguments['query']}")


class AddTool(Tool):
    """JSON calls only: ``{"name": "add", "arguments": {"a": int, "b": int}}``."""

    name = "add"
    parameters: dict[str, Any] = {  # noqa: RUF012
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }

    def __init__(self) -> None:
        self.executed = 0

    def instructions(self) -> str:
        return 'Add with <tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>.'

    def function_schema(self) -> dict[str, Any]:
        return function_schema(self.name, "Add two integers.", self.parameters)

    def parse(self, action: str) -> ToolCall | None:
        return parse_call(action, self.name, parameters=self.parameters)

    def execute(self, call: ToolCall) -> ToolResult:
        self.executed += 1
        return ToolResult(str(call.arguments["a"] + call.arguments["b"]))


class RaisingTool(EchoTool):
    """``<buggy>text</buggy>``; its `execute` has a bug and raises."""

    name = "buggy"

    def parse(self, action: str) -> ToolCall | None:
        return parse_call(action, self.name, tag="buggy", tag_argument="text")

    def execute(self, call: ToolCall) -> ToolResult:
        raise RuntimeError("tool bug")


class ClaimsEverythingTool(EchoTool):
    """A tag-less tool that claims any action containing ``!`` (raw = the whole action)."""

    name = "bang"

    def parse(self, action: str) -> ToolCall | None:
        return ToolCall(self.name, {"text": action}, action) if "!" in action else None


def echo_tools() -> list[Tool]:
    """A module-level tools factory for the variant tests."""
    return [EchoTool(), AddTool()]


def names_not_tools() -> list[str]:
    return ["echo"]


def single_echo_tool(prefix: str = "") -> Tool:
    tool = EchoTool()
    tool.description = prefix
    return tool


def wrap(env=None, tools=None, **kwargs) -> ToolEnvWrapper:
    env = ToyEnv(episode_length=3) if env is None else env
    tools = [EchoTool(), AddTool()] if tools is None else tools
    wrapped = ToolEnvWrapper(env, tools, **kwargs)
    wrapped.reset(seed=0)
    return wrapped


def add_call(a: Any, b: Any) -> str:
    return f"<tool_call>{json.dumps({'name': 'add', 'arguments': {'a': a, 'b': b}})}</tool_call>"


# ------------------------------------------------------------------------------- reset


def test_reset_appends_tool_instructions_to_the_observation():
    env = ToolEnvWrapper(ToyEnv(), [EchoTool()], max_tool_calls=2)
    obs, info = env.reset(seed=0)
    assert obs.startswith("start parity=")
    assert "Echo text back with <echo>text</echo>." in obs
    assert "at most 2 tool calls" in obs
    assert info["tool_instructions"] in obs


def test_reset_info_holds_the_function_schemas():
    env = ToolEnvWrapper(ToyEnv(), [EchoTool(), AddTool()])
    _, info = env.reset(seed=0)
    assert [schema["function"]["name"] for schema in info["tools"]] == ["echo", "add"]
    assert info["tools"][1] == AddTool().function_schema()


def test_reset_keeps_the_env_info():
    _, info = ToolEnvWrapper(ToyEnv(), [EchoTool()]).reset(seed=0)
    assert "secret_parity" in info


def test_instructions_false_leaves_the_observation_unchanged():
    obs, info = ToolEnvWrapper(ToyEnv(), [EchoTool()], instructions=False).reset(seed=0)
    assert obs == ToyEnv().reset(seed=0)[0]
    assert info["tool_instructions"] == ""


def test_instructions_string_is_appended_verbatim():
    obs, _ = ToolEnvWrapper(ToyEnv(), [EchoTool()], instructions="Use tools.").reset(seed=0)
    assert obs.endswith("\n\nUse tools.")


# ------------------------------------------------------------------------------ dispatch


def test_action_without_tool_call_steps_the_task():
    env = wrap()
    obs, _, _, _, info = env.step("7")
    assert obs == "turn=1 last=7"
    assert env.unwrapped.turn == 1
    assert "tool_calls" not in info


def test_tool_turn_returns_the_tool_output_without_stepping_the_task():
    env = wrap()
    obs, reward, terminated, truncated, _ = env.step("I will check <echo>hi</echo>")
    assert (obs, reward, terminated, truncated) == ("echo: hi", 0.0, False, False)
    assert env.unwrapped.turn == 0


def test_tool_turn_info_lists_the_call_and_its_text():
    env = wrap()
    _, _, _, _, info = env.step("I will check <echo>hi</echo> and then answer")
    assert info["tool_calls"] == [
        {"name": "echo", "arguments": {"text": "hi"}, "ok": True, "info": {"chars": 4}}
    ]
    assert info["parsed_action"] == "<echo>hi</echo>"
    assert info["invalid_action"] is False


def test_json_call_is_executed_by_the_tool_it_names():
    env = wrap()
    obs, *_ = env.step(add_call(2, 3))
    assert obs == "5"


def test_failing_tool_returns_its_error_as_the_observation():
    env = wrap(tools=[FailingPythonTool()])
    obs, _, terminated, _, info = env.step("<python>1/0</python>")
    assert "ZeroDivisionError" in obs
    assert not terminated
    assert info["tool_calls"][0]["ok"] is False
    assert info["tool_calls"][0]["info"] == {"exit_reason": "error"}


def test_failed_call_with_a_second_non_matching_tool_never_reaches_the_task():
    # GEM's bug: a python call that errors, followed by a search tool that does not match,
    # was handed to the task as a final answer.
    env = wrap(tools=[FailingPythonTool(), SearchTool()])
    obs, _, terminated, truncated, info = env.step("<python>1/0</python> \\boxed{3}")
    assert "ZeroDivisionError" in obs
    assert (terminated, truncated) == (False, False)
    assert env.unwrapped.turn == 0
    assert info["tool_calls"][0]["name"] == "python"


def test_tool_that_raises_counts_as_a_failed_call_with_its_error_as_observation():
    env = wrap(tools=[RaisingTool()])
    obs, _, terminated, _, info = env.step("<buggy>x</buggy>")
    assert obs == "Tool 'buggy' failed: RuntimeError: tool bug"
    assert not terminated
    assert info["tool_calls"][0]["ok"] is False
    assert info["tool_calls"][0]["info"] == {
        "exception": "RuntimeError",
        "infra_error": {"kind": "tool_backend_error", "message": "RuntimeError: tool bug"},
    }
    assert env.unwrapped.turn == 0


def test_earliest_call_in_the_text_wins_across_tools():
    env = wrap(tools=[FailingPythonTool(), SearchTool()])
    obs, _, _, _, info = env.step("<search>paris</search> then <python>1/0</python>")
    assert obs == "Doc 1: about paris"
    assert info["parsed_action"] == "<search>paris</search>"


def test_tool_listed_first_wins_a_tie_at_the_same_position():
    env = wrap(tools=[ClaimsEverythingTool(), EchoTool()])
    _, _, _, _, info = env.step("<echo>x</echo>!")
    assert info["tool_calls"][0]["name"] == "bang"


def test_only_the_first_of_several_calls_is_executed():
    echo = EchoTool()
    env = wrap(tools=[echo])
    env.step("<echo>a</echo><echo>b</echo>")
    assert [call.arguments["text"] for call in echo.executed] == ["a"]


# ------------------------------------------------------------------------ invalid calls


def test_malformed_json_tool_call_is_an_invalid_tool_turn():
    env = wrap()
    obs, _, terminated, _, info = env.step('<tool_call>{"name": "add", "arguments": </tool_call>')
    assert obs.startswith("Invalid tool call: invalid JSON in <tool_call> block")
    assert "Available tools: echo, add." in obs
    assert info["invalid_action"] is True
    assert info["tool_calls"][0]["name"] is None
    assert not terminated
    assert env.unwrapped.turn == 0


def test_tool_call_without_name_is_an_invalid_tool_turn():
    env = wrap()
    obs, _, _, _, info = env.step('<tool_call>{"arguments": {}}</tool_call>')
    assert '"name"' in obs
    assert info["invalid_action"] is True


def test_unknown_tool_name_lists_the_available_tools():
    env = wrap()
    obs, _, _, _, info = env.step('<tool_call>{"name": "web", "arguments": {}}</tool_call>')
    assert obs == "Unknown tool 'web'. Available tools: echo, add."
    assert info["invalid_action"] is True
    assert info["tool_calls"][0]["name"] == "web"
    assert env.unwrapped.turn == 0


def test_unknown_tool_call_before_a_valid_call_wins():
    env = wrap()
    action = '<tool_call>{"name": "web"}</tool_call> <echo>hi</echo>'
    obs, *_ = env.step(action)
    assert obs.startswith("Unknown tool 'web'")


def test_valid_call_before_an_unknown_tool_call_wins():
    env = wrap()
    obs, *_ = env.step('<echo>hi</echo> <tool_call>{"name": "web"}</tool_call>')
    assert obs == "echo: hi"


def test_json_call_to_a_tag_only_tool_is_invalid():
    env = wrap(tools=[ClaimsEverythingTool()])
    obs, _, _, _, info = env.step('<tool_call>{"name": "bang"}</tool_call>')
    assert obs.startswith("Tool 'bang' does not take <tool_call> calls")
    assert info["invalid_action"] is True


def test_bad_argument_types_are_reported_without_executing():
    add = AddTool()
    env = wrap(tools=[add])
    obs, _, _, _, info = env.step(add_call("two", 3))
    assert obs == "Invalid call of tool 'add': argument 'a': expected integer, got string \"two\""
    assert info["invalid_action"] is True
    assert info["tool_calls"][0]["ok"] is False
    assert add.executed == 0


def test_missing_required_argument_is_reported():
    env = wrap()
    obs, *_ = env.step('<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>')
    assert obs == "Invalid call of tool 'add': missing required argument 'b'"


# ------------------------------------------------------------------------------ rewards


REWARDS = {"tool_call_reward": 0.1, "tool_success_reward": 0.5, "tool_error_reward": -0.2}


def test_successful_call_earns_call_and_success_rewards():
    _, reward, *_ = wrap(**REWARDS).step("<echo>x</echo>")
    assert reward == pytest.approx(0.6)


def test_failed_call_earns_call_and_error_rewards():
    _, reward, *_ = wrap(tools=[FailingPythonTool()], **REWARDS).step("<python>1/0</python>")
    assert reward == pytest.approx(-0.1)


def test_invalid_call_earns_only_the_error_reward():
    _, reward, *_ = wrap(**REWARDS).step(add_call("x", 1))
    assert reward == pytest.approx(-0.2)


def test_task_turn_reward_is_the_envs():
    _, reward, *_ = wrap(**REWARDS).step("nope")
    assert reward == pytest.approx(-0.1)


# ------------------------------------------------------------------------------- budget


def test_max_tool_calls_truncates_on_the_next_tool_call():
    env = wrap(max_tool_calls=2)
    env.step("<echo>1</echo>")
    env.step("<echo>2</echo>")
    obs, reward, terminated, truncated, info = env.step("<echo>3</echo>")
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert info["truncated_reason"] == "max_tool_calls"
    assert obs.startswith("Tool call limit reached")
    assert "tool_calls" not in info
    assert info["tool_calls_total"] == 2


def test_max_tool_calls_ends_the_episode():
    env = wrap(max_tool_calls=0)
    env.step("<echo>1</echo>")
    with pytest.raises(EpisodeFinishedError):
        env.step("7")


def test_max_tool_calls_does_not_limit_task_answers():
    env = wrap(max_tool_calls=1)
    env.step("<echo>1</echo>")
    _, _, _, truncated, _ = env.step("nope")
    assert not truncated
    assert env.unwrapped.turn == 1


def test_invalid_calls_use_the_budget():
    env = wrap(max_tool_calls=1)
    env.step('<tool_call>{"name": "web"}</tool_call>')
    _, _, _, truncated, _ = env.step("<echo>1</echo>")
    assert truncated


def test_max_tool_calls_none_means_no_limit():
    env = wrap(max_tool_calls=None)
    for _ in range(50):
        _, _, _, truncated, _ = env.step("<echo>x</echo>")
    assert not truncated


# ------------------------------------------------------------------------------ counters


def test_info_counts_tool_turns_in_total_and_per_tool():
    env = wrap()
    env.step("<echo>a</echo>")
    env.step(add_call(1, 2))
    env.step('<tool_call>{"name": "web"}</tool_call>')
    _, _, _, _, info = env.step("<echo>b</echo>")
    assert info["tool_calls_total"] == 4
    assert info["tool_calls_per_tool"] == {"echo": 2, "add": 1}


def test_task_turn_info_carries_the_counters():
    env = wrap()
    env.step("<echo>a</echo>")
    _, _, _, _, info = env.step("nope")
    assert info["tool_calls_total"] == 1
    assert info["turn"] == 1


def test_reset_clears_the_counters():
    env = wrap()
    env.step("<echo>a</echo>")
    _, info = env.reset(seed=1)
    assert (info["tool_calls_total"], info["tool_calls_per_tool"]) == (0, {"echo": 0, "add": 0})


def test_state_round_trip_restores_the_counters():
    env = wrap(max_tool_calls=2)
    env.step("<echo>a</echo>")
    snapshot = pickle.loads(pickle.dumps(env.get_state()))
    env.step("<echo>b</echo>")
    env.set_state(snapshot)
    assert env.tool_calls_total == 1
    assert env.tool_calls_per_tool == {"echo": 1, "add": 0}
    _, _, _, truncated, _ = env.step("<echo>b</echo>")
    assert not truncated


def test_state_holds_the_counters_as_wrapper_state():
    env = wrap()
    env.step(add_call(1, 1))
    assert env.get_state()["wrapper"] == {
        "tool_calls_total": 1,
        "tool_calls_per_tool": {"echo": 0, "add": 1},
    }


# ----------------------------------------------------------------------- wrapper stacks


def test_episode_statistics_outside_counts_tool_calls():
    env = EpisodeStatistics(ToolEnvWrapper(ToyEnv(episode_length=1), [EchoTool()]))
    env.reset(seed=0)
    env.step("<echo>a</echo>")
    env.step("<tool_call>{bad</tool_call>")
    _, _, terminated, _, info = env.step("nope")
    assert terminated
    assert info["episode"]["tool_calls"] == 2
    assert info["episode"]["invalid_actions"] == 1
    assert info["episode"]["length"] == 3


def test_chat_messages_give_tool_output_the_tool_role_and_record_the_call():
    env = ChatMessages(ToolEnvWrapper(ToyEnv(), [EchoTool()], instructions=False))
    env.reset(seed=0)
    messages, *_ = env.step("thinking <echo>hi</echo> trailing text")
    assert messages[-2:] == [
        {"role": "assistant", "content": "<echo>hi</echo>"},
        {"role": "tool", "content": "echo: hi"},
    ]


def test_max_turns_outside_counts_tool_turns_as_turns():
    env = MaxTurns(ToolEnvWrapper(ToyEnv(), [EchoTool()]), max_turns=2)
    env.reset(seed=0)
    env.step("<echo>a</echo>")
    _, _, _, truncated, info = env.step("<echo>b</echo>")
    assert truncated
    assert info["truncated_reason"] == "max_turns"


def test_tool_wrapped_env_passes_check_env():
    check_env(ToolEnvWrapper(xpgym.make("game:GuessTheNumber-v0"), [EchoTool(), AddTool()]))


# ---------------------------------------------------------------------- never raises


ACTION_PIECES = st.sampled_from(
    [
        "<echo>",
        "</echo>",
        "<buggy>x</buggy>",
        "<python>",
        "</python>",
        "<search>",
        "</search>",
        "```python\n",
        "```",
        "<tool_call>",
        "</tool_call>",
        '{"name": "add", "arguments": {"a": 1, "b": 2}}',
        '{"name": "echo"',
        '"arguments": [1]',
        "{",
        "}",
        "\\boxed{3}",
        "1/0",
        " ",
        "\n",
    ]
)
ACTIONS = st.one_of(st.text(max_size=60), st.lists(ACTION_PIECES, max_size=12).map("".join))


@settings(max_examples=200, deadline=None)
@given(actions=st.lists(ACTIONS, min_size=1, max_size=8))
def test_arbitrary_actions_never_raise_from_step_with_fake_tools(actions):
    env = ToolEnvWrapper(
        xpgym.make("game:GuessTheNumber-v0"),
        [FailingPythonTool(), SearchTool(), EchoTool(), AddTool(), RaisingTool()],
        max_tool_calls=3,
    )
    env.reset(seed=0)
    for action in actions:
        obs, reward, terminated, truncated, _ = env.step(action)
        assert isinstance(obs, str)
        assert isinstance(reward, float)
        if terminated or truncated:
            env.reset(seed=0)


class TagOnlyTool(Tool):
    """Uses nothing but `find_tag`-based parsing through `parse_call` (tag format only)."""

    name = "calc"

    def instructions(self) -> str:
        return "<calc>expr</calc>"

    def function_schema(self) -> dict[str, Any]:
        return function_schema(self.name, "Calculator.")

    def parse(self, action: str) -> ToolCall | None:
        return parse_call(action, self.name, tag="calc", tag_argument="expr", json_calls=False)

    def execute(self, call: ToolCall) -> ToolResult:
        return ToolResult(str(len(call.arguments["expr"])))


@settings(max_examples=200, deadline=None)
@given(action=st.text(alphabet=st.sampled_from(list('<>/calc{}":_tol nme12')), max_size=60))
def test_arbitrary_actions_never_raise_from_step_with_a_real_tag_parser(action):
    env = ToolEnvWrapper(xpgym.make("game:GuessTheNumber-v0"), [TagOnlyTool()])
    env.reset(seed=0)
    obs, *_ = env.step(action)
    assert isinstance(obs, str)


# ------------------------------------------------------------------------- construction


def test_wrapper_needs_at_least_one_tool():
    with pytest.raises(ValueError, match="at least one tool"):
        ToolEnvWrapper(ToyEnv(), [])


def test_wrapper_rejects_duplicate_tool_names():
    with pytest.raises(ValueError, match="distinct"):
        ToolEnvWrapper(ToyEnv(), [EchoTool(), EchoTool()])


def test_wrapper_rejects_a_negative_budget():
    with pytest.raises(ValueError, match="max_tool_calls"):
        ToolEnvWrapper(ToyEnv(), [EchoTool()], max_tool_calls=-1)


def test_close_leaves_shared_tools_open_by_default():
    echo = EchoTool()
    ToolEnvWrapper(ToyEnv(), [echo]).close()
    assert echo.closed == 0


def test_close_closes_the_tools_when_close_tools_is_set():
    echo = EchoTool()
    ToolEnvWrapper(ToyEnv(), [echo], close_tools=True).close()
    assert echo.closed == 1


# ----------------------------------------------------------------------------- variants


@pytest.fixture
def variant_id() -> Iterator[str]:
    """Registers ``game:GuessTheNumber-v0-echo`` for one test and removes it afterwards."""
    env_spec = register_tool_variant(
        "game:GuessTheNumber-v0", echo_tools, "echo", max_tool_calls=2, tool_error_reward=-0.5
    )
    yield env_spec.id
    registry.registry.pop(env_spec.id, None)


def test_tool_variant_id_appends_the_toolset_to_the_base_id():
    assert tool_variant_id("game:GuessTheNumber-v0-easy", "python") == (
        "game:GuessTheNumber-v0-easy-python"
    )


@pytest.mark.parametrize("toolset", ["Python", "python-search", "", "1py"])
def test_tool_variant_id_rejects_toolset_names_that_are_not_one_lowercase_token(toolset):
    with pytest.raises(ValueError, match="toolset name"):
        tool_variant_id("game:GuessTheNumber-v0", toolset)


def test_registered_variant_builds_the_base_env_in_a_tool_wrapper(variant_id):
    env = xpgym.make(variant_id)
    assert variant_id == "game:GuessTheNumber-v0-echo"
    assert isinstance(env, ToolEnvWrapper)
    assert [tool.name for tool in env.tools] == ["echo", "add"]
    assert (env.max_tool_calls, env.tool_error_reward) == (2, -0.5)
    assert type(env.unwrapped).__name__ == "GuessTheNumberEnv"
    assert env.spec.id == variant_id


def test_variant_makes_fresh_tools_for_every_env_and_closes_them(variant_id):
    first, second = xpgym.make(variant_id), xpgym.make(variant_id)
    assert first.tools[0] is not second.tools[0]
    first.close()
    assert first.tools[0].closed == 1


def test_variant_passes_env_kwargs_to_the_base_env(variant_id):
    env = xpgym.make(variant_id, difficulty="easy")
    assert env.unwrapped.max_number == 10


def test_variant_wrapper_kwargs_replace_the_registered_options(variant_id):
    env = xpgym.make(variant_id, wrapper_kwargs={"max_tool_calls": 5})
    assert (env.max_tool_calls, env.tool_error_reward) == (5, 0.0)


def test_variant_passes_check_env(variant_id):
    check_env(xpgym.make(variant_id))


def test_variant_spec_pickles_and_builds_from_the_copy(variant_id):
    copy = pickle.loads(pickle.dumps(xpgym.spec(variant_id)))
    env = registry.make_from_spec(copy)
    obs, _ = env.reset(seed=0)
    assert "<echo>text</echo>" in obs


def test_variant_spec_kwargs_are_plain_data(variant_id):
    kwargs = dict(xpgym.spec(variant_id).kwargs)
    assert kwargs["base_id"] == "game:GuessTheNumber-v0"
    assert kwargs["base_entry_point"] == "xpgym.envs.games.guess_the_number:GuessTheNumberEnv"
    assert kwargs["wrapper_kwargs"] == {"max_tool_calls": 2, "tool_error_reward": -0.5}


def test_variant_accepts_a_module_attr_factory_string_and_tools_kwargs():
    env_spec = register_tool_variant(
        "game:GuessTheNumber-v0",
        "test_tool_wrapper:single_echo_tool",
        "echo1",
        tools_kwargs={"prefix": "p"},
    )
    try:
        env = xpgym.make(env_spec.id)
        assert [tool.description for tool in env.tools] == ["p"]
    finally:
        registry.registry.pop(env_spec.id, None)


def test_variant_rejects_a_lambda_factory():
    with pytest.raises(ValueError, match="module-level function"):
        register_tool_variant("game:GuessTheNumber-v0", lambda: [EchoTool()], "lam")
    assert "game:GuessTheNumber-v0-lam" not in xpgym.list_envs()


def test_variant_rejects_unknown_wrapper_options():
    with pytest.raises(TypeError, match="max_tool_uses"):
        register_tool_variant("game:GuessTheNumber-v0", echo_tools, "bad", max_tool_uses=3)


def test_variant_of_an_unknown_base_id_raises():
    with pytest.raises(xpgym.UnknownEnvError):
        register_tool_variant("game:Nope-v0", echo_tools, "echo")


def test_make_tool_env_rejects_a_factory_that_returns_no_tools():
    with pytest.raises(TypeError, match="must return a Tool"):
        make_tool_env(
            base_id="game:GuessTheNumber-v0",
            base_entry_point="xpgym.envs.games.guess_the_number:GuessTheNumberEnv",
            tools_factory=names_not_tools,
        )


def test_variant_entry_point_is_make_tool_env_next_to_the_wrapper(variant_id):
    assert xpgym.spec(variant_id).entry_point == "xpgym.core.wrappers.tool_variants:make_tool_env"
