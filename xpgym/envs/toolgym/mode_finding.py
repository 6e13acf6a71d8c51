"""ModeFinding: the most frequent number of a hidden list, counted with tool calls.

Config: ``{"numbers": [ints, length >= 1]}``. ``Observe`` shows the length;
``GetElement(index)`` reads one number; ``IncrementCounter(value)`` adds one to the counter of
`value` and returns its new count; ``ListCounters()`` returns every counter. The answer is the
mode: the number that occurs most often; on a tie, the smallest such number.

The oracle reads and counts every element, then reads the counters: ``2 * length + 3`` calls.

Sizes: easy 5..10 numbers, medium 20..40, hard 80..120; values drawn from a range about a
third of the length, so repeats are common.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, ClassVar

import numpy as np

from xpgym.core.tools.decorator import tool
from xpgym.envs.toolgym.base import ToolGymEnv, check_int_list, draw_length, item_at

__all__ = ["SIZES", "ModeFindingEnv"]

SIZES: dict[str, tuple[int, int]] = {"easy": (5, 10), "medium": (20, 40), "hard": (80, 120)}
"""Inclusive bounds of the list length per difficulty."""


class ModeFindingEnv(ToolGymEnv):
    """Find the mode of a hidden list of integers (ties: the smallest)."""

    name: ClassVar[str] = "ModeFinding"
    answer_type: ClassVar[Any] = int
    answer_doc: ClassVar[str] = "The most frequent number (on a tie, the smallest of them)."

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """SIZES[difficulty] integers drawn from about length / 3 values."""
        length = draw_length(rng, SIZES[difficulty])
        spread = max(2, length // 3)
        return {"numbers": [int(x) for x in rng.integers(-spread, spread, size=length)]}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check the config; the state is the counters, empty: ``{"counters": {}}``."""
        check_int_list(config["numbers"], "numbers")
        return {"counters": {}}

    def visible(self) -> dict[str, Any]:
        """The list's length."""
        return {"length": len(self.config["numbers"])}

    def statement(self) -> str:
        """The task in two sentences."""
        return (
            "A hidden list of integers is given. Find its mode, the number that occurs most "
            "often; if several numbers are equally frequent, the answer is the smallest of "
            "them. Submit it with Done."
        )

    def reference_answer(self) -> int:
        """The mode by `collections.Counter` (ties: the smallest)."""
        counts = Counter(self.config["numbers"])
        return min(counts, key=lambda value: (-counts[value], value))

    @tool
    def get_element(self, index: int) -> str:
        """Read the number at a position of the list.

        Args:
            index: The position, 0-based (0 <= index < length).
        """
        return item_at(self.config["numbers"], index)

    @tool
    def increment_counter(self, value: int) -> str:
        """Add one to the counter of a number (counters start at 0); returns its new count.

        Args:
            value: The number whose counter to increment.
        """
        counters = self.state["counters"]
        counters[str(value)] = counters.get(str(value), 0) + 1
        return json.dumps(counters[str(value)])

    @tool
    def list_counters(self) -> str:
        """Every counter so far, as a JSON object {number: count}."""
        return json.dumps(self.state["counters"])

    def oracle(self) -> None:
        """Count every element, then pick the largest counter (ties: the smallest number)."""
        length = json.loads(self.call("Observe"))["length"]
        for index in range(length):
            self.call("IncrementCounter", value=int(self.call("GetElement", index=index)))
        counters = {int(k): v for k, v in json.loads(self.call("ListCounters")).items()}
        self.call("Done", answer=min(counters, key=lambda value: (-counters[value], value)))
