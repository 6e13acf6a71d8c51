r"""GridWorld: a BabyAI-style grid of rooms, seen in part and described in text.

The world follows BabyAI (Chevalier-Boisvert et al., ICLR 2019) as AgentGym's text version
(AgentGym-RL, arXiv 2509.08755) describes it, written from those descriptions.

World:

* A row of ``rooms`` square rooms, each 4x4 floor cells, walled, neighbours sharing a wall.
  Cells are ``(row, col)``, row 0 at the top (north). Each shared wall has one door; a door
  is ``open``, ``closed`` or ``locked``. Objects are balls, boxes and keys in six colours
  (`COLORS`); an object or a door is named ``<colour> <type> <n>`` (``red ball 1``,
  ``blue door 1``), numbered per colour and type, so every name is unique.
* The agent stands on a cell and faces north, east, south or west; it carries at most one
  object. A cell with a wall, an object or a door that is not open cannot be entered.
* The agent sees a 7x7 square: its own row of cells (3 to each side) and 6 rows ahead. A
  cell in that square is seen when a path of side-by-side cells inside the square leads to
  it from the agent through cells that do not block sight; walls and doors that are not
  open block sight (they are seen themselves), objects do not.

Commands (one per turn, in the last ``\boxed{}``; `xpgym.envs.world.common` reads them):

* ``turn left`` / ``turn right``: face the next direction.
* ``move forward``: step into the cell in front, if it can be entered.
* ``go to <thing>``: a seen object or door that is not in front of you already: walk a
  shortest path to a cell next to it and face it (refused when no path exists).
* ``pick up <object>``: take the object in front of you, if your hands are empty.
* ``drop``: put what you carry on the cell in front of you, if it is empty floor.
* ``toggle``: open or close the door in front of you; a locked door opens only while you
  carry a key of its colour (BabyAI's toggle on boxes is not modelled).
* ``go through <door>``: a seen, open door: walk to the nearest side of it from which the
  cell beyond is free, step through, and stand on that cell facing away from the door.
* ``toggle and go through <door>``: the same for a closed door (or a locked one while you
  carry its key), which is opened on the way and stays open.
* ``help`` lists the actions admissible now (`GridWorldEnv.available_actions`). Anything
  else, or a command not admissible now, is an invalid action: nothing changes and the
  observation says why.

Missions (BabyAI's instruction language), checked after every valid command:
``go to the <colour> <type>`` (such an object is in front of you), ``pick up the <colour>
<type>`` (you carry one), ``open the <colour> door`` (it is open), ``put the <colour> <type>
next to the <colour> <type>`` (two such objects lie on side-by-side cells). The objects a
mission names are the only ones of their colour and type.

Rewards: ``1.0`` on the turn that completes the mission (the episode terminates,
``correct=True``); ``0.0`` on every other turn, invalid ones included. BabyAI's
``1 - 0.9 * steps / max_steps`` shaping is not used, so an episode's return is 0 or 1.
If the last allowed turn (``turn == max_turns``) does not complete it, the episode is
truncated.

Observation: after a valid command, what it did, then the view: the direction you face,
what you carry, what is in front of you, how many cells you could walk in a line ahead (up
to 6), left and right (up to 3; an open door counts), and every seen object and door
(sorted by distance) with its offset (``2 ahead, 1 left``) and a door's state; after an
invalid one, why it was refused. ``info``: the keys of `xpgym.envs.world.common`
(``turn``, ``correct``, ``invalid_action``, ``parsed_action``, ``available_actions``).

Presets (`DIFFICULTIES`): ``"easy"`` one room, go to an object among 3, 10 turns; default
(no difficulty) two rooms joined by a closed door, 2 objects per room besides the target
(which lies in either room), a go to, pick up or open mission, 20 turns; ``"hard"`` three
rooms, the first door closed and the second locked, its key in the middle room, 2 objects
per room besides the key and the two of a put-next mission, one of which lies behind the
locked door, 40 turns; ``"random"`` draws easy or hard at every reset. The agent starts in
the first room. Every generated world is checked with `solve` (same commands) and drawn
again while it is solved already or its solution does not fit the turn limit.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from xpgym.envs.common.presets import resolve_presets
from xpgym.envs.world.common import Outcome, WorldEnv

__all__ = [
    "COLORS",
    "DIFFICULTIES",
    "DIRECTIONS",
    "KINDS",
    "SOLVED_REWARD",
    "Grid",
    "GridWorldEnv",
    "Mission",
    "Settings",
    "admissible",
    "describe",
    "generate",
    "run_command",
    "solve",
    "visible",
]

COLORS = ("red", "green", "blue", "purple", "yellow", "grey")
KINDS = ("ball", "box", "key")
DIRECTIONS = ("north", "east", "south", "west")
SOLVED_REWARD = 1.0

_STEPS = ((-1, 0), (0, 1), (1, 0), (0, -1))  # row and column change, by direction index
_ROOM = 4  # floor cells along each side of a room
_VIEW_AHEAD, _VIEW_SIDE = 6, 3
_TRIES = 100
_JUNK = ("go north", "\\boxed{fly}", "\\boxed{go to the moon 1}", "\\boxed{pick up}", "\\boxed{}")

Cell = tuple[int, int]


class Settings(NamedTuple):
    """One preset: rooms in a row, extra objects per room, turn limit."""

    rooms: int
    distractors: int
    max_turns: int


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(rooms=1, distractors=2, max_turns=10),
    "hard": Settings(rooms=3, distractors=2, max_turns=40),
}
"""Presets selected by `GridWorldEnv(difficulty=...)`."""

_DEFAULT = Settings(rooms=2, distractors=2, max_turns=20)


class Mission(NamedTuple):
    """``verb`` is ``go to``, ``pick up``, ``open`` or ``put``; ``target`` and ``other`` are
    ``"<colour> <type>"`` (``other`` only for ``put``)."""

    verb: str
    target: str
    other: str = ""

    def text(self) -> str:
        if self.verb == "put":
            return f"put the {self.target} next to the {self.other}"
        return f"{self.verb} the {self.target}"


def _kind_of(name: str) -> str:
    """``"red ball 1"`` -> ``"red ball"``."""
    return name.rsplit(" ", 1)[0]


def _ahead(cell: Cell, facing: int, times: int = 1) -> Cell:
    dr, dc = _STEPS[facing % 4]
    return cell[0] + dr * times, cell[1] + dc * times


def _neighbours(cell: Cell) -> tuple[Cell, Cell, Cell, Cell]:
    """The four cells beside `cell`, in `DIRECTIONS` order (a hot path: written out)."""
    r, c = cell
    return (r - 1, c), (r, c + 1), (r + 1, c), (r, c - 1)


@dataclass
class Grid:
    """The whole world state: plain data, copied by `copy` and serialised by `to_state`.

    ``walls`` excludes door cells; ``doors`` maps a door cell to its name and ``door_states``
    a door name to ``open`` / ``closed`` / ``locked``; ``objects`` maps a floor cell to the
    object on it; ``facing`` indexes `DIRECTIONS`.
    """

    width: int
    walls: set[Cell]
    doors: dict[Cell, str]
    door_states: dict[str, str]
    objects: dict[Cell, str]
    agent: Cell
    facing: int
    mission: Mission
    carrying: str | None = None

    height: ClassVar[int] = _ROOM + 2

    def copy(self) -> Grid:
        """A copy whose sets and dicts are new (what commands change)."""
        return dataclasses.replace(
            self,
            walls=set(self.walls),
            doors=dict(self.doors),
            door_states=dict(self.door_states),
            objects=dict(self.objects),
        )

    def to_state(self) -> dict[str, Any]:
        return {
            "width": self.width,
            "walls": sorted(list(cell) for cell in self.walls),
            "doors": [[*cell, name, self.door_states[name]] for cell, name in self.doors.items()],
            "objects": [[*cell, name] for cell, name in self.objects.items()],
            "agent": list(self.agent),
            "facing": self.facing,
            "mission": list(self.mission),
            "carrying": self.carrying,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Grid:
        return cls(
            width=state["width"],
            walls={(r, c) for r, c in state["walls"]},
            doors={(r, c): name for r, c, name, _ in state["doors"]},
            door_states={name: door_state for *_, name, door_state in state["doors"]},
            objects={(r, c): name for r, c, name in state["objects"]},
            agent=(state["agent"][0], state["agent"][1]),
            facing=state["facing"],
            mission=Mission(*state["mission"]),
            carrying=state["carrying"],
        )

    @property
    def front(self) -> Cell:
        return _ahead(self.agent, self.facing)

    def locate(self, name: str) -> Cell | None:
        """The cell of the object or door called `name` on the map."""
        for cell, thing in (*self.objects.items(), *self.doors.items()):
            if thing == name:
                return cell
        return None

    def passable(self, cell: Cell) -> bool:
        """Whether the agent may stand on `cell` (floor without object, or an open door)."""
        if cell in self.walls or cell in self.objects or not self.in_bounds(cell):
            return False
        return cell not in self.doors or self.door_states[self.doors[cell]] == "open"

    def empty_floor(self, cell: Cell) -> bool:
        """Whether an object may be dropped on `cell`."""
        return self.passable(cell) and cell not in self.doors

    def in_bounds(self, cell: Cell) -> bool:
        return 0 <= cell[0] < self.height and 0 <= cell[1] < self.width

    def blocks_sight(self, cell: Cell) -> bool:
        """Walls and doors that are not open block sight; objects do not."""
        return cell in self.walls or (
            cell in self.doors and self.door_states[self.doors[cell]] != "open"
        )

    def can_open(self, door: str) -> bool:
        """Whether `door` is not locked, or the agent carries a key of its colour."""
        key = f"{door.split()[0]} key"
        return self.door_states[door] != "locked" or (
            self.carrying is not None and _kind_of(self.carrying) == key
        )

    def what(self, cell: Cell) -> str:
        """How `cell` reads in text: ``a wall``, ``the floor``, an object or a door."""
        if cell in self.objects:
            return self.objects[cell]
        if cell in self.doors:
            return f"{self.doors[cell]} ({self.door_states[self.doors[cell]]})"
        return "a wall" if cell in self.walls or not self.in_bounds(cell) else "the floor"


# ----------------------------------------------------------------------- sight and paths


def visible(grid: Grid) -> dict[Cell, tuple[int, int]]:
    """The seen cells (module docstring), each with its offset ``(ahead, right)``."""
    fwd, right = _STEPS[grid.facing], _STEPS[(grid.facing + 1) % 4]
    square = {}
    for ahead in range(_VIEW_AHEAD + 1):
        for side in range(-_VIEW_SIDE, _VIEW_SIDE + 1):
            cell = (
                grid.agent[0] + ahead * fwd[0] + side * right[0],
                grid.agent[1] + ahead * fwd[1] + side * right[1],
            )
            if grid.in_bounds(cell):
                square[cell] = (ahead, side)
    seen = {grid.agent: (0, 0)}
    queue = deque([grid.agent])
    while queue:
        cell = queue.popleft()
        if cell != grid.agent and grid.blocks_sight(cell):
            continue  # seen, but hides what is behind it
        for nxt in _neighbours(cell):
            if nxt in square and nxt not in seen:
                seen[nxt] = square[nxt]
                queue.append(nxt)
    return seen


def _walk_order(grid: Grid) -> dict[Cell, int]:
    """The cells the agent can walk to, numbered in breadth-first order from its own cell
    (neighbours in `DIRECTIONS` order): a lower number is never farther."""
    order = {grid.agent: 0}
    queue = deque([grid.agent])
    while queue:
        for nxt in _neighbours(queue.popleft()):
            if nxt not in order and grid.passable(nxt):
                order[nxt] = len(order)
                queue.append(nxt)
    return order


def _nearest(order: dict[Cell, int], goals: dict[Cell, int]) -> Cell | None:
    """The cell of `goals` first in `order` (the nearest), or `None` if none is reachable."""
    return min((cell for cell in goals if cell in order), key=order.__getitem__, default=None)


def _approach(grid: Grid, target: Cell, order: dict[Cell, int]) -> tuple[Cell, int] | None:
    """Where ``go to`` leaves the agent for `target`, and its facing; `None` if unreachable.
    `order` is `_walk_order(grid)`."""
    sides = {_ahead(target, (d + 2) % 4): d for d in range(4)}
    spot = _nearest(order, sides)
    return None if spot is None else (spot, sides[spot])


def _crossing(grid: Grid, door: Cell) -> tuple[Cell, int] | None:
    """Where going through `door` (opened if shut) leaves the agent, and its facing: the
    cell beyond it from the nearest side whose far cell is free; `None` if there is none."""
    opened = copy.copy(grid)
    opened.door_states = {**grid.door_states, grid.doors[door]: "open"}
    sides = {_ahead(door, (d + 2) % 4): d for d in range(4) if grid.passable(_ahead(door, d))}
    spot = _nearest(_walk_order(opened), sides)
    return None if spot is None else (_ahead(door, sides[spot]), sides[spot])


# ------------------------------------------------------------------------------ commands


class _RefusedError(Exception):
    """A command that is not admissible now; its message says why."""


def _seen_thing(grid: Grid, name: str) -> Cell:
    cell = grid.locate(name)
    if cell is None or cell not in visible(grid):
        raise _RefusedError(f"You do not see {name!r:.60}.")
    return cell


def _turn(grid: Grid, way: str) -> str:
    grid.facing = (grid.facing + (1 if way == "right" else -1)) % 4
    return f"You turn {way}."


def _move_forward(grid: Grid) -> str:
    if not grid.passable(grid.front):
        raise _RefusedError(f"You cannot move forward: {grid.what(grid.front)} is in front of you.")
    grid.agent = grid.front
    return "You move forward."


def _go_to(grid: Grid, name: str) -> str:
    cell = _seen_thing(grid, name)
    if grid.front == cell:
        raise _RefusedError(f"{name} is already in front of you.")
    spot = _approach(grid, cell, _walk_order(grid))
    if spot is None:
        raise _RefusedError(f"You cannot reach {name}: the way is blocked.")
    grid.agent, grid.facing = spot
    return f"You go to {name}."


def _pick_up(grid: Grid, name: str) -> str:
    if grid.carrying is not None:
        raise _RefusedError(f"You already carry {grid.carrying}; drop it first.")
    if grid.objects.get(grid.front) != name:
        raise _RefusedError(f"There is no {name!r:.60} in front of you to pick up.")
    grid.carrying = grid.objects.pop(grid.front)
    return f"You pick up {name}."


def _drop(grid: Grid) -> str:
    if grid.carrying is None:
        raise _RefusedError("You carry nothing to drop.")
    if not grid.empty_floor(grid.front):
        raise _RefusedError(f"You cannot drop here: {grid.what(grid.front)} is in front of you.")
    grid.objects[grid.front], grid.carrying = grid.carrying, None
    return f"You drop {grid.objects[grid.front]}."


def _check_can_open(grid: Grid, door: str) -> None:
    if not grid.can_open(door):
        raise _RefusedError(f"{door} is locked: you need to carry a {door.split()[0]} key.")


def _toggle(grid: Grid) -> str:
    door = grid.doors.get(grid.front)
    if door is None:
        raise _RefusedError("There is no door in front of you to toggle.")
    _check_can_open(grid, door)
    state = grid.door_states[door]
    grid.door_states[door] = "closed" if state == "open" else "open"
    verb = {"open": "close", "closed": "open", "locked": "unlock and open"}[state]
    return f"You {verb} {door}."


def _go_through(grid: Grid, door: str, toggle_first: bool) -> str:
    cell = _seen_thing(grid, door)
    if cell not in grid.doors:
        raise _RefusedError(f"{door} is not a door.")
    state = grid.door_states[door]
    if toggle_first and state == "open":
        raise _RefusedError(f"{door} is already open: use go through {door}.")
    if not toggle_first and state != "open":
        raise _RefusedError(f"{door} is {state}: use toggle and go through {door}.")
    _check_can_open(grid, door)
    landing = _crossing(grid, cell)
    if landing is None:
        raise _RefusedError(f"You cannot get through {door}: the way is blocked.")
    grid.door_states[door] = "open"
    grid.agent, grid.facing = landing
    return f"You {'open and ' if toggle_first else ''}go through {door}."


_SIMPLE: dict[str, Callable[[Grid], str]] = {
    "turn left": lambda grid: _turn(grid, "left"),
    "turn right": lambda grid: _turn(grid, "right"),
    "move forward": _move_forward,
    "drop": _drop,
    "toggle": _toggle,
}
_NAMED: dict[str, Callable[[Grid, str], str]] = {  # longest prefix first
    "toggle and go through ": lambda grid, door: _go_through(grid, door, toggle_first=True),
    "go through ": lambda grid, door: _go_through(grid, door, toggle_first=False),
    "go to ": _go_to,
    "pick up ": _pick_up,
}


def run_command(grid: Grid, command: str) -> str:
    """Apply a normalised command to `grid` and say what it did.

    Raises:
        _RefusedError: the command is unknown or not admissible now (`grid` is unchanged).
    """
    if command in _SIMPLE:
        return _SIMPLE[command](grid)
    for prefix, apply in _NAMED.items():
        if command.startswith(prefix):
            return apply(grid, command[len(prefix) :])
    raise _RefusedError(f"Unknown command {command!r:.60}.")


def admissible(grid: Grid) -> list[str]:
    """The commands valid now, in a fixed order (each one passes `run_command`)."""
    actions = ["turn left", "turn right"]
    if grid.passable(grid.front):
        actions.append("move forward")
    seen = visible(grid)
    things = sorted(
        (name, cell) for cell, name in (*grid.objects.items(), *grid.doors.items()) if cell in seen
    )
    order = _walk_order(grid)
    actions += [
        f"go to {name}"
        for name, cell in things
        if cell != grid.front and _approach(grid, cell, order) is not None
    ]
    if grid.carrying is None and grid.front in grid.objects:
        actions.append(f"pick up {grid.objects[grid.front]}")
    if grid.carrying is not None and grid.empty_floor(grid.front):
        actions.append("drop")
    if grid.front in grid.doors and grid.can_open(grid.doors[grid.front]):
        actions.append("toggle")
    for name, cell in things:
        if cell in grid.doors and grid.can_open(name) and _crossing(grid, cell) is not None:
            verb = "go through" if grid.door_states[name] == "open" else "toggle and go through"
            actions.append(f"{verb} {name}")
    return actions


def accomplished(grid: Grid) -> bool:
    """Whether `grid.mission` holds now (module docstring)."""
    verb, target, other = grid.mission
    if verb == "go to":
        return _kind_of(grid.objects.get(grid.front, "")) == target
    if verb == "pick up":
        return grid.carrying is not None and _kind_of(grid.carrying) == target
    if verb == "open":
        return any(_kind_of(n) == target and s == "open" for n, s in grid.door_states.items())
    placed = [cell for cell, name in grid.objects.items() if _kind_of(name) == target]
    return any(
        _kind_of(grid.objects.get(nxt, "")) == other for cell in placed for nxt in _neighbours(cell)
    )


def _offset(ahead: int, side: int) -> str:
    parts = [f"{ahead} ahead"] if ahead else []
    if side:
        parts.append(f"{abs(side)} {'right' if side > 0 else 'left'}")
    return ", ".join(parts)


def describe(grid: Grid) -> str:
    """The text view of the module docstring."""
    seen = visible(grid)
    free = []
    for label, facing, reach in (
        ("ahead", grid.facing, _VIEW_AHEAD),
        ("to the left", grid.facing - 1, _VIEW_SIDE),
        ("to the right", grid.facing + 1, _VIEW_SIDE),
    ):
        count = 0
        while count < reach and grid.passable(_ahead(grid.agent, facing, count + 1)):
            count += 1
        free.append(f"{count} {label}")
    things = sorted(
        (abs(ahead) + abs(side), ahead, side, cell)
        for cell, (ahead, side) in seen.items()
        if cell in grid.objects or cell in grid.doors
    )
    listed = "; ".join(f"{grid.what(cell)}: {_offset(a, s)}" for _, a, s, cell in things)
    return (
        f"You face {DIRECTIONS[grid.facing]} and carry {grid.carrying or 'nothing'}. "
        f"In front of you: {grid.what(grid.front)}. Free cells in a line: {', '.join(free)}.\n"
        f"You see: {listed or 'no objects or doors'}."
    )


# ---------------------------------------------------------------------------- generation


def _room_cells(room: int) -> list[Cell]:
    return [(r, 5 * room + c) for r in range(1, _ROOM + 1) for c in range(1, _ROOM + 1)]


def _draw_kind(rng: np.random.Generator, excluded: set[str]) -> str:
    """A colour and type of object (``"red ball"``) not in `excluded`."""
    while True:
        kind = f"{COLORS[rng.integers(len(COLORS))]} {KINDS[rng.integers(len(KINDS))]}"
        if kind not in excluded:
            return kind


def _draw_mission(rooms: int, rng: np.random.Generator, doors: list[str]) -> Mission:
    """One room: go to; two: go to, pick up or open; three: put next to (module docstring)."""
    if rooms == 1:
        return Mission("go to", _draw_kind(rng, set()))
    if rooms == 2:
        verb = ("go to", "pick up", "open")[rng.integers(3)]
        return Mission(verb, _kind_of(doors[0]) if verb == "open" else _draw_kind(rng, set()))
    key = _kind_of(doors[-1]).replace("door", "key")
    target = _draw_kind(rng, {key})
    return Mission("put", target, _draw_kind(rng, {key, target}))


def generate(settings: Settings, rng: np.random.Generator) -> Grid:
    """A new world for `settings` drawn from `rng` (module docstring); not checked solvable."""
    width = 5 * settings.rooms + 1
    walls = {(r, c) for r in range(Grid.height) for c in range(width)}
    walls -= {cell for room in range(settings.rooms) for cell in _room_cells(room)}
    colours = rng.permutation(len(COLORS))
    doors = {
        (1 + int(rng.integers(_ROOM)), 5 * k): f"{COLORS[colours[k]]} door 1"
        for k in range(1, settings.rooms)
    }
    walls -= set(doors)
    names = list(doors.values())  # west to east
    door_states = dict.fromkeys(names, "closed")
    if settings.rooms == 3:
        door_states[names[-1]] = "locked"
    near_doors = {cell for door in doors for cell in _neighbours(door)}
    free = [[c for c in _room_cells(room) if c not in near_doors] for room in range(settings.rooms)]
    agent = free[0][rng.integers(len(free[0]))]
    mission = _draw_mission(settings.rooms, rng, names)
    placements: list[tuple[str, int]] = []  # (colour and type, room)
    if mission.verb == "put":
        far = int(rng.integers(2))  # which of the two objects lies behind the locked door
        placements += [
            (mission.target, 2 if far else int(rng.integers(2))),
            (mission.other, int(rng.integers(2)) if far else 2),
            (_kind_of(names[-1]).replace("door", "key"), 1),
        ]
    elif mission.verb != "open":
        placements.append((mission.target, int(rng.integers(settings.rooms))))
    excluded = {kind for kind, _ in placements} | {mission.target}
    for room in range(settings.rooms):
        placements += [(_draw_kind(rng, excluded), room) for _ in range(settings.distractors)]
    objects: dict[Cell, str] = {}
    counts: dict[str, int] = {}
    for kind, room in placements:
        cells = [c for c in free[room] if c != agent and c not in objects]
        counts[kind] = counts.get(kind, 0) + 1
        objects[cells[rng.integers(len(cells))]] = f"{kind} {counts[kind]}"
    return Grid(width, walls, doors, door_states, objects, agent, int(rng.integers(4)), mission)


# -------------------------------------------------------------------------------- solver


def _do(grid: Grid, plan: list[str], command: str) -> None:
    run_command(grid, command)
    plan.append(command)


def _walk(grid: Grid, plan: list[str], goal: Callable[[Grid], bool]) -> None:
    """Turn and step (breadth-first over position and facing) until `goal(grid)` holds."""
    start = (grid.agent, grid.facing)
    parents: dict[tuple[Cell, int], tuple[tuple[Cell, int], str] | None] = {start: None}
    queue = deque([start])
    probe = copy.copy(grid)
    while queue:
        state = queue.popleft()
        probe.agent, probe.facing = state
        if goal(probe):
            steps = []
            while (link := parents[state]) is not None:
                state, command = link
                steps.append(command)
            for command in reversed(steps):
                _do(grid, plan, command)
            return
        moves = [((state[0], (state[1] - 1) % 4), "turn left")]
        moves.append(((state[0], (state[1] + 1) % 4), "turn right"))
        if probe.passable(probe.front):
            moves.append(((probe.front, state[1]), "move forward"))
        for nxt, command in moves:
            if nxt not in parents:
                parents[nxt] = (state, command)
                queue.append(nxt)
    raise _RefusedError("no walk reaches the goal")


def _find(grid: Grid, kind: str) -> tuple[Cell, str]:
    """The cell and name of the object or door of colour and type `kind` on the map."""
    for cell, name in (*grid.objects.items(), *grid.doors.items()):
        if _kind_of(name) == kind:
            return cell, name
    raise _RefusedError(f"no {kind} on the map")


def _sees(cell: Cell) -> Callable[[Grid], bool]:
    """A `_walk` goal: `cell` is in view."""
    return lambda probe: cell in visible(probe)


def _reach(grid: Grid, plan: list[str], kind: str) -> None:
    """Cross doors into the room of the `kind` thing (a door: the room west of it), turn
    until it is seen and go to it."""
    cell, name = _find(grid, kind)
    while (here := (grid.agent[1] - 1) // 5) != (room := (cell[1] - 1) // 5):
        door = next(door for door in grid.doors if door[1] == 5 * (here + (room > here)))
        _walk(grid, plan, _sees(door))
        shut = grid.door_states[grid.doors[door]] != "open"
        _do(grid, plan, f"{'toggle and ' if shut else ''}go through {grid.doors[door]}")
    _walk(grid, plan, _sees(cell))
    if grid.front != cell:
        _do(grid, plan, f"go to {name}")


def _out_of_the_way(grid: Grid) -> bool:
    """Whether the cell in front is empty floor beside no door (a place to leave a key)."""
    return grid.empty_floor(grid.front) and not any(
        cell in grid.doors for cell in _neighbours(grid.front)
    )


def _unlock(grid: Grid, plan: list[str], door: str) -> None:
    """Fetch the key of the locked `door`, unlock it, and leave the key out of the way."""
    _reach(grid, plan, _kind_of(door).replace("door", "key"))
    _do(grid, plan, f"pick up {grid.objects[grid.front]}")
    _reach(grid, plan, _kind_of(door))
    _do(grid, plan, "toggle")
    _walk(grid, plan, _out_of_the_way)
    _do(grid, plan, "drop")


def solve(grid: Grid) -> list[str] | None:
    """Commands that complete `grid.mission` from `grid` (left unchanged), or `None`.

    A plan of sub-goals over the true map: for a put-next mission, first unlock every
    locked door; then reach each named thing (crossing doors on the way, turning until it
    is seen, going to it) and act on it; a put-next ends with a breadth-first walk to face
    an empty cell beside the other object, and a drop.
    """
    grid = grid.copy()
    plan: list[str] = []
    verb, target, other = grid.mission
    try:
        if verb == "put":
            for door in [door for door, state in grid.door_states.items() if state == "locked"]:
                _unlock(grid, plan, door)
        _reach(grid, plan, target)
        if verb in ("pick up", "put"):
            _do(grid, plan, f"pick up {grid.objects[grid.front]}")
        elif verb == "open":
            _do(grid, plan, "toggle")
        if verb == "put":
            _reach(grid, plan, other)
            beside = grid.front
            _walk(grid, plan, lambda g: g.empty_floor(g.front) and beside in _neighbours(g.front))
            _do(grid, plan, "drop")
    except _RefusedError:
        return None
    return plan if accomplished(grid) else None


# ----------------------------------------------------------------------------------- env


class GridWorldEnv(WorldEnv[Settings]):
    r"""A BabyAI-style grid of rooms; one command per turn in ``\boxed{}`` (module docstring).

    Args:
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"`` (`DIFFICULTIES`).

    Attributes:
        settings: This episode's `Settings`. grid: The world (`Grid`). solution: The
            commands `solve` found for this episode at reset.

    Raises:
        ValueError: unknown difficulty.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}
    grid: Grid

    def __init__(self, difficulty: str | None = None) -> None:
        super().__init__(difficulty, resolve_presets(difficulty, DIFFICULTIES, _DEFAULT))
        self.solution: list[str] = []

    def _apply_preset(self, preset: Settings) -> None:
        self.settings = preset
        self.max_turns = preset.max_turns

    def _generate(self) -> str:
        for _ in range(_TRIES):
            grid = generate(self.settings, self.np_random)
            plan = solve(grid)
            if plan and len(plan) <= self.max_turns:  # not done already, and doable
                break
        else:  # pragma: no cover - the presets are solvable in nearly every draw
            raise RuntimeError(f"GridWorldEnv: no solvable world in {_TRIES} draws")
        self.grid, self.solution = grid, plan
        rooms = self.settings.rooms
        layout = (
            "one room of 4x4 cells"
            if rooms == 1
            else (
                f"{rooms} rooms of 4x4 cells in a row, joined by doors (open, closed or locked; a "
                "locked door opens with a key of its colour)"
            )
        )
        return (
            f"GridWorld: {layout}. You see 6 cells ahead and "
            "3 to each side, not through walls or shut doors, and carry at most one object. "
            "Commands: turn left, turn right, move forward, go to <thing you see>, pick up "
            "<object in front>, drop, toggle (the door in front), go through <open door>, "
            f"toggle and go through <shut door>.\nYour mission: {self.grid.mission.text()}.\n"
            f"{describe(self.grid)}"
        )

    def _execute(self, command: str) -> Outcome:
        try:
            message = run_command(self.grid, command)
        except _RefusedError as refusal:
            return Outcome(str(refusal), valid=False)
        if accomplished(self.grid):
            text = f"{message} Mission complete: {self.grid.mission.text()}."
            return Outcome(text, reward=SOLVED_REWARD, done=True, correct=True)
        return Outcome(f"{message}\n{describe(self.grid)}")

    def available_actions(self) -> list[str]:
        """The commands admissible now (`admissible`); never empty (turns always are)."""
        return admissible(self.grid)

    def sample_random_action(self) -> str:
        r"""``\boxed{<admissible command>}`` from `np_random`, 1 time in 10 a malformed text."""
        if self.np_random.random() < 0.1:
            return _JUNK[self.np_random.integers(len(_JUNK))]
        actions = self.available_actions()
        return f"\\boxed{{{actions[self.np_random.integers(len(actions))]}}}"

    def _episode_state(self) -> dict[str, Any]:
        return {"grid": self.grid.to_state(), "solution": list(self.solution)}

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        self.grid = Grid.from_state(state["grid"])
        self.solution = list(state["solution"])
