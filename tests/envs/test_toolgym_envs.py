"""Brief F's toolgym envs: each env's tools and its reference answer against a brute force.

The family tests (oracle wins on many seeds, check_env, fuzz, task strings) are in
tests/envs/test_toolgym.py and cover these envs too.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from typing import Any

import numpy as np
import pytest

from xpgym.envs.toolgym.balanced_brackets import BalancedBracketsEnv, first_unbalanced
from xpgym.envs.toolgym.base import ToolGymEnv
from xpgym.envs.toolgym.edit_distance import EditDistanceEnv, edit_distance
from xpgym.envs.toolgym.largest_rectangle import LargestRectangleEnv, largest_rectangle
from xpgym.envs.toolgym.max_subarray import MaxSubarrayEnv, max_subarray_sum
from xpgym.envs.toolgym.mode_finding import ModeFindingEnv
from xpgym.envs.toolgym.two_sum import TwoSumEnv, first_pair


def make(cls: type[ToolGymEnv], **config: Any) -> ToolGymEnv:
    env = cls(config=config)
    env.reset(seed=0)
    return env


def run(env: ToolGymEnv, name: str, **parameters: Any) -> str:
    """The observation of one call; asserts the call was well-formed."""
    obs, _, _, _, info = env.step(json.dumps({"name": name, "parameters": parameters}))
    assert not info["invalid_action"], obs
    return obs


def rng_configs(cls: type[ToolGymEnv], count: int = 150) -> list[dict[str, Any]]:
    rng = np.random.default_rng(7)
    return [cls.generate_config(rng, ("easy", "medium")[i % 2]) for i in range(count)]


@pytest.mark.parametrize(
    ("cls", "difficulty", "size", "bounds"),
    [
        (ModeFindingEnv, "hard", lambda c: len(c["numbers"]), (80, 120)),
        (EditDistanceEnv, "easy", lambda c: len(c["source"]), (2, 3)),
        (LargestRectangleEnv, "hard", lambda c: len(c["heights"]), (40, 60)),
        (TwoSumEnv, "medium", lambda c: len(c["numbers"]), (12, 25)),
        (MaxSubarrayEnv, "easy", lambda c: len(c["numbers"]), (3, 5)),
        (BalancedBracketsEnv, "hard", lambda c: len(c["text"]), (60, 80)),
    ],
)
def test_config_sizes_follow_the_difficulty(cls, difficulty, size, bounds):
    rng = np.random.default_rng(0)
    for _ in range(20):
        assert bounds[0] <= size(cls.generate_config(rng, difficulty)) <= bounds[1]


# ----- ModeFinding ---------------------------------------------------------------------------


def test_mode_finding_tools():
    env = make(ModeFindingEnv, numbers=[4, -1, 4])
    assert json.loads(run(env, "Observe")) == {"length": 3}
    assert run(env, "GetElement", index=1) == "-1"
    assert run(env, "GetElement", index=3).startswith("Error: GetElement failed: index 3")
    assert run(env, "IncrementCounter", value=4) == "1"
    assert run(env, "IncrementCounter", value=4) == "2"
    assert run(env, "IncrementCounter", value=-1) == "1"
    assert json.loads(run(env, "ListCounters")) == {"4": 2, "-1": 1}


@pytest.mark.parametrize(
    ("numbers", "mode"), [([4, -1, 4], 4), ([3, 1, 3, 1], 1), ([9], 9), ([2, 5, 7], 2)]
)
def test_mode_finding_reference(numbers, mode):
    assert make(ModeFindingEnv, numbers=numbers).reference_answer() == mode


def test_mode_finding_reference_matches_brute_force():
    for config in rng_configs(ModeFindingEnv):
        numbers = config["numbers"]
        best = max(numbers.count(x) for x in numbers)
        expected = min(x for x in numbers if numbers.count(x) == best)
        assert make(ModeFindingEnv, **config).reference_answer() == expected
        assert Counter(numbers)[expected] == best


# ----- EditDistance --------------------------------------------------------------------------


def test_edit_distance_tools():
    env = make(EditDistanceEnv, source="ab", target="b")
    assert json.loads(run(env, "Observe")) == {"source_length": 2, "target_length": 1}
    assert run(env, "CompareCharacters", i=1, j=0) == "true"
    assert run(env, "CompareCharacters", i=0, j=0) == "false"
    assert "out of range" in run(env, "CompareCharacters", i=2, j=0)
    assert run(env, "GetDPTableCell", i=2, j=1) == "null"
    assert run(env, "SetDPTableCell", i=2, j=1, value=7) == "cell (2, 1) = 7"
    assert run(env, "GetDPTableCell", i=2, j=1) == "7"
    assert "outside the table" in run(env, "SetDPTableCell", i=3, j=0, value=1)
    assert env.state["table"] == [[None, None], [None, None], [None, 7]]


def _levenshtein_brute(a: str, b: str) -> int:
    """Recursive definition, memo-free (short strings only)."""
    if not a or not b:
        return len(a) + len(b)
    return min(
        _levenshtein_brute(a[1:], b) + 1,
        _levenshtein_brute(a, b[1:]) + 1,
        _levenshtein_brute(a[1:], b[1:]) + (a[0] != b[0]),
    )


@pytest.mark.parametrize(
    ("source", "target", "distance"),
    [("kitten", "sitting", 3), ("", "abc", 3), ("abc", "", 3), ("", "", 0), ("ab", "ba", 2)],
)
def test_edit_distance_reference(source, target, distance):
    assert edit_distance(source, target) == distance
    env = make(EditDistanceEnv, source=source, target=target)
    assert env.reference_answer() == distance
    assert json.loads(env.solve()[-1])["parameters"]["answer"] == distance


def test_edit_distance_matches_the_recursive_definition():
    for config in rng_configs(EditDistanceEnv, 60)[::2]:  # easy: lengths 2..3
        assert edit_distance(config["source"], config["target"]) == _levenshtein_brute(
            config["source"], config["target"]
        )


# ----- LargestRectangle ----------------------------------------------------------------------


def test_largest_rectangle_tools():
    env = make(LargestRectangleEnv, heights=[2, 1, 5])
    assert json.loads(run(env, "Observe")) == {"length": 3}
    assert run(env, "GetHeight", index=2) == "5"
    assert run(env, "PeekStack") == "null"
    assert "empty" in run(env, "PopFromStack")
    assert run(env, "PushToStack", index=0) == "1"
    assert run(env, "PushToStack", index=2) == "2"
    assert "not a bar" in run(env, "PushToStack", index=3)
    assert run(env, "PeekStack") == "2"
    assert run(env, "PopFromStack") == "2"
    assert env.state["stack"] == [0]
    assert run(env, "ComputeArea", height=3, width=4) == "12"


@pytest.mark.parametrize(
    ("heights", "area"), [([2, 1, 5, 6, 2, 3], 10), ([0], 0), ([3, 3, 3], 9), ([1, 0, 4], 4)]
)
def test_largest_rectangle_reference(heights, area):
    assert make(LargestRectangleEnv, heights=heights).reference_answer() == area


def test_largest_rectangle_matches_brute_force():
    for config in rng_configs(LargestRectangleEnv):
        heights = config["heights"]
        brute = max(
            min(heights[i : j + 1]) * (j - i + 1)
            for i, j in itertools.combinations_with_replacement(range(len(heights)), 2)
        )
        assert largest_rectangle(heights) == brute


# ----- TwoSum --------------------------------------------------------------------------------


def test_two_sum_tools():
    env = make(TwoSumEnv, numbers=[3, 8, 5], target=13)
    assert json.loads(run(env, "Observe")) == {"length": 3, "target": 13}
    assert run(env, "GetNumber", index=1) == "8"
    assert run(env, "Subtract", a=13, b=8) == "5"
    assert run(env, "LookupIndex", value=5) == "-1"
    assert run(env, "StoreIndex", value=5, index=2) == "5 -> 2"
    assert run(env, "StoreIndex", value=5, index=0) == "5 -> 2"  # the first index stays
    assert run(env, "LookupIndex", value=5) == "2"


@pytest.mark.parametrize(
    ("numbers", "target", "pair"),
    [
        ([3, 8, 5], 13, [1, 2]),
        ([1, 1, 1], 2, [0, 1]),
        ([5, 0, 2, 3, 5], 5, [0, 1]),
        ([4, 6], 5, [-1, -1]),
    ],
)
def test_two_sum_reference(numbers, target, pair):
    env = make(TwoSumEnv, numbers=numbers, target=target)
    assert env.reference_answer() == pair
    assert json.loads(env.solve()[-1])["parameters"]["answer"] == pair


def test_two_sum_matches_brute_force_and_configs_have_a_pair():
    for config in rng_configs(TwoSumEnv):
        numbers, target = config["numbers"], config["target"]
        pairs = [
            [i, j]
            for j in range(len(numbers))
            for i in range(j)
            if numbers[i] + numbers[j] == target
        ]
        assert pairs, "a pair is planted"
        assert first_pair(numbers, target) == min(pairs, key=lambda p: (p[1], p[0]))


# ----- MaxSubarray ---------------------------------------------------------------------------


def test_max_subarray_tools():
    env = make(MaxSubarrayEnv, numbers=[-2, 3])
    assert json.loads(run(env, "Observe")) == {"length": 2}
    assert run(env, "GetNumber", index=0) == "-2"
    assert run(env, "GetBest") == "null"
    assert "no running sum" in run(env, "UpdateBest")
    assert run(env, "ExtendOrRestart", value=-2) == "-2"
    assert run(env, "UpdateBest") == "-2"
    assert run(env, "ExtendOrRestart", value=3) == "3"  # restart beats -2 + 3
    assert run(env, "ExtendOrRestart", value=4) == "7"  # extend
    assert run(env, "UpdateBest") == "7"
    assert run(env, "GetBest") == "7"


@pytest.mark.parametrize(
    ("numbers", "total"), [([-2, 1, -3, 4, -1, 2, 1, -5, 4], 6), ([-3, -1, -2], -1), ([5], 5)]
)
def test_max_subarray_reference(numbers, total):
    assert make(MaxSubarrayEnv, numbers=numbers).reference_answer() == total


def test_max_subarray_matches_brute_force():
    for config in rng_configs(MaxSubarrayEnv):
        numbers = config["numbers"]
        brute = max(
            sum(numbers[i : j + 1])
            for i, j in itertools.combinations_with_replacement(range(len(numbers)), 2)
        )
        assert max_subarray_sum(numbers) == brute


# ----- BalancedBrackets ----------------------------------------------------------------------


def test_balanced_brackets_tools():
    env = make(BalancedBracketsEnv, text="([)]")
    assert json.loads(run(env, "Observe")) == {"length": 4}
    assert run(env, "GetCharacter", index=2) == '")"'
    assert run(env, "IsStackEmpty") == "true"
    assert "empty" in run(env, "PopBracket")
    assert "not an opening bracket" in run(env, "PushBracket", bracket=")")
    assert run(env, "PushBracket", bracket="(") == "1"
    assert run(env, "PushBracket", bracket="[") == "2"
    assert run(env, "IsStackEmpty") == "false"
    assert run(env, "PopBracket") == '"["'
    assert run(env, "BracketsMatch", opening="[", closing="]") == "true"
    assert run(env, "BracketsMatch", opening="(", closing="]") == "false"
    assert env.state["stack"] == ["("]


@pytest.mark.parametrize(
    ("text", "answer"),
    [("([]{})", -1), ("([)]", 2), (")", 0), ("((", 2), ("(]", 1), ("{}[", 3), ("}{", 0)],
)
def test_balanced_brackets_reference(text, answer):
    env = make(BalancedBracketsEnv, text=text)
    assert env.reference_answer() == answer
    assert json.loads(env.solve()[-1])["parameters"]["answer"] == answer


def _erase_pairs(text: str) -> str:
    """What is left after repeatedly erasing adjacent matching pairs."""
    while any(pair in text for pair in ("()", "[]", "{}")):
        for pair in ("()", "[]", "{}"):
            text = text.replace(pair, "")
    return text


def _first_unbalanced_brute(text: str) -> int:
    """The first k whose prefix text[:k+1] cannot be completed (a closing bracket survives
    the erasure), else len(text) if something is left open, else -1."""
    for k in range(len(text)):
        if set(_erase_pairs(text[: k + 1])) & set(")]}"):
            return k
    return len(text) if _erase_pairs(text) else -1


def test_balanced_brackets_matches_brute_force_and_half_are_balanced():
    configs = rng_configs(BalancedBracketsEnv, 200)
    balanced = 0
    for config in configs:
        answer = first_unbalanced(config["text"])
        assert answer == _first_unbalanced_brute(config["text"])
        balanced += answer == -1
    assert 60 <= balanced <= 140


def test_bad_configs_name_the_problem():
    with pytest.raises(ValueError, match="only the characters"):
        BalancedBracketsEnv(config={"text": "(a)"})
    with pytest.raises(ValueError, match="ints >= 0"):
        LargestRectangleEnv(config={"heights": [1, -1]})
    with pytest.raises(ValueError, match="strings longer than 30"):
        EditDistanceEnv(config={"source": "a" * 31, "target": ""})
    with pytest.raises(ValueError, match=r"2\.\.1000 ints"):
        TwoSumEnv(config={"numbers": [1], "target": 2})
    with pytest.raises(ValueError, match=r"1\.\.1000 ints"):
        MaxSubarrayEnv(config={"numbers": []})
    with pytest.raises(ValueError, match="must hold only ints"):
        ModeFindingEnv(config={"numbers": [True]})
