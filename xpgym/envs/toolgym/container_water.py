"""ContainerWithMostWater: the most water two lines of a hidden list can hold, by two
pointers.

Config: ``{"heights": [2..1000 ints >= 0]}``. ``Observe`` shows the number of lines;
``GetHeight(index)`` reads one line; ``ComputeArea(left, right)`` gives the water between
lines ``left < right`` (``min(height) * (right - left)``); ``UpdateBest(area)`` keeps the
largest area offered and returns it; ``GetBest()`` reads it. The answer is the largest
area over all pairs of lines.

The oracle runs the two-pointer scan (start at both ends, move the lower line inward):
``3 * length + 1`` calls.

Sizes: easy 4..6 lines, medium 10..25, hard 50..75; heights 0..20.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from xpgym.core.tools.decorator import ToolError, tool
from xpgym.envs.toolgym.base import ToolGymEnv, check_index, check_int_list, draw_length, item_at

__all__ = ["SIZES", "ContainerWithMostWaterEnv", "most_water"]

SIZES: dict[str, tuple[int, int]] = {"easy": (4, 6), "medium": (10, 25), "hard": (50, 75)}
"""Inclusive bounds of the number of lines per difficulty."""
_MAX_LINES = 1000


def most_water(heights: list[int]) -> int:
    """The largest ``min(h[i], h[j]) * (j - i)``, by the two-pointer scan."""
    left, right, best = 0, len(heights) - 1, 0
    while left < right:
        best = max(best, min(heights[left], heights[right]) * (right - left))
        if heights[left] < heights[right]:
            left += 1
        else:
            right -= 1
    return best


class ContainerWithMostWaterEnv(ToolGymEnv):
    """Find the largest container two lines of a hidden list form, with two-pointer tools."""

    name: ClassVar[str] = "ContainerWithMostWater"
    answer_type: ClassVar[Any] = int
    answer_doc: ClassVar[str] = "The largest amount of water a pair of lines holds."

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """SIZES[difficulty] heights in 0..20."""
        length = draw_length(rng, SIZES[difficulty])
        return {"heights": [int(h) for h in rng.integers(0, 21, size=length)]}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check the config; the state: ``{"best": None}``."""
        check_int_list(config["heights"], "heights", min_length=2, max_length=_MAX_LINES, minimum=0)
        return {"best": None}

    def visible(self) -> dict[str, Any]:
        """The number of lines."""
        return {"length": len(self.config["heights"])}

    def statement(self) -> str:
        """The task in two sentences."""
        return (
            "A hidden list gives the heights of vertical lines at positions 0, 1, 2, ... Two "
            "lines at positions i < j hold min(height i, height j) * (j - i) units of water. "
            "Find the most water any two lines hold and submit it with Done."
        )

    def reference_answer(self) -> int:
        """`most_water` of the heights."""
        return most_water(self.config["heights"])

    @tool
    def get_height(self, index: int) -> str:
        """Read the height of the line at a position.

        Args:
            index: The position, 0-based (0 <= index < length).
        """
        return item_at(self.config["heights"], index)

    @tool
    def compute_area(self, left: int, right: int) -> str:
        """The water held between two lines: min(height left, height right) * (right - left).

        Args:
            left: The left line's position.
            right: The right line's position (> left).
        """
        heights = self.config["heights"]
        check_index(left, len(heights), "left")
        check_index(right, len(heights), "right")
        if left >= right:
            raise ToolError(f"left {left} must be smaller than right {right}")
        return json.dumps(min(heights[left], heights[right]) * (right - left))

    @tool
    def update_best(self, area: int) -> str:
        """Keep the largest area offered so far; returns it.

        Args:
            area: An area to compare with the best one.
        """
        best = self.state["best"]
        self.state["best"] = area if best is None else max(best, area)
        return json.dumps(self.state["best"])

    @tool
    def get_best(self) -> str:
        """The largest area offered to UpdateBest so far (null if none)."""
        return json.dumps(self.state["best"])

    def oracle(self) -> None:
        """Two pointers from both ends; after each area, move the lower line inward."""
        length = json.loads(self.call("Observe"))["length"]
        left, right = 0, length - 1
        low, high = (
            int(self.call("GetHeight", index=left)),
            int(self.call("GetHeight", index=right)),
        )
        while left < right:
            self.call("UpdateBest", area=int(self.call("ComputeArea", left=left, right=right)))
            if low < high:
                left += 1
                if left < right:
                    low = int(self.call("GetHeight", index=left))
            else:
                right -= 1
                if left < right:
                    high = int(self.call("GetHeight", index=right))
        self.call("Done", answer=int(self.call("GetBest")))
