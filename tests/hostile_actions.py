"""Hostile texts for the every-env robustness tests (tests/core/test_checks.py, the worlds')."""

# Texts a model may write that have broken parsers before: empty, whitespace, unclosed and
# nested tags, every answer format the catalogue reads, control characters, huge input.
HOSTILE_ACTIONS = [
    "",
    " \n\t ",
    "\\boxed{",
    "\\boxed{}",
    "\\boxed{\\boxed{1}}",
    "\\boxed{" + "9" * 5000 + "}",
    "\\boxed{-1e309} \\boxed{nan}",
    "<answer></answer><answer>",
    "<tool_call>{</tool_call>",
    '<tool_call>{"name": "x", "arguments": 1}</tool_call>',
    "<bash>",
    "```python\nwhile True: pass",
    "```\n```",
    "\x00\x1b[2J\udcff",
    "🙂" * 1000,
    "x" * 200_000,
]
