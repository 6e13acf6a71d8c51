"""The difficulty interface, the success-rate scheduler, the horizon scheduler and the
zero-variance group filter of `xpgym.rollout.curriculum`, against hand-traced expectations."""

from __future__ import annotations

import pytest

import xpgym
from xpgym.core.errors import InfraCause
from xpgym.core.trajectory import Episode, Turn
from xpgym.core.wrappers.limits import HorizonSchedule, PiecewiseTurnSchedule
from xpgym.rollout.curriculum import (
    CONTINUOUS_KNOBS,
    DifficultyEnv,
    HorizonScheduler,
    KnobLadder,
    PresetLadder,
    SuccessRateScheduler,
    fill_groups,
    ladder_for,
    make_curriculum_vec,
    zero_variance,
)

HANOI = "game:TowerOfHanoi-v0"
GUESS = "game:GuessTheNumber-v0"
KNOB_ATTRIBUTE = {  # the env attribute each knob sets
    "game:FifteenPuzzle-v0": "scramble_moves",
    "game:GuessTheNumber-v0": "max_number",
    "game:Minesweeper-v0": "mines",
}


# -- the difficulty interface ----------------------------------------------------------------


def test_preset_ladder_orders_easy_default_hard():
    ladder = PresetLadder(HANOI)
    assert ladder.num_levels == 3
    assert [ladder.env_args(level) for level in range(3)] == [
        (f"{HANOI}-easy", {}),
        (HANOI, {}),
        (f"{HANOI}-hard", {}),
    ]


def test_every_family_with_easy_and_hard_ids_has_a_preset_ladder():
    families = [i.removesuffix("-easy") for i in xpgym.list_envs() if i.endswith("-easy")]
    assert {"game:TowerOfHanoi-v0", "math:Arithmetic-v0", "world:Crafting-v0"} <= set(families)
    for family in families:
        ladder = ladder_for(family)
        assert [ladder.env_args(level)[0] for level in range(3)] == [
            f"{family}-easy",
            family,
            f"{family}-hard",
        ]


def test_ladder_for_drops_the_preset_suffix():
    assert ladder_for(f"{HANOI}-random") == PresetLadder(HANOI)
    knob = KnobLadder(GUESS, CONTINUOUS_KNOBS[GUESS])
    assert ladder_for(f"{GUESS}-hard", continuous=True) == knob


def test_a_family_without_presets_or_knob_is_refused_by_name():
    with pytest.raises(ValueError, match="no difficulty presets"):
        PresetLadder("math:Gsm8k-v0")
    with pytest.raises(ValueError, match=r"no numeric difficulty knob.*FifteenPuzzle"):
        ladder_for(HANOI, continuous=True)


def test_knob_ladder_level_i_is_low_plus_i_strides():
    ladder = ladder_for(GUESS, continuous=True)
    assert ladder.num_levels == 99  # max_number 2..100
    assert ladder.env_args(0) == (GUESS, {"max_turns": 7, "max_number": 2})
    assert ladder.env_args(98) == (GUESS, {"max_turns": 7, "max_number": 100})
    with pytest.raises(ValueError, match="outside"):
        ladder.env_args(99)


@pytest.mark.parametrize("family", sorted(CONTINUOUS_KNOBS))
def test_every_knob_builds_its_lowest_and_highest_level(family):
    ladder = ladder_for(family, continuous=True)
    knob = CONTINUOUS_KNOBS[family]
    assert KNOB_ATTRIBUTE[family] == knob.argument
    for level, value in ((0, knob.low), (ladder.num_levels - 1, knob.high)):
        with DifficultyEnv(ladder, level) as env:
            env.reset(seed=0)
            assert getattr(env.unwrapped, knob.argument) == value


def test_a_new_level_applies_at_the_next_reset_and_is_in_every_info():
    env = DifficultyEnv(PresetLadder(HANOI), 0)
    _, info = env.reset(seed=1)
    assert info["curriculum"] == {"family": HANOI, "level": 0}
    env.set_difficulty_level(2)
    *_, info = env.step("A C")  # the episode keeps its level
    assert info["curriculum"]["level"] == 0
    assert env.unwrapped.num_disks == 3
    _, info = env.reset(seed=1)
    assert info["curriculum"]["level"] == 2
    assert env.unwrapped.num_disks == 5
    assert env.spec.id == HANOI  # records name the family, whatever the level
    env.close()


def test_set_difficulty_levels_takes_only_this_family():
    env = DifficultyEnv(PresetLadder(HANOI), 0)
    env.set_difficulty_levels({GUESS: 2})
    env.reset(seed=0)
    assert env.difficulty_level == 0
    env.set_difficulty_levels({HANOI: 1, GUESS: 2})
    env.reset(seed=0)
    assert env.difficulty_level == 1
    env.close()


def test_set_state_restores_the_snapshots_level_and_continuation():
    env = DifficultyEnv(PresetLadder(HANOI), 0)
    env.reset(seed=3)
    snapshot = env.get_state()
    expected = env.step("A B")
    env.set_difficulty_level(2)
    env.reset(seed=3)
    assert env.unwrapped.num_disks == 5
    env.set_state(snapshot)
    assert env.difficulty_level == 0
    assert env.unwrapped.num_disks == 3
    assert env.step("A B") == expected
    env.close()


# -- the success-rate scheduler ---------------------------------------------------------------


def result(family: str, level: int, success: bool, *, infra: bool = False) -> Episode:
    info = {"correct": success, "curriculum": {"family": family, "level": level}}
    return Episode(
        env_id=family,
        turns=[Turn("obs", "act", float(success), terminated=True, info=info)],
        infra_error=InfraCause("env_crash", "gone") if infra else None,
    )


def results(family: str, level: int, successes: str) -> list[Episode]:
    """One episode per character of `successes`: ``"1"`` a success, ``"0"`` a failure."""
    return [result(family, level, c == "1") for c in successes]


def scheduler(**kwargs) -> SuccessRateScheduler:
    return SuccessRateScheduler(
        [PresetLadder(HANOI)], **{"target": 0.5, "tolerance": 0.1, "window": 4, **kwargs}
    )


def test_success_above_the_band_moves_the_level_up_and_empties_the_window():
    s = scheduler()
    s.observe(results(HANOI, 0, "1101"))  # 0.75 > 0.6
    assert s.levels == {HANOI: 1}
    assert s.metrics() == {f"curriculum/{HANOI}/level": 1.0, f"curriculum/{HANOI}/window": 0.0}


def test_success_below_the_band_moves_the_level_down():
    s = scheduler(start_level=2)
    s.observe(results(HANOI, 2, "0100"))  # 0.25 < 0.4
    assert s.levels == {HANOI: 1}


def test_success_inside_the_band_keeps_the_level_and_the_window_slides():
    s = scheduler()
    s.observe(results(HANOI, 0, "1100"))  # 0.5: stay
    s.observe(results(HANOI, 0, "1"))  # window 1001: 0.5, stay
    s.observe(results(HANOI, 0, "1"))  # window 0011: 0.5, stay
    assert s.levels == {HANOI: 0}
    assert s.metrics()[f"curriculum/{HANOI}/success"] == 0.5
    s.observe(results(HANOI, 0, "1"))  # window 0111: 0.75 > 0.6, up
    assert s.levels == {HANOI: 1}


def test_no_move_before_the_window_is_full():
    s = scheduler()
    s.observe(results(HANOI, 0, "111"))
    assert s.levels == {HANOI: 0}
    assert s.metrics()[f"curriculum/{HANOI}/window"] == 3.0


def test_levels_stay_within_bounds():
    top = scheduler(start_level=2)
    top.observe(results(HANOI, 2, "1111"))
    bottom = scheduler()
    bottom.observe(results(HANOI, 0, "0000"))
    capped = scheduler(start_level=0, max_level=1)
    for _ in range(3):
        capped.observe(results(HANOI, capped.levels[HANOI], "1111"))
    assert (top.levels, bottom.levels, capped.levels) == ({HANOI: 2}, {HANOI: 0}, {HANOI: 1})


def test_results_from_another_level_or_an_infra_failure_are_not_counted():
    s = scheduler()
    s.observe(results(HANOI, 1, "1111") + [result(HANOI, 0, True, infra=True)] * 4)
    assert s.levels == {HANOI: 0}
    assert s.metrics()[f"curriculum/{HANOI}/window"] == 0.0


def test_families_move_independently():
    s = SuccessRateScheduler([PresetLadder(HANOI), PresetLadder(GUESS)], window=2)
    s.observe(results(HANOI, 0, "11") + results(GUESS, 0, "01"))
    assert s.levels == {HANOI: 1, GUESS: 0}


def test_the_scheduler_is_deterministic():
    stream = ["1101", "0111", "0000", "1010", "1111", "0001"]

    def trace() -> list[int]:
        s = scheduler(start_level=1)
        levels = []
        for chunk in stream:
            s.observe(results(HANOI, s.levels[HANOI], chunk))
            levels.append(s.levels[HANOI])
        return levels

    assert trace() == trace() == [2, 2, 1, 1, 2, 1]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target": 1.0}, "target"),
        ({"tolerance": 0.5}, "tolerance"),
        ({"window": 0}, "window"),
        ({"min_level": 3}, "min_level"),
    ],
)
def test_bad_scheduler_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        scheduler(**kwargs)


def test_apply_sets_each_sub_envs_level_for_its_next_reset():
    s = SuccessRateScheduler([PresetLadder(HANOI), PresetLadder(GUESS)], window=1)
    s.observe([result(HANOI, 0, True)])
    with make_curriculum_vec([PresetLadder(HANOI), PresetLadder(GUESS)], 2) as vec:
        vec.reset(seed=0)
        s.apply(vec, step=0)
        _, infos = vec.reset(seed=0)
        assert [info["curriculum"]["level"] for info in infos] == [1, 1, 0, 0]
        assert vec.get_attr("spec")[0].id == HANOI


# -- the horizon schedule as a scheduler ------------------------------------------------------


def test_the_horizon_scheduler_sets_the_training_step_like_the_wrapper_call():
    schedule = PiecewiseTurnSchedule(caps=(2, 4), boundaries=(1,))
    scheduler_ = HorizonScheduler(schedule)
    with xpgym.make_vec(
        "game:TowerOfHanoi-v0", 2, wrappers=[lambda env: HorizonSchedule(env, schedule)]
    ) as vec:
        vec.reset(seed=0)
        scheduler_.apply(vec, 0)
        assert vec.get_attr("next_max_turns") == (2, 2)
        assert scheduler_.metrics() == {"horizon/max_turns": 2.0}
        scheduler_.observe([result(HANOI, 0, True)] * 8)  # results never move it
        scheduler_.apply(vec, 1)
        assert vec.get_attr("next_max_turns") == (4, 4)
        assert vec.get_attr("current_max_turns") == (2, 2)  # the running episodes keep 2
        assert scheduler_.metrics() == {"horizon/max_turns": 4.0}


# -- zero-variance group filtering ------------------------------------------------------------


def group(group_id: str, *returns: float, infra: int = 0) -> list[Episode]:
    """Episodes of one group with these returns; the last `infra` members failed."""
    return [
        Episode(
            env_id="toy",
            group_id=group_id,
            turns=[Turn("obs", "act", r, terminated=True)],
            infra_error=InfraCause("env_crash", "gone") if i >= len(returns) - infra else None,
        )
        for i, r in enumerate(returns)
    ]


def test_zero_variance_means_equal_returns_among_the_ok_members():
    assert zero_variance(group("a", 1.0, 1.0, 1.0))
    assert not zero_variance(group("a", 1.0, 0.0, 1.0))
    assert zero_variance(group("a", 1.0, 1.0, 0.0, infra=1))  # the 0.0 failed
    assert zero_variance(group("a", 1.0, 0.0, infra=1))  # one ok member: nothing to compare


class ScriptedDraws:
    """``draw(n, index)`` returning the next scripted list of groups; records the calls."""

    def __init__(self, *draws: list[list[Episode]]) -> None:
        self.draws = list(draws)
        self.calls: list[tuple[int, int]] = []

    def __call__(self, num_groups: int, index: int) -> list[Episode]:
        self.calls.append((num_groups, index))
        groups = self.draws.pop(0)
        assert len(groups) == num_groups
        return [episode for g in groups for episode in g]


def ids(episodes: list[Episode]) -> list[str | None]:
    return list(dict.fromkeys(e.group_id for e in episodes))


def test_the_filter_drops_exactly_the_zero_variance_groups_and_refills():
    draw = ScriptedDraws(
        [group("a", 1, 0), group("b", 1, 1), group("c", 0, 0), group("d", 0, 1)],
        [group("e", 0, 0), group("f", 2, 1)],
        [group("g", 1, 3)],
    )
    fill = fill_groups(draw, 4, max_extra_draws=5)
    assert ids(fill.episodes) == ["a", "d", "f", "g"]
    assert draw.calls == [(4, 0), (2, 1), (1, 2)]
    assert (fill.groups, fill.drawn, fill.dropped, fill.extra_draws, fill.shortfall) == (
        4,
        7,
        3,
        2,
        0,
    )
    assert fill.metrics()["filter/dropped"] == 3.0


def test_the_filter_reports_the_shortfall_when_the_extra_draws_run_out(caplog):
    draw = ScriptedDraws(
        [group("a", 1, 0), group("b", 1, 1), group("c", 0, 0)],
        [group("d", 0, 0), group("e", 1, 1)],
    )
    fill = fill_groups(draw, 3, max_extra_draws=1)
    assert ids(fill.episodes) == ["a"]
    assert (fill.groups, fill.drawn, fill.dropped, fill.extra_draws, fill.shortfall) == (
        1,
        5,
        4,
        1,
        2,
    )
    assert "1 of 3 groups kept" in caplog.text


def test_without_extra_draws_the_filter_draws_once():
    draw = ScriptedDraws([group("a", 1, 1), group("b", 0, 1)])
    fill = fill_groups(draw, 2, max_extra_draws=0)
    assert draw.calls == [(2, 0)]
    assert ids(fill.episodes) == ["b"]
    assert fill.shortfall == 1


def test_a_draw_that_repeats_a_group_is_refused():
    draw = ScriptedDraws([group("a", 1, 1)], [group("a", 0, 1)])
    with pytest.raises(ValueError, match="repeated group 'a'"):
        fill_groups(draw, 1, max_extra_draws=1)
