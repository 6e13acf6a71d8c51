"""LargestRectangle: the largest rectangle in a hidden histogram, with a monotonic stack.

Config: ``{"heights": [ints >= 0, length 1..1000]}``. ``Observe`` shows the number of bars;
``GetHeight(index)`` reads one bar; ``PushToStack(index)``, ``PopFromStack()`` and
``PeekStack()`` work a stack of bar indices the tools keep; ``ComputeArea(height, width)``
multiplies. The answer is the largest area of a rectangle made of adjacent bars (its height
is the lowest bar it covers).

The oracle runs the classic increasing-stack scan (each bar is read, pushed and popped once,
each pop gives one area): ``4 * length + 2`` calls.

Sizes: easy 3..5 bars, medium 10..20, hard 40..60; heights 0..10.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from xpgym.core.tools.decorator import ToolError, tool
from xpgym.envs.toolgym.base import ToolGymEnv, check_int_list, draw_length, item_at

__all__ = ["SIZES", "LargestRectangleEnv", "largest_rectangle"]

SIZES: dict[str, tuple[int, int]] = {"easy": (3, 5), "medium": (10, 20), "hard": (40, 60)}
"""Inclusive bounds of the number of bars per difficulty."""
_MAX_BARS = 1000


def largest_rectangle(heights: list[int]) -> int:
    """The largest rectangle area of a histogram, by the increasing-stack scan."""
    stack: list[int] = []
    best = 0
    for i, height in enumerate([*heights, 0]):
        while stack and heights[stack[-1]] >= height:
            top = stack.pop()
            left = stack[-1] if stack else -1
            best = max(best, heights[top] * (i - left - 1))
        stack.append(i)
    return best


class LargestRectangleEnv(ToolGymEnv):
    """Find the largest rectangle in a hidden histogram, with stack tools."""

    name: ClassVar[str] = "LargestRectangle"
    answer_type: ClassVar[Any] = int
    answer_doc: ClassVar[str] = "The largest rectangle area."

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """SIZES[difficulty] bars of height 0..10."""
        length = draw_length(rng, SIZES[difficulty])
        return {"heights": [int(h) for h in rng.integers(0, 11, size=length)]}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check the config; the state is the empty stack: ``{"stack": []}``."""
        check_int_list(config["heights"], "heights", max_length=_MAX_BARS, minimum=0)
        return {"stack": []}

    def visible(self) -> dict[str, Any]:
        """The number of bars."""
        return {"length": len(self.config["heights"])}

    def statement(self) -> str:
        """The task in two sentences."""
        return (
            "A hidden histogram has bars of width 1 and integer heights, side by side. Find "
            "the area of the largest rectangle that fits inside it (the rectangle spans "
            "adjacent bars and is as high as the lowest of them). Submit it with Done."
        )

    def reference_answer(self) -> int:
        """`largest_rectangle` of the heights."""
        return largest_rectangle(self.config["heights"])

    @tool
    def get_height(self, index: int) -> str:
        """Read the height of one bar.

        Args:
            index: The bar, 0-based (0 <= index < length).
        """
        return item_at(self.config["heights"], index)

    @tool
    def push_to_stack(self, index: int) -> str:
        """Push a bar index onto the stack; returns the stack size.

        Args:
            index: The bar index to push (0 <= index < length).
        """
        if not 0 <= index < len(self.config["heights"]):
            raise ToolError(f"index {index} is not a bar")
        self.state["stack"].append(index)
        return json.dumps(len(self.state["stack"]))

    @tool
    def pop_from_stack(self) -> str:
        """Remove the top index of the stack and return it (an error if the stack is empty)."""
        if not self.state["stack"]:
            raise ToolError("the stack is empty")
        return json.dumps(self.state["stack"].pop())

    @tool
    def peek_stack(self) -> str:
        """The top index of the stack, or null if the stack is empty."""
        stack = self.state["stack"]
        return json.dumps(stack[-1] if stack else None)

    @tool
    def compute_area(self, height: int, width: int) -> str:
        """The area height * width of a rectangle.

        Args:
            height: The rectangle's height.
            width: The rectangle's width.
        """
        return json.dumps(height * width)

    def oracle(self) -> None:
        """Increasing-stack scan; the oracle remembers what it read and pushed."""
        length = json.loads(self.call("Observe"))["length"]
        heights: list[int] = []
        stack: list[int] = []
        best = 0
        for i in range(length + 1):
            height = int(self.call("GetHeight", index=i)) if i < length else 0
            heights.append(height)
            while stack and heights[stack[-1]] >= height:
                top = int(self.call("PopFromStack"))
                stack.pop()
                left = stack[-1] if stack else -1
                area = int(self.call("ComputeArea", height=heights[top], width=i - left - 1))
                best = max(best, area)
            if i < length:
                self.call("PushToStack", index=i)
                stack.append(i)
        self.call("Done", answer=best)
