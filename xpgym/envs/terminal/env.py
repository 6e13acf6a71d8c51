r"""TerminalEnv: do a task in a sandboxed Linux shell; a check script decides success.

Episode rules:

* `reset()` picks the task (the one given, or one drawn uniformly from the task list with
  `np_random`, or ``options={"task": name}``) and gives the episode a fresh workspace holding
  the task's files. The observation is the instruction, the files and the rules below.
* Every `step()` is one turn. The action runs **one** shell command: the content of the
  first ``<bash>...</bash>`` in the text, e.g. ``<bash>ls -la</bash>``. It runs as
  ``bash -c`` in the workspace (the working directory, also ``$HOME``), inside the sandbox
  (`xpgym.core.sandbox`: no network, no host files; coreutils, grep, sed, awk, find,
  tar and ``python3`` with the standard library are there), with stdin ``/dev/null`` and a
  time limit (``command_timeout_s``). Files persist from one command to the next; the
  current directory, variables and processes do not (every process a command started is
  killed when it ends): see `xpgym.envs.terminal.workspace`.
* ``<finish/>`` (also ``<finish />`` or ``<finish>``) outside the command ends the episode:
  alone, or after the command of the same action has run.
* The observation after a command is its exit code, stdout and stderr, each stream cut to
  its first ``max_output_bytes`` and last ``max_output_bytes // 2`` bytes with a line
  ``[... N bytes cut ...]`` between them when longer, plus a note when it was stopped
  (time limit, output flood) or when the workspace could not be kept.
* The episode terminates on finish and is truncated after ``max_turns`` turns. Either way
  the task's check (a Python program) then runs on the final workspace, in the sandbox,
  and the last observation says whether it passed.

Rewards, per step:

=================================================  ==================  ======================
Step                                               reward              ``info``
=================================================  ==================  ======================
a command (the episode goes on)                    ``0.0``
the episode's last step, check passes              ``1.0``             ``correct=True``
the episode's last step, check fails               ``0.0``             ``correct=False``
no ``<bash>`` command (or an empty one) and no     ``-0.1``            ``invalid_action=True``
finish tag                                         (`INVALID_REWARD`)
=================================================  ==================  ======================

An invalid action on the last turn earns both: ``-0.1`` plus the check's reward.

``info`` after every step: ``correct`` (the check passed; `False` before the end),
``invalid_action``, ``parsed_action`` (the command, ``"<finish/>"`` for a bare finish, or
`None`), ``turn``, ``task``, ``exit_code`` (`None` when no command ran or it failed),
``timed_out``, and at the end ``check_output`` (the check's stdout and stderr). `reset()`
info: ``task``, ``max_turns``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar, Final

from xpgym.core.env import Env
from xpgym.core.sandbox import Sandbox, default_sandbox
from xpgym.core.tools.calls import find_tag
from xpgym.envs.common.arguments import is_int, is_number
from xpgym.envs.terminal.tasks import TASKS, TerminalTask, task_by_name
from xpgym.envs.terminal.workspace import (
    FLOOD_BYTES,
    RunResult,
    pack_files,
    run_check,
    run_command,
)

__all__ = ["CHECK_PASSED_REWARD", "INVALID_REWARD", "TerminalEnv", "parse_action"]

CHECK_PASSED_REWARD: Final = 1.0
INVALID_REWARD: Final = -0.1
_FINISH = re.compile(r"<finish\s*/?>")
_RANDOM_COMMANDS: Final = (
    "ls",
    "ls -R",
    "pwd",
    "cat *.txt | head -n 5",
    "wc -l * 2>/dev/null",
    "echo note > note.txt",
    "mkdir -p out && ls",
    "rm -f *.txt",
    "false",
)


def parse_action(action: str) -> tuple[str | None, bool]:
    """The command and whether the episode should finish, as the module docstring says.

    Returns:
        ``(command, finish)``: `command` is the content of the first ``<bash>...</bash>``
        (`None` if there is none or it is only whitespace); `finish` is whether a finish tag
        appears outside that block.
    """
    match = find_tag(action, "bash")
    if match is None:
        return None, bool(_FINISH.search(action))
    outside = action[: match.start] + "\n" + action[match.end :]
    command = match.content if match.content.strip() else None
    return command, bool(_FINISH.search(outside))


def _describe_run(result: RunResult, timeout_s: float) -> str:
    if result.exit_code is None:
        return f"[the command failed: {result.error}; the files are as they were before it]"
    parts = [f"exit code: {result.exit_code}"]
    if result.timed_out:
        parts[0] += f" (killed: over the {timeout_s:g} s time limit)"
    elif result.flooded:
        parts[0] += f" (killed: it wrote more than {FLOOD_BYTES >> 20} MiB of output)"
    for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        if text:
            parts.append(f"{name}:\n{text.rstrip()}")
    if not result.stdout and not result.stderr:
        parts.append("(no output)")
    if result.error is not None:
        parts.append(f"[the files could not be kept: {result.error}; they are as before]")
    return "\n".join(parts)


class TerminalEnv(Env[str]):
    """Solve a shell task in a sandboxed workspace; see the module docstring for the rules.

    Args:
        task: The name of a shipped task (`xpgym.envs.terminal.tasks.TASKS`), or `None` to
            draw one per episode from `tasks`.
        tasks: The tasks to draw from when `task` is `None` (default: every shipped task).
        max_turns: Turns before the episode is truncated.
        command_timeout_s: Time limit of each command (wall clock, and CPU per process).
        max_output_bytes: Bytes of each stream's start shown (half as many of its end).
        sandbox: Where to run commands; `None`: the process-wide `default_sandbox()`.

    Raises:
        KeyError: `task` names no shipped task.
        ValueError: both `task` and `tasks`, no tasks, or a limit below its minimum.
        TypeError: a limit is not a number.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(
        self,
        task: str | None = None,
        *,
        tasks: Sequence[TerminalTask] | None = None,
        max_turns: int = 20,
        command_timeout_s: float = 10.0,
        max_output_bytes: int = 2000,
        sandbox: Sandbox | None = None,
    ) -> None:
        if task is not None and tasks is not None:
            raise ValueError("TerminalEnv: pass either task= or tasks=, not both")
        for name, value, lowest in (
            ("max_turns", max_turns, 1),
            ("max_output_bytes", max_output_bytes, 100),
        ):
            if not is_int(value):
                raise TypeError(f"TerminalEnv: {name} must be an int, got {value!r}")
            if value < lowest:
                raise ValueError(f"TerminalEnv: {name} must be at least {lowest}, got {value}")
        if not is_number(command_timeout_s):
            raise TypeError(
                f"TerminalEnv: command_timeout_s must be a number, got {command_timeout_s!r}"
            )
        if not command_timeout_s > 0:
            raise ValueError(
                f"TerminalEnv: command_timeout_s must be positive, got {command_timeout_s}"
            )
        if task is not None:
            self.tasks: tuple[TerminalTask, ...] = (task_by_name(task),)
        else:
            self.tasks = TASKS if tasks is None else tuple(tasks)
        if not self.tasks:
            raise ValueError("TerminalEnv: the task list is empty")
        self.max_turns = int(max_turns)
        self.command_timeout_s = float(command_timeout_s)
        self.max_output_bytes = int(max_output_bytes)
        self._sandbox = sandbox
        self._task_index = 0
        self.task = self.tasks[0]
        self.workspace = b""
        self.turn = 0

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox commands run in (the shared default one unless one was given)."""
        return self._sandbox if self._sandbox is not None else default_sandbox()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode with a fresh workspace.

        Raises:
            KeyError: ``options["task"]`` is not one of this env's tasks.
        """
        super().reset(seed=seed)
        name = (options or {}).get("task")
        if name is not None:
            names = [task.name for task in self.tasks]
            if name not in names:
                raise KeyError(f"TerminalEnv: no task {name!r} here; the tasks are {names}")
            self._task_index = names.index(name)
        else:
            self._task_index = int(self.np_random.integers(len(self.tasks)))
        self.task = self.tasks[self._task_index]
        self.workspace = pack_files(self.task.files, self.task.modes)
        self.turn = 0
        return self._instructions(), {"task": self.task.name, "max_turns": self.max_turns}

    def _instructions(self) -> str:
        files = "\n".join(f"  {path}" for path in sorted(self.task.files))
        return (
            f"Task: {self.task.instruction}\n\n"
            f"Files in your working directory:\n{files}\n\n"
            "You work in a sandboxed Linux shell (bash, coreutils, grep, sed, awk, find, tar, "
            "python3; no network). Run one command per turn as <bash>command</bash>; you see "
            "its exit code, stdout and stderr. Every command starts a new shell in the "
            "working directory: files persist between commands, the current directory, "
            "variables and background processes do not. Each command may run for "
            f"{self.command_timeout_s:g} s. When the task is done, reply <finish/>. You have "
            f"{self.max_turns} turns; then the task is checked."
        )

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Run one command and/or finish; see the module docstring for the rules and rewards."""
        self.turn += 1
        command, finish = parse_action(action)
        invalid = command is None and not finish
        reward = INVALID_REWARD if invalid else 0.0
        exit_code: int | None = None
        timed_out = False
        if command is not None:
            result = run_command(
                self.sandbox,
                self.workspace,
                command,
                timeout_s=self.command_timeout_s,
                head_bytes=self.max_output_bytes,
                tail_bytes=self.max_output_bytes // 2,
            )
            if result.workspace is not None:
                self.workspace = result.workspace
            exit_code, timed_out = result.exit_code, result.timed_out
            observation = _describe_run(result, self.command_timeout_s)
        elif invalid:
            observation = (
                "No command found: put one shell command in <bash></bash>, e.g. "
                "<bash>ls -la</bash>, or reply <finish/> when the task is done."
            )
        else:
            observation = "Finished."
        terminated = finish
        truncated = not finish and self.turn >= self.max_turns
        info: dict[str, Any] = {
            "correct": False,
            "invalid_action": invalid,
            "parsed_action": command if command is not None else ("<finish/>" if finish else None),
            "turn": self.turn,
            "task": self.task.name,
            "exit_code": exit_code,
            "timed_out": timed_out,
        }
        if terminated or truncated:
            check = run_check(self.sandbox, self.workspace, self.task.check)
            passed = check.exit_code == 0
            info["correct"] = passed
            info["check_output"] = (check.stdout + check.stderr).strip() or (check.error or "")
            if passed:
                reward += CHECK_PASSED_REWARD
            ending = "finished" if finish else f"out of turns ({self.max_turns})"
            verdict = "the task is done" if passed else "the task is not done"
            observation += f"\n\nEpisode over ({ending}). Check: {verdict}."
        return observation, float(reward), terminated, truncated, info

    def sample_random_action(self) -> str:
        """From `np_random`: a harmless command (``<bash>ls</bash>``...) half of the time, a
        finish (alone or after ``ls``) 40 %, and text without either 10 % (invalid)."""
        draw = float(self.np_random.random())
        if draw < 0.5:
            command = _RANDOM_COMMANDS[int(self.np_random.integers(len(_RANDOM_COMMANDS)))]
            return f"<bash>{command}</bash>"
        if draw < 0.9:
            return "<finish/>" if draw < 0.7 else "<bash>ls</bash> then <finish/>"
        return "I will look around first."

    def get_state(self) -> dict[str, Any]:
        """Snapshot: task, workspace (an immutable archive), turn and the RNG state."""
        return {
            "task_index": self._task_index,
            "workspace": self.workspace,
            "turn": self.turn,
            "rng": self.np_random.bit_generator.state,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a `get_state()` snapshot taken from an env with the same tasks."""
        self._task_index = state["task_index"]
        self.task = self.tasks[self._task_index]
        self.workspace = bytes(state["workspace"])
        self.turn = state["turn"]
        self.np_random.bit_generator.state = state["rng"]
