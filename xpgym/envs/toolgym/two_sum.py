"""TwoSum: two positions of a hidden list whose numbers add up to a target, with a hash map.

Config: ``{"numbers": [ints, length 2..1000], "target": int}``. ``Observe`` shows the length
and the target; ``GetNumber(index)`` reads one number; ``Subtract(a, b)`` gives ``a - b``;
``StoreIndex(value, index)`` and ``LookupIndex(value)`` write and read a map from numbers to
positions that the tools keep (a value keeps its first stored index). The answer is
``[i, j]``, ``i < j``, ``numbers[i] + numbers[j] == target``, with the smallest such `j` and
then the smallest `i`; ``[-1, -1]`` if there is none.

The oracle scans left to right, looks up each number's complement, then stores the number:
4 calls per position up to the answer's `j`, about ``4 * j + 3``.

Sizes: easy 4..6 numbers, medium 12..25, hard 45..60; a pair is planted in the second half.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from xpgym.core.tools.decorator import tool
from xpgym.envs.toolgym.base import ToolGymEnv, check_int_list, draw_length, item_at

__all__ = ["SIZES", "TwoSumEnv", "first_pair"]

SIZES: dict[str, tuple[int, int]] = {"easy": (4, 6), "medium": (12, 25), "hard": (45, 60)}
"""Inclusive bounds of the list length per difficulty."""
_MAX_LENGTH = 1000


def first_pair(numbers: list[int], target: int) -> list[int]:
    """``[i, j]`` with the smallest `j`, then the smallest `i`, or ``[-1, -1]``."""
    first_index: dict[int, int] = {}
    for j, value in enumerate(numbers):
        if target - value in first_index:
            return [first_index[target - value], j]
        first_index.setdefault(value, j)
    return [-1, -1]


class TwoSumEnv(ToolGymEnv):
    """Find two positions whose numbers sum to the target, with a hash map kept by the tools."""

    name: ClassVar[str] = "TwoSum"
    answer_type: ClassVar[Any] = list[int]
    answer_doc: ClassVar[str] = (
        "[i, j]: the pair with the smallest j, then smallest i; [-1, -1] if none."
    )

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """SIZES[difficulty] numbers with a pair planted whose second index is in the
        second half."""
        length = draw_length(rng, SIZES[difficulty])
        numbers = [int(x) for x in rng.integers(-3 * length, 3 * length, size=length)]
        j = int(rng.integers(length // 2, length))
        i = int(rng.integers(0, j))
        return {"numbers": numbers, "target": numbers[i] + numbers[j]}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check the config; the state is the empty map: ``{"index_of": {}}``."""
        check_int_list(config["numbers"], "numbers", min_length=2, max_length=_MAX_LENGTH)
        check_int_list([config["target"]], "target")
        return {"index_of": {}}

    def visible(self) -> dict[str, Any]:
        """The length and the target."""
        return {"length": len(self.config["numbers"]), "target": self.config["target"]}

    def statement(self) -> str:
        """The task in three sentences."""
        return (
            "A hidden list of integers and a target are given. Find positions i < j (0-based) "
            "whose numbers add up to the target; if there are several pairs, take the one with "
            "the smallest j, then the smallest i. Submit [i, j] with Done, or [-1, -1] if no "
            "pair exists."
        )

    def reference_answer(self) -> list[int]:
        """`first_pair` of the config."""
        return first_pair(self.config["numbers"], self.config["target"])

    @tool
    def get_number(self, index: int) -> str:
        """Read the number at a position of the list.

        Args:
            index: The position, 0-based (0 <= index < length).
        """
        return item_at(self.config["numbers"], index)

    @tool
    def subtract(self, a: int, b: int) -> str:
        """The difference a - b.

        Args:
            a: The number to subtract from.
            b: The number to subtract.
        """
        return json.dumps(a - b)

    @tool
    def store_index(self, value: int, index: int) -> str:
        """Remember the index of a value in the map (a value keeps its first stored index).

        Args:
            value: The number (the map's key).
            index: Its position.
        """
        stored = self.state["index_of"].setdefault(str(value), index)
        return f"{value} -> {stored}"

    @tool
    def lookup_index(self, value: int) -> str:
        """The index stored for a value, or -1 if none was stored.

        Args:
            value: The number to look up.
        """
        return json.dumps(self.state["index_of"].get(str(value), -1))

    def oracle(self) -> None:
        """Scan with the map: look up each number's complement, then store the number."""
        seen = json.loads(self.call("Observe"))
        length, target = seen["length"], seen["target"]
        for j in range(length):
            value = int(self.call("GetNumber", index=j))
            i = int(self.call("LookupIndex", value=int(self.call("Subtract", a=target, b=value))))
            if i >= 0:
                self.call("Done", answer=[i, j])
                return
            self.call("StoreIndex", value=value, index=j)
        self.call("Done", answer=[-1, -1])
