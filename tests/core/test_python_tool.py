"""`PythonTool`: parsing the three call formats, running once in the sandbox, observations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from toy_envs import ToyEnv

from xpgym.core.sandbox import (
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailableError,
)
from xpgym.core.tools import ToolCall
from xpgym.core.tools.python import PythonTool
from xpgym.core.wrappers.tools import ToolEnvWrapper


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    try:
        box = Sandbox(pool_size=2)
    except SandboxUnavailableError as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"no sandbox on this machine: {exc}")
    yield box
    box.close()


@pytest.fixture
def tool(sandbox: Sandbox) -> PythonTool:
    return PythonTool(sandbox, limits=SandboxLimits(cpu_seconds=2, wall_timeout_s=5))


class FakeSandbox:
    """Returns a fixed `SandboxResult` (or raises) and records the code it was given."""

    def __init__(self, result: SandboxResult | Exception) -> None:
        self.result = result
        self.codes: list[str] = []

    def run_python(self, code: str, **kwargs: Any) -> SandboxResult:
        self.codes.append(code)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def fake_tool(result: SandboxResult | Exception, **kwargs: Any) -> PythonTool:
    return PythonTool(FakeSandbox(result), **kwargs)  # type: ignore[arg-type]


def outcome(stdout: str = "", stderr: str = "", code: int | None = 0, reason: str = "ok"):
    return SandboxResult(stdout, stderr, code, reason, 0.01)


# ---------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------


def test_parses_the_python_tag() -> None:
    call = PythonTool().parse("I will compute <python>print(6 * 7)</python> now")
    assert call == ToolCall("python", {"code": "print(6 * 7)"}, "<python>print(6 * 7)</python>")


def test_parses_a_fenced_python_block() -> None:
    action = "Let me check:\n```python\nx = 2\nprint(x)\n```\n"
    call = PythonTool().parse(action)
    assert call is not None
    assert call.arguments == {"code": "x = 2\nprint(x)"}
    assert call.raw == "```python\nx = 2\nprint(x)\n```"


def test_parses_a_json_function_call() -> None:
    payload = {"name": "python", "arguments": {"code": "print(1)"}}
    call = PythonTool().parse(f"<tool_call>{json.dumps(payload)}</tool_call>")
    assert call is not None
    assert (call.arguments, call.error) == ({"code": "print(1)"}, None)


def test_the_first_call_in_the_text_wins() -> None:
    action = "```python\nprint('fence')\n``` then <python>print('tag')</python>"
    call = PythonTool().parse(action)
    assert call is not None
    assert call.arguments == {"code": "print('fence')"}


def test_text_without_a_call_is_not_parsed() -> None:
    assert PythonTool().parse("The answer is \\boxed{42}. ```js\nx\n```") is None


def test_empty_tag_is_a_malformed_call() -> None:
    call = PythonTool().parse("<python>  </python>")
    assert call is not None
    assert call.error is not None


def test_json_call_without_code_is_a_malformed_call() -> None:
    call = PythonTool().parse('<tool_call>{"name": "python", "arguments": {}}</tool_call>')
    assert call is not None
    assert "code" in (call.error or "")


def test_function_schema_describes_the_code_argument() -> None:
    schema = PythonTool().function_schema()
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "python"
    assert schema["function"]["parameters"]["required"] == ["code"]


def test_instructions_show_the_tag_and_the_time_limit() -> None:
    text = PythonTool(limits=SandboxLimits(wall_timeout_s=7)).instructions()
    assert "<python>" in text
    assert "7 seconds" in text


# ---------------------------------------------------------------------------------------
# Running (real sandbox)
# ---------------------------------------------------------------------------------------


def test_runs_code_and_returns_its_output(tool: PythonTool) -> None:
    result = tool.execute(tool.parse("<python>print(6 * 7)</python>"))
    assert (result.observation, result.ok) == ("42\n", True)
    assert result.info["exit_reason"] == "ok"
    assert result.info["exit_code"] == 0
    assert result.info["duration_s"] > 0


def test_failing_code_is_not_ok_and_shows_the_traceback(tool: PythonTool) -> None:
    result = tool.execute(tool.parse("<python>print('a')\n1/0</python>"))
    assert not result.ok
    assert result.observation.startswith("a\nstderr:\nTraceback (most recent call last):")
    assert "ZeroDivisionError: division by zero" in result.observation
    assert result.observation.endswith("[error: exit code 1]")
    assert result.info["exit_reason"] == "error"


def test_code_runs_once_even_after_a_name_error(tool: PythonTool) -> None:
    result = tool.execute(tool.parse("<python>print('side effect')\nnumpy_array</python>"))
    assert result.observation.count("side effect") == 1
    assert "NameError" in result.observation


def test_timeout_is_reported(sandbox: Sandbox) -> None:
    tool = PythonTool(sandbox, limits=SandboxLimits(wall_timeout_s=0.5))
    result = tool.execute(tool.parse("<python>import time; time.sleep(60)</python>"))
    assert not result.ok
    assert result.observation == "[timeout: stopped after 0.5 s]"
    assert result.info["exit_reason"] == "timeout"


def test_blocklisted_words_are_not_special(tool: PythonTool) -> None:
    code = (
        "import subprocess, os\nprint(subprocess.run(['echo', 'hi'], capture_output=True).stdout)"
    )
    result = tool.execute(tool.parse(f"<python>{code}</python>"))
    assert result.observation == "b'hi\\n'\n"


def test_works_behind_the_tool_wrapper(tool: PythonTool) -> None:
    env = ToolEnvWrapper(ToyEnv(), [tool])
    env.reset(seed=0)
    obs, _, terminated, truncated, info = env.step("<python>print(sum(range(5)))</python>")
    assert obs == "10\n"
    assert (terminated, truncated) == (False, False)
    assert info["tool_calls"][0]["ok"] is True


# ---------------------------------------------------------------------------------------
# Observations (fake sandbox)
# ---------------------------------------------------------------------------------------


def test_silent_success_says_no_output() -> None:
    tool = fake_tool(outcome())
    assert tool.execute(ToolCall("python", {"code": "x = 1"})).observation == "(no output)"


def test_stderr_of_a_successful_run_is_shown() -> None:
    tool = fake_tool(outcome("1\n", "warning\n"))
    assert tool.execute(ToolCall("python", {"code": "."})).observation == "1\nstderr:\nwarning"


def test_stderr_last_line_only_keeps_the_exception_line() -> None:
    stderr = 'Traceback (most recent call last):\n  File "<string>", line 1\nKeyError: 3\n\n'
    tool = fake_tool(outcome("", stderr, 1, "error"), stderr_last_line_only=True)
    result = tool.execute(ToolCall("python", {"code": "."}))
    assert result.observation == "stderr:\nKeyError: 3\n[error: exit code 1]"


@pytest.mark.parametrize(
    ("reason", "code", "note"),
    [
        ("cpu_limit", -24, "[cpu_limit: stopped after 5 s of CPU time]"),
        ("memory", 1, "[memory: out of memory (limit 1024 MiB)]"),
        ("output_limit", None, "[output_limit: output over 1048576 bytes, cut]"),
        ("killed", -9, "[killed: killed by signal 9]"),
    ],
)
def test_failure_reason_is_the_last_line(reason: str, code: int | None, note: str) -> None:
    tool = fake_tool(outcome("partial\n", "", code, reason))
    result = tool.execute(ToolCall("python", {"code": "."}))
    assert result.observation == f"partial\n{note}"
    assert not result.ok


def test_long_output_keeps_its_start_and_end() -> None:
    stdout = "".join(f"line {i}\n" for i in range(10_000))
    tool = fake_tool(outcome(stdout), max_output_chars=200)
    observation = tool.execute(ToolCall("python", {"code": "."})).observation
    assert len(observation) <= 200
    assert observation.startswith("line 0\nline 1\n")
    assert observation.endswith("line 9999\n")
    assert "characters cut]" in observation


def test_sandbox_failure_is_an_error_observation_not_an_exception() -> None:
    tool = fake_tool(SandboxError("cannot build a call"))
    result = tool.execute(ToolCall("python", {"code": "print(1)"}))
    assert not result.ok
    assert "cannot build a call" in result.observation


def test_unavailable_sandbox_raises() -> None:
    tool = fake_tool(SandboxUnavailableError("install bubblewrap"))
    with pytest.raises(SandboxUnavailableError):
        tool.execute(ToolCall("python", {"code": "print(1)"}))


def test_malformed_call_is_a_programming_error() -> None:
    tool = fake_tool(outcome())
    with pytest.raises(ValueError, match="malformed"):
        tool.execute(ToolCall("python", {}, error="missing code"))
    with pytest.raises(ValueError, match="string 'code'"):
        tool.execute(ToolCall("python", {"code": 3}))


def test_code_is_passed_unchanged() -> None:
    sandbox = FakeSandbox(outcome())
    PythonTool(sandbox).execute(ToolCall("python", {"code": "import os\nos.system('x')"}))  # type: ignore[arg-type]
    assert sandbox.codes == ["import os\nos.system('x')"]


def test_constructing_a_tool_starts_nothing() -> None:
    tool = PythonTool()
    assert tool._sandbox is None


def test_max_output_chars_is_validated() -> None:
    with pytest.raises(ValueError, match="at least 40"):
        PythonTool(max_output_chars=10)
