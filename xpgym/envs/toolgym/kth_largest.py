"""KthLargest: the k-th largest number of a hidden list, with min-heap tools.

Config: ``{"numbers": [1..1000 ints], "k": int in 1..len(numbers)}``. ``Observe`` shows the
length and k; ``GetNumber(index)`` reads one element; ``HeapPush(value)``, ``HeapPop()`` and
``HeapPeek()`` work a min-heap the tools keep. The answer is the k-th largest number counting
repeats (the k-th element of the list sorted in descending order).

The oracle keeps the k largest numbers seen in the heap: it pushes the first k, then for each
later number peeks at the heap's smallest and, if the number is larger, pops and pushes; the
final peek is the answer. ``2 * length + 2 * replacements + 3`` calls, at most
``4 * length - 2 * k + 3``.

Sizes: easy 4..6 numbers and k 1..2, medium 12..25 and 2..5, hard 40..60 and 3..6; values in
``0..3 * length``.
"""

from __future__ import annotations

import heapq
import json
from typing import Any, ClassVar

import numpy as np

from xpgym.core.tools.decorator import ToolError, tool
from xpgym.envs.toolgym.base import check_int_list, draw_length
from xpgym.envs.toolgym.hidden_list import HiddenListEnv

__all__ = ["SIZES", "KthLargestEnv", "kth_largest"]

SIZES: dict[str, tuple[int, int, int, int]] = {
    "easy": (4, 6, 1, 2),
    "medium": (12, 25, 2, 5),
    "hard": (40, 60, 3, 6),
}
"""Inclusive bounds ``(length low, length high, k low, k high)`` per difficulty."""
_MAX_LENGTH = 1000


def kth_largest(numbers: list[int], k: int) -> int:
    """The k-th largest number: the smallest of a size-k min-heap of the largest seen."""
    heap = numbers[:k]
    heapq.heapify(heap)
    for value in numbers[k:]:
        if value > heap[0]:
            heapq.heapreplace(heap, value)
    return heap[0]


class KthLargestEnv(HiddenListEnv):
    """Find the k-th largest number of a hidden list with min-heap tools."""

    name: ClassVar[str] = "KthLargest"
    answer_type: ClassVar[Any] = int
    answer_doc: ClassVar[str] = "The k-th largest number (repeats counted)."

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """SIZES[difficulty] numbers in ``0..3 * length`` and a k in its bounds."""
        low, high, k_low, k_high = SIZES[difficulty]
        length = draw_length(rng, (low, high))
        numbers = [int(x) for x in rng.integers(0, 3 * length + 1, size=length)]
        return {"numbers": numbers, "k": draw_length(rng, (k_low, k_high))}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check the config; the state is the empty heap: ``{"heap": []}``."""
        numbers = config["numbers"]
        check_int_list(numbers, "numbers", max_length=_MAX_LENGTH)
        k = config["k"]
        if type(k) is not int or not 1 <= k <= len(numbers):
            raise ValueError(f"'k' must be an int in 1..{len(numbers)}")
        return {"heap": []}

    def extra_visible(self) -> dict[str, Any]:
        """k."""
        return {"k": self.config["k"]}

    def statement(self) -> str:
        """The task in two sentences."""
        return (
            "A hidden list of integers and a number k are given. Find the k-th largest number "
            "of the list (repeats count: it is the k-th number when the list is sorted from "
            "largest to smallest). Submit it with Done."
        )

    def reference_answer(self) -> int:
        """`kth_largest` of the numbers."""
        return kth_largest(self.config["numbers"], self.config["k"])

    def _heap(self) -> list[int]:
        if not self.state["heap"]:
            raise ToolError("the heap is empty")
        return self.state["heap"]

    @tool
    def heap_push(self, value: int) -> str:
        """Push a value onto the min-heap; returns the heap's size.

        Args:
            value: The value to push.
        """
        heapq.heappush(self.state["heap"], value)
        return json.dumps(len(self.state["heap"]))

    @tool
    def heap_pop(self) -> str:
        """Remove and return the heap's smallest value."""
        return json.dumps(heapq.heappop(self._heap()))

    @tool
    def heap_peek(self) -> str:
        """The heap's smallest value, without removing it."""
        return json.dumps(self._heap()[0])

    def oracle(self) -> None:
        """Keep the k largest numbers seen in the heap; its smallest is the answer."""
        seen = json.loads(self.call("Observe"))
        k = seen["k"]
        for index in range(seen["length"]):
            value = int(self.call("GetNumber", index=index))
            if index < k:
                self.call("HeapPush", value=value)
            elif value > int(self.call("HeapPeek")):
                self.call("HeapPop")
                self.call("HeapPush", value=value)
        self.call("Done", answer=int(self.call("HeapPeek")))
