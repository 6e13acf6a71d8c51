"""Evaluation metrics: the unbiased Pass@k estimator and the summary rows."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xpgym.core.trajectory import Episode, Turn
from xpgym.eval.metrics import (
    episode_result,
    is_success,
    pass_at_k,
    pass_at_k_values,
    summarize,
)

# -- Pass@k ---------------------------------------------------------------------------------


@st.composite
def counts(draw):
    n = draw(st.integers(1, 10))
    return n, draw(st.integers(0, n)), draw(st.integers(1, n))


@given(counts())
def test_pass_at_k_is_the_fraction_of_k_subsets_holding_a_success(nck):
    n, c, k = nck
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    brute_force = sum(any(subset) for subset in subsets) / len(subsets)
    assert pass_at_k(n, c, k) == pytest.approx(brute_force, abs=1e-12)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 0, 1, 0.0),  # nothing solved
        (5, 5, 3, 1.0),  # everything solved
        (10, 3, 1, 0.3),  # pass@1 is c / n
        (2, 1, 2, 1.0),  # both samples drawn, one solves it
        (4, 1, 2, 0.5),  # 3 of the 6 pairs hold the success
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    ],
)
def test_pass_at_k_hand_checked_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(2000, 10, 100), (1000, 1, 1), (500, 37, 250)])
def test_pass_at_k_is_stable_for_large_counts(n, c, k):
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_pass_at_k_rejects_counts_out_of_range(n, c, k):
    with pytest.raises(ValueError, match="pass_at_k needs"):
        pass_at_k(n, c, k)


def test_pass_at_k_rejects_non_integers():
    with pytest.raises(TypeError):
        pass_at_k(3.0, 1, 1)


@pytest.mark.parametrize(
    ("samples", "ks"), [(1, [1]), (2, [1, 2]), (5, [1, 2, 4, 5]), (8, [1, 2, 4, 8])]
)
def test_reported_ks_are_one_powers_of_two_and_the_sample_count(samples, ks):
    assert pass_at_k_values(samples) == ks


# -- per-episode results ----------------------------------------------------------------------


def test_success_is_the_envs_correct_flag_when_it_has_one():
    assert is_success({"correct": True}, episode_return=0.4)
    assert not is_success({"correct": False}, episode_return=1.0)


def test_success_without_a_correct_flag_is_a_return_of_at_least_one():
    assert is_success({"winner": "x"}, episode_return=1.0)
    assert not is_success({}, episode_return=0.99)


def test_episode_result_counts_turns_invalid_actions_and_generated_tokens():
    episode = Episode(
        env_id="e",
        turns=[
            Turn("o1", "a", -0.1, info={"invalid_action": True}, response_ids=[1, 2, 3]),
            Turn("o2", "b", 1.0, terminated=True, info={"correct": True}, response_ids=[4]),
        ],
    )
    assert episode_result(episode) == {
        "return": pytest.approx(0.9),
        "turns": 2,
        "success": True,
        "invalid_actions": 1,
        "tokens": 4,
        "metrics": {},
    }


def test_episode_result_keeps_the_episodes_metrics():
    turns = [Turn("o", "a", 1.0, terminated=True)]
    episode = Episode(env_id="e", turns=turns, info={"metrics": {"f1": 0.5}})
    assert episode_result(episode)["metrics"] == {"f1": 0.5}


def test_episode_result_has_no_token_count_when_a_turn_has_no_ids():
    episode = Episode(
        env_id="e", turns=[Turn("o", "a", 0.0, response_ids=[1]), Turn("o", "b", 0.0)]
    )
    assert episode_result(episode)["tokens"] is None


# -- summary rows ---------------------------------------------------------------------------


def record(
    seed, sample, success, *, env="e", ret=None, turns=2, invalid=0, tokens=None, metrics=None
):
    result = {
        "agent": None,
        "model": "m",
        "return": (1.0 if success else 0.0) if ret is None else ret,
        "turns": turns,
        "success": success,
        "invalid_actions": invalid,
        "tokens": tokens,
    }
    if metrics is not None:
        result["metrics"] = metrics
    return {"env_id": env, "seed": seed, "sample": sample, "status": "ok", "results": [result]}


def failed(seed, sample, env="e"):
    return {"env_id": env, "seed": seed, "sample": sample, "status": "failed", "results": []}


def test_summary_row_averages_over_completed_episodes_and_problems():
    records = [
        record(0, 0, True, turns=1, tokens=10),  # problem 0: 2 of 2 solved
        record(0, 1, True, turns=3, tokens=20),
        record(1, 0, False, ret=-0.2, turns=4, invalid=2, tokens=30),  # problem 1: 0 of 2
        record(1, 1, False, ret=-0.2, turns=4, invalid=2, tokens=40),
    ]
    (row,) = summarize(records, {("e", None): ("m", 4)}, ks=[1, 2])
    assert (row.episodes, row.completed, row.failed, row.problems) == (4, 4, 0, 2)
    assert row.success_rate == 0.5
    assert row.mean_return == pytest.approx((1 + 1 - 0.2 - 0.2) / 4)
    assert row.mean_turns == 3.0
    assert row.invalid_action_rate == 4 / 12  # pooled over turns, not averaged per episode
    assert row.mean_tokens == 25.0
    assert row.pass_at_k == {"1": 0.5, "2": 0.5}


def test_pass_at_k_averages_per_problem_estimates():
    records = [record(0, 0, True), record(0, 1, False), record(1, 0, False), record(1, 1, False)]
    (row,) = summarize(records, {("e", None): ("m", 4)}, ks=[1, 2])
    assert row.pass_at_k == {"1": 0.25, "2": 0.5}  # problem 0: 0.5 / 1.0, problem 1: 0 / 0


def test_failed_episodes_are_counted_and_left_out_of_the_averages():
    records = [record(0, 0, True), failed(0, 1), record(1, 0, False), record(1, 1, False)]
    (row,) = summarize(records, {("e", None): ("m", 4)}, ks=[1, 2])
    assert (row.completed, row.failed) == (3, 1)
    assert row.success_rate == pytest.approx(1 / 3)
    assert row.pass_at_k == {"1": 0.5, "2": 0.0}  # k=2: only problem 1 still has 2 samples


def test_a_row_without_completed_episodes_has_no_averages():
    (row,) = summarize([failed(0, 0)], {("e", None): ("m", 2)}, ks=[1])
    assert (row.completed, row.failed) == (0, 1)
    assert row.success_rate is row.mean_return is row.invalid_action_rate is None
    assert row.pass_at_k == {}


def test_unknown_tokens_make_the_mean_unknown():
    (row,) = summarize(
        [record(0, 0, True, tokens=5), record(1, 0, True)], {("e", None): ("m", 2)}, ks=[1]
    )
    assert row.mean_tokens is None


def test_multi_agent_records_give_one_row_per_agent_and_failures_count_for_each():
    both = {
        "env_id": "ma",
        "seed": 0,
        "sample": 0,
        "status": "ok",
        "results": [
            {**record(0, 0, True)["results"][0], "agent": "x", "return": 1.0},
            {**record(0, 0, False)["results"][0], "agent": "o", "return": -1.0},
        ],
    }
    planned = {("ma", "x"): ("m", 2), ("ma", "o"): ("random", 2)}
    x, o = summarize([both, failed(1, 0, env="ma")], planned, ks=[1])
    assert (x.agent, x.model, x.success_rate, x.mean_return, x.failed) == ("x", "m", 1.0, 1.0, 1)
    assert (o.agent, o.model, o.success_rate, o.mean_return, o.failed) == ("o", "random", 0, -1, 1)


def test_a_row_averages_each_metric_over_the_completed_episodes_that_reported_it():
    records = [
        record(0, 0, True, metrics={"f1": 1.0, "length": 4.0}),
        record(0, 1, True, metrics={"f1": 0.5}),
        record(1, 0, False),  # recorded before metrics existed: reports none
        record(1, 1, False, metrics={}),
        failed(2, 0),
    ]
    (row,) = summarize(records, {("e", None): ("m", 5)}, ks=[1])
    assert row.metrics == {"f1": 0.75, "length": 4.0}
    assert summarize([failed(0, 0)], {("e", None): ("m", 1)}, ks=[1])[0].metrics == {}
