r"""Parsers for the two tool-call formats, argument validation and instruction text.

Every `Tool.parse` builds on these functions, so no tool re-implements parsing and every tool
reads the formats the same way.

Formats
-------

**Tag style.** ``<name>content</name>``, e.g. ``<python>print(1)</python>`` or
``<search>capital of France</search>``. The tag name is matched exactly (case-sensitive, no
attributes, no spaces inside the brackets). The content runs from the first ``<name>`` to the
first ``</name>`` after it; a nested ``<name>`` is part of the content. Code tools also accept
a Markdown fence, ````` ```python ````` + newline + code + ````` ``` `````, where the language
word (case-insensitive) is one of the tool's `fence_languages`.

**JSON function calls.** What Qwen / Hermes chat templates emit::

    <tool_call>
    {"name": "python", "arguments": {"code": "print(1)"}}
    </tool_call>

The block holds exactly one JSON object with a non-empty string ``"name"`` and an optional
``"arguments"`` object (missing means ``{}``). ``"parameters"`` is accepted in place of
``"arguments"`` (Llama 3.1 style), and ``"arguments"`` given as a string that holds a JSON
object (OpenAI style) is decoded. A final ``<tool_call>`` with no closing tag (the generation
stopped on ``</tool_call>``) is read up to the end of its first JSON value. Problems (invalid
JSON, a missing name, arguments that are not an object) are *reported* in
`FunctionCall.error`, never raised.

Precedence
----------

When an action holds several calls, **the first one by position in the text wins** and the
rest are ignored: `find_tag` and `find_fenced_block` return the first match, `parse_call`
returns the earliest call of the tool in any enabled format, and the tool wrapper
(`xpgym.core.wrappers.tools.ToolEnvWrapper`) runs the earliest call among all its tools'.
Only one call is executed per turn.

Validation
----------

`validate_arguments` checks the subset of JSON Schema that function parameters use: ``type``
(``object``, ``string``, ``integer``, ``number``, ``boolean``, ``array``, ``null``, or a list
of them), ``properties``, ``required``, ``additionalProperties`` (``false`` or a schema),
``items`` and ``enum``. Other keywords are ignored (accepted), so a richer schema is checked
less strictly, never wrongly rejected. No external dependency.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from xpgym.core.tools.base import ToolCall

if TYPE_CHECKING:
    import numpy as np

    from xpgym.core.tools.base import Tool

__all__ = [
    "TOOL_CALL_CLOSE",
    "TOOL_CALL_OPEN",
    "FunctionCall",
    "TagMatch",
    "find_fenced_block",
    "find_function_calls",
    "find_tag",
    "format_function_call",
    "format_function_instructions",
    "format_tool_instructions",
    "function_call_from_value",
    "function_schema",
    "parse_call",
    "random_value",
    "validate_arguments",
]

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"

_TAG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]*")
_JSON_TYPE_NAMES = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    list: "array",
    tuple: "array",
    dict: "object",
    type(None): "null",
}


class TagMatch(NamedTuple):
    """One match of a tag or fenced block.

    Attributes:
        content: The text between the opening and closing markers, unchanged.
        raw: The whole span, markers included (``action[start:end]``).
        start: Index of the first character of `raw` in the action.
        end: Index one past the last character of `raw`.
    """

    content: str
    raw: str
    start: int
    end: int


@dataclass(frozen=True)
class FunctionCall:
    """One ``<tool_call>`` block, parsed or not.

    Attributes:
        name: The function name, or `None` when it could not be read (invalid JSON, no
            ``"name"``, or a name that is not a non-empty string).
        arguments: The arguments object (``{}`` when missing or when `error` is set).
        raw: The whole block, ``<tool_call>`` and ``</tool_call>`` included
            (``action[start:end]``).
        start: Index of the block in the action. end: Index one past it.
        error: What is wrong with the block, or `None` for a well-formed call. A block whose
            name was read but whose arguments are not an object has both `name` and `error`.
    """

    name: str | None
    arguments: dict[str, Any] = field(default_factory=dict)
    raw: str = ""
    start: int = 0
    end: int = 0
    error: str | None = None


def _check_tag_name(tag: str) -> None:
    if not isinstance(tag, str) or not _TAG_NAME.fullmatch(tag):
        raise ValueError(f"tag name must match {_TAG_NAME.pattern!r} (e.g. 'python'), got {tag!r}")


def find_tag(action: str, tag: str, *, allow_unclosed: bool = False) -> TagMatch | None:
    """The first ``<tag>...</tag>`` in `action`, or `None`.

    Args:
        action: The model's text.
        tag: The tag name, matched exactly (``"python"`` matches ``<python>`` only).
        allow_unclosed: Also match a ``<tag>`` with no closing tag after it; its content
            runs to the end of the text (for generations stopped on ``</tag>``).

    Returns:
        The match whose opening tag comes first; its content ends at the first ``</tag>``
        after the opening tag.

    Raises:
        ValueError: `tag` is not a valid tag name.
    """
    _check_tag_name(tag)
    opening, closing = f"<{tag}>", f"</{tag}>"
    start = action.find(opening)
    if start < 0:
        return None
    content_start = start + len(opening)
    close = action.find(closing, content_start)
    if close < 0:
        if not allow_unclosed:
            return None
        return TagMatch(action[content_start:], action[start:], start, len(action))
    end = close + len(closing)
    return TagMatch(action[content_start:close], action[start:end], start, end)


def find_fenced_block(action: str, languages: Sequence[str] = ("python", "py")) -> TagMatch | None:
    """The first Markdown fenced block in `action` whose language is in `languages`.

    A block opens with ````` ``` ````` followed by a language word and a newline, and closes
    at the next ````` ``` `````. Blocks in other languages (or none) are skipped whole, so a
    closing fence is never mistaken for an opening one. Unclosed blocks do not match.

    Returns:
        The match: `content` is the text between the opening line and the closing fence
        (usually ending with a newline); `raw` runs from the opening fence through the
        closing one.
    """
    wanted = {language.lower() for language in languages}
    pos = 0
    while True:
        start = action.find("```", pos)
        if start < 0:
            return None
        eol = action.find("\n", start + 3)
        if eol < 0:
            return None
        close = action.find("```", eol + 1)
        if close < 0:
            return None
        words = action[start + 3 : eol].split()
        if words and words[0].lower() in wanted:
            end = close + 3
            return TagMatch(action[eol + 1 : close], action[start:end], start, end)
        pos = close + 3


def _type_name(value: Any) -> str:
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def _decode_block(body: str, *, closed: bool) -> tuple[Any, int, str | None]:
    """Decode a ``<tool_call>`` body: ``(object, characters used, error)``.

    A closed block must hold exactly one JSON value; an unclosed one is read up to the end
    of its first JSON value.
    """
    stripped = body.lstrip()
    offset = len(body) - len(stripped)
    if not stripped.strip():
        return None, len(body), f"empty {TOOL_CALL_OPEN} block"
    try:
        value, used = json.JSONDecoder().raw_decode(stripped)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        return None, len(body), f"invalid JSON in {TOOL_CALL_OPEN} block: {exc.msg} ({where})"
    except (ValueError, RecursionError) as exc:  # e.g. too many digits, nesting too deep
        return None, len(body), f"invalid JSON in {TOOL_CALL_OPEN} block: {exc}"
    if closed:
        if stripped[used:].strip():
            return (
                None,
                len(body),
                (
                    f"invalid JSON in {TOOL_CALL_OPEN} block: text after the JSON object; put "
                    f"one call per block"
                ),
            )
        return value, len(body), None
    return value, offset + used, None


def function_call_from_value(
    value: Any, raw: str = "", start: int = 0, end: int = 0
) -> FunctionCall:
    """A decoded JSON value read as one call ``{"name", "arguments" | "parameters"}``.

    The rules of the ``<tool_call>`` format (see the module docstring) for a value found in
    any wrapper. Problems are reported in `FunctionCall.error`, never raised.
    """
    if not isinstance(value, dict):
        return FunctionCall(
            None, {}, raw, start, end, f"expected a JSON object, got {_type_name(value)}"
        )
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        return FunctionCall(
            None, {}, raw, start, end, 'missing "name": the call needs a non-empty string name'
        )
    key = "arguments" if "arguments" in value or "parameters" not in value else "parameters"
    arguments = value.get(key, {})
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return FunctionCall(
                name, {}, raw, start, end, f'"{key}" must be a JSON object, got a string'
            )
    if not isinstance(arguments, dict):
        return FunctionCall(
            name,
            {},
            raw,
            start,
            end,
            f'"{key}" must be a JSON object, got {_type_name(arguments)}',
        )
    return FunctionCall(name, arguments, raw, start, end)


def find_function_calls(action: str) -> list[FunctionCall]:
    """Every ``<tool_call>...</tool_call>`` block in `action`, in order of position.

    Malformed blocks are returned with `FunctionCall.error` set; nothing is raised. A final
    ``<tool_call>`` without a closing tag is read up to the end of its first JSON value
    (`raw` then ends there).
    """
    calls: list[FunctionCall] = []
    pos = 0
    while True:
        start = action.find(TOOL_CALL_OPEN, pos)
        if start < 0:
            return calls
        body_start = start + len(TOOL_CALL_OPEN)
        close = action.find(TOOL_CALL_CLOSE, body_start)
        closed = close >= 0
        body = action[body_start:close] if closed else action[body_start:]
        value, used, error = _decode_block(body, closed=closed)
        end = close + len(TOOL_CALL_CLOSE) if closed else body_start + used
        raw = action[start:end]
        if error is not None:
            calls.append(FunctionCall(None, {}, raw, start, end, error))
        else:
            calls.append(function_call_from_value(value, raw, start, end))
        if not closed:
            return calls
        pos = end


def _describe(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{_type_name(value)} {text}"


def _has_type(value: Any, type_name: str) -> bool:
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if type_name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_name == "boolean":
        return isinstance(value, bool)
    if type_name == "array":
        return isinstance(value, (list, tuple))
    if type_name == "object":
        return isinstance(value, Mapping)
    if type_name == "null":
        return value is None
    return True  # unknown type names are not checked


def _where(path: str) -> str:
    return f"argument {path!r}" if path else "arguments"


def _validate(value: Any, schema: Any, path: str) -> str | None:
    if not isinstance(schema, Mapping):
        return None
    expected = schema.get("type")
    if expected is not None:
        names = [expected] if isinstance(expected, str) else list(expected)
        if not any(_has_type(value, name) for name in names):
            return f"{_where(path)}: expected {' or '.join(names)}, got {_describe(value)}"
    enum = schema.get("enum")
    if isinstance(enum, list) and not any(
        value == option and type(value) is type(option) for option in enum
    ):
        allowed = ", ".join(json.dumps(option) for option in enum)
        return f"{_where(path)}: must be one of {allowed}, got {_describe(value)}"
    if isinstance(value, Mapping):
        return _validate_object(value, schema, path)
    items = schema.get("items")
    if isinstance(value, (list, tuple)) and isinstance(items, Mapping):
        for index, item in enumerate(value):
            error = _validate(item, items, f"{path}[{index}]")
            if error is not None:
                return error
    return None


def _validate_object(value: Mapping[str, Any], schema: Mapping[str, Any], path: str) -> str | None:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    prefix = f"{path}." if path else ""
    required = schema.get("required")
    for name in required if isinstance(required, (list, tuple)) else ():
        if name not in value:
            return f"missing required argument {prefix + str(name)!r}"
    additional = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            error = _validate(item, properties[name], prefix + str(name))
        elif additional is False:
            known = ", ".join(map(repr, properties)) or "none"
            return f"unexpected argument {prefix + str(name)!r} (accepted: {known})"
        else:
            error = _validate(item, additional, prefix + str(name))
        if error is not None:
            return error
    return None


def validate_arguments(arguments: Any, schema: Mapping[str, Any] | None) -> str | None:
    """Check `arguments` against a function's ``parameters`` JSON schema.

    Args:
        arguments: The decoded arguments (normally a dict).
        schema: The ``parameters`` schema, e.g. ``{"type": "object", "properties": {"n":
            {"type": "integer"}}, "required": ["n"]}``; `None` accepts anything.

    Returns:
        `None` if the arguments conform, else one message naming the first problem, e.g.
        ``"missing required argument 'code'"`` or ``"argument 'n': expected integer, got
        string \\"abc\\""``. See the module docstring for the keywords checked.
    """
    if schema is None:
        return None
    return _validate(arguments, schema, "")


def random_value(schema: Mapping[str, Any], rng: np.random.Generator, high: int = 10) -> Any:
    """A random value of the JSON schema `schema`, drawn from `rng`, for fuzzing tool calls
    and sampling random actions (it may well be a wrong or invalid argument).

    An ``enum`` gives one of its options; a list of types uses the first. Strings are 0..5
    characters of ``abc()[]{}``, numbers are uniform in ``[-1, high)``, integers (and any
    other or missing type) in ``-1..high - 1``, arrays hold 0..3 items of ``items`` (integers
    by default), and objects one value per listed property.
    """
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
        return [random_value(item, rng, high) for _ in range(int(rng.integers(0, 4)))]
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: random_value(spec, rng, high) for name, spec in properties.items()}
    return int(rng.integers(-1, high))


def parse_call(
    action: str,
    name: str,
    *,
    parameters: Mapping[str, Any] | None = None,
    tag: str | None = None,
    tag_argument: str | None = None,
    fence_languages: Sequence[str] = (),
    json_calls: bool = True,
) -> ToolCall | None:
    """The first call of tool `name` in `action`, in any enabled format; a ready `Tool.parse`.

    Formats looked for: ``<tag>content</tag>`` (when `tag` is given), fenced blocks in
    `fence_languages`, and ``<tool_call>`` blocks whose name is `name` (when `json_calls`).
    The earliest by position wins. Tag and fence content becomes ``{tag_argument:
    content}``, dedented and stripped; an empty content is an error. JSON arguments are
    checked with `validate_arguments` against `parameters`. ``<tool_call>`` blocks with
    another name, or none, are left alone (the wrapper reports those).

    Args:
        action: The model's text.
        name: The tool's name (`ToolCall.tool`, and the JSON ``"name"`` it answers to).
        parameters: The function's ``parameters`` schema, for JSON calls.
        tag: Tag name for the tag format, e.g. ``"python"``; `None` disables it.
        tag_argument: The argument the tag content fills, e.g. ``"code"``.
        fence_languages: Languages of fenced blocks to accept, e.g. ``("python", "py")``.
        json_calls: Accept ``<tool_call>`` blocks named `name`.

    Returns:
        `None` if the action holds no call of this tool, else a `ToolCall` whose `raw` is the
        matched span and whose `error` is set when the call is malformed.

    Raises:
        ValueError: `tag` or `fence_languages` given without `tag_argument`, or a bad tag.
    """
    if (tag is not None or fence_languages) and not tag_argument:
        raise ValueError(f"tool {name!r}: tag and fenced formats need tag_argument")
    found: list[tuple[int, ToolCall]] = []
    for match, label in (
        (find_tag(action, tag) if tag is not None else None, f"<{tag}>"),
        (find_fenced_block(action, fence_languages) if fence_languages else None, "```"),
    ):
        if match is None:
            continue
        content = textwrap.dedent(match.content).strip()
        error = None if content else f"empty {label} block: put the input inside it"
        found.append((match.start, ToolCall(name, {str(tag_argument): content}, match.raw, error)))
    if json_calls and TOOL_CALL_OPEN in action:
        for call in find_function_calls(action):
            if call.name != name:
                continue
            error = call.error or validate_arguments(call.arguments, parameters)
            found.append((call.start, ToolCall(name, call.arguments, call.raw, error)))
            break
    if not found:
        return None
    return min(found, key=lambda item: item[0])[1]


def function_schema(
    name: str, description: str, parameters: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A tool as the function schema chat templates take in ``tools=``.

    Returns:
        ``{"type": "function", "function": {"name", "description", "parameters"}}``, with
        ``parameters`` defaulting to an object schema without properties.
    """
    params = dict(parameters) if parameters is not None else {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": params},
    }


def format_function_call(name: str, arguments: Mapping[str, Any]) -> str:
    """One call in the JSON function-call format, as a model writes it:
    ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (what `find_function_calls`
    reads back as `name` and `arguments`).

    Raises:
        TypeError: `arguments` is not JSON-serialisable.
    """
    call = json.dumps({"name": name, "arguments": dict(arguments)})
    return f"{TOOL_CALL_OPEN}{call}{TOOL_CALL_CLOSE}"


def format_tool_instructions(tools: Sequence[Tool], *, max_tool_calls: int | None = None) -> str:
    """Instructions for the tag formats: a short header, then each tool's `instructions()`.

    The header says that only the first call of a reply runs, that a reply without a tool
    call answers the task, and the call budget when `max_tool_calls` is given.
    """
    header = (
        "You can use the tools below. Only the first tool call in a reply is run, and its "
        "output is sent back to you. A reply without a tool call is your answer to the task."
    )
    if max_tool_calls is not None:
        header += f" You can make at most {max_tool_calls} tool calls in this episode."
    parts = [header, *(tool.instructions().strip() for tool in tools)]
    return "\n\n".join(part for part in parts if part)


def format_function_instructions(schemas: Sequence[Mapping[str, Any]]) -> str:
    """Hermes / Qwen style instructions for JSON function calls, listing `schemas`.

    For prompts built without a chat template's ``tools=`` argument (a template that takes
    ``tools=`` writes an equivalent text itself). Each schema is one JSON line inside
    ``<tools></tools>``.
    """
    listed = "\n".join(json.dumps(schema, ensure_ascii=False) for schema in schemas)
    return (
        "You may call a function to help with the task. The function signatures are within "
        f"<tools></tools> XML tags:\n<tools>\n{listed}\n</tools>\n\n"
        "To call a function, return a JSON object with the function name and arguments "
        f"within {TOOL_CALL_OPEN}{TOOL_CALL_CLOSE} XML tags:\n"
        f'{TOOL_CALL_OPEN}\n{{"name": <function-name>, "arguments": <args-json-object>}}\n'
        f"{TOOL_CALL_CLOSE}\nOnly the first call in a reply is run."
    )
