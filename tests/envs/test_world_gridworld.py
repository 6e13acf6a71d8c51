"""world:GridWorld: each command and its refusals, sight, missions, rewards, presets, the
solver on every preset, admissible actions, snapshots, the checker and a fuzz test."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hostile_actions import HOSTILE_ACTIONS

import xpgym
from xpgym.core.checks import check_env
from xpgym.envs.world.gridworld import (
    Grid,
    GridWorldEnv,
    Mission,
    describe,
    solve,
    visible,
)

DIFFS = [None, "easy", "hard", "random"]
IDS = ["world:GridWorld-v0", "world:GridWorld-v0-easy", "world:GridWorld-v0-hard"]
IDS.append("world:GridWorld-v0-random")

GO_TO_PURPLE_BALL = Mission("go to", "purple ball")

# Two rooms; the agent (>) faces east; D is a door cell.
TWO_ROOMS = [
    "###########",
    "#....#....#",
    "#.>..D....#",
    "#....#....#",
    "#....#....#",
    "###########",
]


def build(
    rows: list[str],
    objects: dict[tuple[int, int], str] | None = None,
    doors: dict[tuple[int, int], tuple[str, str]] | None = None,
    mission: Mission = GO_TO_PURPLE_BALL,
    carrying: str | None = None,
) -> Grid:
    """A grid from text rows: ``#`` wall, ``D`` door, ``^>v<`` the agent, else floor."""
    cells = {(r, c): ch for r, row in enumerate(rows) for c, ch in enumerate(row)}
    agent = next(cell for cell, ch in cells.items() if ch in "^>v<")
    doors = doors if doors is not None else {}
    return Grid(
        width=len(rows[0]),
        walls={cell for cell, ch in cells.items() if ch == "#"},
        doors={cell: name for cell, (name, _) in doors.items()},
        door_states={name: state for name, state in doors.values()},
        objects=dict(objects or {}),
        agent=agent,
        facing="^>v<".index(cells[agent]),
        mission=mission,
        carrying=carrying,
    )


def played(grid: Grid, *commands: str, max_turns: int = 20):
    """An env on `grid` and the steps that `commands` gave."""
    env = GridWorldEnv()
    env.reset(seed=0)
    env.grid = grid
    env.max_turns = max_turns
    return env, [env.step(f"\\boxed{{{command}}}") for command in commands]


def two_rooms(door_state: str = "closed", **kwargs) -> Grid:
    return build(TWO_ROOMS, doors={(2, 5): ("blue door 1", door_state)}, **kwargs)


def refusal(grid: Grid, command: str) -> str:
    before = grid.to_state()
    _, [(obs, reward, terminated, _, info)] = played(grid, command)
    assert info["invalid_action"] is True
    assert (reward, terminated) == (0.0, False)
    assert grid.to_state() == before
    return obs


# --------------------------------------------------------------------------- commands


def test_turns_change_facing_and_move_forward_steps():
    grid = two_rooms()
    _env, steps = played(grid, "turn left", "turn left", "turn right", "move forward")
    assert all(not info["invalid_action"] for *_, info in steps)
    assert (grid.agent, grid.facing) == ((1, 2), 0)
    assert steps[0][0].startswith("You turn left.\nYou face north")


@pytest.mark.parametrize(
    ("agent", "facing", "message"),
    [
        ((2, 2), 1, "You cannot move forward: red ball 1 is in front of you."),
        ((2, 4), 1, "You cannot move forward: blue door 1 (locked) is in front of you."),
        ((1, 2), 0, "You cannot move forward: a wall is in front of you."),
    ],
)
def test_move_forward_is_blocked_by_objects_walls_and_shut_doors(agent, facing, message):
    grid = two_rooms("locked", objects={(2, 3): "red ball 1"})
    grid.agent, grid.facing = agent, facing
    assert refusal(grid, "move forward").startswith(message)


def test_move_forward_enters_an_open_door():
    grid = two_rooms("open")
    played(grid, "move forward", "move forward", "move forward")
    assert grid.agent == (2, 5)


def test_go_to_walks_a_shortest_path_and_faces_the_object():
    grid = two_rooms(objects={(4, 3): "red ball 1"})
    _, [(obs, _reward, *_, info)] = played(grid, "go to red ball 1")
    assert not info["invalid_action"]
    assert (grid.agent, grid.facing) in {((3, 3), 2), ((4, 2), 1)}
    assert obs.startswith("You go to red ball 1.")
    assert "In front of you: red ball 1." in obs


def test_go_to_a_door_stops_beside_it():
    grid = two_rooms()
    played(grid, "go to blue door 1")
    assert (grid.agent, grid.facing) == ((2, 4), 1)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("go to red ball 1", "You do not see 'red ball 1'."),  # behind the closed door
        ("go to green key 7", "You do not see 'green key 7'."),
        ("go to grey box 1", "grey box 1 is already in front of you."),
        ("go to yellow ball 1", "You cannot reach yellow ball 1: the way is blocked."),
    ],
)
def test_go_to_refusals(command, message):
    grid = two_rooms(
        objects={
            (2, 8): "red ball 1",
            (2, 3): "grey box 1",
            (4, 4): "yellow ball 1",
            (3, 4): "green box 1",
            (4, 3): "green box 2",
        }
    )
    assert refusal(grid, command).startswith(message)


def test_pick_up_takes_the_object_in_front():
    grid = two_rooms(objects={(2, 3): "red ball 1"})
    _, [(obs, *_, info)] = played(grid, "pick up red ball 1")
    assert not info["invalid_action"]
    assert grid.carrying == "red ball 1"
    assert grid.objects == {}
    assert "carry red ball 1" in obs


def test_pick_up_refusals():
    grid = two_rooms(objects={(2, 3): "red ball 1", (1, 1): "red box 1"})
    assert "no 'red box 1' in front of you" in refusal(grid, "pick up red box 1")
    grid.carrying = "blue key 1"
    assert "You already carry blue key 1; drop it first." in refusal(grid, "pick up red ball 1")


def test_drop_puts_the_object_in_front():
    grid = two_rooms(carrying="red ball 1")
    played(grid, "drop")
    assert grid.objects == {(2, 3): "red ball 1"}
    assert grid.carrying is None


def test_drop_refusals():
    grid = two_rooms(objects={(2, 3): "red box 1"})
    assert "You carry nothing to drop." in refusal(grid, "drop")
    grid.carrying = "red ball 1"
    assert "red box 1 is in front of you" in refusal(grid, "drop")
    grid.objects = {}
    grid.agent = (2, 4)
    assert "blue door 1 (closed) is in front of you" in refusal(grid, "drop")  # not on doors


def test_toggle_opens_and_closes_a_door():
    grid = two_rooms()
    grid.agent = (2, 4)
    _, steps = played(grid, "toggle")
    assert grid.door_states["blue door 1"] == "open"
    assert steps[0][0].startswith("You open blue door 1.")
    played(grid, "toggle")
    assert grid.door_states["blue door 1"] == "closed"


def test_a_locked_door_opens_only_with_a_key_of_its_colour():
    grid = two_rooms("locked", carrying="red key 1")
    grid.agent = (2, 4)
    assert "blue door 1 is locked: you need to carry a blue key." in refusal(grid, "toggle")
    grid.carrying = "blue ball 1"
    refusal(grid, "toggle")
    grid.carrying = "blue key 1"
    _, [(obs, *_)] = played(grid, "toggle")
    assert obs.startswith("You unlock and open blue door 1.")
    assert grid.door_states["blue door 1"] == "open"
    assert grid.carrying == "blue key 1"


def test_toggle_needs_a_door_in_front():
    assert "There is no door in front of you" in refusal(two_rooms(), "toggle")


def test_go_through_an_open_door_lands_beyond_it():
    grid = two_rooms("open")
    played(grid, "go through blue door 1")
    assert (grid.agent, grid.facing) == ((2, 6), 1)
    played(grid, "turn left", "turn left", "go through blue door 1")  # and back
    assert (grid.agent, grid.facing) == ((2, 4), 3)


def test_toggle_and_go_through_opens_a_shut_door():
    grid = two_rooms("locked", carrying="blue key 1")
    played(grid, "toggle and go through blue door 1")
    assert (grid.agent, grid.door_states["blue door 1"]) == ((2, 6), "open")


@pytest.mark.parametrize(
    ("state", "command", "message"),
    [
        ("closed", "go through blue door 1", "blue door 1 is closed: use toggle and go"),
        ("locked", "go through blue door 1", "blue door 1 is locked: use toggle and go"),
        ("open", "toggle and go through blue door 1", "blue door 1 is already open"),
        ("locked", "toggle and go through blue door 1", "blue door 1 is locked: you need"),
    ],
)
def test_go_through_refusals(state, command, message):
    assert refusal(two_rooms(state), command).startswith(message)


def test_go_through_needs_a_free_cell_beyond():
    grid = two_rooms("open", objects={(2, 6): "red ball 1", (1, 3): "red box 1"})
    message = "You cannot get through blue door 1: the way is blocked."
    assert refusal(grid, "go through blue door 1").startswith(message)
    assert refusal(grid, "go through red box 1").startswith("red box 1 is not a door.")


def test_unknown_commands_are_invalid():
    assert refusal(two_rooms(), "fly north").startswith("Unknown command 'fly north'.")


# ------------------------------------------------------------------------- sight, text


def test_walls_and_shut_doors_block_sight_objects_do_not():
    grid = two_rooms(objects={(2, 3): "red box 1", (2, 4): "grey ball 1", (2, 7): "red ball 1"})
    seen = visible(grid)
    assert {(2, 3), (2, 4), (2, 5)} <= set(seen)  # through the box, up to the door
    assert (2, 7) not in seen
    assert (1, 6) not in seen
    grid.door_states["blue door 1"] = "open"
    assert seen.keys() < visible(grid).keys()
    assert visible(grid)[(2, 7)] == (5, 0)  # 5 ahead, straight


def test_the_view_is_seven_by_seven_in_front():
    rows = ["#" * 16, "#" + "." * 14 + "#", "#" + "." * 14 + "#"]
    rows += ["#" + "." * 14 + "#", "#.^" + "." * 12 + "#", "#" * 16]
    grid = build(rows)
    offsets = set(visible(grid).values())
    assert all(0 <= ahead <= 6 and -3 <= side <= 3 for ahead, side in offsets)
    assert (4, 1) in offsets  # the top wall, 4 ahead and 1 right
    assert (0, -1) in offsets
    assert (1, 3) in offsets


def test_describe_lists_what_is_seen():
    grid = two_rooms(objects={(1, 4): "red ball 1", (4, 2): "green key 1"})
    assert describe(grid) == (
        "You face east and carry nothing. In front of you: the floor. Free cells in a line: "
        "2 ahead, 1 to the left, 1 to the right.\n"
        "You see: green key 1: 2 right; red ball 1: 2 ahead, 1 left; blue door 1 (closed): "
        "3 ahead."
    )


# ------------------------------------------------------------------ missions, rewards


@pytest.mark.parametrize(
    ("mission", "commands"),
    [
        (Mission("go to", "red ball"), ["go to red ball 1"]),
        (Mission("pick up", "red ball"), ["go to red ball 1", "pick up red ball 1"]),
        (Mission("open", "blue door"), ["go to blue door 1", "toggle"]),
        (
            Mission("put", "red ball", "grey box"),
            ["go to red ball 1", "pick up red ball 1", "move forward", "turn right", "drop"],
        ),
    ],
)
def test_each_mission_pays_one_on_the_turn_it_is_done(mission, commands):
    grid = two_rooms(objects={(2, 3): "grey box 1", (1, 4): "red ball 1", (3, 2): "green key 1"})
    grid.mission = mission
    if mission.verb == "go to":
        commands = ["turn left", *commands]
    _env, steps = played(grid, *commands)
    *before, (obs, reward, terminated, truncated, info) = steps
    assert all(step[1] == 0.0 and not step[2] for step in before)
    assert (reward, terminated, truncated, info["correct"]) == (1.0, True, False, True)
    assert f"Mission complete: {mission.text()}." in obs
    assert "available_actions" not in info


def test_invalid_turns_pay_zero_and_the_last_turn_truncates():
    _env, steps = played(two_rooms(), "fly", "turn left", "help", max_turns=3)
    (obs, reward, *_, info), _, (help_obs, _, terminated, truncated, help_info) = steps
    assert reward == 0.0
    assert info["invalid_action"]
    assert "Nothing changed" in obs
    assert help_obs.startswith("Available actions: turn left; turn right")
    assert not help_info["invalid_action"]
    assert (terminated, truncated) == (False, True)
    assert help_obs.endswith("No turns left.")


def test_a_step_without_a_box_is_invalid():
    env = GridWorldEnv()
    env.reset(seed=1)
    _, reward, _, _, info = env.step("turn left")
    assert (reward, info["invalid_action"], info["parsed_action"]) == (0.0, True, None)


# ----------------------------------------------------------------- presets, generation


@pytest.mark.parametrize(
    ("difficulty", "rooms", "states", "verbs", "max_turns"),
    [
        ("easy", 1, set(), {"go to"}, 10),
        (None, 2, {("closed",)}, {"go to", "pick up", "open"}, 20),
        ("hard", 3, {("closed", "locked")}, {"put"}, 40),
    ],
)
def test_presets_shape_the_world(difficulty, rooms, states, verbs, max_turns):
    env = GridWorldEnv(difficulty=difficulty)
    seen_verbs, seen_states = set(), set()
    for seed in range(40):
        _, info = env.reset(seed=seed)
        grid = env.grid
        assert grid.width == 5 * rooms + 1
        assert info["max_turns"] == max_turns
        seen_verbs.add(grid.mission.verb)
        by_column = sorted(grid.doors.items(), key=lambda item: item[0][1])
        seen_states.add(tuple(grid.door_states[name] for _, name in by_column))
        if rooms == 3:  # the key of the locked door lies in the middle room
            key = by_column[-1][1].replace("door", "key")
            assert any(name == key and 6 <= c <= 9 for (_, c), name in grid.objects.items())
    assert seen_verbs == verbs
    assert seen_states == (states or {()})


def test_random_draws_both_presets():
    env = GridWorldEnv(difficulty="random")
    drawn = set()
    for seed in range(20):
        _, info = env.reset(seed=seed)
        drawn.add(info["difficulty"])
    assert drawn == {"easy", "hard"}


def test_unknown_difficulty_is_refused():
    with pytest.raises(ValueError, match="difficulty"):
        GridWorldEnv(difficulty="extreme")


def test_same_seed_same_world_and_mission_names_are_unique():
    a, b = GridWorldEnv(difficulty="hard"), GridWorldEnv(difficulty="hard")
    assert a.reset(seed=5) == b.reset(seed=5)
    assert a.get_state() == b.get_state()
    assert a.reset(seed=6)[0] != b.reset(seed=5)[0]
    for seed in range(30):
        a.reset(seed=seed)
        kinds = [name.rsplit(" ", 1)[0] for name in a.grid.objects.values()]
        assert kinds.count(a.grid.mission.target) == kinds.count(a.grid.mission.other) == 1


@pytest.mark.parametrize("difficulty", [None, "easy", "hard"])
def test_the_solver_wins_every_seed_within_the_turn_limit(difficulty):
    env = GridWorldEnv(difficulty=difficulty)
    for seed in range(100):
        env.reset(seed=seed)
        assert env.solution == solve(env.grid)
        for command in env.solution:
            _, reward, terminated, truncated, info = env.step(f"\\boxed{{{command}}}")
            assert not info["invalid_action"], (seed, command)
            assert not truncated
        assert (terminated, info["correct"], reward) == (True, True, 1.0), seed
        assert info["turn"] == len(env.solution) <= env.max_turns


def test_the_solver_gives_up_without_the_key_and_leaves_the_grid_alone():
    env = GridWorldEnv(difficulty="hard")
    env.reset(seed=0)
    grid = env.grid
    locked = next(name for name, state in grid.door_states.items() if state == "locked")
    key_kind = locked.replace("door", "key").rsplit(" ", 1)[0]
    key = next(cell for cell, name in grid.objects.items() if name.startswith(key_kind))
    del grid.objects[key]
    before = grid.to_state()
    assert solve(grid) is None
    assert grid.to_state() == before


# --------------------------------------------------------------- actions and snapshots


def command_universe(grid: Grid) -> list[str]:
    """Every command over every name in `grid` (and one that names nothing)."""
    names = [*grid.objects.values(), *grid.doors.values(), "purple unicorn 1"]
    if grid.carrying:
        names.append(grid.carrying)
    named = ["go to", "pick up", "go through", "toggle and go through"]
    simple = ["turn left", "turn right", "move forward", "drop", "toggle"]
    return simple + [f"{verb} {name}" for verb in named for name in names]


def random_snapshots(difficulty, seeds, length=12):
    env = GridWorldEnv(difficulty=difficulty)
    for seed in seeds:
        env.reset(seed=seed)
        for _ in range(int(env.np_random.integers(length))):
            *_, terminated, truncated, _ = env.step(env.sample_random_action())
            if terminated or truncated:
                env.reset(seed=seed + 1000)
        yield env, env.get_state()


@pytest.mark.parametrize("difficulty", [None, "easy", "hard"])
def test_listed_actions_are_exactly_the_valid_ones(difficulty):
    for env, snapshot in random_snapshots(difficulty, range(25)):
        listed = env.available_actions()
        assert listed[:2] == ["turn left", "turn right"]
        assert len(set(listed)) == len(listed)
        for command in command_universe(env.grid):
            env.set_state(snapshot)
            *_, info = env.step(f"\\boxed{{{command}}}")
            assert info["invalid_action"] is (command not in listed), (command, listed)
        env.set_state(snapshot)


def test_snapshots_are_json_and_fresh():
    for env, snapshot in random_snapshots("hard", range(5)):
        assert json.loads(json.dumps(snapshot)) == snapshot
        copy = json.loads(json.dumps(snapshot))
        env.step("\\boxed{turn left}")
        env.step(f"\\boxed{{{env.available_actions()[-1]}}}")
        assert snapshot == copy
        env.set_state(snapshot)
        assert env.get_state() == snapshot


def test_sample_random_action_is_mostly_an_admissible_command():
    env = GridWorldEnv()
    env.reset(seed=3)
    samples = [env.sample_random_action() for _ in range(200)]
    boxed = [s[len("\\boxed{") : -1] for s in samples if s.startswith("\\boxed{")]
    admissible = set(env.available_actions())
    assert 150 < sum(command in admissible for command in boxed) < 200


# --------------------------------------------------------------- checker, hostile, fuzz


@pytest.mark.parametrize("env_id", IDS)
def test_check_env(env_id):
    check_env(xpgym.make(env_id))


@pytest.mark.parametrize("env_id", IDS)
def test_hostile_texts_are_invalid_actions(env_id):
    env = xpgym.make(env_id)
    env.reset(seed=0)
    for action in HOSTILE_ACTIONS:
        obs, reward, terminated, truncated, info = env.step(action)
        assert (reward, terminated, info["invalid_action"]) == (0.0, False, True)
        assert isinstance(obs, str)
        if truncated:
            env.reset(seed=1)


@pytest.mark.parametrize("difficulty", DIFFS)
def test_fuzz(difficulty):
    env = GridWorldEnv(difficulty=difficulty)
    rng = np.random.default_rng(0)
    junk = [*HOSTILE_ACTIONS[:8], "\\boxed{go to}", "\\boxed{TURN   Left}", "\\boxed{drop drop}"]
    for seed in range(30):
        _, info = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            listed = info["available_actions"]
            assert listed
            assert all(isinstance(a, str) for a in listed)
            roll = rng.random()
            if roll < 0.7:
                action = f"\\boxed{{{listed[rng.integers(len(listed))]}}}"
            elif roll < 0.85:
                action = junk[rng.integers(len(junk))]
            else:
                action = f"\\boxed{{{rng.choice(command_universe(env.grid))}}}"
            _, reward, terminated, truncated, info = env.step(action)
            assert math.isfinite(reward)
            assert reward in (0.0, 1.0)
            assert {"turn", "correct", "invalid_action", "parsed_action"} <= info.keys()
            assert info["correct"] is (reward == 1.0) is terminated
            if action in {f"\\boxed{{{command}}}" for command in listed}:
                assert not info["invalid_action"]
            total += reward
            done = terminated or truncated
        assert 0.0 <= total <= 1.0
        assert info["turn"] <= env.max_turns
