r"""JSON schemas inferred from a Python function's signature and docstring.

`signature_schema(fn)` gives what a chat template's ``tools=`` needs (`function_schema`):
the description is the docstring's first paragraph, each parameter's type comes from its
annotation and its description from the docstring's ``Args:`` section (Google style,
``name: text`` or ``name (type): text``, continued on more-indented lines) or from reST
``:param name: text`` lines.

Annotations and the JSON schema they give:

================================  ==============================================
annotation                        schema
================================  ==============================================
``str`` / ``int`` / ``float``     ``{"type": "string" / "integer" / "number"}``
``bool`` / ``None``               ``{"type": "boolean" / "null"}``
``list[X]``, ``tuple[X, ...]``,   ``{"type": "array", "items": <X>}`` (bare: no
``Sequence[X]``, ``set[X]``       ``items``)
``dict[str, X]``, ``Mapping``     ``{"type": "object", "additionalProperties": <X>}``
``Literal["a", "b"]``             ``{"type": "string", "enum": ["a", "b"]}``
an `enum.Enum` subclass           ``{"enum": [member values]}``
``X | None``, ``Optional[X]``     ``<X>`` with ``"null"`` added to its type
``Any``, no annotation            ``{}`` (anything)
================================  ==============================================

A parameter without a default is required; a default that JSON can hold is recorded as
``"default"``. ``*args``, ``**kwargs``, positional-only parameters and other annotations
raise `TypeError` naming the parameter, so a tool never advertises a schema its function
cannot take. The object schema sets ``"additionalProperties": false``.
"""

from __future__ import annotations

import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Collection, Mapping, MutableMapping, MutableSequence, Sequence
from typing import Any

from xpgym.core.tools.calls import function_schema

__all__ = ["annotation_schema", "docstring_parts", "parameters_schema", "signature_schema"]

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
_ARRAYS = (list, tuple, set, frozenset, Sequence, MutableSequence, Collection)
_OBJECTS = (dict, Mapping, MutableMapping)
_SECTION = re.compile(r"^(\w[\w ]*):\s*$")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def annotation_schema(annotation: Any, where: str = "annotation") -> dict[str, Any]:
    """The JSON schema of one annotation (see the module table).

    Raises:
        TypeError: the annotation has no JSON form; the message names `where`.
    """
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {"enum": [member.value for member in annotation]}
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        kinds = sorted({_SCALARS[type(value)] for value in args if type(value) in _SCALARS})
        if len(kinds) != 1 or len(args) == 0:
            raise TypeError(f"{where}: Literal values must be of one JSON scalar type")
        return {"type": kinds[0], "enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        return _union_schema(args, where)
    if annotation in _ARRAYS or origin in _ARRAYS:
        items = [a for a in args if a is not Ellipsis]
        schema: dict[str, Any] = {"type": "array"}
        if len(items) == 1 or (origin is tuple and len(set(items)) == 1 and items):
            schema["items"] = annotation_schema(items[0], where)
        return schema
    if annotation in _OBJECTS or origin in _OBJECTS:
        schema = {"type": "object"}
        if len(args) == 2:
            if args[0] is not str:
                raise TypeError(f"{where}: JSON object keys are strings, not {args[0]!r}")
            value = annotation_schema(args[1], where)
            if value:
                schema["additionalProperties"] = value
        return schema
    raise TypeError(
        f"{where}: {annotation!r} has no JSON schema; use str, int, float, bool, list, "
        "dict, Literal, an Enum, or a union of these with None"
    )


def _union_schema(args: tuple[Any, ...], where: str) -> dict[str, Any]:
    members = [annotation_schema(arg, where) for arg in args]
    if any(not member for member in members):
        return {}
    if all(set(member) == {"type"} for member in members):
        names: list[str] = []
        for member in members:
            if member["type"] not in names:
                names.append(member["type"])
        return {"type": names[0] if len(names) == 1 else names}
    non_null = [m for m in members if m != {"type": "null"}]
    if len(non_null) == 1 and len(members) == 2:  # X | None with a structured X
        schema = dict(non_null[0])
        kind = schema.get("type")
        if kind is not None:
            schema["type"] = [kind, "null"]
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
        return schema
    return {"anyOf": members}


def docstring_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(summary, {parameter: description})`` read from a docstring.

    The summary is the first paragraph with its lines joined by spaces. Descriptions come
    from a Google ``Args:`` / ``Arguments:`` / ``Parameters:`` section or reST ``:param``
    lines; continuation lines are joined with spaces.
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    summary_lines: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()) or line.strip().startswith(":"):
            break
        summary_lines.append(line.strip())
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent = 0
    for line in lines:
        stripped = line.strip()
        rest = _REST_PARAM.match(stripped)
        if rest is not None:
            current, section = rest[1], None
            params[current] = rest[2].strip()
            continue
        header = _SECTION.match(line)
        if header is not None and not line.startswith(" "):
            section = header[1].lower()
            current = None
            continue
        if section not in ("args", "arguments", "parameters", "params"):
            if current is not None and stripped and line.startswith(" "):
                params[current] = f"{params[current]} {stripped}".strip()  # reST continuation
            elif not stripped:
                current = None
            continue
        if not stripped:
            continue
        width = len(line) - len(line.lstrip())
        entry = _ARG_LINE.match(stripped)
        if entry is not None and (current is None or width <= indent):
            current, indent = entry[1].lstrip("*"), width
            params[current] = entry[2].strip()
        elif current is not None:
            params[current] = f"{params[current]} {stripped}".strip()
    return " ".join(summary_lines), params


def parameters_schema(
    fn: Callable[..., Any], *, skip: Collection[str] = ("self",)
) -> dict[str, Any]:
    """The ``parameters`` object schema of `fn` (see the module docstring).

    Args:
        fn: A function or method (bound methods leave out their ``self``).
        skip: Parameter names the caller fills in itself (e.g. an injected env); they are
            left out of the schema and may have any annotation.

    Raises:
        TypeError: a parameter that is variadic or positional-only, or whose annotation has
            no JSON form (the message names the function and the parameter).
    """
    signature = inspect.signature(fn)
    hints = typing.get_type_hints(fn)
    _, described = docstring_parts(fn.__doc__)
    properties: dict[str, Any] = {}
    required: list[str] = []
    label = getattr(fn, "__qualname__", repr(fn))
    for name, parameter in signature.parameters.items():
        if name in skip:
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"{label}: *{name} cannot be described as a JSON argument")
        if parameter.kind is parameter.POSITIONAL_ONLY:
            raise TypeError(f"{label}: positional-only parameter {name!r} has no JSON name")
        schema = annotation_schema(hints.get(name, parameter.annotation), f"{label}({name})")
        if name in described:
            schema["description"] = described[name]
        if parameter.default is parameter.empty:
            required.append(name)
        elif _json_value(parameter.default):
            schema["default"] = parameter.default
        properties[name] = schema
    result: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        result["required"] = required
    return result


def _json_value(value: Any) -> bool:
    try:
        return json.loads(json.dumps(value, allow_nan=False)) == value
    except (TypeError, ValueError):
        return False


def signature_schema(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    skip: Collection[str] = ("self",),
) -> dict[str, Any]:
    """The function schema of `fn` for a chat template's ``tools=``.

    Args:
        fn: The function.
        name: The tool's name (default: ``fn.__name__``).
        description: The tool's description (default: the docstring's first paragraph).
        skip: Parameters the caller injects, left out of the schema (see `parameters_schema`).

    Returns:
        ``{"type": "function", "function": {"name", "description", "parameters"}}``.

    Raises:
        TypeError: see `parameters_schema`.
    """
    summary, _ = docstring_parts(fn.__doc__)
    return function_schema(
        name or fn.__name__,
        summary if description is None else description,
        parameters_schema(fn, skip=skip),
    )
