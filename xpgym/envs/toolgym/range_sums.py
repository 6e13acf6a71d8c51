"""RangeSumQueries: answer sum queries over a hidden list, with a prefix-sum table.

Config: ``{"numbers": [1..1000 ints], "queries": [[left, right], ...]}`` (1..100 queries,
``0 <= left <= right < length``). ``Observe`` shows the length and the queries;
``GetNumber(index)`` reads one element; ``SetPrefix(index, value)`` and ``GetPrefix(index)``
write and read a table of ``length + 1`` cells (empty at the start). The answer is, for each
query, the sum of ``numbers[left..right]`` (both ends included), in query order.

The oracle stores ``prefix[i] = numbers[0] + ... + numbers[i - 1]`` for ``i = 0..length``,
then answers each query as ``prefix[right + 1] - prefix[left]`` from two reads:
``2 * length + 2 * queries + 3`` calls.

Sizes: easy 4..6 numbers and 2..3 queries, medium 10..20 and 3..5, hard 50..80 and 8..12;
values in -20..20.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from xpgym.core.tools.decorator import tool
from xpgym.envs.toolgym.base import check_index, check_int_list, draw_length, item_at
from xpgym.envs.toolgym.hidden_list import HiddenListEnv, check_int_pairs

__all__ = ["SIZES", "RangeSumQueriesEnv", "range_sums"]

SIZES: dict[str, tuple[int, int, int, int]] = {
    "easy": (4, 6, 2, 3),
    "medium": (10, 20, 3, 5),
    "hard": (50, 80, 8, 12),
}
"""Inclusive bounds ``(length low, length high, queries low, queries high)`` per difficulty."""
_MAX_LENGTH = 1000
_MAX_QUERIES = 100


def range_sums(numbers: list[int], queries: list[list[int]]) -> list[int]:
    """Each query's inclusive range sum, from one prefix-sum pass."""
    prefix = [0]
    for value in numbers:
        prefix.append(prefix[-1] + value)
    return [prefix[right + 1] - prefix[left] for left, right in queries]


class RangeSumQueriesEnv(HiddenListEnv):
    """Answer range-sum queries over a hidden list with prefix-sum tools."""

    name: ClassVar[str] = "RangeSumQueries"
    answer_type: ClassVar[Any] = list[int]
    answer_doc: ClassVar[str] = "Each query's sum, in query order."

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """SIZES[difficulty] numbers in -20..20 and random inclusive ranges over them."""
        low, high, few, many = SIZES[difficulty]
        length = draw_length(rng, (low, high))
        queries = [
            sorted(int(x) for x in rng.integers(0, length, size=2))
            for _ in range(draw_length(rng, (few, many)))
        ]
        return {"numbers": [int(x) for x in rng.integers(-20, 21, size=length)], "queries": queries}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check the config; the state is the empty table: ``{"prefix": [None] * (n + 1)}``."""
        numbers = config["numbers"]
        check_int_list(numbers, "numbers", max_length=_MAX_LENGTH)
        check_int_pairs(
            config["queries"],
            "queries",
            max_length=_MAX_QUERIES,
            low=0,
            high=len(numbers) - 1,
            ordered=True,
        )
        return {"prefix": [None] * (len(numbers) + 1)}

    def extra_visible(self) -> dict[str, Any]:
        """The queries."""
        return {"queries": self.config["queries"]}

    def statement(self) -> str:
        """The task in two sentences."""
        return (
            "A hidden list of integers and a list of queries [left, right] are given. For each "
            "query, find the sum of the numbers at positions left..right (both included, "
            "0-based). Submit the sums, in query order, with Done."
        )

    def reference_answer(self) -> list[int]:
        """`range_sums` of the numbers and queries."""
        return range_sums(self.config["numbers"], self.config["queries"])

    @tool
    def set_prefix(self, index: int, value: int) -> str:
        """Write a value into cell `index` of the prefix table (cells 0..length).

        Args:
            index: The cell, 0 <= index <= length.
            value: The value to store.
        """
        check_index(index, len(self.state["prefix"]))
        self.state["prefix"][index] = value
        return f"prefix[{index}] = {value}"

    @tool
    def get_prefix(self, index: int) -> str:
        """Read cell `index` of the prefix table (null if it was never set).

        Args:
            index: The cell, 0 <= index <= length.
        """
        return item_at(self.state["prefix"], index)

    def oracle(self) -> None:
        """Fill the prefix table, then answer each query from two of its cells."""
        seen = json.loads(self.call("Observe"))
        running = 0
        self.call("SetPrefix", index=0, value=0)
        for index in range(seen["length"]):
            running += int(self.call("GetNumber", index=index))
            self.call("SetPrefix", index=index + 1, value=running)
        sums = [
            int(self.call("GetPrefix", index=right + 1)) - int(self.call("GetPrefix", index=left))
            for left, right in seen["queries"]
        ]
        self.call("Done", answer=sums)
