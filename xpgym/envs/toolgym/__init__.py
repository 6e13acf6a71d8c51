"""CodeGym-style tool-use envs. Ids: ``toolgym:<Name>-v0[-easy|-hard|-random]``.

Each env is a `xpgym.envs.toolgym.base.ToolGymEnv` subclass in its own module (the template
and its contract are documented in `xpgym.envs.toolgym.base`). A task is also a string
``Name@{json config}``: `from_task_string` builds the env that plays it. Env modules are
imported only when an env is made or a task string is read.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, NamedTuple

from xpgym.envs.common.presets import register_presets

if TYPE_CHECKING:
    from xpgym.envs.toolgym.base import ToolGymEnv

__all__ = ["ENVS", "EnvEntry", "env_class", "from_task_string", "register_envs", "toolgym_ids"]


class EnvEntry(NamedTuple):
    """One toolgym env: its task name, ``module:Class`` entry point and id descriptions."""

    name: str
    entry_point: str
    medium: str
    easy: str
    hard: str


_PACKAGE = "xpgym.envs.toolgym"

# Brief F's envs.
_ENVS_F: tuple[EnvEntry, ...] = (
    EnvEntry(
        "ClosestToK",
        f"{_PACKAGE}.closest_to_k:ClosestToKEnv",
        "Closest element to K in a hidden sorted list of 500-1000 ints, by look-ups.",
        "Closest element to K in a hidden sorted list of 64-128 ints, by look-ups.",
        "Closest element to K in a hidden sorted list of 10k-50k ints, by look-ups.",
    ),
    EnvEntry(
        "ModeFinding",
        f"{_PACKAGE}.mode_finding:ModeFindingEnv",
        "Mode of a hidden list of 20-40 ints, counted with counter tools.",
        "Mode of a hidden list of 5-10 ints, counted with counter tools.",
        "Mode of a hidden list of 80-120 ints, counted with counter tools.",
    ),
    EnvEntry(
        "EditDistance",
        f"{_PACKAGE}.edit_distance:EditDistanceEnv",
        "Edit distance of two hidden 4-6 letter strings, filling a DP table by tools.",
        "Edit distance of two hidden 2-3 letter strings, filling a DP table by tools.",
        "Edit distance of two hidden 7-9 letter strings, filling a DP table by tools.",
    ),
    EnvEntry(
        "LargestRectangle",
        f"{_PACKAGE}.largest_rectangle:LargestRectangleEnv",
        "Largest rectangle in a hidden histogram of 10-20 bars, with stack tools.",
        "Largest rectangle in a hidden histogram of 3-5 bars, with stack tools.",
        "Largest rectangle in a hidden histogram of 40-60 bars, with stack tools.",
    ),
    EnvEntry(
        "TwoSum",
        f"{_PACKAGE}.two_sum:TwoSumEnv",
        "Two positions of a hidden 12-25 int list summing to a target, with a hash map.",
        "Two positions of a hidden 4-6 int list summing to a target, with a hash map.",
        "Two positions of a hidden 45-60 int list summing to a target, with a hash map.",
    ),
    EnvEntry(
        "MaxSubarray",
        f"{_PACKAGE}.max_subarray:MaxSubarrayEnv",
        "Maximum subarray sum of a hidden list of 15-30 ints, with Kadane's tools.",
        "Maximum subarray sum of a hidden list of 3-5 ints, with Kadane's tools.",
        "Maximum subarray sum of a hidden list of 60-80 ints, with Kadane's tools.",
    ),
    EnvEntry(
        "BalancedBrackets",
        f"{_PACKAGE}.balanced_brackets:BalancedBracketsEnv",
        "Where a hidden 20-40 bracket text stops being balanced, with stack tools.",
        "Where a hidden 4-8 bracket text stops being balanced, with stack tools.",
        "Where a hidden 60-80 bracket text stops being balanced, with stack tools.",
    ),
)

# Brief G's envs (added on this template).
_ENVS_G: tuple[EnvEntry, ...] = (
    EnvEntry(
        "ShortestPath",
        f"{_PACKAGE}.graphs:ShortestPathEnv",
        "Fewest edges between two nodes of a hidden 12-20 node graph, with BFS queue tools.",
        "Fewest edges between two nodes of a hidden 5-7 node graph, with BFS queue tools.",
        "Fewest edges between two nodes of a hidden 40-50 node graph, with BFS queue tools.",
    ),
    EnvEntry(
        "ConnectedComponents",
        f"{_PACKAGE}.graphs:ConnectedComponentsEnv",
        "Connected components of a hidden 12-20 node graph, with union-find tools.",
        "Connected components of a hidden 5-7 node graph, with union-find tools.",
        "Connected components of a hidden 40-60 node graph, with union-find tools.",
    ),
    EnvEntry(
        "LongestIncreasingSubsequence",
        f"{_PACKAGE}.longest_increasing:LongestIncreasingSubsequenceEnv",
        "Longest increasing subsequence of a hidden 15-30 int list, with DP-table tools.",
        "Longest increasing subsequence of a hidden 4-6 int list, with DP-table tools.",
        "Longest increasing subsequence of a hidden 60-100 int list, with DP-table tools.",
    ),
    EnvEntry(
        "MergeIntervals",
        f"{_PACKAGE}.merge_intervals:MergeIntervalsEnv",
        "Merge 8-15 hidden intervals, with sort and merge-list tools.",
        "Merge 3-5 hidden intervals, with sort and merge-list tools.",
        "Merge 40-60 hidden intervals, with sort and merge-list tools.",
    ),
    EnvEntry(
        "CountIslands",
        f"{_PACKAGE}.count_islands:CountIslandsEnv",
        "Islands of a hidden 5-7 x 5-7 grid, with cell and flood-fill tools.",
        "Islands of a hidden 3-4 x 3-4 grid, with cell and flood-fill tools.",
        "Islands of a hidden 9-11 x 9-11 grid, with cell and flood-fill tools.",
    ),
    EnvEntry(
        "ContainerWithMostWater",
        f"{_PACKAGE}.container_water:ContainerWithMostWaterEnv",
        "Most water between two of 10-25 hidden lines, with two-pointer tools.",
        "Most water between two of 4-6 hidden lines, with two-pointer tools.",
        "Most water between two of 50-75 hidden lines, with two-pointer tools.",
    ),
    EnvEntry(
        "RangeSumQueries",
        f"{_PACKAGE}.range_sums:RangeSumQueriesEnv",
        "3-5 range sums over a hidden 10-20 int list, with prefix-sum tools.",
        "2-3 range sums over a hidden 4-6 int list, with prefix-sum tools.",
        "8-12 range sums over a hidden 50-80 int list, with prefix-sum tools.",
    ),
    EnvEntry(
        "KthLargest",
        f"{_PACKAGE}.kth_largest:KthLargestEnv",
        "k-th largest (k 2-5) of a hidden 12-25 int list, with min-heap tools.",
        "k-th largest (k 1-2) of a hidden 4-6 int list, with min-heap tools.",
        "k-th largest (k 3-6) of a hidden 40-60 int list, with min-heap tools.",
    ),
)

ENVS: dict[str, EnvEntry] = {entry.name: entry for entry in (*_ENVS_F, *_ENVS_G)}
"""Every toolgym env by task name."""


def toolgym_ids() -> list[str]:
    """Every registered toolgym id (four per env: default, easy, hard, random)."""
    suffixes = ("", "-easy", "-hard", "-random")
    return [f"toolgym:{name}-v0{suffix}" for name in ENVS for suffix in suffixes]


def env_class(name: str) -> type[ToolGymEnv]:
    """The env class of task name `name` (imports its module).

    Raises:
        ValueError: `name` is not a toolgym env, listing the known names.
    """
    entry = ENVS.get(name)
    if entry is None:
        raise ValueError(f"unknown toolgym env {name!r}; known: {', '.join(sorted(ENVS))}")
    module, attr = entry.entry_point.split(":")
    return getattr(importlib.import_module(module), attr)


def from_task_string(task: str, **kwargs: Any) -> ToolGymEnv:
    """The env that plays ``Name@{json config}`` at every reset; `kwargs` go to its class.

    Raises:
        ValueError: a malformed string, an unknown name or a bad config, naming the problem.
    """
    from xpgym.envs.toolgym.formats import parse_task_string

    name, config = parse_task_string(task)
    return env_class(name)(config=config, **kwargs)


def register_envs() -> None:
    """Register the toolgym ids; entry points are imported only by `xpgym.make`."""
    for entry in ENVS.values():
        register_presets(
            "toolgym", entry.name, entry.entry_point, entry.medium, entry.easy, entry.hard
        )
