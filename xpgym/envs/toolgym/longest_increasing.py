"""LongestIncreasingSubsequence: the length of the longest strictly increasing subsequence of
a hidden list, with a DP table kept by the tools.

Config: ``{"numbers": [1..1000 ints]}``. ``Observe`` shows the length; ``GetNumber(index)``
reads one element; ``SetDPCell(index, value)`` / ``GetDPCell(index)`` write and read a table
of ``length`` cells (empty at the start); ``MaxDPCell()`` gives the largest value written.
The answer is the length of the longest strictly increasing subsequence (not necessarily
contiguous).

The oracle reads every number and stores ``dp[i] = 1 + max(dp[j] for j < i with
numbers[j] < numbers[i])`` (0 if none) in the table, then asks for the maximum:
``2 * length + 3`` calls.

Sizes: easy 4..6 numbers, medium 15..30, hard 60..100; values in ``0..2 * length``.
"""

from __future__ import annotations

import bisect
import json
from typing import Any, ClassVar

import numpy as np

from xpgym.core.tools.decorator import ToolError, tool
from xpgym.envs.toolgym.base import check_index, check_int_list, draw_length, item_at
from xpgym.envs.toolgym.hidden_list import HiddenListEnv

__all__ = ["SIZES", "LongestIncreasingSubsequenceEnv", "longest_increasing"]

SIZES: dict[str, tuple[int, int]] = {"easy": (4, 6), "medium": (15, 30), "hard": (60, 100)}
"""Inclusive bounds of the list length per difficulty."""
_MAX_LENGTH = 1000


def longest_increasing(numbers: list[int]) -> int:
    """Length of the longest strictly increasing subsequence (patience sorting, n log n)."""
    tails: list[int] = []  # tails[k]: the smallest tail of an increasing run of length k + 1
    for value in numbers:
        at = bisect.bisect_left(tails, value)
        if at == len(tails):
            tails.append(value)
        else:
            tails[at] = value
    return len(tails)


class LongestIncreasingSubsequenceEnv(HiddenListEnv):
    """Find the longest strictly increasing subsequence's length with DP-table tools."""

    name: ClassVar[str] = "LongestIncreasingSubsequence"
    answer_type: ClassVar[Any] = int
    answer_doc: ClassVar[str] = "The length of the longest strictly increasing subsequence."

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """SIZES[difficulty] numbers in ``0..2 * length``."""
        length = draw_length(rng, SIZES[difficulty])
        return {"numbers": [int(x) for x in rng.integers(0, 2 * length + 1, size=length)]}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check the config; the state is the empty table: ``{"dp": [None, ...]}``."""
        check_int_list(config["numbers"], "numbers", max_length=_MAX_LENGTH)
        return {"dp": [None] * len(config["numbers"])}

    def statement(self) -> str:
        """The task in two sentences."""
        return (
            "A hidden list of integers is given. Find the length of its longest strictly "
            "increasing subsequence (its elements keep their order in the list but need not be "
            "adjacent). Submit that length with Done."
        )

    def reference_answer(self) -> int:
        """`longest_increasing` of the numbers."""
        return longest_increasing(self.config["numbers"])

    @tool(name="SetDPCell")
    def set_dp_cell(self, index: int, value: int) -> str:
        """Write a value into cell `index` of the DP table (one cell per list position).

        Args:
            index: The cell, 0-based (0 <= index < length).
            value: The value to store.
        """
        check_index(index, len(self.state["dp"]))
        self.state["dp"][index] = value
        return f"dp[{index}] = {value}"

    @tool(name="GetDPCell")
    def get_dp_cell(self, index: int) -> str:
        """Read cell `index` of the DP table (null if it was never set).

        Args:
            index: The cell, 0-based (0 <= index < length).
        """
        return item_at(self.state["dp"], index)

    @tool(name="MaxDPCell")
    def max_dp_cell(self) -> str:
        """The largest value written in the DP table so far."""
        written = [value for value in self.state["dp"] if value is not None]
        if not written:
            raise ToolError("the DP table is empty")
        return json.dumps(max(written))

    def oracle(self) -> None:
        """Quadratic DP over the numbers read so far; every dp value goes into the table."""
        length = json.loads(self.call("Observe"))["length"]
        numbers: list[int] = []
        dp: list[int] = []
        for i in range(length):
            numbers.append(int(self.call("GetNumber", index=i)))
            dp.append(1 + max((dp[j] for j in range(i) if numbers[j] < numbers[i]), default=0))
            self.call("SetDPCell", index=i, value=dp[i])
        self.call("Done", answer=int(self.call("MaxDPCell")))
