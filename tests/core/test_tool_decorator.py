"""`@tool` (xpgym.core.tools.decorator), env-bound tools, pooled resources in
`ToolEnvWrapper`, and the `available_actions` tool."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from hang_guard import HANG_GUARD_S, wait_until
from toy_envs import ListingToyEnv, ToyEnv

from xpgym.core.env import Env
from xpgym.core.errors import INFRA_ERROR_KEY
from xpgym.core.resources import PoolClosedError, ResourcePool
from xpgym.core.tools import FunctionTool, ToolCall, ToolError, tool
from xpgym.core.tools.available_actions import available_actions
from xpgym.core.wrappers.limits import MaxTurns
from xpgym.core.wrappers.tools import ToolEnvWrapper
from xpgym.envs.multiagent.customer_service import CustomerServiceAssistantEnv, CustomerServiceEnv


def call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@tool
def add(a: int, b: int = 1) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


# ------------------------------------------------------------------ schema and parsing


def test_bare_decorator_infers_name_description_and_schema():
    assert isinstance(add, FunctionTool)
    assert add.function_schema() == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "description": "The first."},
                    "b": {"type": "integer", "description": "The second.", "default": 1},
                },
                "additionalProperties": False,
                "required": ["a"],
            },
        },
    }
    assert add(2, 3) == 5  # still callable as a function
    assert '"name": "add"' in add.instructions()


def test_options_override_name_and_description():
    @tool(name="plus", description="Sum.")
    def adder(a: int) -> int:
        return a

    assert adder.name == "plus"
    assert adder.description == "Sum."
    assert adder.parse(call("adder", a=1)) is None
    assert adder.parse(call("plus", a=1)).arguments == {"a": 1}


def test_a_tool_declared_on_a_method_is_the_tool_on_the_class_and_a_method_on_instances():
    class Counter:
        def __init__(self) -> None:
            self.count = 0

        @tool
        def add(self, amount: int) -> str:
            """Add to the count.

            Args:
                amount: How much.
            """
            self.count += amount
            return str(self.count)

    assert isinstance(Counter.add, FunctionTool)
    assert list(Counter.add.parameters["properties"]) == ["amount"]
    counter = Counter()
    assert counter.add(2) == "2"
    assert counter.count == 2


def test_a_call_runs_the_function_and_results_become_text():
    result = add.execute(add.parse(call("add", a=2, b=5)))
    assert result.ok
    assert result.observation == "7"
    assert result.info["exit_reason"] == "ok"

    @tool
    def nothing() -> None:
        """Return nothing."""

    @tool
    def data() -> dict:
        """Return data."""
        return {"x": [1, "é"]}

    @tool
    def opaque() -> object:
        """Return something JSON cannot hold."""
        return object()

    assert nothing.execute(ToolCall("nothing")).observation == ""
    assert json.loads(data.execute(ToolCall("data")).observation) == {"x": [1, "é"]}
    with pytest.raises(TypeError, match="JSON cannot hold"):
        opaque.execute(ToolCall("opaque"))


def test_bad_arguments_are_an_invalid_call_and_the_function_does_not_run():
    ran = []

    @tool
    def record(n: int) -> str:
        """Record n."""
        ran.append(n)
        return "ok"

    bad = record.parse(call("record", n="three"))
    assert bad.error is not None
    assert "expected integer" in bad.error
    with pytest.raises(ValueError, match="malformed"):
        record.execute(bad)
    env = ToolEnvWrapper(ToyEnv(), [record])
    env.reset(seed=0)
    obs, _, terminated, _, info = env.step(call("record", extra=1))
    assert obs.startswith("Invalid call of tool 'record'")
    assert info["invalid_action"] is True
    assert not terminated
    assert ran == []


def test_exceptions_become_failed_results_without_traceback():
    @tool
    def divide(a: float, b: float) -> float:
        """Divide."""
        return a / b

    @tool
    def refuse() -> str:
        """Refuse."""
        raise ToolError("Not allowed here.")

    result = divide.execute(divide.parse(call("divide", a=1, b=0)))
    assert not result.ok
    assert result.observation == "Error: ZeroDivisionError: division by zero"
    assert result.info["exception"] == "ZeroDivisionError"
    assert "Traceback" not in result.observation
    refused = refuse.execute(ToolCall("refuse"))
    assert (refused.ok, refused.observation) == (False, "Not allowed here.")


def test_output_is_capped():
    @tool(max_output_chars=30)
    def shout(text: str) -> str:
        """Repeat."""
        return text * 10

    result = shout.execute(ToolCall("shout", {"text": "abcdef"}))
    assert len(result.observation) == 30
    assert result.observation.endswith(" ... [truncated]")
    assert result.info["output_truncated"] is True
    with pytest.raises(ValueError, match="max_output_chars"):
        tool(max_output_chars=5)(shout.fn)


def test_tag_format():
    @tool(tag="calc")
    def calc(expression: str) -> str:
        """Evaluate."""
        return expression[::-1]

    parsed = calc.parse("thinking <calc> 1+2 </calc>")
    assert parsed.arguments == {"expression": "1+2"}
    assert calc.execute(parsed).observation == "2+1"
    assert calc.parse(call("calc", expression="ab")).arguments == {"expression": "ab"}
    assert "<calc>expression</calc>" in calc.instructions()

    def two(a: str, b: str) -> str:
        return a + b

    with pytest.raises(ValueError, match="tag_argument"):
        tool(tag="two")(two)
    with pytest.raises(ValueError, match="required parameters"):
        tool(tag="two", tag_argument="a")(two)
    with pytest.raises(ValueError, match="not a parameter"):
        tool(tag="two", tag_argument="c")(two)

    def number(n: int) -> int:
        return n

    with pytest.raises(ValueError, match="must take a string"):
        tool(tag="n")(number)


def test_unschematic_functions_are_refused():
    def anything(*args: int) -> None:
        """Variadic."""

    with pytest.raises(TypeError, match="args"):
        tool(anything)
    with pytest.raises(TypeError, match="needs a function"):
        tool(42)  # type: ignore[call-overload]


# ------------------------------------------------------------------ async functions


@tool
async def echo(text: str) -> str:
    """Echo after yielding to the loop."""
    await asyncio.sleep(0)
    return text.upper()


def test_async_function_runs_from_sync_code_without_a_loop():
    assert echo.is_async
    assert echo.execute(ToolCall("echo", {"text": "hi"})).observation == "HI"


def test_async_function_runs_from_sync_code_inside_a_running_loop():
    async def main() -> str:
        result = echo.execute(ToolCall("echo", {"text": "in loop"}))  # no nested-loop error
        await asyncio.sleep(0)  # the caller's loop still works
        return result.observation

    assert asyncio.run(main()) == "IN LOOP"


def test_aexecute_awaits_on_the_callers_loop():
    loops = []

    @tool
    async def where() -> str:
        """Record the loop."""
        loops.append(asyncio.get_running_loop())
        return "here"

    async def main() -> tuple:
        result = await where.aexecute(ToolCall("where"))
        sync_result = await add.aexecute(ToolCall("add", {"a": 1}))  # a sync tool, threaded
        return result, sync_result, asyncio.get_running_loop()

    result, sync_result, loop = asyncio.run(main())
    assert result.observation == "here"
    assert loops == [loop]
    assert sync_result.observation == "2"


def test_async_exception_and_timeout():
    never = asyncio.Event

    @tool(timeout_s=0.05)
    async def hang() -> str:
        """Wait forever."""
        await never().wait()
        return "unreachable"

    @tool
    async def fail() -> str:
        """Fail."""
        raise KeyError("k")

    timed_out = hang.execute(ToolCall("hang"))
    assert not timed_out.ok
    assert "timed out" in timed_out.observation
    assert timed_out.info["exit_reason"] == "timeout"
    failed = asyncio.run(fail.aexecute(ToolCall("fail")))
    assert (failed.ok, failed.observation) == (False, "Error: KeyError: 'k'")


def test_timeout_on_a_sync_function_is_refused():
    def slow() -> str:
        """Sync."""
        return ""

    with pytest.raises(ValueError, match="cannot be stopped"):
        tool(timeout_s=1.0)(slow)
    with pytest.raises(ValueError, match="timeout_s"):
        tool(timeout_s=0)(echo.fn)


# ------------------------------------------------------------------ env-bound tools


@tool(env=ToyEnv)
def turn_of(game: ToyEnv) -> int:
    """The turn number of the episode."""
    return game.turn


def test_env_tool_is_bound_per_wrapper_and_the_shared_tool_is_untouched():
    assert "game" not in turn_of.parameters["properties"]
    first, second = ToyEnv(episode_length=5), ToyEnv(episode_length=5)
    wrapped_first = ToolEnvWrapper(MaxTurns(first, max_turns=9), [turn_of])
    wrapped_second = ToolEnvWrapper(second, [turn_of])
    assert wrapped_first.tools[0] is not turn_of
    assert wrapped_first.tools[0] is not wrapped_second.tools[0]
    wrapped_first.reset(seed=0)
    wrapped_second.reset(seed=0)
    wrapped_first.step("x")
    wrapped_first.step("y")
    assert wrapped_first.step(call("turn_of"))[0] == "2"
    assert wrapped_second.step(call("turn_of"))[0] == "0"
    with pytest.raises(RuntimeError, match="needs an env"):
        turn_of.execute(ToolCall("turn_of"))


def test_env_parameter_named_env_and_errors():
    @tool(env=ToyEnv)
    def secret_parity(env) -> int:  # found by its name
        """Parity."""
        return env.secret % 2

    bound = secret_parity.bind([ToyEnv()])
    assert bound.execute(ToolCall("secret_parity")).observation == "0"

    with pytest.raises(TypeError, match="annotated ToyEnv or named 'env'"):

        @tool(env=ToyEnv)
        def no_env(x: int) -> int:
            """None."""
            return x

    @tool(env=ListingToyEnv)
    def needs_listing(env: ListingToyEnv) -> str:
        """Listing."""
        return ""

    with pytest.raises(TypeError, match="ListingToyEnv, which is not in the env chain"):
        ToolEnvWrapper(MaxTurns(ToyEnv(), max_turns=3), [needs_listing])


def test_plain_tools_bind_to_themselves():
    assert add.bind([ToyEnv()]) is add
    assert add.start_episode() == {}
    add.end_episode()


# ------------------------------------------------------------------ available_actions


def test_available_actions_tool_end_to_end():
    env = ToolEnvWrapper(
        MaxTurns(ListingToyEnv(episode_length=5), max_turns=9), [available_actions]
    )
    obs, info = env.reset(seed=1)
    assert info["tools"][0]["function"]["name"] == "available_actions"
    obs, _, _, _, info = env.step(call("available_actions"))
    assert json.loads(obs) == list("0123456789")
    assert info["tool_calls"][0]["ok"] is True
    env.step("3")
    obs, *_ = env.step('<tool_call>{"name": "available_actions"}</tool_call>')
    assert "3" not in json.loads(obs)
    assert len(json.loads(obs)) == 9


def test_available_actions_on_an_env_that_lists_none():
    env = ToolEnvWrapper(ToyEnv(), [available_actions])
    env.reset(seed=0)
    obs, _, terminated, _, info = env.step(call("available_actions"))
    assert "does not list its available actions" in obs
    assert info["tool_calls"][0]["ok"] is False
    assert not terminated
    with pytest.raises(TypeError, match="Env"):
        available_actions.bind([])


# ------------------------------------------------------------------ pooled resources


class Notebook:
    """A per-episode backend: lines written this episode; reset clears them."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1
        self.lines.clear()


def notebook_tool(pool: ResourcePool[Notebook]) -> FunctionTool:
    @tool(resource=pool)
    def write(line: str, resource: Notebook) -> list[str]:
        """Append a line to the episode's notebook; returns every line so far."""
        resource.lines.append(line)
        return resource.lines

    return write


def test_resource_is_leased_for_the_episode_and_released_at_its_end():
    pool = ResourcePool(Notebook, 1, name="notebooks")
    write = notebook_tool(pool)
    assert "resource" not in write.parameters["properties"]
    env = ToolEnvWrapper(ToyEnv(episode_length=2), [write])
    assert pool.metrics()["in_use"] == 0
    _, info = env.reset(seed=0)
    assert info["resource_wait_s"] >= 0.0
    assert pool.metrics()["in_use"] == 1
    obs, _, _, _, info = env.step(call("write", line="a"))
    assert json.loads(obs) == ["a"]
    assert "resource_wait_s" in info
    assert info["tool_calls"][0]["info"]["resource_pool"] == "notebooks"
    obs, *_ = env.step(call("write", line="b"))
    assert json.loads(obs) == ["a", "b"]
    env.step("x")
    _, _, terminated, _, _ = env.step("y")  # episode_length 2: ends here
    assert terminated
    assert pool.metrics()["in_use"] == 0
    assert pool.metrics()["idle"] == 1
    env.reset(seed=1)
    assert json.loads(env.step(call("write", line="c"))[0]) == ["c"]  # reset on release
    env.reset(seed=2)  # the next reset releases the unfinished episode's lease first
    assert pool.metrics()["acquired"] == 3
    assert pool.metrics()["in_use"] == 1
    env.close()
    assert pool.metrics()["in_use"] == 0
    with pytest.raises(RuntimeError, match="holds no resource"):
        write.execute(ToolCall("write", {"line": "z"}))


def test_budget_truncation_releases_the_resource():
    pool = ResourcePool(Notebook, 1)
    env = ToolEnvWrapper(ToyEnv(), [notebook_tool(pool)], max_tool_calls=0)
    env.reset(seed=0)
    _, _, _, truncated, _ = env.step(call("write", line="a"))
    assert truncated
    assert pool.metrics()["in_use"] == 0


def test_a_second_env_waits_for_the_pooled_resource():
    pool = ResourcePool(Notebook, 1)
    first = ToolEnvWrapper(ToyEnv(), [notebook_tool(pool)])
    second = ToolEnvWrapper(ToyEnv(), [notebook_tool(pool)])
    first.reset(seed=0)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (second.reset(seed=0), done.set()), daemon=True)
    thread.start()
    assert wait_until(lambda: pool.metrics()["waiting"] == 1)
    assert not done.is_set()
    first.close()
    assert done.wait(HANG_GUARD_S)
    assert pool.metrics()["in_use"] == 1
    second.close()


def test_a_reclaimed_lease_fails_the_call_with_the_infra_marker():
    now = [0.0]
    pool = ResourcePool(Notebook, 1, lease_timeout_s=10.0, clock=lambda: now[0])
    env = ToolEnvWrapper(ToyEnv(), [notebook_tool(pool)])
    env.reset(seed=0)
    now[0] = 11.0
    obs, _, _, _, info = env.step(call("write", line="late"))
    assert "LeaseExpiredError" in obs
    record = info["tool_calls"][0]
    assert record["ok"] is False
    assert record["info"][INFRA_ERROR_KEY]["kind"] == "tool_backend_error"
    env.close()  # releasing a reclaimed lease is harmless


def test_resource_tool_errors():
    pool = ResourcePool(Notebook, 1)
    with pytest.raises(TypeError, match="named 'resource'"):

        @tool(resource=pool)
        def no_slot(line: str) -> str:
            """None."""
            return line

    write = notebook_tool(pool)
    with pytest.raises(RuntimeError, match="bind"):
        write.start_episode()


def test_env_and_resource_together_in_an_async_tool():
    pool = ResourcePool(Notebook, 2)

    @tool(env=Env, resource=pool)
    async def note_turn(env: Env, resource: Notebook) -> list[str]:
        """Write the env's class name."""
        resource.lines.append(type(env.unwrapped).__name__)
        return resource.lines

    env = ToolEnvWrapper(ToyEnv(), [note_turn])
    env.reset(seed=0)
    assert json.loads(env.step(call("note_turn"))[0]) == ["ToyEnv"]
    env.close()
    pool.close()


def test_a_failed_lease_at_reset_gives_back_the_leases_taken_before_it():
    open_pool, closed_pool = ResourcePool(Notebook, 1), ResourcePool(Notebook, 1)
    closed_pool.close()

    @tool(resource=closed_pool)
    def other(resource: Notebook) -> str:
        """Other."""
        return ""

    env = ToolEnvWrapper(ToyEnv(), [notebook_tool(open_pool), other])
    with pytest.raises(PoolClosedError):
        env.reset(seed=0)
    assert open_pool.metrics()["in_use"] == 0


def test_env_tool_reaches_the_multi_agent_env_behind_a_single_agent_view():
    @tool(env=CustomerServiceEnv)
    def task_id(env: CustomerServiceEnv) -> str:
        """This episode's task id."""
        return env.task.id

    env = ToolEnvWrapper(CustomerServiceAssistantEnv(), [task_id], instructions=False)
    env.reset(seed=0, options={"task_id": "product_question"})
    assert env.step(call("task_id"))[0] == "product_question"
    env.close()
