"""`PythonTool`: run the model's Python code in the sandbox, once, and show it the output.

Call formats (parsed by the shared `xpgym.core.tools.calls.parse_call`; the first call in
the text wins): ``<python>code</python>``, a fenced ````` ```python ````` (or ``py``) block,
and ``<tool_call>{"name": "python", "arguments": {"code": "..."}}</tool_call>``.

The code runs exactly once, in a fresh `xpgym.core.sandbox.Sandbox` call (no network,
no host files, nothing kept between calls). Unlike GEM's ``PythonCodeTool``, nothing is
re-run on ``NameError`` and nothing is checked against a keyword blocklist: the sandbox,
not the text of the code, is what keeps the host safe.

Observation (what the model sees), at most `max_output_chars` characters per stream (a
longer stream keeps its start and end around a line ``...[N characters cut]...``, see
`xpgym.core.text.shorten_middle`):

* success without stderr: the program's stdout, or ``(no output)``;
* otherwise: stdout (if any), then ``stderr:`` and the stderr (if any; only its last line
  with ``stderr_last_line_only``), then, when the program failed, one line in brackets that
  says how, e.g. ``[error: exit code 1]``, ``[timeout: stopped after 10 s]``,
  ``[cpu_limit: stopped after 5 s of CPU time]``, ``[memory: out of memory (limit
  1024 MiB)]``, ``[output_limit: output over 1048576 bytes, cut]``.

`ToolResult.ok` is `True` exactly when the program exited with status 0; `ToolResult.info`
holds ``exit_reason`` (one of `xpgym.core.sandbox.EXIT_REASONS`), ``exit_code``,
``duration_s``, ``cpu_time_s`` and ``output_truncated``.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from xpgym.core.errors import INFRA_ERROR_KEY, InfraCause
from xpgym.core.sandbox import (
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailableError,
    default_sandbox,
)
from xpgym.core.text import shorten_middle
from xpgym.core.tools.base import Tool, ToolCall, ToolResult
from xpgym.core.tools.calls import function_schema, parse_call

__all__ = ["PythonTool"]

logger = logging.getLogger(__name__)

_CUT_MARKER: Final = "\n...[{cut} characters cut]...\n"  # see xpgym.core.text.shorten_middle

_PARAMETERS: Final = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "description": "A complete Python 3 program. Use print() to show results.",
        }
    },
    "required": ["code"],
    "additionalProperties": False,
}


class PythonTool(Tool):
    """Run Python code from the model's action in a sandbox; see the module docstring.

    Args:
        sandbox: The sandbox to run code in; `None` uses the process-wide
            `xpgym.core.sandbox.default_sandbox()`, started on first use. The tool never
            closes a sandbox (it may be shared).
        limits: Limits of each run; `None` uses ``SandboxLimits()`` (5 s of CPU, 10 s of wall
            clock, 1 GiB of memory, 1 MiB of captured output per stream).
        stderr_last_line_only: Show only the last non-empty line of stderr (for a failing
            program, the exception line of the traceback).
        max_output_chars: Longest stdout and stderr shown; longer text keeps its start and
            end, with the number of characters cut in between.

    Raises:
        ValueError: `max_output_chars` is smaller than 40.
    """

    name = "python"
    description = (
        "Run a Python 3 program in a sandbox (standard library only, no network, no files "
        "kept between runs) and return what it printed."
    )
    parameters: Final = _PARAMETERS

    def __init__(
        self,
        sandbox: Sandbox | None = None,
        *,
        limits: SandboxLimits | None = None,
        stderr_last_line_only: bool = False,
        max_output_chars: int = 4000,
    ) -> None:
        if max_output_chars < 40:
            raise ValueError(f"max_output_chars must be at least 40, got {max_output_chars}")
        self._sandbox = sandbox
        self.limits = limits if limits is not None else SandboxLimits()
        self.stderr_last_line_only = stderr_last_line_only
        self.max_output_chars = max_output_chars

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox code runs in (the shared default one unless one was given)."""
        return self._sandbox if self._sandbox is not None else default_sandbox()

    def instructions(self) -> str:
        return (
            "To run Python code, put it inside <python></python> tags, e.g. "
            "<python>print(2 ** 10)</python> (a ```python fenced block works too). The code "
            "runs once as a fresh Python 3 program, with the standard library only, no "
            "network and no files kept from earlier runs, for at most "
            f"{self.limits.wall_timeout_s:g} seconds. You see what it prints (stdout and "
            "stderr), so print() the values you need."
        )

    def function_schema(self) -> dict[str, Any]:
        return function_schema(self.name, self.description, self.parameters)

    def parse(self, action: str) -> ToolCall | None:
        return parse_call(
            action,
            self.name,
            parameters=self.parameters,
            tag="python",
            tag_argument="code",
            fence_languages=("python", "py"),
        )

    def execute(self, call: ToolCall) -> ToolResult:
        """Run ``call.arguments["code"]`` once and report its output.

        Raises:
            ValueError: `call` is malformed (``call.error`` set, or no string ``code``).
            SandboxUnavailableError: the sandbox cannot run on this machine.
        """
        if call.error is not None:
            raise ValueError(f"cannot execute a malformed call ({call.error})")
        code = call.arguments.get("code")
        if not isinstance(code, str):
            raise ValueError(f"the python tool needs a string 'code' argument, got {code!r:.80}")
        try:
            result = self.sandbox.run_python(code, limits=self.limits)
        except SandboxUnavailableError:
            raise
        except SandboxError as exc:  # the sandbox failed, not the code: report, go on
            logger.warning("python tool: the sandbox failed: %s", exc)
            return ToolResult(
                f"[the sandbox failed to run the code: {exc}]",
                ok=False,
                info={
                    "exit_reason": "killed",
                    "exit_code": None,
                    "sandbox_error": str(exc),
                    INFRA_ERROR_KEY: InfraCause("sandbox_error", str(exc)).to_dict(),
                },
            )
        return ToolResult(self.format_observation(result), ok=result.ok, info=_info(result))

    def format_observation(self, result: SandboxResult) -> str:
        """The text the model sees for `result` (see the module docstring)."""
        stdout = shorten_middle(result.stdout, self.max_output_chars, marker=_CUT_MARKER)
        stderr = result.stderr
        if self.stderr_last_line_only:
            lines = [line for line in stderr.splitlines() if line.strip()]
            stderr = lines[-1] + "\n" if lines else ""
        stderr = shorten_middle(stderr, self.max_output_chars, marker=_CUT_MARKER)
        if result.ok and not stderr:
            return stdout if stdout else "(no output)"
        parts = []
        if stdout:
            parts.append(stdout if stdout.endswith("\n") else stdout + "\n")
        if stderr:
            parts.append("stderr:\n" + (stderr if stderr.endswith("\n") else stderr + "\n"))
        if not result.ok:
            parts.append(f"[{result.exit_reason}: {self._explain(result)}]")
        return "".join(parts).rstrip("\n")

    def _explain(self, result: SandboxResult) -> str:
        limits = self.limits
        if result.exit_reason == "timeout":
            return f"stopped after {limits.wall_timeout_s:g} s"
        if result.exit_reason == "cpu_limit":
            return f"stopped after {limits.cpu_seconds:g} s of CPU time"
        if result.exit_reason == "memory":
            return f"out of memory (limit {limits.memory_bytes / (1 << 20):g} MiB)"
        if result.exit_reason == "output_limit":
            return f"output over {limits.max_output_bytes} bytes, cut"
        if result.exit_code is not None and result.exit_code < 0:
            return f"killed by signal {-result.exit_code}"
        if result.exit_code is not None:
            return f"exit code {result.exit_code}"
        return "the program was stopped"

    def __repr__(self) -> str:
        return f"PythonTool(limits={self.limits!r})"


def _info(result: SandboxResult) -> dict[str, Any]:
    return {
        "exit_reason": result.exit_reason,
        "exit_code": result.exit_code,
        "duration_s": result.duration_s,
        "cpu_time_s": result.cpu_time_s,
        "output_truncated": result.output_truncated,
    }
