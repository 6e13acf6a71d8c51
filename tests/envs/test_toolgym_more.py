"""Brief G's toolgym envs: each env's tools, its reference answer against a brute force, its
config checks, and its oracle on many seeds per preset (wins, stays in CodeGym's 10..256
calls, uses >= 4 tools, matches the call count its module documents).

The family tests in tests/envs/test_toolgym.py (check_env, fuzz, task strings, replay) run over
these envs too.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np
import pytest

import xpgym
from xpgym.envs.toolgym.base import ToolGymEnv
from xpgym.envs.toolgym.container_water import ContainerWithMostWaterEnv, most_water
from xpgym.envs.toolgym.count_islands import CountIslandsEnv, count_islands
from xpgym.envs.toolgym.graphs import (
    ConnectedComponentsEnv,
    ShortestPathEnv,
    bfs_distance,
    count_components,
)
from xpgym.envs.toolgym.hidden_list import check_int_pairs
from xpgym.envs.toolgym.kth_largest import KthLargestEnv, kth_largest
from xpgym.envs.toolgym.longest_increasing import (
    LongestIncreasingSubsequenceEnv,
    longest_increasing,
)
from xpgym.envs.toolgym.merge_intervals import MergeIntervalsEnv, merge_intervals
from xpgym.envs.toolgym.range_sums import RangeSumQueriesEnv, range_sums

ENV_CLASSES: list[type[ToolGymEnv]] = [
    ShortestPathEnv,
    ConnectedComponentsEnv,
    LongestIncreasingSubsequenceEnv,
    MergeIntervalsEnv,
    CountIslandsEnv,
    ContainerWithMostWaterEnv,
    RangeSumQueriesEnv,
    KthLargestEnv,
]


def on(cls: type[ToolGymEnv], **config: Any) -> ToolGymEnv:
    """An env reset to play `config`."""
    env = cls()
    env.reset(seed=0, options={"config": config})
    return env


def tool(env: ToolGymEnv, name: str, **parameters: Any) -> str:
    """The observation of one well-formed call."""
    obs, reward, terminated, _, info = env.step(
        json.dumps({"name": name, "parameters": parameters})
    )
    assert not info["invalid_action"], obs
    assert (reward, terminated) == (0.0, False)
    return obs


def configs(cls: type[ToolGymEnv], difficulty: str, count: int = 100) -> list[dict[str, Any]]:
    rng = np.random.default_rng(11)
    return [cls.generate_config(rng, difficulty) for _ in range(count)]


# ----- every env: oracle on many seeds per preset ---------------------------------------------


def documented_calls(env: ToolGymEnv) -> int | None:
    """The oracle call count each module's docstring gives, from the config (None: it
    depends on the run, checked by bounds only)."""
    config = env.config
    if isinstance(env, ShortestPathEnv):
        component = sum(
            bfs_distance(config["nodes"], config["edges"], config["source"], node) >= 0
            for node in range(config["nodes"])
        )
        return 4 * component + 3
    if isinstance(env, ConnectedComponentsEnv):
        return 2 * len(config["edges"]) + config["nodes"] + 2
    if isinstance(env, LongestIncreasingSubsequenceEnv):
        return 2 * len(config["numbers"]) + 3
    if isinstance(env, MergeIntervalsEnv):
        return 3 * len(config["intervals"]) + 4
    if isinstance(env, CountIslandsEnv):
        grid = config["grid"]
        land = sum(map(sum, grid))
        return len(grid) * len(grid[0]) + land + count_islands(grid) + 2
    if isinstance(env, ContainerWithMostWaterEnv):
        return 3 * len(config["heights"]) + 1
    if isinstance(env, RangeSumQueriesEnv):
        return 2 * len(config["numbers"]) + 2 * len(config["queries"]) + 3
    return None


@pytest.mark.parametrize("cls", ENV_CLASSES, ids=lambda cls: cls.name)
@pytest.mark.parametrize("suffix", ["", "-easy", "-hard", "-random"])
def test_oracle_wins_within_codegym_call_bounds_on_many_seeds(cls, suffix):
    for seed in range(30):
        env = xpgym.make(f"toolgym:{cls.name}-v0{suffix}").unwrapped
        env.reset(seed=seed)
        actions = env.solve()
        assert env.answer_correct, (cls.name, suffix, seed)
        assert 10 <= len(actions) <= 256, (cls.name, suffix, seed, len(actions))
        assert len({json.loads(a)["name"] for a in actions}) >= 4
        expected = documented_calls(env)
        if expected is not None:
            assert len(actions) == expected, (cls.name, suffix, seed)


def test_kth_largest_oracle_call_count_follows_its_replacements():
    for seed in range(30):
        env = KthLargestEnv(difficulty="hard")
        env.reset(seed=seed)
        actions = [json.loads(a)["name"] for a in env.solve()]
        numbers, k = env.config["numbers"], env.config["k"]
        replacements = actions.count("HeapPop")
        assert len(actions) == 2 * len(numbers) + 2 * replacements + 3
        assert len(actions) <= 4 * len(numbers) - 2 * k + 3


@pytest.mark.parametrize("cls", ENV_CLASSES, ids=lambda cls: cls.name)
def test_tools_change_only_the_state_so_process_isolation_plays_the_same(cls):
    """In process mode a tool runs in a forked child and only ``state`` comes back: the
    oracle must make the same calls, see the same outputs and win."""
    solver = cls(difficulty="easy")
    solver.reset(seed=2)
    actions = solver.solve()
    inline, forked = cls(difficulty="easy"), cls(difficulty="easy", isolation="process")
    inline.reset(seed=2)
    forked.reset(seed=2)
    for action in actions:
        assert forked.step(action) == inline.step(action)
    assert forked.answer_correct
    assert forked.state == inline.state == solver.state


@pytest.mark.parametrize("cls", ENV_CLASSES, ids=lambda cls: cls.name)
def test_observe_hides_the_data(cls):
    env = cls(difficulty="medium")
    env.reset(seed=5)
    shown = json.loads(tool(env, "Observe"))
    hidden = {"edges", "numbers", "intervals", "grid", "heights"} & set(env.config)
    assert hidden
    text = json.dumps(shown)
    for key in hidden:
        assert shown.get(key) != env.config[key]
        assert json.dumps(env.config[key]) not in text


# ----- ShortestPath ---------------------------------------------------------------------------


def test_shortest_path_tools():
    env = on(ShortestPathEnv, nodes=4, edges=[[0, 1], [1, 2], [2, 0], [1, 2]], source=0, target=3)
    assert json.loads(tool(env, "Observe")) == {"nodes": 4, "source": 0, "target": 3}
    assert tool(env, "GetNeighbors", node=1) == "[0, 2]"  # the repeated edge counts once
    assert tool(env, "GetNeighbors", node=3) == "[]"
    assert "node 4 is out of range 0..3" in tool(env, "GetNeighbors", node=4)
    assert tool(env, "GetDistance", node=2) == "null"
    assert tool(env, "SetDistance", node=2, distance=5) == "distance[2] = 5"
    assert tool(env, "GetDistance", node=2) == "5"
    assert "the queue is empty" in tool(env, "Dequeue")
    assert tool(env, "Enqueue", node=2) == "1"
    assert tool(env, "Enqueue", node=0) == "2"
    assert tool(env, "Dequeue") == "2"  # first in, first out
    assert env.state == {"distance": [None, None, 5, None], "queue": [0]}


def _distances_by_relaxation(nodes: int, edges: list[list[int]], source: int) -> list[int]:
    """Bellman-Ford with unit weights (no queue): relax every edge n times."""
    far = nodes + 1
    distance = [far] * nodes
    distance[source] = 0
    for _ in range(nodes):
        for u, v in edges:
            distance[v] = min(distance[v], distance[u] + 1)
            distance[u] = min(distance[u], distance[v] + 1)
    return [-1 if d == far else d for d in distance]


def test_shortest_path_matches_relaxation_and_some_targets_are_unreachable():
    unreachable = 0
    for difficulty in ("easy", "medium", "hard"):
        for config in configs(ShortestPathEnv, difficulty):
            expected = _distances_by_relaxation(config["nodes"], config["edges"], config["source"])
            answer = on(ShortestPathEnv, **config).reference_answer()
            assert answer == expected[config["target"]]
            assert config["source"] != config["target"]
            unreachable += answer == -1
    assert 10 <= unreachable <= 100  # about a fifth of the graphs are split


@pytest.mark.parametrize(
    ("config", "answer"),
    [
        ({"nodes": 2, "edges": [], "source": 0, "target": 1}, -1),
        ({"nodes": 1, "edges": [], "source": 0, "target": 0}, 0),
        ({"nodes": 4, "edges": [[0, 1], [1, 2], [2, 3], [0, 3]], "source": 0, "target": 2}, 2),
    ],
)
def test_shortest_path_reference_and_oracle_on_edge_cases(config, answer):
    env = on(ShortestPathEnv, **config)
    assert env.reference_answer() == answer
    assert json.loads(env.solve()[-1])["parameters"]["answer"] == answer
    assert env.answer_correct


# ----- ConnectedComponents --------------------------------------------------------------------


def test_connected_components_tools():
    env = on(ConnectedComponentsEnv, nodes=4, edges=[[3, 2], [2, 1], [1, 3]])
    assert json.loads(tool(env, "Observe")) == {"nodes": 4, "edges": 3}
    assert tool(env, "GetEdge", index=0) == "[3, 2]"
    assert "index 3 is out of range 0..2" in tool(env, "GetEdge", index=3)
    assert tool(env, "Find", node=3) == "3"
    assert tool(env, "Union", a=3, b=2) == "true"
    assert tool(env, "Union", a=2, b=1) == "true"
    assert tool(env, "Union", a=1, b=3) == "false"  # already one set
    assert [tool(env, "Find", node=n) for n in range(4)] == ["0", "1", "1", "1"]
    assert env.state["parent"] == [0, 1, 1, 1]  # the smaller root wins; paths compressed
    assert "node 9 is out of range" in tool(env, "Union", a=0, b=9)


def _components_by_search(nodes: int, edges: list[list[int]]) -> int:
    """Depth-first labelling."""
    neighbours: list[list[int]] = [[] for _ in range(nodes)]
    for u, v in edges:
        neighbours[u].append(v)
        neighbours[v].append(u)
    label = [-1] * nodes
    count = 0
    for start in range(nodes):
        if label[start] < 0:
            stack = [start]
            label[start] = count
            while stack:
                for other in neighbours[stack.pop()]:
                    if label[other] < 0:
                        label[other] = count
                        stack.append(other)
            count += 1
    return count


def test_connected_components_matches_search():
    for difficulty in ("easy", "medium", "hard"):
        for config in configs(ConnectedComponentsEnv, difficulty):
            assert count_components(config["nodes"], config["edges"]) == _components_by_search(
                config["nodes"], config["edges"]
            )


# ----- LongestIncreasingSubsequence ----------------------------------------------------------


def test_longest_increasing_tools():
    env = on(LongestIncreasingSubsequenceEnv, numbers=[3, 1, 2])
    assert json.loads(tool(env, "Observe")) == {"length": 3}
    assert tool(env, "GetNumber", index=2) == "2"
    assert "index -1 is out of range 0..2" in tool(env, "GetNumber", index=-1)
    assert "the DP table is empty" in tool(env, "MaxDPCell")
    assert tool(env, "GetDPCell", index=1) == "null"
    assert tool(env, "SetDPCell", index=1, value=4) == "dp[1] = 4"
    assert tool(env, "SetDPCell", index=2, value=2) == "dp[2] = 2"
    assert tool(env, "GetDPCell", index=1) == "4"
    assert tool(env, "MaxDPCell") == "4"
    assert "out of range" in tool(env, "SetDPCell", index=3, value=1)
    assert env.state["dp"] == [None, 4, 2]


@pytest.mark.parametrize(
    ("numbers", "length"),
    [([10, 9, 2, 5, 3, 7, 101, 18], 4), ([7, 7, 7], 1), ([1], 1), ([0, 1, 0, 3, 2, 3], 4)],
)
def test_longest_increasing_reference(numbers, length):
    assert on(LongestIncreasingSubsequenceEnv, numbers=numbers).reference_answer() == length


def test_longest_increasing_matches_brute_force():
    for config in configs(LongestIncreasingSubsequenceEnv, "easy"):
        numbers = config["numbers"]
        brute = max(
            size
            for size in range(1, len(numbers) + 1)
            for picked in itertools.combinations(numbers, size)
            if all(a < b for a, b in itertools.pairwise(picked))
        )
        assert longest_increasing(numbers) == brute


# ----- MergeIntervals -------------------------------------------------------------------------


def test_merge_intervals_tools():
    env = on(MergeIntervalsEnv, intervals=[[5, 6], [1, 3], [2, 4]])
    assert json.loads(tool(env, "Observe")) == {"count": 3}
    assert tool(env, "GetInterval", index=0) == "[5, 6]"  # unsorted until SortIntervals
    assert tool(env, "SortIntervals") == "sorted 3 intervals"
    assert tool(env, "GetInterval", index=0) == "[1, 3]"
    assert tool(env, "GetLastMerged") == "null"
    assert "the merged list is empty" in tool(env, "ExtendLastMerged", end=9)
    assert "start 4 is after end 2" in tool(env, "AppendMerged", start=4, end=2)
    assert tool(env, "AppendMerged", start=1, end=3) == "1"
    assert tool(env, "ExtendLastMerged", end=4) == "[1, 4]"
    assert tool(env, "ExtendLastMerged", end=2) == "[1, 4]"  # never shrinks
    assert tool(env, "ListMerged") == "[[1, 4]]"
    assert env.config["intervals"] == [[5, 6], [1, 3], [2, 4]]  # the config is untouched


@pytest.mark.parametrize(
    ("intervals", "merged"),
    [
        ([[1, 3], [2, 6], [8, 10], [15, 18]], [[1, 6], [8, 10], [15, 18]]),
        ([[1, 3], [3, 5]], [[1, 5]]),
        ([[1, 2], [3, 4]], [[1, 2], [3, 4]]),
        ([[4, 4], [1, 9], [2, 3]], [[1, 9]]),
    ],
)
def test_merge_intervals_reference(intervals, merged):
    env = on(MergeIntervalsEnv, intervals=intervals)
    assert env.reference_answer() == merged
    assert json.loads(env.solve()[-1])["parameters"]["answer"] == merged


def _merge_by_pairs(intervals: list[list[int]]) -> list[list[int]]:
    """Join any two overlapping intervals until none overlap; then sort."""
    pieces = [list(pair) for pair in intervals]
    joined = True
    while joined:
        joined = False
        for a, b in itertools.combinations(range(len(pieces)), 2):
            (s1, e1), (s2, e2) = pieces[a], pieces[b]
            if s1 <= e2 and s2 <= e1:
                pieces[a] = [min(s1, s2), max(e1, e2)]
                del pieces[b]
                joined = True
                break
    return sorted(pieces)


def test_merge_intervals_matches_pairwise_joining():
    for difficulty in ("easy", "medium"):
        for config in configs(MergeIntervalsEnv, difficulty):
            assert merge_intervals(config["intervals"]) == _merge_by_pairs(config["intervals"])


# ----- CountIslands ---------------------------------------------------------------------------


def test_count_islands_tools():
    env = on(CountIslandsEnv, grid=[[1, 1, 0], [0, 1, 0], [1, 0, 1]])
    assert json.loads(tool(env, "Observe")) == {"rows": 3, "cols": 3}
    assert tool(env, "GetCell", row=2, col=0) == "1"
    assert tool(env, "GetCell", row=0, col=2) == "0"
    assert "col 3 is out of range 0..2" in tool(env, "GetCell", row=0, col=3)
    assert tool(env, "IsVisited", row=1, col=1) == "false"
    assert "is water" in tool(env, "FloodFill", row=1, col=0)
    assert tool(env, "FloodFill", row=0, col=1) == "3"
    assert tool(env, "IsVisited", row=1, col=1) == "true"
    assert tool(env, "IsVisited", row=2, col=2) == "false"  # diagonal is not connected
    assert "already visited" in tool(env, "FloodFill", row=0, col=0)
    assert env.state["visited"] == [[True, True, False], [False, True, False], [False] * 3]


def _islands_by_union(grid: list[list[int]]) -> int:
    """Union-find over land cells joined to their right and lower land neighbours."""
    cols = len(grid[0])
    parent = {
        r * cols + c: r * cols + c for r, row in enumerate(grid) for c, v in enumerate(row) if v
    }

    def root(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for cell in list(parent):
        right = cell + 1 if (cell + 1) % cols else None
        for other in (right, cell + cols):
            if other in parent:
                parent[root(other)] = root(cell)
    return sum(root(x) == x for x in parent)


def test_count_islands_matches_union_find():
    for difficulty in ("easy", "medium", "hard"):
        for config in configs(CountIslandsEnv, difficulty):
            assert count_islands(config["grid"]) == _islands_by_union(config["grid"])


# ----- ContainerWithMostWater -----------------------------------------------------------------


def test_container_tools():
    env = on(ContainerWithMostWaterEnv, heights=[1, 8, 6, 2])
    assert json.loads(tool(env, "Observe")) == {"length": 4}
    assert tool(env, "GetHeight", index=1) == "8"
    assert tool(env, "ComputeArea", left=1, right=2) == "6"
    assert tool(env, "ComputeArea", left=0, right=3) == "3"
    assert "left 2 must be smaller than right 2" in tool(env, "ComputeArea", left=2, right=2)
    assert "right 4 is out of range 0..3" in tool(env, "ComputeArea", left=0, right=4)
    assert tool(env, "GetBest") == "null"
    assert tool(env, "UpdateBest", area=3) == "3"
    assert tool(env, "UpdateBest", area=6) == "6"
    assert tool(env, "UpdateBest", area=4) == "6"
    assert tool(env, "GetBest") == "6"


def test_container_matches_every_pair():
    for difficulty in ("easy", "medium", "hard"):
        for config in configs(ContainerWithMostWaterEnv, difficulty):
            heights = config["heights"]
            brute = max(
                min(heights[i], heights[j]) * (j - i)
                for i, j in itertools.combinations(range(len(heights)), 2)
            )
            assert most_water(heights) == brute


# ----- RangeSumQueries ------------------------------------------------------------------------


def test_range_sum_tools():
    env = on(RangeSumQueriesEnv, numbers=[4, -2, 7], queries=[[0, 2], [1, 1]])
    assert json.loads(tool(env, "Observe")) == {"length": 3, "queries": [[0, 2], [1, 1]]}
    assert tool(env, "GetNumber", index=1) == "-2"
    assert tool(env, "GetPrefix", index=3) == "null"
    assert tool(env, "SetPrefix", index=3, value=9) == "prefix[3] = 9"
    assert tool(env, "GetPrefix", index=3) == "9"
    assert "index 4 is out of range 0..3" in tool(env, "SetPrefix", index=4, value=1)
    assert env.state["prefix"] == [None, None, None, 9]


def test_range_sum_matches_slices():
    for difficulty in ("easy", "medium", "hard"):
        for config in configs(RangeSumQueriesEnv, difficulty):
            numbers = config["numbers"]
            expected = [sum(numbers[left : right + 1]) for left, right in config["queries"]]
            assert range_sums(numbers, config["queries"]) == expected


# ----- KthLargest -----------------------------------------------------------------------------


def test_kth_largest_tools():
    env = on(KthLargestEnv, numbers=[5, 1, 9], k=2)
    assert json.loads(tool(env, "Observe")) == {"length": 3, "k": 2}
    assert tool(env, "GetNumber", index=2) == "9"
    assert "the heap is empty" in tool(env, "HeapPeek")
    assert "the heap is empty" in tool(env, "HeapPop")
    assert tool(env, "HeapPush", value=5) == "1"
    assert tool(env, "HeapPush", value=1) == "2"
    assert tool(env, "HeapPeek") == "1"
    assert tool(env, "HeapPop") == "1"
    assert tool(env, "HeapPeek") == "5"
    assert env.state["heap"] == [5]


def test_kth_largest_matches_sorting():
    for difficulty in ("easy", "medium", "hard"):
        for config in configs(KthLargestEnv, difficulty):
            numbers, k = config["numbers"], config["k"]
            assert kth_largest(numbers, k) == sorted(numbers, reverse=True)[k - 1]


def test_kth_largest_counts_repeats():
    env = on(KthLargestEnv, numbers=[3, 3, 3, 1], k=3)
    assert env.reference_answer() == 3
    assert json.loads(env.solve()[-1])["parameters"]["answer"] == 3


# ----- config sizes and checks ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "size", "bounds"),
    [
        (ShortestPathEnv, lambda c: c["nodes"], {"easy": (5, 7), "hard": (40, 50)}),
        (ConnectedComponentsEnv, lambda c: c["nodes"], {"easy": (5, 7), "hard": (40, 60)}),
        (
            LongestIncreasingSubsequenceEnv,
            lambda c: len(c["numbers"]),
            {"easy": (4, 6), "hard": (60, 100)},
        ),
        (MergeIntervalsEnv, lambda c: len(c["intervals"]), {"easy": (3, 5), "hard": (40, 60)}),
        (CountIslandsEnv, lambda c: len(c["grid"]), {"easy": (3, 4), "hard": (9, 11)}),
        (
            ContainerWithMostWaterEnv,
            lambda c: len(c["heights"]),
            {"easy": (4, 6), "hard": (50, 75)},
        ),
        (RangeSumQueriesEnv, lambda c: len(c["numbers"]), {"easy": (4, 6), "hard": (50, 80)}),
        (KthLargestEnv, lambda c: len(c["numbers"]), {"easy": (4, 6), "hard": (40, 60)}),
    ],
    ids=lambda value: getattr(value, "name", ""),
)
def test_config_sizes_follow_the_difficulty(cls, size, bounds):
    for difficulty, (low, high) in bounds.items():
        sizes = {size(config) for config in configs(cls, difficulty, 60)}
        assert low <= min(sizes)
        assert max(sizes) <= high
        assert len(sizes) > 1


@pytest.mark.parametrize(
    ("cls", "config", "message"),
    [
        (ShortestPathEnv, {"nodes": 0, "edges": [], "source": 0, "target": 0}, "'nodes'"),
        (ShortestPathEnv, {"nodes": 2, "edges": [[0, 2]], "source": 0, "target": 1}, "outside"),
        (ShortestPathEnv, {"nodes": 2, "edges": [[1, 1]], "source": 0, "target": 1}, "loop"),
        (ShortestPathEnv, {"nodes": 2, "edges": [], "source": 0, "target": 2}, "'target'"),
        (ConnectedComponentsEnv, {"nodes": 3, "edges": [[0, True]]}, "not a pair"),
        (LongestIncreasingSubsequenceEnv, {"numbers": []}, "1..1000 ints"),
        (MergeIntervalsEnv, {"intervals": [[3, 1]]}, "a <= b"),
        (CountIslandsEnv, {"grid": [[1, 0], [1]]}, "same length"),
        (CountIslandsEnv, {"grid": [[2]]}, "0 or 1"),
        (ContainerWithMostWaterEnv, {"heights": [3]}, "2..1000"),
        (ContainerWithMostWaterEnv, {"heights": [3, -1]}, ">= 0"),
        (RangeSumQueriesEnv, {"numbers": [1, 2], "queries": [[0, 2]]}, "outside 0..1"),
        (KthLargestEnv, {"numbers": [1, 2], "k": 3}, r"'k' must be an int in 1\.\.2"),
    ],
)
def test_bad_configs_name_the_problem(cls, config, message):
    with pytest.raises(ValueError, match=message):
        cls(config=config)


def test_check_int_pairs_rules():
    check_int_pairs([[0, 1], [2, 2]], "pairs", max_length=2, low=0, high=2, ordered=True)
    with pytest.raises(ValueError, match=r"'pairs' must be a list of 1\.\.1 \[a, b\] pairs"):
        check_int_pairs([[0, 1], [2, 2]], "pairs", max_length=1)
    with pytest.raises(ValueError, match="is not a pair"):
        check_int_pairs([[0, 1, 2]], "pairs", max_length=5)
    with pytest.raises(ValueError, match="must have a <= b"):
        check_int_pairs([[2, 1]], "pairs", max_length=5, ordered=True)
    check_int_pairs([[2, 1]], "pairs", max_length=5)  # unordered pairs are fine by default
