"""Specification of the reference advantage math in `xpgym.training.advantages`.

Three kinds of test: each vectorised function against a plain loop written here from the
formula; the toy batches of docs/trainers.md ("The trainers' own advantage code on toy
batches"), where a trainer's own code was run, reproduced with the options the module
docstring maps to that trainer; and input validation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from adapter_cases import (
    GAMMA,
    RESPONSE_MASKS,
    TURN_RETURNS,
    episodes,
    per_token,
    rebn_reference,
)
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from xpgym.core.errors import InfraCause
from xpgym.core.trajectory import Episode, Turn, training_group_ids
from xpgym.training.advantages import (
    CRITIC_FREE_ALGORITHMS,
    broadcast_to_tokens,
    discounted_returns,
    dr_grpo,
    episode_scores,
    episode_terminated,
    grpo,
    per_turn_sums,
    rebn,
    rloo,
    row_returns,
    token_advantages,
    turn_advantages,
    turn_gae,
    turn_index_from_mask,
    turn_rewards,
    whiten,
)
from xpgym.training.layouts import episode_rows, on_last_policy_token, turn_rows

EPS32 = float(np.finfo(np.float32).eps)
TOL = {"rtol": 1e-10, "atol": 1e-12}

# --------------------------------------------------------------------------------------------
# Loop references, written from the formulas in the docstrings.


def ref_discounted(rows: list[list[float]], gamma: float) -> list[list[float]]:
    """G_t = sum_{k >= t} gamma**(k - t) r_k, one episode at a time."""
    return [
        [sum(gamma ** (k - t) * row[k] for k in range(t, len(row))) for t in range(len(row))]
        for row in rows
    ]


def ref_normalize(
    xs: list[float],
    ws: list[float],
    *,
    std: str,
    eps: float,
    eps_placement: str,
    zero_std: str,
    zero_std_tol: float,
) -> list[float]:
    """(x - mean) / D over one population, weights as frequency weights."""
    total = sum(ws)
    mean = sum(w * x for w, x in zip(ws, xs, strict=True)) / total
    constant = all(x == xs[0] for x in xs)
    devs = [0.0 if constant else x - mean for x in xs]
    m2 = sum(w * d * d for w, d in zip(ws, devs, strict=True))
    bessel = total if std == "population" else total - 1
    var = m2 / bessel if bessel > 0 else 0.0
    if eps_placement == "std":
        scale = math.sqrt(var) + eps
    elif eps_placement == "var":
        scale = math.sqrt(var + eps)
    else:
        scale = math.sqrt(max(var, eps))
    if zero_std == "zero" and (constant or math.sqrt(var) <= zero_std_tol):
        return [0.0] * len(xs)
    return [d / scale if scale > 0 else 0.0 for d in devs]


def ref_groups(scores: list[float], ids: list[object]) -> dict[object, list[int]]:
    groups: dict[object, list[int]] = {}
    for i, g in enumerate(ids):
        groups.setdefault(g, []).append(i)
    return groups


def ref_grpo(scores, ids, *, single_member, **norm) -> list[float]:
    out = [0.0] * len(scores)
    for members in ref_groups(scores, ids).values():
        if len(members) == 1:
            (i,) = members
            if single_member == "keep":  # mean taken as 0, variance as 1
                out[i] = scores[i] / _unit_scale(norm["eps"], norm["eps_placement"])
            continue
        values = ref_normalize([scores[i] for i in members], [1.0] * len(members), **norm)
        for i, v in zip(members, values, strict=True):
            out[i] = v
    return out


def _unit_scale(eps: float, eps_placement: str) -> float:
    return {"std": 1.0 + eps, "var": math.sqrt(1.0 + eps), "clamp": math.sqrt(max(1.0, eps))}[
        eps_placement
    ]


def ref_dr_grpo(scores, ids, *, single_member) -> list[float]:
    out = [0.0] * len(scores)
    for members in ref_groups(scores, ids).values():
        if len(members) == 1:
            out[members[0]] = scores[members[0]] if single_member == "keep" else 0.0
            continue
        group = [scores[i] for i in members]
        if all(s == group[0] for s in group):
            continue
        mean = sum(group) / len(group)
        for i in members:
            out[i] = scores[i] - mean
    return out


def ref_rloo(scores, ids, *, single_member) -> list[float]:
    out = [0.0] * len(scores)
    for members in ref_groups(scores, ids).values():
        if len(members) == 1:
            out[members[0]] = scores[members[0]] if single_member == "keep" else 0.0
            continue
        for i in members:
            others = [scores[j] for j in members if j != i]
            out[i] = scores[i] - sum(others) / len(others)
    return out


def ref_gae(r_rows, v_rows, boot, gamma, lam):
    """A_t = sum_l (gamma * lam)**l delta_{t+l}, with delta from the bootstrap value."""
    advs, rets = [], []
    for r, v, b in zip(r_rows, v_rows, boot, strict=True):
        n = len(r)
        nxt = [*v[1:], b]
        delta = [r[t] + gamma * nxt[t] - v[t] for t in range(n)]
        adv = [sum((gamma * lam) ** (k - t) * delta[k] for k in range(t, n)) for t in range(n)]
        advs.append(adv)
        rets.append([a + x for a, x in zip(adv, v, strict=True)])
    return advs, rets


# --------------------------------------------------------------------------------------------
# Strategies and helpers

# Multiples of 1/4: sums of a few of them are exact, so the loop and the vectorised code
# agree to rounding in the variance only.
EXACT = st.integers(-8, 8).map(lambda k: k / 4)
FLOATS = st.floats(-10, 10, allow_nan=False, allow_infinity=False)
UNIT = st.floats(0, 1)
NORM_OPTIONS = st.fixed_dictionaries(
    {
        "std": st.sampled_from(["population", "unbiased"]),
        "eps": st.sampled_from([0.0, 1e-9, 1e-8, 1e-6, EPS32]),
        "eps_placement": st.sampled_from(["std", "var", "clamp"]),
        "zero_std": st.sampled_from(["eps", "zero"]),
        "zero_std_tol": st.sampled_from([0.0, 1e-6]),
    }
)


def ragged(elements=EXACT, max_episodes=6, max_turns=6):
    """Lists of per-episode lists (episodes of 0..max_turns turns)."""
    return st.lists(st.lists(elements, max_size=max_turns), min_size=1, max_size=max_episodes)


def pad(rows: list[list[float]], fill: float = np.nan) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad rows to [B, T]; NaN padding checks that padding is never read."""
    horizon = max((len(r) for r in rows), default=0)
    arr = np.full((len(rows), horizon), fill)
    mask = np.zeros((len(rows), horizon), dtype=bool)
    for b, row in enumerate(rows):
        arr[b, : len(row)] = row
        mask[b, : len(row)] = True
    return arr, mask


def unpad(arr: np.ndarray, rows: list[list[float]]) -> list[list[float]]:
    return [list(arr[b, : len(row)]) for b, row in enumerate(rows)]


def flat(rows: list[list[float]]) -> list[float]:
    return [x for row in rows for x in row]


# --------------------------------------------------------------------------------------------
# Turn layout


def test_turn_rewards_pads_episodes_on_the_right():
    episodes = [
        Episode("e", turns=[Turn("o", "a", 1.0), Turn("o", "a", 2.0, terminated=True)]),
        Episode("e", turns=[]),
        Episode("e", turns=[Turn("o", "a", -0.5, truncated=True)]),
    ]
    rewards, mask = turn_rewards(episodes)
    np.testing.assert_array_equal(rewards, [[1.0, 2.0], [0.0, 0.0], [-0.5, 0.0]])
    np.testing.assert_array_equal(mask, [[True, True], [False, False], [True, False]])
    assert rewards.dtype == np.float64
    np.testing.assert_array_equal(episode_terminated(episodes), [True, False, False])
    np.testing.assert_array_equal(
        episode_scores(rewards, mask), [ep.total_reward for ep in episodes]
    )


def test_turn_rewards_of_no_episodes_is_empty():
    rewards, mask = turn_rewards([])
    assert rewards.shape == mask.shape == (0, 0)


@given(ragged(FLOATS))
def test_episode_scores_are_undiscounted_sums(rows):
    rewards, mask = pad(rows)
    np.testing.assert_allclose(episode_scores(rewards, mask), [sum(r) for r in rows], **TOL)


# --------------------------------------------------------------------------------------------
# REINFORCE returns


@given(ragged(FLOATS), UNIT)
def test_discounted_returns_match_the_sum_formula(rows, gamma):
    rewards, mask = pad(rows)
    returns = discounted_returns(rewards, mask, gamma)
    expected, _ = pad(ref_discounted(rows, gamma), fill=0.0)
    np.testing.assert_allclose(returns, expected, rtol=1e-9, atol=1e-9)
    assert not returns[~mask].any()


def test_discounted_returns_with_gamma_zero_are_the_rewards():
    rewards, mask = pad([[1.0, 2.0, 3.0], [4.0]])
    np.testing.assert_array_equal(
        discounted_returns(rewards, mask, 0.0), [[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]]
    )


def test_discounted_returns_with_gamma_one_are_rewards_to_go():
    rewards, mask = pad([[1.0, 2.0, 3.0], [4.0]])
    np.testing.assert_array_equal(
        discounted_returns(rewards, mask, 1.0), [[6.0, 5.0, 3.0], [4.0, 0.0, 0.0]]
    )


# --------------------------------------------------------------------------------------------
# ReBN and whitening


@given(ragged(), NORM_OPTIONS)
def test_rebn_matches_a_loop_over_all_valid_turns(rows, options):
    assume(flat(rows))
    returns, mask = pad(rows)
    out = rebn(returns, mask, **options)
    values = ref_normalize(flat(rows), [1.0] * len(flat(rows)), **options)
    np.testing.assert_allclose(out[mask], values, **TOL)
    assert not out[~mask].any()


@given(ragged(), st.data(), NORM_OPTIONS)
def test_rebn_token_weights_match_a_loop_over_tokens(rows, data, options):
    assume(flat(rows))
    returns, mask = pad(rows)
    counts = [
        data.draw(st.lists(st.integers(1, 5), min_size=len(r), max_size=len(r))) for r in rows
    ]
    weights, _ = pad(counts)
    out = rebn(returns, mask, weights=weights, **options)
    values = ref_normalize(flat(rows), [float(c) for c in flat(counts)], **options)
    np.testing.assert_allclose(out[mask], values, **TOL)


@given(st.lists(EXACT, min_size=1, max_size=8), st.data(), NORM_OPTIONS)
def test_token_weighted_whitening_equals_whitening_the_broadcast_tokens(xs, data, options):
    counts = data.draw(st.lists(st.integers(1, 4), min_size=len(xs), max_size=len(xs)))
    x = np.array(xs)
    per_turn = whiten(x, weights=np.array(counts, dtype=float), **options)
    per_token = whiten(np.repeat(x, counts), **options)
    np.testing.assert_allclose(np.repeat(per_turn, counts), per_token, **TOL)


def test_rebn_of_a_single_turn_is_zero():
    for std in ("population", "unbiased"):
        np.testing.assert_array_equal(rebn([[3.0]], [[True]], std=std), [[0.0]])


def test_rebn_of_equal_returns_is_exactly_zero_even_without_eps():
    returns, mask = pad([[0.1, 0.1], [0.1]])
    for zero_std in ("eps", "zero"):
        out = rebn(returns, mask, eps=0.0, zero_std=zero_std)
        np.testing.assert_array_equal(out, [[0.0, 0.0], [0.0, 0.0]])


def test_rebn_zero_std_tolerance_zeroes_a_nearly_constant_batch():
    returns = np.array([[1.0, 1.0 + 1e-6]])
    mask = np.ones_like(returns, dtype=bool)
    assert np.abs(rebn(returns, mask, std="unbiased", eps=1e-6)).max() > 0.1
    zeroed = rebn(returns, mask, std="unbiased", eps=1e-6, zero_std="zero", zero_std_tol=1e-6)
    np.testing.assert_array_equal(zeroed, [[0.0, 0.0]])


def test_population_rebn_is_sqrt_n_over_n_minus_one_times_unbiased_rebn():
    # docs/trainers.md, toy batches: GEM's ReBN (population std) is larger than the
    # unbiased implementations by sqrt(N / (N - 1)); exact with eps = 0.
    returns, mask = pad([[0.0, 1.0, 0.5], [2.0], [-1.0, 0.25]])
    n = int(mask.sum())
    population = rebn(returns, mask, eps=0.0)
    unbiased = rebn(returns, mask, std="unbiased", eps=0.0)
    np.testing.assert_allclose(population[mask], math.sqrt(n / (n - 1)) * unbiased[mask], **TOL)


def test_whiten_ignores_entries_outside_the_mask():
    values = np.array([[1.0, 100.0], [3.0, np.nan]])
    mask = np.array([[True, False], [True, False]])
    out = whiten(values, mask, std="population", eps=0.0)
    np.testing.assert_array_equal(out, [[-1.0, 0.0], [1.0, 0.0]])


# --------------------------------------------------------------------------------------------
# Group baselines

GROUP_IDS = st.sampled_from([0, 1, 2, 3])


@st.composite
def grouped_scores(draw, elements=EXACT, max_size=12):
    scores = draw(st.lists(elements, min_size=1, max_size=max_size))
    ids = draw(st.lists(GROUP_IDS, min_size=len(scores), max_size=len(scores)))
    return scores, ids


@given(grouped_scores(), NORM_OPTIONS, st.sampled_from(["zero", "keep"]))
def test_grpo_matches_a_loop_over_groups(case, options, single_member):
    scores, ids = case
    out = grpo(scores, ids, single_member=single_member, **options)
    expected = ref_grpo(scores, ids, single_member=single_member, **options)
    np.testing.assert_allclose(out, expected, **TOL)


@given(grouped_scores(), st.sampled_from(["zero", "keep"]))
def test_dr_grpo_matches_a_loop_over_groups(case, single_member):
    scores, ids = case
    np.testing.assert_allclose(
        dr_grpo(scores, ids, single_member=single_member),
        ref_dr_grpo(scores, ids, single_member=single_member),
        **TOL,
    )


@given(grouped_scores(), st.sampled_from(["zero", "keep"]))
def test_rloo_matches_a_loop_over_groups(case, single_member):
    scores, ids = case
    np.testing.assert_allclose(
        rloo(scores, ids, single_member=single_member),
        ref_rloo(scores, ids, single_member=single_member),
        **TOL,
    )


@given(grouped_scores())
def test_rloo_is_n_over_n_minus_one_times_dr_grpo(case):
    scores, ids = case
    counts = {g: ids.count(g) for g in ids}
    factor = np.array([counts[g] / (counts[g] - 1) if counts[g] > 1 else 0.0 for g in ids])
    np.testing.assert_allclose(rloo(scores, ids), factor * dr_grpo(scores, ids), **TOL)


def test_grpo_of_a_constant_group_is_exactly_zero():
    out = grpo([0.1, 0.1, 0.1, 1.0, 0.0], ["a", "a", "a", "b", "b"], eps=0.0)
    np.testing.assert_array_equal(out[:3], [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(rloo([0.1, 0.1, 0.1], [0, 0, 0]), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(dr_grpo([0.1, 0.1, 0.1], [0, 0, 0]), [0.0, 0.0, 0.0])


def test_single_member_groups_follow_the_single_member_option():
    scores, ids = [3.0, 1.0, 2.0], ["x", "y", "y"]
    assert grpo(scores, ids)[0] == 0.0
    assert grpo(scores, ids, single_member="keep")[0] == 3.0 / (1 + 1e-6)  # verl: mean 0, std 1
    assert dr_grpo(scores, ids, single_member="keep")[0] == 3.0
    assert rloo(scores, ids, single_member="keep")[0] == 3.0
    assert rloo(scores, ids)[0] == 0.0
    for fn in (grpo, dr_grpo, rloo):
        with pytest.raises(ValueError, match=r"groups \['x'\] have a single member"):
            fn(scores, ids, single_member="error")


def test_group_ids_may_be_any_hashables_and_keep_their_types():
    scores = [1.0, 0.0, 5.0, 7.0, 2.0, 4.0]
    ids = [("p", 1), ("p", 1), 1, "1", 1, "1"]  # 1 and "1" are different groups
    np.testing.assert_allclose(dr_grpo(scores, ids), [0.5, -0.5, 1.5, 1.5, -1.5, -1.5])
    np.testing.assert_allclose(
        dr_grpo(scores, np.array(["a", "a", "b", "c", "b", "c"])), [0.5, -0.5, 1.5, 1.5, -1.5, -1.5]
    )


def test_groups_need_not_be_contiguous():
    np.testing.assert_allclose(rloo([1.0, 5.0, 0.0, 3.0], [7, 9, 7, 9]), [1.0, 2.0, -1.0, -2.0])


# --------------------------------------------------------------------------------------------
# One dispatch by algorithm name: turn_advantages, checked by hand.

# Two episodes for the return-based algorithms: r = [[0, 1], [2, -]], gamma = 0.5.
RETURN_REWARDS = [[0.0, 1.0], [2.0, 0.0]]
RETURN_MASK = [[True, True], [True, False]]

# Five episodes in groups a (2) and b (3) for the group algorithms; scores 2, 0 | 3, 1, 2.
GROUP_REWARDS = [[1.0, 1.0], [0.0, 0.0], [3.0, 0.0], [1.0, 0.0], [0.5, 1.5]]
GROUP_MASK = [[True, True], [True, False], [True, False], [True, True], [True, True]]
GROUPS_AB = ["a", "a", "b", "b", "b"]


def on_turns(per_episode: list[float]) -> np.ndarray:
    """Each episode's advantage on each of its turns of `GROUP_MASK`, 0 at padding."""
    return np.where(GROUP_MASK, np.array(per_episode)[:, None], 0.0)


def test_turn_advantages_reinforce_is_the_discounted_return():
    got = turn_advantages("reinforce", RETURN_REWARDS, RETURN_MASK, gamma=0.5)
    np.testing.assert_array_equal(got, [[0.0 + 0.5 * 1.0, 1.0], [2.0, 0.0]])


def test_turn_advantages_rebn_normalises_the_returns_over_every_turn_of_the_batch():
    # G = 0.5, 1, 2; mean 7/6; population variance ((2/3)^2 + (1/6)^2 + (5/6)^2) / 3 = 7/18
    got = turn_advantages("rebn", RETURN_REWARDS, RETURN_MASK, gamma=0.5)
    std = math.sqrt(7 / 18) + 1e-9
    np.testing.assert_allclose(got, [[-2 / 3 / std, -1 / 6 / std], [5 / 6 / std, 0.0]], **TOL)


def test_turn_advantages_grpo_gives_every_turn_its_episodes_group_normalised_score():
    # a: mean 1, unbiased std sqrt(2); b: mean 2, unbiased std 1; eps 1e-6 added to the std
    got = turn_advantages("grpo", GROUP_REWARDS, GROUP_MASK, gamma=0.5, group_ids=GROUPS_AB)
    a, b = 1 / (math.sqrt(2) + 1e-6), 1 / (1 + 1e-6)
    np.testing.assert_allclose(got, on_turns([a, -a, b, -b, 0.0]), **TOL)


def test_turn_advantages_dr_grpo_gives_every_turn_its_score_minus_the_group_mean():
    got = turn_advantages("dr_grpo", GROUP_REWARDS, GROUP_MASK, group_ids=GROUPS_AB)
    np.testing.assert_allclose(got, on_turns([1.0, -1.0, 1.0, -1.0, 0.0]), **TOL)


def test_turn_advantages_rloo_gives_every_turn_its_score_minus_the_others_mean():
    got = turn_advantages("rloo", GROUP_REWARDS, GROUP_MASK, group_ids=GROUPS_AB)
    want = [2 - 0, 0 - 2, 3 - (1 + 2) / 2, 1 - (3 + 2) / 2, 2 - (3 + 1) / 2]
    np.testing.assert_allclose(got, on_turns(want), **TOL)


def test_turn_advantages_of_a_group_algorithm_use_the_undiscounted_score():
    discounted = turn_advantages(
        "dr_grpo", GROUP_REWARDS, GROUP_MASK, gamma=0.0, group_ids=GROUPS_AB
    )
    undiscounted = turn_advantages("dr_grpo", GROUP_REWARDS, GROUP_MASK, group_ids=GROUPS_AB)
    np.testing.assert_array_equal(discounted, undiscounted)


def test_turn_advantages_pass_options_to_the_estimator():
    # population std: a: 1, b: sqrt(2/3); no eps
    got = turn_advantages(
        "grpo", GROUP_REWARDS, GROUP_MASK, group_ids=GROUPS_AB, std="population", eps=0.0
    )
    b = 1 / math.sqrt(2 / 3)
    np.testing.assert_allclose(got, on_turns([1.0, -1.0, b, -b, 0.0]), **TOL)
    unbiased = turn_advantages("rebn", RETURN_REWARDS, RETURN_MASK, gamma=0.5, std="unbiased")
    std = math.sqrt(7 / 12) + 1e-9  # the same squared deviations over 3 - 1
    np.testing.assert_allclose(unbiased[0, 0], -2 / 3 / std, **TOL)


def test_every_critic_free_algorithm_name_is_dispatched():
    for algorithm in CRITIC_FREE_ALGORITHMS:
        got = turn_advantages(algorithm, GROUP_REWARDS, GROUP_MASK, group_ids=GROUPS_AB)
        assert got.shape == (5, 2)
        assert np.abs(got).sum() > 0


def test_an_infra_error_episode_given_its_own_group_changes_no_other_advantage():
    healthy = [
        Episode("toy", group_id="g", turns=[Turn("o", "a", reward) for reward in rewards])
        for rewards in ([1.0, 1.0], [0.0])
    ]
    failed = Episode("toy", group_id="g", turns=[Turn("o", "a", 5.0)])
    failed.infra_error = InfraCause("sub_env_crash", "RuntimeError: env bug")
    for algorithm in CRITIC_FREE_ALGORITHMS:
        want = turn_advantages(
            algorithm, *turn_rewards(healthy), group_ids=training_group_ids(healthy)
        )
        everyone = [*healthy, failed]
        got = turn_advantages(
            algorithm, *turn_rewards(everyone), group_ids=training_group_ids(everyone)
        )
        np.testing.assert_array_equal(got[:2], want)
        np.testing.assert_array_equal(got[2], 0.0)


def test_turn_advantages_refuse_an_unknown_algorithm_listing_the_valid_ones():
    with pytest.raises(ValueError, match="unknown critic-free algorithm 'ppo'") as info:
        turn_advantages("ppo", RETURN_REWARDS, RETURN_MASK)  # type: ignore[arg-type]
    assert all(repr(name) in str(info.value) for name in CRITIC_FREE_ALGORITHMS)


def test_turn_advantages_refuse_options_for_reinforce():
    with pytest.raises(ValueError, match=r"reinforce takes no options .*\['std'\]"):
        turn_advantages("reinforce", RETURN_REWARDS, RETURN_MASK, std="unbiased")


def test_turn_advantages_of_a_group_algorithm_need_group_ids():
    with pytest.raises(ValueError, match=r"'rloo' compares episodes .* pass group_ids"):
        turn_advantages("rloo", GROUP_REWARDS, GROUP_MASK)


# --------------------------------------------------------------------------------------------
# Turn-level GAE


@given(ragged(FLOATS), st.data(), UNIT, UNIT)
def test_turn_gae_matches_the_sum_of_discounted_td_errors(rows, data, gamma, lam):
    values_rows = [data.draw(st.lists(FLOATS, min_size=len(r), max_size=len(r))) for r in rows]
    terminated = data.draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows)))
    last = data.draw(st.lists(FLOATS, min_size=len(rows), max_size=len(rows)))
    rewards, mask = pad(rows)
    values, _ = pad(values_rows)
    last_values = np.where(terminated, np.nan, last)  # ignored for terminated episodes
    adv, ret = turn_gae(
        rewards,
        values,
        mask,
        gamma=gamma,
        lam=lam,
        last_values=last_values,
        terminated=terminated,
    )
    boot = [0.0 if term else b for term, b in zip(terminated, last, strict=True)]
    ref_adv, ref_ret = ref_gae(rows, values_rows, boot, gamma, lam)
    np.testing.assert_allclose(adv[mask], flat(ref_adv), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ret[mask], flat(ref_ret), rtol=1e-9, atol=1e-9)
    assert not adv[~mask].any()
    assert not ret[~mask].any()


@given(ragged(FLOATS), UNIT)
def test_turn_gae_without_a_critic_is_reinforce(rows, gamma):
    rewards, mask = pad(rows)
    adv, ret = turn_gae(rewards, np.zeros_like(rewards), mask, gamma=gamma, lam=1.0)
    expected = discounted_returns(rewards, mask, gamma)
    np.testing.assert_allclose(adv, expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ret, expected, rtol=1e-9, atol=1e-9)


def test_turn_gae_with_lambda_zero_is_the_one_step_td_error():
    rewards, mask = pad([[1.0, 2.0]])
    values = np.array([[0.5, 4.0]])
    adv, ret = turn_gae(rewards, values, mask, gamma=0.5, lam=0.0)
    np.testing.assert_allclose(adv, [[1.0 + 0.5 * 4.0 - 0.5, 2.0 - 4.0]])
    np.testing.assert_allclose(ret, adv + values)


def test_turn_gae_bootstraps_truncated_episodes_and_not_terminated_ones():
    rewards, mask = pad([[1.0], [1.0]])
    values = np.zeros((2, 1))
    adv, _ = turn_gae(
        rewards,
        values,
        mask,
        gamma=0.5,
        lam=1.0,
        last_values=[10.0, 10.0],
        terminated=[True, False],
    )
    np.testing.assert_allclose(adv, [[1.0], [1.0 + 0.5 * 10.0]])


# --------------------------------------------------------------------------------------------
# Token broadcast


@given(ragged(FLOATS, max_turns=4), st.data())
def test_broadcast_to_tokens_matches_a_loop(rows, data):
    values, _ = pad(rows, fill=0.0)
    horizon = values.shape[1]
    index = np.array(
        [data.draw(st.lists(st.integers(-1, horizon - 1), min_size=5, max_size=5)) for _ in rows]
    )
    out = broadcast_to_tokens(values, index)
    expected = [[values[b, i] if i >= 0 else 0.0 for i in index[b]] for b in range(len(rows))]
    np.testing.assert_array_equal(out, expected)


def test_broadcast_to_tokens_copies_episode_values_to_every_policy_token():
    out = broadcast_to_tokens([1.5, -2.0], [[-1, 0, 0, -1, 1], [-1, -1, 0, 3, -1]])
    np.testing.assert_array_equal(out, [[0.0, 1.5, 1.5, 0.0, 1.5], [0.0, 0.0, -2.0, -2.0, 0.0]])


def test_broadcast_to_tokens_of_turn_advantages_follows_the_layout():
    adv = np.array([[0.5, -1.0], [2.0, 0.0]])
    index = [[-1, -1, 0, 0, -1, 1, 1, -1], [-1, 0, 0, -1, -1, -1, -1, -1]]
    np.testing.assert_array_equal(
        broadcast_to_tokens(adv, index),
        [[0, 0, 0.5, 0.5, 0, -1.0, -1.0, 0], [0, 2.0, 2.0, 0, 0, 0, 0, 0]],
    )


# --------------------------------------------------------------------------------------------
# docs/trainers.md, "The trainers' own advantage code on toy batches": numbers from the
# trainers' own code

TOY_SCORES = np.array([1.0, 0.0, 1.0, 0.0])
TOY_GROUPS = ["a", "a", "b", "b"]


def test_grpo_reproduces_verl_grpo_on_the_toy_batch():
    out = grpo(TOY_SCORES, TOY_GROUPS, single_member="keep")  # unbiased, eps 1e-6 on std
    np.testing.assert_allclose(out, [0.7071, -0.7071, 0.7071, -0.7071], atol=1e-4)
    np.testing.assert_allclose(out, 0.5 / (math.sqrt(0.5) + 1e-6) * np.array([1, -1, 1, -1]))


def test_rloo_reproduces_verl_and_openrlhf_rloo_on_the_toy_batch():
    np.testing.assert_array_equal(rloo(TOY_SCORES, TOY_GROUPS), [1.0, -1.0, 1.0, -1.0])


def test_grpo_reproduces_openrlhf_group_norm_on_the_toy_batch():
    out = grpo(TOY_SCORES, TOY_GROUPS, eps=1e-9)
    np.testing.assert_allclose(out, [0.7071, -0.7071, 0.7071, -0.7071], atol=1e-4)


def test_dr_grpo_reproduces_openrlhf_dr_grpo_on_the_toy_batch():
    np.testing.assert_array_equal(dr_grpo(TOY_SCORES, TOY_GROUPS), [0.5, -0.5, 0.5, -0.5])


def test_whiten_reproduces_verl_gae_and_reinforce_plus_plus_on_the_toy_batch():
    # verl gae (V = 0, gamma = lam = 1) and reinforce_plus_plus put the episode reward on
    # every response token, then masked_whiten: token-weighted, unbiased, sqrt(var + 1e-8).
    tokens = np.array([[3.0], [5.0], [2.0], [4.0]])
    mask = np.ones((4, 1), dtype=bool)
    returns = discounted_returns(TOY_SCORES[:, None], mask, 1.0)
    adv, _ = turn_gae(TOY_SCORES[:, None], np.zeros((4, 1)), mask, gamma=1.0, lam=1.0)
    for x in (returns, adv):
        out = whiten(x, mask, weights=tokens)
        np.testing.assert_allclose(out.ravel(), [1.2928, -0.7182, 1.2928, -0.7182], atol=1e-4)


def test_whiten_reproduces_openrlhf_global_normalisation_on_the_toy_batch():
    # OpenRLHF reinforce / reinforce_baseline / gae: token-weighted, biased variance
    # clamped at 1e-8; reinforce_baseline first subtracts the group mean (dr_grpo).
    tokens = np.array([[2.0], [4.0], [1.0], [3.0]])
    mask = np.ones((4, 1), dtype=bool)
    options = {"weights": tokens, "std": "population", "eps": 1e-8, "eps_placement": "clamp"}
    for scores in (TOY_SCORES, dr_grpo(TOY_SCORES, TOY_GROUPS)):
        out = whiten(scores[:, None], mask, **options)
        np.testing.assert_allclose(out.ravel(), [1.5275, -0.6547, 1.5275, -0.6547], atol=1e-4)


def test_rebn_reproduces_roll_step_reinforce_on_the_toy_batch():
    rewards = np.array([[0.0, 1.0], [0.0, 0.0]])
    mask = np.ones_like(rewards, dtype=bool)
    returns = discounted_returns(rewards, mask, 0.9)
    np.testing.assert_allclose(returns, [[0.9, 1.0], [0.0, 0.0]])  # ROLL step_rewards
    out = rebn(returns, mask, std="unbiased", eps=1e-6, zero_std="zero", zero_std_tol=1e-6)
    np.testing.assert_allclose(out.ravel(), [0.7727, 0.9545, -0.8636, -0.8636], atol=1e-4)
    np.testing.assert_allclose(out, (returns - 0.475) / (0.55 + 1e-6), **TOL)


def test_grpo_over_one_group_reproduces_rl2_reinforce_with_one_response_per_prompt():
    out = grpo([1.0, 0.0], [0, 0], eps=EPS32)  # RL2: global baseline, unbiased std + finfo eps
    np.testing.assert_allclose(out, [0.707, -0.707], atol=1e-3)
    np.testing.assert_allclose(out, np.array([0.5, -0.5]) / (math.sqrt(0.5) + EPS32), **TOL)


# --------------------------------------------------------------------------------------------
# Input validation


def test_mismatched_shapes_are_rejected_with_both_shapes():
    with pytest.raises(ValueError, match=r"rewards has shape \(2, 3\) but mask has shape \(2, 2\)"):
        discounted_returns(np.zeros((2, 3)), np.ones((2, 2), dtype=bool), 1.0)
    with pytest.raises(ValueError, match=r"rewards has shape \(1, 2\) but values has shape"):
        turn_gae(np.zeros((1, 2)), np.zeros((1, 3)), np.ones((1, 2), bool), gamma=1, lam=1)
    with pytest.raises(ValueError, match=r"rewards must be \[B, T\]; got shape \(3,\)"):
        episode_scores(np.zeros(3), np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match=r"returns has shape \(1, 2\) but weights has shape"):
        rebn(np.zeros((1, 2)), np.ones((1, 2), bool), weights=np.ones((1, 3)))


@pytest.mark.parametrize("gamma", [-0.1, 1.5, float("nan")])
def test_gamma_outside_the_unit_interval_is_rejected(gamma):
    with pytest.raises(ValueError, match=r"gamma must be in \[0, 1\]; got"):
        discounted_returns(np.zeros((1, 1)), np.ones((1, 1), dtype=bool), gamma)
    with pytest.raises(ValueError, match=r"gamma must be in \[0, 1\]"):
        turn_gae(np.zeros((1, 1)), np.zeros((1, 1)), [[True]], gamma=gamma, lam=1.0)


def test_lambda_outside_the_unit_interval_is_rejected():
    with pytest.raises(ValueError, match=r"lam must be in \[0, 1\]; got 2"):
        turn_gae(np.zeros((1, 1)), np.zeros((1, 1)), [[True]], gamma=1.0, lam=2)


def test_a_mask_that_is_not_a_prefix_is_rejected():
    mask = np.array([[True, True, False], [True, False, True]])
    with pytest.raises(ValueError, match=r"mask row 1 is not a prefix: turn 2 is valid"):
        discounted_returns(np.zeros((2, 3)), mask, 1.0)


def test_a_non_boolean_mask_is_rejected():
    with pytest.raises(ValueError, match=r"mask must be bool \(or 0/1\)"):
        discounted_returns(np.zeros((1, 2)), [[1, 2]], 1.0)


def test_nan_rewards_on_valid_turns_are_rejected_with_their_position():
    rewards = np.array([[0.0, np.nan], [1.0, 0.0]])
    with pytest.raises(ValueError, match=r"rewards\[0, 1\] is nan; it must be finite"):
        discounted_returns(rewards, np.ones((2, 2), dtype=bool), 0.9)
    with pytest.raises(ValueError, match=r"returns\[0, 1\] is nan"):
        rebn(rewards, np.ones((2, 2), dtype=bool))
    with pytest.raises(ValueError, match=r"values\[0, 0\] is inf"):
        turn_gae(rewards[1:], [[np.inf, 0.0]], [[True, True]], gamma=1, lam=1)
    with pytest.raises(ValueError, match=r"scores\[1\] is nan"):
        grpo([0.0, np.nan], [0, 0])


def test_nan_at_padding_is_ignored():
    rewards = np.array([[1.0, np.nan]])
    mask = np.array([[True, False]])
    np.testing.assert_array_equal(discounted_returns(rewards, mask, 1.0), [[1.0, 0.0]])


def test_rebn_of_an_empty_batch_is_rejected():
    with pytest.raises(ValueError, match="rebn needs at least one valid turn"):
        rebn(np.zeros((2, 1)), np.zeros((2, 1), dtype=bool))


def test_unknown_options_are_rejected_with_the_choices():
    with pytest.raises(ValueError, match=r"std must be one of \('population', 'unbiased'\)"):
        grpo([1.0, 0.0], [0, 0], std="biased")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"eps_placement must be one of"):
        rebn([[1.0, 0.0]], [[True, True]], eps_placement="inside")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"single_member must be one of"):
        rloo([1.0], [0], single_member="drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"eps must be finite and >= 0; got -1"):
        grpo([1.0, 0.0], [0, 0], eps=-1)


def test_group_ids_must_match_scores_and_not_be_none():
    with pytest.raises(ValueError, match="group_ids has 1 entries for 2 scores"):
        grpo([1.0, 0.0], [0])
    with pytest.raises(ValueError, match=r"group_ids\[1\] is None"):
        dr_grpo([1.0, 0.0], ["a", None])


def test_unbiased_whitening_needs_a_total_weight_above_one():
    with pytest.raises(ValueError, match=r"needs a total weight above 1; got 0\.75"):
        whiten(np.array([1.0, 0.0]), weights=np.array([0.5, 0.25]))
    with pytest.raises(ValueError, match="weights must be >= 0"):
        whiten(np.array([1.0, 0.0]), weights=np.array([1.0, -1.0]))


def test_turn_gae_needs_last_values_for_episodes_that_are_not_terminated():
    rewards, mask = np.zeros((2, 1)), np.ones((2, 1), dtype=bool)
    with pytest.raises(ValueError, match=r"episode 1 is not terminated.*last_values\[1\]"):
        turn_gae(rewards, rewards, mask, gamma=1, lam=1, terminated=[True, False])
    with pytest.raises(ValueError, match="last_values was given but terminated was not"):
        turn_gae(rewards, rewards, mask, gamma=1, lam=1, last_values=[0.0, 0.0])
    with pytest.raises(ValueError, match=r"last_values must be \[B\] = \(2,\); got shape \(3,\)"):
        turn_gae(rewards, rewards, mask, gamma=1, lam=1, last_values=[0.0] * 3, terminated=[0, 0])
    with pytest.raises(ValueError, match=r"last_values\[0\] is nan"):
        turn_gae(rewards, rewards, mask, gamma=1, lam=1, last_values=[np.nan, 0], terminated=[0, 1])


def test_broadcast_to_tokens_rejects_indexes_outside_the_turns():
    with pytest.raises(ValueError, match=r"token_turn_index\[0, 1\] = 2 must be in \[-1, 2\)"):
        broadcast_to_tokens(np.zeros((1, 2)), [[0, 2]])
    with pytest.raises(ValueError, match=r"token_turn_index\[0, 0\] = -2 must be >= -1"):
        broadcast_to_tokens(np.zeros(1), [[-2]])
    with pytest.raises(ValueError, match="must hold integers"):
        broadcast_to_tokens(np.zeros((1, 2)), [[0.5]])
    with pytest.raises(ValueError, match="values has 1 episodes but token_turn_index has 2 rows"):
        broadcast_to_tokens(np.zeros((1, 2)), [[0], [1]])


@settings(max_examples=25)
@given(ragged(), UNIT)
def test_functions_do_not_modify_their_inputs(rows, gamma):
    rewards, mask = pad(rows)
    before = rewards.copy()
    discounted_returns(rewards, mask, gamma)
    turn_gae(rewards, rewards, mask, gamma=gamma, lam=0.5)
    if mask.any():
        rebn(rewards, mask)
    np.testing.assert_array_equal(rewards, before)


def test_empty_inputs_give_empty_outputs():
    for fn in (grpo, dr_grpo, rloo):
        assert fn([], []).shape == (0,)
    assert discounted_returns(np.zeros((2, 0)), np.zeros((2, 0), bool), 0.5).shape == (2, 0)
    adv, ret = turn_gae(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3), bool), gamma=1, lam=1)
    assert adv.shape == ret.shape == (0, 3)
    np.testing.assert_array_equal(broadcast_to_tokens(np.zeros((1, 0)), [[-1, -1]]), [[0.0, 0.0]])


# --------------------------------------------------------------------------------------------
# Rows and token tensors


def test_row_returns_are_each_rows_first_turn_return() -> None:
    eps = episodes()
    per_turn = row_returns(eps, turn_rows(eps), GAMMA)
    np.testing.assert_allclose(per_turn, [g for ep in TURN_RETURNS for g in ep], atol=1e-12)
    per_episode = row_returns(eps, episode_rows(eps), GAMMA)
    np.testing.assert_allclose(per_episode, [ep[0] for ep in TURN_RETURNS], atol=1e-12)


def test_turn_index_counts_runs_of_the_mask() -> None:
    padded = [m + [0] * (8 - len(m)) for m in RESPONSE_MASKS]
    assert turn_index_from_mask(padded).tolist() == [
        [0, 0, -1, -1, 1, 1, 1, -1],
        [0, -1, 1, 1, -1, -1, -1, 2],
        [0, 0, 0, 0, -1, -1, -1, -1],
        [0, -1, -1, -1, -1, -1, -1, -1],
    ]


def test_turn_index_refuses_a_vector() -> None:
    with pytest.raises(ValueError, match=r"\[B, R\]"):
        turn_index_from_mask(np.ones(4))


def test_per_turn_sums_add_rewards_per_turn() -> None:
    index = np.array([[0, 0, -1, 1], [0, -1, -1, -1]])
    values = np.array([[1.0, 2.0, 9.0, 4.0], [5.0, 0.0, 0.0, 0.0]])
    sums, mask = per_turn_sums(values, index)
    assert sums.tolist() == [[3.0, 4.0], [5.0, 0.0]]
    assert mask.tolist() == [[True, True], [True, False]]


def test_token_advantages_on_episode_rows_equal_rebn_of_episodes() -> None:
    rows = episode_rows(episodes()).pad(pad_token_id=0)
    response = rows.position_ids >= rows.prompt_length[:, None]  # [B, L] non-prompt tokens
    got = token_advantages(rows.token_rewards, rows.response_mask, estimator="rebn", gamma=GAMMA)
    expected = per_token(rebn_reference())
    for b in range(len(rows)):
        cut = got[b][response[b] & (rows.attention_mask[b] == 1)]
        np.testing.assert_allclose(cut, expected[b], atol=1e-12)


def test_token_advantages_on_turn_rows_with_returns_equal_the_same_rebn() -> None:
    eps = episodes()
    rows = turn_rows(eps).pad(pad_token_id=0)
    rewards = on_last_policy_token(row_returns(eps, rows, GAMMA), rows.response_mask)
    got = token_advantages(rewards, rows.response_mask, estimator="rebn", gamma=GAMMA)
    expected = [a for ep in rebn_reference() for a in ep]
    for b in range(len(rows)):
        policy = got[b][rows.response_mask[b] == 1]
        np.testing.assert_allclose(policy, expected[b], atol=1e-6)  # float32 returns


def test_token_advantages_reinforce_is_the_discounted_return() -> None:
    rows = episode_rows(episodes()).pad(pad_token_id=0)
    got = token_advantages(
        rows.token_rewards, rows.response_mask, estimator="reinforce", gamma=GAMMA
    )
    expected = per_token(TURN_RETURNS)
    for b in range(len(rows)):
        start = int(rows.prompt_length[b])
        stop = start + int(rows.response_length[b])
        np.testing.assert_allclose(got[b, start:stop], expected[b], atol=1e-6)


def test_token_advantages_refuse_rewards_off_policy_tokens() -> None:
    with pytest.raises(ValueError, match=r"token_rewards\[0, 1\]"):
        token_advantages([[0.0, 1.0]], [[1, 0]], estimator="reinforce", gamma=1.0)


def test_token_advantages_refuse_unknown_estimator_and_stray_options() -> None:
    with pytest.raises(ValueError, match="estimator must be one of"):
        token_advantages([[1.0]], [[1]], estimator="gae", gamma=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="are for estimator='rebn'"):
        token_advantages([[1.0]], [[1]], estimator="reinforce", gamma=1.0, std="unbiased")


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.lists(st.integers(1, 3), min_size=1, max_size=4), min_size=1, max_size=5),
    data=st.data(),
)
def test_token_advantages_match_the_reference_on_any_episodes(
    lengths: list[list[int]], data: st.DataObject
) -> None:
    eps = []
    for e, turn_lengths in enumerate(lengths):
        prompt, turns = [1, 2], []
        for t, n in enumerate(turn_lengths):
            response = [10 + t] * n
            reward = data.draw(st.sampled_from([-1.0, 0.0, 0.25, 1.0]))
            turns.append(Turn("o", "a", reward, prompt_ids=prompt, response_ids=response))
            prompt = prompt + response + [3]
        turns[-1].terminated = True
        eps.append(Episode("toy", group_id=str(e), turns=turns))
    rows = episode_rows(eps).pad(pad_token_id=0)
    got = token_advantages(rows.token_rewards, rows.response_mask, estimator="rebn", gamma=0.9)
    r, m = turn_rewards(eps)
    reference = rebn(discounted_returns(r, m, 0.9), m)
    expected = np.where(
        rows.turn_index >= 0,
        reference[rows.episode_index[:, None], np.maximum(rows.turn_index, 0)],
        0,
    )
    np.testing.assert_allclose(got, expected, atol=1e-9)


def test_token_advantages_join_rows_of_one_episode_by_offsets() -> None:
    eps = episodes()
    eps[1].turns[2].prompt_ids = [1, 2, 3, 99, 21, 22, 7]  # re-rendered history: a new row
    rows = episode_rows(eps, on_mismatch="split").pad(pad_token_id=0)
    assert rows.episode_index.tolist() == [0, 1, 1, 2, 3]
    offsets = [0, 1, 3, 4, 5]
    got = token_advantages(
        rows.token_rewards,
        rows.response_mask,
        estimator="rebn",
        gamma=GAMMA,
        episode_offsets=offsets,
    )
    flat = {(e, t): a for e, ep in enumerate(rebn_reference()) for t, a in enumerate(ep)}
    expected = np.where(
        rows.turn_index >= 0,
        [
            [flat.get((int(e), int(t)), 0.0) for t in row]
            for e, row in zip(rows.episode_index, rows.turn_index, strict=True)
        ],
        0.0,
    )
    np.testing.assert_allclose(got, expected, atol=1e-9)
    with pytest.raises(ValueError, match="episode_offsets must rise"):
        token_advantages(
            rows.token_rewards,
            rows.response_mask,
            estimator="rebn",
            gamma=GAMMA,
            episode_offsets=[0, 2],
        )
