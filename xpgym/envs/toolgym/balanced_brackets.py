"""BalancedBrackets: where a hidden bracket string stops being balanced, with a stack.

Config: ``{"text": a string of the characters ()[]{}, length 1..1000}``. ``Observe`` shows
the length; ``GetCharacter(index)`` reads one character; ``PushBracket(bracket)``,
``PopBracket()`` and ``IsStackEmpty()`` work a stack the tools keep; ``BracketsMatch(opening,
closing)`` says whether two brackets pair up. The answer is ``-1`` if the text is balanced;
else the index of the first closing bracket that has no matching opening bracket, or the
length of the text if every closing bracket matched but some bracket is left open.

The oracle scans with the stack: 2 calls per opening bracket, 4 per closing one, 3 more
(``3 * length + 3`` for a balanced text; fewer when it stops early).

Sizes: easy 4..8 characters, medium 20..40, hard 60..80; half the texts are balanced, the
others have one character changed.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from xpgym.core.tools.decorator import ToolError, tool
from xpgym.envs.toolgym.base import ToolGymEnv, item_at

__all__ = ["PAIRS", "SIZES", "BalancedBracketsEnv", "first_unbalanced"]

SIZES: dict[str, tuple[int, int]] = {"easy": (4, 8), "medium": (20, 40), "hard": (60, 80)}
"""Inclusive bounds of the text length per difficulty (lengths are even)."""
PAIRS = {"(": ")", "[": "]", "{": "}"}
_BRACKETS = "()[]{}"
_MAX_LENGTH = 1000


def first_unbalanced(text: str) -> int:
    """-1 if `text` is balanced, else the first unmatched closing bracket's index, else
    ``len(text)`` (brackets left open)."""
    stack: list[str] = []
    for index, char in enumerate(text):
        if char in PAIRS:
            stack.append(char)
        elif not stack or PAIRS[stack.pop()] != char:
            return index
    return len(text) if stack else -1


def _balanced(rng: np.random.Generator, length: int) -> str:
    """A random balanced text of even `length`."""
    chars: list[str] = []
    stack: list[str] = []
    for position in range(length):
        left = length - position
        if stack and (len(stack) == left or rng.random() < 0.5):
            chars.append(PAIRS[stack.pop()])
        else:
            opening = "([{"[int(rng.integers(3))]
            stack.append(opening)
            chars.append(opening)
    return "".join(chars)


class BalancedBracketsEnv(ToolGymEnv):
    """Find where a hidden bracket string stops being balanced, with a stack."""

    name: ClassVar[str] = "BalancedBrackets"
    answer_type: ClassVar[Any] = int
    answer_doc: ClassVar[str] = (
        "-1 if balanced; else the index of the first unmatched closing bracket; else the "
        "text's length (brackets left open)."
    )

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """A balanced text of SIZES[difficulty] characters, one changed half the time."""
        low, high = SIZES[difficulty]
        length = 2 * int(rng.integers(low // 2, high // 2 + 1))
        chars = list(_balanced(rng, length))
        if rng.random() < 0.5:
            chars[int(rng.integers(length))] = _BRACKETS[int(rng.integers(len(_BRACKETS)))]
        return {"text": "".join(chars)}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check the config; the state is the empty stack: ``{"stack": []}``."""
        text = config["text"]
        if not isinstance(text, str) or not 1 <= len(text) <= _MAX_LENGTH:
            raise ValueError(f"'text' must be a string of 1..{_MAX_LENGTH} characters")
        if set(text) - set(_BRACKETS):
            raise ValueError(f"'text' may hold only the characters {_BRACKETS}")
        return {"stack": []}

    def visible(self) -> dict[str, Any]:
        """The text's length."""
        return {"length": len(self.config["text"])}

    def statement(self) -> str:
        """The task in three sentences."""
        return (
            "A hidden text is made of the brackets ( ) [ ] { }. It is balanced when every "
            "closing bracket closes the latest still-open bracket of its kind and nothing is "
            "left open. Submit with Done: -1 if it is balanced; else the 0-based index of the "
            "first closing bracket that does not match; else (all matched but some left open) "
            "the text's length."
        )

    def reference_answer(self) -> int:
        """`first_unbalanced` of the text."""
        return first_unbalanced(self.config["text"])

    @tool
    def get_character(self, index: int) -> str:
        """Read the character at a position of the text (a JSON string).

        Args:
            index: The position, 0-based (0 <= index < length).
        """
        return item_at(self.config["text"], index)

    @tool
    def push_bracket(self, bracket: str) -> str:
        """Push an opening bracket onto the stack; returns the stack size.

        Args:
            bracket: One of "(", "[", "{".
        """
        if bracket not in PAIRS:
            raise ToolError(f"{bracket!r} is not an opening bracket")
        self.state["stack"].append(bracket)
        return json.dumps(len(self.state["stack"]))

    @tool
    def pop_bracket(self) -> str:
        """Remove the top bracket of the stack and return it (an error if it is empty)."""
        if not self.state["stack"]:
            raise ToolError("the stack is empty")
        return json.dumps(self.state["stack"].pop())

    @tool
    def is_stack_empty(self) -> str:
        """Whether the stack is empty: true or false."""
        return json.dumps(not self.state["stack"])

    @tool
    def brackets_match(self, opening: str, closing: str) -> str:
        """Whether a closing bracket closes an opening one: true or false.

        Args:
            opening: The opening bracket.
            closing: The closing bracket.
        """
        return json.dumps(PAIRS.get(opening) == closing)

    def oracle(self) -> None:
        """Scan with the stack; stop at the first closing bracket that does not match."""
        length = json.loads(self.call("Observe"))["length"]
        for index in range(length):
            char = json.loads(self.call("GetCharacter", index=index))
            if char in PAIRS:
                self.call("PushBracket", bracket=char)
                continue
            if json.loads(self.call("IsStackEmpty")):
                self.call("Done", answer=index)
                return
            top = json.loads(self.call("PopBracket"))
            if not json.loads(self.call("BracketsMatch", opening=top, closing=char)):
                self.call("Done", answer=index)
                return
        self.call("Done", answer=-1 if json.loads(self.call("IsStackEmpty")) else length)
