r"""The text a toolgym env reads and writes: actions (one tool call), task strings, and the
tool signatures of its prompt.

Actions
-------

One call per turn: ``{"name": "LookUp", "parameters": {"index": 3}}`` bare (text around it
is ignored; the first JSON value is read), as a one-element JSON list (CodeGym's
``<|FunctionCallBegin|>[...]<|FunctionCallEnd|>``, markers optional), or inside
``<tool_call>...</tool_call>`` (Qwen / Hermes). ``"arguments"`` is accepted for
``"parameters"``. `parse_tool_call` reads it.

Task strings
------------

``Name@{json config}`` is a task: `format_task_string` writes one (keys sorted, compact),
`parse_task_string` reads one.
"""

from __future__ import annotations

import json
from typing import Any

from xpgym.core.tools.calls import (
    TOOL_CALL_OPEN,
    FunctionCall,
    find_function_calls,
    function_call_from_value,
)

__all__ = [
    "CODEGYM_CALL_CLOSE",
    "CODEGYM_CALL_OPEN",
    "format_task_string",
    "parse_task_string",
    "parse_tool_call",
    "tool_signature",
]

CODEGYM_CALL_OPEN = "<|FunctionCallBegin|>"
CODEGYM_CALL_CLOSE = "<|FunctionCallEnd|>"


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


def format_task_string(name: str, config: dict[str, Any]) -> str:
    """``Name@{json config}``, the config's keys sorted, without spaces."""
    return f"{name}@{json.dumps(config, sort_keys=True, separators=(',', ':'))}"


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
    names: list[str] = []
    for item in kinds:
        name = _PYTHON_TYPES.get(item, str(item))
        if item == "array" and "items" in spec:
            name = f"list[{_python_type(spec['items'])}]"
        names.append(name)
    return " | ".join(names)


def tool_signature(schema: dict[str, Any]) -> str:
    """A tool's function schema as a Python-style signature with its docstring (the prompt's
    tool list): ``Name(arg: type, ...) -> str``, the description, then ``Args:`` lines."""
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
