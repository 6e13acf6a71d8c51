"""world:Crafting: the commands and their invalid cases, rewards, presets, the solver on
every preset, admissible actions, snapshots, the checker, hostile text and a fuzz test."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hostile_actions import HOSTILE_ACTIONS

import xpgym
from xpgym.core.checks import check_env
from xpgym.envs.world.common import parse_command
from xpgym.envs.world.crafting import (
    DIFFICULTIES,
    MAX_COUNT,
    CraftingEnv,
    Recipe,
    World,
    generate_world,
    solve,
)

IDS = ["world:Crafting-v0", "world:Crafting-v0-easy", "world:Crafting-v0-hard"]
ALL_IDS = [*IDS, "world:Crafting-v0-random"]
INFO_KEYS = {"turn", "correct", "invalid_action", "parsed_action"}


def boxed(command: str) -> str:
    return f"\\boxed{{{command}}}"


def small_world() -> World:
    """A chest from 8 planks of any wood and 1 iron ore; planks come 4 from 1 log."""
    recipes = [
        Recipe("birch planks", 4, (("birch log", 1),)),
        Recipe("oak chest", 1, (("planks", 8), ("iron ore", 1))),
        Recipe("oak planks", 4, (("oak log", 1),)),
    ]
    return World("oak chest", {r.target: r for r in recipes}, frozenset({"planks"}))


@pytest.fixture
def env() -> CraftingEnv:
    """An env playing `small_world` with an empty inventory."""
    env = CraftingEnv()
    env.reset(seed=0)
    env.world = small_world()
    return env


def play(env: CraftingEnv, *commands: str) -> tuple[str, float, bool, bool, dict]:
    result = None
    for command in commands:
        result = env.step(boxed(command))
    return result


def depth(world: World, item: str) -> int:
    if item not in world.recipes:
        return 0
    ingredients = world.recipes[item].ingredients
    return 1 + max(depth(world, world.resolve(key)) for key, _ in ingredients)


def test_world_lists_its_base_materials(env):
    assert env.world.bases == ("birch log", "iron ore", "oak log")


def test_get_adds_a_base_material(env):
    obs, reward, terminated, truncated, info = play(env, "get 3 oak log")
    assert obs.startswith("Got 3 oak log.")
    assert (reward, terminated, truncated, info["invalid_action"]) == (0.0, False, False, False)
    assert env.inventory == {"oak log": 3}


def test_craft_uses_ingredients_and_makes_the_recipe_count(env):
    obs, *_ = play(env, "get 3 oak log", "craft 4 oak planks using 1 oak log")
    assert obs.startswith("Crafted 4 oak planks.")
    assert env.inventory == {"oak log": 2, "oak planks": 4}


def test_craft_applies_the_recipe_a_whole_number_of_times(env):
    play(env, "get 3 oak log", "craft 12 oak planks using 3 oak log")
    assert env.inventory == {"oak planks": 12}


def test_a_kind_takes_any_item_of_it_and_the_goal_pays_one(env):
    play(env, "get 1 oak log", "get 1 birch log", "get 1 iron ore")
    play(env, "craft 4 oak planks using 1 oak log", "craft 4 birch planks using 1 birch log")
    _, reward, terminated, _, info = play(env, "craft 1 oak chest using 1 iron ore, 8 oak planks")
    assert info["invalid_action"]  # only 4 oak planks held
    play(env, "get 1 oak log", "craft 4 oak planks using 1 oak log")
    obs, reward, terminated, truncated, info = play(
        env, "craft 1 oak chest using 1 iron ore, 8 oak planks"
    )
    assert (reward, terminated, truncated, info["correct"]) == (1.0, True, False, True)
    assert "goal" in obs
    assert env.inventory == {"birch planks": 4, "oak chest": 1}


def test_inventory_lists_what_is_held(env):
    assert play(env, "inventory")[0].startswith("Inventory: nothing.")
    obs, *_ = play(env, "get 2 oak log", "get 1 iron ore", "inventory")
    assert obs.startswith("Inventory: 1 iron ore, 2 oak log.")


@pytest.mark.parametrize(
    ("commands", "message"),
    [
        (["mine 1 oak log"], "Unknown command"),
        (["get oak log"], "Write 'get <count> <item>'"),
        (["get 0 oak log"], "whole number 1..64"),
        (["get 65 oak log"], "whole number 1..64"),
        (["get " + "9" * 5000 + " oak log"], "whole number 1..64"),
        (["get 1 gold bar"], "Unknown item"),
        (["get 1 oak planks"], "not a base material: craft it"),
        (["get 1 planks"], "is a kind of item"),
        (["get 64 oak log", "get 1 oak log"], "at most 64 oak log"),
        (["craft 4 oak planks using"], "Write 'craft <count> <item> using"),
        (["craft 4 oak planks using 1 oak log,"], "Write 'craft <count> <item> using"),
        (["craft 0 oak planks using 0 oak log"], "whole numbers 1..64"),
        (["craft 1 oak log using 1 oak log"], "is a base material: get it"),
        (["craft 1 gold bar using 1 oak log"], "Unknown item"),
        (["craft 1 planks using 1 oak log"], "is a kind of item"),
        (["get 1 oak log", "craft 4 oak planks using 2 oak log"], "does not follow the recipe"),
        (["get 1 oak log", "craft 3 oak planks using 1 oak log"], "does not follow the recipe"),
        (["get 1 birch log", "craft 4 oak planks using 1 birch log"], "does not follow"),
        (["craft 4 oak planks using 1 oak log, 1 oak log"], "does not follow the recipe"),
        (["craft 1 oak chest using 8 oak planks"], "does not follow the recipe"),
        (["craft 1 oak chest using 8 planks, 1 iron ore"], "does not follow the recipe"),
        (["craft 1 oak chest using 8 oak log, 1 iron ore"], "does not follow the recipe"),
        (["craft 4 oak planks using 1 oak log"], "You need 1 oak log and have 0"),
        (
            [
                "get 16 oak log",
                "craft 64 oak planks using 16 oak log",
                "get 1 oak log",
                "craft 4 oak planks using 1 oak log",
            ],
            "at most 64 oak planks",
        ),
    ],
)
def test_invalid_command_changes_nothing_and_says_why(env, commands, message):
    play(env, *commands[:-1])
    held = dict(env.inventory)
    obs, reward, terminated, truncated, info = play(env, commands[-1])
    assert message in obs
    assert "Nothing changed" in obs
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["invalid_action"] is True
    assert env.inventory == held


def test_turn_limit_truncates_without_reward():
    env = CraftingEnv(difficulty="easy")
    env.reset(seed=0)
    for turn in range(1, env.max_turns + 1):
        obs, reward, terminated, truncated, info = env.step(boxed("inventory"))
        assert (reward, terminated, truncated) == (0.0, False, turn == env.max_turns)
    assert "No turns left." in obs
    assert "available_actions" not in info


@pytest.mark.parametrize("difficulty", [None, "easy", "hard", "random"])
def test_solver_wins_every_seed_within_half_the_turns(difficulty):
    env = CraftingEnv(difficulty=difficulty)
    for seed in range(150):
        env.reset(seed=seed)
        plan = solve(env.world)
        assert len(plan) <= env.max_turns // 2
        for i, command in enumerate(plan):
            _, reward, terminated, truncated, info = env.step(boxed(command))
            assert not info["invalid_action"], (seed, command)
            assert terminated == (i == len(plan) - 1)
        assert (reward, info["correct"], truncated) == (1.0, True, False)


@pytest.mark.parametrize("difficulty", ["easy", None, "hard"])
def test_presets_set_the_depth_the_limit_and_the_kinds(difficulty):
    env = CraftingEnv(difficulty=difficulty)
    settings = env.settings
    kinds = 0
    for seed in range(100):
        _, info = env.reset(seed=seed)
        assert info["max_turns"] == settings.max_turns
        assert depth(env.world, env.world.goal) == settings.depth
        for recipe in env.world.recipes.values():
            assert 1 <= len(recipe.ingredients) <= settings.max_ingredients
        kinds += len(env.world.kinds)
    assert (kinds > 0) == (settings.tags > 0)
    assert settings == DIFFICULTIES.get(difficulty, settings)


def test_random_preset_draws_both():
    env = CraftingEnv(difficulty="random")
    drawn = {env.reset(seed=seed)[1]["difficulty"] for seed in range(20)}
    assert drawn == {"easy", "hard"}


def test_the_last_draw_fits_even_the_tightest_settings():
    """Settings at `_validated`'s minimum turn limit still get a world that fits."""
    rng = np.random.default_rng(0)
    env = CraftingEnv(depth=4, max_ingredients=4, tags=3, distractors=10, max_turns=48)
    for _ in range(200):
        world = generate_world(rng, env.settings)
        assert len(solve(world)) <= 24
        assert depth(world, world.goal) == 4


@pytest.mark.parametrize(
    "kwargs",
    [
        {"depth": 1, "tags": 3, "max_turns": 40},  # no product to write a kind in
        {"depth": 8, "max_ingredients": 4, "tags": 3, "distractors": 10, "max_turns": 64},
        {"depth": 3, "max_ingredients": 1, "tags": 0, "distractors": 0, "max_turns": 14},
    ],
)
def test_settings_in_range_give_worlds_the_solver_wins(kwargs):
    env = CraftingEnv(**kwargs)
    for seed in range(40):
        env.reset(seed=seed)
        plan = solve(env.world)
        assert len(plan) <= env.max_turns // 2
        assert depth(env.world, env.world.goal) == kwargs["depth"]
        for command in plan:
            _, reward, terminated, _, _ = env.step(boxed(command))
        assert (reward, terminated) == (1.0, True)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"depth": 0}, ValueError),
        ({"depth": 9}, ValueError),
        ({"max_ingredients": 5}, ValueError),
        ({"distractors": -1}, ValueError),
        ({"tags": 4}, ValueError),
        ({"max_turns": 19}, ValueError),
        ({"depth": 2.0}, TypeError),
        ({"difficulty": "medium"}, ValueError),
    ],
)
def test_bad_settings_are_refused(kwargs, error):
    with pytest.raises(error):
        CraftingEnv(**kwargs)


def test_same_seed_same_world_and_other_seeds_other_worlds():
    a, b = CraftingEnv(difficulty="hard"), CraftingEnv(difficulty="hard")
    assert a.reset(seed=7) == b.reset(seed=7)
    assert len({a.reset(seed=seed)[0] for seed in range(30)}) == 30


def test_snapshot_is_fresh_json_and_replays():
    env = CraftingEnv(difficulty="hard")
    env.reset(seed=3)
    plan = solve(env.world)
    play(env, plan[0])
    state = env.get_state()
    frozen = json.dumps(state, sort_keys=True)
    first = [env.step(boxed(c)) for c in plan[1:]]
    assert json.dumps(state, sort_keys=True) == frozen
    other = CraftingEnv(difficulty="hard")
    other.set_state(json.loads(frozen))
    assert [other.step(boxed(c)) for c in plan[1:]] == first


def test_listed_actions_are_valid_and_unlisted_recipes_are_not():
    rng = np.random.default_rng(0)
    env = CraftingEnv(difficulty="random")
    for seed in range(40):
        _, info = env.reset(seed=seed)
        commands = solve(env.world)[:-1]
        for _ in range(int(rng.integers(0, 6))):
            commands.insert(
                int(rng.integers(len(commands) + 1)), rng.choice(info["available_actions"])
            )
        for command in commands[: int(rng.integers(len(commands) + 1))]:
            *_, info = env.step(boxed(command))
        state = env.get_state()
        listed = env.available_actions()
        assert listed == info["available_actions"]
        for action in listed:
            env.set_state(state)
            assert not env.step(boxed(action))[4]["invalid_action"], (seed, action)
        for recipe in env.world.recipes.values():
            if recipe.text not in listed:
                env.set_state(state)
                assert env.step(boxed(recipe.text))[4]["invalid_action"], (seed, recipe.text)


def test_sample_random_action_is_mostly_a_listed_action_and_else_invalid():
    env = CraftingEnv()
    env.reset(seed=0)
    play(env, solve(env.world)[0])
    state, listed = env.get_state(), env.available_actions()
    samples = [env.sample_random_action() for _ in range(200)]
    valid = []
    for sample in samples:
        env.set_state(state)
        valid.append(not env.step(sample)[4]["invalid_action"])
    assert valid == [s.startswith("\\boxed") and parse_command(s) in listed for s in samples]
    assert 140 < sum(valid) < 190


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_passes_check_env(env_id):
    check_env(xpgym.make(env_id))


@pytest.mark.parametrize("env_id", IDS)
def test_hostile_text_is_invalid_and_harmless(env_id):
    env = xpgym.make(env_id)
    env.reset(seed=0)
    for action in HOSTILE_ACTIONS:
        _, reward, terminated, _, info = env.step(action)
        assert (reward, terminated) == (0.0, False)
        assert info["invalid_action"]
        if "available_actions" not in info:
            env.reset(seed=0)


def test_fuzz_random_mixes_keep_the_invariants():
    rng = np.random.default_rng(1)
    junk = [*HOSTILE_ACTIONS, boxed("craft 1 x using 1 y"), boxed("get 99 oak log")]
    for seed in range(60):
        env = CraftingEnv(difficulty="random")
        _, info = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            draw = rng.random()
            if draw < 0.6:
                action = boxed(rng.choice(info["available_actions"]))
            elif draw < 0.8:
                action = env.sample_random_action()
            else:
                action = junk[int(rng.integers(len(junk)))]
            _, reward, terminated, truncated, info = env.step(action)
            assert np.isfinite(reward)
            assert info.keys() >= INFO_KEYS
            assert all(0 <= n <= MAX_COUNT for n in env.inventory.values())
            total += reward
            done = terminated or truncated
            if not done:
                assert info["available_actions"] == env.available_actions()
                assert info["available_actions"][0] == "inventory"
            assert terminated == info["correct"]
        assert total in (0.0, 1.0)
        assert info["turn"] <= env.max_turns
