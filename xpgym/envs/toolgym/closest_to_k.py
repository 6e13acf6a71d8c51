"""ClosestToK: find the number closest to K in a hidden sorted list (binary search by tools).

Config: ``{"numbers": [ints, sorted ascending, length >= 1], "k": int}``. ``Observe`` shows
the list's length and K; ``LookUp(index)`` reads one element; ``Distance(a, b)`` gives
``|a - b|``. The answer is the element closest to K; on a tie, the smaller one.

The oracle binary-searches for the first element >= K (about log2(n) look-ups), then compares
its two neighbours' distances: 1 + log2(n) + 4..6 calls.

Sizes: easy 64..128 numbers, medium 500..1000, hard 10,000..50,000; values spread over about
ten times the length.
"""

from __future__ import annotations

import bisect
import itertools
import json
from typing import Any, ClassVar

import numpy as np

from xpgym.core.tools.decorator import tool
from xpgym.envs.toolgym.base import ToolGymEnv, check_int_list, draw_length, item_at

__all__ = ["SIZES", "ClosestToKEnv"]

SIZES: dict[str, tuple[int, int]] = {
    "easy": (64, 128),
    "medium": (500, 1000),
    "hard": (10_000, 50_000),
}
"""Inclusive bounds of the list length per difficulty."""


class ClosestToKEnv(ToolGymEnv):
    """Find the element of a hidden sorted list closest to K (ties: the smaller element)."""

    name: ClassVar[str] = "ClosestToK"
    answer_type: ClassVar[Any] = int
    answer_doc: ClassVar[str] = "The element of the list closest to K (on a tie, the smaller)."

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """A sorted list of SIZES[difficulty] integers and a K within their range."""
        length = draw_length(rng, SIZES[difficulty])
        numbers = sorted(int(x) for x in rng.integers(-5 * length, 5 * length, size=length))
        k = int(rng.integers(-5 * length - 3, 5 * length + 3))
        return {"numbers": numbers, "k": k}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check the config; the state is empty (every tool only reads the config)."""
        numbers = config["numbers"]
        check_int_list(numbers, "numbers")
        check_int_list([config["k"]], "k")
        if any(a > b for a, b in itertools.pairwise(numbers)):
            raise ValueError("'numbers' must be sorted ascending")
        return {}

    def visible(self) -> dict[str, Any]:
        """The list's length and K."""
        return {"length": len(self.config["numbers"]), "k": self.config["k"]}

    def statement(self) -> str:
        """The task in two sentences."""
        return (
            "A hidden list of integers is sorted in ascending order. Find the element closest "
            "to the number K; if two elements are equally close, the answer is the smaller "
            "one. Submit that element with Done."
        )

    def reference_answer(self) -> int:
        """The closest element by `bisect` (ties: the smaller)."""
        numbers, k = self.config["numbers"], self.config["k"]
        at = bisect.bisect_left(numbers, k)
        candidates = numbers[max(at - 1, 0) : at + 1]
        return min(candidates, key=lambda x: (abs(x - k), x))

    @tool
    def look_up(self, index: int) -> str:
        """Read the element at a position of the sorted list.

        Args:
            index: The position, 0-based (0 <= index < length).
        """
        return item_at(self.config["numbers"], index)

    @tool
    def distance(self, a: int, b: int) -> str:
        """The absolute difference |a - b| of two integers.

        Args:
            a: The first integer.
            b: The second integer.
        """
        return json.dumps(abs(a - b))

    def oracle(self) -> None:
        """Binary search for the first element >= K, then compare the two neighbours."""
        seen = json.loads(self.call("Observe"))
        length, k = seen["length"], seen["k"]
        low, high = 0, length  # the first index whose element is >= k lies in [low, high]
        while low < high:
            middle = (low + high) // 2
            if int(self.call("LookUp", index=middle)) < k:
                low = middle + 1
            else:
                high = middle
        candidates = [int(self.call("LookUp", index=i)) for i in (low - 1, low) if 0 <= i < length]
        distances = [int(self.call("Distance", a=value, b=k)) for value in candidates]
        best = min(zip(distances, candidates, strict=True))[1]
        self.call("Done", answer=best)
