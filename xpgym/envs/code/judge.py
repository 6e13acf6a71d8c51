r"""Judging a solution: find the code in the model's text, run it on tests in the sandbox.

The code block rule
-------------------

`extract_code` takes the **last** Markdown fenced block of the action whose language is
``python``, ``py``, ``python3`` or absent: three backticks, then on the same line an
optional language word (case-insensitive; anything after the first word is ignored), a
newline, the code, and the next three backticks. Blocks in other languages (````` ```bash `````,
````` ```text `````) are skipped whole, unclosed blocks do not count, and a block holding
only whitespace is no code. Three backticks inside the code end the block early.

Running and verdicts
--------------------

Every test is one fresh `xpgym.core.sandbox.Sandbox` call (no network, no host files,
nothing kept between tests) with the limits given to `judge`. A stdin/stdout solution runs as
a program with the test input on stdin. A function-call solution runs under a small harness
that executes the code as a module named ``solution`` (so an ``if __name__ == "__main__":``
block does not run), calls the function with the test's arguments and reports its return
value as JSON; what the solution prints goes to stderr and is ignored.

Each test gets one verdict (`VERDICTS`):

================== ===================================================================
``passed``         ran within the limits and the output / return value matched
``wrong_answer``   ran within the limits, exit status 0, the output did not match (a
                   return value that JSON cannot hold counts as a wrong answer)
``runtime_error``  non-zero exit status: an exception (also a missing function, or
                   network use, which fails: there is no network), or killed by a signal
``timeout``        over the wall-clock limit or the CPU-time limit
``memory_limit``   ran out of memory (a ``MemoryError``)
``output_limit``   printed more than the sandbox's output cap
``sandbox_error``  the sandbox itself failed (not the solution's fault; logged)
``skipped``        not run: an earlier test failed and `judge` stops at the first failure
================== ===================================================================

Output comparison (`outputs_match`): both texts are split into lines, trailing whitespace is
removed from every line and trailing empty lines are dropped; the resulting lists must be
equal. Leading whitespace and blank lines inside the output count. Return values
(`returns_match`) are compared as JSON values: same type family (a bool is not a number,
tuples become lists), floats within a relative or absolute tolerance of 1e-6, everything
else exactly, recursively through lists and dicts.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from xpgym.core.sandbox import (
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailableError,
)
from xpgym.core.text import shorten_end
from xpgym.envs.code.problems import CallTest, CodeProblem, IOTest

__all__ = [
    "CODE_LANGUAGES",
    "VERDICTS",
    "TestOutcome",
    "extract_code",
    "judge",
    "outputs_match",
    "returns_match",
]

logger = logging.getLogger(__name__)

CODE_LANGUAGES: Final = frozenset({"", "python", "py", "python3"})
"""Fence languages `extract_code` accepts (``""``: a block without a language word)."""

VERDICTS: Final = (
    "passed",
    "wrong_answer",
    "runtime_error",
    "timeout",
    "memory_limit",
    "output_limit",
    "sandbox_error",
    "skipped",
)
"""Every verdict a test can get, in this order in ``info["verdict_counts"]``."""

_FLOAT_TOLERANCE: Final = 1e-6
_DETAIL_CHARS: Final = 600
_FENCE: Final = "```"

# Runs a function-call test. The request (code, function name, arguments) comes on stdin as
# JSON; the return value goes out as one JSON line on the original stdout, while the
# solution's own prints are sent to stderr.
_CALL_HARNESS: Final = """\
import json, os, sys
request = json.loads(sys.stdin.read())
result = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
namespace = {"__name__": "solution", "__builtins__": __builtins__}
exec(compile(request["code"], "solution.py", "exec"), namespace)
function = namespace.get(request["function"])
if not callable(function):
    sys.exit(f"the solution defines no function {request['function']!r}")
value = function(*request["args"])
try:
    line = json.dumps({"value": value})
except (TypeError, ValueError, RecursionError):
    line = json.dumps({"unserializable": repr(value)[:200]})
result.write(line + "\\n")
result.flush()
"""


@dataclass(frozen=True)
class TestOutcome:
    """What one test gave.

    Attributes:
        verdict: One of `VERDICTS`.
        detail: A short explanation for feedback (``""`` when passed or skipped): the output
            or return value that did not match, or the end of stderr.
    """

    __test__ = False  # not a pytest test class

    verdict: str
    detail: str = ""

    @property
    def passed(self) -> bool:
        """``verdict == "passed"``."""
        return self.verdict == "passed"


def extract_code(action: str) -> str | None:
    """The code of the last Python (or untagged) fenced block in `action`, or `None`.

    See the module docstring for the exact rule.
    """
    found = None
    pos = 0
    while True:
        start = action.find(_FENCE, pos)
        if start < 0:
            return found
        eol = action.find("\n", start + len(_FENCE))
        if eol < 0:
            return found
        close = action.find(_FENCE, eol + 1)
        if close < 0:
            return found
        words = action[start + len(_FENCE) : eol].split()
        language = words[0].lower() if words else ""
        code = action[eol + 1 : close]
        if language in CODE_LANGUAGES and code.strip():
            found = code
        pos = close + len(_FENCE)


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def outputs_match(got: str, expected: str) -> bool:
    """Whether two outputs are equal line by line, ignoring trailing whitespace and trailing
    empty lines (see the module docstring)."""
    return _lines(got) == _lines(expected)


def returns_match(got: Any, expected: Any) -> bool:
    """Whether two JSON values are equal (floats within 1e-6; see the module docstring)."""
    if isinstance(got, bool) or isinstance(expected, bool):
        return type(got) is type(expected) and got == expected
    if isinstance(got, (int, float)) and isinstance(expected, (int, float)):
        if isinstance(got, float) or isinstance(expected, float):
            return math.isclose(got, expected, rel_tol=_FLOAT_TOLERANCE, abs_tol=_FLOAT_TOLERANCE)
        return got == expected
    if isinstance(got, (list, tuple)) and isinstance(expected, (list, tuple)):
        return len(got) == len(expected) and all(map(returns_match, got, expected))
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(
            returns_match(got[key], expected[key]) for key in got
        )
    return type(got) is type(expected) and got == expected


def _stderr_tail(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    return (
        "stderr (last lines):\n" + shorten_end("\n".join(lines[-5:]), _DETAIL_CHARS)
        if lines
        else ""
    )


def _failure(result: SandboxResult) -> TestOutcome | None:
    """The verdict of a run that did not exit normally, or `None` if it did."""
    reason = result.exit_reason
    if reason == "ok":
        return None
    if reason in ("timeout", "cpu_limit"):
        return TestOutcome("timeout")
    if reason == "memory":
        return TestOutcome("memory_limit", _stderr_tail(result.stderr))
    if reason == "output_limit":
        return TestOutcome("output_limit")
    if result.exit_code is None:  # the sandbox failed, not the program
        logger.warning("code judge: the sandbox failed during a test: %s", result.stderr.strip())
        return TestOutcome("sandbox_error", _stderr_tail(result.stderr))
    if result.exit_code < 0:
        return TestOutcome("runtime_error", f"killed by signal {-result.exit_code}")
    return TestOutcome("runtime_error", _stderr_tail(result.stderr))


def _run_io_test(code: str, test: IOTest, sandbox: Sandbox, limits: SandboxLimits) -> TestOutcome:
    result = sandbox.run_python(code, stdin=test.input, limits=limits)
    failure = _failure(result)
    if failure is not None:
        return failure
    if outputs_match(result.stdout, test.output):
        return TestOutcome("passed")
    return TestOutcome(
        "wrong_answer", f"Your program printed:\n{shorten_end(result.stdout, _DETAIL_CHARS)}"
    )


def _run_call_test(
    code: str, function: str, test: CallTest, sandbox: Sandbox, limits: SandboxLimits
) -> TestOutcome:
    request = json.dumps({"code": code, "function": function, "args": list(test.args)})
    result = sandbox.run_python(_CALL_HARNESS, stdin=request, limits=limits)
    failure = _failure(result)
    if failure is not None:
        return failure
    try:
        reply = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        reply = None
    if not isinstance(reply, dict) or not ({"value", "unserializable"} & reply.keys()):
        return TestOutcome(
            "runtime_error", f"{function}() did not return (the program exited before it did)"
        )
    if "unserializable" in reply:
        return TestOutcome(
            "wrong_answer",
            f"{function}() returned a value that is not JSON data: {reply['unserializable']}",
        )
    got = reply["value"]
    if any(returns_match(got, accepted) for accepted in test.accepted):
        return TestOutcome("passed")
    return TestOutcome(
        "wrong_answer", shorten_end(f"{function}() returned {json.dumps(got)}", _DETAIL_CHARS)
    )


def judge(
    code: str,
    problem: CodeProblem,
    *,
    sandbox: Sandbox,
    limits: SandboxLimits,
    tests: Sequence[int] | None = None,
    stop_at_first_failure: bool = False,
) -> list[TestOutcome]:
    """Run `code` on `problem`'s tests, one sandbox call each, in order.

    Args:
        code: The solution (a program, or a module defining ``problem.fn_name``).
        problem: The problem.
        sandbox: Where to run it.
        limits: Limits of each test run.
        tests: Indices of the tests to run (default all), in the order to run them.
        stop_at_first_failure: After the first test that does not pass, mark the rest
            ``"skipped"`` instead of running them.

    Returns:
        One `TestOutcome` per test in `tests`, in that order. Nothing the code does raises.

    Raises:
        SandboxUnavailableError: the sandbox cannot run on this machine.
    """
    order = range(len(problem.tests)) if tests is None else tests
    outcomes: list[TestOutcome] = []
    failed = False
    for index in order:
        test = problem.tests[index]
        if failed and stop_at_first_failure:
            outcomes.append(TestOutcome("skipped"))
            continue
        try:
            if isinstance(test, IOTest):
                outcome = _run_io_test(code, test, sandbox, limits)
            else:
                assert problem.fn_name is not None  # CodeProblem checks it
                outcome = _run_call_test(code, problem.fn_name, test, sandbox, limits)
        except SandboxUnavailableError:
            raise
        except SandboxError as exc:  # e.g. it could not be restarted: report, go on
            logger.warning("code judge: the sandbox failed: %s", exc)
            outcome = TestOutcome("sandbox_error", str(exc))
        outcomes.append(outcome)
        failed = failed or not outcome.passed
    return outcomes
