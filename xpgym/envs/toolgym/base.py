r"""The ``toolgym:`` template: CodeGym-style tool-use environments (arXiv 2509.17325).

A toolgym env turns a small coding problem into a multi-turn task that the agent solves by
**calling tools**, one per turn, never by writing code. The problem instance (the *task
config*) is hidden; ``Observe`` shows only part of it (sizes, the query), the other tools read
or change a small working state, and ``Done(answer)`` ends the episode with reward 1.0 if the
answer equals the reference answer, else 0.0. There is no other reward.

This module is the env template (`ToolGymEnv`) and its helpers for env authors; the text
it reads and writes (actions, task strings, the prompt's tool signatures) is in
`xpgym.envs.toolgym.formats`, the transactional run of a tool call (inline or in a forked
process) in `xpgym.envs.toolgym.isolation`.

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
* tools: methods decorated with the core's ``@tool`` (`xpgym.core.tools.decorator.tool`;
  its schema from `xpgym.core.tools.signature.signature_schema`). The method name is
  snake_case and becomes a PascalCase tool name (``look_up`` -> ``LookUp``;
  ``@tool(name="GetDPCell")`` to choose it). Every parameter is typed (``int``, ``str``,
  ``list[int]`` ...) and described in the docstring's ``Args:`` section; the first docstring
  paragraph is the tool's description (or ``@tool(description=...)``). A tool returns a
  ``str`` (structured data as ``json.dumps``), gives no hints, and raises
  `xpgym.core.tools.decorator.ToolError` (its message is the error) or any exception (its
  type is shown too) for a bad request. The env's ``tool_timeout`` and ``isolation`` bound
  its calls: an async method (and so ``timeout_s``) and ``@tool``'s ``env``, ``resource`` and
  ``tag`` are refused (`TypeError` when the class is made). A tool may change **only**
  ``self.state`` (never the config, other attributes or ``np_random``): that is what the
  transactional execution snapshots and restores. The method stays a method:
  ``env.look_up(3)`` calls it directly, outside any transaction.
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

4. refresh the env tables (docs/envs.md and the README): ``python scripts/update_env_table.py``.

Env names taken by brief F: ClosestToK, ModeFinding, EditDistance, LargestRectangle,
TwoSum, MaxSubarray, BalancedBrackets. Brief G takes other names.

Actions
-------

One call per turn, as JSON: ``{"name": "LookUp", "parameters": {"index": 3}}``, bare, in a
one-element list or in ``<tool_call>`` (the accepted formats: `xpgym.envs.toolgym.formats`).
Malformed JSON, a list of several calls, an unknown tool or arguments that do not match the
tool's schema are an *invalid action*: the observation is the error, the state is unchanged,
and the call counts towards ``max_tool_calls``.

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
observation. ``isolation="inline"`` (default: a deep copy per call; a call past its limit
runs to its end unless it calls ``self.check_deadline()``) or ``"process"`` (a forked child
per call, killed at the limit): `xpgym.envs.toolgym.isolation` describes both and what
they cost.

Task strings
------------

``Name@{json config}`` (`task_string`, `xpgym.envs.toolgym.formats.parse_task_string`,
`from_task_string`) is a task; ``reset(options={"task": ...})`` or
``reset(options={"config": {...}})`` plays it, so a dataset row is a task. Without either,
``reset`` draws a config from ``np_random`` at the env's difficulty (``-random``: easy or
hard at each reset).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from xpgym.core.env import Env
from xpgym.core.tools.calls import function_schema, random_value, validate_arguments
from xpgym.core.tools.decorator import FunctionTool, ToolError, tool
from xpgym.core.tools.signature import annotation_schema
from xpgym.envs.toolgym.formats import (
    format_task_string,
    parse_task_string,
    parse_tool_call,
    tool_signature,
)
from xpgym.envs.toolgym.isolation import ISOLATION_MODES, CallDeadline, run_in_process, run_inline

__all__ = [
    "DEFAULT_MAX_TOOL_CALLS",
    "DIFFICULTIES",
    "ToolGymEnv",
    "canonical_answer",
    "check_index",
    "check_int_list",
    "draw_length",
    "item_at",
]

DIFFICULTIES = ("easy", "medium", "hard")
"""Config sizes `generate_config` knows; ``difficulty=None`` means ``"medium"``."""
DEFAULT_MAX_TOOL_CALLS = 256


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


def _pascal_case(snake: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in snake.split("_") if part)


def _tool_name(declared: FunctionTool, where: str) -> str:
    """The toolgym name of a ``@tool`` method: its own name in PascalCase unless ``@tool(name=)``
    chose another; refuses what a toolgym tool cannot honour (see the module docstring)."""
    refused = [
        option
        for option, used in (
            ("an async method", declared.is_async),
            ("env=", declared.env_class is not None),
            ("resource=", declared.resource_pool is not None),
            ("tag=", declared.tag is not None),
        )
        if used
    ]
    if refused:
        raise TypeError(
            f"{where}: a toolgym tool is a plain method, its calls bounded by the env's "
            f"tool_timeout and isolation; not {', '.join(refused)}"
        )
    method = declared.fn.__name__
    return _pascal_case(method) if declared.name == method else declared.name


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
        """Collect the class's ``@tool`` methods (``Observe``, its own in definition order,
        ``Done``) and their schemas.

        Raises:
            TypeError: a tool declared with what a toolgym tool cannot honour (see the
                module docstring), or a schema that cannot be inferred.
        """
        super().__init_subclass__(**kwargs)
        methods: dict[str, str] = {}
        declared: dict[str, FunctionTool] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                if isinstance(value, FunctionTool):
                    name = _tool_name(value, f"{klass.__name__}.{attr}")
                    methods.pop(name, None)
                    methods[name] = attr
                    declared[name] = value
        ordered = ["Observe", *(n for n in methods if n not in ("Observe", "Done")), "Done"]
        cls._tool_methods = {n: methods[n] for n in ordered}
        schemas = {
            n: function_schema(n, declared[n].description, declared[n].parameters) for n in ordered
        }
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
        self._deadline = CallDeadline()

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

    @tool
    def observe(self) -> str:
        """Show the visible part of the task (sizes and the query, not the hidden data)."""
        return json.dumps(self.visible())

    @tool
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

    def _config_from(self, options: dict[str, Any] | None, difficulty: str) -> dict[str, Any]:
        """This episode's config: from `options`, the fixed one, or drawn at `difficulty`."""
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
        return self._checked_config(self.generate_config(self.np_random, difficulty))

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
            difficulty = ("easy", "hard")[int(self.np_random.integers(2))]
        else:
            difficulty = self.difficulty or "medium"
        self.episode_difficulty = difficulty
        self.config = self._config_from(options, difficulty)
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
        signatures = "\n\n".join(tool_signature(schema) for schema in self.tools.values())
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
        return format_task_string(self.name, self.config)

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
        """Run one tool call transactionally (`xpgym.envs.toolgym.isolation`): ``(output,
        None)`` or ``(None, error)``."""
        run = run_in_process if self.isolation == "process" else run_inline
        return run(
            self,
            tool,
            functools.partial(getattr(self, self._tool_methods[tool]), **arguments),
            deadline=self._deadline,
            timeout_s=self.tool_timeout,
            check_output=functools.partial(self._checked_output, tool),
        )

    def check_deadline(self) -> None:
        """For a tool with a long loop: raise `isolation.DeadlineExceededError` once the call is
        past ``tool_timeout``, so that inline mode stops it early (it is rolled back and
        reported like any time-out). Does nothing without a time limit or outside a call."""
        self._deadline.check()

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
        return {arg: random_value(spec, rng, high) for arg, spec in properties.items()}

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
