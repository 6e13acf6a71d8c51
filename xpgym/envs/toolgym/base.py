r"""The ``toolgym:`` template: CodeGym-style tool-use environments (arXiv 2509.17325).

A toolgym env turns a small coding problem into a multi-turn task that the agent solves by
**calling tools**, one per turn, never by writing code. The problem instance (the *task
config*) is hidden; ``Observe`` shows only part of it (sizes, the query), the other tools read
or change a small working state, and ``Done(answer)`` ends the episode with reward 1.0 if the
answer equals the reference answer, else 0.0. There is no other reward.

How to write an env (one module in ``xpgym/envs/toolgym/``; `closest_to_k` is the example)
--------------------------------------------------------------------------------------------

Subclass `ToolGymEnv` and give it:

* ``name`` (class attribute): the PascalCase task name, e.g. ``"ClosestToK"``; it is the
  task-string prefix (``ClosestToK@{...}``) and the id (``toolgym:ClosestToK-v0``).
* ``answer_type`` (class attribute): the annotation of ``Done``'s ``answer`` (``int``,
  ``str``, ``list[int]`` ...); ``answer_doc``: its one-line description.
* ``generate_config(cls, rng, difficulty)`` (classmethod): a random task config (a JSON
  object: only dicts, lists, str, int, float, bool, None) drawn from the numpy generator
  `rng`; `difficulty` is ``"easy"``, ``"medium"`` or ``"hard"`` and sets the input size.
* ``initial_state(self, config)``: check `config` (raise `ValueError` naming the problem)
  and return the working state: a JSON-like dict (it is deep-copied and pickled, so no
  objects, no generators). ``self.config`` holds the config, read-only.
* ``visible(self)``: what ``Observe`` shows, as a JSON-like dict (sizes, the query; never
  the hidden data).
* ``statement(self)``: the task statement for this config, in a few sentences (what to
  find, what ``Done`` expects); no hints on how to solve it.
* ``reference_answer(self)``: the answer, computed from ``self.config`` by the original
  solution logic.
* tools: methods decorated with `toolgym_tool`. The method name is snake_case and becomes
  a PascalCase tool name (``look_up`` -> ``LookUp``; ``@toolgym_tool(name="GetDPCell")``
  to choose it). Every parameter is typed (``int``, ``str``, ``list[int]`` ...) and
  described in the docstring's ``Args:`` section; the first docstring paragraph is the
  tool's description. A tool returns a ``str`` (structured data as ``json.dumps``), gives
  no hints, and raises `ToolError` (or any exception) for a bad request. A tool may change
  **only** ``self.state`` (never the config, other attributes or ``np_random``): that is
  what the transactional execution snapshots and restores.
* ``oracle(self)``: solves the task through the public tools only, with
  ``self.call("ToolName", arg=value)`` (which returns the tool's output string), and ends
  with ``self.call("Done", answer=...)``. It never reads ``self.state`` or ``self.config``.
  `solve()` runs it and returns the actions. CodeGym's quality filter wants 10..256 calls
  and at least 4 distinct tools (``Observe`` and ``Done`` count) on every difficulty.

Helpers: `item_at` (the body of a tool that reads one item by index, with the range error),
`check_index` (the same range check for a tool that writes at a position),
`check_int_list` (config checks), `draw_length` (a size from a difficulty's bounds),
`ToolGymEnv.check_deadline` (for a tool with a long loop).

Then:

1. register it in ``xpgym/envs/toolgym/__init__.py``: one `EnvEntry` (name, entry point,
   medium / easy / hard descriptions) in ``_ENVS_G`` (brief G) or ``_ENVS_F`` (brief F);
2. test its tools, its reference answer (against a brute force where one exists) and its
   oracle: the family tests in ``tests/envs/test_toolgym.py`` (oracle wins on many seeds and
   every difficulty, check_env, fuzz) pick every registered env up; put the env's own tests
   in a ``tests/envs/test_toolgym_<module>.py`` (see ClosestToK's section of test_toolgym.py);
3. record its golden transcripts (each of its 4 ids)::

       python scripts/record_golden.py toolgym:Name-v0-easy --seed 0 --oracle-actions 4 \
           --action '{"name": "Observe", "parameters": {"extra": 1}}'

4. refresh the README table: ``python scripts/update_env_table.py``.

Env names taken by brief F: ClosestToK, ModeFinding, EditDistance, LargestRectangle,
TwoSum, MaxSubarray, BalancedBrackets. Brief G takes other names.

Actions
-------

One call per turn: ``{"name": "LookUp", "parameters": {"index": 3}}`` bare (text around it
is ignored; the first JSON value is read), as a one-element JSON list (CodeGym's
``<|FunctionCallBegin|>[...]<|FunctionCallEnd|>``, markers optional), or inside
``<tool_call>...</tool_call>`` (Qwen / Hermes). ``"arguments"`` is accepted for
``"parameters"``. Malformed JSON, a list of several calls, an unknown tool or arguments that
do not match the tool's schema are an *invalid action*: the observation is the error, the
state is unchanged, and the call counts towards ``max_tool_calls``.

Step results
------------

Reward is ``0.0`` on every step but ``Done``'s: ``1.0`` if the answer is right, else ``0.0``;
``Done`` terminates. When the call count reaches ``max_tool_calls`` without ``Done``, the
episode is truncated with ``info["truncated_reason"] = "max_tool_calls"``. ``info`` after
every step: ``tool`` (the name called, or `None`), ``tool_calls`` (calls so far),
``invalid_action`` (bool), ``tool_error`` (the error of a call that raised or timed out, else
`None`), ``output`` (the tool's return string, `None` after an error) and, after ``Done``,
``correct`` and ``reference_answer`` (``env.answer_correct`` keeps ``correct``).

Transactions (CodeGym's trial-then-overwrite)
---------------------------------------------

Every tool call runs against a snapshot of ``self.state``; a call that raises, or runs past
``tool_timeout`` seconds, leaves the state exactly as it was and its error is the
observation. Two modes (``isolation=``):

* ``"inline"`` (default): the call runs in this thread on the live state; the snapshot is a
  ``copy.deepcopy`` taken before it (cost: one deep copy of the state per call). On an
  exception the snapshot is put back. A timed-out call cannot be interrupted (Python threads
  cannot be killed): it runs to the end, then its effect is discarded as if it had raised.
  So inline mode keeps the state correct but does not bound a step's latency, unless the
  tool cooperates: a tool with a long loop calls ``self.check_deadline()``, which raises
  once the call is past its limit (the call is then rolled back and reported as timed out).
  A ``KeyboardInterrupt`` or ``SystemExit`` inside a tool is rolled back, then propagated.
* ``"process"``: the call runs in a forked child process on its copy of the env; the child
  sends back the output and the new state (pickled), and the parent commits them. At the
  time limit the child is killed and nothing changes, so a step takes at most about
  `tool_timeout` seconds. Cost: a fork plus pickling the state each call (milliseconds);
  needs the ``fork`` start method (Linux, macOS), and a tool must not rely on anything but
  ``self.state`` (changes elsewhere are lost with the child). Give it a ``tool_timeout``:
  without one a hung child is waited for forever (a child forked from a multi-threaded
  process can hang on a lock another thread held at the fork).

Task strings
------------

``Name@{json config}`` (`task_string`, `parse_task_string`, `from_task_string`) is a task;
``reset(options={"task": ...})`` or ``reset(options={"config": {...}})`` plays it, so a
dataset row is a task. Without either, ``reset`` draws a config from ``np_random`` at the
env's difficulty (``-random``: easy or hard at each reset).
"""

from __future__ import annotations

import copy
import json
import multiprocessing
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np

from xpgym.core.env import Env
from xpgym.core.tools.calls import (
    TOOL_CALL_OPEN,
    FunctionCall,
    find_function_calls,
    function_call_from_value,
    function_schema,
    validate_arguments,
)
from xpgym.core.tools.signature import annotation_schema, signature_schema

__all__ = [
    "CODEGYM_CALL_CLOSE",
    "CODEGYM_CALL_OPEN",
    "DIFFICULTIES",
    "ISOLATION_MODES",
    "DeadlineExceededError",
    "ToolError",
    "ToolGymEnv",
    "canonical_answer",
    "check_index",
    "check_int_list",
    "draw_length",
    "item_at",
    "parse_task_string",
    "parse_tool_call",
    "toolgym_tool",
]

CODEGYM_CALL_OPEN = "<|FunctionCallBegin|>"
CODEGYM_CALL_CLOSE = "<|FunctionCallEnd|>"
DIFFICULTIES = ("easy", "medium", "hard")
"""Config sizes `generate_config` knows; ``difficulty=None`` means ``"medium"``."""
ISOLATION_MODES = ("inline", "process")
DEFAULT_MAX_TOOL_CALLS = 256

_F = TypeVar("_F", bound=Callable[..., str])


class ToolError(Exception):
    """Raised by a tool for a request it refuses (bad index, ...); the message is shown."""


class DeadlineExceededError(ToolError):
    """Raised by `ToolGymEnv.check_deadline` when the running call is past its time limit."""


def _pascal_case(snake: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in snake.split("_") if part)


def toolgym_tool(fn: _F | None = None, *, name: str | None = None) -> Any:
    """Mark a method as a tool; ``@toolgym_tool`` or ``@toolgym_tool(name="GetDPCell")``.

    The tool's name is `name`, or the method name in PascalCase (``look_up`` -> ``LookUp``).
    """

    def mark(method: _F) -> _F:
        method._toolgym_name = name or _pascal_case(method.__name__)  # type: ignore[attr-defined]
        return method

    return mark(fn) if fn is not None else mark


def parse_tool_call(action: str) -> FunctionCall:
    """The one tool call in `action`, in any accepted format (see the module docstring).

    The first ``<tool_call>`` block wins if there is one; else the first JSON value of the
    text (inside CodeGym's markers if present). Never raises: problems are in ``.error``.
    """
    if TOOL_CALL_OPEN in action:
        return find_function_calls(action)[0]
    text = action
    if CODEGYM_CALL_OPEN in text:
        text = text.split(CODEGYM_CALL_OPEN, 1)[1].split(CODEGYM_CALL_CLOSE, 1)[0]
    starts = [index for index in (text.find("{"), text.find("[")) if index >= 0]
    if not starts:
        return FunctionCall(
            None, error='no tool call found: reply with {"name": ..., "parameters": {...}}'
        )
    start = min(starts)
    try:
        value, end = json.JSONDecoder().raw_decode(text, start)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        return FunctionCall(None, error=f"invalid JSON: {exc}")
    if isinstance(value, list):
        if len(value) != 1:
            return FunctionCall(
                None,
                error=f"one call per turn: the JSON list must hold 1 call, got {len(value)}",
            )
        value = value[0]
    return function_call_from_value(value, text[start:end], start, end)


def canonical_answer(value: Any) -> Any:
    """`value` as compared by the default `ToolGymEnv.check_answer`: tuples become lists and
    a float with an integer value becomes that int, recursively; other values unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (list, tuple)):
        return [canonical_answer(item) for item in value]
    if isinstance(value, dict):
        return {key: canonical_answer(item) for key, item in value.items()}
    return value


def check_index(index: int, length: int, what: str = "index") -> None:
    """For a tool that takes a position: refuse one outside ``0..length - 1``.

    Raises:
        ToolError: ``"<what> <index> is out of range 0..<length - 1>"`` (negative ones too).
    """
    if not 0 <= index < length:
        raise ToolError(f"{what} {index} is out of range 0..{length - 1}")


def item_at(sequence: Sequence[Any], index: int, what: str = "index") -> str:
    """For a tool that reads one item: ``json.dumps(sequence[index])``.

    Raises:
        ToolError: `index` is out of range (`check_index`); `what` names the argument.
    """
    check_index(index, len(sequence), what)
    return json.dumps(sequence[index])


def check_int_list(
    value: Any,
    name: str,
    *,
    min_length: int = 1,
    max_length: int = 100_000,
    minimum: int | None = None,
) -> None:
    """For `initial_state`: check that config entry `name` is a list of ints (bools refused)
    of length ``min_length..max_length``, each ``>= minimum`` when given.

    Raises:
        ValueError: naming the entry and the rule it breaks.
    """
    if not isinstance(value, list) or not min_length <= len(value) <= max_length:
        raise ValueError(f"{name!r} must be a list of {min_length}..{max_length} ints")
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        raise ValueError(f"{name!r} must hold only ints")
    if minimum is not None and any(x < minimum for x in value):
        raise ValueError(f"{name!r} must hold ints >= {minimum}")


def draw_length(rng: np.random.Generator, bounds: tuple[int, int]) -> int:
    """For `generate_config`: a size drawn uniformly from the inclusive `bounds`."""
    return int(rng.integers(bounds[0], bounds[1] + 1))


def parse_task_string(task: str) -> tuple[str, dict[str, Any]]:
    """Split ``Name@{json config}`` into the name and the config dict.

    Raises:
        ValueError: no ``@``, an empty or non-identifier name, invalid JSON, or a config
            that is not a JSON object; the message names the problem.
    """
    if not isinstance(task, str):
        raise ValueError(f"a task string is a str 'Name@{{...}}', got {type(task).__name__}")
    name, sep, payload = task.partition("@")
    name = name.strip()
    if not sep:
        raise ValueError(f"task string {task!r:.80} has no '@': expected 'Name@{{json config}}'")
    if not name.isidentifier():
        raise ValueError(f"task string {task!r:.80}: {name!r} is not an env name")
    try:
        config = json.loads(payload)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"task string for {name}: the config is not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ValueError(
            f"task string for {name}: the config must be a JSON object, got {type(config).__name__}"
        )
    return name, config


_PYTHON_TYPES = {
    "integer": "int",
    "string": "str",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
    "null": "None",
}


def _python_type(spec: dict[str, Any]) -> str:
    kind = spec.get("type")
    if kind is None:
        return "Any"
    kinds = kind if isinstance(kind, list) else [kind]
    names = []
    for item in kinds:
        name = _PYTHON_TYPES.get(item, item)
        if item == "array" and "items" in spec:
            name = f"list[{_python_type(spec['items'])}]"
        names.append(name)
    return " | ".join(names)


def _schema_signature(schema: dict[str, Any]) -> str:
    """A tool schema as a Python-style signature with its docstring, for the prompt."""
    function = schema["function"]
    properties = function["parameters"].get("properties", {})
    params = ", ".join(f"{arg}: {_python_type(spec)}" for arg, spec in properties.items())
    lines = [f"{function['name']}({params}) -> str", f"    {function['description']}"]
    described = [
        (arg, spec["description"]) for arg, spec in properties.items() if "description" in spec
    ]
    if described:
        lines.append("    Args:")
        lines.extend(f"        {arg}: {text}" for arg, text in described)
    return "\n".join(lines)


def _failure(tool: str, exc: BaseException, timeout: float | None) -> str:
    """A failed call's observation text (without the ``Error: `` prefix)."""
    if isinstance(exc, DeadlineExceededError):
        return _timed_out(tool, timeout)
    reason = str(exc) if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}"
    return f"{tool} failed: {reason}"


def _timed_out(tool: str, timeout: float | None) -> str:
    return f"{tool} exceeded its time limit of {timeout:g} s"


def _run_in_child(
    env: ToolGymEnv, tool: str, method: str, arguments: dict[str, Any], conn: Any
) -> None:
    """Body of the process-isolated call: run the tool on the child's copy, send back."""
    try:
        output = getattr(env, method)(**arguments)
        conn.send((True, output, env.state))
    except BaseException as exc:  # report anything; the parent rolls back
        conn.send((False, _failure(tool, exc, env.tool_timeout), None))
    finally:
        conn.close()


class ToolGymEnv(Env[str]):
    """Base of the toolgym envs; see the module docstring for what a subclass implements.

    Args:
        difficulty: `None` (``"medium"``), ``"easy"``, ``"medium"``, ``"hard"`` or
            ``"random"`` (easy or hard drawn at each reset): the size of generated configs.
        config: A fixed task config played at every reset (unless reset's options give one).
        max_tool_calls: Calls per episode before truncation (CodeGym's T_max), >= 1.
        isolation: ``"inline"`` or ``"process"`` (see Transactions).
        tool_timeout: Seconds a tool call may take, or `None` for no limit.

    Attributes:
        config: This episode's task config (read-only for tools).
        state: The working state the tools read and change (JSON-like dict).
        tool_calls: Calls made this episode (valid or not).
        answer_correct: Whether this episode's ``Done`` answer was right; `None` before
            ``Done``.
        tools: ``{tool name: function schema}`` (class attribute, in prompt order).

    Raises:
        ValueError: an unknown difficulty or isolation mode, or a bad number.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True, "family": "toolgym"}
    name: ClassVar[str] = ""
    answer_type: ClassVar[Any] = Any
    answer_doc: ClassVar[str] = "The answer to the task."
    tools: ClassVar[dict[str, dict[str, Any]]] = {}
    _tool_methods: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Collect the class's tools (``Observe``, its own in definition order, ``Done``)."""
        super().__init_subclass__(**kwargs)
        methods: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                tool = getattr(value, "_toolgym_name", None)
                if tool is not None:
                    methods.pop(tool, None)
                    methods[tool] = attr
        ordered = ["Observe", *(n for n in methods if n not in ("Observe", "Done")), "Done"]
        cls._tool_methods = {n: methods[n] for n in ordered}
        schemas = {n: signature_schema(getattr(cls, methods[n]), name=n) for n in ordered}
        answer = {**annotation_schema(cls.answer_type, f"{cls.__name__}.answer_type")}
        answer["description"] = cls.answer_doc
        schemas["Done"] = function_schema(
            "Done",
            schemas["Done"]["function"]["description"],
            {
                "type": "object",
                "properties": {"answer": answer},
                "required": ["answer"],
                "additionalProperties": False,
            },
        )
        cls.tools = schemas

    def __init__(
        self,
        difficulty: str | None = None,
        *,
        config: dict[str, Any] | None = None,
        max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
        isolation: str = "inline",
        tool_timeout: float | None = None,
    ) -> None:
        if difficulty not in (None, *DIFFICULTIES, "random"):
            raise ValueError(
                f"{type(self).__name__}: difficulty must be None, 'random' or one of "
                f"{list(DIFFICULTIES)}, got {difficulty!r}"
            )
        if isolation not in ISOLATION_MODES:
            raise ValueError(f"isolation must be one of {ISOLATION_MODES}, got {isolation!r}")
        if isinstance(max_tool_calls, bool) or not isinstance(max_tool_calls, int):
            raise ValueError(f"max_tool_calls must be an int >= 1, got {max_tool_calls!r}")
        if max_tool_calls < 1:
            raise ValueError(f"max_tool_calls must be an int >= 1, got {max_tool_calls!r}")
        if tool_timeout is not None and not tool_timeout > 0:
            raise ValueError(f"tool_timeout must be > 0 seconds or None, got {tool_timeout!r}")
        self.difficulty = difficulty
        self.max_tool_calls = max_tool_calls
        self.isolation = isolation
        self.tool_timeout = tool_timeout
        self._fixed_config = None if config is None else self._checked_config(config)
        self.config: dict[str, Any] = {}
        self.state: dict[str, Any] = {}
        self.tool_calls = 0
        self.answer_correct: bool | None = None
        self.episode_difficulty: str | None = None
        self._oracle_actions: list[str] | None = None
        self._deadline: float | None = None

    # ----- what a subclass implements ---------------------------------------------------

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """A random task config of size `difficulty` (``easy`` / ``medium`` / ``hard``)."""
        raise NotImplementedError(f"{cls.__name__} does not implement generate_config()")

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check `config` (`ValueError` naming the problem) and return the working state."""
        raise NotImplementedError(f"{type(self).__name__} does not implement initial_state()")

    def visible(self) -> dict[str, Any]:
        """What ``Observe`` shows (JSON-like; never the hidden data)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement visible()")

    def statement(self) -> str:
        """The task statement for this config."""
        raise NotImplementedError(f"{type(self).__name__} does not implement statement()")

    def reference_answer(self) -> Any:
        """The answer, computed from ``self.config`` by the original solution logic."""
        raise NotImplementedError(f"{type(self).__name__} does not implement reference_answer()")

    def oracle(self) -> None:
        """Solve the task with ``self.call(...)`` only, ending with ``Done``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement oracle()")

    def check_answer(self, answer: Any) -> bool:
        """Whether `answer` is right: equal to the reference after `canonical_answer`."""
        return canonical_answer(answer) == canonical_answer(self.reference_answer())

    # ----- generic tools ------------------------------------------------------------------

    @toolgym_tool
    def observe(self) -> str:
        """Show the visible part of the task (sizes and the query, not the hidden data)."""
        return json.dumps(self.visible())

    @toolgym_tool
    def done(self, answer: Any) -> str:
        """Submit the final answer; this ends the episode.

        Args:
            answer: The answer to the task.
        """
        return "Correct." if self.check_answer(answer) else "Incorrect."

    # ----- episode ---------------------------------------------------------------------------

    def _checked_config(self, config: Any) -> dict[str, Any]:
        """`config` as a fresh JSON copy, checked by `initial_state` (ValueError if bad)."""
        label = type(self).__name__
        if not isinstance(config, dict):
            raise ValueError(
                f"{label}: a task config is a JSON object, got {type(config).__name__}"
            )
        try:
            config = json.loads(json.dumps(config, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{label}: the task config is not plain JSON ({exc})") from None
        try:
            self.initial_state(config)
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            raise ValueError(f"{label}: bad task config: {type(exc).__name__}: {exc}") from None
        except ValueError as exc:
            raise ValueError(f"{label}: bad task config: {exc}") from None
        return config

    def _config_from(self, options: dict[str, Any] | None) -> dict[str, Any]:
        options = options or {}
        if "task" in options:
            name, config = parse_task_string(options["task"])
            if name != self.name:
                raise ValueError(f"{type(self).__name__} plays {self.name!r} tasks, got {name!r}")
            return self._checked_config(config)
        if "config" in options:
            return self._checked_config(options["config"])
        if self._fixed_config is not None:
            return copy.deepcopy(self._fixed_config)
        return self._checked_config(self.generate_config(self.np_random, self.episode_difficulty))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode on the task from `options` (``task`` / ``config``), the fixed
        config, or a config drawn from `np_random`.

        Returns:
            The prompt (statement, tools, call format) and info ``{"tools": [schemas],
            "task": task string, "difficulty", "max_tool_calls"}``.

        Raises:
            ValueError: a bad task string or config, naming the problem.
        """
        super().reset(seed=seed)
        if self.difficulty == "random":
            self.episode_difficulty = ("easy", "hard")[int(self.np_random.integers(2))]
        else:
            self.episode_difficulty = self.difficulty or "medium"
        self.config = self._config_from(options)
        self.state = self.initial_state(self.config)
        self.tool_calls = 0
        self.answer_correct = None
        info = {
            "tools": list(self.tools.values()),
            "task": self.task_string(),
            "difficulty": self.episode_difficulty,
            "max_tool_calls": self.max_tool_calls,
        }
        return self.prompt(), info

    def prompt(self) -> str:
        """The first observation: CodeGym's prompt in short (no usage examples)."""
        signatures = "\n\n".join(_schema_signature(schema) for schema in self.tools.values())
        return (
            f"{self.statement()}\n\n"
            "Solve the task by calling the tools below; do not write code. The task's data is "
            "hidden: use Observe and the other tools to learn what you need, and submit the "
            "answer with Done.\n\n"
            f"Tools:\n{signatures}\n\n"
            "Call exactly one tool per turn, as JSON: "
            '{"name": <tool name>, "parameters": {<argument>: <value>, ...}}. '
            "Wait for its result before the next call. "
            f"You can make at most {self.max_tool_calls} tool calls."
        )

    def task_string(self) -> str:
        """This episode's task as ``Name@{json config}`` (keys sorted, compact)."""
        return f"{self.name}@{json.dumps(self.config, sort_keys=True, separators=(',', ':'))}"

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Run the one tool call in `action`; see the module docstring for the results."""
        self.tool_calls += 1
        info: dict[str, Any] = {
            "tool": None,
            "tool_calls": self.tool_calls,
            "invalid_action": False,
            "tool_error": None,
            "output": None,
        }
        call = parse_tool_call(action)
        problem = call.error
        if problem is None and call.name not in self.tools:
            problem = f"unknown tool {call.name!r}; the tools are {', '.join(self.tools)}"
        if problem is None:
            params = self.tools[str(call.name)]["function"]["parameters"]
            problem = validate_arguments(call.arguments, params)
            if problem is not None:
                problem = f"{call.name}: {problem}"
        reward, terminated = 0.0, False
        if problem is not None:
            info["invalid_action"] = True
            observation = f"Error: {problem}"
        else:
            info["tool"] = call.name
            if call.name == "Done":
                correct = self.check_answer(call.arguments["answer"])
                info["correct"] = self.answer_correct = correct
                info["reference_answer"] = self.reference_answer()
                reward, terminated = (1.0 if correct else 0.0), True
                observation = self.done(call.arguments["answer"])
                info["output"] = observation
            else:
                output, error = self._transaction(str(call.name), call.arguments)
                info["output"], info["tool_error"] = output, error
                observation = f"Error: {error}" if error is not None else str(output)
        truncated = not terminated and self.tool_calls >= self.max_tool_calls
        if truncated:
            info["truncated_reason"] = "max_tool_calls"
            observation += (
                f"\nNo tool calls left (limit {self.max_tool_calls}); the episode is over."
            )
        return observation, reward, terminated, truncated, info

    def _transaction(self, tool: str, arguments: dict[str, Any]) -> tuple[str | None, str | None]:
        """Run one tool call transactionally: ``(output, None)`` or ``(None, error)``."""
        method = self._tool_methods[tool]
        if self.isolation == "process":
            return self._run_in_process(tool, method, arguments)
        snapshot = copy.deepcopy(self.state)
        self._start_deadline()
        try:
            output = getattr(self, method)(**arguments)
        except BaseException as exc:  # any tool failure is the agent's observation
            self.state = snapshot
            if not isinstance(exc, Exception):
                raise  # KeyboardInterrupt, SystemExit: rolled back, then propagated
            return None, _failure(tool, exc, self.tool_timeout)
        finally:
            deadline, self._deadline = self._deadline, None
        if deadline is not None and time.monotonic() > deadline:
            self.state = snapshot
            return None, _timed_out(tool, self.tool_timeout)
        return self._checked_output(tool, output), None

    def _start_deadline(self) -> None:
        self._deadline = None if self.tool_timeout is None else time.monotonic() + self.tool_timeout

    def check_deadline(self) -> None:
        """For a tool with a long loop: raise `DeadlineExceededError` once the running call is
        past ``tool_timeout``, so that inline mode stops it early (it is rolled back and
        reported like any time-out). Does nothing without a time limit or outside a call."""
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise DeadlineExceededError(f"past the time limit of {self.tool_timeout:g} s")

    def _run_in_process(
        self, tool: str, method: str, arguments: dict[str, Any]
    ) -> tuple[str | None, str | None]:
        context = multiprocessing.get_context("fork")
        receiver, sender = context.Pipe(duplex=False)
        self._start_deadline()  # the child's copy checks it in check_deadline()
        child = context.Process(target=_run_in_child, args=(self, tool, method, arguments, sender))
        try:
            child.start()
        finally:
            self._deadline = None
        sender.close()
        try:
            if not receiver.poll(self.tool_timeout):
                child.kill()
                return None, _timed_out(tool, self.tool_timeout)
            try:
                ok, output, state = receiver.recv()
            except EOFError:
                return None, f"{tool} failed: the call's process died without an answer"
        finally:
            receiver.close()
            child.join()
        if not ok:
            return None, output
        output = self._checked_output(tool, output)
        self.state = state
        return output, None

    def _checked_output(self, tool: str, output: Any) -> str:
        if not isinstance(output, str):
            raise TypeError(
                f"{type(self).__name__}.{self._tool_methods[tool]} must return a str, got "
                f"{type(output).__name__}"
            )
        return output

    # ----- oracle ----------------------------------------------------------------------------

    def call(self, tool: str, **arguments: Any) -> str:
        """For `oracle`: call `tool` through `step()` and return its output.

        Raises:
            RuntimeError: the call was invalid, failed, or the episode ended before `Done`
                (an oracle bug), naming the call.
        """
        action = json.dumps({"name": tool, "parameters": arguments})
        if self._oracle_actions is not None:
            self._oracle_actions.append(action)
        observation, _, terminated, truncated, info = self.step(action)
        if info["invalid_action"] or info["tool_error"] is not None:
            raise RuntimeError(f"{type(self).__name__} oracle: {action} failed: {observation}")
        if truncated or (terminated and tool != "Done"):
            raise RuntimeError(f"{type(self).__name__} oracle: the episode ended at {action}")
        return str(info["output"])

    def solve(self) -> list[str]:
        """Run the oracle from the current (just reset) episode; return the actions it sent.

        Raises:
            RuntimeError: the oracle made a bad call or did not end with ``Done``.
        """
        self._oracle_actions = []
        try:
            self.oracle()
            actions = self._oracle_actions
        finally:
            self._oracle_actions = None
        if not actions or json.loads(actions[-1])["name"] != "Done":
            raise RuntimeError(f"{type(self).__name__} oracle did not end with Done")
        return actions

    # ----- Env API -----------------------------------------------------------------------------

    def available_actions(self) -> None:
        """`None`: tool calls with arguments are not enumerable."""
        return None

    def random_arguments(self, tool: str) -> dict[str, Any]:
        """Plausible random arguments for `tool`, from its schema and `np_random` (for
        fuzzing); integers are drawn in ``-1..2 * max(visible sizes)``. Override for more."""
        rng = self.np_random
        sizes = [v for v in self.visible().values() if isinstance(v, int) and v > 0]
        high = 2 * max(sizes, default=10) + 1
        properties = self.tools[tool]["function"]["parameters"].get("properties", {})
        return {arg: _random_value(spec, rng, high) for arg, spec in properties.items()}

    def sample_random_action(self) -> str:
        """A call of a random tool with `random_arguments` (may be invalid or wrong)."""
        names = list(self.tools)
        tool = names[int(self.np_random.integers(len(names)))]
        return json.dumps({"name": tool, "parameters": self.random_arguments(tool)})

    def get_state(self) -> dict[str, Any]:
        """Snapshot: config, working state, counters, difficulty and RNG (fresh copies)."""
        return {
            "config": copy.deepcopy(self.config),
            "state": copy.deepcopy(self.state),
            "tool_calls": self.tool_calls,
            "answer_correct": self.answer_correct,
            "episode_difficulty": self.episode_difficulty,
            "rng": self.np_random.bit_generator.state,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a `get_state()` snapshot of an env of the same class."""
        self.config = copy.deepcopy(state["config"])
        self.state = copy.deepcopy(state["state"])
        self.tool_calls = state["tool_calls"]
        self.answer_correct = state["answer_correct"]
        self.episode_difficulty = state["episode_difficulty"]
        self.np_random.bit_generator.state = state["rng"]


def _random_value(schema: dict[str, Any], rng: np.random.Generator, high: int) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if "enum" in schema:
        return schema["enum"][int(rng.integers(len(schema["enum"])))]
    if kind == "string":
        return "".join(rng.choice(list("abc()[]{}"), size=int(rng.integers(0, 6))))
    if kind == "boolean":
        return bool(rng.integers(2))
    if kind == "number":
        return float(rng.uniform(-1, high))
    if kind == "array":
        item = schema.get("items", {"type": "integer"})
        return [_random_value(item, rng, high) for _ in range(int(rng.integers(0, 4)))]
    return int(rng.integers(-1, high))
