"""world:ScienceLab: each command and refusal, heat transfer, sub-goal scores and the
max-over-trajectory reward, presets, the solver on every preset, admissible actions,
snapshots, determinism, the checker, hostile text and a fuzz test."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hostile_actions import HOSTILE_ACTIONS

import xpgym
from xpgym.core.checks import check_env
from xpgym.envs.world.science_lab import (
    COOL_STEP,
    HEAT_STEP,
    MAX_STOVE,
    MIN_FREEZER,
    NO_MATCH,
    RECIPES,
    SUBSTANCES,
    ScienceLabEnv,
    solve,
)

IDS = [f"world:ScienceLab-v0{suffix}" for suffix in ("", "-easy", "-hard", "-random")]
DIFFS = [None, "easy", "hard", "random"]


def box(command: str) -> str:
    return f"\\boxed{{{command}}}"


def thing(kind: str, where: str, temp: int = 20) -> dict:
    return {"kind": kind, "where": where, "temp": temp, "on": False}


def lab(task: dict | None = None, **extra: dict) -> ScienceLabEnv:
    """A hand-made two-room lab: the agent in the hallway with a cup of water, the
    thermometer and the answer boxes; the kitchen (door closed) has the stove, the freezer,
    a jar of salt and an empty bowl. Default task: boil the water."""
    env = ScienceLabEnv()
    env.reset(seed=0)
    env.rooms, env.doors, env.room = ["hallway", "kitchen"], {"hallway|kitchen": False}, "hallway"
    env.things = {
        "stove": thing("stove", "kitchen"),
        "freezer": thing("freezer", "kitchen"),
        "thermometer": thing("thermometer", "hallway"),
        "red box": thing("box", "hallway"),
        "blue box": thing("box", "hallway"),
        "cup": thing("vessel", "hallway"),
        "water": thing("substance", "cup"),
        "jar": thing("vessel", "kitchen"),
        "salt": thing("substance", "jar"),
        "bowl": thing("vessel", "kitchen"),
        **extra,
    }
    base = {"kind": "heat", "target": "water", "goal": "gas", "ingredients": None}
    env.task = {**base, "threshold": None, **(task or {})}
    env.focused = env.answered = False
    env.reading, env.best = None, 0.0
    return env


def play(env: ScienceLabEnv, *commands: str) -> tuple:
    result = None
    for command in commands:
        result = env.step(box(command))
        assert not result[4]["invalid_action"], (command, result[0])
    return result


def refused(env: ScienceLabEnv, command: str, message: str) -> None:
    before = env.get_state()
    obs, reward, terminated, _truncated, info = env.step(box(command))
    assert info["invalid_action"] is True
    assert (reward, terminated) == (0.0, False)
    assert message in obs
    after = env.get_state()
    assert {k: v for k, v in after.items() if k != "turn"} == {
        k: v for k, v in before.items() if k != "turn"
    }


# ----- commands ---------------------------------------------------------------------------


def test_look_around_describes_the_room_sorted_with_doors():
    obs, *_ = play(lab(), "look around")
    assert obs.startswith(
        "You are in the hallway. You see: a blue box; a cup (containing water); a red box; "
        "a thermometer. Doors: to the kitchen (closed)."
    )


@pytest.mark.parametrize(
    "command", ["fly", "pick up moon", "go to garden", "put water in moon", "take cup", "mix"]
)
def test_unknown_commands_and_things_match_no_action(command):
    refused(lab(), command, NO_MATCH)


def test_help_lists_the_admissible_actions_and_lets_no_time_pass():
    env = lab()
    play(env, "pick up cup", "open door to kitchen", "go to kitchen", "put cup on stove")
    play(env, "activate stove")
    temp = env.things["water"]["temp"]
    obs, reward, *_ = play(env, "help")
    assert obs.startswith("Available actions: " + "; ".join(env.available_actions()) + ".")
    assert (reward, env.things["water"]["temp"]) == (0.0, temp)


def test_doors_open_close_and_block_the_way():
    env = lab()
    refused(env, "go to kitchen", "The door to the kitchen is closed.")
    play(env, "open door to kitchen")
    refused(env, "open door to kitchen", "already open")
    obs, *_ = play(env, "go to kitchen")
    assert env.room == "kitchen"
    assert obs.startswith("You are in the kitchen.")
    assert "Doors: to the hallway (open)." in obs
    play(env, "close door to hallway")
    refused(env, "go to hallway", "The door to the hallway is closed.")
    refused(env, "go to kitchen", NO_MATCH)  # not a neighbour of the kitchen


def test_pick_up_carries_vessels_and_the_thermometer_only():
    env = lab()
    refused(env, "pick up water", "You cannot pick up the water.")
    refused(env, "pick up red box", "You cannot pick up the red box.")
    play(env, "pick up cup", "pick up thermometer")
    obs, *_ = play(env, "inventory")
    assert obs.startswith("You carry: cup, thermometer.")
    refused(env, "pick up cup", "already carry")
    play(env, "open door to kitchen", "go to kitchen")
    assert env.place("water") == "inventory"  # carried with its cup


def test_put_pours_substances_and_places_vessels_on_devices():
    env = lab()
    play(env, "pick up cup", "open door to kitchen", "go to kitchen", "put water in bowl")
    assert env.things["water"]["where"] == "bowl"
    refused(env, "put water in bowl", "already there")
    refused(env, "put water in stove", "cannot go into")
    refused(env, "put cup in bowl", "cannot go into")
    refused(env, "put bowl in stove", "Say: put bowl on stove.")
    refused(env, "put bowl on freezer", "Say: put bowl in freezer.")
    play(env, "put bowl on stove", "put cup in freezer")
    assert (env.things["bowl"]["where"], env.things["cup"]["where"]) == ("stove", "freezer")


def test_the_stove_heats_what_is_on_it_each_tick_and_only_while_on():
    env = lab()
    play(env, "pick up cup", "open door to kitchen", "go to kitchen", "put cup on stove")
    assert env.things["water"]["temp"] == 20  # off: no heat
    refused(env, "deactivate stove", "already off")
    refused(env, "activate freezer", "cannot be switched")
    play(env, "activate stove")
    assert env.things["water"]["temp"] == 20 + HEAT_STEP
    refused(env, "activate stove", "already on")
    play(env, "wait")
    assert env.thing_name("water") == "water"
    _obs, *_ = play(env, "look around")
    assert env.things["water"]["temp"] == 20 + 3 * HEAT_STEP >= 100
    assert env.thing_name("water") == "steam"
    env.things["water"]["temp"] = MAX_STOVE - 1
    play(env, "deactivate stove")  # the tick after switching off adds nothing
    assert env.things["water"]["temp"] == MAX_STOVE - 1
    play(env, "activate stove")
    assert env.things["water"]["temp"] == MAX_STOVE


def test_the_freezer_cools_to_its_floor_and_freezes():
    env = lab(task={"kind": "cool", "goal": "solid"})
    play(env, "pick up cup", "open door to kitchen", "go to kitchen", "put cup in freezer")
    assert env.things["water"]["temp"] == 20 - COOL_STEP
    play(env, "wait")
    assert env.thing_name("water") == "ice"
    for _ in range(3):
        env.step(box("wait"))
    assert env.things["water"]["temp"] == MIN_FREEZER


def test_thermometer_must_be_carried_and_measures_substances():
    env = lab(task={"kind": "measure", "threshold": 50})
    refused(env, "use thermometer on water", "You do not carry the thermometer.")
    play(env, "pick up thermometer")
    refused(env, "use thermometer on cup", "measures substances")
    env.things["water"]["temp"] = 63
    obs, *_ = play(env, "use thermometer on water")
    assert obs.startswith("The thermometer reads 63 degrees.")
    assert env.reading == 63


def test_mix_makes_the_recipe_product_at_the_mean_temperature():
    env = lab(task={"kind": "mix", "target": "salt water", "ingredients": ["salt", "water"]})
    play(env, "pick up cup", "open door to kitchen", "go to kitchen")
    refused(env, "mix jar", "makes nothing new")
    env.things["water"]["temp"] = 40
    play(env, "put water in jar")
    obs, *_ = play(env, "mix jar")
    assert obs.startswith("You mix the jar: it now holds salt water.")
    assert "salt" not in env.things
    assert "water" not in env.things
    assert env.things["salt water"] == {
        "kind": "substance",
        "where": "jar",
        "temp": 30,
        "on": False,
    }


# ----- focus, scores, rewards -------------------------------------------------------------


def test_focus_on_the_task_substance_is_a_subgoal_and_cannot_repeat():
    env = lab()
    obs, reward, terminated, *_ = play(env, "focus on water")
    assert (reward, terminated) == (0.25, False)
    assert "Score: 0.25." in obs
    refused(env, "focus on water", "already focus")
    assert "focus on water" not in env.available_actions()


@pytest.mark.parametrize("target", ["cup", "red box", "thermometer"])
def test_focus_on_a_wrong_thing_ends_the_episode_unsolved(target):
    env = lab()
    play(env, "focus on water")
    obs, reward, terminated, truncated, info = env.step(box(f"focus on {target}"))
    assert (reward, terminated, truncated, info["correct"]) == (0.0, True, False, False)
    assert "not the right answer" in obs
    assert "best score 0.25" in obs


def test_heat_subgoals_in_order_and_completion():
    env = lab()
    steps = ["focus on water", "pick up cup", "open door to kitchen", "go to kitchen"]
    steps += ["put cup on stove", "activate stove", "wait"]
    rewards = [play(env, s)[1] for s in steps]
    assert rewards == [0.25, 0, 0, 0, 0.25, 0.25, 0]
    obs, reward, terminated, truncated, info = play(env, "wait")
    assert (reward, terminated, truncated, info["correct"]) == (0.25, True, False, True)
    assert "Task complete!" in obs


def test_subgoals_after_a_missing_one_do_not_count():
    env = lab()
    play(env, "pick up cup", "open door to kitchen", "go to kitchen", "put cup on stove")
    assert env.subgoals() == [False, True, False, False]
    assert env.score() == 0.0


def test_undoing_a_subgoal_lowers_the_score_but_never_the_return():
    env = lab()
    total = play(env, "focus on water", "pick up cup")[1] + 0.25
    for command, reward in [("open door to kitchen", 0), ("go to kitchen", 0),
                            ("put cup on stove", 0.25), ("pick up cup", 0.0),
                            ("put cup on stove", 0.0)]:  # fmt: skip
        assert play(env, command)[1] == reward
        total += reward
    assert env.score() == env.best == total == 0.5


@pytest.mark.parametrize(
    ("temp", "answer", "correct"),
    [(63, "red", True), (63, "blue", False), (40, "blue", True), (50, "red", False)],
)
def test_measure_answer_box_is_judged_against_the_reading(temp, answer, correct):
    env = lab(task={"kind": "measure", "threshold": 50})
    env.things["water"]["temp"] = temp
    play(env, "focus on water", "pick up thermometer", "use thermometer on water")
    _obs, reward, terminated, _, info = env.step(box(f"focus on {answer} box"))
    assert (terminated, info["correct"]) == (True, correct)
    assert reward == (0.25 if correct else 0.0)
    assert env.best == (1.0 if correct else 0.75)


def test_an_answer_before_measuring_is_wrong():
    env = lab(task={"kind": "measure", "threshold": 50})
    play(env, "focus on water", "pick up thermometer")
    _, _, terminated, _, info = env.step(box("focus on blue box"))
    assert (terminated, info["correct"]) == (True, False)


def test_mix_task_ends_by_focusing_on_the_product():
    env = lab(task={"kind": "mix", "target": "salt water", "ingredients": ["salt", "water"]})
    play(env, "pick up cup", "open door to kitchen", "go to kitchen")
    assert play(env, "put water in jar")[1] == pytest.approx(1 / 3)
    assert play(env, "mix jar")[1] == pytest.approx(1 / 3)
    _, reward, terminated, _, info = play(env, "focus on salt water")
    assert (terminated, info["correct"]) == (True, True)
    assert reward == pytest.approx(1 / 3)
    assert env.best == 1.0


def test_focusing_on_an_ingredient_in_a_mix_task_ends_it():
    env = lab(task={"kind": "mix", "target": "salt water", "ingredients": ["salt", "water"]})
    _, _, terminated, _, info = env.step(box("focus on water"))
    assert (terminated, info["correct"]) == (True, False)


def test_turn_limit_truncates():
    env = ScienceLabEnv(max_turns=3)
    env.reset(seed=1)
    results = [env.step(box("wait")) for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    assert not any(r[2] for r in results)
    assert "No turns left." in results[-1][0]


# ----- presets, generation, solver --------------------------------------------------------


@pytest.mark.parametrize(
    ("difficulty", "tasks", "rooms", "max_turns"),
    [
        ("easy", {"heat", "measure"}, {1}, 12),
        (None, {"heat", "cool", "measure", "mix"}, {2, 3}, 20),
        ("hard", {"mix_heat", "mix_cool"}, {4}, 30),
    ],
)
def test_presets_draw_their_tasks_and_rooms(difficulty, tasks, rooms, max_turns):
    env = ScienceLabEnv(difficulty=difficulty)
    seen_tasks, seen_rooms = set(), set()
    for seed in range(60):
        _, info = env.reset(seed=seed)
        seen_tasks.add(env.task["kind"])
        seen_rooms.add(len(env.rooms))
        assert info["max_turns"] == env.max_turns == max_turns
        assert info["difficulty"] == difficulty
        assert env.score() == 0.0
    assert (seen_tasks, seen_rooms) == (tasks, rooms)


def test_random_preset_draws_easy_and_hard():
    env = ScienceLabEnv(difficulty="random")
    assert {env.reset(seed=s)[1]["difficulty"] for s in range(20)} == {"easy", "hard"}


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="difficulty"):
        ScienceLabEnv(difficulty="medium")
    for bad in (0, True, 2.5):
        with pytest.raises(ValueError, match="max_turns"):
            ScienceLabEnv(max_turns=bad)
    assert ScienceLabEnv(max_turns=7, difficulty="hard").max_turns == 7


def test_names_are_unique_across_species_and_states_and_recipes_are_closed():
    names = [name for substance in SUBSTANCES.values() for name in substance.names]
    assert len(names) == len(set(names))
    assert all(set(pair) | {product} <= set(SUBSTANCES) for pair, product in RECIPES.items())
    assert all(tuple(sorted(pair)) == pair for pair in RECIPES)


@pytest.mark.parametrize("difficulty", DIFFS)
def test_solver_wins_every_seed_within_the_turn_limit(difficulty):
    env = ScienceLabEnv(difficulty=difficulty)
    for seed in range(150):
        env.reset(seed=seed)
        before = env.get_state()
        plan = solve(env)
        assert env.get_state() == before  # planning plays on a copy
        assert len(plan) <= env.max_turns
        for i, command in enumerate(plan):
            _, _, terminated, truncated, info = env.step(box(command))
            assert not info["invalid_action"], (seed, command)
            assert terminated == (i == len(plan) - 1)
            assert not truncated
        assert info["correct"], (seed, env.task)
        assert env.best == 1.0


def test_same_seed_same_world_and_snapshot_round_trip():
    first, second = ScienceLabEnv(difficulty="hard"), ScienceLabEnv(difficulty="hard")
    assert first.reset(seed=7) == second.reset(seed=7)
    assert first.reset(seed=8)[0] != first.reset(seed=7)[0]
    play(first, *solve(first)[:5])
    snap = first.get_state()
    json.dumps(snap)  # JSON-like
    rest = solve(first)
    second.set_state(snap)
    assert [first.step(box(c)) for c in rest] == [second.step(box(c)) for c in rest]


# ----- admissible actions ------------------------------------------------------------------


def _unlisted_candidates(env: ScienceLabEnv) -> set[str]:
    """Every command the grammar builds from the things in reach and the rooms."""
    names = list(env._reachable())
    commands = {"look around", "inventory", "wait"}
    for room in env.rooms:
        commands |= {f"go to {room}", f"open door to {room}", f"close door to {room}"}
    for a in names:
        commands |= {f"pick up {a}", f"activate {a}", f"deactivate {a}", f"mix {a}"}
        commands |= {f"use thermometer on {a}", f"focus on {a}"}
        commands |= {f"put {a} {p} {b}" for b in names for p in ("in", "on")}
    return commands


@pytest.mark.parametrize("difficulty", DIFFS)
def test_available_actions_are_exactly_the_valid_commands(difficulty):
    env = ScienceLabEnv(difficulty=difficulty)
    rng = np.random.default_rng(0)
    for seed in range(25):
        env.reset(seed=seed)
        plan = solve(env)
        for command in plan[: int(rng.integers(len(plan)))]:
            env.step(box(command))
        snap = env.get_state()
        listed = env.available_actions()
        assert len(listed) == len(set(listed))
        assert listed
        for command in _unlisted_candidates(env) | set(listed):
            env.set_state(snap)
            info = env.step(box(command))[4]
            assert info["invalid_action"] == (command not in listed), (seed, command)


def test_sample_random_action_is_mostly_an_available_action():
    env = ScienceLabEnv()
    env.reset(seed=3)
    samples = [env.sample_random_action() for _ in range(200)]
    listed = {box(a) for a in env.available_actions()}
    share = sum(s in listed for s in samples) / len(samples)
    assert 0.8 < share < 1.0


# ----- the checker, hostile text, fuzz ----------------------------------------------------


@pytest.mark.parametrize("env_id", IDS)
def test_check_env_passes(env_id):
    check_env(xpgym.make(env_id))


@pytest.mark.parametrize("env_id", IDS)
def test_hostile_text_is_an_invalid_action(env_id):
    env = xpgym.make(env_id)
    env.reset(seed=0)
    for action in HOSTILE_ACTIONS:
        obs, reward, terminated, truncated, info = env.step(action)
        assert reward == 0.0
        assert info["invalid_action"]
        assert isinstance(obs, str)
        if terminated or truncated:
            env.reset(seed=0)


@pytest.mark.parametrize("difficulty", DIFFS)
def test_fuzz_random_commands_junk_and_hostile_text(difficulty):
    env = ScienceLabEnv(difficulty=difficulty)
    junk = [*HOSTILE_ACTIONS, box("put put in in"), box("focus on"), box("go to"), "wait"]
    for seed in range(60):
        rng = np.random.default_rng(seed)
        _, info = env.reset(seed=seed)
        total, scores = 0.0, [0.0]
        for _turn in range(env.max_turns):
            roll = rng.random()
            if roll < 0.75:
                action = box(str(rng.choice(info["available_actions"])))
            else:
                action = str(rng.choice(junk))
            obs, reward, terminated, truncated, info = env.step(action)
            assert isinstance(obs, str)
            assert math.isfinite(reward)
            assert reward >= 0.0
            assert {"turn", "correct", "invalid_action", "parsed_action"} <= set(info)
            total += reward
            scores.append(env.score())
            assert total == pytest.approx(max(scores)) == pytest.approx(env.best)
            assert env.best <= 1.0
            if terminated or truncated:
                assert not (terminated and truncated)
                assert info["correct"] == (env.best == 1.0)
                break
            assert info["available_actions"] == env.available_actions()
        else:
            pytest.fail("the episode outlived max_turns")
