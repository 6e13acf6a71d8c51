"""`xpgym.core.tools.signature`: schemas from annotations and docstrings."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Optional

import pytest

from xpgym.core.tools.signature import (
    annotation_schema,
    docstring_parts,
    parameters_schema,
    signature_schema,
)


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@pytest.mark.parametrize(
    ("annotation", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (list, {"type": "array"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (tuple[str, ...], {"type": "array", "items": {"type": "string"}}),
        (Sequence[float], {"type": "array", "items": {"type": "number"}}),
        (dict, {"type": "object"}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (Mapping[str, Any], {"type": "object"}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Colour, {"enum": ["red", "blue"]}),
        (int | None, {"type": ["integer", "null"]}),
        (Optional[str], {"type": ["string", "null"]}),  # noqa: UP045 - the old spelling too
        (int | str, {"type": ["integer", "string"]}),
        (list[int] | None, {"type": ["array", "null"], "items": {"type": "integer"}}),
        (Literal["x"] | None, {"type": ["string", "null"], "enum": ["x", None]}),
        (int | Any, {}),
    ],
)
def test_annotation_schema(annotation, schema):
    assert annotation_schema(annotation) == schema


@pytest.mark.parametrize("annotation", [object, set[object], dict[int, str], Literal[1, "a"]])
def test_annotations_without_a_json_form_are_refused_by_name(annotation):
    with pytest.raises(TypeError, match="where"):
        annotation_schema(annotation, "where")


def test_google_docstring_gives_summary_and_multiline_argument_descriptions():
    doc = """Look up the position of a value.

    More detail that is not the summary.

    Args:
        index (int): Zero-based index
            into the list.
        strict: Raise on a miss.

    Returns:
        The value.
    """
    summary, params = docstring_parts(doc)
    assert summary == "Look up the position of a value."
    assert params == {"index": "Zero-based index into the list.", "strict": "Raise on a miss."}


def test_rest_docstring_and_multiline_summary():
    doc = """Add two
    numbers.

    :param a: the first
        addend
    :param int b: the second
    """
    assert docstring_parts(doc) == (
        "Add two numbers.",
        {"a": "the first addend", "b": "the second"},
    )


def test_no_docstring():
    assert docstring_parts(None) == ("", {})


def lookup(values: list[int], index: int, default: int | None = None, env: object = None) -> str:
    """Return one value.

    Args:
        values: The list.
        index: Where to look.
        default: What to return when `index` is out of range.
        env: Injected by the caller.
    """
    return str(values[index] if 0 <= index < len(values) else default)


def test_signature_schema_reads_types_defaults_required_and_descriptions():
    schema = signature_schema(lookup, skip=("env",))
    assert schema == {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Return one value.",
            "parameters": {
                "type": "object",
                "properties": {
                    "values": {
                        "type": "array",
                        "items": {"type": "integer"},
                        "description": "The list.",
                    },
                    "index": {"type": "integer", "description": "Where to look."},
                    "default": {
                        "type": ["integer", "null"],
                        "description": "What to return when `index` is out of range.",
                        "default": None,
                    },
                },
                "additionalProperties": False,
                "required": ["values", "index"],
            },
        },
    }


def test_name_and_description_can_be_given():
    schema = signature_schema(lookup, name="Lookup", description="Find.", skip=("env",))
    assert (schema["function"]["name"], schema["function"]["description"]) == ("Lookup", "Find.")


def test_a_skipped_parameter_may_have_any_annotation_but_others_may_not():
    with pytest.raises(TypeError, match=r"lookup\(env\)"):
        parameters_schema(lookup)


def test_bound_methods_leave_out_self_and_defaults_that_json_cannot_hold_are_dropped():
    class Counter:
        def add(self, amount: int = 1, tag: tuple[str, ...] = ("a",)) -> int:
            """Add to the count."""
            return amount

    schema = parameters_schema(Counter().add)
    assert schema["properties"] == {
        "amount": {"type": "integer", "default": 1},
        "tag": {"type": "array", "items": {"type": "string"}},  # ("a",) != ["a"] in JSON
    }
    assert "required" not in schema


@pytest.mark.parametrize(
    "source",
    [
        "def f(*values: int) -> None: ...",
        "def f(**options: int) -> None: ...",
        "def f(x: int, /) -> None: ...",
    ],
)
def test_variadic_and_positional_only_parameters_are_refused(source):
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(TypeError, match="f"):
        parameters_schema(namespace["f"])
