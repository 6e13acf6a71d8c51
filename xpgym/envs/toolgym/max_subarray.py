"""MaxSubarray: the largest sum of a non-empty run of a hidden list, with Kadane's tools.

Config: ``{"numbers": [ints, length 1..1000]}``. ``Observe`` shows the length;
``GetNumber(index)`` reads one number; ``ExtendOrRestart(value)`` sets the running sum to
``max(value, running + value)`` (``value`` for the first call) and returns it;
``UpdateBest()`` sets the best sum to ``max(best, running)`` and returns it; ``GetBest()``
reads it. The answer is the maximum subarray sum (of a non-empty contiguous run).

The oracle runs Kadane's scan: 3 calls per number, ``3 * length + 3`` in all.

Sizes: easy 3..5 numbers, medium 15..30, hard 60..80; numbers -10..10.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from xpgym.core.tools.decorator import ToolError, tool
from xpgym.envs.toolgym.base import ToolGymEnv, check_int_list, draw_length, item_at

__all__ = ["SIZES", "MaxSubarrayEnv", "max_subarray_sum"]

SIZES: dict[str, tuple[int, int]] = {"easy": (3, 5), "medium": (15, 30), "hard": (60, 80)}
"""Inclusive bounds of the list length per difficulty."""
_MAX_LENGTH = 1000


def max_subarray_sum(numbers: list[int]) -> int:
    """The largest sum of a non-empty contiguous run (Kadane)."""
    best = running = numbers[0]
    for value in numbers[1:]:
        running = max(value, running + value)
        best = max(best, running)
    return best


class MaxSubarrayEnv(ToolGymEnv):
    """Find the maximum subarray sum of a hidden list with a running-sum tool."""

    name: ClassVar[str] = "MaxSubarray"
    answer_type: ClassVar[Any] = int
    answer_doc: ClassVar[str] = "The largest sum of a non-empty contiguous run."

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """SIZES[difficulty] numbers in -10..10."""
        length = draw_length(rng, SIZES[difficulty])
        return {"numbers": [int(x) for x in rng.integers(-10, 11, size=length)]}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check the config; the state is ``{"running": None, "best": None}``."""
        check_int_list(config["numbers"], "numbers", max_length=_MAX_LENGTH)
        return {"running": None, "best": None}

    def visible(self) -> dict[str, Any]:
        """The length."""
        return {"length": len(self.config["numbers"])}

    def statement(self) -> str:
        """The task in two sentences."""
        return (
            "A hidden list of integers is given. Find the largest sum of a non-empty run of "
            "consecutive numbers in it. Submit that sum with Done."
        )

    def reference_answer(self) -> int:
        """`max_subarray_sum` of the numbers."""
        return max_subarray_sum(self.config["numbers"])

    @tool
    def get_number(self, index: int) -> str:
        """Read the number at a position of the list.

        Args:
            index: The position, 0-based (0 <= index < length).
        """
        return item_at(self.config["numbers"], index)

    @tool
    def extend_or_restart(self, value: int) -> str:
        """Set the running sum to max(value, running sum + value), or to value the first
        time; returns the new running sum.

        Args:
            value: The next number.
        """
        running = self.state["running"]
        self.state["running"] = value if running is None else max(value, running + value)
        return json.dumps(self.state["running"])

    @tool
    def update_best(self) -> str:
        """Set the best sum to max(best sum, running sum) and return it."""
        running, best = self.state["running"], self.state["best"]
        if running is None:
            raise ToolError("there is no running sum yet; call ExtendOrRestart first")
        self.state["best"] = running if best is None else max(best, running)
        return json.dumps(self.state["best"])

    @tool
    def get_best(self) -> str:
        """The best sum so far (null before the first UpdateBest)."""
        return json.dumps(self.state["best"])

    def oracle(self) -> None:
        """Kadane's scan with the tools."""
        length = json.loads(self.call("Observe"))["length"]
        for index in range(length):
            self.call("ExtendOrRestart", value=int(self.call("GetNumber", index=index)))
            self.call("UpdateBest")
        self.call("Done", answer=int(self.call("GetBest")))
