"""MergeIntervals: merge a hidden list of closed intervals, with sort and merge tools.

Config: ``{"intervals": [[start, end], ...]}`` (1..500 pairs of ints, start <= end).
``Observe`` shows the number of intervals; ``SortIntervals()`` sorts the working copy by
start (then end); ``GetInterval(index)`` reads one interval of the working copy;
``GetLastMerged()``, ``AppendMerged(start, end)``, ``ExtendLastMerged(end)`` and
``ListMerged()`` build the merged list the tools keep. The answer is the merged intervals in
ascending order; intervals that share a point merge (``[1, 3]`` and ``[3, 5]`` give
``[1, 5]``; ``[1, 2]`` and ``[3, 4]`` stay apart).

The oracle sorts, then for each interval reads it and the last merged one and appends or
extends: ``3 * count + 4`` calls.

Sizes: easy 3..5 intervals, medium 8..15, hard 40..60; starts in ``0..5 * count``, lengths
0..10.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from xpgym.core.tools.decorator import ToolError, tool
from xpgym.envs.toolgym.base import ToolGymEnv, draw_length, item_at
from xpgym.envs.toolgym.hidden_list import check_int_pairs

__all__ = ["SIZES", "MergeIntervalsEnv", "merge_intervals"]

SIZES: dict[str, tuple[int, int]] = {"easy": (3, 5), "medium": (8, 15), "hard": (40, 60)}
"""Inclusive bounds of the number of intervals per difficulty."""
_MAX_INTERVALS = 500


def merge_intervals(intervals: list[list[int]]) -> list[list[int]]:
    """Sort by start, then fold each interval into the last merged one if they overlap."""
    merged: list[list[int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


class MergeIntervalsEnv(ToolGymEnv):
    """Merge a hidden list of overlapping intervals with sort and merge tools."""

    name: ClassVar[str] = "MergeIntervals"
    answer_type: ClassVar[Any] = list[list[int]]
    answer_doc: ClassVar[str] = "The merged intervals [[start, end], ...], sorted by start."

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """SIZES[difficulty] intervals starting in ``0..5 * count``, 0..10 long."""
        count = draw_length(rng, SIZES[difficulty])
        starts = rng.integers(0, 5 * count + 1, size=count)
        lengths = rng.integers(0, 11, size=count)
        return {"intervals": [[int(s), int(s + n)] for s, n in zip(starts, lengths, strict=True)]}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check the config; the state: ``{"intervals": working copy, "merged": []}``."""
        intervals = config["intervals"]
        check_int_pairs(intervals, "intervals", max_length=_MAX_INTERVALS, ordered=True)
        return {"intervals": [list(pair) for pair in intervals], "merged": []}

    def visible(self) -> dict[str, Any]:
        """The number of intervals."""
        return {"count": len(self.config["intervals"])}

    def statement(self) -> str:
        """The task in two sentences."""
        return (
            "A hidden list of closed integer intervals [start, end] is given. Merge every group "
            "of overlapping intervals (intervals that share a point overlap) and submit the "
            "merged intervals, sorted by start, with Done."
        )

    def reference_answer(self) -> list[list[int]]:
        """`merge_intervals` of the intervals."""
        return merge_intervals(self.config["intervals"])

    def _last(self) -> list[int]:
        if not self.state["merged"]:
            raise ToolError("the merged list is empty")
        return self.state["merged"][-1]

    @tool
    def sort_intervals(self) -> str:
        """Sort the working list of intervals by start (then end)."""
        self.state["intervals"].sort()
        return f"sorted {len(self.state['intervals'])} intervals"

    @tool
    def get_interval(self, index: int) -> str:
        """Read the interval at a position of the working list, as [start, end].

        Args:
            index: The position, 0-based (0 <= index < count).
        """
        return item_at(self.state["intervals"], index)

    @tool
    def get_last_merged(self) -> str:
        """The last interval of the merged list, or null if the list is empty."""
        merged = self.state["merged"]
        return json.dumps(merged[-1] if merged else None)

    @tool
    def append_merged(self, start: int, end: int) -> str:
        """Append an interval to the merged list; returns the list's length.

        Args:
            start: The interval's start.
            end: The interval's end (>= start).
        """
        if start > end:
            raise ToolError(f"start {start} is after end {end}")
        self.state["merged"].append([start, end])
        return json.dumps(len(self.state["merged"]))

    @tool
    def extend_last_merged(self, end: int) -> str:
        """Set the last merged interval's end to the larger of its end and `end`; returns it.

        Args:
            end: The new end.
        """
        last = self._last()
        last[1] = max(last[1], end)
        return json.dumps(last)

    @tool
    def list_merged(self) -> str:
        """The whole merged list."""
        return json.dumps(self.state["merged"])

    def oracle(self) -> None:
        """Sort; append each interval that starts after the last merged end, else extend."""
        count = json.loads(self.call("Observe"))["count"]
        self.call("SortIntervals")
        for index in range(count):
            start, end = json.loads(self.call("GetInterval", index=index))
            last = json.loads(self.call("GetLastMerged"))
            if last is None or start > last[1]:
                self.call("AppendMerged", start=start, end=end)
            else:
                self.call("ExtendLastMerged", end=end)
        self.call("Done", answer=json.loads(self.call("ListMerged")))
