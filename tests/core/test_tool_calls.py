"""Specification of the tool-call parsers, the argument validator and the instruction text."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from xpgym.core.tools import Tool, ToolCall, ToolResult
from xpgym.core.tools.calls import (
    FunctionCall,
    TagMatch,
    find_fenced_block,
    find_function_calls,
    find_tag,
    format_function_call,
    format_function_instructions,
    format_tool_instructions,
    function_schema,
    parse_call,
    random_value,
    validate_arguments,
)

ADD_PARAMETERS = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


def tool_call(payload: Any) -> str:
    return f"<tool_call>{json.dumps(payload)}</tool_call>"


# ------------------------------------------------------------------------------- find_tag


def test_find_tag_returns_content_raw_span_and_positions():
    action = "let me run <python>print(1)</python> now"
    match = find_tag(action, "python")
    assert match == TagMatch("print(1)", "<python>print(1)</python>", 11, 36)
    assert action[match.start : match.end] == match.raw


def test_find_tag_returns_the_first_block_by_position():
    match = find_tag("<search>a</search> <search>b</search>", "search")
    assert match is not None
    assert match.content == "a"


def test_find_tag_ends_at_the_first_closing_tag():
    match = find_tag("<python>x</python>y</python>", "python")
    assert match is not None
    assert match.content == "x"


def test_find_tag_keeps_a_nested_opening_tag_in_the_content():
    match = find_tag("<python>a<python>b</python>", "python")
    assert match is not None
    assert match.content == "a<python>b"


def test_find_tag_without_closing_tag_is_none():
    assert find_tag("<python>print(1)", "python") is None


def test_find_tag_allow_unclosed_runs_to_the_end_of_the_text():
    match = find_tag("x <python>print(1)", "python", allow_unclosed=True)
    assert match == TagMatch("print(1)", "<python>print(1)", 2, 18)


def test_find_tag_is_case_sensitive():
    assert find_tag("<Python>1</Python>", "python") is None


def test_find_tag_rejects_an_invalid_tag_name():
    with pytest.raises(ValueError, match="tag name"):
        find_tag("<a b>x</a b>", "a b")


# ---------------------------------------------------------------------- find_fenced_block


def test_find_fenced_block_finds_a_python_block():
    action = "Here:\n```python\nprint(1)\n```\ndone"
    match = find_fenced_block(action)
    assert match is not None
    assert match.content == "print(1)\n"
    assert match.raw == "```python\nprint(1)\n```"
    assert action[match.start : match.end] == match.raw


def test_find_fenced_block_language_is_case_insensitive():
    match = find_fenced_block("```Py\nx = 1\n```", ("python", "py"))
    assert match is not None
    assert match.content == "x = 1\n"


def test_find_fenced_block_skips_blocks_in_other_languages():
    action = "```js\nalert(1)\n```\n```python\nprint(2)\n```"
    match = find_fenced_block(action)
    assert match is not None
    assert match.content == "print(2)\n"


def test_find_fenced_block_never_takes_a_closing_fence_for_an_opening_one():
    # The second ``` closes the unlabelled block; "python" after it is prose, not a label.
    assert find_fenced_block("```\nplain\n```python\nprint(1)\n") is None


def test_find_fenced_block_unclosed_is_none():
    assert find_fenced_block("```python\nprint(1)\n") is None


# -------------------------------------------------------------------- find_function_calls


def test_find_function_calls_parses_a_hermes_style_block():
    action = 'ok\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'
    (call,) = find_function_calls(action)
    assert call.name == "add"
    assert call.arguments == {"a": 1, "b": 2}
    assert call.error is None
    assert call.raw == action[3:]
    assert (call.start, call.end) == (3, len(action))


def test_find_function_calls_returns_every_block_in_order():
    action = tool_call({"name": "a"}) + " and " + tool_call({"name": "b"})
    assert [call.name for call in find_function_calls(action)] == ["a", "b"]


def test_find_function_calls_reports_invalid_json():
    (call,) = find_function_calls('<tool_call>{"name": "add", </tool_call>')
    assert call.name is None
    assert call.error is not None
    assert "invalid JSON" in call.error


def test_find_function_calls_reports_a_missing_name():
    (call,) = find_function_calls(tool_call({"arguments": {}}))
    assert call.name is None
    assert call.error is not None
    assert '"name"' in call.error


def test_find_function_calls_reports_a_non_string_name():
    (call,) = find_function_calls(tool_call({"name": 3}))
    assert call.name is None
    assert call.error is not None


def test_find_function_calls_reports_non_object_arguments_and_keeps_the_name():
    (call,) = find_function_calls(tool_call({"name": "add", "arguments": [1, 2]}))
    assert call.name == "add"
    assert call.error == '"arguments" must be a JSON object, got array'


def test_find_function_calls_reports_a_json_value_that_is_not_an_object():
    (call,) = find_function_calls("<tool_call>[1, 2]</tool_call>")
    assert call.error == "expected a JSON object, got array"


def test_find_function_calls_reports_text_after_the_object():
    (call,) = find_function_calls('<tool_call>{"name": "a"} {"name": "b"}</tool_call>')
    assert call.error is not None
    assert "one call per block" in call.error


def test_find_function_calls_reports_an_empty_block():
    (call,) = find_function_calls("<tool_call>  </tool_call>")
    assert call.error == "empty <tool_call> block"


def test_find_function_calls_missing_arguments_means_empty_arguments():
    (call,) = find_function_calls(tool_call({"name": "now"}))
    assert call.arguments == {}
    assert call.error is None


def test_find_function_calls_decodes_arguments_given_as_a_json_string():
    (call,) = find_function_calls(tool_call({"name": "add", "arguments": '{"a": 1}'}))
    assert call.arguments == {"a": 1}


def test_find_function_calls_accepts_parameters_in_place_of_arguments():
    (call,) = find_function_calls(tool_call({"name": "add", "parameters": {"a": 1}}))
    assert call.arguments == {"a": 1}


def test_find_function_calls_reads_an_unclosed_final_block_up_to_its_json_value():
    action = 'x <tool_call>\n{"name": "add", "arguments": {"a": 1}}\ntrailing'
    (call,) = find_function_calls(action)
    assert call.name == "add"
    assert call.raw == '<tool_call>\n{"name": "add", "arguments": {"a": 1}}'


def test_find_function_calls_reports_deeply_nested_json_without_raising():
    (call,) = find_function_calls("<tool_call>" + "[" * 100_000 + "</tool_call>")
    assert call.error is not None


def test_find_function_calls_without_blocks_is_empty():
    assert find_function_calls("no calls here") == []


@given(
    st.text(alphabet=st.sampled_from(list('<>/tool_call{}[]":, name arguments 1\n')), max_size=80)
)
def test_find_function_calls_never_raises(action):
    for call in find_function_calls(action):
        assert isinstance(call, FunctionCall)
        assert action[call.start : call.end] == call.raw


# --------------------------------------------------------------------- validate_arguments


def test_validate_arguments_accepts_conforming_arguments():
    assert validate_arguments({"a": 1, "b": 2}, ADD_PARAMETERS) is None


def test_validate_arguments_reports_a_missing_required_argument():
    assert validate_arguments({"a": 1}, ADD_PARAMETERS) == "missing required argument 'b'"


def test_validate_arguments_reports_a_wrong_type_with_the_value():
    error = validate_arguments({"a": "one", "b": 2}, ADD_PARAMETERS)
    assert error == "argument 'a': expected integer, got string \"one\""


def test_validate_arguments_integer_accepts_an_integral_float():
    assert validate_arguments({"a": 3.0, "b": 2}, ADD_PARAMETERS) is None


def test_validate_arguments_integer_rejects_a_fraction():
    assert validate_arguments({"a": 3.5, "b": 2}, ADD_PARAMETERS) is not None


@pytest.mark.parametrize("type_name", ["integer", "number"])
def test_validate_arguments_numbers_reject_booleans(type_name):
    schema = {"type": "object", "properties": {"x": {"type": type_name}}}
    assert validate_arguments({"x": True}, schema) is not None


def test_validate_arguments_checks_the_top_level_type():
    assert validate_arguments([1], ADD_PARAMETERS) == "arguments: expected object, got array [1]"


def test_validate_arguments_checks_enum():
    schema = {"type": "object", "properties": {"unit": {"type": "string", "enum": ["c", "f"]}}}
    assert validate_arguments({"unit": "k"}, schema) == (
        'argument \'unit\': must be one of "c", "f", got string "k"'
    )


def test_validate_arguments_rejects_extra_arguments_when_additional_properties_is_false():
    schema = {**ADD_PARAMETERS, "additionalProperties": False}
    error = validate_arguments({"a": 1, "b": 2, "c": 3}, schema)
    assert error == "unexpected argument 'c' (accepted: 'a', 'b')"


def test_validate_arguments_allows_extra_arguments_by_default():
    assert validate_arguments({"a": 1, "b": 2, "c": 3}, ADD_PARAMETERS) is None


def test_validate_arguments_checks_array_items_and_nested_objects_with_a_path():
    schema = {
        "type": "object",
        "properties": {
            "points": {
                "type": "array",
                "items": {"type": "object", "properties": {"x": {"type": "number"}}},
            }
        },
    }
    error = validate_arguments({"points": [{"x": 1}, {"x": "far"}]}, schema)
    assert error == "argument 'points[1].x': expected number, got string \"far\""


def test_validate_arguments_accepts_any_of_a_list_of_types():
    schema = {"type": "object", "properties": {"x": {"type": ["string", "null"]}}}
    assert validate_arguments({"x": None}, schema) is None


def test_validate_arguments_ignores_unsupported_keywords():
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^a$"}}}
    assert validate_arguments({"x": "b"}, schema) is None


def test_validate_arguments_without_schema_accepts_anything():
    assert validate_arguments({"anything": object()}, None) is None


# ------------------------------------------------------------------------------ parse_call


def parse_python(action: str) -> ToolCall | None:
    return parse_call(
        action,
        "python",
        parameters={
            "type": "object",
            "properties": {"code": {"type": "string"}},
            "required": ["code"],
        },
        tag="python",
        tag_argument="code",
        fence_languages=("python", "py"),
    )


def test_parse_call_reads_the_tag_format():
    call = parse_python("<python>print(1)</python>")
    assert call == ToolCall("python", {"code": "print(1)"}, "<python>print(1)</python>")


def test_parse_call_dedents_and_strips_tag_content():
    call = parse_python("<python>\n    x = 1\n    print(x)\n</python>")
    assert call is not None
    assert call.arguments == {"code": "x = 1\nprint(x)"}


def test_parse_call_reads_the_fenced_format():
    call = parse_python("```python\nprint(1)\n```")
    assert call is not None
    assert call.arguments == {"code": "print(1)"}


def test_parse_call_reads_the_json_format():
    action = tool_call({"name": "python", "arguments": {"code": "print(1)"}})
    assert parse_python(action) == ToolCall("python", {"code": "print(1)"}, action)


def test_parse_call_takes_the_earliest_call_across_formats():
    action = "```python\nfirst()\n```\n<python>second()</python>"
    call = parse_python(action)
    assert call is not None
    assert call.arguments == {"code": "first()"}


def test_parse_call_ignores_json_calls_of_other_tools():
    assert parse_python(tool_call({"name": "search", "arguments": {"query": "x"}})) is None


def test_parse_call_reports_invalid_json_arguments_of_its_own_call():
    call = parse_python(tool_call({"name": "python", "arguments": {"code": 1}}))
    assert call is not None
    assert call.error == "argument 'code': expected string, got integer 1"


def test_parse_call_reports_an_empty_tag():
    call = parse_python("<python>  </python>")
    assert call is not None
    assert call.error is not None
    assert "empty <python> block" in call.error


def test_parse_call_without_a_call_is_none():
    assert parse_python("The answer is 4.") is None


def test_parse_call_needs_tag_argument_for_the_tag_format():
    with pytest.raises(ValueError, match="tag_argument"):
        parse_call("<x>1</x>", "x", tag="x")


@given(st.text(alphabet=st.sampled_from(list('<>/python`\n{}":tool_cal nme')), max_size=80))
def test_parse_call_never_raises(action):
    call = parse_python(action)
    assert call is None or call.raw in action


# ----------------------------------------------------------------------- schema and prompts


class Described(Tool):
    name = "demo"

    def instructions(self) -> str:
        return "Call demo with <demo>text</demo>."

    def function_schema(self) -> dict[str, Any]:
        return function_schema("demo", "A demo.", {"type": "object", "properties": {}})

    def parse(self, action: str) -> ToolCall | None:
        return None

    def execute(self, call: ToolCall) -> ToolResult:
        return ToolResult("")


def test_function_schema_has_the_chat_template_shape():
    assert function_schema("add", "Adds.", ADD_PARAMETERS) == {
        "type": "function",
        "function": {"name": "add", "description": "Adds.", "parameters": ADD_PARAMETERS},
    }


def test_function_schema_defaults_to_an_empty_object_schema():
    parameters = function_schema("now", "Time.")["function"]["parameters"]
    assert parameters == {"type": "object", "properties": {}}


def test_format_tool_instructions_holds_each_tools_instructions_and_the_budget():
    text = format_tool_instructions([Described()], max_tool_calls=3)
    assert "Call demo with <demo>text</demo>." in text
    assert "at most 3 tool calls" in text
    assert "Only the first tool call" in text


def test_format_function_instructions_lists_schemas_and_the_call_format():
    schema = Described().function_schema()
    text = format_function_instructions([schema])
    assert json.dumps(schema) in text
    assert '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}' in text


def test_random_value_draws_values_of_the_schema_from_the_generator() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "word": {"type": "string"},
            "mode": {"enum": ["a", "b"]},
            "xs": {"type": "array", "items": {"type": "number"}},
            "flag": {"type": "boolean"},
        },
        "required": ["n", "word", "mode", "xs", "flag"],
        "additionalProperties": False,
    }
    values = [random_value(schema, np.random.default_rng(seed)) for seed in range(20)]
    assert all(validate_arguments(value, schema) is None for value in values)
    assert values == [random_value(schema, np.random.default_rng(seed)) for seed in range(20)]
    assert len({json.dumps(value) for value in values}) > 1


def test_a_formatted_function_call_reads_back_as_its_name_and_arguments() -> None:
    arguments = {"action": "\\boxed{7}", "keys": [1, 2], "note": "é"}
    text = format_function_call("act", arguments)
    assert text.startswith("<tool_call>")
    assert text.endswith("</tool_call>")
    (call,) = find_function_calls(text)
    assert (call.name, call.arguments, call.raw, call.error) == ("act", arguments, text, None)
